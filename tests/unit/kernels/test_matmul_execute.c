/*
 * Matmul executions on the stand-in driver (tests/fakecuda), which runs
 * no kernel but records every launch and memset: each argument that
 * jitk_matmul_execute, jitk_matmul_execute_ex or jitk_matmul_autotune
 * refuses gets its status and a message naming what is wrong, and
 * nothing is launched or cleared for it (so nothing is lost); pointers
 * off their elements' alignment, on which the GPU would fault and end the
 * CUDA context, are among them. Valid executions launch the copies of
 * operands whose rows are off 16 bytes, then the product.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fakecuda/fixture.h"

/* An engine on the stand-in, which records no launch's parameters: the
 * matmul launches' lists are as long as their kernels' parameters, with
 * no NULL after them for the stand-in to stop at. */
static jitk_engine *fake_engine(fakecuda_api *f) {
  jitk_engine *e = jt_fake_engine(f, NULL);
  f->record(NULL, 0);
  return e;
}

/* Launches and memsets so far, on every thread. */
static unsigned long long activity(const fakecuda_api *f) {
  unsigned long long memsets = 0;
  f->memset(&memsets);
  return f->count() + memsets;
}

/* A refused call: its status and message, and nothing launched. */
#define REFUSED(f, e, code, needle, call)                                          \
  do {                                                                             \
    const unsigned long long before_ = activity(f);                                \
    JT_FAILS(e, code, needle, call);                                               \
    cr_assert_eq(activity(f), before_, "%s launched or cleared something", #call); \
  } while (0)

static void *dev(jitk_engine *e, size_t bytes) {
  void *p = NULL;
  JT_OK(e, jitk_device_alloc(e, bytes, NULL, &p));
  return p;
}

#define OFF(p, bytes) ((void *)((char *)(p) + (bytes)))

/* fake_engine, and the stand-in's setter of launch hooks. */
static jitk_engine *hooked_engine(fakecuda_api *f, fakecuda_set_hooks_fn *set_hooks) {
  jitk_engine *e = fake_engine(f);
  *(void **)set_hooks = dlsym(f->lib, "fakecuda_set_hooks");
  cr_assert_not_null(*set_hooks);
  return e;
}

Test(matmul_execute, refusals_launch_nothing) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  /* C read, an epilogue operand, an output and a reduction. */
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 128, 128, 128);
  d.has_c = 1;
  d.beta = 0.5;
  d.epilogue = "max(acc + bias[col], (T)0)";
  d.epilogue_params = "raw float32 bias";
  const jitk_matmul_output outs[1] = {{"pre", JITK_FLOAT32, "acc + bias[col]", 0, 0}};
  const jitk_matmul_reduction reds[1] = {
      {"dbias", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS}};
  d.outputs = outs;
  d.num_outputs = 1;
  d.reductions = reds;
  d.num_reductions = 1;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  const size_t mat = 128 * 128 * 2;
  void *a = dev(e, mat + 64), *b = dev(e, mat + 64), *c = dev(e, mat + 64), *dd = dev(e, mat + 64),
       *pre = dev(e, 128 * 128 * 4 + 64), *dbias = dev(e, 128 * 4 + 64),
       *bias = dev(e, 128 * 4 + 64);
  jitk_arg extra[1] = {jitk_arg_ptr(bias, JITK_FLOAT32)};
  void *out_ptrs[1] = {pre}, *red_ptrs[1] = {dbias}, *none[1] = {NULL};
  jitk_matmul_operands good;
  JT_OK(e, jitk_matmul_operands_init(&good));
  good.a = a;
  good.b = b;
  good.c = c;
  good.d = dd;
  good.extra = extra;
  good.num_extra = 1;
  good.outputs = out_ptrs;
  good.reductions = red_ptrs;
  jitk_matmul_operands o;

  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "execute it with jitk_matmul_execute_ex",
          jitk_matmul_execute(p, NULL, a, b, c, dd, extra, 1));
  REFUSED(&f, NULL, JITK_ERR_INVALID_ARGUMENT, "plan is NULL",
          jitk_matmul_execute_ex(NULL, NULL, &good));
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "operands is NULL",
          jitk_matmul_execute_ex(p, NULL, NULL));
  o = good;
  o.struct_size = 12;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "struct_size is 12",
          jitk_matmul_execute_ex(p, NULL, &o));
  o = good;
  o.num_extra = 0;
  REFUSED(&f, e, JITK_ERR_ARGUMENT_COUNT, "takes 1 operands, not 0",
          jitk_matmul_execute_ex(p, NULL, &o));
  o = good;
  o.extra = NULL;
  REFUSED(&f, e, JITK_ERR_ARGUMENT_COUNT, "takes 1 operands", jitk_matmul_execute_ex(p, NULL, &o));
  const void **mats[4] = {&o.a, &o.b, &o.c, (const void **)&o.d};
  for (int i = 0; i < 4; i++) {
    o = good;
    *mats[i] = NULL;
    REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "a matrix pointer is NULL",
            jitk_matmul_execute_ex(p, NULL, &o));
  }
  o = good;
  o.outputs = NULL;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "output `pre` has no array",
          jitk_matmul_execute_ex(p, NULL, &o));
  o.outputs = none;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "output `pre` has no array",
          jitk_matmul_execute_ex(p, NULL, &o));
  o = good;
  o.reductions = none;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "reduction `dbias` has no array",
          jitk_matmul_execute_ex(p, NULL, &o));
  /* Every pointer off its elements' alignment. */
  static const char *const names[4] = {"A (", "B (", "C (", "D ("};
  for (int i = 0; i < 4; i++) {
    o = good;
    *mats[i] = OFF(*mats[i], 1);
    REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, names[i], jitk_matmul_execute_ex(p, NULL, &o));
    cr_assert(strstr(jitk_errmsg(e), "is not aligned to 2 bytes, as bfloat16 elements must be"),
              "%s", jitk_errmsg(e));
  }
  void *pre_off[1] = {OFF(pre, 2)}, *dbias_off[1] = {OFF(dbias, 6)};
  o = good;
  o.outputs = pre_off;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "output `pre` (", jitk_matmul_execute_ex(p, NULL, &o));
  cr_assert(strstr(jitk_errmsg(e), "not aligned to 4 bytes, as float32"), "%s", jitk_errmsg(e));
  o = good;
  o.reductions = dbias_off;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "reduction `dbias` (",
          jitk_matmul_execute_ex(p, NULL, &o));
  jitk_arg bad_extra[1] = {jitk_arg_ptr(OFF(bias, 2), JITK_FLOAT32)};
  o = good;
  o.extra = bad_extra;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "epilogue operand `bias` (",
          jitk_matmul_execute_ex(p, NULL, &o));
  cr_assert(strstr(jitk_errmsg(e), "not aligned to 4 bytes, as float32"), "%s", jitk_errmsg(e));
  bad_extra[0] = jitk_arg_f32(1.0f);
  REFUSED(&f, e, JITK_ERR_ARGUMENT_TYPE, "epilogue operand `bias` is an array",
          jitk_matmul_execute_ex(p, NULL, &o));
  /* A tensor the GPU cannot reach: host memory, another device's. Its
   * pointer reached the kernel, where it would have faulted. */
  int64_t bias_shape[1] = {128};
  DLTensor bias_t = jt_tensor(bias, JITK_FLOAT32, 1, bias_shape, NULL);
  bad_extra[0] = jitk_arg_tensor_ptr(&bias_t);
  JT_OK(e, jitk_matmul_execute_ex(p, NULL, &o));
  bias_t.device.device_type = kDLCPU;
  REFUSED(&f, e, JITK_ERR_INVALID_ARRAY, "epilogue operand `bias`: the tensor is in kDLCPU",
          jitk_matmul_execute_ex(p, NULL, &o));
  bias_t.device.device_type = kDLCUDA;
  bias_t.device.device_id = 3;
  REFUSED(&f, e, JITK_ERR_INVALID_ARRAY, "is on device 3 but the engine uses device 0",
          jitk_matmul_execute_ex(p, NULL, &o));
  /* Tuning checks its operands as an execution does (on a plan without
   * outputs, which it takes). */
  jitk_matmul_desc plain = jt_matmul_desc(JITK_BFLOAT16, 128, 128, 128);
  jitk_matmul *q = NULL;
  JT_OK(e, jitk_matmul_create(e, &plain, &q));
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "D (",
          jitk_matmul_autotune(q, NULL, a, b, NULL, OFF(dd, 1), NULL, 0));
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "D (",
          jitk_matmul_execute(q, NULL, a, b, NULL, OFF(dd, 1), NULL, 0));
  /* Tuning into C itself: each timed run would read the last one's D. */
  plain.has_c = true;
  plain.beta = 1;
  jitk_matmul *with_c = NULL;
  JT_OK(e, jitk_matmul_create(e, &plain, &with_c));
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "D must not be C",
          jitk_matmul_autotune(with_c, NULL, a, b, dd, dd, NULL, 0));
  jitk_matmul_destroy(with_c);
  char text[8] = "x";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "size is 0", jitk_matmul_describe(q, text, 0));
  cr_assert_eq(text[0], 'x', "describe wrote into no bytes");
  JT_OK(e, jitk_matmul_describe(q, text, sizeof text));
  cr_assert_eq(strlen(text), sizeof text - 1, "a description cut to the buffer");
  /* The same operands, valid: launched. */
  const unsigned long long before = f.count();
  JT_OK(e, jitk_matmul_execute_ex(p, NULL, &good));
  cr_assert(f.count() > before, "a valid execution launched nothing");
  JT_OK(e, jitk_matmul_execute(q, NULL, a, b, NULL, dd, NULL, 0));
  jitk_matmul_destroy(p);
  jitk_matmul_destroy(q);
  void *bufs[] = {a, b, c, dd, pre, dbias, bias};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    JT_OK(e, jitk_device_free(e, bufs[i], NULL));
  jitk_engine_destroy(e);
}

