/*
 * Reduction kernels on a GPU, on fresh random data against float64 host
 * references: every subset of axes of 1-D to 4-D inputs (one with an axis
 * of extent 1) with and without keepdims, transposed and reversed views,
 * broadcasting between inputs, the strategies (whole array, rows, columns,
 * split or not), every dtype, float16 accumulating in float32, integer and
 * complex sums, an argmax through a struct of the preamble, determinism
 * over 10 runs, empty reductions, more than 2^31 elements, and split
 * reductions folding their chunks in one kernel, on concurrent streams
 * too. Outputs are poisoned before each run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"

/* Host reference: the sum of f(x) over the reduced axes of a C-order
 * (or strided) double array, for one output index. */
typedef struct ref_case {
  int ndim;
  int64_t shape[4];
  int64_t strides[4]; /* elements, of the input view */
  int64_t offset;
  unsigned mask; /* reduced axes */
} ref_case;

static void reference_sums(const ref_case *c, const double *x, double *out, int64_t nout) {
  for (int64_t o = 0; o < nout; o++) out[o] = 0;
  int64_t idx[4] = {0, 0, 0, 0}, total = 1;
  for (int d = 0; d < c->ndim; d++) total *= c->shape[d];
  for (int64_t n = 0; n < total; n++) {
    int64_t rem = n, off = c->offset, o = 0;
    for (int d = c->ndim - 1; d >= 0; d--) {
      idx[d] = rem % c->shape[d];
      rem /= c->shape[d];
    }
    for (int d = 0; d < c->ndim; d++) {
      off += idx[d] * c->strides[d];
      if (!(c->mask >> d & 1)) o = o * c->shape[d] + idx[d];
    }
    out[o] += x[off];
  }
}

/* The same walk for the max of x over the reduced axes (-INFINITY for an
 * output of no element). */
static void reference_max(const ref_case *c, const double *x, double *out, int64_t nout) {
  for (int64_t o = 0; o < nout; o++) out[o] = -INFINITY;
  int64_t idx[4] = {0, 0, 0, 0}, total = 1;
  for (int d = 0; d < c->ndim; d++) total *= c->shape[d];
  for (int64_t n = 0; n < total; n++) {
    int64_t rem = n, off = c->offset, o = 0;
    for (int d = c->ndim - 1; d >= 0; d--) {
      idx[d] = rem % c->shape[d];
      rem /= c->shape[d];
    }
    for (int d = 0; d < c->ndim; d++) {
      off += idx[d] * c->strides[d];
      if (!(c->mask >> d & 1)) o = o * c->shape[d] + idx[d];
    }
    if (x[off] > out[o]) out[o] = x[off];
  }
}

/* A C-order case of `nd` dimensions reduced over the axes in `mask`: its
 * reference walk, the axes, the outputs' shape, and the element counts. */
typedef struct red_shape {
  ref_case rc;
  int axes[4], na, ond;
  int64_t oshape[4], n, nout;
} red_shape;

static red_shape red_shape_of(int nd, const int64_t *shape, unsigned mask) {
  red_shape sh = {{nd, {0}, {0}, 0, mask}, {0}, 0, 0, {0}, 1, 1};
  for (int64_t d = nd - 1, acc = 1; d >= 0; d--) {
    sh.rc.shape[d] = shape[d];
    sh.rc.strides[d] = acc;
    acc *= shape[d];
  }
  for (int d = 0; d < nd; d++) {
    sh.n *= shape[d];
    if (mask >> d & 1)
      sh.axes[sh.na++] = d;
    else
      sh.oshape[sh.ond++] = shape[d], sh.nout *= shape[d];
  }
  return sh;
}

/* Every subset of axes of 1-D to 4-D float64 inputs, contiguous, then
 * transposed (axes reversed), then with the last axis reversed; keepdims
 * on odd subsets. The sum of x*x + 1, checked in every output. */
Test(reduction, every_axis_subset) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x * x + 1", "a + b", "y = a", "0", NULL, "ssq",
                                 NULL, &k));
  /* The 3-D shape has an axis of extent 1, reduced or kept like the others. */
  static const int64_t shapes[4][4] = {{1001}, {37, 45}, {6, 1, 23}, {3, 5, 7, 11}};
  uint64_t seed = 0x5EED;
  for (int nd = 1; nd <= 4; nd++) {
    int64_t total = 1;
    for (int d = 0; d < nd; d++) total *= shapes[nd - 1][d];
    double *hx = malloc((size_t)total * 8), *want = malloc((size_t)total * 8),
           *got = malloc((size_t)total * 8), *sq = malloc((size_t)total * 8);
    for (int64_t i = 0; i < total; i++) {
      hx[i] = jt_uniform(&seed);
      sq[i] = hx[i] * hx[i] + 1;
    }
    double *dx = jt_dev_alloc(e, (size_t)total * 8), *dy = jt_dev_alloc(e, (size_t)total * 8);
    jt_to_dev(e, dx, hx, (size_t)total * 8);
    for (int view = 0; view < 3; view++) {
      ref_case c = {nd, {0}, {0}, 0, 0};
      /* The view's shape and strides over the same buffer. */
      int64_t cstr[4], acc = 1;
      for (int d = nd - 1; d >= 0; d--) {
        cstr[d] = acc;
        acc *= shapes[nd - 1][d];
      }
      for (int d = 0; d < nd; d++) {
        int s = view == 1 ? nd - 1 - d : d;
        c.shape[d] = shapes[nd - 1][s];
        c.strides[d] = cstr[s];
      }
      if (view == 2) {
        c.strides[nd - 1] = -c.strides[nd - 1];
        c.offset = (c.shape[nd - 1] - 1) * cstr[nd - 1];
      }
      for (unsigned mask = 0; mask < (1u << nd); mask++) {
        c.mask = mask;
        int axes[4], na = 0, keep = mask & 1, ond = 0;
        int64_t oshape[4], nout = 1;
        for (int d = 0; d < nd; d++) {
          if (mask >> d & 1) {
            axes[na++] = d - (d % 2 ? nd : 0); /* some negative */
            if (keep) oshape[ond++] = 1;
          } else {
            oshape[ond++] = c.shape[d];
            nout *= c.shape[d];
          }
        }
        reference_sums(&c, sq, want, nout);
        DLTensor tx = jt_tensor(dx, JITK_FLOAT64, nd, c.shape, c.strides);
        tx.byte_offset = (uint64_t)c.offset * 8;
        DLTensor ty = jt_tensor(dy, JITK_FLOAT64, ond, oshape, NULL);
        jt_poison(e, dy, (size_t)nout * 8);
        jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
        JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axes, na, keep, NULL));
        jt_to_host(e, got, dy, (size_t)nout * 8);
        for (int64_t o = 0; o < nout; o++)
          cr_assert(fabs(got[o] - want[o]) <= 1e-12 * (fabs(want[o]) + 1),
                    "%d-D, view %d, axes mask %u, output %lld: %.17g, want %.17g", nd, view, mask,
                    (long long)o, got[o], want[o]);
      }
    }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    free(hx);
    free(want);
    free(got);
    free(sq);
  }
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* The strategies on float32: a whole array (split in chunks), rows (a
 * block per row, and a warp per short row), columns (split across blocks,
 * and not), each against float64 sums; the source says which strategy ran;
 * allocated outputs. Then ten runs of the whole-array sum give the same
 * bits. */
