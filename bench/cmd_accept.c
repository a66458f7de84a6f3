/* fabench accept: judges a cluster against a rules file. Each rule's measurement runs as a
 * child fabench into a folder of the accept run directory (a failing rule with `repeat: K` is
 * measured again until it has K runs, judged on their median), or with --from is found among
 * run directories already measured; then the topology is checked, the suspects named, and the
 * verdicts written (accept_out.c). Exit status: 0 every rule passed, 1 a rule failed, 2 a usage
 * or rules error, 3 a measurement could not be made (before 1: the verdict is incomplete). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "accept.h"
#include "bench.h"
#include "launch.h"
#include "res.h"
#include "util.h"

enum { O_RULES = 256, O_FROM, O_EXCLUDE, O_TIMEOUT, O_OUT };

/* Every flag once: getopt_long's options, --help, and the default (set through the same parsing
 * as a given value). */
static const bench_flag accept_flags[] = {
    {"rules", "FILE", NULL, "the rules: each a measurement (a fabench command and its flags) and a threshold "
                            "(see docs/accept.md)", O_RULES},
    {"from", "DIR...", NULL, "judge these run directories (or an earlier accept run's), measuring nothing; "
                             "every argument after it is a directory", O_FROM},
    {"exclude", "HOSTLIST", NULL, "leave these hosts out of the judging and the naming (node[03,17])", O_EXCLUDE},
    {"run-timeout", "S", "3600", "seconds one measurement may take before it is stopped (1 to a week)", O_TIMEOUT},
    {"out", "DIR", NULL, "run directory (default: results/<UTC>-accept): accept.json, accept.xml (JUnit), "
                         "suspects.txt (a Slurm hostlist) and a folder per measurement", O_OUT},
};
#define ACCEPT_NFLAGS (sizeof accept_flags / sizeof accept_flags[0])

static const char *accept_usage(void) {
  static char *text; /* made once from the table; the process's for its life */
  if (!text)
    text = bench_flags_usage("usage: fabench accept --rules FILE [options]\n"
                             "exit status: 0 all rules pass, 1 a rule failed, 2 usage or rules error, 3 could not "
                             "measure\n",
                             accept_flags, ACCEPT_NFLAGS);
  return text ? text : "usage: fabench accept --rules FILE [options] (--help: out of memory)\n";
}

typedef struct {
  const char *rules, *exclude, *out;
  char **from;
  int nfrom;
  double run_timeout;
} accept_opts;

/* One flag's value (given, or its default). 0; 2 after a usage error; -1: not accept's own. */
static int accept_set(accept_opts *o, int ch, const char *v, const char **from) {
  switch (ch) {
  case O_RULES: o->rules = v; return 0;
  case O_EXCLUDE: o->exclude = v; return 0;
  case O_OUT: o->out = v; return 0;
  case O_TIMEOUT:
    if (bench_parse_double(v, 1, 7 * 24 * 3600.0, &o->run_timeout))
      return bench_usage_error(accept_usage(), "bad --run-timeout '%s' (seconds, 1 to a week)", v);
    return 0;
  case O_FROM:
    if (*from) return bench_usage_error(accept_usage(), "--from given twice (it takes every directory after it)");
    *from = v;
    return 0;
  default: return -1;
  }
}

