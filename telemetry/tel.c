/* telemetry: the sampler thread, the marks around a measurement, and the CSV of raw counters
 * (one row per counter and reading: time_s, host, label, source, counter, value). Readings,
 * marks and writes take one lock, so the thread and the marks never read or write at once. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tel_int.h"

struct tel {
  tel_opts o;     /* the caller's; its strings are read at tel_start only (csv_path: csv below) */
  char *csv;      /* the CSV's path, for the message of a failed write */
  char host[256], label[64];
  tel_src src;
  tel_nvml *nvml;
  int fd;         /* the CSV, -1: none (or given up after a failed write) */
  off_t good;     /* its length up to the last whole reading */
  char *out;      /* a reading's rows */
  size_t outcap, outlen;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  int have_thread, stop, marked;
  tel_snap *work, *begin, *end;
  long samples;
  double cpu_s, t0;
  char error[256];
};

static double tel_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Text for a CSV field: commas, quotes and line ends become spaces. */
static void tel_clean(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
  for (char *p = dst; *p; p++)
    if (*p == ',' || *p == '"' || *p == '\n' || *p == '\r') *p = ' ';
}

/* One row: the reading's "time_s,host,label," (pre), then source, counter and value. */
static void tel_row(tel *h, const char *pre, const char *source, const char *counter, uint64_t v) {
  for (;;) {
    size_t room = h->outcap - h->outlen;
    int n = snprintf(h->out + h->outlen, room, "%s%s,%s,%" PRIu64 "\n", pre, source, counter, v);
    if (n < 0) return;
    if ((size_t)n < room) {
      h->outlen += (size_t)n;
      return;
    }
    char *nb = realloc(h->out, 2 * h->outcap + (size_t)n);
    if (!nb) return; /* the row is lost, not the run */
    h->out = nb;
    h->outcap = 2 * h->outcap + (size_t)n;
  }
}

/* A reading's rows, written with one write: a crash leaves whole readings, a full disk cuts
 * the file back to them and stops the CSV (said once). */
static void tel_write(tel *h, const tel_snap *s) {
  static const char *const cpu_names[] = {"user_ms", "system_ms", "softirq_ms", "idle_ms"};
  static const char *const link_names[TEL_LINK_N] = {"rx_bytes", "tx_bytes", "rx_packets",
                                                     "tx_packets", "rx_drops", "tx_drops"};
  static const char *const tcp_names[TEL_TCP_N] = {"retrans_segs", "out_segs", "timeouts", "lost_retransmit"};
  static const char *const gpu_names[TEL_GPU_N] = {"util_pct", "mem_util_pct", "mem_used_bytes",
                                                   "nvlink_tx_kib", "nvlink_rx_kib"};
  if (h->fd < 0) return;
  h->outlen = 0;
  char src[96], pre[400];
  snprintf(pre, sizeof pre, "%.3f,%s,%s,", s->wall, h->host, h->label);
  for (int i = 0; s->have_cpu && i <= s->ncpu; i++) {
    if (i == 0) snprintf(src, sizeof src, "cpu");
    else snprintf(src, sizeof src, "cpu%d", s->cpu[i].num);
    for (int k = 0; k < 4; k++) tel_row(h, pre, src, cpu_names[k], s->cpu[i].ms[k]);
  }
  for (int i = 0; i < s->nlink; i++)
    for (int k = 0; k < TEL_LINK_N; k++) tel_row(h, pre, s->link[i].name, link_names[k], s->link[i].v[k]);
  for (int k = 0; k < TEL_TCP_N; k++)
    if (s->have_tcp[k]) tel_row(h, pre, "tcp", tcp_names[k], s->tcp[k]);
  for (int i = 0; i < s->ngpu; i++) {
    snprintf(src, sizeof src, "gpu%d", i);
    for (int k = 0; k < TEL_GPU_N; k++)
      if (s->gpu[i].have[k]) tel_row(h, pre, src, gpu_names[k], s->gpu[i].v[k]);
  }
  size_t done = 0;
  while (done < h->outlen) {
    ssize_t w = write(h->fd, h->out + done, h->outlen - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      int cut = ftruncate(h->fd, h->good); /* back to whole readings; if not, what is there stays */
      (void)cut;
      if (!h->error[0])
        snprintf(h->error, sizeof h->error, "telemetry: cannot write '%s': %s; the readings before are intact",
                 h->csv ? h->csv : "", strerror(e));
      close(h->fd);
      h->fd = -1;
      return;
    }
    done += (size_t)w;
  }
  h->good += (off_t)h->outlen;
}

/* Every counter now into s (the lock held). 0, or -1 with err. */
static int tel_read(tel *h, tel_snap *s, char *err, size_t errcap) {
  int rc = tel_read_kernel(&h->src, s, err, errcap);
  tel_nvml_read(h->nvml, s);
  return rc;
}