Test(reduction, strategies_and_determinism) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k = NULL;
  JT_OK(e,
        jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "sum", NULL, &k));
  struct {
    int64_t rows, cols;
    int axis; /* -1: all */
    const char *strategy;
  } cases[] = {
      {1, 3000007, -1, "along reduced"}, {1000, 4099, 1, "along reduced"},
      {5000, 37, 1, "along reduced"},    {4096, 3001, 0, "across outputs"},
      {300000, 7, 0, "across outputs"},  {64, 70000, 0, "across outputs"},
  };
  uint64_t seed = 0xC0FFEE;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t R = cases[c].rows, C = cases[c].cols, n = R * C;
    float *hx = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) hx[i] = (float)jt_uniform(&seed);
    float *dx = jt_dev_alloc(e, (size_t)n * 4);
    jt_to_dev(e, dx, hx, (size_t)n * 4);
    int64_t shape[2] = {R, C};
    DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 2, shape, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx)};
    DLManagedTensor *out[1] = {NULL};
    int axis = cases[c].axis;
    JT_OK(e, jitk_reduction_launch(k, NULL, args, 1, axis < 0 ? NULL : &axis, axis < 0 ? -1 : 1, 0,
                                   out));
    const char *src;
    JT_OK(e, jitk_reduction_source(k, &src));
    cr_assert(strstr(src, cases[c].strategy) != NULL, "case %zu: %.200s", c, src);
    int64_t nout = axis < 0 ? 1 : axis == 0 ? C : R;
    cr_assert_eq(out[0]->dl_tensor.ndim, axis < 0 ? 0 : 1);
    float *got = malloc((size_t)nout * 4);
    jt_to_host(e, got, out[0]->dl_tensor.data, (size_t)nout * 4);
    for (int64_t o = 0; o < nout; o++) {
      double want = 0, mag = 0;
      int64_t len = axis < 0 ? n : axis == 0 ? R : C;
      for (int64_t j = 0; j < len; j++) {
        double v = axis < 0 ? hx[j] : axis == 0 ? hx[j * C + o] : hx[o * C + j];
        want += v;
        mag += fabs(v);
      }
      cr_assert(fabs(got[o] - want) <= 1e-5 * mag + 1e-6, "case %zu, output %lld: %.9g, want %.9g",
                c, (long long)o, (double)got[o], want);
    }
    if (axis < 0) {
      uint32_t first;
      memcpy(&first, got, 4);
      for (int run = 0; run < 10; run++) {
        DLManagedTensor *again[1] = {NULL};
        JT_OK(e, jitk_reduction_launch(k, NULL, args, 1, NULL, -1, 0, again));
        uint32_t bits;
        jt_to_host(e, &bits, again[0]->dl_tensor.data, 4);
        cr_assert_eq(bits, first, "run %d: %08x, first run %08x", run, bits, first);
        again[0]->deleter(again[0]);
      }
    }
    out[0]->deleter(out[0]);
    free(got);
    free(hx);
    JT_OK(e, jitk_device_free(e, dx, NULL));
  }
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* float16 accumulated in float32, an int32 sum into int64, a complex64
 * sum, a scalar and a broadcast weight in map_expr, and post_map_expr
 * using _in_ind.size() (a mean). */
Test(reduction, types_scalars_broadcast) {
  jitk_engine *e = jt_gpu_engine();
  enum { R = 333, C = 517 };
  uint64_t seed = 0xFACE;
  /* Mean over rows of float16 x * w * s, accumulated in float32. */
  jitk_reduction *mean = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x, T w, float32 s", "float32 y", "(float)x * (float)w * s",
                                 "a + b", "y = a / _in_ind.size()", "0", "float32", "wmean", NULL,
                                 &mean));
  uint16_t *hx = malloc(R * C * 2), *hw = malloc(C * 2);
  for (int i = 0; i < R * C; i++) hx[i] = jitk_float_to_half((float)jt_uniform(&seed));
  for (int j = 0; j < C; j++) hw[j] = jitk_float_to_half((float)jt_uniform(&seed));
  void *dx = jt_dev_alloc(e, R * C * 2), *dw = jt_dev_alloc(e, C * 2), *dy = jt_dev_alloc(e, R * 8);
  jt_to_dev(e, dx, hx, R * C * 2);
  jt_to_dev(e, dw, hw, C * 2);
  int64_t sx[2] = {R, C}, sw[1] = {C}, sy[1] = {R};
  DLTensor tx = jt_tensor(dx, JITK_FLOAT16, 2, sx, NULL),
           tw = jt_tensor(dw, JITK_FLOAT16, 1, sw, NULL);
  DLTensor ty = jt_tensor(dy, JITK_FLOAT32, 1, sy, NULL);
  jt_poison(e, dy, R * 4);
  jitk_arg margs[] = {jitk_arg_array(&tx), jitk_arg_array(&tw), jitk_arg_f32(0.5f),
                      jitk_arg_array(&ty)};
  int axis = 1;
  JT_OK(e, jitk_reduction_launch(mean, NULL, margs, 4, &axis, 1, 0, NULL));
  float got[R];
  jt_to_host(e, got, dy, R * 4);
  for (int i = 0; i < R; i++) {
    double want = 0;
    for (int j = 0; j < C; j++)
      want += (double)jitk_half_to_float(hx[i * C + j]) * jitk_half_to_float(hw[j]) * 0.5;
    want /= C;
    cr_assert(fabs(got[i] - want) <= 1e-5, "mean row %d: %.9g, want %.9g", i, (double)got[i], want);
  }
  jitk_reduction_destroy(mean);

  /* int32 into int64 over columns: exact. */
  jitk_reduction *isum = NULL;
  JT_OK(e, jitk_reduction_create(e, "int32 x", "int64 y", "(long long)x", "a + b", "y = a", "0",
                                 "int64", "isum", NULL, &isum));
  int32_t *hi = malloc(R * C * 4);
  for (int i = 0; i < R * C; i++) hi[i] = (int32_t)(jt_next(&seed) >> 33) - (1 << 30);
  void *di = jt_dev_alloc(e, R * C * 4);
  jt_to_dev(e, di, hi, R * C * 4);
  DLTensor ti = jt_tensor(di, JITK_INT32, 2, sx, NULL);
  int64_t so[1] = {C};
  DLTensor to = jt_tensor(dy, JITK_INT64, 1, so, NULL);
  void *dbig = jt_dev_alloc(e, C * 8);
  to.data = dbig;
  jt_poison(e, dbig, C * 8);
  jitk_arg iargs[] = {jitk_arg_array(&ti), jitk_arg_array(&to)};
  axis = 0;
  JT_OK(e, jitk_reduction_launch(isum, NULL, iargs, 2, &axis, 1, 0, NULL));
  int64_t igot[C];
  jt_to_host(e, igot, dbig, C * 8);
  for (int j = 0; j < C; j++) {
    int64_t want = 0;
    for (int i = 0; i < R; i++) want += hi[i * C + j];
    cr_assert_eq(igot[j], want, "int sum column %d", j);
  }
  jitk_reduction_destroy(isum);

  /* complex64 over everything. */
  jitk_reduction *csum = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x * x", "a + b", "y = a", "0", NULL, "csum",
                                 NULL, &csum));
  float *hc = malloc(R * C * 8);
  for (int i = 0; i < 2 * R * C; i++) hc[i] = (float)jt_uniform(&seed);
  void *dc = jt_dev_alloc(e, R * C * 8);
  jt_to_dev(e, dc, hc, R * C * 8);
  DLTensor tc = jt_tensor(dc, JITK_COMPLEX64, 2, sx, NULL);
  jitk_arg cargs[] = {jitk_arg_array(&tc)};
  DLManagedTensor *cout[1];
  JT_OK(e, jitk_reduction_launch(csum, NULL, cargs, 1, NULL, -1, 0, cout));
  float cg[2];
  jt_to_host(e, cg, cout[0]->dl_tensor.data, 8);
  double wr = 0, wi = 0, mag = 0;
  for (int i = 0; i < R * C; i++) {
    double re = hc[2 * i], im = hc[2 * i + 1];
    wr += re * re - im * im;
    wi += 2 * re * im;
    mag += re * re + im * im;
  }
  cr_assert(fabs(cg[0] - wr) <= 1e-5 * mag && fabs(cg[1] - wi) <= 1e-5 * mag,
            "complex sum %g%+gi, want %g%+gi", (double)cg[0], (double)cg[1], wr, wi);
  cout[0]->deleter(cout[0]);
  jitk_reduction_destroy(csum);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dw, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  JT_OK(e, jitk_device_free(e, di, NULL));
  JT_OK(e, jitk_device_free(e, dbig, NULL));
  JT_OK(e, jitk_device_free(e, dc, NULL));
  free(hx);
  free(hw);
  free(hi);
  free(hc);
  jitk_engine_destroy(e);
}

