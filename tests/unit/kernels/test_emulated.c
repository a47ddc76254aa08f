/*
 * Generated kernels run on the CPU (tests/emu): the elementwise and
 * reduction kernels jitk makes for random layouts, launched through the
 * public API on the stand-in driver, with the grids jitk chose, each
 * checked element by element against a reference computed here. Every
 * array lives in a buffer of exactly the bytes its view spans (plus the
 * elements a misaligned start skips), so a read or write past it is
 * caught (by AddressSanitizer in the sanitizer build, by the bytes around
 * it here), and an output's bytes that no element of its view holds must
 * keep the value they had. The layouts cover the paths jitk picks among:
 * one-dimensional vector loops with a peeled head, misaligned and reversed
 * arrays and inputs that step by 2 to 4, vectors over several dimensions,
 * the tiled transpose (with element pairs), 64-bit indices, broadcasting
 * and scalars.
 */
#include <stdio.h>
#include <sys/mman.h>

#include "common.h"
#include "emu/emu.h"

typedef struct ty {
  jitk_dtype t;
  size_t size;
  int kind; /* 0 signed, 1 unsigned, 2 float, 3 complex, 4 half (float16, bfloat16) */
} ty;

static const ty TYPES[] = {
    {JITK_INT8, 1, 0},        {JITK_INT16, 2, 0},   {JITK_UINT16, 2, 1},   {JITK_INT32, 4, 0},
    {JITK_FLOAT32, 4, 2},     {JITK_INT64, 8, 0},   {JITK_FLOAT64, 8, 2},  {JITK_COMPLEX64, 8, 3},
    {JITK_COMPLEX128, 16, 3}, {JITK_FLOAT16, 2, 4}, {JITK_BFLOAT16, 2, 4},
};

/* Random cases per test; the sanitizer build, several times slower, runs
 * a third of them. No test sets Criterion's .timeout (Criterion 2.4 leaks
 * the timer of a timed test that ends while another runs); ctest's limit
 * holds. */
#if defined(__SANITIZE_ADDRESS__)
enum { EW_CASES = 54, RED_CASES = 34 };
#else
enum { EW_CASES = 160, RED_CASES = 100 };
#endif

/* JT_EMU_CASES and JT_EMU_SEED in the environment change the count and
 * the seed of the random tests, for a longer search than CI's. */
static int cases_or(int n) {
  const char *v = getenv("JT_EMU_CASES");
  return v != NULL && atoi(v) > 0 ? atoi(v) : n;
}
static uint64_t seed_or(uint64_t s) {
  const char *v = getenv("JT_EMU_SEED");
  return v != NULL ? strtoull(v, NULL, 0) : s;
}

static int64_t pick(uint64_t *s, int64_t n) { return (int64_t)(jt_next(s) % (uint64_t)n); }

/* An element as two doubles (the imaginary part 0 but for complex). */
typedef struct val {
  double re, im;
} val;

static val get(const ty *t, const unsigned char *p) {
  val v = {0, 0};
  switch (t->t) {
    case JITK_INT8: v.re = *(const int8_t *)p; break;
    case JITK_INT16: v.re = *(const int16_t *)p; break;
    case JITK_UINT16: v.re = *(const uint16_t *)p; break;
    case JITK_INT32: v.re = *(const int32_t *)p; break;
    case JITK_INT64: v.re = (double)*(const int64_t *)p; break;
    case JITK_FLOAT32: v.re = *(const float *)p; break;
    case JITK_FLOAT64: v.re = *(const double *)p; break;
    case JITK_FLOAT16: v.re = (double)*(const _Float16 *)p; break;
    case JITK_BFLOAT16: v.re = jitk_bfloat16_to_float(*(const uint16_t *)p); break;
    case JITK_COMPLEX64:
      v.re = ((const float *)p)[0];
      v.im = ((const float *)p)[1];
      break;
    default:
      v.re = ((const double *)p)[0];
      v.im = ((const double *)p)[1];
      break;
  }
  return v;
}

/* Stores v as the type would hold it: integers wrap, floats round. */
static void put(const ty *t, unsigned char *p, val v) {
  switch (t->t) {
    case JITK_INT8: *(int8_t *)p = (int8_t)(int64_t)v.re; break;
    case JITK_INT16: *(int16_t *)p = (int16_t)(int64_t)v.re; break;
    case JITK_UINT16: *(uint16_t *)p = (uint16_t)(int64_t)v.re; break;
    case JITK_INT32: *(int32_t *)p = (int32_t)(int64_t)v.re; break;
    case JITK_INT64: *(int64_t *)p = (int64_t)v.re; break;
    case JITK_FLOAT32: *(float *)p = (float)v.re; break;
    case JITK_FLOAT64: *(double *)p = v.re; break;
    case JITK_FLOAT16: *(_Float16 *)p = (_Float16)(float)v.re; break;
    case JITK_BFLOAT16: *(uint16_t *)p = jitk_float_to_bfloat16((float)v.re); break;
    case JITK_COMPLEX64:
      ((float *)p)[0] = (float)v.re;
      ((float *)p)[1] = (float)v.im;
      break;
    default:
      ((double *)p)[0] = v.re;
      ((double *)p)[1] = v.im;
      break;
  }
}

static val random_val(uint64_t *s, const ty *t) {
  val v = {(double)(pick(s, 201) - 100), 0};
  if (t->kind == 1) v.re += 100;
  if (t->kind >= 2) v.re = v.re / 8 + (double)pick(s, 1000) / 4096;
  if (t->kind == 3) v.im = (double)(pick(s, 2001) - 1000) / 16;
  return v;
}

/* One array: its view and the buffer that holds exactly what it spans. */
typedef struct arr {
  int ndim;
  int64_t shape[4], strides[4]; /* elements */
  unsigned char *buf;
  size_t bytes;
  unsigned char *first; /* the element at index 0 */
  DLTensor t;
} arr;

/* Strides for `shape` in a random order of the dimensions, with gaps and
 * reversals at random (never two indices on one element); `plain` keeps C
 * order without either. */
