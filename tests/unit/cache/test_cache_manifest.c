/*
 * The warm-up manifest (issue 15): a run records every kernel it looks
 * up, and jitk_cache_warm compiles them into another cache, so that the
 * same run there compiles nothing. Damaged lines, kernels that no longer
 * compile and files that cannot be read or written are each reported and
 * lose nothing.
 */
#include <fcntl.h>
#include <sys/wait.h>
#include <xxhash.h>

#include "cache_common.h"

/* A compile-only sm_90 engine on cache `dir` (NULL: the cache off)
 * recording into `record` (may be NULL). */
static jitk_engine *recorder(const char *dir, const char *record, const char *arch, jt_log *log) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = arch ? arch : "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = dir ? JITK_CACHE_ON : JITK_CACHE_OFF;
  cfg.cache_record = record;
  cfg.log_fn = jt_log_fn;
  cfg.log_user = log;
  cfg.log_level = JITK_LOG_INFO;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "engine: %s", jitk_errmsg(NULL));
  return e;
}

static char *path_in(const char *dir, const char *name) {
  char *p = malloc(strlen(dir) + strlen(name) + 2);
  sprintf(p, "%s/%s", dir, name);
  return p;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *d = malloc((size_t)len + 1);
  cr_assert_eq(fread(d, 1, (size_t)len, f), (size_t)len);
  d[len] = '\0';
  fclose(f);
  if (n) *n = (size_t)len;
  return d;
}

static size_t count_lines(const char *path) {
  char *d = slurp(path, NULL);
  size_t n = 0;
  for (char *p = d; *p; p++) n += *p == '\n';
  free(d);
  return n;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

/* Every kind the cache serves: raw modules with options, headers and name
 * expressions, elementwise kernels of two dtypes, a reduction. Returns
 * how many lookups the engine's cache saw. */
static void make_kernels(jitk_engine *e) {
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_module_destroy(jt_kernel(e, 2));
  const char *src =
      "#include \"v.cuh\"\n"
      "template <typename T> __global__ void tk(T *p) { *p = (T)(V + X); }\n";
  const char *opts[] = {"-DX=3"};
  const char *names[] = {"tk<int>", "tk<float>"};
  jitk_header h = {"v.cuh", "#define V 7\n"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = 1;
  o.name_expressions = names;
  o.num_name_expressions = 2;
  o.headers = &h;
  o.num_headers = 1;
  o.program_name = "templated.cu";
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  jitk_module_destroy(m);
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "add", NULL, &k));
  JT_OK(e, jitk_elementwise_compile(k, "T=float32", NULL, NULL, NULL));
  JT_OK(e, jitk_elementwise_compile(k, "T=float16", NULL, NULL, NULL));
  jitk_elementwise_destroy(k);
  jitk_reduction *r = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x * x", "a + b", "y = a", "0", NULL, "sumsq",
                                 NULL, &r));
  JT_OK(e, jitk_reduction_compile(r, "T=float32", NULL, NULL, NULL));
  jitk_reduction_destroy(r);
}

static jitk_cache_warm_report warm(jitk_engine *e, const char *manifest) {
  jitk_cache_warm_report rep;
  memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep;
  JT_OK(e, jitk_cache_warm(e, manifest, NULL, &rep));
  return rep;
}

