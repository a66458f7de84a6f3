/* Every command's flags against its --help, through the fabench binary (FABENCH_BIN): the flags
 * listed here (the reference, written apart from the commands' tables) are exactly the option
 * lines of --help, every --flag that --help mentions is one of them, and each is taken by the
 * parser: given with a value that is no value ("x", or one it takes) and then an unknown flag,
 * the command exits 2 naming either the flag (its value refused) or the unknown flag (it went
 * past it), never the flag as unknown. A flag dropped from a table, or listed in --help but not
 * parsed, fails here; a flag added to a command is added to its list here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"

typedef struct {
  const char *cmd;
  const char *flags[80]; /* its flags, NULL-ended */
  const char *foreign;   /* a --flag its help names as another command's (NULL: none) */
  const char *alias[2];  /* a flag and the one its errors name ("--ranks", "-n") */
} cmd_flags;

static const cmd_flags cmds[] = {
    {"fit", {"--out", "--min-bytes", "--cores", "--check", "--check-out", "--repeat", "--model", "--gamma-kernel",
             "--no-gamma-kernel", "--formulas-only", NULL}, "--beside-compute", {NULL, NULL}},
    {"predict", {"--model", "--profile", "--images-per-s-rank", "--batch", "--ranks", "--ranks-per-node", "--intra",
                 "--inter", "--cores", "--threads", "--algo", "--bucket-mb", "--first-bucket-mb", "--no-overlap",
                 "--target-eff", "--no-plot", "--out", NULL}, NULL, {NULL, NULL}},
    {"report", {"--out", "--no-plot", NULL}, NULL, {NULL, NULL}},
    {"suite", {"-n", "--ranks", "--transport", "--algo", "--emulate", "--model", "--data", "--batch", "--steps",
               "--rounds", "--threads", "--quick", "--timeout", "--out", "--resume", NULL}, NULL, {"--ranks", "-n"}},
    {"topo", {"--json", "--xml", "--input", "--synthetic", "--sysfs-root", "--nvml", "--no-nvml", "--out", NULL},
     NULL, {NULL, NULL}},
    {"validate", {"--quick", "--rates", "--nodes", "--ranks-per-node", "--algo", "--model", "--train-rates",
                  "--train-max-nodes", "--data", "--batch", "--steps", "--rounds", "--repeat", "--no-repeat", "--no-measure", "--timeout",
                  "--out", NULL}, NULL, {NULL, NULL}},
    {"allreduce",
     {"-n", "--transport", "--algo", "--dtype", "--op", "--min-bytes", "--max-bytes",
     "--step-factor", "--warmup", "--iters", "--time-per-size", "--peer", "--rounds",
     "--beside-compute", "--timing", "--check", "--no-check", "--chunk", "--no-spin",
     "--tcp-streams", "--tcp-cc", "--ucx-map", "--devices", "--mpirun-args", "--emulate",
     "--emulate-slow", "--intra-transport", "--bind", "--seed", "--timeout", "--model-from",
     "--telemetry-hz", "--pairs", "--nodes", "--out", NULL},
     NULL, {NULL, NULL}},
    {"reducescatter",
     {"-n", "--transport", "--algo", "--dtype", "--op", "--min-bytes", "--max-bytes",
     "--step-factor", "--warmup", "--iters", "--time-per-size", "--peer", "--rounds",
     "--beside-compute", "--timing", "--check", "--no-check", "--chunk", "--no-spin",
     "--tcp-streams", "--tcp-cc", "--ucx-map", "--mpirun-args", "--emulate", "--emulate-slow",
     "--bind", "--seed", "--timeout", "--model-from", "--telemetry-hz", "--out", NULL},
     NULL, {NULL, NULL}},
    {"allgather",
     {"-n", "--transport", "--algo", "--dtype", "--min-bytes", "--max-bytes", "--step-factor",
     "--warmup", "--iters", "--time-per-size", "--peer", "--rounds", "--beside-compute", "--timing",
     "--check", "--no-check", "--chunk", "--no-spin", "--tcp-streams", "--tcp-cc", "--ucx-map",
     "--mpirun-args", "--emulate", "--emulate-slow", "--bind", "--seed", "--timeout",
     "--model-from", "--telemetry-hz", "--out", NULL},
     NULL, {NULL, NULL}},
    {"bcast",
     {"-n", "--transport", "--algo", "--dtype", "--root", "--min-bytes", "--max-bytes",
     "--step-factor", "--warmup", "--iters", "--time-per-size", "--peer", "--rounds",
     "--beside-compute", "--timing", "--check", "--no-check", "--chunk", "--no-spin",
     "--tcp-streams", "--tcp-cc", "--ucx-map", "--mpirun-args", "--emulate", "--emulate-slow",
     "--bind", "--seed", "--timeout", "--model-from", "--telemetry-hz", "--out", NULL},
     NULL, {NULL, NULL}},
    {"alltoall",
     {"-n", "--transport", "--algo", "--dtype", "--imbalance", "--min-bytes", "--max-bytes",
     "--step-factor", "--warmup", "--iters", "--time-per-size", "--peer", "--rounds",
     "--beside-compute", "--timing", "--check", "--no-check", "--chunk", "--no-spin",
     "--tcp-streams", "--tcp-cc", "--ucx-map", "--mpirun-args", "--emulate", "--emulate-slow",
     "--bind", "--seed", "--timeout", "--model-from", "--telemetry-hz", "--out", NULL},
     NULL, {NULL, NULL}},
    {"p2p",
     {"-n", "--transport", "--pairs", "--tests", "--min-bytes", "--max-bytes", "--step-factor",
     "--iters", "--time-per-size", "--warmup", "--window", "--matrix-bytes", "--tcp-streams",
     "--tcp-cc", "--timeout", "--telemetry-hz", "--emulate", "--emulate-slow", "--bind",
     "--mpirun-args", "--intra-transport", "--out", NULL},
     NULL, {NULL, NULL}},
    {"train",
     {"-n", "--transport", "--algo", "--no-single", "--rounds", "--bucket-mb", "--first-bucket-mb",
     "--no-overlap", "--overlap-step", "--grad-dtype", "--dp", "--check-every", "--emulate",
     "--emulate-slow", "--intra-transport", "--mpirun-args", "--chunk", "--bind", "--timeout",
     "--telemetry-hz", "--trace", "--trace-steps", "--device", "--precision", "--cudnn-search",
     "--gpu", "--model-from", "--link", "--model", "--data", "--batch", "--epochs", "--steps",
     "--warmup-steps", "--lr", "--optimizer", "--momentum", "--wd", "--weight-decay", "--nesterov",
     "--beta1", "--beta2", "--eps", "--lr-schedule", "--warmup-epochs", "--lr-milestones",
     "--lr-gamma", "--ref-batch", "--threads", "--seed", "--no-augment", "--crop-pad",
     "--eval-every", "--target-acc", "--no-stop-at-target", "--save", "--save-format", "--resume", "--log-every",
     "--prefetch", "--loader-workers", "--cold-cache", "--out", "--mode", "--parts",
     "--recovery-epochs", "--no-compare", NULL},
     NULL, {NULL, NULL}},
    {"accept",
     {"--rules", "--from", "--exclude", "--run-timeout", "--out", NULL},
     NULL, {NULL, NULL}},
};