/* Column argmax through a struct of the preamble, _j the row; then max
 * without an identity; empty reductions. */
Test(reduction, argmax_no_identity_empty) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction_options o = {
      "struct vi { float v; long long i; };\n"
      "__device__ __forceinline__ vi make_vi(float v, long long i) { vi r; r.v = v; r.i = i; "
      "return r; }\n",
      NULL, 0};
  jitk_reduction *am = NULL;
  JT_OK(e, jitk_reduction_create(e, "float32 x", "int64 y", "make_vi(x, _j)",
                                 "(b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a", "y = a.i",
                                 NULL, "vi", "argmax", &o, &am));
  enum { R = 1001, C = 263 };
  uint64_t seed = 0xA5A5;
  float *hx = malloc(R * C * 4);
  /* Few distinct values, so that ties happen and the lowest row wins. */
  for (int i = 0; i < R * C; i++) hx[i] = (float)(int)(jt_uniform(&seed) * 50);
  float *dx = jt_dev_alloc(e, R * C * 4);
  jt_to_dev(e, dx, hx, R * C * 4);
  int64_t sx[2] = {R, C}, sy[1] = {C};
  int64_t *dy = jt_dev_alloc(e, C * 8);
  DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 2, sx, NULL),
           ty = jt_tensor(dy, JITK_INT64, 1, sy, NULL);
  jt_poison(e, dy, C * 8);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  int axis = 0;
  JT_OK(e, jitk_reduction_launch(am, NULL, args, 2, &axis, 1, 0, NULL));
  int64_t got[C];
  jt_to_host(e, got, dy, C * 8);
  for (int j = 0; j < C; j++) {
    int best = 0;
    for (int i = 1; i < R; i++)
      if (hx[i * C + j] > hx[best * C + j]) best = i;
    cr_assert_eq(got[j], best, "column %d: row %lld, want %d", j, (long long)got[j], best);
  }

  /* max without identity, over rows. */
  jitk_reduction *mx = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "max(a, b)", "y = a", NULL, NULL, "rmax",
                                 NULL, &mx));
  for (int i = 0; i < R * C; i++) hx[i] = (float)jt_uniform(&seed) - 2.0f; /* all negative */
  jt_to_dev(e, dx, hx, R * C * 4);
  axis = 1;
  DLManagedTensor *out[1];
  JT_OK(e, jitk_reduction_launch(mx, NULL, args, 1, &axis, 1, 1, out));
  cr_assert_eq(out[0]->dl_tensor.ndim, 2, "keepdims");
  cr_assert(out[0]->dl_tensor.shape[0] == R && out[0]->dl_tensor.shape[1] == 1);
  float rmax[R];
  jt_to_host(e, rmax, out[0]->dl_tensor.data, R * 4);
  for (int i = 0; i < R; i++) {
    float want = hx[i * C];
    for (int j = 1; j < C; j++) want = hx[i * C + j] > want ? hx[i * C + j] : want;
    cr_assert_eq(rmax[i], want, "row %d", i);
  }
  out[0]->deleter(out[0]);

  /* Empty: the identity for a sum; an error without one. */
  jitk_reduction *sum = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "esum", NULL,
                                 &sum));
  int64_t se[2] = {4, 0};
  DLTensor te = jt_tensor(dx, JITK_FLOAT32, 2, se, NULL);
  jitk_arg eargs[] = {jitk_arg_array(&te)};
  JT_OK(e, jitk_reduction_launch(sum, NULL, eargs, 1, &axis, 1, 0, out));
  float zeros[4];
  jt_to_host(e, zeros, out[0]->dl_tensor.data, 16);
  for (int i = 0; i < 4; i++) cr_assert_eq(zeros[i], 0.0f);
  out[0]->deleter(out[0]);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "needs an identity",
           jitk_reduction_launch(mx, NULL, eargs, 1, &axis, 1, 0, out));
  /* Bad axes, a wrong output shape. */
  int bad = 2;
  JT_FAILS(e, JITK_ERR_AXIS, "out of range",
           jitk_reduction_launch(sum, NULL, args, 1, &bad, 1, 0, out));
  int twice[2] = {0, -2};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "given twice",
           jitk_reduction_launch(sum, NULL, args, 1, twice, 2, 0, out));
  DLTensor wrong = jt_tensor(dy, JITK_FLOAT32, 1, sy, NULL);
  jitk_arg wargs[] = {jitk_arg_array(&tx), jitk_arg_array(&wrong)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "reduced shape",
           jitk_reduction_launch(sum, NULL, wargs, 2, &axis, 1, 0, NULL));
  jitk_reduction_destroy(sum);
  jitk_reduction_destroy(mx);
  jitk_reduction_destroy(am);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  free(hx);
  jitk_engine_destroy(e);
}

/* More than 2^31 elements: the 64-bit index path, an exact integer sum of
 * every element, then of every row of a 2-D view. */
Test(reduction, past_two_to_the_31, .timeout = 120) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "uint8 x", "int64 y", "(long long)x", "a + b", "y = a", "0",
                                 "int64", "bigsum", NULL, &k));
  const int64_t rows = 3, cols = 715827889; /* 2,147,483,667 elements */
  const size_t n = (size_t)(rows * cols);
  uint8_t *h = malloc(n);
  for (size_t i = 0; i < n; i++) h[i] = (uint8_t)(i * 2654435761u >> 24);
  void *dx = jt_dev_alloc(e, n);
  jt_to_dev(e, dx, h, n);
  int64_t shape[2] = {rows, cols};
  DLTensor tx = jt_tensor(dx, JITK_UINT8, 2, shape, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx)};
  DLManagedTensor *out[1];
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 1, NULL, -1, 0, out));
  const char *src;
  JT_OK(e, jitk_reduction_source(k, &src));
  cr_assert(strstr(src, "64-bit index") != NULL, "the 64-bit path was taken");
  int64_t got, want = 0, rw[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    want += h[i];
    rw[i / (size_t)cols] += h[i];
  }
  jt_to_host(e, &got, out[0]->dl_tensor.data, 8);
  cr_assert_eq(got, want, "sum %lld, want %lld", (long long)got, (long long)want);
  out[0]->deleter(out[0]);
  int axis = 1;
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 1, &axis, 1, 0, out));
  int64_t rg[3];
  jt_to_host(e, rg, out[0]->dl_tensor.data, 24);
  for (int r = 0; r < 3; r++) cr_assert_eq(rg[r], rw[r], "row %d", r);
  out[0]->deleter(out[0]);
  free(h);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* Every dtype: sums of small integers (exact in every dtype, int8's range
 * included) over the rows and over the columns of a 5 x 20 array; bool
 * counts its true elements into int64. */
