/*
 * Matmul plans run on the CPU (tests/emu): random products on jitk's FFMA
 * kernel and its mma.sync kernel (whose cp.async, ldmatrix and mma the
 * emulator carries out for the whole warp), launched through the public
 * API on the stand-in driver and checked element by element against a
 * reference computed here. float64 plans take FFMA anyway; float32 (as
 * tf32 too), float16 and bfloat16 ones are sent to either kernel with
 * JITK_MM_KIND, since the stand-in's device is an sm_90, whose wgmma
 * kernel the emulator cannot run.
 *
 * Each case draws the shape (tails in M, N and K), batches with packed or
 * padded strides, the order and leading dimension of A, B, C and D,
 * pointers off 16 bytes, alpha, beta with or without C (a C of NaN when
 * beta is 0, which BLAS's rule says is not read), an epilogue (a bias by
 * column, a scalar, row, col and batch), extra outputs in three dtypes,
 * reductions over rows, columns and the whole matrix, and split-K. Values are small
 * integers and alpha, beta and the scalar halves or whole numbers, so
 * every sum is exact in the float32 or float64 accumulator whatever its
 * order, and D is the exact value rounded once to D's dtype: the check
 * is equality. Every array lives in a buffer of exactly the bytes it
 * spans, filled first with a poison that the bytes no element holds must
 * keep.
 */
#include <math.h>
#include <stdio.h>

#include "common.h"
#include "emu/emu.h"

#if defined(__SANITIZE_ADDRESS__)
enum { MM_CASES = 10, MM_FFMA_CASES = 2 };
#else
enum { MM_CASES = 30, MM_FFMA_CASES = 6 };
#endif

static int64_t pick(uint64_t *s, int64_t n) { return (int64_t)(jt_next(s) % (uint64_t)n); }

/* One matrix of each batch: rows x cols in `order` with leading dimension
 * ld and batch stride, in a buffer that starts `off` elements before it. */
typedef struct mat {
  int64_t rows, cols, ld, stride, off, batch;
  jitk_order order;
  jitk_dtype dt;
  size_t esize; /* bytes per element */
  size_t count; /* elements of the buffer */
  unsigned char *buf;
} mat;

static int64_t at(const mat *x, int64_t b, int64_t r, int64_t c) {
  return x->off + b * x->stride + (x->order == JITK_ROW_MAJOR ? r * x->ld + c : c * x->ld + r);
}

/* A random layout in `order` (-1: either): leading dimension packed or
 * padded (desc_ld 0 or the value), batch stride packed or not, 0 or 1
 * element of offset; with chunk > 1, leading dimension and stride in
 * whole chunks of that many elements and no offset (what mma.sync's
 * 16-byte copies need). */
static void random_mat(uint64_t *s, mat *x, int64_t rows, int64_t cols, int64_t batch,
                       jitk_dtype dt, int order, int64_t chunk, int64_t *desc_ld,
                       int64_t *desc_stride) {
  x->rows = rows;
  x->cols = cols;
  x->batch = batch;
  x->dt = dt;
  x->esize = jt_dtype_size(dt);
  x->order = order >= 0 ? (jitk_order)order : pick(s, 2) ? JITK_COL_MAJOR : JITK_ROW_MAJOR;
  const int64_t inner = x->order == JITK_ROW_MAJOR ? cols : rows,
                outer = x->order == JITK_ROW_MAJOR ? rows : cols;
  x->ld = chunk > 1 ? (inner + chunk - 1) / chunk * chunk + chunk * pick(s, 2)
                    : inner + (pick(s, 3) == 0 ? pick(s, 4) + 1 : 0);
  *desc_ld = x->ld == inner && pick(s, 2) ? 0 : x->ld;
  /* Packed is ld times the outer extent (0 in the description says so);
   * a stride of its own may be anything from the matrix's span on. */
  const int64_t span = (outer - 1) * x->ld + inner;
  if (pick(s, 3) == 0) {
    x->stride =
        chunk > 1 ? (span + chunk - 1) / chunk * chunk + chunk * pick(s, 2) : span + pick(s, 5);
    *desc_stride = x->stride;
  } else {
    x->stride = x->ld * outer;
    *desc_stride = pick(s, 2) ? 0 : x->stride;
  }
  x->off = chunk > 1 ? 0 : pick(s, 2);
  x->count = (size_t)(x->off + (batch - 1) * x->stride + span);
  x->buf = malloc(x->count * x->esize);
  cr_assert_not_null(x->buf);
  memset(x->buf, 0xA5, x->count * x->esize);
}

