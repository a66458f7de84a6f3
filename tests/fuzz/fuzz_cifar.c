/* CIFAR-10 binary batches, parsed from memory. Input: one byte k, then the rest split into
 * 1 + k % 3 files of equal length (the last takes the remainder). */
#include <string.h>

#include "fuzz.h"
#include "nn_data.h"

#define REC 3073

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int nf = 1 + data[0] % 3;
  data++;
  size--;
  const uint8_t *bufs[3];
  size_t lens[3];
  const char *names[3] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin"};
  size_t each = size / (size_t)nf, off = 0, records = 0;
  int whole = 1;
  for (int i = 0; i < nf; i++) {
    bufs[i] = data + off;
    lens[i] = i == nf - 1 ? size - off : each;
    off += lens[i];
    records += lens[i] / REC;
    whole &= lens[i] > 0 && lens[i] % REC == 0;
  }
  nn_dataset d;
  char err[512];
  err[0] = '\0';
  int rc = nn_data_parse_cifar(&d, bufs, lens, names, nf, err, sizeof err);
  FUZZ_SAY(rc, err);
  if (rc == 0) {
    FUZZ_CHECK(whole && (size_t)d.n == records && d.c == 3 && d.h == 32 && d.w == 32);
    /* record k of the concatenation: its label byte and its pixels, in order */
    size_t k = 0;
    for (int i = 0; i < nf; i++)
      for (size_t r = 0; r < lens[i] / REC; r++, k++) {
        FUZZ_CHECK(d.labels[k] == bufs[i][r * REC] && d.labels[k] < 10);
        FUZZ_CHECK(memcmp(d.pixels + k * (REC - 1), bufs[i] + r * REC + 1, REC - 1) == 0);
      }
    nn_data_free(&d);
  } else {
    FUZZ_CHECK(err[0] != '\0');
    FUZZ_CHECK(d.pixels == NULL && d.labels == NULL);
  }
  return 0;
}
