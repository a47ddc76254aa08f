/*
 * Autotuning a matmul plan: every tile configuration that fits, each
 * timed on the caller's operands (where the tiles are too few to fill the
 * device, also split into several counts of K slices), the fastest kept
 * on the plan and in the cache's tuning table.
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
  if (p == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_autotune: plan is NULL");
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
      p->d.has_a_scale || p->d.has_b_scale || p->d.has_d_scale || p->d.has_amax_d;
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
  /* Each timed run would read the D of the run before as its C. */
  if (ds->has_c && c == d)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul %s: autotuning runs the product many times, so D must not be C "
                   "(each run would read the last one's D as C): pass a D of its own",
                   p->name);
  if ((((uintptr_t)a | (uintptr_t)b) & 15) != 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul %s: autotuning times the tensor-core kernels, which need A and B "
                   "16-byte aligned",
                   p->name);
  /* The candidates: {bn, arow, stages, pingpong, swap}; where A and B may
   * swap (wgmma, 16-bit or tf32) and M is small, also swapped kernels
   * with the narrowest tile that holds M, at the most stages and at
   * half as many (not with JITK_MM_SWAP=0). */
  int cand[6][5] = {
      {128, 128, 5, 1, 0}, {128, 128, 4, 1, 0}, {256, 128, 3, 0, 0}, {128, 128, 4, 0, 0}};
  static const int mma[][5] = {
      {256, 128, 3, 0, 0}, {128, 64, 4, 0, 0}, {256, 64, 4, 0, 0}, {128, 128, 3, 0, 0}};
  /* FP8 with promotion: cooperative 128 x 128 tiles only (registers). */
  static const int promoted[][5] = {{128, 128, 5, 0, 0}, {128, 128, 4, 0, 0}, {128, 128, 3, 0, 0}};
  int ncand = 4;
  if (kind != JK_MM_WGMMA) {
    memcpy(cand, mma, sizeof mma);
  } else if (jk_mm_promotes(p, kind)) {
    memcpy(cand, promoted, sizeof promoted);
    ncand = 3;
  }
  const char *no_swap = getenv("JITK_MM_SWAP");
  if (jk_mm_swap_allowed(p, kind) && ds->m <= 256 &&
      (no_swap == NULL || strcmp(no_swap, "0") != 0)) {
    const int bn = jk_mm_swap_bn(ds->m), most = jk_mm_swap_stages(bn);
    const int swapped[2][5] = {{bn, 128, most, 0, 1}, {bn, 128, most / 2 > 2 ? most / 2 : 2, 0, 1}};
    memcpy(cand[ncand], swapped, sizeof swapped);
    ncand += 2;
  }
  const int keep[6] = {p->bn, p->arow, p->stages, p->pingpong, p->split, p->swap};
  /* Split-K candidates: a forced split stays; otherwise, where the tiles
   * are few enough for it to pay (jk_mm_auto_split's test), a second
   * kernel per tile shape that splits, timed at several slice counts (the
   * count is a launch parameter, so one compile serves them all). */
  static const int counts[] = {2, 3, 4, 6, 8, 12, 16, 24, 32};
  const bool forced = ds->split_k >= 1;
  /* The plan's own configuration (the default, or a choice stored
   * earlier) is timed too, before the candidates and after them, and its
   * faster time is what the fastest candidate must beat by more than the
   * noise of a median of ten (1 %). So a tuned plan is never slower than
   * the one it replaces, and a near tie does not flip between runs. */
  mm_timed own_timed = {p, &p->main, stream, &ops};
  float own_ms = 0, own_again = 0;
  st = jk_time_median(e, stream, 3, 10, run_timed, &own_timed, "the plan's configuration", &own_ms);
  if (st != JITK_OK) return st;
  float best_ms = 0;
  int best = -1, best_split = 1;
  mm_kernel best_k;
  memset(&best_k, 0, sizeof best_k);
  for (int i = 0; i < ncand && st == JITK_OK; i++) {
    if (!jk_mm_choice_fits(p, kind, cand[i][0], cand[i][1], cand[i][2], cand[i][3],
                           cand[i][4] != 0))
      continue;
    p->bn = cand[i][0];
    p->arow = cand[i][1];
    p->stages = cand[i][2];
    p->pingpong = cand[i][3] != 0;
    p->swap = cand[i][4] != 0;
    const int64_t kt = jk_mm_ktiles(p, kind);
    if (forced && ds->split_k > kt) continue; /* the forced split needs the K-tiles */
    const int64_t rows = p->swap ? ds->n : ds->m, cols = p->swap ? ds->m : ds->n;
    const int64_t bn = p->bn, tiles = ((rows + JK_MM_TILE - 1) / JK_MM_TILE) *
                                      ((cols + bn - 1) / bn) * ds->batch;
    const bool try_split =
        !forced && ds->a_dtype != JITK_FLOAT64 && kt >= 8 && tiles < 4 * (int64_t)jk_mm_sms(e);
    for (int split_kernel = 0; split_kernel < (forced ? 1 : 1 + try_split) && st == JITK_OK;
         split_kernel++) {
      p->split = forced ? ds->split_k : split_kernel ? 2 : 1;
      mm_kernel k;
      st = jk_mm_build(p, kind, p->main.spec.acc, &k);
      if (st != JITK_OK) {
        jk_mm_kernel_free(e, &k);
        break;
      }
      /* The median of 10 runs after 3 of warm-up, at each slice count. */
      float k_ms = 0;
      int k_split = k.splits;
      for (size_t ci = 0; ci < (split_kernel ? sizeof counts / sizeof counts[0] : 1); ci++) {
        if (split_kernel) {
          if (counts[ci] > kt) break;
          k.splits = counts[ci];
        }
        float ms = 0;
        mm_timed timed = {p, &k, stream, &ops};
        st = jk_time_median(e, stream, 3, 10, run_timed, &timed, "a matmul candidate", &ms);
        if (st != JITK_OK) break;
        jk_log(e, JITK_LOG_DEBUG,
               "matmul %s autotune: bn %d, arow %d, %d stages%s%s, split %d: %.4f ms", p->name,
               cand[i][0], cand[i][1], cand[i][2], cand[i][3] ? ", ping-pong" : "",
               cand[i][4] ? ", A and B swapped" : "", k.splits, (double)ms);
        if (ci == 0 || ms < k_ms) {
          k_ms = ms;
          k_split = k.splits;
        }
      }
      k.splits = k_split;
      if (st == JITK_OK && (best < 0 || k_ms < best_ms)) {
        jk_mm_kernel_free(e, &best_k);
        best_k = k;
        best_ms = k_ms;
        best = i;
        best_split = k_split;
      } else {
        jk_mm_kernel_free(e, &k);
      }
    }
  }
  if (st == JITK_OK)
    st = jk_time_median(e, stream, 3, 10, run_timed, &own_timed, "the plan's configuration",
                        &own_again);
  if (own_again < own_ms) own_ms = own_again;
  const bool own_kept = st == JITK_OK && (best < 0 || !(best_ms < 0.99f * own_ms));
  if (st != JITK_OK || own_kept) {
    jk_mm_kernel_free(e, &best_k);
    p->bn = keep[0];
    p->arow = keep[1];
    p->stages = keep[2];
    p->pingpong = keep[3] != 0;
    p->split = keep[4];
    p->swap = keep[5] != 0;
    if (st != JITK_OK) return st;
  } else {
    p->bn = cand[best][0];
    p->arow = cand[best][1];
    p->stages = cand[best][2];
    p->pingpong = cand[best][3] != 0;
    p->swap = cand[best][4] != 0;
    p->split = best_split;
    jk_mm_kernel_free(e, &p->main);
    p->main = best_k;
  }
  /* The choice is stored even when it is the plan's own, so that plans
   * made later (in other processes too) take it without timing anything. */
  p->tuned = true;
  char key[512], choice[128];
  jk_mm_tuning_key(p, kind, key, sizeof key);
  jk_mm_choice_format(p, choice, sizeof choice);
  jk_log(e, JITK_LOG_INFO, "matmul %s autotune: %s (%.4f ms; the plan's own %.4f ms%s) for %s",
         p->name, choice, (double)(own_kept ? own_ms : best_ms), (double)own_ms,
         own_kept ? ", kept" : "", key);
  return jk_tuning_put(e, key, choice);
}