static void *tel_thread(void *arg) {
  tel *h = arg;
  double period = 1.0 / h->o.hz, next = tel_mono();
  pthread_mutex_lock(&h->lock);
  while (!h->stop) {
    double now = tel_mono();
    if (now < next) {
      struct timespec ts = {.tv_sec = (time_t)next, .tv_nsec = (long)((next - (double)(time_t)next) * 1e9)};
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&h->cond, &h->lock, &ts);
      continue; /* woken: stop, or the time */
    }
    char err[256] = "";
    if (tel_read(h, h->work, err, sizeof err) && !h->error[0]) snprintf(h->error, sizeof h->error, "%s", err);
    tel_write(h, h->work);
    h->samples++;
    next += period;
    if (next < now) next = now + period; /* a tick missed (a stopped process): no burst after it */
  }
  pthread_mutex_unlock(&h->lock);
  struct timespec cpu;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) h->cpu_s = (double)cpu.tv_sec + 1e-9 * (double)cpu.tv_nsec;
  return NULL;
}

static void tel_free(tel *h) {
  if (h->fd >= 0) close(h->fd);
  tel_nvml_close(h->nvml);
  tel_src_free(&h->src);
  pthread_cond_destroy(&h->cond);
  pthread_mutex_destroy(&h->lock);
  free(h->csv);
  free(h->out);
  free(h->work);
  free(h->begin);
  free(h->end);
  free(h);
}

int tel_start(tel **out, const tel_opts *o, char *err, size_t errcap) {
  *out = NULL;
  if (!o || !(o->hz >= 0) || o->hz > 1000) {
    snprintf(err, errcap, "telemetry: a rate of %g Hz (0 to 1000)", o ? o->hz : 0.0);
    return -1;
  }
  tel *h = calloc(1, sizeof *h);
  if (!h) return snprintf(err, errcap, "telemetry: out of memory"), -1;
  h->o = *o;
  h->fd = -1;
  h->t0 = tel_mono();
  pthread_mutex_init(&h->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cond, &ca);
  pthread_condattr_destroy(&ca);
  char host[256] = "";
  if (o->host) snprintf(host, sizeof host, "%s", o->host);
  else gethostname(host, sizeof host - 1);
  tel_clean(h->host, sizeof h->host, host);
  tel_src_init(&h->src, o->root);
  h->outcap = 1 << 16;
  h->out = malloc(h->outcap);
  h->work = malloc(sizeof *h->work);
  h->begin = malloc(sizeof *h->begin);
  h->end = malloc(sizeof *h->end);
  h->csv = o->csv_path ? strdup(o->csv_path) : NULL;
  h->o.csv_path = h->o.root = h->o.host = h->o.nvml = NULL; /* the caller's: gone after this call */
  if (!h->out || !h->work || !h->begin || !h->end || !h->src.buf || (o->csv_path && !h->csv)) {
    tel_free(h);
    return snprintf(err, errcap, "telemetry: out of memory"), -1;
  }
  if (o->csv_path) {
    static const char head[] = "time_s,host,label,source,counter,value\n";
    h->fd = open(o->csv_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (h->fd < 0 || write(h->fd, head, sizeof head - 1) != (ssize_t)(sizeof head - 1)) {
      snprintf(err, errcap, "telemetry: cannot create '%s': %s", o->csv_path, strerror(errno));
      tel_free(h);
      return -1;
    }
    h->good = (off_t)(sizeof head - 1);
  }
  h->nvml = tel_nvml_open(o->nvml);
  if (o->hz > 0) {
    if (pthread_create(&h->thread, NULL, tel_thread, h)) {
      snprintf(err, errcap, "telemetry: cannot start the sampler thread");
      tel_free(h);
      return -1;
    }
    h->have_thread = 1;
  }
  *out = h;
  return 0;
}

int tel_mark_begin(tel *h, const char *label, char *err, size_t errcap) {
  pthread_mutex_lock(&h->lock);
  tel_clean(h->label, sizeof h->label, label);
  int rc = tel_read(h, h->begin, err, errcap);
  tel_write(h, h->begin);
  h->marked = 1;
  pthread_mutex_unlock(&h->lock);
  return rc;
}

int tel_mark_end(tel *h, tel_summary *s, char *err, size_t errcap) {
  pthread_mutex_lock(&h->lock);
  if (!h->marked) {
    pthread_mutex_unlock(&h->lock);
    snprintf(err, errcap, "telemetry: tel_mark_end without tel_mark_begin");
    return -1;
  }
  int rc = tel_read(h, h->end, err, errcap);
  tel_write(h, h->end);
  memcpy(s->label, h->label, sizeof s->label);
  tel_summarise(h->begin, h->end, &h->o, s);
  h->label[0] = '\0';
  h->marked = 0;
  pthread_mutex_unlock(&h->lock);
  return rc;
}

void tel_stop(tel *h, tel_stats *st) {
  if (st) memset(st, 0, sizeof *st);
  if (!h) return;
  if (h->have_thread) {
    pthread_mutex_lock(&h->lock);
    h->stop = 1;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
  }
  if (st) {
    st->samples = h->samples;
    st->cpu_s = h->cpu_s;
    st->wall_s = tel_mono() - h->t0;
    snprintf(st->error, sizeof st->error, "%s", h->error);
  }
  tel_free(h);
}
