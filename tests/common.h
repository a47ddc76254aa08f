/*
 * Helpers shared by the tests: engines, random data, the GPU skip, a
 * counting allocator and device memory.
 */
#ifndef JITK_TESTS_COMMON_H
#define JITK_TESTS_COMMON_H

#include <criterion/criterion.h>
#include <jitk/jitk.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Asserts a call succeeded, printing jitk's message when it did not. */
#define JT_OK(e, call)                                                                             \
  do {                                                                                             \
    jitk_status st_ = (call);                                                                      \
    cr_assert_eq(st_, JITK_OK, "%s failed with %s: %s", #call, jitk_errname(st_), jitk_errmsg(e)); \
  } while (0)

/* Asserts a call failed with `code` and that the message contains
 * `needle`. */
#define JT_FAILS(e, code, needle, call)                                                          \
  do {                                                                                           \
    jitk_status st_ = (call);                                                                    \
    cr_assert_eq(st_, (code), "%s gave %s, expected %s: %s", #call, jitk_errname(st_),           \
                 jitk_errname(code), jitk_errmsg(e));                                            \
    cr_assert(strstr(jitk_errmsg(e), (needle)) != NULL, "message of %s lacks \"%s\": %s", #call, \
              (needle), jitk_errmsg(e));                                                         \
  } while (0)

/* A compile-only engine for `arch` whose disk cache is in `mode`
 * (JITK_CACHE_DEFAULT: as the environment sets it). */
static inline jitk_engine *jt_compile_engine_with_cache(const char *arch, jitk_cache_mode mode) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = arch;
  cfg.cache_mode = mode;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "compile-only engine for %s: %s", arch, jitk_errmsg(NULL));
  return e;
}

static inline jitk_engine *jt_compile_engine(const char *arch) {
  return jt_compile_engine_with_cache(arch, JITK_CACHE_DEFAULT);
}

/* The same with the disk cache off, for tests that need NVRTC to run
 * whatever an earlier run of them left in the cache. */
static inline jitk_engine *jt_uncached_compile_engine(const char *arch) {
  return jt_compile_engine_with_cache(arch, JITK_CACHE_OFF);
}

/* An engine on the default device, or a skipped test. */
static inline jitk_engine *jt_gpu_engine(void) {
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE)
    cr_skip_test("no CUDA device (%s)", jitk_errmsg(NULL));
  cr_assert_eq(st, JITK_OK, "engine: %s", jitk_errmsg(NULL));
  return e;
}