Test(reduction, every_dtype) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k = NULL, *count = NULL;
  JT_OK(e,
        jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "dsum", NULL, &k));
  JT_OK(e, jitk_reduction_create(e, "T x", "int64 y", "x ? 1 : 0", "a + b", "y = a", "0", "int64",
                                 "count", NULL, &count));
  enum { R = 5, C = 20 };
  uint64_t seed = 0xD7E5;
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info((jitk_dtype)d, &info));
    bool is_bool = d == JITK_BOOL, is_unsigned = info.kind == 'u' || is_bool;
    int vals[R * C];
    unsigned char host[R * C * 16], out[C * 16];
    for (int i = 0; i < R * C; i++) {
      vals[i] = (int)(jt_next(&seed) % 7) - (is_unsigned ? 0 : 3);
      if (is_bool) vals[i] = vals[i] > 3;
      /* An 8-bit float holds integers exactly only up to 16 (e4m3) or 8
       * (e5m2), and it sums in its own type: every fifth column holds
       * +1 or -1, so that every partial sum in any order is exact. */
      if (d == JITK_FLOAT8_E4M3 || d == JITK_FLOAT8_E5M2)
        vals[i] = i % 5 != 0 ? 0 : vals[i] < 0 ? -1 : 1;
      jt_write_int(host, (jitk_dtype)d, (size_t)i, vals[i]);
    }
    void *dx = jt_dev_alloc(e, R * C * info.size), *dy = jt_dev_alloc(e, C * 8 * 2);
    jt_to_dev(e, dx, host, R * C * info.size);
    int64_t sx[2] = {R, C};
    DLTensor tx = jt_tensor(dx, (jitk_dtype)d, 2, sx, NULL);
    for (int axis = 0; axis < 2; axis++) {
      int64_t nout = axis == 0 ? C : R, sy[1] = {nout};
      jitk_dtype od = is_bool ? JITK_INT64 : (jitk_dtype)d;
      DLTensor ty = jt_tensor(dy, od, 1, sy, NULL);
      jt_poison(e, dy, C * 16);
      jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
      JT_OK(e, jitk_reduction_launch(is_bool ? count : k, NULL, args, 2, &axis, 1, 0, NULL));
      jt_to_host(e, out, dy, (size_t)nout * (is_bool ? 8 : info.size));
      for (int o = 0; o < nout; o++) {
        long want = 0;
        for (int j = 0; j < (axis == 0 ? R : C); j++)
          want += vals[axis == 0 ? j * C + o : o * C + j];
        double got =
            is_bool ? (double)((int64_t *)out)[o] : jt_read_real(out, (jitk_dtype)d, (size_t)o);
        cr_assert_eq(got, (double)want, "%s, axis %d, output %d: %g, want %ld", info.name, axis, o,
                     got, want);
        if (info.kind == 'c')
          cr_assert_eq(jt_read_imag(out, (jitk_dtype)d, (size_t)o), 0.0, "%s imaginary", info.name);
      }
    }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
  }
  jitk_reduction_destroy(k);
  jitk_reduction_destroy(count);
  jitk_engine_destroy(e);
}

/* jitk_reduction_outputs says what the launch allocates, for every axis
 * subset of a 3-D input with and without keepdims, and the sums agree. */
Test(reduction, outputs_match_the_launch) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y, int64 n", "x", "a + b",
                                 "y = a; n = _in_ind.size()", "0", NULL, "sum_n", NULL, &k));
  int64_t sh[3] = {3, 4, 5};
  double hx[60];
  for (int i = 0; i < 60; i++) hx[i] = i;
  double *dx = jt_dev_alloc(e, sizeof hx);
  jt_to_dev(e, dx, hx, sizeof hx);
  DLTensor tx = jt_tensor(dx, JITK_FLOAT64, 3, sh, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx)};
  for (unsigned mask = 0; mask < 8; mask++)
    for (int keep = 0; keep < 2; keep++) {
      int axes[3], na = 0;
      for (int d = 0; d < 3; d++)
        if (mask & (1u << d)) axes[na++] = d;
      jitk_output_spec specs[2];
      JT_OK(e, jitk_reduction_outputs(k, args, 1, axes, na, keep, specs));
      DLManagedTensor *outs[2] = {NULL, NULL};
      JT_OK(e, jitk_reduction_launch(k, NULL, args, 1, axes, na, keep, outs));
      int64_t count = 1, reduced = 1;
      for (int d = 0; d < 3; d++)
        if (mask & (1u << d)) reduced *= sh[d];
      for (int j = 0; j < 2; j++) {
        const DLTensor *t = &outs[j]->dl_tensor;
        cr_assert_eq(t->ndim, specs[j].ndim, "mask %u keep %d", mask, keep);
        cr_assert_eq(specs[j].dtype, j == 0 ? JITK_FLOAT64 : JITK_INT64);
        for (int d = 0; d < t->ndim; d++) cr_assert_eq(t->shape[d], specs[j].shape[d]);
      }
      for (int d = 0; d < outs[0]->dl_tensor.ndim; d++) count *= outs[0]->dl_tensor.shape[d];
      double total = 0, got[60];
      int64_t ns[60];
      jt_to_host(e, got, outs[0]->dl_tensor.data, (size_t)count * 8);
      jt_to_host(e, ns, outs[1]->dl_tensor.data, (size_t)count * 8);
      for (int64_t o = 0; o < count; o++) {
        total += got[o];
        cr_assert_eq(ns[o], reduced, "mask %u: n %lld", mask, (long long)ns[o]);
      }
      cr_assert_eq(total, 59 * 60 / 2, "mask %u keep %d", mask, keep);
      outs[0]->deleter(outs[0]);
      outs[1]->deleter(outs[1]);
    }
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* The layouts of short rows (groups of fewer lanes than a warp, several
 * rows a warp), of narrow columns and middle axes (a block per row of
 * outputs, several reduced rows a warp), and of many outputs of few rows
 * (a warp owns a row of outputs), of outputs of one element or one
 * vector (several outputs a thread), each with a sum and with a max
 * that has no identity (the partial results carry whether they hold
 * anything, and groups past the last output hold nothing), against host
 * references; the packed column sums split across the device give the
 * same bits in ten runs. */
Test(reduction, short_rows_and_narrow_columns, .timeout = 120) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *sum = NULL, *mx = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "sum", NULL,
                                 &sum));
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "max(a, b)", "y = a", NULL, NULL, "maxr",
                                 NULL, &mx));
  struct {
    int ndim;
    int64_t shape[3];
    unsigned mask;
  } cases[] = {
      {2, {1 << 20, 32}, 2},
      {2, {100003, 3}, 2},
      {2, {65537, 1}, 2},
      {2, {50001, 12}, 2},
      {2, {1 << 22, 4}, 1},
      {2, {300001, 12}, 1},
      {2, {200003, 1}, 1},
      {3, {64, 4096, 16}, 2},
      {3, {33, 1000, 5}, 2},
      {3, {7, 65536, 2}, 5},
      /* Many outputs of few rows: a warp owns each row of outputs (32, 16,
       * 12 and 5 outputs, 1, 2, 2 and 6 rows at a time). */
      {2, {16, 1 << 20}, 1},
      {3, {65536, 16, 16}, 2},
      {3, {40000, 7, 12}, 2},
      {3, {300000, 3, 5}, 2},
      {2, {1 << 20, 1}, 2},
      /* One group an output, several outputs a thread: rows of one
       * 16-byte vector, and axes of extent 1 between kept ones. */
      {2, {100001, 4}, 2},
      {3, {1000, 1, 37}, 2},
      {3, {3, 70001, 1}, 4},
      /* Kept and reduced axes interleaved: vectors along runs of 16 and 6
       * of the innermost reduced axis, none along runs of 7. */
      {3, {4096, 16, 16}, 5},
      {3, {1000, 7, 6}, 5},
      {3, {999, 5, 7}, 5},
  };
  uint64_t seed = 0x5407;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int nd = cases[c].ndim;
    int64_t n = 1, nout = 1, oshape[3];
    int axes[3], na = 0, ond = 0;
    for (int d = 0; d < nd; d++) {
      n *= cases[c].shape[d];
      if (cases[c].mask >> d & 1) {
        axes[na++] = d;
      } else {
        oshape[ond++] = cases[c].shape[d];
        nout *= cases[c].shape[d];
      }
    }
    float *hx = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) hx[i] = (float)jt_uniform(&seed);
    double *want = malloc((size_t)nout * 8), *mag = malloc((size_t)nout * 8),
           *wmax = malloc((size_t)nout * 8);
    ref_case rc = {nd, {0}, {0}, 0, cases[c].mask};
    int64_t acc = 1;
    for (int d = nd - 1; d >= 0; d--) {
      rc.shape[d] = cases[c].shape[d];
      rc.strides[d] = acc;
      acc *= cases[c].shape[d];
    }
    double *hd = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) hd[i] = hx[i];
    reference_sums(&rc, hd, want, nout);
    reference_max(&rc, hd, wmax, nout);
    for (int64_t i = 0; i < n; i++) hd[i] = fabs(hx[i]);
    reference_sums(&rc, hd, mag, nout);
    float *dx = jt_dev_alloc(e, (size_t)n * 4), *dy = jt_dev_alloc(e, (size_t)nout * 4);
    jt_to_dev(e, dx, hx, (size_t)n * 4);
    DLTensor tx = jt_tensor(dx, JITK_FLOAT32, nd, rc.shape, NULL);
    DLTensor ty = jt_tensor(dy, JITK_FLOAT32, ond, oshape, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
    float *got = malloc((size_t)nout * 4);
    uint32_t *first = malloc((size_t)nout * 4);
    for (int run = 0; run < 10; run++) {
      jt_poison(e, dy, (size_t)nout * 4);
      JT_OK(e, jitk_reduction_launch(sum, NULL, args, 2, axes, na, 0, NULL));
      jt_to_host(e, got, dy, (size_t)nout * 4);
      if (run == 0) {
        memcpy(first, got, (size_t)nout * 4);
        for (int64_t o = 0; o < nout; o++)
          if (!(fabs(got[o] - want[o]) <= 1e-5 * mag[o] + 1e-6))
            cr_assert_fail("case %zu (sum), output %lld: %.9g, want %.9g", c, (long long)o,
                           (double)got[o], want[o]);
      } else {
        cr_assert(memcmp(first, got, (size_t)nout * 4) == 0, "case %zu: run %d changed the bits", c,
                  run);
      }
    }
    jt_poison(e, dy, (size_t)nout * 4);
    JT_OK(e, jitk_reduction_launch(mx, NULL, args, 2, axes, na, 0, NULL));
    jt_to_host(e, got, dy, (size_t)nout * 4);
    for (int64_t o = 0; o < nout; o++)
      if ((double)got[o] != wmax[o])
        cr_assert_fail("case %zu (max), output %lld: %.9g, want %.9g", c, (long long)o,
                       (double)got[o], wmax[o]);
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    free(hx);
    free(hd);
    free(want);
    free(mag);
    free(wmax);
    free(got);
    free(first);
  }
  jitk_reduction_destroy(sum);
  jitk_reduction_destroy(mx);
  jitk_engine_destroy(e);
}

