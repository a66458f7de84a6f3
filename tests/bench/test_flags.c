/* The flag tables' parser (bench/flags.c, bench_flags_parse): defaults through the same setter
 * as given values, the --quick defaults only where a flag is not given, a repeatable flag's
 * values in order, positional arguments, and the usage errors' statuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <string.h>

#include "bench.h"

enum { O_SIZE = 256, O_NAME, O_ADD, O_QUICK, O_LIST };

static const bench_flag tf_flags[] = {
    {"n", "N", "2", "a count", 'n'},
    {"size", "SIZE", "1K", "a size", O_SIZE},
    {"name", "NAME", "big", "a word", O_NAME},
    {"add", "DIR", NULL, "a directory (repeatable)", O_ADD},
    {"list", "LIST", "a,b,c", "a list", O_LIST},
    {"quick", NULL, NULL, "smaller", O_QUICK},
};
static const bench_flag_alt tf_quick[] = {{O_SIZE, "64"}, {O_NAME, "small"}, {0, NULL}};
static const bench_flags_cmd tf_cmd = {"usage: fabench tf [options] DIR...\n", tf_flags,
                                       sizeof tf_flags / sizeof *tf_flags, "tail\n", "quick", tf_quick};

typedef struct {
  long n;
  uint64_t size;
  const char *name, *add[4];
  char *items[4], *store;
  int nadd, nitems, quick, defaults, given;
} tf_opts;

static int tf_set(void *ctx, int code, const char *val, int given) {
  tf_opts *o = ctx;
  o->defaults += !given, o->given += given;
  switch (code) {
  case 'n':
    if (bench_parse_int(val, 1, 9, &o->n)) return bench_usage_error(bench_flags_help(&tf_cmd), "-n: '%s'", val);
    break;
  case O_SIZE:
    if (bench_parse_size(val, &o->size)) return bench_usage_error(bench_flags_help(&tf_cmd), "--size: '%s'", val);
    break;
  case O_NAME: o->name = val; break;
  case O_ADD: o->add[o->nadd++] = val; break;
  case O_LIST: return bench_flags_list(bench_flags_help(&tf_cmd), "--list", val, o->items, 4, &o->nitems, &o->store);
  case O_QUICK: o->quick = 1; break;
  }
  return 0;
}

/* Parses the NULL-ended args after "tf" into o: bench_flags_parse's status; *first the first
 * positional (-1 where first is not asked for). */
static int tf_parse(tf_opts *o, int want_first, int *first, char **args) {
  char *argv[16] = {"tf"};
  int argc = 1;
  while (args[argc - 1]) argv[argc] = args[argc - 1], argc++;
  free(o->store);
  memset(o, 0, sizeof *o);
  *first = -1;
  return bench_flags_parse(&tf_cmd, argc, argv, tf_set, o, want_first ? first : NULL);
}

static void test_defaults_and_given(void **st) {
  (void)st;
  tf_opts o = {0};
  int first;
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){NULL}), 0);
  assert_int_equal(o.n, 2);
  assert_int_equal(o.size, 1024);
  assert_string_equal(o.name, "big");
  assert_int_equal(o.nitems, 3);
  assert_int_equal(o.defaults, 4); /* n, size, name, list: those with a default and a value */
  assert_int_equal(o.given, 0);
  /* given values replace the defaults; a repeatable flag keeps each; a list given replaces its own */
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"-n", "5", "--size", "4K", "--add", "x", "--add", "y",
                                                       "--list", "p,q", NULL}),
                   0);
  assert_int_equal(o.n, 5);
  assert_int_equal(o.size, 4096);
  assert_int_equal(o.nadd, 2);
  assert_string_equal(o.add[0], "x");
  assert_string_equal(o.add[1], "y");
  assert_int_equal(o.nitems, 2);
  assert_string_equal(o.items[1], "q");
  assert_int_equal(o.given, 5);
  free(o.store);
}

static void test_quick(void **st) {
  (void)st;
  tf_opts o = {0};
  int first;
  /* --quick switches the defaults of the flags not given, wherever it stands */
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--name", "mine", "--quick", NULL}), 0);
  assert_int_equal(o.quick, 1);
  assert_int_equal(o.size, 64);
  assert_string_equal(o.name, "mine");
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--size", "8", "--quick", NULL}), 0);
  assert_int_equal(o.size, 8);
  assert_string_equal(o.name, "small");
  /* the usage shows both defaults */
  const char *u = bench_flags_help(&tf_cmd);
  assert_non_null(strstr(u, "(default: 1K; --quick: 64)"));
  assert_non_null(strstr(u, "(default: big; --quick: small)"));
  assert_non_null(strstr(u, "  -n N "));
  assert_non_null(strstr(u, "  --add DIR "));
  assert_non_null(strstr(u, "usage: fabench tf [options] DIR...\n"));
  assert_non_null(strstr(u, "\ntail\n"));
  free(o.store);
}

static void test_positional_and_errors(void **st) {
  (void)st;
  tf_opts o = {0};
  int first;
  /* positional arguments, wherever they stand, come last */
  assert_int_equal(tf_parse(&o, 1, &first, (char *[]){"d1", "--name", "w", "d2", NULL}), 0);
  assert_int_equal(first, 3);
  assert_string_equal(o.name, "w");
  assert_int_equal(tf_parse(&o, 1, &first, (char *[]){"--name", "w", NULL}), 0);
  assert_int_equal(first, 3); /* none */
  /* not taken: a usage error */
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"d1", NULL}), 2);
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--bogus", NULL}), 2);
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--size", NULL}), 2);
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"-n", "0", NULL}), 2);
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--size", "1.5M", "--quick", NULL}), 2);
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--list", "a,,b", NULL}), 2);
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--quick=1", NULL}), 2);
  /* --help: 1, the usage on stdout */
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"--help", NULL}), 1);
  assert_int_equal(tf_parse(&o, 0, &first, (char *[]){"-h", NULL}), 1);
  free(o.store);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_and_given),
      cmocka_unit_test(test_quick),
      cmocka_unit_test(test_positional_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
