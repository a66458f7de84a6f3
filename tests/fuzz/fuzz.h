/* libFuzzer targets: each file defines LLVMFuzzerTestOneInput. Built with -fsanitize=fuzzer
 * (FABENCH_FUZZ=ON, clang) they fuzz; built otherwise they link replay_main.c and run the
 * committed corpus once, so every build replays the seeds and the regression inputs. */
#ifndef FABENCH_FUZZ_H
#define FABENCH_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* The input as a file a parser opens by its path, as the commands give it one (a memfd, nothing
 * on disk): its descriptor (close it after), path filled; -1 where none could be made. */
static inline int fuzz_file(const char *name, const uint8_t *data, size_t size, char *path, size_t cap) {
  int fd = memfd_create(name, 0);
  if (fd < 0) return -1;
  size_t w = 0;
  while (w < size) {
    ssize_t r = write(fd, data + w, size - w);
    if (r <= 0) break;
    w += (size_t)r;
  }
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

#endif
