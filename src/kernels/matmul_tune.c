/*
 * Autotuning a matmul plan: every tile configuration that fits, each
 * timed on the caller's operands, the fastest kept on the plan and in the
 * cache's tuning table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "kernels/matmul.h"

/* One run of a candidate kernel on the autotune call's operands, as
 * jk_time_median runs it. */
typedef struct mm_timed {
  jitk_matmul *p;
  mm_kernel *k;
  jitk_stream stream;
  const jitk_matmul_operands *ops;
} mm_timed;

static jitk_status run_timed(void *ctx) {
  mm_timed *t = ctx;
  return jk_mm_run_kernel(t->p, t->k, t->stream, t->ops, NULL);
}

jitk_status jitk_matmul_autotune(jitk_matmul *p, jitk_stream stream, const void *a, const void *b,
                                 const void *c, void *d, const jitk_arg *extra, size_t num_extra) {
  jitk_matmul_operands ops;
  jitk_matmul_operands_init(&ops);
  ops.a = a;
  ops.b = b;
  ops.c = c;
  ops.d = d;
  ops.extra = extra;
  ops.num_extra = num_extra;
  /* An FP8 plan's scales are not among autotune's arguments: such a plan
   * is refused below, before the operands' check would ask for them. */
  const bool fp8_extras =
      p != NULL && (p->d.has_a_scale || p->d.has_b_scale || p->d.has_d_scale || p->d.has_amax_d);
  jitk_status st = fp8_extras ? JITK_OK : jk_mm_check_operands(p, "jitk_matmul_autotune", &ops);
  if (st != JITK_OK) return st;
  if (p->num_outs > 0 || p->num_reds > 0 || fp8_extras)
    /* The tuning table's key leaves the epilogue out: a plan of the same
     * shape without them finds the choice too. */
    return jk_fail(p->engine, JITK_ERR_UNSUPPORTED,
                   "matmul %s: a plan with outputs or reductions besides D, or with FP8 "
                   "scales or amax, is not autotuned itself; autotune a plan of the same shape "
                   "and dtypes without them, and plans made afterwards (this kind included) "
                   "use its choice",
                   p->name);
  jitk_engine *e = p->engine;
  const jitk_matmul_desc *ds = &p->d;
  const jk_mm_kind kind = p->main.spec.kind;
  if (kind == JK_MM_SIMT || ds->m == 0 || ds->n == 0) return JITK_OK; /* one configuration */
  if ((((uintptr_t)a | (uintptr_t)b) & 15) != 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul %s: autotuning times the tensor-core kernels, which need A and B "
                   "16-byte aligned",
                   p->name);
  /* The candidates: {bn, arow, stages, pingpong}. */
  static const int wgmma[][4] = {
      {128, 128, 5, 1}, {128, 128, 4, 1}, {256, 128, 3, 0}, {128, 128, 4, 0}};
  static const int mma[][4] = {
      {256, 128, 3, 0}, {128, 64, 4, 0}, {256, 64, 4, 0}, {128, 128, 3, 0}};
  const int(*cand)[4] = kind == JK_MM_WGMMA ? wgmma : mma;
  const int ncand = 4;
  const int keep[4] = {p->bn, p->arow, p->stages, p->pingpong};
  float best_ms = 0;
  int best = -1;
  mm_kernel best_k;
  memset(&best_k, 0, sizeof best_k);
  for (int i = 0; i < ncand && st == JITK_OK; i++) {
    p->bn = cand[i][0];
    p->arow = cand[i][1];
    p->stages = cand[i][2];
    p->pingpong = cand[i][3] != 0;
    mm_kernel k;
    float ms = 0;
    st = jk_mm_build(p, kind, p->main.spec.acc, &k);
    /* The median of 10 runs after 3 of warm-up. */
    mm_timed timed = {p, &k, stream, &ops};
    if (st == JITK_OK)
      st = jk_time_median(e, stream, 3, 10, run_timed, &timed, "a matmul candidate", &ms);
    jk_log(e, JITK_LOG_DEBUG, "matmul %s autotune: bn %d, arow %d, %d stages%s: %.4f ms", p->name,
           cand[i][0], cand[i][1], cand[i][2], cand[i][3] ? ", ping-pong" : "", (double)ms);
    if (st == JITK_OK && (best < 0 || ms < best_ms)) {
      jk_mm_kernel_free(e, &best_k);
      best_k = k;
      best_ms = ms;
      best = i;
    } else {
      jk_mm_kernel_free(e, &k);
    }
  }
  if (st != JITK_OK) {
    jk_mm_kernel_free(e, &best_k);
    p->bn = keep[0];
    p->arow = keep[1];
    p->stages = keep[2];
    p->pingpong = keep[3] != 0;
    return st;
  }
  p->bn = cand[best][0];
  p->arow = cand[best][1];
  p->stages = cand[best][2];
  p->pingpong = cand[best][3] != 0;
  jk_mm_kernel_free(e, &p->main);
  p->main = best_k;
  p->tuned = true;
  char key[512], choice[128];
  jk_mm_tuning_key(p, kind, key, sizeof key);
  jk_mm_choice_format(p, choice, sizeof choice);
  jk_log(e, JITK_LOG_INFO, "matmul %s autotune: %s (%.4f ms) for %s", p->name, choice,
         (double)best_ms, key);
  return jk_tuning_put(e, key, choice);
}