/* FP8 plans' scales and amax: missing or off 4 bytes, refused. */
Test(matmul_execute, fp8_scales) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = d.n = d.k = 128;
  d.a_dtype = d.b_dtype = JITK_FLOAT8_E4M3;
  d.b_order = JITK_COL_MAJOR;
  d.d_dtype = JITK_BFLOAT16;
  d.has_a_scale = d.has_b_scale = d.has_amax_d = 1;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  void *a = dev(e, 128 * 128), *b = dev(e, 128 * 128), *dd = dev(e, 128 * 128 * 2),
       *scales = dev(e, 64);
  jitk_matmul_operands good, o;
  JT_OK(e, jitk_matmul_operands_init(&good));
  good.a = a;
  good.b = b;
  good.d = dd;
  good.a_scale = (const float *)scales;
  good.b_scale = (const float *)scales + 1;
  good.amax_d = (float *)scales + 2;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_execute_ex",
          jitk_matmul_execute(p, NULL, a, b, NULL, dd, NULL, 0));
  o = good;
  o.b_scale = NULL;
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "operands->b_scale is NULL",
          jitk_matmul_execute_ex(p, NULL, &o));
  o = good;
  o.a_scale = (const float *)OFF(scales, 2);
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "a_scale (", jitk_matmul_execute_ex(p, NULL, &o));
  o = good;
  o.amax_d = (float *)OFF(scales, 9);
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "amax_d (", jitk_matmul_execute_ex(p, NULL, &o));
  cr_assert(strstr(jitk_errmsg(e), "not aligned to 4 bytes, as float32"), "%s", jitk_errmsg(e));
  /* 8-bit A and B take any address (copied onto 16 bytes first). */
  o = good;
  o.a = OFF(a, 1);
  JT_OK(e, jitk_matmul_execute_ex(p, NULL, &o));
  JT_OK(e, jitk_matmul_execute_ex(p, NULL, &good));
  jitk_matmul_destroy(p);
  void *bufs[] = {a, b, dd, scales};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    JT_OK(e, jitk_device_free(e, bufs[i], NULL));
  jitk_engine_destroy(e);
}

