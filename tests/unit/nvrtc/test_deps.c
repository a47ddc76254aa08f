/*
 * The dependency scanner against NVRTC itself: for every way a header can
 * be found, NVRTC compiles the case to PTX (each candidate file defines a
 * different VALUE), and the file NVRTC read must be in the scanner's
 * record as a file with its content hash. Probes the scanner records
 * where nothing was must really be empty, and the directives it must not
 * follow (comments, raw strings) add nothing.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"

/* Each test runs in a scratch working directory of its own. */
static char workdir[256];

static void enter_scratch(void) {
  snprintf(workdir, sizeof workdir, "/tmp/jitk-deps-test-XXXXXX");
  cr_assert_not_null(mkdtemp(workdir));
  cr_assert_eq(chdir(workdir), 0);
}

static void leave_scratch(void) {
  char cmd[512];
  cr_assert_eq(chdir("/"), 0);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
  cr_assert_eq(system(cmd), 0);
}

static void put(const char *path, const char *text) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(dir, 0755);
      *p = '/';
    }
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

/* A header defining VALUE as v. */
static void header(const char *path, int v) {
  char text[64];
  snprintf(text, sizeof text, "#define VALUE %d\n", v);
  put(path, text);
}

typedef struct dcase {
  jitk_engine *e;
  jk_compile_input in;
  jk_deps deps;
} dcase;

static void scan(dcase *c, const char *source, const char *program, const char **opts, size_t nopts,
                 const jitk_header *headers, size_t nheaders) {
  memset(&c->in, 0, sizeof c->in);
  c->in.source = source;
  c->in.program_name = program;
  c->in.options = opts;
  c->in.num_options = nopts;
  c->in.headers = headers;
  c->in.num_headers = nheaders;
  char **final = NULL;
  size_t nfinal = 0;
  JT_OK(c->e, jk_nvrtc_final_options(c->e, opts, nopts, false, &final, &nfinal));
  JT_OK(c->e, jk_deps_scan(c->e, &c->in, final, nfinal, &c->deps));
  jk_options_free(c->e, final, nfinal);
}

static const jk_dep *find(const dcase *c, const char *path) {
  for (size_t i = 0; i < c->deps.n; i++)
    if (strcmp(c->deps.v[i].path, path) == 0) return &c->deps.v[i];
  return NULL;
}

/* The VALUE NVRTC compiled into the kernel `k`. */
static int nvrtc_value(dcase *c) {
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = c->in.options;
  o.num_options = c->in.num_options;
  o.headers = c->in.headers;
  o.num_headers = c->in.num_headers;
  o.program_name = c->in.program_name;
  jitk_module *m = NULL;
  JT_OK(c->e, jitk_module_create(c->e, c->in.source, &o, &m));
  const void *img;
  size_t size;
  JT_OK(c->e, jitk_module_image(m, &img, &size, NULL));
  const char *mov = strstr(img, "mov.u32");
  cr_assert_not_null(mov, "no constant in the PTX");
  int v = -1;
  cr_assert_eq(sscanf(strchr(mov, ',') + 1, "%d", &v), 1);
  jitk_module_destroy(m);
  return v;
}

/* The file NVRTC read (the one defining `value`) is recorded with its
 * hash; `path` is where it lies. */
static void expect_read(dcase *c, const char *path, int value) {
  int read = nvrtc_value(c);
  cr_assert_eq(read, value, "NVRTC read another file than %s (VALUE %d)", path, read);
  const jk_dep *d = find(c, path);
  cr_assert_not_null(d, "%s is not in the record", path);
  cr_assert_eq(d->state, 'F');
  char text[64];
  snprintf(text, sizeof text, "#define VALUE %d\n", value);
  uint8_t h[16];
  jk_deps_hash(text, strlen(text), h);
  cr_assert(d->hashed && memcmp(d->hash, h, 16) == 0, "wrong hash for %s", path);
}

static void expect_absent(const dcase *c, const char *path) {
  const jk_dep *d = find(c, path);
  cr_assert_not_null(d, "the empty place %s is not in the record", path);
  cr_assert_eq(d->state, 'A', "%s recorded as %c", path, d->state);
}

