/* Test support for the train command's tests: `fabench train ARGS` run in the test's directory
 * with its output captured, and the check of an exit status and a line of it. The including test
 * defines `static char dir[]` (where the runs go, with lsan.supp) and `static const char *bin`
 * (the fabench binary) before it includes this. */
#ifndef FABENCH_TEST_TRAIN_CLI_H
#define FABENCH_TEST_TRAIN_CLI_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

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

#endif