/* v as the float dtype dt holds it (rounded to nearest even). */
static double rounded(jitk_dtype dt, double v) {
  unsigned char b[8] = {0};
  jt_write_real(b, dt, 0, v);
  return jt_read_real(b, dt, 0);
}

static double get(const mat *x, int64_t b, int64_t r, int64_t c) {
  return jt_read_real(x->buf, x->dt, (size_t)at(x, b, r, c));
}

static void put(mat *x, int64_t b, int64_t r, int64_t c, double v) {
  jt_write_real(x->buf, x->dt, (size_t)at(x, b, r, c), v);
}

/* Every element of the view equals want(b, r, c) (read as its dtype), and
 * every byte of the buffer that no element holds kept its poison. */
static void check_mat(const char *what, const char *name, const mat *x,
                      double (*want)(void *, int64_t, int64_t, int64_t), void *ctx) {
  unsigned char *held = calloc(x->count, 1);
  cr_assert_not_null(held);
  int64_t wrong = 0, first_b = 0, first_r = 0, first_c = 0;
  double got_first = 0, want_first = 0;
  for (int64_t b = 0; b < x->batch; b++)
    for (int64_t r = 0; r < x->rows; r++)
      for (int64_t c = 0; c < x->cols; c++) {
        const int64_t i = at(x, b, r, c);
        held[i] = 1;
        const double got = jt_read_real(x->buf, x->dt, (size_t)i);
        const double w = want(ctx, b, r, c);
        if (!(got == w) && wrong++ == 0) {
          first_b = b, first_r = r, first_c = c;
          got_first = got, want_first = w;
        }
      }
  cr_assert_eq(wrong, 0, "%s: %s: %lld wrong elements, first [%lld][%lld][%lld] = %g, want %g",
               what, name, (long long)wrong, (long long)first_b, (long long)first_r,
               (long long)first_c, got_first, want_first);
  for (size_t i = 0; i < x->count; i++)
    if (!held[i])
      for (size_t k = 0; k < x->esize; k++)
        cr_assert_eq(x->buf[i * x->esize + k], 0xA5,
                     "%s: %s: element %zu of the buffer, outside the view, was written", what, name,
                     i);
  free(held);
}

typedef struct mm_case {
  jitk_dtype dt; /* of A, B, C and D */
  int64_t m, n, k, batch;
  double alpha, beta, s;
  bool has_c;
  int epi, num_out, num_red, split;
  bool mma, tf32; /* JITK_MM_KIND=mma (where the layout allows it), tf32 compute */
  mat a, b, c, d, out[3];
  double *bias;
  double *red[3];
  size_t red_count[3];
} mm_case;

static const char *const EPILOGUES[] = {
    NULL,
    "acc + bias[col]",
    "max(acc * s, 0) + (T)row - (T)col", /* an int beside T: jitk::mm::mixed */
    "(acc > 0 ? acc : (T)0) + bias[col] * s",
    "acc + (T)batch * 100",
};
static const char *const EPI_PARAMS[] = {
    NULL, "raw float64 bias", "float64 s", "raw float64 bias, float64 s", NULL,
};

static const jitk_matmul_output OUTPUTS[] = {
    {"pre", JITK_FLOAT64, "acc", 0, 0},
    {"idx", JITK_INT32, "row * 1000 + col + batch * 100000", 0, 0},
    {"halved", JITK_FLOAT32, "value * 0.5f", 0, 0},
};
static const jitk_matmul_reduction REDUCTIONS[] = {
    {"colsum", JITK_FLOAT64, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS},
    {"rowmax", JITK_FLOAT64, "value", JITK_REDUCE_MAX, JITK_REDUCE_COLUMNS},
    {"squares", JITK_FLOAT64, "value * value", JITK_REDUCE_SUM, JITK_REDUCE_ALL},
};
/* Summed in the accumulator's type, squares would pass float32's exact
 * integers: 16- and 32-bit plans count the positive values instead. */
static const char *const COUNT_POSITIVE = "value > 0 ? (T)1 : (T)0";

