/*
 * libFuzzer target for the dependency scanner (jk_deps_scan): the part of
 * the cache that reads a compile's source text and every header it
 * reaches, to record what the compile depends on. Its input is the
 * caller's source and headers, so it must hold on any text.
 *
 * Input, NUL-separated: options (one field, split at spaces, at most 8),
 * the program's source, its program name, then pairs of a header name and
 * its text given as strings (at most 4). The program lies in a scratch
 * folder (its name is taken inside it), which holds a few headers (h.cuh,
 * sub/g.cuh, which include each other and define macros that name
 * headers) and comes first on the include path, on a compile-only engine
 * whose CUDA headers are the toolkit's, so that lookups reach files, the
 * include path and the engine's replay of CUDA headers alike. The working
 * directory is left alone: libFuzzer's paths are relative to it.
 * Inputs naming /proc, /sys or /dev are skipped: the scan would read the
 * machine's files, which is the caller's business, not the fuzzer's.
 *
 * Promises checked: no crash, leak or out-of-bounds read; the scan
 * succeeds (or fails only for want of memory); every entry of the record
 * has a path and a state ('F' a file, hashed; 'A' nothing there; 'O'
 * something else), no path twice; and a second scan of the same input in
 * the same engine, which replays the CUDA headers from the engine's
 * memo, gives the same record, path for path.
 */
#include <jitk/jitk.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "fuzz_common.h"
#include "nvrtc/nvrtc.h"

static jitk_engine *engine;
static char scratch[] = "/tmp/jitk-fuzz-deps-XXXXXX";
static char include_scratch[sizeof scratch + 2];

static void put(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", scratch, name);
  FILE *f = fopen(path, "w");
  if (f == NULL) abort();
  fputs(text, f);
  fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  engine = jf_engine("fuzz_deps");
  char sub[sizeof scratch + 4];
  if (mkdtemp(scratch) == NULL) abort();
  snprintf(sub, sizeof sub, "%s/sub", scratch);
  snprintf(include_scratch, sizeof include_scratch, "-I%s", scratch);
  if (mkdir(sub, 0755) != 0) abort();
  put("h.cuh", "#pragma once\n#include \"sub/g.cuh\"\n#define NEXT <sub/g.cuh>\n#define V 1\n");
  put("sub/g.cuh", "#include \"../h.cuh\"\n#include NEXT\n#define W 2\n");
  return 0;
}

static bool same_record(const jk_deps *a, const jk_deps *b) {
  if (a->n != b->n || (a->unknown == NULL) != (b->unknown == NULL)) return false;
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->v[i].path, b->v[i].path) != 0 || a->v[i].state != b->v[i].state ||
        memcmp(a->v[i].hash, b->v[i].hash, 16) != 0)
      return false;
  return true;
}

static void check_record(const jk_deps *d) {
  for (size_t i = 0; i < d->n; i++) {
    const jk_dep *x = &d->v[i];
    JF_CHECK(x->path != NULL && x->path[0] != '\0', "entry %zu has no path", i);
    JF_CHECK(x->state == 'F' || x->state == 'A' || x->state == 'O', "%s has state %d", x->path,
             (int)x->state);
    JF_CHECK(x->hashed == (x->state == 'F'), "%s: state %c, hashed %d", x->path, x->state,
             (int)x->hashed);
    for (size_t j = 0; j < i; j++)
      JF_CHECK(strcmp(d->v[j].path, x->path) != 0, "%s recorded twice", x->path);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const skipped[] = {"/proc", "/sys", "/dev"};
  for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
    if (memmem(data, size, skipped[i], strlen(skipped[i])) != NULL) return 0;
  jf_fields f;
  if (jf_split(&f, data, size) != 0) return 0;
  char *optline = strdup(jf_get(&f, 0, ""));
  const char *opts[9] = {include_scratch};
  size_t nopts = 1;
  for (char *save = NULL, *t = strtok_r(optline, " ", &save); t != NULL && nopts < 9;
       t = strtok_r(NULL, " ", &save))
    opts[nopts++] = t;
  char program[512];
  snprintf(program, sizeof program, "%s/%s", scratch, jf_get(&f, 2, "k.cu"));
  jitk_header headers[4];
  size_t nh = 0;
  for (int i = 3; i + 1 < f.count && nh < 4; i += 2) {
    headers[nh].name = f.field[i];
    headers[nh].source = f.field[i + 1];
    nh++;
  }
  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.source = jf_get(&f, 1, "");
  in.program_name = program;
  in.options = opts;
  in.num_options = nopts;
  in.headers = headers;
  in.num_headers = nh;
  char **final = NULL;
  size_t nfinal = 0;
  jitk_status st = jk_nvrtc_final_options(engine, opts, nopts, false, &final, &nfinal);
  if (st == JITK_OK) {
    jk_deps first, second;
    st = jk_deps_scan(engine, &in, final, nfinal, &first);
    JF_CHECK(st == JITK_OK || st == JITK_ERR_OUT_OF_MEMORY, "the scan failed with %s: %s",
             jitk_errname(st), jitk_errmsg(engine));
    if (st == JITK_OK) {
      check_record(&first);
      st = jk_deps_scan(engine, &in, final, nfinal, &second);
      JF_CHECK(st == JITK_OK || st == JITK_ERR_OUT_OF_MEMORY, "the second scan failed with %s",
               jitk_errname(st));
      if (st == JITK_OK) {
        JF_CHECK(same_record(&first, &second), "a second scan gave another record (%zu, %zu)",
                 first.n, second.n);
        jk_deps_free(engine, &second);
      }
      jk_deps_free(engine, &first);
    }
    jk_options_free(engine, final, nfinal);
  } else {
    jf_check_failure(engine, st, "jk_nvrtc_final_options");
  }
  free(optline);
  free(f.text);
  return 0;
}