/* Autotuned strategies: on a middle axis, interleaved kept and reduced
 * axes of 3-D and 4-D shapes, columns and short rows, a sum and a max
 * without identity are tuned on their arrays; the outputs the tuning
 * leaves, and three launches after it (which take the tuned strategy),
 * match the host references, and the launches give the same bits. */
Test(reduction, autotuned_layouts, .timeout = 120) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *sum = NULL, *mx = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "tsum", NULL,
                                 &sum));
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "max(a, b)", "y = a", NULL, NULL, "tmax",
                                 NULL, &mx));
  struct {
    int ndim;
    int64_t shape[4];
    unsigned mask;
  } cases[] = {
      {3, {256, 2048, 16}, 2}, {3, {4096, 16, 16}, 5},  {2, {4096, 256}, 1},
      {2, {300001, 7}, 2},     {4, {8, 32, 32, 64}, 7}, {4, {8, 32, 32, 64}, 10},
  };
  uint64_t seed = 0x7A7E;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    red_shape sh = red_shape_of(cases[c].ndim, cases[c].shape, cases[c].mask);
    ref_case rc = sh.rc;
    const int nd = cases[c].ndim, *axes = sh.axes, na = sh.na, ond = sh.ond;
    const int64_t n = sh.n, nout = sh.nout;
    int64_t *oshape = sh.oshape;
    float *hx = malloc((size_t)n * 4), *got = malloc((size_t)nout * 4),
          *first = malloc((size_t)nout * 4);
    double *hd = malloc((size_t)n * 8), *want = malloc((size_t)nout * 8),
           *mag = malloc((size_t)nout * 8), *wmax = malloc((size_t)nout * 8);
    for (int64_t i = 0; i < n; i++) hd[i] = hx[i] = (float)(jt_uniform(&seed) - 0.5);
    reference_sums(&rc, hd, want, nout);
    reference_max(&rc, hd, wmax, nout);
    for (int64_t i = 0; i < n; i++) hd[i] = fabs(hd[i]);
    reference_sums(&rc, hd, mag, nout);
    float *dx = jt_dev_alloc(e, (size_t)n * 4), *dy = jt_dev_alloc(e, (size_t)nout * 4);
    jt_to_dev(e, dx, hx, (size_t)n * 4);
    DLTensor tx = jt_tensor(dx, JITK_FLOAT32, nd, rc.shape, NULL);
    DLTensor ty = jt_tensor(dy, JITK_FLOAT32, ond, oshape, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
    for (int which = 0; which < 2; which++) {
      jitk_reduction *k = which == 0 ? sum : mx;
      jt_poison(e, dy, (size_t)nout * 4);
      JT_OK(e, jitk_reduction_autotune(k, NULL, args, 2, axes, na, 0));
      const char *src = NULL;
      JT_OK(e, jitk_reduction_source(k, &src));
      cr_log_info("case %zu %s: %.90s", c, which ? "max" : "sum", strchr(src, ',') + 2);
      for (int run = 0; run < 4; run++) {
        if (run > 0) {
          jt_poison(e, dy, (size_t)nout * 4);
          JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axes, na, 0, NULL));
        }
        jt_to_host(e, got, dy, (size_t)nout * 4);
        for (int64_t o = 0; o < nout; o++) {
          bool ok = which == 0 ? fabs(got[o] - want[o]) <= 1e-5 * mag[o] + 1e-6
                               : (double)got[o] == wmax[o];
          if (!ok)
            cr_assert_fail("case %zu (%s), %s, output %lld: %.9g, want %.9g", c,
                           which ? "max" : "sum", run ? "after tuning" : "left by the tuning",
                           (long long)o, (double)got[o], which ? wmax[o] : want[o]);
        }
        if (run == 1) memcpy(first, got, (size_t)nout * 4);
        if (run > 1)
          cr_assert(memcmp(first, got, (size_t)nout * 4) == 0, "case %zu: run %d changed the bits",
                    c, run);
      }
    }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    free(hx);
    free(got);
    free(first);
    free(hd);
    free(want);
    free(mag);
    free(wmax);
  }
  jitk_reduction_destroy(sum);
  jitk_reduction_destroy(mx);
  jitk_engine_destroy(e);
}

/* Column reductions of 1- and 2-byte inputs, several outputs a thread:
 * float16 summed in float32 (pairs of outputs), int8 summed in int32
 * (fours), and a float16 max without identity, on shapes whose kept inner
 * extent does and does not divide into pairs and fours, a view one
 * element off (no vectors), and kept dimensions that do not collapse;
 * every output against a host reference, and the same bits in three
 * runs. */
