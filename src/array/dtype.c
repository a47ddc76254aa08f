/*
 * The dtype table, NumPy's promotion table, and half, bfloat16 and 8-bit
 * float conversions.
 */
#include <string.h>

#include "array/array.h"
#include "base/base.h"

/* DLPack 0.8 added kDLBool = 6; Debian's 0.6 header lacks the name, so the
 * number is spelled here. */
#define JK_DL_BOOL 6u
/* DLPack 1.1 numbers the 8-bit floats in DLDataTypeCode: kDLFloat8_e3m4 = 7,
 * kDLFloat8_e4m3 = 8, kDLFloat8_e4m3b11fnuz = 9, kDLFloat8_e4m3fn = 10,
 * kDLFloat8_e4m3fnuz = 11, kDLFloat8_e5m2 = 12, kDLFloat8_e5m2fnuz = 13.
 * jitk's float8_e4m3fn and float8_e5m2 are 10 and 12 (the formats CUDA's
 * __nv_fp8_e4m3 and __nv_fp8_e5m2 hold); Debian's DLPack 0.6 header has
 * none of these names. */
#define JK_DL_FLOAT8_E4M3FN 10u
#define JK_DL_FLOAT8_E5M2 12u

static const jitk_dtype_info table[JITK_DTYPE_COUNT] = {
    [JITK_BOOL] = {JITK_BOOL, "bool", "bool", 1, 1, 'b', {JK_DL_BOOL, 8, 1}},
    [JITK_INT8] = {JITK_INT8, "int8", "signed char", 1, 1, 'i', {kDLInt, 8, 1}},
    [JITK_INT16] = {JITK_INT16, "int16", "short", 2, 2, 'i', {kDLInt, 16, 1}},
    [JITK_INT32] = {JITK_INT32, "int32", "int", 4, 4, 'i', {kDLInt, 32, 1}},
    [JITK_INT64] = {JITK_INT64, "int64", "long long", 8, 8, 'i', {kDLInt, 64, 1}},
    [JITK_UINT8] = {JITK_UINT8, "uint8", "unsigned char", 1, 1, 'u', {kDLUInt, 8, 1}},
    [JITK_UINT16] = {JITK_UINT16, "uint16", "unsigned short", 2, 2, 'u', {kDLUInt, 16, 1}},
    [JITK_UINT32] = {JITK_UINT32, "uint32", "unsigned int", 4, 4, 'u', {kDLUInt, 32, 1}},
    [JITK_UINT64] = {JITK_UINT64, "uint64", "unsigned long long", 8, 8, 'u', {kDLUInt, 64, 1}},
    [JITK_FLOAT16] = {JITK_FLOAT16, "float16", "__half", 2, 2, 'f', {kDLFloat, 16, 1}},
    [JITK_BFLOAT16] = {JITK_BFLOAT16, "bfloat16", "__nv_bfloat16", 2, 2, 'f', {kDLBfloat, 16, 1}},
    [JITK_FLOAT32] = {JITK_FLOAT32, "float32", "float", 4, 4, 'f', {kDLFloat, 32, 1}},
    [JITK_FLOAT64] = {JITK_FLOAT64, "float64", "double", 8, 8, 'f', {kDLFloat, 64, 1}},
    [JITK_COMPLEX64] =
        {JITK_COMPLEX64, "complex64", "jitk::complex<float>", 8, 8, 'c', {kDLComplex, 64, 1}},
    [JITK_COMPLEX128] =
        {JITK_COMPLEX128, "complex128", "jitk::complex<double>", 16, 16, 'c', {kDLComplex, 128, 1}},
    /* The kernel types are jitk's own, from jitk/fp8.cuh: CUDA's types
     * convert to and from float only explicitly, so `z = x * y` would not
     * compile on them. */
    [JITK_FLOAT8_E4M3] = {JITK_FLOAT8_E4M3,
                          "float8_e4m3fn",
                          "jitk::float8_e4m3",
                          1,
                          1,
                          'f',
                          {JK_DL_FLOAT8_E4M3FN, 8, 1}},
    [JITK_FLOAT8_E5M2] = {JITK_FLOAT8_E5M2,
                          "float8_e5m2",
                          "jitk::float8_e5m2",
                          1,
                          1,
                          'f',
                          {JK_DL_FLOAT8_E5M2, 8, 1}},
};

const jitk_dtype_info *jk_dtype(jitk_dtype d) {
  if ((int)d <= 0 || (int)d >= JITK_DTYPE_COUNT) return NULL;
  return &table[d];
}

