/*
 * libFuzzer target for the elementwise and reduction source generators and
 * the NVRTC log rewriting (jk_rewrite_log, src/nvrtc/log.c), through the
 * public API.
 *
 * NVRTC is replaced by stubs in the engine's function table, so no input
 * costs a compile: the stub "compiles" by returning the outcome and the log
 * the input asks for. The generator sees fuzzed parameter lists,
 * expressions, types and layouts; the rewriter sees a fuzzed log, both
 * through a failing compile and called directly.
 *
 * Input: two header bytes, then NUL-separated text fields.
 *   byte 0: bit 0 reduction; bits 1-2 NVRTC's outcome (0 a compile error
 *           with the log, 1 success with the log as ptxas's report and a
 *           cubin, 2 an invalid option, 3 an internal error); bit 3 64-bit
 *           indices; bits 4-6 the vector width (elementwise) or strategy
 *           and split (reduction); bit 7 the default layout (NULL)
 *   byte 1: elementwise ndim (modulo 20), or the reduction's kept and
 *           reduced ndim (bits 0-2 and 3-5, through tables), bit 6 an
 *           unknown strategy, and bit 7 the strategy's second bit ('i',
 *           'o', 'm', 'r' by byte 0's bit 4 and this one)
 *   elementwise fields: in_params, out_params, operation, types, scalars,
 *           preamble, loop_prep, after_loop, log
 *   reduction fields: in_params, out_params, map_expr, reduce_expr,
 *           post_map_expr, identity, reduce_type, types, preamble, log
 * Layout values out of range are passed on too: they must be refused
 * cleanly.
 *
 * Promises checked: no crash, leak or out-of-bounds access; every failure
 * is a real status with a message; a compile error's message names the
 * program and carries the options; a failed create or compile leaves its
 * out-parameters alone; a generated source (the compile's, or the _source
 * call's after a failure) holds the user's code verbatim (up to trailing
 * white space) under its #line label;
 * on success the module's ptxas resources name kernels that the log
 * mentions; the rewritten log has no line left in NVRTC's "label(N):" form
 * and grows by at most a column per line.
 */
#include <jitk/jitk.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "nvrtc/nvrtc.h"
#include "engine.h"
#include "fuzz_common.h"
#include "fuzz_nvrtc.h"

/* Whether a line still has NVRTC's "label(DIGITS):" form for a user's
 * section, which the rewriter promises to turn into "label:LINE:". */
static bool nvrtc_form(const char *line, size_t len) {
  const char *paren = memchr(line, '(', len);
  if (paren == NULL || !jk_log_user_label(line, (size_t)(paren - line))) return false;
  size_t i = (size_t)(paren - line) + 1, digits = i;
  while (i < len && line[i] >= '0' && line[i] <= '9') i++;
  return i > digits && i + 1 < len && line[i] == ')' && line[i + 1] == ':';
}

static void check_rewrite(jitk_engine *e, const char *log) {
  char *out = jk_rewrite_log(e, log);
  JF_CHECK(out != NULL, "jk_rewrite_log returned NULL without an allocation failure");
  size_t lines = 1;
  for (const char *p = log; *p; p++) lines += *p == '\n';
  size_t in_len = strlen(log), out_len = strlen(out);
  /* A rewritten line trades "(N): " for ":N:COL: ", and COL is a long. */
  JF_CHECK(out_len <= in_len + 24 * lines, "the rewritten log grew from %zu to %zu bytes", in_len,
           out_len);
  for (const char *p = out; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    JF_CHECK(!nvrtc_form(p, len), "a line kept NVRTC's form after rewriting: %.*s", (int)len, p);
    p += len + (nl != NULL);
  }
  jk_free(e, out);
}