static void expect_not_probed(const dcase *c, const char *path) {
  cr_assert_null(find(c, path), "%s was probed, though NVRTC never looks there", path);
}

static dcase start(void) {
  enter_scratch();
  dcase c;
  memset(&c, 0, sizeof c);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "compute_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  JT_OK(NULL, jitk_engine_create(&cfg, &c.e));
  return c;
}

static void finish(dcase *c) {
  jk_deps_free(c->e, &c->deps);
  jitk_engine_destroy(c->e);
  leave_scratch();
}

static const char *kernel_quoted =
    "#include \"h.cuh\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
static const char *kernel_angle =
    "#include <h.cuh>\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";

Test(deps, quoted_include_looks_beside_the_program_first) {
  dcase c = start();
  header("x/h.cuh", 111);
  header("a/h.cuh", 333);
  header("h.cuh", 222);
  const char *opts[] = {"-Ia"};
  scan(&c, kernel_quoted, "x/k.cu", opts, 1, NULL, 0);
  expect_read(&c, "x/h.cuh", 111);
  /* NVRTC stops at the first file found, and so does the record. */
  expect_not_probed(&c, "a/h.cuh");
  jk_deps_free(c.e, &c.deps);
  /* Nothing beside the program: the -I folder. */
  cr_assert_eq(unlink("x/h.cuh"), 0);
  scan(&c, kernel_quoted, "x/k.cu", opts, 1, NULL, 0);
  expect_absent(&c, "x/h.cuh");
  expect_read(&c, "a/h.cuh", 333);
  jk_deps_free(c.e, &c.deps);
  /* A program named without a folder is beside the working directory. */
  scan(&c, kernel_quoted, "k.cu", opts, 1, NULL, 0);
  expect_read(&c, "h.cuh", 222);
  finish(&c);
}

Test(deps, no_source_include_skips_the_programs_folder) {
  dcase c = start();
  header("x/h.cuh", 111);
  header("a/h.cuh", 333);
  const char *opts[] = {"-no-source-include", "-Ia"};
  scan(&c, kernel_quoted, "x/k.cu", opts, 2, NULL, 0);
  expect_read(&c, "a/h.cuh", 333);
  expect_not_probed(&c, "x/h.cuh");
  finish(&c);
}

Test(deps, angle_include_searches_only_the_include_path) {
  dcase c = start();
  header("x/h.cuh", 111);
  header("a/h.cuh", 333);
  header("b/h.cuh", 444);
  const char *opts[] = {"-Ia", "--include-path=b"};
  scan(&c, kernel_angle, "x/k.cu", opts, 2, NULL, 0);
  expect_read(&c, "a/h.cuh", 333);
  expect_not_probed(&c, "x/h.cuh");
  jk_deps_free(c.e, &c.deps);
  cr_assert_eq(unlink("a/h.cuh"), 0);
  scan(&c, kernel_angle, "x/k.cu", opts, 2, NULL, 0);
  expect_absent(&c, "a/h.cuh");
  expect_read(&c, "b/h.cuh", 444);
  finish(&c);
}

Test(deps, options_with_white_space_as_nvrtc_reads_them) {
  dcase c = start();
  header("x/h.cuh", 111);
  header("a/h.cuh", 333);
  /* NVRTC drops white space at both ends of an option, and spaces between
   * -I and its folder: each of these reads a/h.cuh, which the record must
   * name (it named " a/h.cuh" and the like, so an edit of a/h.cuh went
   * unnoticed). */
  const char *forms[][2] = {{"-I a", NULL},
                            {"-Ia ", NULL},
                            {" -Ia", NULL},
                            {"-I", " a"},
                            {"\t-Ia\n", NULL},
                            {"-I  a\r", NULL},
                            {"-I", "a\t"},
                            {"-I ", "a"},
                            {"--include-path=a ", NULL},
                            {"--include-path", " a"}};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    scan(&c, kernel_angle, "x/k.cu", forms[i], forms[i][1] ? 2 : 1, NULL, 0);
    cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
    expect_read(&c, "a/h.cuh", 333);
    expect_not_probed(&c, "x/h.cuh");
    jk_deps_free(c.e, &c.deps);
  }
  finish(&c);
}