Test(reduction, narrow_types_across_outputs) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *hsum = NULL, *bsum = NULL, *hmax = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "float32 y", "(float)x", "a + b", "y = a", "0",
                                 "float32", "hsum", NULL, &hsum));
  JT_OK(e, jitk_reduction_create(e, "T x", "int32 y", "(int)x", "a + b", "y = a", "0", "int32",
                                 "bsum", NULL, &bsum));
  JT_OK(e, jitk_reduction_create(e, "T x", "float32 y", "(float)x", "max(a, b)", "y = a", NULL,
                                 "float32", "hmax", NULL, &hmax));
  struct {
    jitk_dtype t;
    int ndim;
    int64_t shape[3];
    unsigned mask;
    int offset; /* elements from the buffer's start */
  } cases[] = {
      {JITK_FLOAT16, 2, {4096, 256}, 1, 0},   {JITK_FLOAT16, 3, {3, 1000, 98}, 1, 0},
      {JITK_FLOAT16, 2, {5000, 130}, 1, 1},   {JITK_FLOAT16, 2, {20001, 33}, 1, 0},
      {JITK_FLOAT16, 3, {64, 300, 40}, 2, 0}, {JITK_INT8, 2, {2048, 512}, 1, 0},
      {JITK_INT8, 2, {777, 36}, 1, 0},        {JITK_INT8, 2, {999, 1000}, 1, 0},
      {JITK_FLOAT16, 2, {1500, 66}, 1, 0},
  };
  uint64_t seed = 0x16C0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jitk_dtype t = cases[c].t;
    red_shape sh = red_shape_of(cases[c].ndim, cases[c].shape, cases[c].mask);
    ref_case rc = sh.rc;
    const int nd = cases[c].ndim, *axes = sh.axes, na = sh.na, ond = sh.ond;
    const int64_t n = sh.n, nout = sh.nout;
    int64_t *oshape = sh.oshape;
    size_t isz = t == JITK_INT8 ? 1 : 2, off = (size_t)cases[c].offset;
    unsigned char *hx = malloc(((size_t)n + off) * isz);
    double *hd = malloc((size_t)n * 8), *want = malloc((size_t)nout * 8),
           *wmax = malloc((size_t)nout * 8);
    for (int64_t i = 0; i < n + (int64_t)off; i++) {
      double v = jt_uniform(&seed);
      if (t == JITK_INT8)
        ((int8_t *)hx)[i] = (int8_t)(int)(v * 200 - 100);
      else
        ((uint16_t *)hx)[i] = jitk_float_to_half((float)(v * 4 - 2));
    }
    for (int64_t i = 0; i < n; i++) hd[i] = jt_read_real(hx, t, (size_t)i + off);
    reference_sums(&rc, hd, want, nout);
    reference_max(&rc, hd, wmax, nout);
    unsigned char *dx = jt_dev_alloc(e, ((size_t)n + off) * isz);
    void *dy = jt_dev_alloc(e, (size_t)nout * 4);
    jt_to_dev(e, dx, hx, ((size_t)n + off) * isz);
    DLTensor tx = jt_tensor(dx + off * isz, t, nd, rc.shape, NULL);
    DLTensor ty = jt_tensor(dy, t == JITK_INT8 ? JITK_INT32 : JITK_FLOAT32, ond, oshape, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
    float *got = malloc((size_t)nout * 4), *first = malloc((size_t)nout * 4);
    for (int which = 0; which < (t == JITK_INT8 ? 1 : 2); which++) {
      jitk_reduction *k = t == JITK_INT8 ? bsum : which == 0 ? hsum : hmax;
      for (int run = 0; run < 3; run++) {
        jt_poison(e, dy, (size_t)nout * 4);
        JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axes, na, 0, NULL));
        jt_to_host(e, got, dy, (size_t)nout * 4);
        if (run == 0) {
          memcpy(first, got, (size_t)nout * 4);
          for (int64_t o = 0; o < nout; o++) {
            double g = t == JITK_INT8 ? (double)((int32_t *)got)[o] : (double)got[o];
            double w = which == 0 ? want[o] : wmax[o];
            /* float32 sums of n / nout values of at most 2 in size. */
            double tol = t == JITK_INT8 || which == 1 ? 0 : 8e-7 * (double)(n / nout) + 1e-6;
            if (!(fabs(g - w) <= tol))
              cr_assert_fail("case %zu (%s), output %lld: %.9g, want %.9g", c,
                             which ? "max" : "sum", (long long)o, g, w);
          }
        } else {
          cr_assert(memcmp(first, got, (size_t)nout * 4) == 0, "case %zu: run %d changed the bits",
                    c, run);
        }
      }
    }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    free(hx);
    free(hd);
    free(want);
    free(wmax);
    free(got);
    free(first);
  }
  jitk_reduction_destroy(hsum);
  jitk_reduction_destroy(bsum);
  jitk_reduction_destroy(hmax);
  jitk_engine_destroy(e);
}

/* The element index _j over several reduced axes read as vectors: a sum
 * of _j over axes 0 and 2 of (64, 3, 32) float32 (vectors of four along
 * the runs of 32) is R (R - 1) / 2 for every output only if each lane
 * numbers its element in C order over the reduced axes. */
Test(reduction, index_through_vectors_over_several_axes) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "int64 y", "(long long)_j + (x > 2.0f ? 1 : 0)", "a + b",
                                 "y = a", "0", "int64", "jsum", NULL, &k));
  int64_t shape[3] = {64, 3, 32}, oshape[1] = {3};
  float *hx = malloc(64 * 3 * 32 * 4);
  for (int i = 0; i < 64 * 3 * 32; i++) hx[i] = 0.5f;
  float *dx = jt_dev_alloc(e, sizeof(float) * 64 * 3 * 32);
  int64_t *dy = jt_dev_alloc(e, 3 * 8), hy[3];
  jt_to_dev(e, dx, hx, sizeof(float) * 64 * 3 * 32);
  DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 3, shape, NULL);
  DLTensor ty = jt_tensor(dy, JITK_INT64, 1, oshape, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  int axes[2] = {0, 2};
  jt_poison(e, dy, 3 * 8);
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axes, 2, 0, NULL));
  const char *src = NULL;
  JT_OK(e, jitk_reduction_source(k, &src));
  cr_assert(strstr(src, "jitk::ew::vec<T, 4>") != NULL, "vectors of four: %s", src);
  jt_to_host(e, hy, dy, 3 * 8);
  const int64_t R = 64 * 32;
  for (int o = 0; o < 3; o++)
    cr_assert_eq(hy[o], R * (R - 1) / 2, "output %d: %lld", o, (long long)hy[o]);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  free(hx);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* Whole rows ('r'): layouts whose innermost kept dimension (with a short
 * run of reduced elements inside each output) makes narrow contiguous
 * rows: runs of 16 float32 and of 32 float64 (several vectors an output),
 * runs of two int8 (eight outputs a vector), float16 and float32 columns
 * from one vector a row to 256, kept dimensions that do not collapse, and
 * a view one element off (scalar loads). A float64 sum, a max without
 * identity and a sum of _j (R (R - 1) / 2 for every output only if each
 * element is numbered in C order over the reduced axes), each against the
 * host; the launch says it read whole rows where the layout allows, and
 * three runs give the same bits. */