/* The most epilogue operands a plan takes (64, as an elementwise kernel
 * does), each a scalar, reach the kernel's parameters at execution, on
 * the tensor-core kernel and the FFMA one; one more is refused when the
 * plan is made. (More once overran the list of the launch's parameters.) */
Test(matmul_execute, the_most_epilogue_operands) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  enum { MOST = 64 };
  char params[MOST * 16 + 16], epilogue[MOST * 8 + 16];
  size_t pn = 0, en = (size_t)snprintf(epilogue, sizeof epilogue, "acc");
  for (int i = 0; i <= MOST; i++) {
    pn += (size_t)snprintf(params + pn, sizeof params - pn, "%sfloat32 s%d", i ? ", " : "", i);
    en += (size_t)snprintf(epilogue + en, sizeof epilogue - en, " + s%d", i);
  }
  jitk_arg extra[MOST + 1];
  for (int i = 0; i <= MOST; i++) extra[i] = jitk_arg_f64(0.5);
  jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  d.epilogue = epilogue;
  d.epilogue_params = params;
  jitk_matmul *p = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "epilogue_params: 65 operands; at most 64",
           jitk_matmul_create(e, &d, &p));
  /* Without the last one. */
  *strrchr(params, ',') = '\0';
  *strrchr(epilogue, '+') = '\0';
  for (int tf32 = 0; tf32 < 2; tf32++) {
    d.compute = tf32 ? JITK_COMPUTE_TF32 : JITK_COMPUTE_DEFAULT;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    void *a = dev(e, 64 * 64 * 4), *b = dev(e, 64 * 64 * 4), *dd = dev(e, 64 * 64 * 4);
    const unsigned long long before = f.count();
    JT_OK(e, jitk_matmul_execute(p, NULL, a, b, NULL, dd, extra, MOST));
    cr_assert_eq(f.count() - before, tf32 ? 2u : 1u, "%llu launches", f.count() - before);
    jitk_matmul_destroy(p);
    JT_OK(e, jitk_device_free(e, a, NULL));
    JT_OK(e, jitk_device_free(e, b, NULL));
    JT_OK(e, jitk_device_free(e, dd, NULL));
  }
  jitk_engine_destroy(e);
}

/* Operands whose rows are off 16 bytes are copied onto lines by the
 * module's _pad kernel before the product: one launch copies every such
 * operand, then the product's. */
Test(matmul_execute, copies_before_the_product) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  static const struct {
    int64_t m, n, k;
    unsigned long long launches;
  } cases[] = {
      {128, 128, 128, 1}, /* aligned: the product alone */
      {128, 129, 128, 2}, /* N odd: B copied */
      {128, 128, 129, 2}, /* K odd: A (row-major, rows of K) copied */
      {129, 129, 129, 2}, /* all odd: A and B copied, in one launch */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, cases[i].m, cases[i].n, cases[i].k);
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    const size_t bytes = (size_t)(cases[i].m + cases[i].k) * (size_t)(cases[i].n + cases[i].k) * 2;
    void *a = dev(e, bytes), *b = dev(e, bytes), *dd = dev(e, bytes);
    const unsigned long long before = f.count();
    JT_OK(e, jitk_matmul_execute(p, NULL, a, b, NULL, dd, NULL, 0));
    cr_assert_eq(f.count() - before, cases[i].launches,
                 "%lld x %lld x %lld: %llu launches, not %llu", (long long)cases[i].m,
                 (long long)cases[i].n, (long long)cases[i].k, f.count() - before,
                 cases[i].launches);
    cr_assert(strcmp(f.last()->function, "matmul") == 0, "the last launch was %s",
              f.last()->function);
    jitk_matmul_destroy(p);
    JT_OK(e, jitk_device_free(e, a, NULL));
    JT_OK(e, jitk_device_free(e, b, NULL));
    JT_OK(e, jitk_device_free(e, dd, NULL));
  }
  jitk_engine_destroy(e);
}

/* A product of more tiles than a grid's x holds (2^31 - 1) is refused
 * before anything is launched; the count wrapped, and the launch covered
 * a fraction of D. The stand-in reads no memory, so a D of 2^48
 * elements needs none. */