Test(cache_manifest, a_recorded_run_warms_a_fresh_cache_for_the_same_run) {
  char *work = jt_tmpdir();
  char *a = path_in(work, "a"), *b = path_in(work, "b"), *man = path_in(work, "m.jsonl");
  jitk_engine *e = recorder(a, man, NULL, NULL);
  make_kernels(e);
  jitk_cache_stats s = jt_stats_mine(e);
  jitk_engine_destroy(e);
  size_t kernels = (size_t)s.compiles;
  cr_assert_geq(kernels, 6);
  cr_assert_eq(count_lines(man), kernels, "one line per kernel looked up");
  struct stat st;
  cr_assert_eq(stat(man, &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0600, "the manifest holds sources: its owner's alone");

  /* A second run finds them all on disk, and records them again. */
  e = recorder(a, man, NULL, NULL);
  make_kernels(e);
  cr_assert_eq(jt_stats_mine(e).compiles, 0);
  jitk_engine_destroy(e);
  cr_assert_eq(count_lines(man), 2 * kernels);

  /* Warming a fresh cache compiles each kernel once. */
  e = recorder(b, NULL, NULL, NULL);
  jitk_cache_warm_report rep = warm(e, man);
  cr_assert_eq(rep.lines, 2 * kernels);
  cr_assert_eq(rep.duplicates, kernels);
  cr_assert_eq(rep.kernels, kernels);
  cr_assert_eq(rep.compiled, kernels);
  cr_assert_eq(rep.failed + rep.damaged + rep.other_targets, 0);
  cr_assert_geq(rep.seconds, 0.0);
  jitk_engine_destroy(e);

  /* The same run on the warmed cache compiles nothing. */
  e = recorder(b, NULL, NULL, NULL);
  make_kernels(e);
  s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 0, "the warmed cache missed %llu kernels",
               (unsigned long long)s.compiles);
  cr_assert_eq(s.disk_hits, kernels);
  /* Warming it again finds everything. */
  rep = warm(e, man);
  cr_assert_eq(rep.compiled, 0);
  cr_assert_eq(rep.kernels, kernels);
  jitk_engine_destroy(e);
  free(a);
  free(b);
  free(man);
  jt_rmdir(work);
}

/* The line's check, recomputed over a changed line, as a newer jitk
 * would write it. */
static char *resign(const char *line) {
  const char *tag = strstr(line, ",\"check\":\"");
  cr_assert_not_null(tag);
  size_t body = (size_t)(tag - line);
  char *out = malloc(body + 64);
  memcpy(out, line, body);
  sprintf(out + body, ",\"check\":\"%016llx\"}\n", (unsigned long long)XXH3_64bits(line, body));
  return out;
}

static char *replace(const char *s, const char *from, const char *to) {
  const char *at = strstr(s, from);
  cr_assert_not_null(at, "%s not in %s", from, s);
  char *out = malloc(strlen(s) - strlen(from) + strlen(to) + 1);
  size_t pre = (size_t)(at - s);
  memcpy(out, s, pre);
  strcpy(out + pre, to);
  strcat(out, at + strlen(from));
  return out;
}

Test(cache_manifest, damaged_lines_are_skipped_and_the_others_warm) {
  char *work = jt_tmpdir();
  char *man = path_in(work, "m.jsonl"), *bad = path_in(work, "bad.jsonl");
  char *b = path_in(work, "b");
  jitk_engine *e = recorder(NULL, man, NULL, NULL);
  for (int i = 1; i <= 3; i++) jitk_module_destroy(jt_kernel(e, i));
  jitk_engine_destroy(e);
  char *all = slurp(man, NULL);
  char *l1 = strtok(all, "\n"), *l2 = strtok(NULL, "\n"), *l3 = strtok(NULL, "\n");
  cr_assert(l1 && l2 && l3);

  FILE *f = fopen(bad, "w");
  fprintf(f, "%s\n", l1);                        /* 1: fine */
  fprintf(f, "%.*s\n", (int)strlen(l2) / 2, l2); /* 2: cut short */
  char *flipped = strdup(l2);
  char *x = strstr(flipped, "* 3.0f");
  cr_assert_not_null(x);
  x[2] = '4';
  fprintf(f, "%s\n", flipped);   /* 3: edited */
  fprintf(f, "hello world\n\n"); /* 4: not a record, then an empty line */
  char *edits[3] = {replace(l2, "\"jitk_manifest\":1", "\"jitk_manifest\":2"),
                    replace(l2, "\"arch_specific\"", "\"colour\":\"red\",\"arch_specific\""),
                    replace(l2, "extern", "\\u0000extern")};
  char *newer = resign(edits[0]);
  fputs(newer, f); /* 6: a newer format */
  char *unknown = resign(edits[1]);
  fputs(unknown, f); /* 7: a field this jitk does not know */
  char *nul = resign(edits[2]);
  fputs(nul, f);            /* 8: a NUL inside the source */
  fprintf(f, "%s\r\n", l3); /* 9: fine, with a CRLF ending */
  fprintf(f, "%s", l1);     /* 10: a duplicate, without a newline at the end */
  fclose(f);
  for (int i = 0; i < 3; i++) free(edits[i]);

  jt_log log;
  memset(&log, 0, sizeof log);
  e = recorder(b, NULL, NULL, &log);
  jitk_cache_warm_report rep = warm(e, bad);
  cr_assert_eq(rep.lines, 9);
  cr_assert_eq(rep.damaged, 6, "damaged: %zu", rep.damaged);
  cr_assert_eq(rep.duplicates, 1);
  cr_assert_eq(rep.kernels, 2);
  cr_assert_eq(rep.compiled, 2);
  cr_assert_eq(rep.failed, 0);
  cr_assert_eq(log.warnings, 6, "one warning per damaged line");
  /* The last one names its line and why. */
  cr_assert(strstr(log.last_warning, "bad.jsonl:8") != NULL, "%s", log.last_warning);
  cr_assert(strstr(log.last_warning, "NUL") != NULL, "%s", log.last_warning);
  jitk_engine_destroy(e);
  free(all);
  free(flipped);
  free(newer);
  free(unknown);
  free(nul);
  free(man);
  free(bad);
  free(b);
  jt_rmdir(work);
}