Test(reduction, whole_rows, .timeout = 120) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *dsum = NULL, *dmax = NULL, *jsum = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "float64 y", "(double)x", "a + b", "y = a", "0",
                                 "float64", "dsum", NULL, &dsum));
  JT_OK(e, jitk_reduction_create(e, "T x", "float64 y", "(double)x", "max(a, b)", "y = a", NULL,
                                 "float64", "dmax", NULL, &dmax));
  JT_OK(e, jitk_reduction_create(e, "T x", "int64 y", "(long long)_j", "a + b", "y = a", "0",
                                 "int64", "jsum", NULL, &jsum));
  struct {
    jitk_dtype t;
    int ndim;
    int64_t shape[4];
    unsigned mask;
    int offset; /* elements from the buffer's start */
    bool rows;  /* whole rows expected */
  } cases[] = {
      {JITK_FLOAT32, 3, {4096, 16, 16}, 5, 0, true},
      {JITK_FLOAT16, 3, {256, 2048, 16}, 2, 0, true},
      {JITK_FLOAT16, 2, {16384, 16}, 1, 0, true},
      {JITK_INT8, 3, {4096, 64, 2}, 5, 0, true},
      {JITK_FLOAT64, 3, {2048, 8, 32}, 5, 0, true},
      {JITK_FLOAT32, 2, {1 << 16, 256}, 1, 0, true},
      {JITK_FLOAT32, 2, {2048, 1024}, 1, 0, true},
      {JITK_FLOAT32, 4, {8, 32, 32, 64}, 5, 0, true},
      {JITK_FLOAT32, 2, {1 << 20, 2}, 1, 0, true},
      {JITK_FLOAT32, 3, {2048, 16, 16}, 5, 1, true},
      {JITK_FLOAT16, 3, {3000, 4, 8}, 5, 0, true},
      {JITK_FLOAT32, 2, {5000, 48}, 1, 0, true},
      {JITK_FLOAT16, 2, {4096, 4096}, 1, 0, true},
      {JITK_INT8, 2, {3000, 128}, 1, 0, true},
      {JITK_INT8, 2, {3000, 96}, 1, 0, false},
      {JITK_FLOAT32, 2, {5000, 7}, 1, 0, false},
      {JITK_FLOAT32, 3, {64, 1024, 16}, 5, 0, false},
  };
  uint64_t seed = 0x3077;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jitk_dtype t = cases[c].t;
    red_shape sh = red_shape_of(cases[c].ndim, cases[c].shape, cases[c].mask);
    ref_case rc = sh.rc;
    const int nd = cases[c].ndim, *axes = sh.axes, na = sh.na, ond = sh.ond;
    const int64_t n = sh.n, nout = sh.nout;
    int64_t *oshape = sh.oshape;
    size_t isz = jt_dtype_size(t), off = (size_t)cases[c].offset;
    unsigned char *hx = malloc(((size_t)n + off) * isz);
    double *hd = malloc((size_t)n * 8), *want = malloc((size_t)nout * 8),
           *wmax = malloc((size_t)nout * 8), *mag = malloc((size_t)nout * 8);
    for (int64_t i = 0; i < n + (int64_t)off; i++) {
      double v = jt_uniform(&seed);
      if (t == JITK_INT8)
        ((int8_t *)hx)[i] = (int8_t)(int)(v * 200 - 100);
      else
        jt_write_real(hx, t, (size_t)i, v * 4 - 2);
    }
    for (int64_t i = 0; i < n; i++) hd[i] = jt_read_real(hx, t, (size_t)i + off);
    reference_sums(&rc, hd, want, nout);
    reference_max(&rc, hd, wmax, nout);
    for (int64_t i = 0; i < n; i++) hd[i] = fabs(hd[i]);
    reference_sums(&rc, hd, mag, nout);
    unsigned char *dx = jt_dev_alloc(e, ((size_t)n + off) * isz);
    void *dy = jt_dev_alloc(e, (size_t)nout * 8);
    jt_to_dev(e, dx, hx, ((size_t)n + off) * isz);
    DLTensor tx = jt_tensor(dx + off * isz, t, nd, rc.shape, NULL);
    double *got = malloc((size_t)nout * 8), *first = malloc((size_t)nout * 8);
    for (int which = 0; which < 3; which++) {
      jitk_reduction *k = which == 0 ? dsum : which == 1 ? dmax : jsum;
      DLTensor ty = jt_tensor(dy, which == 2 ? JITK_INT64 : JITK_FLOAT64, ond, oshape, NULL);
      jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
      for (int run = 0; run < 3; run++) {
        jt_poison(e, dy, (size_t)nout * 8);
        JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axes, na, 0, NULL));
        jt_to_host(e, got, dy, (size_t)nout * 8);
        if (run > 0) {
          cr_assert(memcmp(first, got, (size_t)nout * 8) == 0, "case %zu: run %d changed the bits",
                    c, run);
          continue;
        }
        memcpy(first, got, (size_t)nout * 8);
        const char *src = NULL;
        JT_OK(e, jitk_reduction_source(k, &src));
        bool rows = strstr(src, "row segments") != NULL;
        cr_assert_eq(rows, cases[c].rows, "case %zu (%d): %.90s", c, which, strchr(src, ',') + 2);
        double r = (double)(n / nout);
        for (int64_t o = 0; o < nout; o++) {
          double g = which == 2 ? (double)((int64_t *)got)[o] : got[o];
          double w = which == 0 ? want[o] : which == 1 ? wmax[o] : r * (r - 1) / 2;
          double tol = which == 0 ? 1e-12 * mag[o] : 0;
          if (!(fabs(g - w) <= tol))
            cr_assert_fail("case %zu (%s), output %lld: %.17g, want %.17g", c,
                           which == 0   ? "sum"
                           : which == 1 ? "max"
                                        : "_j",
                           (long long)o, g, w);
        }
      }
    }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    free(hx);
    free(hd);
    free(want);
    free(wmax);
    free(mag);
    free(got);
    free(first);
  }
  jitk_reduction_destroy(dsum);
  jitk_reduction_destroy(dmax);
  jitk_reduction_destroy(jsum);
  jitk_engine_destroy(e);
}

/* Row segments over two inputs of different widths: a float16 x and a
 * float32 w read as vectors of four each (8 and 16 bytes), column sums of
 * x w in float64 over (4096, 256), and the same with w a view one element
 * off (segments of single elements, the same sums). */
Test(reduction, row_segments_of_two_widths) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "float16 x, float32 w", "float64 y", "(double)x * (double)w",
                                 "a + b", "y = a", "0", "float64", "xwsum", NULL, &k));
  const int64_t R = 4096, C = 256;
  size_t n = (size_t)(R * C);
  uint16_t *hx = malloc(n * 2);
  float *hw = malloc((n + 1) * 4);
  double *want = calloc((size_t)C, 8), *mag = calloc((size_t)C, 8), *got = malloc((size_t)C * 8);
  uint64_t seed = 0x2A1D;
  for (size_t i = 0; i < n; i++) hx[i] = jitk_float_to_half((float)(jt_uniform(&seed) * 4 - 2));
  for (size_t i = 0; i < n + 1; i++) hw[i] = (float)(jt_uniform(&seed) * 2 - 1);
  unsigned char *dx = jt_dev_alloc(e, n * 2), *dw = jt_dev_alloc(e, (n + 1) * 4);
  void *dy = jt_dev_alloc(e, (size_t)C * 8);
  jt_to_dev(e, dx, hx, n * 2);
  jt_to_dev(e, dw, hw, (n + 1) * 4);
  int64_t xs[2] = {R, C}, ys[1] = {C};
  int axis0[1] = {0};
  for (int off = 0; off < 2; off++) {
    for (int64_t c = 0; c < C; c++) want[c] = mag[c] = 0;
    for (size_t i = 0; i < n; i++) {
      double v = (double)jitk_half_to_float(hx[i]) * (double)hw[i + (size_t)off];
      want[i % (size_t)C] += v;
      mag[i % (size_t)C] += fabs(v);
    }
    DLTensor tx = jt_tensor(dx, JITK_FLOAT16, 2, xs, NULL),
             tw = jt_tensor(dw + (size_t)off * 4, JITK_FLOAT32, 2, xs, NULL),
             ty = jt_tensor(dy, JITK_FLOAT64, 1, ys, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&tw), jitk_arg_array(&ty)};
    jt_poison(e, dy, (size_t)C * 8);
    JT_OK(e, jitk_reduction_launch(k, NULL, args, 3, axis0, 1, 0, NULL));
    const char *src = NULL;
    JT_OK(e, jitk_reduction_source(k, &src));
    cr_assert(strstr(src, "row segments") != NULL, "offset %d: %.90s", off, strchr(src, ',') + 2);
    cr_assert_eq(strstr(src, "jitk::ew::vec<float, 4>") != NULL, off == 0,
                 "offset %d: vectors of four float32 only when aligned", off);
    jt_to_host(e, got, dy, (size_t)C * 8);
    for (int64_t c = 0; c < C; c++)
      if (!(fabs(got[c] - want[c]) <= 1e-12 * mag[c]))
        cr_assert_fail("offset %d, output %lld: %.17g, want %.17g", off, (long long)c, got[c],
                       want[c]);
  }
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dw, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  free(hx);
  free(hw);
  free(want);
  free(mag);
  free(got);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* Column or row sums of a (rows, cols) C-order array of float32 or
 * float16 (float64 references of each output and of its magnitude). */
static void line_sums(const void *x, bool half, int64_t rows, int64_t cols, int axis, double *want,
                      double *mag) {
  int64_t nout = axis < 0 ? 1 : axis == 0 ? cols : rows;
  for (int64_t o = 0; o < nout; o++) want[o] = mag[o] = 0;
  for (int64_t i = 0; i < rows * cols; i++) {
    double v = half ? (double)jitk_half_to_float(((const uint16_t *)x)[i]) : ((const float *)x)[i];
    int64_t o = axis < 0 ? 0 : axis == 0 ? i % cols : i / cols;
    want[o] += v;
    mag[o] += fabs(v);
  }
}

/* Split reductions under 16 MiB fold their chunks in the same kernel:
 * the last block to finish each group of chunks of a tile of outputs
 * folds them, then the last of the groups folds theirs (one level up to
 * 32 chunks), with a thread an output (at most 4 a fold) or a group of
 * lanes, in every strategy that splits: a whole array and rows of a
 * block each ('i'), short rows of a warp each, columns of 32 outputs a
 * block and of a row of 7 ('o'), float16 column pairs, row segments
 * ('r'); larger ones in a second kernel. Each case against float64 sums,
 * then five more runs giving the same bits in every output. Last, one
 * layout on three streams at once, each on its own data, ten launches
 * each without waiting: the chunks of concurrent launches never meet
 * (each launch has its own tickets). */