/* splitmix64: fresh, reproducible pseudo-random data for every test. */
static inline uint64_t jt_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline double jt_uniform(uint64_t *s) {
  return (double)(jt_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* A packed row-major matmul of M x K by K x N, every matrix of dtype t. */
static inline jitk_matmul_desc jt_matmul_desc(jitk_dtype t, int64_t m, int64_t n, int64_t k) {
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = m;
  d.n = n;
  d.k = k;
  d.a_dtype = d.b_dtype = d.c_dtype = d.d_dtype = t;
  return d;
}

static inline DLTensor jt_tensor(void *data, jitk_dtype dtype, int ndim, int64_t *shape,
                                 int64_t *strides) {
  jitk_dtype_info info;
  jitk_dtype_get_info(dtype, &info);
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCUDA;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = info.dl;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = 0;
  return t;
}

/* An engine allocator (cfg.alloc_fn) that counts live blocks and fails
 * the fail_at-th allocation: for the allocation-failure tests. */
typedef struct jt_counter {
  long live;    /* blocks allocated and not yet freed */
  long calls;   /* allocations asked for */
  long fail_at; /* 1-based allocation that fails; 0 for none */
} jt_counter;

static inline void *jt_counting(void *user, void *ptr, size_t size) {
  jt_counter *c = user;
  if (size == 0) {
    if (ptr != NULL) {
      c->live--;
      free(ptr);
    }
    return NULL;
  }
  c->calls++;
  if (c->fail_at > 0 && c->calls == c->fail_at) return NULL;
  void *p = realloc(ptr, size);
  if (p != NULL && ptr == NULL) c->live++;
  return p;
}

/* Device memory for GPU tests; any failure fails the test. */
static inline void *jt_dev_alloc(jitk_engine *e, size_t bytes) {
  void *p = NULL;
  JT_OK(e, jitk_device_alloc(e, bytes, NULL, &p));
  return p;
}

static inline void jt_to_dev(jitk_engine *e, void *dst, const void *src, size_t bytes) {
  JT_OK(e, jitk_memcpy(e, dst, src, bytes, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
}

static inline void jt_to_host(jitk_engine *e, void *dst, const void *src, size_t bytes) {
  JT_OK(e, jitk_memcpy(e, dst, src, bytes, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
}

/* 0xFF bytes are NaN in every float type and -1 in every integer one, so an
 * element the kernel failed to write cannot pass a check. */
static inline void jt_poison(jitk_engine *e, void *p, size_t bytes) {
  JT_OK(e, jitk_memset(e, p, 0xFF, bytes, NULL));
}

#ifdef JITK_TEST_HAVE_FATBIN
/* tests/gpu/fatbin_kernels.cu built by nvcc (sm_80, sm_90, compute_90). */
extern const unsigned char jt_fatbin[];
extern const size_t jt_fatbin_size;
#endif

/* Element k of a host buffer of dtype d, as double (real part). */
static inline double jt_read_real(const void *buf, jitk_dtype d, size_t k) {
  switch (d) {
    case JITK_BOOL: return ((const uint8_t *)buf)[k];
    case JITK_INT8: return ((const int8_t *)buf)[k];
    case JITK_INT16: return ((const int16_t *)buf)[k];
    case JITK_INT32: return ((const int32_t *)buf)[k];
    case JITK_INT64: return (double)((const int64_t *)buf)[k];
    case JITK_UINT8: return ((const uint8_t *)buf)[k];
    case JITK_UINT16: return ((const uint16_t *)buf)[k];
    case JITK_UINT32: return ((const uint32_t *)buf)[k];
    case JITK_UINT64: return (double)((const uint64_t *)buf)[k];
    case JITK_FLOAT16: return jitk_half_to_float(((const uint16_t *)buf)[k]);
    case JITK_BFLOAT16: return jitk_bfloat16_to_float(((const uint16_t *)buf)[k]);
    case JITK_FLOAT8_E4M3: return jitk_float8_e4m3_to_float(((const uint8_t *)buf)[k]);
    case JITK_FLOAT8_E5M2: return jitk_float8_e5m2_to_float(((const uint8_t *)buf)[k]);
    case JITK_FLOAT32: return ((const float *)buf)[k];
    case JITK_FLOAT64: return ((const double *)buf)[k];
    case JITK_COMPLEX64: return ((const float *)buf)[2 * k];
    case JITK_COMPLEX128: return ((const double *)buf)[2 * k];
    default: return NAN;
  }
}

static inline double jt_read_imag(const void *buf, jitk_dtype d, size_t k) {
  if (d == JITK_COMPLEX64) return ((const float *)buf)[2 * k + 1];
  if (d == JITK_COMPLEX128) return ((const double *)buf)[2 * k + 1];
  return 0;
}

/* Writes the integer v into element k of a host buffer of dtype d (the
 * real part of a complex one). v must fit the dtype. */
static inline void jt_write_int(void *buf, jitk_dtype d, size_t k, int v) {
  switch (d) {
    case JITK_BOOL: ((uint8_t *)buf)[k] = v != 0; break;
    case JITK_INT8: ((int8_t *)buf)[k] = (int8_t)v; break;
    case JITK_INT16: ((int16_t *)buf)[k] = (int16_t)v; break;
    case JITK_INT32: ((int32_t *)buf)[k] = v; break;
    case JITK_INT64: ((int64_t *)buf)[k] = v; break;
    case JITK_UINT8: ((uint8_t *)buf)[k] = (uint8_t)v; break;
    case JITK_UINT16: ((uint16_t *)buf)[k] = (uint16_t)v; break;
    case JITK_UINT32: ((uint32_t *)buf)[k] = (uint32_t)v; break;
    case JITK_UINT64: ((uint64_t *)buf)[k] = (uint64_t)v; break;
    case JITK_FLOAT16: ((uint16_t *)buf)[k] = jitk_float_to_half((float)v); break;
    case JITK_BFLOAT16: ((uint16_t *)buf)[k] = jitk_float_to_bfloat16((float)v); break;
    case JITK_FLOAT8_E4M3: ((uint8_t *)buf)[k] = jitk_float_to_float8_e4m3((float)v); break;
    case JITK_FLOAT8_E5M2: ((uint8_t *)buf)[k] = jitk_float_to_float8_e5m2((float)v); break;
    case JITK_FLOAT32: ((float *)buf)[k] = (float)v; break;
    case JITK_FLOAT64: ((double *)buf)[k] = v; break;
    case JITK_COMPLEX64:
      ((float *)buf)[2 * k] = (float)v;
      ((float *)buf)[2 * k + 1] = 0;
      break;
    case JITK_COMPLEX128:
      ((double *)buf)[2 * k] = v;
      ((double *)buf)[2 * k + 1] = 0;
      break;
    default: break;
  }
}

static inline size_t jt_dtype_size(jitk_dtype d) {
  jitk_dtype_info info;
  jitk_dtype_get_info(d, &info);
  return info.size;
}

/* Writes v, rounded to the float dtype d, into element k of a host buffer. */
static inline void jt_write_real(void *buf, jitk_dtype d, size_t k, double v) {
  switch (d) {
    case JITK_FLOAT16: ((uint16_t *)buf)[k] = jitk_float_to_half((float)v); break;
    case JITK_BFLOAT16: ((uint16_t *)buf)[k] = jitk_float_to_bfloat16((float)v); break;
    case JITK_FLOAT8_E4M3: ((uint8_t *)buf)[k] = jitk_float_to_float8_e4m3((float)v); break;
    case JITK_FLOAT8_E5M2: ((uint8_t *)buf)[k] = jitk_float_to_float8_e5m2((float)v); break;
    case JITK_FLOAT32: ((float *)buf)[k] = (float)v; break;
    case JITK_FLOAT64: ((double *)buf)[k] = v; break;
    default: break;
  }
}

#endif