static void random_strides(uint64_t *s, int nd, const int64_t *shape, int64_t *st, bool plain) {
  int order[4] = {0, 1, 2, 3};
  for (int i = nd - 1; i > 0 && !plain; i--) {
    int j = (int)pick(s, i + 1), tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
  int64_t step = plain ? 1 : 1 + (pick(s, 4) == 0);
  for (int i = nd - 1; i >= 0; i--) {
    st[order[i]] = step;
    step *= shape[order[i]] + (plain ? 0 : pick(s, 3) == 0);
  }
  for (int d = 0; d < nd && !plain; d++)
    if (pick(s, 5) == 0) st[d] = -st[d];
}

/* The buffer for a view, `shift` elements into it, filled with `fill`. */
static void make_arr(arr *a, const ty *t, int nd, const int64_t *shape, const int64_t *st,
                     int64_t shift, unsigned char fill) {
  a->ndim = nd;
  int64_t lo = 0, hi = 0;
  bool empty = false;
  for (int d = 0; d < nd; d++) {
    a->shape[d] = shape[d];
    a->strides[d] = st[d];
    empty |= shape[d] == 0;
    int64_t span = st[d] * (shape[d] - 1);
    if (shape[d] > 0) {
      if (span < 0)
        lo += span;
      else
        hi += span;
    }
  }
  int64_t count = empty ? 0 : hi - lo + 1;
  a->bytes = (size_t)(count + shift) * t->size;
  a->buf = malloc(a->bytes ? a->bytes : 1);
  cr_assert_not_null(a->buf);
  memset(a->buf, fill, a->bytes);
  a->first = a->buf + (size_t)(shift - lo) * t->size;
  a->t = jt_tensor(a->first, t->t, nd, a->shape, a->strides);
}

/* Byte offset of the element at C-order index `flat` of the view. */
static int64_t offset_of(const arr *a, int64_t flat, size_t size) {
  int64_t off = 0;
  for (int d = a->ndim - 1; d >= 0; d--) {
    off += (flat % a->shape[d]) * a->strides[d];
    flat /= a->shape[d];
  }
  return off * (int64_t)size;
}

static void fill_random(uint64_t *s, const ty *t, arr *a, int64_t n) {
  for (int64_t k = 0; k < n; k++) put(t, a->first + offset_of(a, k, t->size), random_val(s, t));
}

/* The element of a broadcast input at the output's C-order index. */
static val bget(const ty *t, const arr *a, int nd, const int64_t *shape, int64_t flat) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; d--) {
    int64_t c = flat % shape[d];
    flat /= shape[d];
    int ad = d - (nd - a->ndim);
    if (ad >= 0 && a->shape[ad] != 1) off += c * a->strides[ad];
  }
  return get(t, a->first + off * (int64_t)t->size);
}

static bool same(val a, val b) { return a.re == b.re && a.im == b.im; }

/* Checks an output: each element against the reference (rounded to the
 * type and equal, or within *tol where `tol` is not NULL and the reference
 * set it above 0: float sums, whose order differs), and every byte of its
 * buffer that no element holds still `fill`. */
static void check_output(const char *what, const ty *t, const arr *z, int64_t n, unsigned char fill,
                         val (*ref)(void *, int64_t), void *ctx, const double *tol) {
  unsigned char *held = calloc(z->bytes + 1, 1);
  cr_assert_not_null(held);
  for (int64_t k = 0; k < n; k++) {
    int64_t off = offset_of(z, k, t->size);
    val got = get(t, z->first + off), want = ref(ctx, k);
    double within = tol != NULL ? *tol : 0;
    if (within == 0) {
      unsigned char w[16];
      put(t, w, want);
      want = get(t, w);
    }
    cr_assert(fabs(got.re - want.re) <= within && fabs(got.im - want.im) <= within,
              "%s: element %lld is (%.17g, %.17g), expected (%.17g, %.17g) within %g", what,
              (long long)k, got.re, got.im, want.re, want.im, within);
    memset(held + (z->first - z->buf) + off, 1, t->size);
  }
  for (size_t b = 0; b < z->bytes; b++)
    cr_assert(held[b] || z->buf[b] == fill,
              "%s: byte %zu of the output's buffer, held by no "
              "element, changed from %#x to %#x",
              what, b, fill, z->buf[b]);
  free(held);
}

typedef struct ew_case {
  const ty *t;
  int nd;
  int64_t shape[4];
  arr x, y, z;
  bool y_scalar;
  val y_value;
  bool uses_i; /* the operation adds i % 7 */
} ew_case;

static val ew_ref(void *p, int64_t k) {
  ew_case *c = p;
  val x = bget(c->t, &c->x, c->nd, c->shape, k);
  val y = c->y_scalar ? c->y_value : bget(c->t, &c->y, c->nd, c->shape, k);
  val r = {x.re - y.re, x.im - y.im};
  if (c->uses_i) {
    /* The difference is rounded to T before i % 7 is added. */
    unsigned char w[16];
    put(c->t, w, r);
    r = get(c->t, w);
    r.re += (double)(k % 7);
  }
  return r;
}

