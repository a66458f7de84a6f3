/* libFuzzer targets: each file defines LLVMFuzzerTestOneInput. Built with -fsanitize=fuzzer
 * (FABENCH_FUZZ=ON, clang) they fuzz; built otherwise they link replay_main.c and run the
 * committed corpus once, so every build replays the seeds and the regression inputs. */
#ifndef FABENCH_FUZZ_H
#define FABENCH_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional, once before the first input (libFuzzer's contract; replay_main.c calls it too). */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* An invariant of the code under test failed: crash, so the fuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);       \
      abort();                                                                           \
    }                                                                                    \
  } while (0)

/* FABENCH_FUZZ_VERBOSE=1: say what each input came to (to check that seeds reach deep). */
#define FUZZ_SAY(rc, msg)                                                                \
  do {                                                                                   \
    if (getenv("FABENCH_FUZZ_VERBOSE"))                                                  \
      fprintf(stderr, "%s: %s%s\n", __FILE__, (rc) == 0 ? "accepted" : "refused: ",      \
              (rc) == 0 ? "" : (msg));                                                   \
  } while (0)

#endif