Test(reduction, split_in_one_kernel, .timeout = 120) {
  jitk_engine *e = jt_gpu_engine();
  jitk_reduction *k32 = NULL, *k16 = NULL;
  JT_OK(e, jitk_reduction_create(e, "float32 x", "float32 y", "x", "a + b", "y = a", "0", NULL,
                                 "sum32", NULL, &k32));
  JT_OK(e, jitk_reduction_create(e, "float16 x", "float32 y", "(float)x", "a + b", "y = a", "0",
                                 "float32", "sum16", NULL, &k16));
  const struct {
    int64_t rows, cols;
    int axis; /* -1: all */
    bool half;
    /* Under 16 MiB, the fold after the tickets: a thread an output, or a
     * group of lanes an output (as many as the block has for each output
     * of the tile, at most a warp: a sum has an identity, so the fold
     * goes without flags); S chunks, one level up to 32. From 16 MiB,
     * "second": a second kernel folds them. */
    const char *strategy, *fold;
  } cases[] = {
      {1, 3000007, -1, false, "along reduced", "group_reduce_full<32>"}, /* S 732: 28 x 27 */
      {8, 1 << 18, 1, false, "along reduced", "group_reduce_full<32>"},  /* S 16, one level */
      {200, 6000, 1, false, "along reduced", "thread"},                  /* S 2, warps */
      {1024, 3001, 0, false, "across outputs", "group_reduce_full<8>"},  /* S 16, one level */
      {300000, 7, 0, false, "across outputs", "group_reduce_full<32>"},  /* S 2098: 46 x 46 */
      {32768, 66, 0, true, "across outputs", "group_reduce_full<4>"},    /* S 512: pairs */
      {512, 4096, 0, false, "row segments", "thread"},                   /* S 2 */
      {4096, 512, 0, false, "row segments", "group_reduce_full<8>"},     /* S 16, one level */
      {1, 1 << 23, -1, false, "along reduced", "second"},                /* 32 MiB */
      {8, 1 << 20, 1, false, "along reduced", "second"},
      {4096, 3001, 0, false, "across outputs", "second"},
      {1024, 4096, 0, false, "row segments", "second"},
  };
  uint64_t seed = 0x5B11;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t R = cases[c].rows, C = cases[c].cols, n = R * C;
    int axis = cases[c].axis;
    int64_t nout = axis < 0 ? 1 : axis == 0 ? C : R;
    size_t isz = cases[c].half ? 2 : 4;
    void *hx = malloc((size_t)n * isz);
    for (int64_t i = 0; i < n; i++) {
      double v = jt_uniform(&seed) * 2 - 1;
      if (cases[c].half)
        ((uint16_t *)hx)[i] = jitk_float_to_half((float)v);
      else
        ((float *)hx)[i] = (float)v;
    }
    double *want = malloc((size_t)nout * 8), *mag = malloc((size_t)nout * 8);
    line_sums(hx, cases[c].half, R, C, axis, want, mag);
    void *dx = jt_dev_alloc(e, (size_t)n * isz), *dy = jt_dev_alloc(e, (size_t)nout * 4);
    jt_to_dev(e, dx, hx, (size_t)n * isz);
    int64_t xs[2] = {R, C}, ys[1] = {nout};
    DLTensor tx = jt_tensor(dx, cases[c].half ? JITK_FLOAT16 : JITK_FLOAT32, 2, xs, NULL),
             ty = jt_tensor(dy, JITK_FLOAT32, axis < 0 ? 0 : 1, ys, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
    jitk_reduction *k = cases[c].half ? k16 : k32;
    float *got = malloc((size_t)nout * 4), *again = malloc((size_t)nout * 4);
    for (int run = 0; run < 6; run++) {
      jt_poison(e, dy, (size_t)nout * 4);
      JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axis < 0 ? NULL : &axis, axis < 0 ? -1 : 1,
                                     0, NULL));
      jt_to_host(e, run == 0 ? got : again, dy, (size_t)nout * 4);
      if (run > 0) {
        cr_assert(memcmp(got, again, (size_t)nout * 4) == 0, "case %zu, run %d: other bits", c,
                  run);
        continue;
      }
      const char *src = NULL;
      JT_OK(e, jitk_reduction_source(k, &src));
      cr_assert(strstr(src, cases[c].strategy) != NULL, "case %zu: %.120s", c, src);
      const char *ticket = strstr(src, "atomicInc(_jk_tk");
      if (strcmp(cases[c].fold, "second") == 0)
        cr_assert(ticket == NULL && strstr(src, "_final(") != NULL, "case %zu: two kernels", c);
      else
        cr_assert(ticket != NULL && strstr(src, "_final") == NULL, "case %zu: not split", c);
      if (strcmp(cases[c].fold, "second") == 0)
        ;
      else if (strcmp(cases[c].fold, "thread") == 0)
        cr_assert(strstr(ticket, "group_reduce") == NULL && strstr(ticket, "block_reduce") == NULL,
                  "case %zu: a thread an output", c);
      else
        cr_assert(strstr(ticket, cases[c].fold) != NULL, "case %zu: %s", c, cases[c].fold);
      for (int64_t o = 0; o < nout; o++)
        if (!(fabs(got[o] - want[o]) <= 1e-5 * mag[o] + 1e-6))
          cr_assert_fail("case %zu, output %lld: %.9g, want %.9g", c, (long long)o, (double)got[o],
                         want[o]);
    }
    free(got);
    free(again);
    free(want);
    free(mag);
    free(hx);
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
  }

  /* Three streams, row segments of 16 chunks folded in the kernel, ten
   * launches each. */
  enum { NS = 3 };
  const int64_t R = 4096, C = 512, n = R * C;
  int axis0[1] = {0};
  CUstream streams[NS];
  float *hx[NS], *dx[NS], *dy[NS], got[512];
  double want[512], mag[512];
  e->drv.cuCtxSetCurrent(e->context);
  for (int s = 0; s < NS; s++) {
    cr_assert_eq(e->drv.cuStreamCreate(&streams[s], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    hx[s] = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) hx[s][i] = (float)(jt_uniform(&seed) * 2 - 1 + s);
    dx[s] = jt_dev_alloc(e, (size_t)n * 4);
    dy[s] = jt_dev_alloc(e, (size_t)C * 4);
    jt_to_dev(e, dx[s], hx[s], (size_t)n * 4);
    jt_poison(e, dy[s], (size_t)C * 4);
  }
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  int64_t xs[2] = {R, C}, ys[1] = {C};
  for (int r = 0; r < 10; r++)
    for (int s = 0; s < NS; s++) {
      DLTensor tx = jt_tensor(dx[s], JITK_FLOAT32, 2, xs, NULL),
               ty = jt_tensor(dy[s], JITK_FLOAT32, 1, ys, NULL);
      jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
      JT_OK(e, jitk_reduction_launch(k32, (jitk_stream)streams[s], args, 2, axis0, 1, 0, NULL));
    }
  for (int s = 0; s < NS; s++) {
    JT_OK(e, jitk_memcpy(e, got, dy[s], (size_t)C * 4, (jitk_stream)streams[s]));
    JT_OK(e, jitk_stream_synchronize(e, (jitk_stream)streams[s]));
    line_sums(hx[s], false, R, C, 0, want, mag);
    for (int64_t o = 0; o < C; o++)
      if (!(fabs(got[o] - want[o]) <= 1e-5 * mag[o] + 1e-6))
        cr_assert_fail("stream %d, output %lld: %.9g, want %.9g", s, (long long)o, (double)got[o],
                       want[o]);
    JT_OK(e, jitk_device_free(e, dx[s], NULL));
    JT_OK(e, jitk_device_free(e, dy[s], NULL));
    e->drv.cuStreamDestroy(streams[s]);
    free(hx[s]);
  }
  jitk_reduction_destroy(k32);
  jitk_reduction_destroy(k16);
  jitk_engine_destroy(e);
}