static double acc_of(const mm_case *c, int64_t b, int64_t r, int64_t col) {
  double sum = 0;
  for (int64_t k = 0; k < c->k; k++) sum += get(&c->a, b, r, k) * get(&c->b, b, k, col);
  double v = c->alpha * sum;
  if (c->has_c && c->beta != 0) v += c->beta * get(&c->c, b, r, col);
  return v;
}

static double value_of(const mm_case *c, double acc, int64_t b, int64_t r, int64_t col) {
  switch (c->epi) {
    case 1: return acc + c->bias[col];
    case 2: return fmax(acc * c->s, 0) + (double)r - (double)col;
    case 3: return (acc > 0 ? acc : 0) + c->bias[col] * c->s;
    case 4: return acc + (double)b * 100;
    default: return acc;
  }
}

typedef struct ref {
  const mm_case *c;
  double *acc, *value; /* batch x m x n */
  int which;           /* an output's index */
} ref;

static double ref_d(void *p, int64_t b, int64_t r, int64_t c) {
  const ref *f = p;
  return rounded(f->c->dt, f->value[(b * f->c->m + r) * f->c->n + c]);
}

static double ref_out(void *p, int64_t b, int64_t r, int64_t c) {
  const ref *f = p;
  const int64_t i = (b * f->c->m + r) * f->c->n + c;
  switch (f->which) {
    case 0: return f->acc[i];
    case 1: return (double)(r * 1000 + c + b * 100000);
    default: return (double)(float)(f->value[i] * 0.5);
  }
}

/* A random case; f32_ffma: float32 on FFMA only. */
static void random_mm_case(uint64_t *s, mm_case *c, bool f32_ffma, char *what, size_t size) {
  memset(c, 0, sizeof *c);
  static const jitk_dtype dts[] = {JITK_FLOAT64, JITK_FLOAT64, JITK_FLOAT32, JITK_FLOAT16,
                                   JITK_BFLOAT16};
  c->dt = f32_ffma ? JITK_FLOAT32 : dts[pick(s, 5)];
  c->mma = !f32_ffma && c->dt != JITK_FLOAT64 && pick(s, 2);
  c->tf32 = c->dt == JITK_FLOAT32 && (c->mma || (!f32_ffma && pick(s, 2)));
  static const int64_t sizes[] = {1, 2, 7, 16, 33, 64, 100, 129, 150};
  c->m = sizes[pick(s, 9)];
  c->n = sizes[pick(s, 9)];
  c->k = sizes[pick(s, 9)];
  if (c->mma) { /* K and N in whole 16-byte chunks, as mma.sync's copies need */
    static const int64_t chunked[] = {8, 16, 32, 64, 136};
    c->k = chunked[pick(s, 5)];
    c->n = chunked[pick(s, 5)];
  }
  c->batch = pick(s, 3) == 0 ? 1 + pick(s, 3) : 1;
  static const double alphas[] = {1, -0.5, 2}, betas[] = {0, 0.5, -1}, ss[] = {0.5, 2, -1};
  c->alpha = alphas[pick(s, 3)];
  c->has_c = pick(s, 2);
  c->beta = c->has_c ? betas[pick(s, 3)] : 0;
  c->s = ss[pick(s, 3)];
  c->epi = (int)pick(s, 5);
  c->num_out = (int)pick(s, 4);
  c->num_red = (int)pick(s, 4);
  /* Split-K (refused for float64, whose sums it would round to float32),
   * in slices of whole K-tiles of 16. */
  if (c->dt != JITK_FLOAT64 && pick(s, 3) == 0) {
    c->split = 2 + (int)pick(s, 3);
    if ((c->k + 15) / 16 < c->split) c->split = 0;
  }
  jitk_dtype_info info;
  jitk_dtype_get_info(c->dt, &info);
  snprintf(what, size,
           "%s%s%s, %lld x %lld x %lld, batch %lld, split %d, alpha %g, %s beta %g, epilogue %d, "
           "%d outputs, %d reductions",
           info.name, c->tf32 ? " (tf32)" : "", c->mma ? " on mma if it can" : "", (long long)c->m,
           (long long)c->n, (long long)c->k, (long long)c->batch, c->split, c->alpha,
           c->has_c ? "C," : "no C,", c->beta, c->epi, c->num_out, c->num_red);
}

static void fill_ints(uint64_t *s, mat *x) {
  for (int64_t b = 0; b < x->batch; b++)
    for (int64_t r = 0; r < x->rows; r++)
      for (int64_t col = 0; col < x->cols; col++) put(x, b, r, col, (double)(pick(s, 7) - 3));
}

