/*
 * libFuzzer target for matmul plans (jitk_matmul_create and what a plan
 * answers), through the public API: every field of the description
 * fuzzed, on compile-only engines of several architectures, with NVRTC
 * replaced by stubs (fuzz_nvrtc.h), so that no input costs a compile.
 *
 * Input: HEADER bytes, then NUL-separated text fields: the epilogue, its
 * operands (epilogue_params), the preamble, the kernel's name, then a
 * name and an expression for each of up to three outputs and two
 * reductions (any more that the header asks for are named o3.., r2.. and
 * computed as `value`), the log the stubbed NVRTC returns, and a tuning
 * choice as the kernel cache stores them ("bn=128 arow=128 stages=5
 * pingpong=1 split=1 swap=0"), parsed against the plan once it is made.
 *   byte 0: bits 0-1 NVRTC's outcome (0 success, 1 a compile error with
 *           the log, 2 an invalid option, 3 an internal error); bit 2 has_c;
 *           bits 3-6 has_a_scale, has_b_scale, has_d_scale, has_amax_d;
 *           bit 7 a NULL name
 *   byte 1: the architecture (low 3 bits, through a table)
 *   bytes 2-5: the dtypes of A, B, C and D (modulo 20: 0, 18 and 19 are
 *           none of the table's)
 *   byte 6: compute (modulo 9: 7 and 8 are none)
 *   byte 7: the orders of A, B, C and D, two bits each (2 and 3 are none)
 *   bytes 8-11: m, n, k and batch, through the table of sizes
 *   bytes 12-19: lda, ldb, ldc, ldd, then the four batch strides, through
 *           the table of leading dimensions (each relative to its own
 *           packed value where the table says so)
 *   bytes 20-21: alpha and beta, through the table of scalars
 *   byte 22: split_k, through its table
 *   bytes 23-24: how many outputs and reductions (modulo 10: up to 9,
 *           one more than a plan takes)
 *   bytes 25-33: each output's dtype (modulo 20); byte 34 the first
 *           output's leading dimension and stride (low and high nibble,
 *           through the table of leading dimensions, relative to 0)
 *   bytes 35-43: each reduction's dtype (low 5 bits, modulo 20) and op
 *           (high 3 bits: 3 to 7 are none); bytes 44-46 the axes, two
 *           bits each, four a byte (3 is none)
 * Shorter inputs leave the rest of the header at zero: a packed float32
 * product of sizes from the table's first entry.
 *
 * Promises checked: no crash, leak, undefined behaviour or out-of-bounds
 * access (ASan, UBSan, LeakSanitizer); a failed create returns a real
 * status with a message, never JITK_ERR_CUDA, JITK_ERR_NO_DEVICE or
 * JITK_ERR_INTERNAL, and leaves *plan alone; every NVRTC program created
 * is destroyed; a plan that was made describes itself (NUL-terminated
 * within any buffer size, the whole text in a large one), gives its
 * source, which holds the user's epilogue, and refuses to execute or tune
 * on an engine without a device, with a message, before it reads any
 * operand (the pointers passed point nowhere); a tuning choice is taken
 * only when it fits the plan's kernel, its split within the plan's K.
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fuzz_common.h"
#include "fuzz_nvrtc.h"
#include "kernels/matmul.h"

enum { HEADER = 47 };

/* Sizes: the usual, tails, one, zero, negative, and ones whose products
 * overflow 64 bits. */
/* clang-format off */
static const int64_t sizes[32] = {
    64, 1, 0, -1, 7, 8, 16, 100, 127, 128, 129, 255, 256, 4095, 4096, 8192, 50257, 65535, 65536,
    (int64_t)1 << 31, ((int64_t)1 << 31) - 1, (int64_t)1 << 32, (int64_t)1 << 40,
    (int64_t)1 << 62, INT64_MAX, INT64_MIN, -4096, 3, 2, 24, 1000, 12};
/* clang-format on */

/* Leading dimensions and strides: entries below 16 are offsets from the
 * packed value (0: packed itself), the rest absolute. */
