/* `fabench accept --rules FILE`: a YAML rules file, read by libyaml and then checked key by key
 * (accept_rules.c). The input is the file's text, written to a memfd and read by its path as the
 * command reads it. A file is read whole or refused with its line; nothing it holds may crash. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "accept.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64], err[1024];
  int fd = fuzz_file("fuzz-accept.yaml", data, size, path, sizeof path);
  if (fd < 0) return 0;
  acc_rules r;
  memset(&r, 0, sizeof r);
  err[0] = '\0';
  int rc = acc_rules_load(&r, path, err, sizeof err);
  FUZZ_CHECK(rc == 0 || rc == -1);
  if (rc) {
    FUZZ_CHECK(err[0] != '\0'); /* a refusal says why */
  } else {
    for (int i = 0; i < r.n; i++) { /* a rule read is whole */
      FUZZ_CHECK(r.rules[i].argc >= 1 && r.rules[i].argv[0] != NULL);
      FUZZ_CHECK(r.rules[i].repeat >= 1);
    }
  }
  FUZZ_SAY(rc, err);
  acc_rules_free(&r);
  close(fd);
  return 0;
}
