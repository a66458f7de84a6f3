/* gnuplot for the commands that draw (predict, report): a script run in the run directory, its
 * output logged, and its plots kept only when whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

void bench_gnuplot_log_reset(const char *dir) {
  char log[4200];
  snprintf(log, sizeof log, "%s/gnuplot.log", dir);
  unlink(log);
}

/* Whether a plot file ends as a whole one does: a PNG with its IEND chunk, an SVG with its
 * closing tag. gnuplot exits 0 on a plot cut short by a full disk or a file size limit. */
static int bench_plot_whole(const char *path, int svg) {
  static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
  unsigned char tail[64];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = 0;
  if (fseek(f, -(long)sizeof tail, SEEK_END) != 0) rewind(f); /* a file shorter than the tail */
  n = fread(tail, 1, sizeof tail, f);
  fclose(f);
  if (!svg) return n >= sizeof iend && !memcmp(tail + n - sizeof iend, iend, sizeof iend);
  while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == ' ' || tail[n - 1] == '\r')) n--;
  return n >= 6 && !memcmp(tail + n - 6, "</svg>", 6);
}

/* STEM.png.tmp and STEM.svg.tmp in dir, renamed to STEM.png and .svg when gnuplot succeeded
 * and each is whole, else removed (and the first cut one named in err). 0: both renamed. */
static int bench_gnuplot_finish(const char *dir, const char *script, int ok, char *err, size_t cap) {
  static const char *const ext[] = {".png", ".svg"};
  size_t stem = strlen(script) > 3 ? strlen(script) - 3 : 0; /* less ".gp" */
  int rc = ok ? 0 : -1;
  for (int i = 0; i < 2; i++) {
    char tmp[4400], path[4200];
    snprintf(path, sizeof path, "%s/%.*s%s", dir, (int)stem, script, ext[i]);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (ok && !bench_plot_whole(tmp, i)) {
      if (!rc) snprintf(err, cap, "gnuplot left %s cut short (a full disk or a file size limit?)", path);
      rc = -1;
    }
    if (!rc && rename(tmp, path) != 0) {
      snprintf(err, cap, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
      rc = -1;
    }
    if (rc) unlink(tmp);
  }
  return rc;
}

int bench_gnuplot(const char *dir, const char *script, char *err, size_t cap) {
  /* gnuplot runs in the directory, so the script names its data and outputs plainly */
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, cap, "cannot start gnuplot: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(126);
    /* appended, each script's output under its name: a later plot must not wipe the text
     * that explains an earlier one's failure */
    int fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dprintf(fd, "# gnuplot %s\n", script);
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execlp("gnuplot", "gnuplot", script, (char *)NULL);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (bench_gnuplot_finish(dir, script, ok, err, cap) && ok) return -1;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
    snprintf(err, cap, "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox); the data and %s are in %s", script, dir);
    return -1;
  }
  if (!ok) {
    snprintf(err, cap, "gnuplot failed on %s/%s (see %s/gnuplot.log, after '# gnuplot %s')", dir, script, dir, script);
    return -1;
  }
  return 0;
}