/* clang-format off */
static const int64_t leads[32] = {
    0, 1, 2, 3, 8, 16, -1, -8, 7, 64, 1000000, -1000000, 1, 2, 4, 5, /* offsets */
    1, 8, 16, 4095, 4096, 4104, (int64_t)1 << 31, (int64_t)1 << 40, (int64_t)1 << 62,
    INT64_MAX, INT64_MIN, -1, -16, 50264, 127, 129};
/* clang-format on */

static const double scalars[8] = {1.0, 0.0, -0.5, 2.0, NAN, INFINITY, -INFINITY, 1e308};
static const int splits[8] = {0, 1, 2, 3, 64, 65, -1, 1 << 30};
static const char *const archs[8] = {"sm_90", "sm_80",  "sm_89",  "sm_75",
                                     "sm_86", "sm_100", "sm_120", "sm_90a"};

static int64_t lead_of(unsigned byte, int64_t packed) {
  const unsigned i = byte & 31u;
  if (i >= 16) return leads[i];
  if (i == 0) return 0;
  /* Offsets from the packed value, computed without overflow. */
  const int64_t off = leads[i];
  if ((off > 0 && packed > INT64_MAX - off) || (off < 0 && packed < INT64_MIN - off)) return off;
  return packed + off;
}

static jitk_dtype dtype_of(unsigned byte) {
  const unsigned v = byte % 20u;
  return (jitk_dtype)(v < JITK_DTYPE_COUNT ? v : 1000u + v);
}