/* What every compile of a generated kernel promises, whatever the input. */
static void check_compile(jitk_engine *e, jitk_status st, const char *call, const char *what,
                          const char *label, const char *compiled, const char *source,
                          jitk_module *m, jitk_module *sentinel) {
  if (st != JITK_OK) {
    jf_check_failure(e, st, call);
    JF_CHECK(m == sentinel, "%s failed but changed *module", call);
    JF_CHECK(compiled == stub_sentinel_text, "%s failed but changed *source", call);
    JF_CHECK(st != JITK_ERR_CUDA && st != JITK_ERR_NO_DEVICE && st != JITK_ERR_INTERNAL,
             "%s failed with %s: %s", call, jitk_errname(st), jitk_errmsg(e));
  }
  if (st == JITK_ERR_COMPILE) {
    const char *msg = jitk_errmsg(e);
    JF_CHECK(strstr(msg, " failed to compile for sm_90:") != NULL && strstr(msg, "\noptions:"),
             "a compile error's message lacks the program or the options: %s", msg);
    JF_CHECK(stub_programs == 0, "a program was not destroyed");
  }
  /* Whenever NVRTC was reached, the source holds the user's code. */
  if ((st == JITK_OK || st == JITK_ERR_COMPILE || st == JITK_ERR_NVRTC) && what != NULL) {
    JF_CHECK(source != NULL, "%s reached NVRTC but gave no source", call);
    /* Trailing white space may go: the generator closes the section on
     * the user's last line. */
    size_t n = strlen(what);
    while (n > 0 && strchr(" \t\n\r\f\v", what[n - 1]) != NULL) n--;
    JF_CHECK(memmem(source, strlen(source), what, n) != NULL,
             "the source of %s lacks the user's %s", call, label);
    char line[64];
    snprintf(line, sizeof line, "#line 1 \"%s\"\n", label);
    JF_CHECK(strstr(source, line) != NULL, "the source of %s lacks %s", call, line);
  }
  if (st == JITK_OK) {
    JF_CHECK(m != sentinel && m != NULL, "%s succeeded without a module", call);
    const jitk_kernel_resources *res = NULL;
    size_t count = 0;
    JF_CHECK(jitk_module_resources(m, &res, &count) == JITK_OK, "no resources: %s", jitk_errmsg(e));
    for (size_t i = 0; i < count; i++)
      JF_CHECK(res[i].name != NULL && strstr(stub_log, res[i].name) != NULL,
               "ptxas resource %zu names a kernel the log does not mention", i);
    jitk_module_destroy(m);
  }
}

static void run_elementwise(jitk_engine *e, unsigned h0, unsigned h1, const jf_fields *f) {
  const char *in = jf_get(f, 0, "T x"), *out = jf_get(f, 1, "T z");
  const char *op = jf_get(f, 2, "z = x");
  jitk_elementwise_options opts = {0};
  opts.preamble = jf_opt(f, 5);
  opts.loop_prep = jf_opt(f, 6);
  opts.after_loop = jf_opt(f, 7);
  jitk_elementwise *k = (jitk_elementwise *)(void *)&stub_program;
  jitk_status st = jitk_elementwise_create(e, in, out, op, "fuzzed", &opts, &k);
  if (st != JITK_OK) {
    jf_check_failure(e, st, "jitk_elementwise_create");
    JF_CHECK(k == (jitk_elementwise *)(void *)&stub_program,
             "jitk_elementwise_create failed but changed *kernel");
    return;
  }
  static const int vectors[8] = {0, 1, 2, 4, 8, 16, 3, -1};
  jitk_elementwise_layout layout = {(int)(h1 % 20), h0 & 8 ? 64 : 32, vectors[(h0 >> 4) & 7],
                                    jf_opt(f, 4)};
  const char *source = stub_sentinel_text;
  jitk_module *sentinel = (jitk_module *)(void *)&stub_program, *m = sentinel;
  st = jitk_elementwise_compile(k, jf_get(f, 3, "T=float32"), h0 & 128 ? NULL : &layout, &source,
                                &m);
  /* The source of a failed compile is what the _source call gives. */
  const char *last = NULL;
  if (jitk_elementwise_source(k, &last) == JITK_OK && st == JITK_OK)
    JF_CHECK(source != NULL && strcmp(source, last) == 0,
             "jitk_elementwise_source differs from the compile's source");
  check_compile(e, st, "jitk_elementwise_compile", op, "operation", source,
                st == JITK_OK ? source : last, m, sentinel);
  jitk_elementwise_destroy(k);
}