Test(matmul_execute, more_tiles_than_a_grid_holds) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, (int64_t)1 << 24, (int64_t)1 << 24, 8);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  void *a = dev(e, 4096), *b = dev(e, 4096), *dd = dev(e, 4096);
  REFUSED(&f, e, JITK_ERR_UNSUPPORTED, "more than one grid holds",
          jitk_matmul_execute(p, NULL, a, b, NULL, dd, NULL, 0));
  jitk_matmul_destroy(p);
  JT_OK(e, jitk_device_free(e, a, NULL));
  JT_OK(e, jitk_device_free(e, b, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  jitk_engine_destroy(e);
}

/* The _pad launch's grid and its fifteen parameters, as the stand-in's
 * launch hook saw them (each parameter of the kernel is 8 bytes). */
typedef struct pad_seen {
  int launches;
  unsigned grid[3];
  uint64_t v[15];
} pad_seen;

static int see_pad(void *user, void *tag, const char *function, const unsigned grid[3],
                   const unsigned block[3], const unsigned cluster[3], unsigned shared,
                   void **params) {
  (void)tag, (void)block, (void)cluster, (void)shared;
  size_t n = strlen(function);
  if (n < 4 || strcmp(function + n - 4, "_pad") != 0) return 0;
  pad_seen *s = user;
  s->launches++;
  memcpy(s->grid, grid, sizeof s->grid);
  for (int i = 0; i < 15; i++) memcpy(&s->v[i], params[i], 8);
  return 0;
}

/* What the kernel reads of one operand's copy: source, leading dimension
 * and batch stride as the caller gave them, a pooled buffer whose rows
 * start on 128 bytes, and R = 0 where no operand is. The batch count
 * comes last, and the grid's z covers the batches of each operand there. */
Test(matmul_execute, the_copy_launch_arguments) {
  fakecuda_api f;
  fakecuda_set_hooks_fn set_hooks = NULL;
  jitk_engine *e = hooked_engine(&f, &set_hooks);
  static const struct {
    int64_t m, n, k, batch;
    bool a, b; /* which operands are copied */
  } cases[] = {
      {128, 128, 129, 3, true, false},
      {128, 129, 128, 2, false, true},
      {129, 131, 133, 1, true, true},
      {129, 131, 133, 4, true, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int64_t m = cases[i].m, n = cases[i].n, k = cases[i].k, nb = cases[i].batch;
    jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, m, n, k);
    d.batch = nb;
    /* Leading dimensions and batch strides past the packed ones, so that
     * the kernel is seen to get the caller's. */
    d.lda = k + (cases[i].a ? 2 : 8);
    d.ldb = n + (cases[i].b ? 4 : 8);
    d.ldd = n;
    d.stride_a = m * d.lda + (cases[i].a ? 6 : 8);
    d.stride_b = k * d.ldb + (cases[i].b ? 10 : 8);
    d.stride_d = m * n;
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    void *a = dev(e, (size_t)(nb * d.stride_a) * 2), *b = dev(e, (size_t)(nb * d.stride_b) * 2),
         *dd = dev(e, (size_t)(nb * d.stride_d) * 2);
    pad_seen seen;
    memset(&seen, 0, sizeof seen);
    set_hooks(NULL, see_pad, &seen);
    JT_OK(e, jitk_matmul_execute(p, NULL, a, b, NULL, dd, NULL, 0));
    set_hooks(NULL, NULL, NULL);
    cr_assert_eq(seen.launches, 1, "case %zu: %d copies", i, seen.launches);
    /* The operands in the order the kernel gets them: a single one first. */
    struct {
      const void *x;
      int64_t R, C, ld, sx;
    } want[2] = {{a, m, k, d.lda, d.stride_a}, {b, k, n, d.ldb, d.stride_b}};
    if (!cases[i].a) want[0] = want[1];
    const int copied = cases[i].a && cases[i].b ? 2 : 1;
    for (int o = 0; o < 2; o++) {
      const uint64_t *v = &seen.v[7 * o];
      if (o >= copied) {
        cr_assert_eq(v[2], 0, "case %zu: R of the absent operand is %llu", i,
                     (unsigned long long)v[2]);
        continue;
      }
      const uint64_t ldy = ((uint64_t)want[o].C * 2 + 127) / 128 * 64;
      cr_assert_eq(v[0], (uint64_t)(uintptr_t)want[o].x, "case %zu, operand %d: source", i, o);
      cr_assert(v[1] != 0 && v[1] != (uint64_t)(uintptr_t)a && v[1] != (uint64_t)(uintptr_t)b &&
                    v[1] % 128 == 0,
                "case %zu, operand %d: the copy's buffer %llx", i, o, (unsigned long long)v[1]);
      const uint64_t got[5] = {v[2], v[3], v[4], v[5], v[6]};
      const uint64_t exp[5] = {(uint64_t)want[o].R, (uint64_t)want[o].C, (uint64_t)want[o].ld,
                               (uint64_t)want[o].sx, ldy};
      for (int x = 0; x < 5; x++)
        cr_assert_eq(got[x], exp[x], "case %zu, operand %d, value %d: %llu, not %llu", i, o, x,
                     (unsigned long long)got[x], (unsigned long long)exp[x]);
    }
    if (copied == 2) cr_assert_neq(seen.v[1], seen.v[8], "case %zu: one buffer each", i);
    cr_assert_eq(seen.v[14], (uint64_t)nb, "case %zu: batches %llu", i,
                 (unsigned long long)seen.v[14]);
    cr_assert_eq(seen.grid[2], (unsigned)(copied * nb), "case %zu: grid z %u", i, seen.grid[2]);
    const int64_t rows = copied == 2 ? (want[0].R > want[1].R ? want[0].R : want[1].R) : want[0].R;
    cr_assert_eq(seen.grid[1], (unsigned)rows, "case %zu: grid y %u", i, seen.grid[1]);
    jitk_matmul_destroy(p);
    JT_OK(e, jitk_device_free(e, a, NULL));
    JT_OK(e, jitk_device_free(e, b, NULL));
    JT_OK(e, jitk_device_free(e, dd, NULL));
  }
  jitk_engine_destroy(e);
}

/* What a product's launch got, read back from its parameters: a plan of
 * bfloat16 D = A @ B with no C or epilogue operands, whose kernel takes
 * 4 pointers, 11 sizes, 2 tile counts, alpha and beta, then A's maps (8
 * where A is read by phases), B's and D's maps, the work items, whether
 * TMA stores D, read by phases the phases' shifts, and where the kernel
 * copies B itself what it copies from and to (matmul_sm90.cuh's
 * feed_args, 72 bytes). */
typedef struct product_seen {
  int launches, pads;
  bool phases; /* the parameters to read are a phased kernel's */
  bool feed;   /* ... and a kernel's that copies B */
  unsigned tiles_m, use_td, ashift;
  fakecuda_tensor_map a[8], b;
  struct {
    unsigned long long b, bf;
    long long ldb, sb, ldf;
    unsigned long long count;
    unsigned units, segs, chunks, k, row_bytes;
  } fa;
} product_seen;

static int see_product(void *user, void *tag, const char *function, const unsigned grid[3],
                       const unsigned block[3], const unsigned cluster[3], unsigned shared,
                       void **params) {
  (void)tag, (void)grid, (void)block, (void)cluster, (void)shared;
  product_seen *s = user;
  size_t n = strlen(function);
  if (n >= 4 && strcmp(function + n - 4, "_pad") == 0) {
    s->pads++;
    return 0;
  }
  if (strcmp(function, "matmul") != 0) return 0;
  s->launches++;
  memcpy(&s->tiles_m, params[15], sizeof s->tiles_m);
  /* A map is the driver's 128 bytes; the stand-in's record starts it. */
  for (int i = 0; i < (s->phases ? 8 : 1); i++)
    memcpy(&s->a[i], (const char *)params[19] + 128 * i, sizeof s->a[i]);
  memcpy(&s->b, params[20], sizeof s->b);
  memcpy(&s->use_td, params[23], sizeof s->use_td);
  if (s->phases) memcpy(&s->ashift, params[24], sizeof s->ashift);
  if (s->feed) memcpy(&s->fa, params[s->phases ? 25 : 24], 72);
  return 0;
}

/* A row-major bf16 A whose rows are off 16 bytes, with a row-major B, is
 * read in place by 8 row phases where the plan takes the cooperative
 * schedule for it (4095^3, 4096 x 4096 x 4095; not 2048 x 11008 x 4095,
 * which keeps ping-pong and the copy), or wherever the layout allows with
 * JITK_MM_PHASES=1: no copy of A is launched, and the kernel gets
 * one map a phase, each starting on the 16 bytes that hold its first
 * row's element 0 (pointers off 16 bytes included), K plus the shift
 * wide, rows 8 lda elements apart, and the shifts that B's row coordinate
 * follows; tile-rows are 8 groups of each phase's rows, and D is stored
 * by the threads, not TMA. Batches off 16 bytes, a column-major B, an
 * output besides D, fewer rows than phases and JITK_MM_PHASES=0 copy A
 * as before. */
Test(matmul_execute, a_read_by_phases) {
  fakecuda_api f;
  fakecuda_set_hooks_fn set_hooks = NULL;
  jitk_engine *e = hooked_engine(&f, &set_hooks);
  static const struct {
    int64_t m, n, k, batch, lda_extra, stride_extra;
    int misalign;     /* elements A's pointer is off its allocation */
    const char *knob; /* JITK_MM_PHASES, or NULL */
    bool b_col, output, phases;
    int pads; /* copies launched (one launch copies both operands) */
  } cases[] = {
      {4095, 4095, 4095, 1, 0, 0, 0, NULL, false, false, true, 1}, /* B copied */
      {4096, 4096, 4095, 1, 0, 0, 0, NULL, false, false, true, 0},
      {4096, 4096, 4095, 1, 0, 0, 3, NULL, false, false, true, 0},
      {2048, 2048, 4096, 1, 3, 0, 5, "1", false, false, true, 0},
      {131, 128, 77, 2, 0, 1, 1, "1", false, false, true, 0},
      {9, 64, 70, 1, 1, 0, 7, "1", false, false, true, 0},
      {2048, 11008, 4095, 1, 0, 0, 0, NULL, false, false, false, 1}, /* ping-pong */
      {4096, 4096, 4095, 1, 0, 0, 0, "0", false, false, false, 1},
      {131, 128, 77, 2, 0, 0, 0, "1", false, false, false, 1}, /* batches off 16 bytes */
      {4096, 4096, 4095, 1, 0, 0, 0, "1", true, false, false, 1},
      {4096, 4096, 4095, 1, 0, 0, 0, "1", false, true, false, 1},
      {7, 64, 77, 1, 0, 0, 0, "1", false, false, false, 1}, /* fewer rows than phases */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int64_t m = cases[i].m, n = cases[i].n, k = cases[i].k, nb = cases[i].batch;
    if (cases[i].knob != NULL) setenv("JITK_MM_PHASES", cases[i].knob, 1);
    jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, m, n, k);
    d.batch = nb;
    d.lda = k + cases[i].lda_extra;
    if (nb > 1) {
      d.stride_a = m * d.lda + cases[i].stride_extra;
      d.stride_b = k * n;
      d.stride_d = m * n;
    }
    if (cases[i].b_col) d.b_order = JITK_COL_MAJOR;
    jitk_matmul_output out = {.name = "pre", .dtype = JITK_BFLOAT16, .expr = "acc"};
    if (cases[i].output) {
      d.outputs = &out;
      d.num_outputs = 1;
    }
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    unsetenv("JITK_MM_PHASES");
    char desc[1024];
    JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
    cr_assert_eq(strstr(desc, "8 row phases") != NULL, cases[i].phases, "case %zu: %s", i, desc);
    const int64_t sa = nb > 1 ? d.stride_a : m * d.lda;
    char *a = dev(e, (size_t)(nb * sa + 16) * 2);
    void *b = dev(e, (size_t)(nb * k * n) * 2), *dd = dev(e, (size_t)(nb * m * n) * 2);
    void *o = cases[i].output ? dev(e, (size_t)(nb * m * n) * 2) : NULL;
    char *ap = a + cases[i].misalign * 2;
    jitk_matmul_operands ops;
    JT_OK(e, jitk_matmul_operands_init(&ops));
    ops.a = ap;
    ops.b = b;
    ops.d = dd;
    void *outs[1] = {o};
    if (cases[i].output) ops.outputs = outs;
    product_seen seen;
    memset(&seen, 0, sizeof seen);
    seen.phases = cases[i].phases;
    set_hooks(NULL, see_product, &seen);
    JT_OK(e, jitk_matmul_execute_ex(p, NULL, &ops));
    set_hooks(NULL, NULL, NULL);
    cr_assert_eq(seen.launches, 1, "case %zu: %d products", i, seen.launches);
    cr_assert_eq(seen.pads, cases[i].pads, "case %zu: %d copies", i, seen.pads);
    if (cases[i].phases) {
      const int64_t per = ((m + 7) / 8 + 127) / 128;
      cr_assert_eq(seen.tiles_m, (unsigned)(8 * per), "case %zu: %u tile-rows", i, seen.tiles_m);
      cr_assert_eq(seen.use_td, 0u, "case %zu: D through TMA", i);
      for (int ph = 0; ph < 8; ph++) {
        const fakecuda_tensor_map *t = &seen.a[ph];
        const uint64_t first = (uint64_t)(uintptr_t)ap + (uint64_t)(ph * d.lda) * 2;
        const uint64_t shift = (first & 15) / 2;
        cr_assert_eq(t->magic, FAKECUDA_TENSOR_MAP, "case %zu, phase %d: not a map", i, ph);
        cr_assert_eq(t->address, first - shift * 2, "case %zu, phase %d: address", i, ph);
        cr_assert_eq((seen.ashift >> (4 * ph)) & 15u, (unsigned)shift,
                     "case %zu, phase %d: shift %u, not %llu", i, ph,
                     (seen.ashift >> (4 * ph)) & 15u, (unsigned long long)shift);
        const unsigned long long want[5] = {
            (unsigned long long)k + shift, (unsigned long long)((m - ph + 7) / 8),
            (unsigned long long)nb, (unsigned long long)(16 * d.lda),
            nb > 1 ? (unsigned long long)(2 * d.stride_a) : 0};
        const unsigned long long got[5] = {t->dims[0], t->dims[1], t->dims[2], t->strides[0],
                                           nb > 1 ? t->strides[1] : 0};
        for (int x = 0; x < 5; x++)
          cr_assert_eq(got[x], want[x], "case %zu, phase %d, value %d: %llu, not %llu", i, ph, x,
                       got[x], want[x]);
        cr_assert(t->box[0] == 64 && t->box[1] == 128, "case %zu, phase %d: box %u x %u", i, ph,
                  t->box[0], t->box[1]);
      }
      if (cases[i].pads == 0)
        cr_assert_eq(seen.b.address, (unsigned long long)(uintptr_t)b, "case %zu: B's map", i);
    } else {
      cr_assert_eq(seen.tiles_m, (unsigned)((m + 127) / 128), "case %zu: %u tile-rows", i,
                   seen.tiles_m);
    }
    jitk_matmul_destroy(p);
    JT_OK(e, jitk_device_free(e, a, NULL));
    JT_OK(e, jitk_device_free(e, b, NULL));
    JT_OK(e, jitk_device_free(e, dd, NULL));
    if (o != NULL) JT_OK(e, jitk_device_free(e, o, NULL));
  }
  jitk_engine_destroy(e);
}