/* A layout of one of three families, chosen to reach jitk's paths. */
static void random_ew_case(uint64_t *s, ew_case *c, char *what, size_t what_size) {
  memset(c, 0, sizeof *c);
  int family = (int)pick(s, 3);
  c->t = &TYPES[pick(s, sizeof TYPES / sizeof TYPES[0])];
  if (family == 2 && pick(s, 2) == 0) c->t = &TYPES[1 + pick(s, 2)]; /* 2-byte: pairs */
  int64_t v = c->t->size >= 16 ? 1 : 16 / (int64_t)c->t->size;
  int64_t xs[4], ys[4], zs[4], yshape[4];
  int ynd;
  if (family == 0) {
    /* A line: contiguous, reversed or stepping inputs, misaligned. */
    c->nd = 1;
    c->shape[0] = pick(s, 8) == 0 ? pick(s, 2 * v) : 1 + pick(s, 3000);
    int64_t xstep = pick(s, 3) == 0 ? 2 + pick(s, 3) : pick(s, 4) == 0 ? -1 : 1;
    int64_t ystep = pick(s, 3) == 0 ? 2 + pick(s, 3) : pick(s, 4) == 0 ? -1 : 1;
    xs[0] = xstep;
    ys[0] = ystep;
    zs[0] = pick(s, 6) == 0 ? -1 : 1;
    ynd = 1;
    yshape[0] = pick(s, 6) == 0 ? 1 : c->shape[0];
  } else {
    c->nd = 2 + (int)pick(s, 3);
    for (int d = 0; d < c->nd; d++) c->shape[d] = 1 + pick(s, family == 2 ? 4 : 12);
    if (family == 2) {
      /* A transposed input: rows and columns wide enough for tiles. */
      int big = c->nd == 2 ? 2 : 2 + (int)pick(s, 2);
      for (int d = c->nd - big; d < c->nd; d++) c->shape[d] = 16 + pick(s, 120);
      if (pick(s, 2) == 0)
        for (int d = 0; d < c->nd; d++) c->shape[d] += c->shape[d] % 2;
    } else if (pick(s, 2) == 0) {
      c->shape[c->nd - 1] = v * (1 + pick(s, 4)); /* vectors over several dimensions */
    }
    /* Every array in C order at times: vectors over several dimensions. */
    bool plain = family == 1 && pick(s, 2) == 0;
    random_strides(s, c->nd, c->shape, xs, plain);
    if (family == 2) {
      /* x walks the second-last dimension contiguously, then the last,
       * then the others in order: a transposed view. */
      int a = c->nd - 2, b = c->nd - 1;
      xs[a] = 1;
      xs[b] = c->shape[a];
      int64_t step = c->shape[a] * c->shape[b];
      for (int d = a - 1; d >= 0; d--) {
        xs[d] = step;
        step *= c->shape[d];
      }
      if (pick(s, 4) == 0) xs[a] = -1;
    }
    random_strides(s, c->nd, c->shape, zs, plain || pick(s, 4) != 0);
    /* y: fewer dimensions, or extents of 1, at times. */
    ynd = c->nd - (int)pick(s, 2);
    for (int d = 0; d < ynd; d++) {
      int od = d + c->nd - ynd;
      yshape[d] = pick(s, 4) == 0 && !plain ? 1 : c->shape[od];
    }
    random_strides(s, ynd, yshape, ys, plain || pick(s, 2) == 0);
    if (family == 2 && pick(s, 2) == 0 && ynd == c->nd) {
      for (int d = 0; d < c->nd; d++) yshape[d] = c->shape[d];
      memcpy(ys, xs, sizeof ys); /* a second transposed input */
    }
  }
  c->y_scalar = pick(s, 8) == 0;
  int64_t n = 1;
  for (int d = 0; d < c->nd; d++) n *= c->shape[d];
  int64_t yn = 1;
  for (int d = 0; d < ynd; d++) yn *= yshape[d];
  make_arr(&c->x, c->t, c->nd, c->shape, xs, pick(s, 3) == 0 ? pick(s, v) : 0, 0x5A);
  make_arr(&c->y, c->t, ynd, yshape, ys, pick(s, 3) == 0 ? pick(s, v) : 0, 0x5A);
  make_arr(&c->z, c->t, c->nd, c->shape, zs, pick(s, 4) == 0 ? pick(s, v) : 0, 0xA5);
  fill_random(s, c->t, &c->x, n);
  fill_random(s, c->t, &c->y, yn);
  unsigned char held[16];
  put(c->t, held, random_val(s, c->t));
  c->y_value = get(c->t, held); /* as the scalar argument will hold it */
  int at = snprintf(what, what_size, "dtype %d, shape (", (int)c->t->t);
  for (int d = 0; d < c->nd; d++)
    at += snprintf(what + at, what_size - (size_t)at, "%lld%s", (long long)c->shape[d],
                   d + 1 < c->nd ? ", " : ")");
  snprintf(what + at, what_size - (size_t)at,
           ", strides x (%lld..%lld) y (%lld..) z (%lld..%lld), y %s, starts %p %p %p",
           (long long)xs[0], (long long)xs[c->nd - 1], (long long)ys[0], (long long)zs[0],
           (long long)zs[c->nd - 1], c->y_scalar ? "scalar" : "array", (void *)c->x.first,
           (void *)c->y.first, (void *)c->z.first);
}

static jitk_arg scalar_arg(const ty *t, val v) {
  switch (t->t) {
    case JITK_INT8: return jitk_arg_i8((int8_t)v.re);
    case JITK_INT16: return jitk_arg_i16((int16_t)v.re);
    case JITK_UINT16: return jitk_arg_u16((uint16_t)v.re);
    case JITK_INT32: return jitk_arg_i32((int32_t)v.re);
    case JITK_INT64: return jitk_arg_i64((int64_t)v.re);
    case JITK_FLOAT32: return jitk_arg_f32((float)v.re);
    case JITK_FLOAT64: return jitk_arg_f64(v.re);
    case JITK_FLOAT16: {
      _Float16 h = (_Float16)(float)v.re;
      uint16_t bits;
      memcpy(&bits, &h, 2);
      return jitk_arg_f16_bits(bits);
    }
    case JITK_BFLOAT16: return jitk_arg_bf16_bits(jitk_float_to_bfloat16((float)v.re));
    case JITK_COMPLEX64: return jitk_arg_c64((float)v.re, (float)v.im);
    default: return jitk_arg_c128(v.re, v.im);
  }
}

static void free_arr(arr *a) { free(a->buf); }

/* The emulator, with a device of `sms` multiprocessors, and its engine. */
static jitk_engine *emu_start(int sms, jt_emu **em) {
  *em = jt_emu_open(sms);
  cr_assert_not_null(*em);
  jitk_engine *e = jt_emu_engine(*em);
  cr_assert_not_null(e);
  return e;
}

static void report(jt_emu *em) {
  double built, ran;
  jt_emu_times(em, &built, &ran);
  cr_log_info("%llu launches ran on the CPU (%.1f s compiling them, %.1f s running)",
              jt_emu_runs(em), built, ran);
}