Test(deps, headers_given_as_strings_win_and_read_nothing) {
  dcase c = start();
  header("x/h.cuh", 111);
  jitk_header h = {"h.cuh", "#define VALUE 555\n"};
  scan(&c, kernel_quoted, "x/k.cu", NULL, 0, &h, 1);
  cr_assert_eq(nvrtc_value(&c), 555);
  expect_not_probed(&c, "x/h.cuh");
  jk_deps_free(c.e, &c.deps);
  /* A string header's own includes are looked up from the folder of its
   * name, relative to the working directory. */
  header("sub/inner.cuh", 666);
  jitk_header h2 = {"sub/outer.cuh", "#include \"inner.cuh\"\n"};
  scan(&c, "#include <sub/outer.cuh>\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n",
       "x/k.cu", NULL, 0, &h2, 1);
  expect_read(&c, "sub/inner.cuh", 666);
  finish(&c);
}

Test(deps, nested_includes_look_beside_their_includer) {
  dcase c = start();
  put("a/inc.cuh", "#include \"h2.cuh\"\n");
  header("a/h2.cuh", 501);
  header("b/h2.cuh", 503);
  header("x/h2.cuh", 502);
  const char *opts[] = {"-Ia", "-Ib"};
  const char *src = "#include <inc.cuh>\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, src, "x/k.cu", opts, 2, NULL, 0);
  expect_read(&c, "a/h2.cuh", 501);
  jk_deps_free(c.e, &c.deps);
  cr_assert_eq(unlink("a/h2.cuh"), 0);
  scan(&c, src, "x/k.cu", opts, 2, NULL, 0);
  expect_absent(&c, "a/h2.cuh");
  /* Not the program's folder: that is only for the program's own
   * includes. */
  expect_read(&c, "b/h2.cuh", 503);
  expect_not_probed(&c, "x/h2.cuh");
  finish(&c);
}

Test(deps, pre_includes_relative_and_absolute_names) {
  dcase c = start();
  header("h.cuh", 222);
  header("a/h.cuh", 333);
  const char *src = "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  const char *opts[] = {"-include", "h.cuh", "-Ia"};
  scan(&c, src, "x/k.cu", opts, 3, NULL, 0);
  expect_read(&c, "h.cuh", 222);
  jk_deps_free(c.e, &c.deps);
  char abs[600], text[700];
  snprintf(abs, sizeof abs, "%s/a/h.cuh", workdir);
  snprintf(text, sizeof text,
           "#include \"%s\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n", abs);
  scan(&c, text, "x/k.cu", NULL, 0, NULL, 0);
  expect_read(&c, abs, 333);
  finish(&c);
}

Test(deps, directives_behind_comments_splices_and_literals) {
  dcase c = start();
  header("x/h.cuh", 111);
  header("x/in_comment.cuh", 1);
  header("x/in_raw.cuh", 2);
  /* A directive after a comment that ends on its line counts; one inside
   * a comment or a raw string does not; a comment marker inside a string
   * or after a digit separator starts no comment; a splice joins a
   * directive's lines. */
  const char *src =
      "/* a comment\n"
      "   #include \"in_comment.cuh\"\n"
      "*/ #include \\\n"
      "  \"h.cuh\"\n"
      "extern \"C\" __global__ void k(int *p) {\n"
      "  const char *s = \"/* not a comment\"; (void)s;\n"
      "  int n = 1'000; const char *t = \"/*\"; (void)n; (void)t;\n"
      "  const char *r = R\"x(\n#include \"in_raw.cuh\"\n)x\"; (void)r;\n"
      "  *p = VALUE;\n"
      "}\n";
  scan(&c, src, "x/k.cu", NULL, 0, NULL, 0);
  expect_read(&c, "x/h.cuh", 111);
  expect_not_probed(&c, "x/in_comment.cuh");
  expect_not_probed(&c, "x/in_raw.cuh");
  cr_assert_null(c.deps.unknown);
  finish(&c);
}