/* A float32 split summed across clusters is one launch of (1, 1, slices)
 * clusters, with no workspace; JITK_MM_CLUSTER_POLICY=spread or balance
 * asks the driver to place their blocks so (read when the plan is made),
 * and any other value leaves the placement to the driver. */
Test(matmul_execute, cluster_split_launch) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  /* The driver's CUclusterSchedulingPolicy: 0 its default, 1 spread, 2
   * load balancing. */
  static const struct {
    const char *policy;
    int want;
  } cases[] = {{NULL, 0}, {"spread", 1}, {"balance", 2}, {"packed", 0}};
  const size_t bytes = (size_t)768 * 768 * 4;
  void *a = dev(e, bytes), *b = dev(e, bytes), *dd = dev(e, bytes);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].policy != NULL) setenv("JITK_MM_CLUSTER_POLICY", cases[i].policy, 1);
    jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 768, 768, 768);
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    unsetenv("JITK_MM_CLUSTER_POLICY");
    char buf[512];
    JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
    cr_assert(strstr(buf, "; split-K 3 (") != NULL && strstr(buf, "across the cluster") != NULL,
              "%s", buf);
    const unsigned long long before = activity(&f);
    JT_OK(e, jitk_matmul_execute(p, NULL, a, b, NULL, dd, NULL, 0));
    cr_assert_eq(activity(&f) - before, 1, "one launch, nothing cleared");
    const fakecuda_launch *l = f.last();
    cr_assert(l->cluster[0] == 1 && l->cluster[1] == 1 && l->cluster[2] == 3);
    cr_assert_eq(l->grid[2], 3);
    cr_assert_eq(l->cluster_policy, cases[i].want, "JITK_MM_CLUSTER_POLICY=%s: policy %d",
                 cases[i].policy != NULL ? cases[i].policy : "(unset)", l->cluster_policy);
    jitk_matmul_destroy(p);
  }
  JT_OK(e, jitk_device_free(e, a, NULL));
  JT_OK(e, jitk_device_free(e, b, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  jitk_engine_destroy(e);
}

/* Workspaces whose size would pass what a size_t holds are refused
 * before anything is allocated or launched: batches that overlap (a
 * batch stride of 1) multiply the split-K workspace of planes of M x N
 * float32 sums, one a batch and slice, without memory behind them. The
 * operands' pointers are never read (the stand-in launches nothing). */
Test(matmul_execute, workspaces_past_any_memory) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 32768, 65536, (int64_t)1 << 20);
  d.batch = 65535;
  d.stride_a = d.stride_b = d.stride_c = d.stride_d = 1;
  d.split_k = 65535;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char *base = (char *)(uintptr_t)0x100000000ull;
  const unsigned long long before = activity(&f);
  JT_FAILS(e, JITK_ERR_OUT_OF_MEMORY, "the split-K workspace would take",
           jitk_matmul_execute(p, NULL, base, base, NULL, base, NULL, 0));
  cr_assert_eq(activity(&f), before, "nothing launched or cleared");
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/* A matrix with no elements may be NULL, as an empty array's data is in
 * CuPy and PyTorch: M or N of 0 launches nothing, a K of 0 still writes D
 * (beta C, here from C's pointer) with A and B NULL; a NULL where there
 * are elements is still refused, launching nothing. */
