/* fabench train: --trace, the measured steps as a Chrome trace (Perfetto, chrome://tracing). */
#include <stdio.h>

#include "train_internal.h"
#include "util.h"

/* Chrome trace events ("X" spans in microseconds): one process per rank and pair, a thread for
 * compute and one for communication. Only gathered here: the file is rewritten after the pair's
 * row is written (train_write_trace), so a trace that cannot be written loses no row. */
int train_on_trace(void *ctx, const nn_trace_ev *ev, size_t n) {
  train_ctx *x = ctx;
  if (!x->trace && !(x->trace = cJSON_CreateArray())) return bench_error("out of memory");
  for (int r = 0; r < x->ranks; r++) {
    int pid = 1000 * x->role_index + r;
    char pname[96];
    snprintf(pname, sizeof pname, "%s %s/%s rank %d", train_role_names[x->pair->role], x->pair->tname,
             x->pair->aname, r);
    const char *tn[2] = {"training", "communication"};
    for (int t = -1; t < 2; t++) {
      cJSON *m = cJSON_CreateObject();
      cJSON_AddStringToObject(m, "name", t < 0 ? "process_name" : "thread_name");
      cJSON_AddStringToObject(m, "ph", "M");
      cJSON_AddNumberToObject(m, "pid", pid);
      cJSON_AddNumberToObject(m, "tid", t < 0 ? 0 : t);
      cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "args"), "name", t < 0 ? pname : tn[t]);
      cJSON_AddItemToArray(x->trace, m);
    }
  }
  for (size_t i = 0; i < n; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", ev[i].name);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "pid", 1000 * x->role_index + ev[i].rank);
    cJSON_AddNumberToObject(e, "tid", ev[i].tid);
    cJSON_AddNumberToObject(e, "ts", 1e6 * ev[i].ts_s);
    cJSON_AddNumberToObject(e, "dur", 1e6 * ev[i].dur_s);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(e, "args"), "step", (double)ev[i].step);
    cJSON_AddItemToArray(x->trace, e);
  }
  return 0;
}

/* The trace so far into --trace (rank 0, after each pair's row). 0, or -1 after saying why. */
int train_write_trace(train_ctx *x) {
  if (!x->a->trace || !x->trace) return 0;
  cJSON *doc = cJSON_CreateObject();
  if (!doc) return bench_error("out of memory");
  cJSON_AddItemReferenceToObject(doc, "traceEvents", x->trace);
  cJSON_AddStringToObject(doc, "displayTimeUnit", "ms");
  char err[512];
  int rc = util_json_write_file(x->a->trace, doc, err, sizeof err);
  cJSON_Delete(doc);
  return rc ? bench_error("--trace: %s", err) : 0;
}