typedef struct progress_seen {
  size_t calls, last_finished, last_total, last_failed;
  bool monotonic;
} progress_seen;

static void on_progress(void *user, size_t finished, size_t total, size_t failed) {
  progress_seen *p = user;
  if (finished < p->last_finished || failed < p->last_failed) p->monotonic = false;
  p->calls++;
  p->last_finished = finished;
  p->last_total = total;
  p->last_failed = failed;
}

Test(cache_manifest, a_kernel_that_no_longer_compiles_is_reported_and_the_rest_warm) {
  char *work = jt_tmpdir();
  cr_assert_eq(chdir(work), 0);
  cr_assert_eq(mkdir("inc", 0755), 0);
  put("inc/h.cuh", "#define VALUE 5\n");
  jitk_engine *e = recorder(NULL, "m.jsonl", NULL, NULL);
  const char *opts[] = {"-Iinc"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = 1;
  o.program_name = "uses_h.cu";
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(
               e, "#include \"h.cuh\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n",
               &o, &m));
  jitk_module_destroy(m);
  for (int i = 1; i <= 4; i++) jitk_module_destroy(jt_kernel(e, i));
  jitk_engine_destroy(e);
  /* The header the first kernel includes changes under it. */
  put("inc/h.cuh", "#define VALUE this is not C++\n");

  jt_log log;
  memset(&log, 0, sizeof log);
  e = recorder("cache", NULL, NULL, &log);
  jitk_cache_warm_options opt;
  JT_OK(e, jitk_cache_warm_options_init(&opt));
  progress_seen seen = {0, 0, 0, 0, true};
  opt.progress = on_progress;
  opt.progress_user = &seen;
  opt.threads = 2;
  jitk_cache_warm_report rep;
  memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep;
  JT_OK(e, jitk_cache_warm(e, "m.jsonl", &opt, &rep));
  cr_assert_eq(rep.kernels, 5);
  cr_assert_eq(rep.failed, 1);
  cr_assert_eq(rep.compiled, 4);
  cr_assert_eq(log.warnings, 1);
  cr_assert(strstr(log.last_warning, "m.jsonl:1 (uses_h.cu") != NULL, "%s", log.last_warning);
  cr_assert(strstr(log.last_warning, "does not compile now") != NULL, "%s", log.last_warning);
  cr_assert_eq(seen.calls, 5);
  cr_assert(seen.monotonic);
  cr_assert_eq(seen.last_finished, 5);
  cr_assert_eq(seen.last_total, 5);
  cr_assert_eq(seen.last_failed, 1);
  /* The four that compiled are in the cache. */
  cr_assert_eq(jt_stats_all(e).entries, 4);
  jitk_engine_destroy(e);
  jt_rmdir(work);
}