/* Plans per kernel: FFMA, mma.sync. */
typedef struct kinds {
  int simt, mma;
  int clusters; /* splits summed across clusters */
} kinds;

/* Case `number`; f32_ffma: float32 on FFMA only, on the tile `tile` names
 * in the description (NULL: any). */
static void run_case(jitk_engine *e, jt_emu *em, uint64_t *s, int number, bool f32_ffma,
                     const char *tile, kinds *used) {
  mm_case c;
  char what[256];
  random_mm_case(s, &c, f32_ffma, what, sizeof what);
  char label[600];
  snprintf(label, sizeof label, "case %d (%s)", number, what);

  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = c.m;
  d.n = c.n;
  d.k = c.k;
  d.batch = c.batch;
  d.a_dtype = d.b_dtype = d.c_dtype = d.d_dtype = c.dt;
  const int64_t chunk = c.mma ? 16 / (c.dt == JITK_FLOAT32 ? 4 : 2) : 1;
  d.split_k = c.split;
  d.compute = c.tf32 ? JITK_COMPUTE_TF32 : JITK_COMPUTE_DEFAULT;
  setenv("JITK_MM_KIND", c.mma ? "mma" : "simt", 1);
  d.alpha = c.alpha;
  d.beta = c.beta;
  /* Half the cases give alpha and beta at the execution, the
   * description's being others (a beta of 0 there against one that is
   * not here, and the other way round): the kernel takes them as
   * parameters. */
  const bool given = pick(s, 2) == 0;
  if (given) {
    d.alpha = c.alpha + 3;
    d.beta = c.beta == 0 ? 1.5 : 0;
    size_t len = strlen(label);
    snprintf(label + len, sizeof label - len, "; alpha and beta given to the execution");
  }
  d.has_c = c.has_c;
  d.epilogue = EPILOGUES[c.epi];
  d.epilogue_params = EPI_PARAMS[c.epi];
  random_mat(s, &c.a, c.m, c.k, c.batch, c.dt, c.mma ? JITK_ROW_MAJOR : -1, chunk, &d.lda,
             &d.stride_a);
  random_mat(s, &c.b, c.k, c.n, c.batch, c.dt, -1, chunk, &d.ldb, &d.stride_b);
  random_mat(s, &c.d, c.m, c.n, c.batch, c.dt, -1, 1, &d.ldd, &d.stride_d);
  d.a_order = c.a.order;
  d.b_order = c.b.order;
  d.d_order = c.d.order;
  fill_ints(s, &c.a);
  fill_ints(s, &c.b);
  if (c.has_c) {
    random_mat(s, &c.c, c.m, c.n, c.batch, c.dt, -1, 1, &d.ldc, &d.stride_c);
    d.c_order = c.c.order;
    if (c.beta == 0) {
      for (int64_t b = 0; b < c.batch; b++)
        for (int64_t r = 0; r < c.m; r++)
          for (int64_t col = 0; col < c.n; col++) put(&c.c, b, r, col, NAN);
    } else {
      fill_ints(s, &c.c);
    }
  }
  /* Outputs in D's order, packed or with a leading dimension and stride
   * of their own. */
  jitk_matmul_output outs[3];
  for (int i = 0; i < c.num_out; i++) {
    outs[i] = OUTPUTS[i];
    random_mat(s, &c.out[i], c.m, c.n, c.batch, OUTPUTS[i].dtype, (int)c.d.order, 1, &outs[i].ld,
               &outs[i].stride);
  }
  d.outputs = outs;
  d.num_outputs = (size_t)c.num_out;
  jitk_matmul_reduction reds[3];
  memcpy(reds, REDUCTIONS, sizeof reds);
  if (c.dt != JITK_FLOAT64) reds[2].expr = COUNT_POSITIVE;
  d.reductions = reds;
  d.num_reductions = (size_t)c.num_red;
  for (int i = 0; i < c.num_red; i++) {
    c.red_count[i] = (size_t)c.batch * (i == 0 ? (size_t)c.n : i == 1 ? (size_t)c.m : 1);
    c.red[i] = malloc(c.red_count[i] * 8);
    cr_assert_not_null(c.red[i]);
    memset(c.red[i], 0xA5, c.red_count[i] * 8);
  }
  c.bias = malloc((size_t)c.n * 8);
  cr_assert_not_null(c.bias);
  for (int64_t i = 0; i < c.n; i++) c.bias[i] = (double)(pick(s, 11) - 5);

  /* The layouts, for the messages. */
  const mat *const ms[] = {&c.a, &c.b, &c.c, &c.d};
  for (int i = 0; i < 4; i++) {
    if (i == 2 && !c.has_c) continue;
    size_t len = strlen(label);
    snprintf(label + len, sizeof label - len, "; %c %s ld %lld stride %lld off %lld", "ABCD"[i],
             ms[i] -> order == JITK_ROW_MAJOR ? "row" : "col", (long long)ms[i]->ld,
             (long long)ms[i]->stride, (long long)ms[i]->off);
  }
  jitk_matmul *p = NULL;
  jitk_status st = jitk_matmul_create(e, &d, &p);
  if (st == JITK_ERR_INVALID_ARGUMENT && c.split > 0 &&
      strstr(jitk_errmsg(e), "every slice needs one") != NULL) {
    /* The kernel chosen has deeper K-tiles than FFMA's 16 (mma.sync's 32
     * or 64), too few for the slices: refused, as documented; the case
     * goes on without them. */
    c.split = 0;
    d.split_k = 0;
    st = jitk_matmul_create(e, &d, &p);
  }
  cr_assert_eq(st, JITK_OK, "%s: plan: %s", label, jitk_errmsg(e));
  char how[512];
  JT_OK(e, jitk_matmul_describe(p, how, sizeof how));
  cr_assert(tile == NULL || strstr(how, tile) != NULL, "%s: wants %s in %s", label, tile, how);
  if (strstr(how, "(mma.sync)") != NULL)
    used->mma++;
  else
    used->simt++;
  if (strstr(how, "summed in shared memory across the cluster") != NULL) used->clusters++;
  jitk_arg extra[2];
  size_t num_extra = 0;
  if (c.epi == 1 || c.epi == 3) extra[num_extra++] = jitk_arg_ptr(c.bias, JITK_FLOAT64);
  if (c.epi == 2 || c.epi == 3) extra[num_extra++] = jitk_arg_f64(c.s);
  void *out_ptrs[3], *red_ptrs[3];
  for (int i = 0; i < c.num_out; i++) out_ptrs[i] = c.out[i].buf + c.out[i].off * c.out[i].esize;
  for (int i = 0; i < c.num_red; i++) red_ptrs[i] = c.red[i];
  jitk_matmul_operands o;
  JT_OK(e, jitk_matmul_operands_init(&o));
  o.a = c.a.buf + c.a.off * c.a.esize;
  o.b = c.b.buf + c.b.off * c.b.esize;
  o.c = c.has_c ? c.c.buf + c.c.off * c.c.esize : NULL;
  o.d = c.d.buf + c.d.off * c.d.esize;
  o.extra = extra;
  o.num_extra = num_extra;
  o.outputs = out_ptrs;
  o.reductions = red_ptrs;
  if (given) {
    o.alpha = &c.alpha;
    o.beta = &c.beta;
  }
  unsigned long long before = jt_emu_runs(em);
  st = jitk_matmul_execute_ex(p, NULL, &o);
  cr_assert_eq(st, JITK_OK, "%s: execute: %s (%s)", label, jitk_errmsg(e), jt_emu_error(em));
  cr_assert_gt(jt_emu_runs(em), before, "%s: nothing ran on the CPU", label);

  /* The reference. */
  const size_t total = (size_t)(c.batch * c.m * c.n);
  ref f = {&c, malloc(total * 8), malloc(total * 8), 0};
  cr_assert(f.acc != NULL && f.value != NULL);
  for (int64_t b = 0; b < c.batch; b++)
    for (int64_t r = 0; r < c.m; r++)
      for (int64_t col = 0; col < c.n; col++) {
        const size_t i = (size_t)((b * c.m + r) * c.n + col);
        f.acc[i] = acc_of(&c, b, r, col);
        f.value[i] = value_of(&c, f.acc[i], b, r, col);
      }
  check_mat(label, "D", &c.d, ref_d, &f);
  for (int i = 0; i < c.num_out; i++) {
    f.which = i;
    check_mat(label, OUTPUTS[i].name, &c.out[i], ref_out, &f);
  }
  for (int i = 0; i < c.num_red; i++)
    for (size_t j = 0; j < c.red_count[i]; j++) {
      double want;
      if (i == 0) { /* over the rows: batch j / n, column j % n */
        const int64_t b = (int64_t)j / c.n, col = (int64_t)j % c.n;
        want = 0;
        for (int64_t r = 0; r < c.m; r++) want += f.value[(b * c.m + r) * c.n + col];
      } else if (i == 1) { /* over the columns: batch j / m, row j % m */
        const int64_t b = (int64_t)j / c.m, r = (int64_t)j % c.m;
        want = -INFINITY;
        for (int64_t col = 0; col < c.n; col++)
          want = fmax(want, f.value[(b * c.m + r) * c.n + col]);
      } else {
        want = 0;
        for (int64_t k = 0; k < c.m * c.n; k++) {
          const double v = f.value[(int64_t)j * c.m * c.n + k];
          want += c.dt == JITK_FLOAT64 ? v * v : v > 0;
        }
      }
      cr_assert_eq(c.red[i][j], want, "%s: %s[%zu] = %g, want %g", label, REDUCTIONS[i].name, j,
                   c.red[i][j], want);
    }
  free(f.acc);
  free(f.value);
  jitk_matmul_destroy(p);
  free(c.a.buf);
  free(c.b.buf);
  free(c.c.buf);
  free(c.d.buf);
  for (int i = 0; i < c.num_out; i++) free(c.out[i].buf);
  for (int i = 0; i < c.num_red; i++) free(c.red[i]);
  free(c.bias);
}

