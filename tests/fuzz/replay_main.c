/* Runs a fuzz target once on each file given, or on each file in each directory given (the
 * committed corpus), where libFuzzer is not linked: the regression inputs run in every build. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "test_util.h"

#define REPLAY_TIMEOUT_S 20

static int run_file(const char *path) {
  size_t n = 0;
  char *buf = tu_slurp(path, &n);
  if (!buf) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    return -1;
  }
  /* libFuzzer hands a buffer of exactly the input's size: so do we, for ASan's bounds */
  uint8_t *exact = malloc(n ? n : 1);
  if (exact) memcpy(exact, buf, n);
  free(buf);
  if (!exact) return -1;
  /* as libFuzzer's -timeout: an input that takes this long is a finding (SIGALRM ends us) */
  alarm(REPLAY_TIMEOUT_S);
  LLVMFuzzerTestOneInput(exact, n);
  alarm(0);
  free(exact);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  int runs = 0, bad = 0;
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad |= run_file(argv[i]) != 0;
      runs++;
      continue;
    }
    struct dirent **ents;
    int n = scandir(argv[i], &ents, NULL, NULL);
    if (n < 0) {
      fprintf(stderr, "replay: cannot list %s\n", argv[i]);
      return 1;
    }
    char **names = malloc((size_t)n * sizeof *names);
    int k = 0;
    for (int j = 0; j < n; j++) {
      if (ents[j]->d_name[0] != '.' && names) names[k++] = strdup(ents[j]->d_name);
      free(ents[j]);
    }
    free(ents);
    if (!names) return 1;
    qsort(names, (size_t)k, sizeof *names, by_name);
    for (int j = 0; j < k; j++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], names[j]);
      free(names[j]);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        bad |= run_file(path) != 0;
        runs++;
      }
    }
    free(names);
  }
  printf("replay: %d inputs, %s\n", runs, bad ? "some unreadable" : "no failure");
  return bad || runs == 0;
}
