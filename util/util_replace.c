/* util: replacing a file whole (atomically), and the stop signals that wait for it. */
#include "util.h"
#include "util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A stop signal (SIGTERM, SIGINT, SIGHUP) that arrives during a replacement waits until the
 * rename, or until the new bytes are dropped if the new file had no name yet: the file is the
 * old one or the new one, and no .tmp is left. Masking it in the writing thread is not enough:
 * the kernel hands a process-directed signal to any thread that does not mask it (the
 * reducer's, UCX's, OpenMP's), so a handler defers it instead. The counters are process-wide,
 * as a signal is. */
static atomic_int util_writers;     /* replacements in progress */
static atomic_int util_pending_sig; /* a stop signal deferred by util_stop_handler, or 0 */

static void util_stop_now(int sig) {
  signal(sig, SIG_DFL);
  raise(sig); /* delivered when the handler returns, or at once outside one: the job's status
               * says which signal ended it, as without the handler */
}

static void util_stop_handler(int sig) {
  /* pending first, writers second, and the writer the other way round: one of the two sees
   * the other, so a signal is never lost between them */
  atomic_store(&util_pending_sig, sig);
  if (atomic_load(&util_writers) == 0) util_stop_now(sig);
}

int util_stop_signals_install(void) {
  const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    struct sigaction sa, old;
    if (sigaction(sigs[i], NULL, &old) != 0) return -1;
    if (old.sa_handler == SIG_IGN) continue; /* nohup and friends: leave ignored as asked */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = util_stop_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(sigs[i], &sa, NULL) != 0) return -1;
  }
  return 0;
}

/* A file for util_file_replace's bytes, before it has a name: an unnamed one in path's
 * directory (O_TMPFILE), which a process killed while writing (SIGKILL, a stopped rank that
 * its launcher kills) leaves nothing of; -1 where the filesystem has none. */
static int rf_open_unnamed(const char *path) {
  char dir[4200];
  return util_path_dir(dir, sizeof dir, path) ? -1 : open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
}

/* Names the unnamed file fd as tmp (a stale tmp of a killed writer is replaced). */
static int rf_link(int fd, const char *tmp) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  for (int again = 0; again < 2; again++) {
    if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != EEXIST || unlink(tmp) != 0) return -1;
  }
  return -1;
}

static int rf_write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) errno = EIO;
    if (k <= 0) return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

int util_file_replace(const char *path, const void *data, size_t n, char *err, size_t errcap) {
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    util_errf(err, errcap, "path too long: '%s'", path);
    return -1;
  }
  atomic_fetch_add(&util_writers, 1);
  int rc = -1, fd = rf_open_unnamed(path), unnamed = fd >= 0;
  if (!unnamed) fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    util_errf(err, errcap, "cannot create '%s': %s", tmp, strerror(errno));
    goto out;
  }
  /* on disk before the rename, so a crash leaves the old file or the new, never an empty one;
   * named only then, so that only a kill between the link and the rename leaves a tmp */
  int ok = rf_write_all(fd, data, n) == 0 && fsync(fd) == 0;
  /* A stop signal that came meanwhile drops the new bytes and keeps the old file: its sender
   * may follow it with SIGKILL within a millisecond (mpirun does, when a peer has died), and
   * that kill, landing between the name and the rename, would leave the name behind. */
  if (ok && atomic_load(&util_pending_sig)) {
    util_errf(err, errcap, "'%s' not replaced: the process is being stopped", path);
    close(fd);
    if (!unnamed) unlink(tmp);
    goto out;
  }
  if (ok && unnamed && rf_link(fd, tmp) != 0) { /* say so as a named one's open would */
    util_errf(err, errcap, "cannot create '%s': %s", tmp, strerror(errno));
    close(fd);
    goto out;
  }
  int named = ok || !unnamed, saved = ok ? 0 : errno; /* an unnamed one that failed has no name */
  /* renamed the moment it is named and closed after: a kill between the two leaves the name */
  int moved = ok && rename(tmp, path) == 0;
  if (ok && !moved) ok = 0, saved = errno;
  if (close(fd) != 0 && ok) ok = 0, saved = errno;
  if (!ok) {
    util_errf(err, errcap, "cannot write '%s': %s", path, strerror(saved));
    if (named && !moved) unlink(tmp);
    goto out;
  }
  rc = 0;
out:
  if (atomic_fetch_sub(&util_writers, 1) == 1) {
    int sig = atomic_load(&util_pending_sig);
    if (sig) util_stop_now(sig);
  }
  return rc;
}