Test(emulated, elementwise_layouts) {
  jt_emu *em;
  jitk_engine *e = emu_start(2, &em);
  /* The second kernel uses the element's index, which keeps the loop in C
   * order (no reordering of dimensions) and must count right on every
   * path. */
  jitk_elementwise *k, *ki;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x - y", "sub", NULL, &k));
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x - y; z += (T)(i % 7)", "subi", NULL,
                                   &ki));
  uint64_t seed = seed_or(0x6A17ull);
  for (int i = 0, n_cases = cases_or(EW_CASES); i < n_cases; i++) {
    ew_case c;
    char what[512];
    random_ew_case(&seed, &c, what, sizeof what);
    c.uses_i = i % 2 == 1;
    /* In place at times: z is x itself (CuPy's x += y), and the reference
     * reads a copy of x taken before the launch. */
    bool in_place = pick(&seed, 6) == 0;
    arr out = c.z;
    unsigned char *saved = NULL;
    if (in_place) {
      saved = malloc(c.x.bytes + 1);
      cr_assert_not_null(saved);
      memcpy(saved, c.x.buf, c.x.bytes);
      out = c.x;
      c.x.first = saved + (c.x.first - c.x.buf);
    }
    jitk_arg a[3] = {jitk_arg_array(&c.x.t),
                     c.y_scalar ? scalar_arg(c.t, c.y_value) : jitk_arg_array(&c.y.t),
                     jitk_arg_array(&out.t)};
    jitk_launch_options o;
    jitk_launch_options_init(&o);
    if (pick(&seed, 8) == 0) o.block_size = 32 * (1 + (int)pick(&seed, 8));
    jitk_status st = jitk_elementwise_launch_ex(c.uses_i ? ki : k, NULL, a, 3, &o, NULL);
    cr_assert_eq(st, JITK_OK, "case %d (%s): %s; %s", i, what, jitk_errmsg(e), jt_emu_error(em));
    int64_t n = 1;
    for (int d = 0; d < c.nd; d++) n *= c.shape[d];
    char label[600];
    snprintf(label, sizeof label, "case %d (%s%s%s)", i, what, c.uses_i ? ", adds i % 7" : "",
             in_place ? ", in place" : "");
    check_output(label, c.t, &out, n, in_place ? 0x5A : 0xA5, ew_ref, &c, NULL);
    free(saved);
    free_arr(&c.x);
    free_arr(&c.y);
    free_arr(&c.z);
  }
  report(em);
  jitk_elementwise_destroy(k);
  jitk_elementwise_destroy(ki);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* ---- reductions ---------------------------------------------------- */

typedef struct red_case {
  const ty *t;
  int nd;
  int64_t shape[4];
  bool reduced[4];
  int axes[4], naxes, keepdims;
  arr x, y;
  int ynd;
  int64_t yshape[4];
  bool max;      /* max without identity, else a sum from 0 */
  bool weighted; /* a sum of x * w, w broadcast against x */
  arr w;
  double tol; /* of each output, for float sums: their order differs */
} red_case;

/* The reference: the output at C-order index k, over the reduced axes;
 * `tol` gets the bound of a float sum's rounding. */
static val red_ref(void *p, int64_t k) {
  red_case *c = p;
  int64_t kept[4], kshape[4];
  int nk = 0;
  for (int d = 0; d < c->nd; d++)
    if (!c->reduced[d]) kshape[nk++] = c->shape[d];
  for (int d = nk - 1; d >= 0; d--) {
    kept[d] = k % kshape[d];
    k /= kshape[d];
  }
  int64_t m = 1;
  for (int d = 0; d < c->nd; d++)
    if (c->reduced[d]) m *= c->shape[d];
  val acc = {0, 0};
  double mag = 0;
  for (int64_t j = 0; j < m; j++) {
    int64_t rest = j, off = 0, woff = 0;
    int kd = nk - 1;
    for (int d = c->nd - 1; d >= 0; d--) {
      int64_t coord;
      if (c->reduced[d]) {
        coord = rest % c->shape[d];
        rest /= c->shape[d];
      } else {
        coord = kept[kd--];
      }
      off += coord * c->x.strides[d];
      int wd = d - (c->nd - c->w.ndim);
      if (c->weighted && wd >= 0 && c->w.shape[wd] != 1) woff += coord * c->w.strides[wd];
    }
    val v = get(c->t, c->x.first + off * (int64_t)c->t->size);
    if (c->weighted) {
      val w = get(c->t, c->w.first + woff * (int64_t)c->t->size);
      val prod = {v.re * w.re - v.im * w.im, v.re * w.im + v.im * w.re};
      v = prod;
    }
    if (c->max) {
      if (j == 0 || v.re > acc.re) acc = v;
    } else {
      acc.re += v.re;
      acc.im += v.im;
      mag += fabs(v.re) + fabs(v.im);
    }
  }
  c->tol =
      c->t->kind >= 2 ? mag * (c->t->size == 4 || c->t->t == JITK_COMPLEX64 ? 1e-6 : 1e-14) : 0;
  return acc;
}

static void random_red_case(uint64_t *s, red_case *c, char *what, size_t what_size) {
  memset(c, 0, sizeof *c);
  c->t = &TYPES[pick(s, sizeof TYPES / sizeof TYPES[0])];
  /* Sums of 16-bit floats round at every step, in an order the plan
   * picks: only their max has one right answer. */
  c->max = c->t->kind == 4 || (c->t->kind < 3 && pick(s, 3) == 0);
  c->nd = 1 + (int)pick(s, 4);
  for (int d = 0; d < c->nd; d++) c->shape[d] = 1 + pick(s, 9);
  /* One long dimension at times: reductions split across blocks. */
  if (pick(s, 2) == 0) c->shape[pick(s, c->nd)] = 64 + pick(s, c->nd == 1 ? 40000 : 3000);
  int64_t xs[4];
  random_strides(s, c->nd, c->shape, xs, pick(s, 3) == 0);
  make_arr(&c->x, c->t, c->nd, c->shape, xs, pick(s, 3) == 0 ? 1 : 0, 0x5A);
  int64_t n = 1;
  for (int d = 0; d < c->nd; d++) n *= c->shape[d];
  fill_random(s, c->t, &c->x, n);
  c->weighted = !c->max && pick(s, 2) == 0;
  if (c->weighted) {
    int64_t wshape[4], ws[4], wn = 1;
    int wnd = c->nd - (int)pick(s, c->nd);
    for (int d = 0; d < wnd; d++) {
      wshape[d] = pick(s, 3) == 0 ? 1 : c->shape[d + c->nd - wnd];
      wn *= wshape[d];
    }
    random_strides(s, wnd, wshape, ws, pick(s, 2) == 0);
    make_arr(&c->w, c->t, wnd, wshape, ws, 0, 0x5A);
    fill_random(s, c->t, &c->w, wn);
  }
  if (pick(s, 5) == 0) {
    c->naxes = -1;
    for (int d = 0; d < c->nd; d++) c->reduced[d] = true;
  } else {
    for (int d = 0; d < c->nd; d++)
      if (pick(s, 2) == 0) {
        c->reduced[d] = true;
        c->axes[c->naxes++] = pick(s, 2) == 0 ? d : d - c->nd;
      }
  }
  c->keepdims = (int)pick(s, 2);
  for (int d = 0; d < c->nd; d++) {
    if (!c->reduced[d])
      c->yshape[c->ynd++] = c->shape[d];
    else if (c->keepdims)
      c->yshape[c->ynd++] = 1;
  }
  int64_t ys[4] = {0, 0, 0, 0};
  random_strides(s, c->ynd, c->yshape, ys, pick(s, 2) == 0);
  make_arr(&c->y, c->t, c->ynd, c->yshape, ys, 0, 0xA5);
  int at = snprintf(what, what_size, "%s of dtype %d, shape (",
                    c->max        ? "max"
                    : c->weighted ? "weighted sum"
                                  : "sum",
                    (int)c->t->t);
  for (int d = 0; d < c->nd; d++)
    at += snprintf(what + at, what_size - (size_t)at, "%lld%s%s", (long long)c->shape[d],
                   c->reduced[d] ? "*" : "", d + 1 < c->nd ? ", " : ")");
  snprintf(what + at, what_size - (size_t)at, " (* reduced), keepdims %d", c->keepdims);
}