Test(deps, headers_named_by_macros) {
  dcase c = start();
  header("a/impl_one.cuh", 701);
  header("a/impl_two.cuh", 702);
  /* Every definition of the macros is followed, whichever #if branch
   * holds it; -D definitions count too. */
  const char *src =
      "#if defined(SECOND)\n#define ROOT impl_two\n#else\n#define ROOT impl_one\n#endif\n"
      "#define HEADER <ROOT.cuh>\n"
      "#include HEADER\n"
      "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  const char *opts[] = {"-Ia"};
  scan(&c, src, "x/k.cu", opts, 1, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  expect_read(&c, "a/impl_one.cuh", 701);
  cr_assert_not_null(find(&c, "a/impl_two.cuh"));
  jk_deps_free(c.e, &c.deps);
  const char *opts2[] = {"-Ia", "-DSECOND"};
  scan(&c, src, "x/k.cu", opts2, 2, NULL, 0);
  expect_read(&c, "a/impl_two.cuh", 702);
  jk_deps_free(c.e, &c.deps);
  /* A name only a function-like macro makes cannot be followed: the
   * record says it is incomplete. */
  const char *fn =
      "#define PICK(x) <x.cuh>\n#include PICK(impl_one)\n"
      "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, fn, "x/k.cu", opts, 1, NULL, 0);
  cr_assert_not_null(c.deps.unknown);
  cr_assert(strstr(c.deps.unknown, "x/k.cu") != NULL, "%s", c.deps.unknown);
  jk_deps_free(c.e, &c.deps);
  /* __has_include, also through a wrapper macro as CCCL writes it. */
  const char *has =
      "#define HAS(_X) __has_include(_X)\n"
      "#if HAS(<maybe.cuh>) || __has_include(\"other.cuh\")\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = 1; }\n";
  scan(&c, has, "x/k.cu", opts, 1, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  expect_absent(&c, "a/maybe.cuh");
  expect_absent(&c, "x/other.cuh");
  finish(&c);
}

Test(deps, cuda_headers_and_jitk_headers) {
  dcase c = start();
  /* jitk's own headers are given as strings; the CUDA headers they and
   * the kernel include are files, marked as the toolkit's. */
  const char *src =
      "#include <cuda_fp16.h>\n#include <jitk/elementwise.cuh>\n"
      "extern \"C\" __global__ void k(__half *p) { *p = __float2half(1.0f); }\n";
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  const char *inc = NULL;
  JT_OK(c.e, jitk_engine_cuda_include_dir(c.e, &inc));
  cr_assert_not_null(inc);
  char fp16[1024];
  snprintf(fp16, sizeof fp16, "%s/cuda_fp16.h", inc);
  const jk_dep *d = find(&c, fp16);
  cr_assert_not_null(d, "%s not recorded", fp16);
  cr_assert_eq(d->state, 'F');
  cr_assert(d->toolkit);
  for (size_t i = 0; i < c.deps.n; i++)
    cr_assert(strncmp(c.deps.v[i].path, "jitk/", 5) != 0, "jitk's headers read from disk: %s",
              c.deps.v[i].path);
  /* A second scan in the engine replays what the first recorded of the
   * CUDA headers: the same record, path for path, hash for hash. */
  jk_deps first = c.deps;
  memset(&c.deps, 0, sizeof c.deps);
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  cr_assert_eq(c.deps.n, first.n);
  for (size_t i = 0; i < first.n; i++) {
    cr_assert_str_eq(c.deps.v[i].path, first.v[i].path);
    cr_assert_eq(c.deps.v[i].state, first.v[i].state);
    cr_assert(memcmp(c.deps.v[i].hash, first.v[i].hash, 16) == 0);
  }
  jk_deps_free(c.e, &first);
  cr_assert_not_null(c.e->nvrtc.scan_memo, "nothing was recorded");
  finish(&c);
}

Test(deps, replayed_cuda_headers_still_follow_macros) {
  dcase c = start();
  /* Thrust names headers by macros: the replay must resolve them as the
   * first scan did. */
  const char *src = "#include <thrust/device_vector.h>\n";
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  jk_deps first = c.deps;
  memset(&c.deps, 0, sizeof c.deps);
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  cr_assert_eq(c.deps.n, first.n);
  for (size_t i = 0; i < first.n; i++) cr_assert_str_eq(c.deps.v[i].path, first.v[i].path);
  jk_deps_free(c.e, &first);
  finish(&c);
}

Test(deps, trigraphs_under_older_standards) {
  dcase c = start();
  header("x/h.cuh", 121);
  header("x/h2.cuh", 122);
  /* Under -std=c++14 NVRTC replaces trigraphs: ??= is a directive's #,
   * and ??/ at a line's end splices the next line into the directive.
   * (The question marks are escaped here so that this file's own compiler
   * keeps them.) */
  const char *opts[] = {"-std=c++14"};
  const char *hash_mark =
      "?\?=include \"h.cuh\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, hash_mark, "x/k.cu", opts, 1, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  expect_read(&c, "x/h.cuh", 121);
  jk_deps_free(c.e, &c.deps);
  const char *splice =
      "#include ?\?/\n\"h2.cuh\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, splice, "x/k.cu", opts, 1, NULL, 0);
  expect_read(&c, "x/h2.cuh", 122);
  jk_deps_free(c.e, &c.deps);
  /* Without them (C++17, NVRTC's default) the same text is ordinary: a
   * directive it then holds still counts. */
  const char *both =
      "#define Q \"?\?/\"\n#include \"h.cuh\"\n"
      "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, both, "x/k.cu", NULL, 0, NULL, 0);
  expect_read(&c, "x/h.cuh", 121);
  finish(&c);
}

Test(deps, definitions_given_as_separate_options) {
  dcase c = start();
  header("a/impl_one.cuh", 701);
  header("a/impl_two.cuh", 702);
  /* The source's fallback is not what NVRTC reads when the options define
   * the macro, in any of the forms NVRTC takes. */
  const char *src =
      "#ifndef HEADER\n#define HEADER <impl_one.cuh>\n#endif\n#include HEADER\n"
      "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  const char *forms[][3] = {{"-Ia", "-D", "HEADER=<impl_two.cuh>"},
                            {"-Ia", "--define-macro", "HEADER=<impl_two.cuh>"},
                            {"-Ia", "--define-macro=HEADER=<impl_two.cuh>", NULL},
                            {"-Ia", "-DHEADER=<impl_two.cuh>", NULL},
                            {"-Ia", " -D HEADER=<impl_two.cuh> ", NULL},
                            {"-Ia", "-D=HEADER=<impl_two.cuh>", NULL},
                            {"-Ia", "-D", " HEADER=<impl_two.cuh>\t"}};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    scan(&c, src, "x/k.cu", forms[i], forms[i][2] ? 3 : 2, NULL, 0);
    cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
    expect_read(&c, "a/impl_two.cuh", 702);
    jk_deps_free(c.e, &c.deps);
  }
  finish(&c);
}

