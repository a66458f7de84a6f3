/* Test support for the train command's tests: `fabench train ARGS` run in the test's directory
 * with its output captured, and the check of an exit status and a line of it. The including test
 * defines `static char dir[]` (where the runs go, with lsan.supp) and `static const char *bin`
 * (the fabench binary) before it includes this. */
#ifndef FABENCH_TEST_TRAIN_CLI_H
#define FABENCH_TEST_TRAIN_CLI_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "test_util.h" /* tu_tmpdir, tu_write, tu_rmtree */

/* Runs `fabench train ARGS` (stdout+stderr into out); returns the exit status. hwloc's plugins
 * leak inside hwloc_topology_load (the run directory's topology, not train's code): suppressed
 * by name, with the slow unwinder that can walk through the unloaded plugin, so that
 * LeakSanitizer still checks everything else in the child. */
static int train(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int train(char *out, size_t cap, const char *fmt, ...) {
  char args[4096], cmd[4800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd,
           "cd '%s' && ASAN_OPTIONS=\"fast_unwind_on_malloc=0:$ASAN_OPTIONS\" "
           "LSAN_OPTIONS=\"suppressions=%s/lsan.supp:$LSAN_OPTIONS\" '%s' train %s 2>&1",
           dir, dir, bin, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  while (fgetc(p) != EOF) {
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void expect(int rc, const char *out, int want_rc, const char *want) {
  if (rc != want_rc || !strstr(out, want))
    fail_msg("exit %d (want %d), output lacks '%s':\n%s", rc, want_rc, want, out);
}

/* The tests' directory (its name's prefix) with the lsan.supp the runs read, and the binary: 0,
 * or -1 (cmocka's setup failing). */
static int train_cli_setup(const char *prefix) {
  bin = getenv("FABENCH_BIN");
  if (!tu_tmpdir(dir, sizeof dir, prefix)) return -1;
  return tu_write(dir, "lsan.supp", "leak:hwloc_topology_load\n");
}

static int train_cli_teardown(void **state) {
  (void)state;
  return tu_rmtree(dir);
}

/* 1 where ctest gave the binary; else says so (the tests then pass as skipped). */
static int train_cli_have_bin(void) {
  if (getenv("FABENCH_BIN")) return 1;
  fprintf(stderr, "FABENCH_BIN is not set (ctest sets it); skipping\n");
  return 0;
}

#endif