/* Checks a reduction's output against the reference. */
static void check_reduction(const char *what, red_case *c) {
  int64_t n = 1;
  for (int d = 0; d < c->ynd; d++) n *= c->yshape[d];
  check_output(what, c->t, &c->y, n, 0xA5, red_ref, c, &c->tol);
}

/* The sum, the max and the weighted sum. */
typedef struct reductions {
  jitk_reduction *sum, *max, *dot;
} reductions;

/* The kernel a case launches, its arguments in a (x, then w for the
 * weighted sum, then y), and how many. */
static size_t red_args(const reductions *r, const red_case *c, jitk_arg a[3], jitk_reduction **k) {
  a[0] = jitk_arg_array(&c->x.t);
  if (!c->weighted) {
    *k = c->max ? r->max : r->sum;
    a[1] = jitk_arg_array(&c->y.t);
    return 2;
  }
  *k = r->dot;
  a[1] = jitk_arg_array(&c->w.t);
  a[2] = jitk_arg_array(&c->y.t);
  return 3;
}

/* Launches a case twice, its blocks in order and then shuffled, and
 * checks the first result and that the second has the same bits. */
static void run_red_case(jt_emu *em, jitk_engine *e, const reductions *r, red_case *c,
                         const char *label, uint64_t *seed) {
  jitk_arg a[3];
  jitk_reduction *k;
  size_t na = red_args(r, c, a, &k);
  const int *axes = c->naxes < 0 ? NULL : c->axes;
  jt_emu_set_seed(em, 0);
  jitk_status st = jitk_reduction_launch(k, NULL, a, na, axes, c->naxes, c->keepdims, NULL);
  cr_assert_eq(st, JITK_OK, "%s: %s; %s", label, jitk_errmsg(e), jt_emu_error(em));
  check_reduction(label, c);
  unsigned char *first = malloc(c->y.bytes + 1);
  cr_assert_not_null(first);
  memcpy(first, c->y.buf, c->y.bytes);
  memset(c->y.buf, 0xA5, c->y.bytes);
  jt_emu_set_seed(em, jt_next(seed) | 1);
  st = jitk_reduction_launch(k, NULL, a, na, axes, c->naxes, c->keepdims, NULL);
  cr_assert_eq(st, JITK_OK, "%s, blocks shuffled: %s; %s", label, jitk_errmsg(e), jt_emu_error(em));
  cr_assert(memcmp(first, c->y.buf, c->y.bytes) == 0,
            "%s: the blocks in another order gave other bits", label);
  free(first);
  free_arr(&c->x);
  free_arr(&c->y);
  if (c->weighted) free_arr(&c->w);
}

static void create_reductions(jitk_engine *e, reductions *r) {
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", "T", "total", NULL,
                                 &r->sum));
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "max(a, b)", "y = a", NULL, "T", "largest",
                                 NULL, &r->max));
  JT_OK(e, jitk_reduction_create(e, "T x, T w", "T y", "x * w", "a + b", "y = a", "0", "T", "dot",
                                 NULL, &r->dot));
}

static void destroy_reductions(reductions *r) {
  jitk_reduction_destroy(r->sum);
  jitk_reduction_destroy(r->max);
  jitk_reduction_destroy(r->dot);
}