Test(deps, cuda_headers_changed_under_a_running_engine) {
  /* A folder given as the CUDA headers' holds a header of the user's too,
   * as a conda environment's include folder does: it counts as the
   * toolkit's, and the engine replays its first scan of it, but only
   * while the file is as it was then. */
  enter_scratch();
  char inc[512], path[600];
  snprintf(inc, sizeof inc, "%s/env/include", workdir);
  snprintf(path, sizeof path, "%s/mylib/v.cuh", inc);
  header(path, 707);
  dcase c;
  memset(&c, 0, sizeof c);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "compute_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  cfg.cuda_include_dir = inc;
  JT_OK(NULL, jitk_engine_create(&cfg, &c.e));
  /* A record is replayed only once the file's change time is old enough
   * for its stat data to tell a change. */
  usleep(2200 * 1000);
  const char *src =
      "#include <mylib/v.cuh>\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  const jk_dep *d = find(&c, path);
  cr_assert(d != NULL && d->toolkit, "%s not recorded as a CUDA header", path);
  expect_read(&c, path, 707);
  jk_deps_free(c.e, &c.deps);
  scan(&c, src, "k.cu", NULL, 0, NULL, 0); /* from the engine's record */
  expect_read(&c, path, 707);
  cr_assert(jk_deps_unchanged(&c.deps, NULL));
  /* Edited after the scan: the record no longer holds, so what NVRTC
   * read cannot be told from it. */
  header(path, 1234);
  const char *failed = NULL;
  cr_assert_not(jk_deps_unchanged(&c.deps, &failed));
  cr_assert_str_eq(failed, path);
  jk_deps_free(c.e, &c.deps);
  /* The next compile's scan reads it again rather than replaying the
   * first one, so its record (which the disk tier would keep) names what
   * NVRTC read. (Another kernel: the first one is in the engine's memory,
   * where the CUDA headers are not checked again.) */
  const char *src2 =
      "#include <mylib/v.cuh>\nextern \"C\" __global__ void k(int *p) { *p = VALUE + 0; }\n";
  scan(&c, src2, "k.cu", NULL, 0, NULL, 0);
  expect_read(&c, path, 1234);
  finish(&c);
}