static int listed(const cmd_flags *c, const char *flag) {
  for (int i = 0; c->flags[i]; i++)
    if (!strcmp(c->flags[i], flag)) return 1;
  return 0;
}

/* Whether s holds flag as a whole word (not the start of a longer flag, "--ranks" in
 * "--ranks-per-node": getopt_long takes an abbreviation). */
static int has_flag(const char *s, const char *flag) {
  size_t n = strlen(flag);
  for (const char *p = strstr(s, flag); p; p = strstr(p + 1, flag)) {
    char after = p[n];
    int before_ok = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '-');
    if (before_ok && !(isalnum((unsigned char)after) || after == '-')) return 1;
  }
  return 0;
}

/* The flag of an option line ("  --name ARG  help", "  -n N ..."), its value's name in *arg
 * (NULL: none); NULL where the line is no option line. */
static const char *option_line(const char *line, char *flag, size_t cap, int *takes_value) {
  if (strncmp(line, "  -", 3)) return NULL;
  size_t k = strcspn(line + 2, " \n");
  if (k + 1 > cap) return NULL;
  memcpy(flag, line + 2, k);
  flag[k] = '\0';
  const char *rest = line + 2 + k;
  /* a value's name follows after one space; the help after two or on the next line */
  *takes_value = rest[0] == ' ' && rest[1] && rest[1] != ' ' && rest[1] != '\n';
  return flag;
}

