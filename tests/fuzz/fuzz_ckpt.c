/* Checkpoints, verified and decoded from memory. Input: one control byte, then the file. When
 * the control byte is odd the harness rewrites the trailing crc32 to match, so the fuzzer gets
 * past the checksum to the header's fields and lengths. */
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "nn_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int fix_crc = data[0] & 1;
  data++;
  size--;
  uint8_t *p = malloc(size ? size : 1);
  if (!p) return 0;
  memcpy(p, data, size);
  if (fix_crc && size >= 4) {
    uint32_t c = (uint32_t)crc32_z(0L, p, size - 4);
    for (int i = 0; i < 4; i++) p[size - 4 + i] = (uint8_t)(c >> (8 * i));
  }
  nn_ckpt_info info;
  char why[256];
  why[0] = '\0';
  int rc = nn_ckpt_parse(&info, p, size, why, sizeof why);
  FUZZ_SAY(rc, why);
  if (rc == 0) {
    uint64_t nf = info.n_params + info.n_momentum + info.n_buffers;
    FUZZ_CHECK(size == 512 + 4 * nf + 4);
    FUZZ_CHECK(strnlen(info.model, sizeof info.model) < sizeof info.model);
    FUZZ_CHECK(strnlen(info.data, sizeof info.data) < sizeof info.data);
    char err[512];
    FUZZ_CHECK(nn_ckpt_check(&info, &info, err, sizeof err) == 0);
    nn_ckpt_info other = info;
    other.n_buffers++;
    FUZZ_CHECK(nn_ckpt_check(&info, &other, err, sizeof err) != 0);
  } else {
    FUZZ_CHECK(why[0] != '\0');
  }
  free(p);
  return 0;
}