Test(emulated, reduction_layouts) {
  jt_emu *em;
  jitk_engine *e = emu_start(4, &em);
  reductions r;
  create_reductions(e, &r);
  uint64_t seed = seed_or(0x2ED5ull);
  for (int i = 0, n_cases = cases_or(RED_CASES); i < n_cases; i++) {
    red_case c;
    char what[512], label[600];
    random_red_case(&seed, &c, what, sizeof what);
    snprintf(label, sizeof label, "case %d (%s)", i, what);
    run_red_case(em, e, &r, &c, label, &seed);
  }
  report(em);
  destroy_reductions(&r);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* Shapes that reach the plans random small ones rarely do: a split whose
 * chunks fold in two levels inside the kernel, a second kernel for a
 * split of more than 16 MiB, pairs of 2-byte outputs, a warp per row of
 * outputs, groups of lanes for short rows. */
Test(emulated, reduction_plans) {
  jt_emu *em;
  jitk_engine *e = emu_start(4, &em);
  reductions r;
  create_reductions(e, &r);
  static const struct {
    jitk_dtype t;
    int nd;
    int64_t shape[2];
    int axis; /* -1: all */
    bool max;
  } plans[] = {
      {JITK_FLOAT32, 1, {1 << 20}, -1, false},    {JITK_INT32, 1, {(1 << 20) + 7}, -1, true},
      {JITK_INT8, 1, {(1 << 24) + 3}, -1, false}, {JITK_INT32, 2, {8, 1 << 17}, 1, false},
      {JITK_INT16, 2, {3000, 64}, 0, false},      {JITK_UINT16, 2, {1000, 130}, 0, true},
      {JITK_FLOAT64, 2, {300, 5000}, 0, false},   {JITK_INT64, 2, {5000, 33}, 1, false},
      {JITK_COMPLEX64, 2, {4100, 3}, 1, false},   {JITK_INT32, 2, {2, 300000}, -1, false},
  };
  uint64_t seed = 0x91A7ull;
  for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
    red_case c;
    memset(&c, 0, sizeof c);
    for (size_t j = 0; j < sizeof TYPES / sizeof TYPES[0]; j++)
      if (TYPES[j].t == plans[i].t) c.t = &TYPES[j];
    c.max = plans[i].max;
    c.nd = plans[i].nd;
    int64_t xs[2], n = 1;
    for (int d = 0; d < c.nd; d++) {
      c.shape[d] = plans[i].shape[d];
      n *= c.shape[d];
    }
    random_strides(&seed, c.nd, c.shape, xs, true);
    make_arr(&c.x, c.t, c.nd, c.shape, xs, 0, 0x5A);
    fill_random(&seed, c.t, &c.x, n);
    if (plans[i].axis < 0) {
      c.naxes = -1;
      for (int d = 0; d < c.nd; d++) c.reduced[d] = true;
    } else {
      c.naxes = 1;
      c.axes[0] = plans[i].axis;
      c.reduced[plans[i].axis] = true;
    }
    for (int d = 0; d < c.nd; d++)
      if (!c.reduced[d]) c.yshape[c.ynd++] = c.shape[d];
    int64_t ys[2] = {1, 1};
    random_strides(&seed, c.ynd, c.yshape, ys, true);
    make_arr(&c.y, c.t, c.ynd, c.yshape, ys, 0, 0xA5);
    char label[128];
    snprintf(label, sizeof label, "plan %zu (dtype %d, %lld x %lld, axis %d)", i, (int)c.t->t,
             (long long)c.shape[0], (long long)(c.nd > 1 ? c.shape[1] : 1), plans[i].axis);
    run_red_case(em, e, &r, &c, label, &seed);
  }
  report(em);
  destroy_reductions(&r);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* Offsets at 2^31 bytes and past: 64-bit indices; just below, a 32-bit one
 * whose largest offset is 2^31 - 2. The input's buffer spans them but only
 * its elements are touched (pages mapped on demand). */
Test(emulated, elementwise_offsets_at_the_index_width) {
  jt_emu *em;
  jitk_engine *e = emu_start(2, &em);
  jitk_elementwise *k;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x - y", "sub", NULL, &k));
  static const int64_t outer[] = {((int64_t)1 << 30) + 1, ((int64_t)1 << 30) - 2,
                                  ((int64_t)1 << 30) - 3};
  const ty *t = &TYPES[0]; /* int8: offsets in bytes are offsets in elements */
  uint64_t seed = 0x1D64ull;
  for (int i = 0; i < 3; i++) {
    int64_t shape[2] = {3, 5}, xs[2] = {outer[i], 1}, zs[2] = {5, 1};
    size_t span = (size_t)(outer[i] * 2 + 5);
    unsigned char *big = mmap(NULL, span, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    cr_assert_neq(big, MAP_FAILED);
    ew_case c;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.nd = 2;
    memcpy(c.shape, shape, sizeof shape);
    c.x.ndim = 2;
    memcpy(c.x.shape, shape, sizeof shape);
    memcpy(c.x.strides, xs, sizeof xs);
    c.x.first = big;
    c.x.t = jt_tensor(big, t->t, 2, c.x.shape, c.x.strides);
    make_arr(&c.y, t, 2, shape, zs, 0, 0x5A);
    make_arr(&c.z, t, 2, shape, zs, 0, 0xA5);
    fill_random(&seed, t, &c.x, 15);
    fill_random(&seed, t, &c.y, 15);
    jitk_arg a[3] = {jitk_arg_array(&c.x.t), jitk_arg_array(&c.y.t), jitk_arg_array(&c.z.t)};
    JT_OK(e, jitk_elementwise_launch(k, NULL, a, 3, -1, NULL));
    cr_assert_str_empty(jt_emu_error(em));
    char label[64];
    snprintf(label, sizeof label, "rows %lld bytes apart", (long long)outer[i]);
    check_output(label, t, &c.z, 15, 0xA5, ew_ref, &c, NULL);
    munmap(big, span);
    free_arr(&c.y);
    free_arr(&c.z);
  }
  report(em);
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* The raw output's reference: element k is r's element n - 1 - k. */
typedef struct flip_ctx {
  const ty *t;
  const arr *r;
  int64_t n;
} flip_ctx;

static val flip_ref(void *p, int64_t k) {
  flip_ctx *c = p;
  return get(c->t, c->r->first + offset_of(c->r, c->n - 1 - k, c->t->size));
}

/* Raw arrays (jitk::array descriptors: pointer, shape, strides) of any
 * layout, read and written by flat index, with DLPack byte offsets: an
 * input read backwards beside a non-raw one, and a raw output written
 * from raw inputs over `size` elements. */
Test(emulated, elementwise_raw_arrays) {
  jt_emu *em;
  jitk_engine *e = emu_start(2, &em);
  jitk_elementwise *back, *copy;
  JT_OK(e, jitk_elementwise_create(e, "T x, raw T r", "T z", "z = x - r[_ind.size() - 1 - i]",
                                   "back", NULL, &back));
  JT_OK(e, jitk_elementwise_create(e, "raw T r", "raw T out", "out[_ind.size() - 1 - i] = r[i]",
                                   "flip", NULL, &copy));
  uint64_t seed = seed_or(0x4A77ull);
  for (int i = 0, n_cases = cases_or(EW_CASES / 4); i < n_cases; i++) {
    const ty *t = &TYPES[pick(&seed, sizeof TYPES / sizeof TYPES[0])];
    int64_t v = t->size >= 16 ? 1 : 16 / (int64_t)t->size;
    /* x and r hold the same number of elements in shapes of their own. */
    int nd = 1 + (int)pick(&seed, 3), rnd = 1 + (int)pick(&seed, 3);
    int64_t shape[3], rshape[3] = {1, 1, 1}, n = 1;
    for (int d = 0; d < nd; d++) {
      shape[d] = 1 + pick(&seed, 9);
      n *= shape[d];
    }
    rshape[rnd - 1] = n;
    if (rnd > 1 && n % 2 == 0) rshape[rnd - 1] = n / 2, rshape[0] = 2;
    int64_t xs[3], rs[3], zs[3];
    random_strides(&seed, nd, shape, xs, pick(&seed, 2) == 0);
    random_strides(&seed, rnd, rshape, rs, false);
    random_strides(&seed, nd, shape, zs, true);
    arr x, r, z;
    make_arr(&x, t, nd, shape, xs, pick(&seed, v), 0x5A);
    make_arr(&r, t, rnd, rshape, rs, pick(&seed, 2) == 0 ? 0 : 1, 0x5A);
    make_arr(&z, t, nd, shape, zs, 0, 0xA5);
    fill_random(&seed, t, &x, n);
    fill_random(&seed, t, &r, n);
    /* The first element by byte_offset from the buffer's start at times. */
    if (pick(&seed, 2) == 0) {
      r.t.data = r.buf;
      r.t.byte_offset = (uint64_t)(r.first - r.buf);
    }
    char label[160];
    snprintf(label, sizeof label, "case %d (dtype %d, %lld elements, r in %d dimensions)", i,
             (int)t->t, (long long)n, rnd);
    jitk_arg a[3] = {jitk_arg_array(&x.t), jitk_arg_array(&r.t), jitk_arg_array(&z.t)};
    jitk_status st = jitk_elementwise_launch(back, NULL, a, 3, -1, NULL);
    cr_assert_eq(st, JITK_OK, "%s: %s; %s", label, jitk_errmsg(e), jt_emu_error(em));
    for (int64_t k = 0; k < n; k++) {
      val xv = get(t, x.first + offset_of(&x, k, t->size));
      val rv = get(t, r.first + offset_of(&r, n - 1 - k, t->size));
      val want = {xv.re - rv.re, xv.im - rv.im}, got = get(t, z.first + offset_of(&z, k, t->size));
      unsigned char w[16];
      put(t, w, want);
      want = get(t, w);
      cr_assert(same(got, want), "%s: z[%lld] is %g, expected %g", label, (long long)k, got.re,
                want.re);
    }
    /* The raw output: r reversed into an array shaped as x, laid out as z
     * (poisoned again), over size = n. */
    memset(z.buf, 0xA5, z.bytes);
    jitk_arg b[2] = {jitk_arg_array(&r.t), jitk_arg_array(&z.t)};
    jitk_launch_options o;
    jitk_launch_options_init(&o);
    o.size = n;
    st = jitk_elementwise_launch_ex(copy, NULL, b, 2, &o, NULL);
    cr_assert_eq(st, JITK_OK, "%s, raw output: %s; %s", label, jitk_errmsg(e), jt_emu_error(em));
    flip_ctx fc = {t, &r, n};
    check_output(label, t, &z, n, 0xA5, flip_ref, &fc, NULL);
    free_arr(&x);
    free_arr(&r);
    free_arr(&z);
  }
  report(em);
  jitk_elementwise_destroy(back);
  jitk_elementwise_destroy(copy);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* Twenty-two transposed 2-byte inputs take tiles of 32 with element pairs
 * ([32][34] each, 47,872 bytes of shared memory); twenty-three would fill
 * 50,048, past the 48 KiB a block may declare, and take another path. */
Test(emulated, elementwise_many_transposed_inputs) {
  jt_emu *em;
  jitk_engine *e = emu_start(2, &em);
  enum { MOST = 23, R = 64, C = 96 };
  const ty *t = &TYPES[1]; /* int16 */
  uint64_t seed = 0x23ull;
  for (int N = MOST - 1; N <= MOST; N++) {
    char in[MOST * 8], op[MOST * 8];
    int ai = 0, ao = snprintf(op, sizeof op, "z = 0");
    for (int p = 0; p < N; p++) {
      ai += snprintf(in + ai, sizeof in - (size_t)ai, "%sT a%d", p ? ", " : "", p);
      ao += snprintf(op + ao, sizeof op - (size_t)ao, " + a%d", p);
    }
    jitk_elementwise *k;
    JT_OK(e, jitk_elementwise_create(e, in, "T z", op, "many", NULL, &k));
    int64_t shape[2] = {R, C}, ts[2] = {1, R}, cs[2] = {C, 1};
    arr a[MOST], z;
    jitk_arg args[MOST + 1];
    for (int p = 0; p < N; p++) {
      make_arr(&a[p], t, 2, shape, ts, 0, 0x5A);
      fill_random(&seed, t, &a[p], R * C);
      args[p] = jitk_arg_array(&a[p].t);
    }
    make_arr(&z, t, 2, shape, cs, 0, 0xA5);
    args[N] = jitk_arg_array(&z.t);
    jitk_status st = jitk_elementwise_launch(k, NULL, args, (size_t)N + 1, -1, NULL);
    cr_assert_eq(st, JITK_OK, "%d inputs: %s; %s", N, jitk_errmsg(e), jt_emu_error(em));
    const char *src = NULL;
    JT_OK(e, jitk_elementwise_source(k, &src));
    cr_assert((strstr(src, "tiled path, element pairs") != NULL) == (N < MOST), "%d inputs: %.120s",
              N, src);
    for (int64_t i = 0; i < R * C; i++) {
      int64_t want = 0;
      for (int p = 0; p < N; p++) want += (int64_t)get(t, a[p].first + offset_of(&a[p], i, 2)).re;
      int16_t got = *(const int16_t *)(z.first + offset_of(&z, i, 2));
      cr_assert_eq(got, (int16_t)want, "%d inputs: element %lld is %d, expected %d", N,
                   (long long)i, got, (int16_t)want);
    }
    for (int p = 0; p < N; p++) free_arr(&a[p]);
    free_arr(&z);
    jitk_elementwise_destroy(k);
  }
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* Autotuning runs every strategy that applies to a layout (along the
 * reduced elements, across outputs, a block per short row, warps owning
 * rows) on the caller's arrays, timed by the stand-in's events, which here
 * time the CPU's run: each must be safe, its result the chosen one's, and
 * later launches, which take the choice, right and repeatable. */
Test(emulated, reduction_autotune_strategies) {
  jt_emu *em;
  jitk_engine *e = emu_start(4, &em);
  reductions r;
  create_reductions(e, &r);
  uint64_t seed = seed_or(0x7A11ull);
  for (int i = 0, n_cases = cases_or(RED_CASES / 10); i < n_cases; i++) {
    red_case c;
    char what[512], label[600];
    random_red_case(&seed, &c, what, sizeof what);
    snprintf(label, sizeof label, "case %d (%s), tuned", i, what);
    jitk_arg a[3];
    jitk_reduction *k;
    size_t na = red_args(&r, &c, a, &k);
    jt_emu_set_seed(em, 0);
    jitk_status st =
        jitk_reduction_autotune(k, NULL, a, na, c.naxes < 0 ? NULL : c.axes, c.naxes, c.keepdims);
    cr_assert_eq(st, JITK_OK, "%s: %s; %s", label, jitk_errmsg(e), jt_emu_error(em));
    check_reduction(label, &c);
    memset(c.y.buf, 0xA5, c.y.bytes);
    run_red_case(em, e, &r, &c, label, &seed);
  }
  report(em);
  destroy_reductions(&r);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}

/* A one-dimensional loop over arrays off 16 bytes peels its first
 * elements: with a block of fewer threads than the peel (a block_size of
 * 1 or 2), every peeled element is still computed. `i` or `_j` named
 * only through a macro (of the preamble, or of the operation itself)
 * still counts in C order over a Fortran-order view. An operation that
 * may `continue` past its assignment keeps the old value of each element
 * it skips, on the vector path as on the others. */
Test(emulated, elementwise_peels_macros_and_jumps) {
  jt_emu *em;
  jitk_engine *e = emu_start(2, &em);
  jitk_elementwise *add, *idx, *idx2, *skip;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = x + (T)1", "addone", NULL, &add));
  jitk_elementwise_options eo;
  memset(&eo, 0, sizeof eo);
  eo.preamble = "#define IDX i";
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = x + (T)IDX", "idx", &eo, &idx));
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "#define IDX2 i\nz = x + (T)IDX2", "idx2", NULL,
                                   &idx2));
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "if (x < 0) continue;\nz = x * 2;", "skip",
                                   NULL, &skip));
  enum { N = 100 };
  _Alignas(16) float xb[N + 8], zb[N + 8];
  for (int i = 0; i < N + 8; i++) xb[i] = (float)i;
  int64_t shape[1] = {N};
  for (int bs = 1; bs <= 3; bs++)
    for (int off = 1; off < 4; off++) {
      for (int i = 0; i < N + 8; i++) zb[i] = -5;
      DLTensor tx = jt_tensor(xb + off, JITK_FLOAT32, 1, shape, NULL),
               tz = jt_tensor(zb + off, JITK_FLOAT32, 1, shape, NULL);
      jitk_arg a[2] = {jitk_arg_array(&tx), jitk_arg_array(&tz)};
      jitk_launch_options o;
      jitk_launch_options_init(&o);
      o.block_size = (unsigned)bs;
      JT_OK(e, jitk_elementwise_launch_ex(add, NULL, a, 2, &o, NULL));
      for (int i = 0; i < N; i++)
        cr_assert_eq(zb[off + i], xb[off + i] + 1, "block %d, offset %d: z[%d] is %g", bs, off, i,
                     zb[off + i]);
      cr_assert(zb[off - 1] == -5 && zb[off + N] == -5, "block %d, offset %d: a neighbour", bs,
                off);
    }
  /* 4 x 8 in Fortran order: element (r, c) at r + 4 c; i = 8 r + c. */
  float f[32], g[32];
  for (int i = 0; i < 32; i++) f[i] = (float)(100 * i);
  int64_t fshape[2] = {4, 8}, fstr[2] = {1, 4};
  jitk_elementwise *withi[2] = {idx, idx2};
  for (int w = 0; w < 2; w++) {
    memset(g, 0, sizeof g);
    DLTensor tx = jt_tensor(f, JITK_FLOAT32, 2, fshape, fstr),
             tz = jt_tensor(g, JITK_FLOAT32, 2, fshape, fstr);
    jitk_arg a[2] = {jitk_arg_array(&tx), jitk_arg_array(&tz)};
    JT_OK(e, jitk_elementwise_launch(withi[w], NULL, a, 2, -1, NULL));
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 8; c++)
        cr_assert_eq(g[r + 4 * c], f[r + 4 * c] + (float)(8 * r + c),
                     "kernel %d: z(%d, %d) is %g, i is %d", w, r, c, g[r + 4 * c], 8 * r + c);
  }
  /* The skipping operation on an aligned contiguous array (vectors). */
  _Alignas(16) float sx[64], sz[64];
  for (int i = 0; i < 64; i++) {
    sx[i] = i % 3 == 0 ? -1.f - (float)i : (float)i;
    sz[i] = 7;
  }
  int64_t sshape[1] = {64};
  DLTensor tx = jt_tensor(sx, JITK_FLOAT32, 1, sshape, NULL),
           tz = jt_tensor(sz, JITK_FLOAT32, 1, sshape, NULL);
  jitk_arg a[2] = {jitk_arg_array(&tx), jitk_arg_array(&tz)};
  JT_OK(e, jitk_elementwise_launch(skip, NULL, a, 2, -1, NULL));
  for (int i = 0; i < 64; i++)
    cr_assert_eq(sz[i], sx[i] < 0 ? 7.f : 2 * sx[i], "skip: z[%d] is %g", i, sz[i]);
  /* _j through the preamble's macro: a one at (1, 0) of a Fortran-order
   * 4 x 8 is element 8 in C order. */
  jitk_reduction *red;
  jitk_reduction_options ro;
  memset(&ro, 0, sizeof ro);
  ro.preamble = "#define JJ _j";
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x * (T)JJ", "a + b", "y = a", "0", NULL, "redj",
                                 &ro, &red));
  memset(f, 0, sizeof f);
  f[1] = 1;
  float y = -1;
  DLTensor rx = jt_tensor(f, JITK_FLOAT32, 2, fshape, fstr),
           ry = jt_tensor(&y, JITK_FLOAT32, 0, NULL, NULL);
  jitk_arg ra[2] = {jitk_arg_array(&rx), jitk_arg_array(&ry)};
  JT_OK(e, jitk_reduction_launch(red, NULL, ra, 2, NULL, -1, 0, NULL));
  cr_assert_eq(y, 8.f, "_j through a macro: %g", y);
  report(em);
  jitk_reduction_destroy(red);
  jitk_elementwise_destroy(add);
  jitk_elementwise_destroy(idx);
  jitk_elementwise_destroy(idx2);
  jitk_elementwise_destroy(skip);
  jitk_engine_destroy(e);
  jt_emu_close(em);
}