static int accept_parse(accept_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  const char *from = NULL;
  for (size_t i = 0; i < ACCEPT_NFLAGS; i++) /* the defaults, as given values parse */
    if (accept_flags[i].def && accept_set(o, accept_flags[i].code, accept_flags[i].def, &from))
      return bench_error("internal: the default of --%s does not parse", accept_flags[i].name), 2;
  static const struct option extra[] = {{"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  struct option *longs = bench_flags_options(accept_flags, ACCEPT_NFLAGS, extra);
  if (!longs) return bench_error("out of memory"), 2;
  opterr = 0;
  optind = 1;
  int ch, rc = 0;
  while (!rc && (ch = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
    rc = accept_set(o, ch, optarg, &from);
    if (rc < 0) {
      int n = bench_flag_common(ch, argv, accept_usage());
      rc = n == 1 ? 1 : n ? n : 2;
    }
  }
  free(longs);
  if (rc) return rc;
  if (from) {
    /* --from's first directory is its value; the rest are the arguments getopt stopped at */
    o->nfrom = 1 + argc - optind;
    o->from = calloc((size_t)o->nfrom, sizeof *o->from);
    if (!o->from) return bench_error("out of memory"), 2;
    o->from[0] = (char *)from;
    for (int i = 1; i < o->nfrom; i++) o->from[i] = argv[optind + i - 1];
    for (int i = 0; i < o->nfrom; i++)
      if (o->from[i][0] == '-') return bench_usage_error(accept_usage(), "--from: '%s' is not a directory (--from comes last)", o->from[i]);
  } else if (optind < argc) {
    return bench_usage_error(accept_usage(), "unexpected argument '%s'", argv[optind]);
  }
  if (!o->rules) return bench_usage_error(accept_usage(), "--rules FILE is needed");
  return 0;
}

/* ---- --from: the directories of a rule ---- */

static int accept_is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int accept_has(const char *dir, const char *file) {
  char p[ACC_PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  return access(p, F_OK) == 0;
}

/* A flag of the launcher (-n, --emulate, --emulate-slow) that the ranks' run.json leaves out. */
static int accept_launcher_flag(const char *a) {
  return !strcmp(a, "-n") || !strcmp(a, "--ranks") || !strcmp(a, "--emulate") || !strcmp(a, "--emulate-slow");
}

/* Whether a run directory's run.json records the rule's command and flags (the launcher's
 * flags apart: ranks record their own argv). */
static int accept_run_matches(const acc_rule *r, const char *dir) {
  char p[ACC_PATH_MAX + 32];
  cJSON *o = NULL;
  snprintf(p, sizeof p, "%s/run.json", dir);
  if (util_json_read_file(p, &o, NULL, 0)) return 0;
  const cJSON *cmd = cJSON_GetObjectItem(o, "command"), *av = cJSON_GetObjectItem(o, "argv");
  int ok = cJSON_IsString(cmd) && !strcmp(cmd->valuestring, r->argv[0]) && cJSON_IsArray(av);
  for (int i = 1; ok && i < r->argc; i++) {
    if (accept_launcher_flag(r->argv[i])) {
      i++;
      continue;
    }
    int found = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, av) found |= cJSON_IsString(a) && !strcmp(a->valuestring, r->argv[i]);
    ok = found;
  }
  cJSON_Delete(o);
  return ok;
}

/* The rule's directories among --from's: DIR/<name> and its repeats (an accept run), else DIR
 * itself where its run.json records the rule's measurement. */
static void accept_find(const acc_rule *r, char *const *from, int nfrom, acc_result *res) {
  for (int i = 0; i < nfrom && res->ndirs < ACC_DIRS_MAX; i++) {
    char p[ACC_PATH_MAX];
    for (int k = 1; k <= ACC_REPEAT_MAX && res->ndirs < ACC_DIRS_MAX; k++) {
      if (k == 1) acc_say(p, sizeof p, "%s/%s", from[i], r->name);
      else acc_say(p, sizeof p, "%s/%s.r%d", from[i], r->name, k);
      if (!accept_is_dir(p)) break;
      snprintf(res->dirs[res->ndirs++], ACC_PATH_MAX, "%s", p);
    }
    int topo = !strcmp(r->argv[0], "topo");
    if (topo ? accept_has(from[i], "topo.json") && !accept_has(from[i], "run.json") : accept_run_matches(r, from[i]))
      snprintf(res->dirs[res->ndirs++], ACC_PATH_MAX, "%s", from[i]);
  }
}

/* ---- measuring ---- */

typedef struct {
  const accept_opts *o;
  char dir[ACC_PATH_MAX];
  char self[ACC_PATH_MAX];
  launch_sigs sg;
  int interrupted;
  int usage_error; /* a rule's run was refused by its command */
} accept_run;

/* One more measurement of a rule into the next free folder (<name>, <name>.r2, ...): an earlier
 * one is never overwritten. 0 with the folder added to res; -1 where it could not start. */
static int accept_measure(accept_run *x, const acc_rule *r, acc_result *res) {
  char sub[ACC_PATH_MAX], log[ACC_PATH_MAX + 8];
  for (int k = 1;; k++) {
    if (k == 1) acc_say(sub, sizeof sub, "%s/%s", x->dir, r->name);
    else acc_say(sub, sizeof sub, "%s/%s.r%d", x->dir, r->name, k);
    if (access(sub, F_OK) != 0) break;
  }
  acc_say(log, sizeof log, "%s.log", sub);
  char *args[ACC_ARGS_MAX + 4];
  int n = 0;
  for (int i = 0; i < r->argc; i++) args[n++] = r->argv[i];
  args[n++] = "--out";
  args[n++] = sub;
  args[n] = NULL;
  printf("# %s: fabench %s (%s)\n", r->name, r->run, log);
  fflush(stdout);
  double t0 = util_now();
  int st = bench_child_run(x->self, args, log, x->o->run_timeout, &x->sg.set, &x->sg.old, &x->interrupted);
  res->seconds += util_now() - t0;
  if (st == 2) { /* its command refused the flags: the rules' error, not the cluster's */
    bench_error("rule '%s' (%s line %d): 'fabench %s' was refused:", r->name, x->o->rules, r->line, r->run);
    bench_child_log_tail(log);
    x->usage_error = 1;
    return -1;
  }
  if (st != 0) {
    fprintf(stderr, "fabench: %s: exit status %d (judged on what it wrote; log %s)\n", r->name, st, log);
    bench_child_log_tail(log);
  }
  if (st < 0) return -1;
  if (res->ndirs < ACC_DIRS_MAX) snprintf(res->dirs[res->ndirs++], ACC_PATH_MAX, "%s", sub);
  return 0;
}

/* A suspect from a p2p rule measured alone: its pair of ranks with the rule's flags (--pairs
 * S,D instead of the rule's), into <rule>.alone-S-D. Confirmed (1) where that pair's figure is
 * still beyond the bound the naming held it to, its evidence then saying so; 0: not confirmed
 * (said on stdout); -1: the retest could not be made (the suspect stays, said). */
static int accept_retest(accept_run *x, const acc_ctx *c, const acc_rules *rules, acc_suspect *s) {
  const acc_rule *r = NULL;
  for (int i = 0; i < rules->n; i++)
    if (!strcmp(rules->rules[i].name, s->rule)) r = &rules->rules[i];
  if (!r || s->pair_src < 0 || s->pair_dst < 0) return -1;
  acc_rule alone = *r;
  char pair[32], sub[ACC_PATH_MAX], log[ACC_PATH_MAX + 8];
  snprintf(pair, sizeof pair, "%d,%d", s->pair_src, s->pair_dst);
  alone.argc = 0;
  for (int i = 0; i < r->argc; i++) {
    if (!strcmp(r->argv[i], "--pairs")) {
      i++;
      continue;
    }
    if (strncmp(r->argv[i], "--pairs=", 8)) alone.argv[alone.argc++] = r->argv[i];
  }
  if (alone.argc + 5 > ACC_ARGS_MAX) return -1;
  acc_say(sub, sizeof sub, "%s/%s.alone-%d-%d", x->dir, r->name, s->pair_src, s->pair_dst);
  acc_say(log, sizeof log, "%s.log", sub);
  char *args[ACC_ARGS_MAX + 4];
  int n = 0;
  for (int i = 0; i < alone.argc; i++) args[n++] = alone.argv[i];
  args[n++] = "--pairs";
  args[n++] = pair;
  args[n++] = "--out";
  args[n++] = sub;
  args[n] = NULL;
  printf("# %s: retesting %s alone: ranks %s\n", r->name, s->link[0] ? s->link : s->host, pair);
  fflush(stdout);
  int st = bench_child_run(x->self, args, log, x->o->run_timeout, &x->sg.set, &x->sg.old, &x->interrupted);
  acc_pts p = {0};
  char why[ACC_TEXT_MAX];
  alone.ref = ACC_REF_ABS;
  double v = NAN;
  if (st >= 0 && st != 2 && !acc_dir_points(c, &alone, sub, NULL, &p, why, sizeof why))
    for (int i = 0; i < p.n; i++)
      if (p.pt[i].src_rank == s->pair_src && p.pt[i].dst_rank == s->pair_dst) v = p.pt[i].value;
  acc_pts_free(&p);
  if (!isfinite(v)) {
    printf("# %s: the retest alone gave no figure (%s); named on the rounds' figures\n", r->name, log);
    return -1;
  }
  double ratio = v / s->median;
  int beyond = s->higher_worse ? v - s->median > s->limit : s->median - v > s->limit;
  size_t len = strlen(s->evidence);
  acc_say(s->evidence + len, sizeof s->evidence - len, "; alone %d->%d: %.2f of the median", s->pair_src, s->pair_dst, ratio);
  if (!beyond) printf("# not named: %s (%s)\n", s->evidence, "the pair alone is within the others' spread");
  return beyond;
}

/* Whether a measured rule's rows name a suspect (p2p rules only). */
static int accept_names(const acc_ctx *c, const acc_result *res) {
  acc_suspect *sus = NULL;
  int n = 0;
  acc_name_suspects(c, res, 1, &sus, &n);
  free(sus);
  return n > 0;
}

/* ---- the verdict ---- */

static int accept_status(const acc_result *res, int nres) {
  int fail = 0, error = 0;
  for (int i = 0; i < nres; i++) fail |= !res[i].pass && !res[i].error, error |= res[i].error;
  return error ? 3 : fail ? 1 : 0;
}

static int accept_main(const accept_opts *o, const acc_rules *rules, acc_ctx *c) {
  accept_run x;
  memset(&x, 0, sizeof x);
  x.o = o;
  char err[ACC_PATH_MAX + 256];
  if (res_run_dir(x.dir, sizeof x.dir, o->out, "accept", err, sizeof err)) return bench_error("%s", err), 3;
  ssize_t sl = readlink("/proc/self/exe", x.self, sizeof x.self - 1);
  if (sl <= 0) return bench_error("cannot find this binary (/proc/self/exe)"), 3;
  x.self[sl] = '\0';
  int nres = rules->n;
  acc_result *res = calloc((size_t)nres + 1, sizeof *res);
  acc_suspect *sus = NULL;
  int nsus = 0;
  if (!res) return bench_error("out of memory"), 3;
  double t0 = util_now();
  if (!o->from) launch_sigs_take(&x.sg); /* signals go to the running measurement */
  for (int i = 0; i < nres && !x.interrupted && !x.usage_error; i++) {
    const acc_rule *r = &rules->rules[i];
    res[i].rule = r;
    if (o->from) {
      accept_find(r, o->from, o->nfrom, &res[i]);
      acc_judge_rule(c, &res[i]);
      if (res[i].ndirs == 0)
        acc_say(res[i].evidence, sizeof res[i].evidence, "no run directory among --from's measured '%s'", r->run);
      continue;
    }
    accept_measure(&x, r, &res[i]);
    acc_judge_rule(c, &res[i]);
    /* repeat: a failing rule, or one whose rows name a suspect, gets its K runs and is judged
     * (and names) on their median */
    while ((!res[i].pass || accept_names(c, &res[i])) && !res[i].error && res[i].measured && res[i].ndirs < r->repeat &&
           !x.interrupted && !x.usage_error && accept_measure(&x, r, &res[i]) == 0)
      acc_judge_rule(c, &res[i]);
  }
  if (!o->from) launch_sigs_restore(&x.sg);
  int rc;
  if (x.usage_error) {
    rc = 2;
  } else if (x.interrupted) {
    bench_error("interrupted: the measurements so far are in %s", x.dir);
    rc = 128 + x.interrupted;
  } else {
    acc_judge_topology(c, res, nres, &res[nres], &sus, &nsus);
    acc_name_suspects(c, res, nres, &sus, &nsus);
    acc_name_stragglers(res, nres, &sus, &nsus);
    /* measured suspects are retested alone before they are named */
    if (!o->from) launch_sigs_take(&x.sg);
    for (int k = 0; !o->from && k < nsus && !x.interrupted; k++)
      if (sus[k].pair_src >= 0 && accept_retest(&x, c, rules, &sus[k]) == 0) sus[k--] = sus[--nsus];
    if (!o->from) launch_sigs_restore(&x.sg);
    acc_suspects_sort(sus, nsus);
    res[nres].seconds = 0;
    rc = accept_status(res, nres + 1);
    acc_print(res, nres + 1, sus, nsus);
    if (acc_write(x.dir, rules, res, nres + 1, sus, nsus, rc, util_now() - t0, err, sizeof err)) {
      bench_error("%s", err);
      rc = rc ? rc : 3;
    }
    printf("# %s: %s (%.1f s); accept.json, accept.xml, suspects.txt in %s\n", rc == 0 ? "PASS" : rc == 1 ? "FAIL" : "ERROR",
           rc == 0 ? "every rule passed" : rc == 1 ? "a rule failed" : "a measurement could not be made", util_now() - t0,
           x.dir);
    if (bench_stdout_check("accept") && rc == 0) rc = 3;
  }
  free(res);
  free(sus);
  return rc;
}

static int accept_checked(const accept_opts *o0);

int bench_cmd_accept(int argc, char **argv) {
  accept_opts o;
  int prc = accept_parse(&o, argc, argv);
  if (prc) {
    free(o.from);
    return prc == 1 ? 0 : prc;
  }
  int rc = accept_checked(&o);
  free(o.from);
  return rc;
}

/* After the flags: the --from directories, the rules, the excluded hosts. */
static int accept_checked(const accept_opts *o0) {
  const accept_opts o = *o0;
  for (int i = 0; i < o.nfrom; i++)
    if (!accept_is_dir(o.from[i])) return bench_usage_error(accept_usage(), "--from: '%s' is not a directory", o.from[i]);
  acc_rules rules;
  char err[ACC_PATH_MAX + 600];
  if (acc_rules_load(&rules, o.rules, err, sizeof err)) {
    fprintf(stderr, "fabench accept: %s\n", err);
    return 2;
  }
  acc_ctx c = {.rules = &rules};
  int rc;
  if (o.exclude) {
    c.nexclude = acc_hostlist_expand(o.exclude, &c.exclude, err, sizeof err);
    if (c.nexclude < 0) {
      acc_rules_free(&rules);
      return bench_usage_error(accept_usage(), "--exclude: %s", err);
    }
  }
  rc = accept_main(&o, &rules, &c);
  acc_hostlist_free(c.exclude, c.nexclude > 0 ? c.nexclude : 0);
  acc_rules_free(&rules);
  return rc;
}