/* What a plan that was made promises. */
static void check_plan(jitk_engine *e, jitk_matmul *p, const char *epilogue) {
  /* Describe: NUL-terminated in any buffer, the whole text in a large one
   * (each buffer exactly its size, so that ASan sees any write past it). */
  char *whole = malloc(4096);
  JF_CHECK(jitk_matmul_describe(p, whole, 4096) == JITK_OK, "describe: %s", jitk_errmsg(e));
  const size_t len = strlen(whole);
  JF_CHECK(len > 0 && len < 4095, "describe gave %zu bytes", len);
  static const size_t small[3] = {1, 2, 40};
  for (int i = 0; i < 3; i++) {
    char *buf = malloc(small[i]);
    jitk_status st = jitk_matmul_describe(p, buf, small[i]);
    if (st == JITK_OK) {
      JF_CHECK(memchr(buf, '\0', small[i]) != NULL, "describe left %zu bytes unterminated",
               small[i]);
      JF_CHECK(strncmp(buf, whole, strlen(buf)) == 0, "a short description is not a prefix");
    } else {
      jf_check_failure(e, st, "jitk_matmul_describe");
    }
    free(buf);
  }
  free(whole);
  char one = 'x';
  JF_CHECK(jitk_matmul_describe(p, &one, 0) == JITK_ERR_INVALID_ARGUMENT && one == 'x',
           "describe into no bytes did not fail cleanly");
  const char *source = NULL;
  JF_CHECK(jitk_matmul_source(p, &source) == JITK_OK && source != NULL, "no source: %s",
           jitk_errmsg(e));
  if (epilogue != NULL) {
    size_t n = strlen(epilogue);
    while (n > 0 && strchr(" \t\n\r\f\v", epilogue[n - 1]) != NULL) n--;
    JF_CHECK(memmem(source, strlen(source), epilogue, n) != NULL,
             "the plan's source lacks the user's epilogue");
  }
  /* No device: execution and tuning fail before touching memory (these
   * pointers are not mapped anywhere). */
  void *const nowhere = (void *)(uintptr_t)0x10;
  jitk_status st = jitk_matmul_execute(p, NULL, nowhere, nowhere, nowhere, nowhere, NULL, 0);
  JF_CHECK(st != JITK_OK, "a plan executed without a device");
  jf_check_failure(e, st, "jitk_matmul_execute");
  jitk_matmul_operands o;
  JF_CHECK(jitk_matmul_operands_init(&o) == JITK_OK, "operands_init failed");
  o.a = o.b = o.c = nowhere;
  o.d = nowhere;
  st = jitk_matmul_execute_ex(p, NULL, &o);
  JF_CHECK(st != JITK_OK, "a plan executed (_ex) without a device");
  jf_check_failure(e, st, "jitk_matmul_execute_ex");
  st = jitk_matmul_autotune(p, NULL, nowhere, nowhere, nowhere, nowhere, NULL, 0);
  JF_CHECK(st != JITK_OK, "a plan was tuned without a device");
  jf_check_failure(e, st, "jitk_matmul_autotune");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t h[HEADER] = {0};
  memcpy(h, data, size < HEADER ? size : HEADER);
  jf_fields f;
  if (jf_split(&f, data + (size < HEADER ? size : HEADER), size < HEADER ? 0 : size - HEADER) != 0)
    return 0;
  static const nvrtcResult outcomes[4] = {NVRTC_SUCCESS, NVRTC_ERROR_COMPILATION,
                                          NVRTC_ERROR_INVALID_OPTION, NVRTC_ERROR_INTERNAL_ERROR};
  stub_result = outcomes[h[0] & 3];
  stub_log = jf_get(&f, 14, "");
  stub_programs = 0;

  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.has_c = (h[0] >> 2) & 1;
  d.has_a_scale = (h[0] >> 3) & 1;
  d.has_b_scale = (h[0] >> 4) & 1;
  d.has_d_scale = (h[0] >> 5) & 1;
  d.has_amax_d = (h[0] >> 6) & 1;
  d.a_dtype = dtype_of(h[2]);
  d.b_dtype = dtype_of(h[3]);
  d.c_dtype = dtype_of(h[4]);
  d.d_dtype = dtype_of(h[5]);
  d.compute = (jitk_compute)(h[6] % 9u);
  d.a_order = (jitk_order)(h[7] & 3u);
  d.b_order = (jitk_order)((h[7] >> 2) & 3u);
  d.c_order = (jitk_order)((h[7] >> 4) & 3u);
  d.d_order = (jitk_order)((h[7] >> 6) & 3u);
  d.m = sizes[h[8] & 31u];
  d.n = sizes[h[9] & 31u];
  d.k = sizes[h[10] & 31u];
  d.batch = h[11] & 32u ? sizes[h[11] & 31u] : 1 + (h[11] & 3u);
  /* Packed leading dimensions (the contiguous extent), for the offsets;
   * wrapping is fine here, the plan must refuse what it cannot hold. */
  const int64_t pa = d.a_order == JITK_COL_MAJOR ? d.m : d.k;
  const int64_t pb = d.b_order == JITK_COL_MAJOR ? d.k : d.n;
  const int64_t pc = d.c_order == JITK_COL_MAJOR ? d.m : d.n;
  const int64_t pd = d.d_order == JITK_COL_MAJOR ? d.m : d.n;
  d.lda = lead_of(h[12], pa);
  d.ldb = lead_of(h[13], pb);
  d.ldc = lead_of(h[14], pc);
  d.ldd = lead_of(h[15], pd);
  d.stride_a = lead_of(h[16], 0);
  d.stride_b = lead_of(h[17], 0);
  d.stride_c = lead_of(h[18], 0);
  d.stride_d = lead_of(h[19], 0);
  d.alpha = scalars[h[20] & 7u];
  d.beta = scalars[h[21] & 7u];
  d.split_k = splits[h[22] & 7u];
  d.epilogue = jf_opt(&f, 0);
  d.epilogue_params = jf_opt(&f, 1);
  d.preamble = jf_opt(&f, 2);
  d.name = h[0] & 128 ? NULL : jf_opt(&f, 3) ? jf_opt(&f, 3) : "fuzzed";

  jitk_matmul_output outs[9];
  jitk_matmul_reduction reds[9];
  char names[18][8];
  const size_t no = h[23] % 10u, nr = h[24] % 10u;
  for (size_t i = 0; i < no; i++) {
    snprintf(names[i], sizeof names[i], "o%zu", i);
    outs[i].name = i < 3 ? jf_get(&f, 4 + 2 * (int)i, names[i]) : names[i];
    outs[i].expr = i < 3 ? jf_get(&f, 5 + 2 * (int)i, "value") : "value";
    outs[i].dtype = dtype_of(h[25 + i]);
    outs[i].ld = i == 0 ? lead_of(h[34] & 15u, 0) : 0;
    outs[i].stride = i == 0 ? lead_of(h[34] >> 4, 0) : 0;
  }
  for (size_t i = 0; i < nr; i++) {
    snprintf(names[9 + i], sizeof names[9 + i], "r%zu", i);
    reds[i].name = i < 2 ? jf_get(&f, 10 + 2 * (int)i, names[9 + i]) : names[9 + i];
    reds[i].expr = i < 2 ? jf_get(&f, 11 + 2 * (int)i, "value") : "value";
    reds[i].dtype = dtype_of(h[35 + i] & 31u);
    reds[i].op = (jitk_reduce_op)(h[35 + i] >> 5);
    reds[i].axis = (jitk_reduce_axis)((h[44 + i / 4] >> (2 * (i % 4))) & 3u);
  }
  d.outputs = no ? outs : NULL;
  d.num_outputs = no;
  d.reductions = nr ? reds : NULL;
  d.num_reductions = nr;

  /* An engine per input: its in-memory table would otherwise serve a
   * source seen before without calling the stubs, and destroying it lets
   * LeakSanitizer see everything the input left behind. */
  jitk_engine *e = jf_engine_for("fuzz_matmul", archs[h[1] & 7u]);
  install_stubs(e);
  jitk_matmul *const sentinel = (jitk_matmul *)(void *)&stub_program;
  jitk_matmul *p = sentinel;
  jitk_status st = jitk_matmul_create(e, &d, &p);
  JF_CHECK(stub_programs == 0, "an NVRTC program was not destroyed");
  /* FUZZ_MATMUL_VERBOSE=1 says what became of each input (for writing
   * seeds that reach a path). */
  if (getenv("FUZZ_MATMUL_VERBOSE") != NULL) {
    char what[512] = "";
    if (st == JITK_OK) jitk_matmul_describe(p, what, sizeof what);
    fprintf(stderr, "fuzz_matmul: %s: %s\n", jitk_errname(st),
            st == JITK_OK ? what : jitk_errmsg(e));
  }
  if (st != JITK_OK) {
    jf_check_failure(e, st, "jitk_matmul_create");
    JF_CHECK(p == sentinel, "jitk_matmul_create failed but changed *plan");
    JF_CHECK(st != JITK_ERR_CUDA && st != JITK_ERR_NO_DEVICE && st != JITK_ERR_INTERNAL,
             "jitk_matmul_create failed with %s: %s", jitk_errname(st), jitk_errmsg(e));
  } else {
    JF_CHECK(p != sentinel && p != NULL, "jitk_matmul_create succeeded without a plan");
    JF_CHECK(stub_result == NVRTC_SUCCESS, "a plan was made from a failed compile");
    check_plan(e, p, d.epilogue);
    /* A tuning choice as the kernel cache could hand it back (whoever
     * wrote the cache): taken only where it fits the plan's kernel. */
    const char *choice = jf_opt(&f, 15);
    const jk_mm_kind kind = p->main.spec.kind;
    if (choice != NULL && jk_mm_choice_parse(p, kind, choice)) {
      JF_CHECK(jk_mm_choice_fits(p, kind, p->bn, p->arow, p->stages, p->pingpong, p->swap),
               "a parsed choice does not fit: %s", choice);
      const int64_t kt = jk_mm_ktiles(p, kind);
      JF_CHECK(p->split >= 0 && p->split <= (kt > 1 ? kt : 1), "split %d of %lld K-tiles: %s",
               p->split, (long long)kt, choice);
    }
    jitk_matmul_destroy(p);
  }
  jitk_engine_destroy(e);
  free(f.text);
  return 0;
}