Test(emulated, matmul_plans) {
  /* float32, float16 and bfloat16 plans on FFMA or mma.sync (each case
   * sets JITK_MM_KIND): the fake device is an sm_90, whose wgmma kernel
   * (TMA, mbarriers, wgmma) the emulator cannot run. float32 FFMA takes
   * the tile the plan chooses (the next test runs each one). */
  jt_emu *em = jt_emu_open(2);
  cr_assert_not_null(em);
  jitk_engine *e = jt_emu_engine(em);
  cr_assert_not_null(e);
  const char *env = getenv("JT_EMU_SEED"), *n_env = getenv("JT_EMU_CASES");
  uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : 0x3A7ull;
  const int cases = n_env != NULL ? atoi(n_env) : MM_CASES;
  kinds used = {0, 0, 0};
  for (int i = 0; i < cases; i++) run_case(e, em, &seed, i, false, NULL, &used);
  cr_log_info("%d plans on FFMA, %d on mma.sync", used.simt, used.mma);
  cr_assert(cases < 10 || (used.simt > 0 && used.mma > 0), "the cases missed a kernel");
  double built, ran;
  jt_emu_times(em, &built, &ran);
  cr_log_info("%llu launches ran on the CPU (%.1f s compiling them, %.1f s running)",
              jt_emu_runs(em), built, ran);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* float32 FFMA on each tile ffma_gemm has (cp.async; JITK_MM_FFMA_BN
 * forces it) and on simt_gemm's (0): random shapes with tails, layouts,
 * offsets off 16 bytes, C, epilogues, outputs, reductions and split-K,
 * as above. */
Test(emulated, matmul_ffma_tiles) {
  jt_emu *em = jt_emu_open(2);
  cr_assert_not_null(em);
  jitk_engine *e = jt_emu_engine(em);
  cr_assert_not_null(e);
  uint64_t seed = 0xF1A7ull;
  static const int bns[] = {0, 32, 64, 256};
  kinds used = {0, 0, 0};
  for (size_t t = 0; t < sizeof bns / sizeof bns[0]; t++) {
    char bn[16], tile[32];
    snprintf(bn, sizeof bn, "%d", bns[t]);
    snprintf(tile, sizeof tile, "tile 128x%dx16,", bns[t] > 0 ? bns[t] : 128);
    setenv("JITK_MM_FFMA_BN", bn, 1);
    for (int i = 0; i < MM_FFMA_CASES; i++)
      run_case(e, em, &seed, (int)t * MM_FFMA_CASES + i, true, tile, &used);
  }
  unsetenv("JITK_MM_FFMA_BN");
  cr_assert_eq(used.simt, 4 * MM_FFMA_CASES);
  /* The stand-in device is an sm_90: splits of 2 to 8 slices are summed
   * across clusters. */
  cr_assert_gt(used.clusters, 0);
  cr_log_info("%d of the cases summed their slices across clusters", used.clusters);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}