static void run_reduction(jitk_engine *e, unsigned h0, unsigned h1, const jf_fields *f) {
  const char *in = jf_get(f, 0, "T x"), *out = jf_get(f, 1, "T y");
  const char *map = jf_get(f, 2, "x"), *reduce = jf_get(f, 3, "a + b");
  const char *post = jf_get(f, 4, "y = a");
  jitk_reduction_options opts = {0};
  opts.preamble = jf_opt(f, 8);
  jitk_reduction *k = (jitk_reduction *)(void *)&stub_program;
  jitk_status st = jitk_reduction_create(e, in, out, map, reduce, post, jf_opt(f, 5), jf_opt(f, 6),
                                         "fuzzed", &opts, &k);
  if (st != JITK_OK) {
    jf_check_failure(e, st, "jitk_reduction_create");
    JF_CHECK(k == (jitk_reduction *)(void *)&stub_program,
             "jitk_reduction_create failed but changed *kernel");
    return;
  }
  /* The first five of each table are the values real reductions use. */
  static const int kept[8] = {0, 1, 2, 3, 16, 4, 17, -1};
  static const int reduced[8] = {1, 2, 3, 4, 16, 0, 17, -1};
  static const char strategies[4] = {'i', 'o', 'm', 'r'};
  jitk_reduction_layout layout = {kept[h1 & 7], reduced[(h1 >> 3) & 7], h0 & 8 ? 64 : 32,
                                  strategies[((h0 >> 4) & 1) | ((h1 >> 6) & 2)],
                                  (int)(h0 >> 5) & 3};
  if (h1 & 64) layout.strategy = 'x';
  const char *source = stub_sentinel_text;
  jitk_module *sentinel = (jitk_module *)(void *)&stub_program, *m = sentinel;
  st = jitk_reduction_compile(k, jf_get(f, 7, "T=float32"), h0 & 128 ? NULL : &layout, &source, &m);
  const char *last = NULL;
  if (jitk_reduction_source(k, &last) == JITK_OK && st == JITK_OK)
    JF_CHECK(source != NULL && strcmp(source, last) == 0,
             "jitk_reduction_source differs from the compile's source");
  check_compile(e, st, "jitk_reduction_compile", map, "map_expr", source,
                st == JITK_OK ? source : last, m, sentinel);
  jitk_reduction_destroy(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  unsigned h0 = data[0], h1 = data[1];
  jf_fields f;
  if (jf_split(&f, data + 2, size - 2) != 0) return 0;
  bool reduction = h0 & 1;
  static const nvrtcResult outcomes[4] = {NVRTC_ERROR_COMPILATION, NVRTC_SUCCESS,
                                          NVRTC_ERROR_INVALID_OPTION, NVRTC_ERROR_INTERNAL_ERROR};
  stub_result = outcomes[(h0 >> 1) & 3];
  stub_log = jf_get(&f, reduction ? 9 : 8, "");
  stub_programs = 0;
  /* An engine per input: its in-memory table would otherwise serve a
   * source seen before without calling the stubs, and destroying it lets
   * LeakSanitizer see everything the input left behind. */
  jitk_engine *e = jf_engine("fuzz_codegen");
  install_stubs(e);
  check_rewrite(e, stub_log);
  if (reduction)
    run_reduction(e, h0, h1, &f);
  else
    run_elementwise(e, h0, h1, &f);
  JF_CHECK(stub_programs == 0, "an NVRTC program was not destroyed");
  jitk_engine_destroy(e);
  free(f.text);
  return 0;
}