static void check_command(const cmd_flags *c) {
  run_result *r = calloc(1, sizeof *r);
  assert_non_null(r);
  cli_run(r, 30, c->cmd, NULL, -1, NULL, (char *[]){"--help", NULL});
  if (r->status != 0 || strncmp(r->out, "usage: fabench ", 15)) fail_msg("%s --help: exit %d\n%s", c->cmd, r->status, r->err);
  char *help = strdup(r->out);
  assert_non_null(help);
  /* the option lines: exactly the listed flags, each once */
  int seen[80] = {0};
  char flag[64];
  int value[80] = {0};
  for (char *line = help; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    int tv = 0;
    if (!option_line(line, flag, sizeof flag, &tv)) continue;
    int i = 0;
    while (c->flags[i] && strcmp(c->flags[i], flag)) i++;
    if (!c->flags[i]) fail_msg("%s --help lists %s, which this test does not know", c->cmd, flag);
    if (seen[i]++) fail_msg("%s --help lists %s twice", c->cmd, flag);
    value[i] = tv;
  }
  for (int i = 0; c->flags[i]; i++)
    if (!seen[i]) fail_msg("%s --help does not list %s", c->cmd, c->flags[i]);
  /* every --flag it mentions anywhere is one of them (or another command's, said) */
  for (const char *p = strstr(help, "--"); p; p = strstr(p + 2, "--")) {
    size_t k = 2;
    while (isalnum((unsigned char)p[k]) || p[k] == '-') k++;
    if (k == 2) continue;
    snprintf(flag, sizeof flag, "%.*s", (int)k, p);
    if (!listed(c, flag) && !(c->foreign && !strcmp(flag, c->foreign)))
      fail_msg("%s --help mentions %s, which it does not list", c->cmd, flag);
  }
  /* each is parsed: with a value "x" where it takes one, then an unknown flag */
  for (int i = 0; c->flags[i]; i++) {
    char *args[4] = {(char *)c->flags[i], NULL, NULL, NULL};
    args[value[i] ? 2 : 1] = "--zz-no-such-flag";
    if (value[i]) args[1] = "x";
    cli_run(r, 30, c->cmd, NULL, -1, NULL, args);
    const char *nl = strchr(r->err, '\n');
    char first[1024];
    snprintf(first, sizeof first, "%.*s", nl ? (int)(nl - r->err) : (int)strlen(r->err), r->err);
    char self_unknown[96];
    snprintf(self_unknown, sizeof self_unknown, "unknown option '%s", c->flags[i]);
    int went_past = strstr(first, "unknown option '--zz-no-such-flag'") != NULL;
    /* its value refused, the flag not named (p2p's --tests says "unknown test 'x'") */
    int took_value = value[i] && strstr(first, "'x'") && !strstr(first, "unexpected argument");
    if (r->status != 2 || strncmp(first, "fabench: ", 9) || strstr(first, self_unknown) ||
        !(went_past || took_value || has_flag(first, c->flags[i]) ||
          (c->alias[0] && !strcmp(c->alias[0], c->flags[i]) && has_flag(first, c->alias[1]))))
      fail_msg("%s %s%s --zz-no-such-flag: exit %d, first line: %s", c->cmd, c->flags[i], value[i] ? " x" : "",
               r->status, first);
    if (!strstr(r->err, "usage: fabench")) fail_msg("%s %s: no usage after the error", c->cmd, c->flags[i]);
  }
  free(help);
  free(r);
}

static void test_commands(void **st) {
  (void)st;
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) check_command(&cmds[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_commands)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