bool jk_dtype_aligned(const void *p, jitk_dtype d) {
  return ((uintptr_t)p & (table[d].align - 1)) == 0;
}

jitk_status jitk_dtype_get_info(jitk_dtype dtype, jitk_dtype_info *info) {
  const jitk_dtype_info *t = jk_dtype(dtype);
  if (t == NULL || info == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_dtype_get_info: %s",
                   info == NULL ? "info is NULL" : "not a dtype");
  *info = *t;
  return JITK_OK;
}

jitk_status jitk_dtype_from_name(const char *name, jitk_dtype *dtype) {
  if (name == NULL || dtype == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_dtype_from_name: an argument is NULL");
  jitk_dtype d = jk_dtype_lookup(name, strlen(name));
  if (d == JITK_DTYPE_NONE)
    return jk_fail(NULL, JITK_ERR_NOT_FOUND,
                   "\"%s\" is not a dtype; the dtypes are bool, int8, int16, "
                   "int32, int64, uint8, uint16, uint32, uint64, float16, "
                   "bfloat16, float32, float64, complex64, complex128, float8_e4m3fn and "
                   "float8_e5m2",
                   name);
  *dtype = d;
  return JITK_OK;
}

jitk_dtype jk_dtype_lookup(const char *name, size_t len) {
  for (int i = 1; i < JITK_DTYPE_COUNT; i++)
    if (strlen(table[i].name) == len && memcmp(table[i].name, name, len) == 0) return (jitk_dtype)i;
  /* The one alias: ml_dtypes also has a float8_e4m3 (IEEE-like, with
   * infinities), but CUDA, PyTorch's users and DLPack's code 8 readers
   * mostly mean the "fn" format by this name, and jitk has no other e4m3,
   * so the short name cannot pick the wrong type silently. */
  static const char alias[] = "float8_e4m3";
  if (len == sizeof alias - 1 && memcmp(alias, name, len) == 0) return JITK_FLOAT8_E4M3;
  return JITK_DTYPE_NONE;
}

jitk_status jitk_dtype_from_dlpack(DLDataType dl, jitk_dtype *dtype) {
  if (dtype == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_dtype_from_dlpack: dtype is NULL");
  jitk_dtype d = jk_dtype_from_dl(dl);
  if (d == JITK_DTYPE_NONE)
    return jk_fail(NULL, JITK_ERR_UNSUPPORTED,
                   "DLPack type (code %u, %u bits, %u lanes) has no jitk dtype", (unsigned)dl.code,
                   (unsigned)dl.bits, (unsigned)dl.lanes);
  *dtype = d;
  return JITK_OK;
}

jitk_dtype jk_dtype_from_dl(DLDataType dl) {
  if (dl.lanes != 1) return JITK_DTYPE_NONE;
  for (int i = 1; i < JITK_DTYPE_COUNT; i++)
    if (table[i].dl.code == dl.code && table[i].dl.bits == dl.bits) return (jitk_dtype)i;
  return JITK_DTYPE_NONE;
}

/* NumPy's result_type for every pair, generated once from NumPy 2.4 with
 * ml_dtypes (tools/gen/promotion_reference.py), bfloat16 pairs NumPy
 * refuses resolved by its own smallest-safe-type rule. The test compares
 * this table with the generated reference cell by cell. */
enum {
  B = JITK_BOOL,
  I1 = JITK_INT8,
  I2 = JITK_INT16,
  I4 = JITK_INT32,
  I8 = JITK_INT64,
  U1 = JITK_UINT8,
  U2 = JITK_UINT16,
  U4 = JITK_UINT32,
  U8 = JITK_UINT64,
  F2 = JITK_FLOAT16,
  BF = JITK_BFLOAT16,
  F4 = JITK_FLOAT32,
  F8 = JITK_FLOAT64,
  C8 = JITK_COMPLEX64,
  C16 = JITK_COMPLEX128
};
static const unsigned char promotion[15][15] = {
    /*        B    I1   I2   I4   I8   U1   U2   U4   U8   F2   BF   F4   F8   C8   C16  */
    /* B   */ {B, I1, I2, I4, I8, U1, U2, U4, U8, F2, BF, F4, F8, C8, C16},
    /* I1  */ {I1, I1, I2, I4, I8, I2, I4, I8, F8, F2, BF, F4, F8, C8, C16},
    /* I2  */ {I2, I2, I2, I4, I8, I2, I4, I8, F8, F4, F4, F4, F8, C8, C16},
    /* I4  */ {I4, I4, I4, I4, I8, I4, I4, I8, F8, F8, F8, F8, F8, C16, C16},
    /* I8  */ {I8, I8, I8, I8, I8, I8, I8, I8, F8, F8, F8, F8, F8, C16, C16},
    /* U1  */ {U1, I2, I2, I4, I8, U1, U2, U4, U8, F2, BF, F4, F8, C8, C16},
    /* U2  */ {U2, I4, I4, I4, I8, U2, U2, U4, U8, F4, F4, F4, F8, C8, C16},
    /* U4  */ {U4, I8, I8, I8, I8, U4, U4, U4, U8, F8, F8, F8, F8, C16, C16},
    /* U8  */ {U8, F8, F8, F8, F8, U8, U8, U8, U8, F8, F8, F8, F8, C16, C16},
    /* F2  */ {F2, F2, F4, F8, F8, F2, F4, F8, F8, F2, F4, F4, F8, C8, C16},
    /* BF  */ {BF, BF, F4, F8, F8, BF, F4, F8, F8, F4, BF, F4, F8, C8, C16},
    /* F4  */ {F4, F4, F4, F8, F8, F4, F4, F8, F8, F4, F4, F4, F8, C8, C16},
    /* F8  */ {F8, F8, F8, F8, F8, F8, F8, F8, F8, F8, F8, F8, F8, C16, C16},
    /* C8  */ {C8, C8, C8, C16, C16, C8, C8, C16, C16, C8, C8, C8, C16, C8, C16},
    /* C16 */ {C16, C16, C16, C16, C16, C16, C16, C16, C16, C16, C16, C16, C16, C16, C16},
};

static bool is_float8(jitk_dtype d) { return d == JITK_FLOAT8_E4M3 || d == JITK_FLOAT8_E5M2; }

/* The 8-bit floats are outside the table: NumPy has no rule for them
 * (ml_dtypes registers none), PyTorch refuses to promote them, and any
 * wider type chosen here would be a guess at the precision the caller
 * wants. So one meets only itself; JITK_DTYPE_NONE otherwise. */
jitk_dtype jk_promote(jitk_dtype a, jitk_dtype b) {
  if (jk_dtype(a) == NULL || jk_dtype(b) == NULL) return JITK_DTYPE_NONE;
  if (is_float8(a) || is_float8(b)) return a == b ? a : JITK_DTYPE_NONE;
  return (jitk_dtype)promotion[a - 1][b - 1];
}

jitk_status jitk_dtype_promote(jitk_dtype a, jitk_dtype b, jitk_dtype *result) {
  if (result == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_dtype_promote: result is NULL");
  if (jk_dtype(a) == NULL || jk_dtype(b) == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_dtype_promote: %d or %d is not a dtype",
                   (int)a, (int)b);
  jitk_dtype r = jk_promote(a, b);
  if (r == JITK_DTYPE_NONE)
    return jk_fail(NULL, JITK_ERR_ARGUMENT_TYPE,
                   "jitk_dtype_promote: %s and %s have no common dtype: an 8-bit float "
                   "promotes only with itself; convert one of them, or bind the type "
                   "explicitly (\"T=float32\")",
                   jk_dtype(a)->name, jk_dtype(b)->name);
  *result = r;
  return JITK_OK;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t jitk_float_to_half(float value) {
  uint32_t x = float_bits(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xff) /* infinity, or NaN kept quiet and non-zero */
    return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow to infinity */
  if (e <= 0) {
    /* Subnormal half (or zero): shift in the implicit bit and round. */
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  /* Rounding may carry into the exponent, and into infinity, correctly. */
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)h;
}

float jitk_half_to_float(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t man = bits & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_float(sign);
    /* Subnormal: value is man * 2^-24. */
    float f = (float)man * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  return bits_float(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

uint16_t jitk_float_to_bfloat16(float value) {
  uint32_t x = float_bits(value);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
    return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

float jitk_bfloat16_to_float(uint16_t bits) { return bits_float((uint32_t)bits << 16); }

/* An 8-bit float with `mbits` mantissa bits and exponent bias `bias`,
 * rounded to nearest even from a double (exact from a float, and a
 * float64 scalar rounds once, as __nv_fp8_e4m3(double) does), as a
 * magnitude code with the sign apart. The code may exceed the format's
 * largest finite one (rounding carries into the exponent correctly); the
 * callers saturate. */
static uint64_t float8_magnitude(uint64_t exp, uint64_t man, int mbits, int bias) {
  if (exp == 0) return 0; /* zero or a double subnormal, far below half the smallest fp8 */
  int64_t e = (int64_t)exp - 1023 + bias;
  uint64_t sig = man | (1ull << 52); /* 53 bits, the implicit 1 included */
  /* A normal result drops 52 - mbits bits; a subnormal one (e <= 0)
   * 1 - e more, shifting the implicit bit into the mantissa. */
  int64_t shift = 52 - mbits + (e >= 1 ? 0 : 1 - e);
  if (shift > 54) return 0; /* below half the smallest subnormal */
  uint64_t code = e >= 1 ? ((uint64_t)e << mbits) | (man >> shift) : sig >> shift;
  uint64_t rem = (e >= 1 ? man : sig) & ((1ull << shift) - 1);
  uint64_t mid = 1ull << (shift - 1);
  if (rem > mid || (rem == mid && (code & 1u))) code++;
  return code;
}

uint8_t jk_double_to_float8(double value, jitk_dtype d) {
  uint64_t x;
  memcpy(&x, &value, sizeof x);
  uint8_t sign = (uint8_t)((x >> 56) & 0x80u);
  uint64_t exp = (x >> 52) & 0x7ffu, man = x & ((1ull << 52) - 1);
  bool e4m3 = d == JITK_FLOAT8_E4M3;
  /* Every NaN becomes the canonical 0x7F, its sign and payload dropped,
   * as CUDA's float conversion gives on the host and the device. */
  if (exp == 0x7ff && man) return 0x7f;
  /* Infinity and overflow saturate to the largest finite value: e4m3's
   * 448 (0x7E; it has no infinity and 0x7F is NaN), and e5m2's 57344
   * (0x7B) rather than infinity, because CUDA's __nv_fp8_e5m2(float)
   * converts with __NV_SATFINITE, infinity included, and a kernel's stores
   * go through it. */
  uint64_t max = e4m3 ? 0x7eu : 0x7bu;
  uint64_t code = exp == 0x7ff ? max : float8_magnitude(exp, man, e4m3 ? 3 : 2, e4m3 ? 7 : 15);
  return (uint8_t)(sign | (code > max ? max : code));
}

/* A 16-bit float of `mbits` mantissa bits and exponent bias `bias`
 * (float16: 10, 15; bfloat16: 7, 127) from a double, rounded once. */
static uint16_t double_to_16(double value, int mbits, int bias) {
  uint64_t x;
  memcpy(&x, &value, sizeof x);
  uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
  uint64_t exp = (x >> 52) & 0x7ffu, man = x & ((1ull << 52) - 1);
  const uint64_t inf = (uint64_t)((1u << (15 - mbits)) - 1) << mbits;
  if (exp == 0x7ff) /* infinity, or NaN kept quiet */
    return (uint16_t)(sign | inf | (man ? 1u << (mbits - 1) : 0));
  /* The magnitude's code may carry past the largest finite one: then it
   * is infinity, as IEEE rounding makes it. */
  uint64_t code = float8_magnitude(exp, man, mbits, bias);
  return (uint16_t)(sign | (code >= inf ? inf : code));
}

uint16_t jk_double_to_half(double value) { return double_to_16(value, 10, 15); }

uint16_t jk_double_to_bfloat16(double value) { return double_to_16(value, 7, 127); }

uint8_t jitk_float_to_float8_e4m3(float value) {
  return jk_double_to_float8(value, JITK_FLOAT8_E4M3);
}

uint8_t jitk_float_to_float8_e5m2(float value) {
  return jk_double_to_float8(value, JITK_FLOAT8_E5M2);
}

float jitk_float8_e4m3_to_float(uint8_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x80u) << 24;
  uint32_t exp = (bits >> 3) & 0xfu, man = bits & 0x7u;
  if ((bits & 0x7fu) == 0x7fu) return bits_float(sign | 0x7fc00000u);
  if (exp == 0) {
    float f = (float)man * (1.0f / 512.0f); /* subnormal: man * 2^-9 */
    return sign ? -f : f;
  }
  return bits_float(sign | ((exp + 127 - 7) << 23) | (man << 20));
}

/* e5m2 is a float16 without its low 8 bits. */
float jitk_float8_e5m2_to_float(uint8_t bits) { return jitk_half_to_float((uint16_t)(bits << 8)); }