/* A job's manifest repeats each kernel once per process: 300 copies of
 * each line, interleaved, warm each kernel once (and the table of the
 * lines' checks grows on the way). */
Test(cache_manifest, many_repeats_warm_each_kernel_once) {
  char *work = jt_tmpdir();
  char *a = path_in(work, "a"), *b = path_in(work, "b"), *man = path_in(work, "m.jsonl"),
       *big = path_in(work, "big.jsonl");
  jitk_engine *e = recorder(a, man, NULL, NULL);
  make_kernels(e);
  jitk_engine_destroy(e);
  size_t len = 0, kernels = count_lines(man);
  char *text = slurp(man, &len);
  FILE *f = fopen(big, "w");
  cr_assert_not_null(f);
  for (int r = 0; r < 300; r++) cr_assert_eq(fwrite(text, 1, len, f), len);
  fclose(f);
  free(text);
  e = recorder(b, NULL, NULL, NULL);
  jitk_cache_warm_report rep = warm(e, big);
  cr_assert_eq(rep.lines, 300 * kernels);
  cr_assert_eq(rep.duplicates, 299 * kernels);
  cr_assert_eq(rep.kernels, kernels);
  cr_assert_eq(rep.compiled, kernels);
  jitk_engine_destroy(e);
  free(a);
  free(b);
  free(man);
  free(big);
  jt_rmdir(work);
}

Test(cache_manifest, kernels_of_other_targets_are_counted_and_left_alone) {
  char *work = jt_tmpdir();
  char *man = path_in(work, "m.jsonl");
  jitk_engine *e = recorder(NULL, man, "sm_90", NULL);
  for (int i = 1; i <= 3; i++) jitk_module_destroy(jt_kernel(e, i));
  jitk_engine_destroy(e);
  e = recorder(NULL, NULL, "sm_80", NULL);
  jitk_cache_warm_report rep = warm(e, man);
  cr_assert_eq(rep.other_targets, 3);
  cr_assert_eq(rep.kernels, 0);
  cr_assert_eq(rep.compiled, 0);
  jitk_engine_destroy(e);
  free(man);
  jt_rmdir(work);
}

Test(cache_manifest, bad_arguments_and_unreadable_files) {
  char *work = jt_tmpdir();
  char *missing = path_in(work, "missing.jsonl"), *empty = path_in(work, "empty.jsonl");
  put(empty, "");
  jitk_engine *e = recorder(NULL, NULL, NULL, NULL);
  JT_FAILS(e, JITK_ERR_IO, "missing.jsonl", jitk_cache_warm(e, missing, NULL, NULL));
  JT_FAILS(e, JITK_ERR_IO, "not a regular file", jitk_cache_warm(e, work, NULL, NULL));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "path is NULL", jitk_cache_warm(e, NULL, NULL, NULL));
  jitk_cache_warm_options opt;
  memset(&opt, 0, sizeof opt);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_warm_options_init",
           jitk_cache_warm(e, empty, &opt, NULL));
  JT_OK(e, jitk_cache_warm_options_init(&opt));
  opt.threads = -1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "threads", jitk_cache_warm(e, empty, &opt, NULL));
  jitk_cache_warm_report rep;
  memset(&rep, 0, sizeof rep);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "sizeof(jitk_cache_warm_report)",
           jitk_cache_warm(e, empty, NULL, &rep));
  rep = warm(e, empty);
  cr_assert_eq(rep.lines + rep.kernels + rep.compiled, 0);
  jitk_engine_destroy(e);
  cr_assert_eq(jitk_cache_warm(NULL, empty, NULL, NULL), JITK_ERR_INVALID_ARGUMENT);
  free(missing);
  free(empty);
  jt_rmdir(work);
}