Test(deps, headers_including_each_other_through_dotdot) {
  dcase c = start();
  /* Include guards stop NVRTC at the second inclusion; the scan, which
   * follows every #include, meets a/a.cuh again as a/../b/../a/a.cuh and
   * so on. It scans a file once per folder it lies in, so the record
   * stays small and still holds what NVRTC read. */
  put("a/a.cuh", "#pragma once\n#include \"../b/b.cuh\"\n");
  put("b/b.cuh",
      "#ifndef B_CUH\n#define B_CUH\n#include \"../a/a.cuh\"\n#define VALUE 808\n#endif\n");
  const char *src =
      "#include \"a/a.cuh\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  cr_assert_eq(nvrtc_value(&c), 808);
  cr_assert_not_null(find(&c, "a/a.cuh"));
  cr_assert_not_null(find(&c, "a/../b/b.cuh"));
  cr_assert_not_null(find(&c, "a/../b/../a/a.cuh"));
  cr_assert(c.deps.n < 8, "%zu entries in the record", c.deps.n);
  finish(&c);
}

Test(deps, one_folder_under_two_spellings) {
  dcase c = start();
  /* b is a symlink to real1: b/x.cuh and real1/x.cuh are one file, and
   * NVRTC looks its #include "y.cuh" up beside each spelling. The record
   * held real1/y.cuh only (the file was scanned once per folder), so
   * pointing b at real2 went unnoticed. */
  put("real1/x.cuh", "#include \"y.cuh\"\n");
  header("real1/y.cuh", 901);
  put("real2/x.cuh", "#include \"y.cuh\"\n");
  header("real2/y.cuh", 902);
  cr_assert_eq(symlink("real1", "b"), 0);
  const char *src =
      "#include \"b/x.cuh\"\n#include \"real1/x.cuh\"\n"
      "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  cr_assert_null(c.deps.unknown, "%s", c.deps.unknown);
  expect_read(&c, "b/y.cuh", 901);
  expect_read(&c, "real1/y.cuh", 901);
  jk_deps_free(c.e, &c.deps);
  /* The other order of the two. */
  const char *src2 =
      "#include \"real1/x.cuh\"\n#include \"b/x.cuh\"\n"
      "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  scan(&c, src2, "k.cu", NULL, 0, NULL, 0);
  expect_read(&c, "b/y.cuh", 901);
  expect_read(&c, "real1/y.cuh", 901);
  finish(&c);
}

Test(deps, a_folder_under_too_many_spellings_is_not_known) {
  dcase c = start();
  /* Each spelling is scanned again, up to a bound; past it the record
   * says it cannot know every file read, and the compile is not stored. */
  put("d/x.cuh", "#include \"y.cuh\"\n");
  header("d/y.cuh", 903);
  char src[8192] = "", name[64];
  for (int i = 0; i < 80; i++) {
    snprintf(name, sizeof name, "l%d", i);
    cr_assert_eq(symlink("d", name), 0);
    snprintf(src + strlen(src), sizeof src - strlen(src), "#include \"l%d/x.cuh\"\n", i);
  }
  scan(&c, src, "k.cu", NULL, 0, NULL, 0);
  cr_assert_not_null(c.deps.unknown);
  cr_assert(strstr(c.deps.unknown, "spellings") != NULL, "%s", c.deps.unknown);
  finish(&c);
}
