/* IDX (Fashion-MNIST) images and labels, parsed from memory. Input: a 2-byte little-endian
 * length L, then the images file (L bytes, or what is left), then the labels file. */
#include <string.h>

#include "fuzz.h"
#include "nn_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t l = (size_t)data[0] | (size_t)data[1] << 8;
  data += 2;
  size -= 2;
  if (l > size) l = size;
  uint8_t *img = malloc(l ? l : 1); /* the parser takes it */
  if (!img) return 0;
  memcpy(img, data, l);
  nn_dataset d;
  char err[512];
  err[0] = '\0';
  int rc = nn_data_parse_idx(&d, img, l, data + l, size - l, "images", "labels", err, sizeof err);
  FUZZ_SAY(rc, err);
  if (rc == 0) {
    /* accepted: the shape accounts for every byte, and every label is a class */
    FUZZ_CHECK(d.n > 0 && d.c == 1 && d.h > 0 && d.w > 0);
    FUZZ_CHECK(16 + (size_t)d.n * (size_t)d.h * (size_t)d.w == l);
    FUZZ_CHECK(8 + (size_t)d.n == size - l);
    for (int64_t i = 0; i < d.n; i++) FUZZ_CHECK(d.labels[i] >= 0 && d.labels[i] < d.classes);
    FUZZ_CHECK(memcmp(d.pixels, data + 16, (size_t)d.n * (size_t)d.h * (size_t)d.w) == 0);
    nn_data_free(&d);
  } else {
    FUZZ_CHECK(err[0] != '\0' && strlen(err) < sizeof err);
    FUZZ_CHECK(d.pixels == NULL && d.labels == NULL);
  }
  return 0;
}