Test(cache_manifest, a_manifest_that_cannot_be_written_is_one_warning) {
  char *work = jt_tmpdir();
  char *man = path_in(work, "no/such/folder/m.jsonl");
  jt_log log;
  memset(&log, 0, sizeof log);
  jitk_engine *e = recorder(NULL, man, NULL, &log);
  for (int i = 1; i <= 3; i++) jitk_module_destroy(jt_kernel(e, i));
  cr_assert_eq(jt_stats_mine(e).compiles, 3, "every kernel still compiles");
  cr_assert_eq(log.warnings, 1);
  cr_assert(strstr(log.last_warning, "m.jsonl") != NULL, "%s", log.last_warning);
  jitk_engine_destroy(e);
  free(man);
  jt_rmdir(work);
}

/* A FIFO named as the manifest to warm from or to record into is refused
 * at once: opening one waits for its other end, which may never come, and
 * a write into a full pipe blocks. The alarm turns a hang into a
 * failure. */
Test(cache_manifest, fifos_are_refused_without_waiting) {
  alarm(60);
  char *work = jt_tmpdir();
  char *fifo = path_in(work, "fifo.jsonl");
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  jt_log log;
  memset(&log, 0, sizeof log);
  jitk_engine *e = recorder(NULL, fifo, NULL, &log);
  JT_FAILS(e, JITK_ERR_IO, "not a regular file", jitk_cache_warm(e, fifo, NULL, NULL));
  /* Nobody reads it. */
  for (int i = 1; i <= 2; i++) jitk_module_destroy(jt_kernel(e, i));
  cr_assert_eq(jt_stats_mine(e).compiles, 2, "every kernel still compiles");
  cr_assert_eq(log.warnings, 1);
  cr_assert(strstr(log.last_warning, "not a regular file") != NULL, "%s", log.last_warning);
  jitk_engine_destroy(e);
  /* Somebody reads it: still not written. */
  int rd = open(fifo, O_RDONLY | O_NONBLOCK);
  cr_assert_geq(rd, 0);
  memset(&log, 0, sizeof log);
  e = recorder(NULL, fifo, NULL, &log);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(log.warnings, 1);
  cr_assert(strstr(log.last_warning, "not a regular file") != NULL, "%s", log.last_warning);
  jitk_engine_destroy(e);
  char buf[16];
  cr_assert_leq(read(rd, buf, sizeof buf), 0, "a line went into the FIFO");
  close(rd);
  free(fifo);
  jt_rmdir(work);
}

Test(cache_manifest, processes_recording_into_one_file_write_whole_lines) {
  char *work = jt_tmpdir();
  char *man = path_in(work, "m.jsonl");
  enum { PROCS = 4, EACH = 6 };
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    pids[p] = fork();
    cr_assert_geq(pids[p], 0);
    if (pids[p] == 0) {
      jitk_engine_config cfg;
      jitk_engine_config_init(&cfg);
      cfg.device = JITK_DEVICE_NONE;
      cfg.arch = "sm_90";
      cfg.cache_mode = JITK_CACHE_OFF;
      cfg.cache_record = man;
      jitk_engine *e = NULL;
      if (jitk_engine_create(&cfg, &e) != JITK_OK) _exit(2);
      for (int i = 0; i < EACH; i++) {
        char src[512];
        jt_kernel_source(100 * p + i, src, sizeof src);
        jitk_module *m = NULL;
        if (jitk_module_create(e, src, NULL, &m) != JITK_OK) _exit(3);
        jitk_module_destroy(m);
      }
      jitk_engine_destroy(e);
      _exit(0);
    }
  }
  for (int p = 0; p < PROCS; p++) {
    int status = 0;
    cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "recorder %d: %d", p, status);
  }
  jitk_engine *e = recorder(NULL, NULL, NULL, NULL);
  jitk_cache_warm_report rep = warm(e, man);
  cr_assert_eq(rep.lines, PROCS * EACH);
  cr_assert_eq(rep.damaged, 0);
  cr_assert_eq(rep.kernels, PROCS * EACH);
  cr_assert_eq(rep.compiled, PROCS * EACH);
  jitk_engine_destroy(e);
  free(man);
  jt_rmdir(work);
}
