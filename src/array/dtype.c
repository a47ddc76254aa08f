/*
 * The dtype table, NumPy's promotion table, and half/bfloat16 conversions.
 */
#include <string.h>

#include "array/array.h"
#include "base/base.h"

/* DLPack 0.8 added kDLBool = 6; Debian's 0.6 header lacks the name, so the
 * number is spelled here. */
#define JK_DL_BOOL 6u

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
};

const jitk_dtype_info *jk_dtype(jitk_dtype d) {
  if ((int)d <= 0 || (int)d >= JITK_DTYPE_COUNT) return NULL;
  return &table[d];
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
                   "bfloat16, float32, float64, complex64 and complex128",
                   name);
  *dtype = d;
  return JITK_OK;
}

jitk_dtype jk_dtype_lookup(const char *name, size_t len) {
  for (int i = 1; i < JITK_DTYPE_COUNT; i++)
    if (strlen(table[i].name) == len && memcmp(table[i].name, name, len) == 0) return (jitk_dtype)i;
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

jitk_dtype jk_promote(jitk_dtype a, jitk_dtype b) {
  if (jk_dtype(a) == NULL || jk_dtype(b) == NULL) return JITK_DTYPE_NONE;
  return (jitk_dtype)promotion[a - 1][b - 1];
}

jitk_status jitk_dtype_promote(jitk_dtype a, jitk_dtype b, jitk_dtype *result) {
  if (result == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_dtype_promote: result is NULL");
  jitk_dtype r = jk_promote(a, b);
  if (r == JITK_DTYPE_NONE)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_dtype_promote: %d or %d is not a dtype",
                   (int)a, (int)b);
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