Test(matmul_execute, empty_matrices_may_be_null) {
  fakecuda_api f;
  jitk_engine *e = fake_engine(&f);
  void *c = dev(e, 64 * 64 * 4), *dd = dev(e, 64 * 64 * 4);
  static const int64_t shapes[][3] = {{0, 64, 64}, {64, 0, 64}, {64, 64, 0}};
  for (int i = 0; i < 3; i++) {
    jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, shapes[i][0], shapes[i][1], shapes[i][2]);
    d.has_c = true;
    d.beta = 1;
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    const bool writes = shapes[i][0] > 0 && shapes[i][1] > 0;
    /* NULL for each matrix without elements; C's memory stands in for
     * the others'. */
    const void *a = shapes[i][0] * shapes[i][2] > 0 ? c : NULL,
               *b = shapes[i][2] * shapes[i][1] > 0 ? c : NULL;
    const unsigned long long before = f.count();
    JT_OK(e, jitk_matmul_execute(p, NULL, a, b, writes ? c : NULL, writes ? dd : NULL, NULL, 0));
    cr_assert_eq(f.count() > before, writes, "shape %d: %llu launches", i, f.count() - before);
    if (writes)
      REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "a matrix pointer is NULL",
              jitk_matmul_execute(p, NULL, NULL, NULL, c, NULL, NULL, 0));
    jitk_matmul_destroy(p);
  }
  jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  REFUSED(&f, e, JITK_ERR_INVALID_ARGUMENT, "a matrix pointer is NULL",
          jitk_matmul_execute(p, NULL, NULL, c, NULL, dd, NULL, 0));
  jitk_matmul_destroy(p);
  JT_OK(e, jitk_device_free(e, c, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  jitk_engine_destroy(e);
}

/* With JITK_MM_FEED=1, a row-major bf16 B whose rows are off 16 bytes is
 * copied onto 128-byte lines by the product's own idle warps
 * (matmul_sm90.cuh's feed_copy) where the kernel has them free and room
 * for their buffers: the cooperative tiles (4095^3, read by phases too;
 * 4096 x 4095 x 4096 when forced), not ping-pong's five stages, nor
 * without the knob. No copy kernel is launched for B (A, copied, still
 * has one); the counters before the copy are cleared on the stream, and
 * the kernel is told B's address and strides in bytes, the copy's (the
 * address and row stride of B's map), and the units of 4096 bytes of a
 * row, the rows and the chunks of 64 rows. A B off 16 bytes by its
 * pointer only (its rows 16 bytes apart) is copied first, as the plan
 * cannot know it. */
Test(matmul_execute, b_fed_by_the_kernel) {
  fakecuda_api f;
  fakecuda_set_hooks_fn set_hooks = NULL;
  jitk_engine *e = hooked_engine(&f, &set_hooks);
  static const struct {
    int64_t m, n, k, batch, ldb_extra;
    int misalign; /* elements B's pointer is off its allocation */
    const char *schedule, *feed, *phases;
    bool fed, read_by_phases;
    int pads;
  } cases[] = {
      {4095, 4095, 4095, 1, 0, 0, NULL, "1", NULL, true, true, 0},
      {4096, 4095, 4096, 1, 0, 0, NULL, "1", NULL, false, false, 1}, /* ping-pong */
      {4096, 4095, 4096, 1, 0, 0, "cooperative", "1", NULL, true, false, 0},
      {1027, 999, 1001, 2, 0, 3, "cooperative", "1", "0", true, false, 1}, /* A copied */
      {300, 2049, 77, 3, 2, 1, "cooperative", "1", "1", true, true, 0},
      {200, 3, 320, 1, 0, 0, "cooperative", "1", NULL, true, false, 0}, /* a unit in the lanes */
      {4095, 4095, 4095, 1, 0, 0, NULL, NULL, NULL, false, true, 1},
      {4095, 4095, 4095, 1, 0, 0, NULL, "0", NULL, false, true, 1},
      {1024, 4096, 4096, 1, 0, 5, "cooperative", "1", NULL, false, false, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int64_t m = cases[i].m, n = cases[i].n, k = cases[i].k, nb = cases[i].batch;
    if (cases[i].schedule != NULL) setenv("JITK_MM_SCHEDULE", cases[i].schedule, 1);
    if (cases[i].feed != NULL) setenv("JITK_MM_FEED", cases[i].feed, 1);
    if (cases[i].phases != NULL) setenv("JITK_MM_PHASES", cases[i].phases, 1);
    jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, m, n, k);
    d.batch = nb;
    d.ldb = n + cases[i].ldb_extra;
    if (nb > 1) {
      d.stride_a = (m * k + 7) / 8 * 8; /* batches of A 16 bytes apart, for phases */
      d.stride_b = k * d.ldb + 5;
      d.stride_d = m * n;
    }
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    unsetenv("JITK_MM_SCHEDULE");
    unsetenv("JITK_MM_FEED");
    unsetenv("JITK_MM_PHASES");
    char desc[1024];
    JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
    cr_assert_eq(strstr(desc, "by the kernel's own idle warps") != NULL, cases[i].fed,
                 "case %zu: %s", i, desc);
    cr_assert_eq(strstr(desc, "8 row phases") != NULL, cases[i].read_by_phases, "case %zu: %s", i,
                 desc);
    const int64_t sb = nb > 1 ? d.stride_b : k * d.ldb;
    char *a = dev(e, (size_t)(nb * m * k) * 2), *b = dev(e, (size_t)(nb * sb + 16) * 2);
    void *dd = dev(e, (size_t)(nb * m * n) * 2);
    char *bp = b + cases[i].misalign * 2;
    jitk_matmul_operands ops;
    JT_OK(e, jitk_matmul_operands_init(&ops));
    ops.a = a;
    ops.b = bp;
    ops.d = dd;
    product_seen seen;
    memset(&seen, 0, sizeof seen);
    seen.phases = cases[i].read_by_phases;
    seen.feed = cases[i].fed;
    unsigned long long memsets = 0;
    f.memset(&memsets);
    set_hooks(NULL, see_product, &seen);
    JT_OK(e, jitk_matmul_execute_ex(p, NULL, &ops));
    set_hooks(NULL, NULL, NULL);
    unsigned long long after = 0;
    const fakecuda_memset *ms = f.memset(&after);
    cr_assert_eq(seen.launches, 1, "case %zu: %d products", i, seen.launches);
    cr_assert_eq(seen.pads, cases[i].pads, "case %zu: %d copies", i, seen.pads);
    if (cases[i].fed) {
      const uint64_t segs = ((uint64_t)n * 2 + 4095) / 4096, chunks = ((uint64_t)k + 63) / 64;
      const uint64_t counts = ((1 + (uint64_t)nb * chunks) * 4 + 255) / 256 * 256;
      cr_assert_eq(after, memsets + 1, "case %zu: %llu clears", i, after - memsets);
      cr_assert(
          ms->dst == (void *)(uintptr_t)seen.fa.count && ms->bytes == counts && ms->value == 0,
          "case %zu: cleared %zu bytes at %p", i, ms->bytes, ms->dst);
      cr_assert_eq(seen.fa.bf, seen.fa.count + counts, "case %zu: the copy after the counts", i);
      cr_assert_eq(seen.fa.bf, seen.b.address, "case %zu: B's map is not the copy's", i);
      const unsigned long long want[10] = {(unsigned long long)(uintptr_t)bp,
                                           (unsigned long long)d.ldb * 2,
                                           nb > 1 ? (unsigned long long)d.stride_b * 2 : 0,
                                           ((unsigned long long)n * 2 + 127) / 128 * 128,
                                           seen.b.strides[0],
                                           segs * (uint64_t)k * (uint64_t)nb,
                                           segs,
                                           chunks,
                                           (unsigned long long)k,
                                           (unsigned long long)n * 2};
      const unsigned long long got[10] = {seen.fa.b,
                                          (unsigned long long)seen.fa.ldb,
                                          nb > 1 ? (unsigned long long)seen.fa.sb : 0,
                                          (unsigned long long)seen.fa.ldf,
                                          (unsigned long long)seen.fa.ldf,
                                          seen.fa.units,
                                          seen.fa.segs,
                                          seen.fa.chunks,
                                          seen.fa.k,
                                          seen.fa.row_bytes};
      for (int x = 0; x < 10; x++)
        cr_assert_eq(got[x], want[x], "case %zu, value %d: %llu, not %llu", i, x, got[x], want[x]);
    } else {
      cr_assert(seen.b.address != (unsigned long long)(uintptr_t)bp, "case %zu: B read where it is",
                i);
    }
    jitk_matmul_destroy(p);
    JT_OK(e, jitk_device_free(e, a, NULL));
    JT_OK(e, jitk_device_free(e, b, NULL));
    JT_OK(e, jitk_device_free(e, dd, NULL));
  }
  jitk_engine_destroy(e);
}
