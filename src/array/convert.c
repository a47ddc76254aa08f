/*
 * Scalars converted to a parameter's dtype, as a C cast would, on the host.
 */
#include <math.h>
#include <string.h>

#include "array/array.h"
#include "base/base.h"

typedef struct value {
  bool is_int; /* exact integer in i or u */
  bool is_signed;
  int64_t i;
  uint64_t u;
  double re, im;
} value;

static value read_arg(const jitk_arg *a) {
  value v;
  memset(&v, 0, sizeof v);
  switch (a->dtype) {
    case JITK_BOOL:
      v.is_int = true;
      v.u = a->value.b != 0;
      break;
    case JITK_INT8:
      v.is_int = v.is_signed = true;
      v.i = a->value.i8; /* NOLINT(bugprone-signed-char-misuse): a number, not a character */
      break;
    case JITK_INT16:
      v.is_int = v.is_signed = true;
      v.i = a->value.i16;
      break;
    case JITK_INT32:
      v.is_int = v.is_signed = true;
      v.i = a->value.i32;
      break;
    case JITK_INT64:
      v.is_int = v.is_signed = true;
      v.i = a->value.i64;
      break;
    case JITK_UINT8:
      v.is_int = true;
      v.u = a->value.u8;
      break;
    case JITK_UINT16:
      v.is_int = true;
      v.u = a->value.u16;
      break;
    case JITK_UINT32:
      v.is_int = true;
      v.u = a->value.u32;
      break;
    case JITK_UINT64:
      v.is_int = true;
      v.u = a->value.u64;
      break;
    case JITK_FLOAT16: v.re = jitk_half_to_float(a->value.f16); break;
    case JITK_BFLOAT16: v.re = jitk_bfloat16_to_float(a->value.f16); break;
    case JITK_FLOAT8_E4M3: v.re = jitk_float8_e4m3_to_float(a->value.f8); break;
    case JITK_FLOAT8_E5M2: v.re = jitk_float8_e5m2_to_float(a->value.f8); break;
    case JITK_FLOAT32: v.re = a->value.f32; break;
    case JITK_FLOAT64: v.re = a->value.f64; break;
    case JITK_COMPLEX64:
      v.re = a->value.c64[0];
      v.im = a->value.c64[1];
      break;
    case JITK_COMPLEX128:
      v.re = a->value.c128[0];
      v.im = a->value.c128[1];
      break;
    default: break;
  }
  /* An integer as a double rounded to odd: exact up to 2^53, and past it
   * its low bits kept as a sticky last bit, so that one more rounding to
   * 24 bits or fewer (float32, the 16- and 8-bit floats) rounds as a
   * single rounding of the integer would (float64 takes the integer
   * itself). Rounded to nearest twice, 2^60 + 2^36 + 1 became the float32
   * 2^60, not 2^60 + 2^37. */
  if (v.is_int) {
    uint64_t m = v.is_signed && v.i < 0 ? 0 - (uint64_t)v.i : v.is_signed ? (uint64_t)v.i : v.u;
    int shift = 0;
    while ((m >> shift) >= (1ull << 53)) shift++;
    uint64_t kept = m >> shift;
    if (shift > 0 && (m & ((1ull << shift) - 1)) != 0) kept |= 1;
    v.re = ldexp((double)kept, shift);
    if (v.is_signed && v.i < 0) v.re = -v.re;
  }
  return v;
}

/* An integer's value as a double, rounded once (to nearest even). */
static double int_double(const value *v) { return v->is_signed ? (double)v->i : (double)v->u; }

/* The integer value, wrapped to 64 bits as a C conversion would. */
static uint64_t as_bits(const value *v) {
  if (v->is_int) return v->is_signed ? (uint64_t)v->i : v->u;
  double d = v->re;
  if (d != d) return 0;
  if (d >= 18446744073709551616.0 || d <= -9223372036854775808.0) return 0;
  return d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
}

jitk_status jk_convert_scalar(const jitk_engine *e, const jitk_arg *a, jitk_dtype to, void *out,
                              const char *what) {
  const jitk_dtype_info *from = jk_dtype(a->dtype);
  const jitk_dtype_info *dst = jk_dtype(to);
  if (from == NULL || dst == NULL)
    return jk_fail(e, JITK_ERR_ARGUMENT_TYPE, "%s: a scalar needs a dtype", what);
  if (from->kind == 'c' && dst->kind != 'c')
    return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                   "%s: a %s scalar cannot become %s without losing its imaginary part", what,
                   from->name, dst->name);
  value v = read_arg(a);
  uint64_t bits = as_bits(&v);
  switch (to) {
    case JITK_BOOL: {
      uint8_t b = v.is_int ? bits != 0 : (v.re != 0 || v.im != 0);
      memcpy(out, &b, 1);
      break;
    }
    case JITK_INT8:
    case JITK_UINT8: {
      uint8_t x = (uint8_t)bits;
      memcpy(out, &x, 1);
      break;
    }
    case JITK_INT16:
    case JITK_UINT16: {
      uint16_t x = (uint16_t)bits;
      memcpy(out, &x, 2);
      break;
    }
    case JITK_INT32:
    case JITK_UINT32: {
      uint32_t x = (uint32_t)bits;
      memcpy(out, &x, 4);
      break;
    }
    case JITK_INT64:
    case JITK_UINT64: memcpy(out, &bits, 8); break;
    case JITK_FLOAT16: {
      uint16_t h = jk_double_to_half(v.re);
      memcpy(out, &h, 2);
      break;
    }
    case JITK_BFLOAT16: {
      uint16_t h = jk_double_to_bfloat16(v.re);
      memcpy(out, &h, 2);
      break;
    }
    /* Rounded once from the double, as __nv_fp8_e4m3(double) does, and
     * saturating as CUDA's conversions do (jitk_float_to_float8_e4m3). */
    case JITK_FLOAT8_E4M3:
    case JITK_FLOAT8_E5M2: {
      uint8_t q = jk_double_to_float8(v.re, to);
      memcpy(out, &q, 1);
      break;
    }
    case JITK_FLOAT32: {
      float f = (float)v.re;
      memcpy(out, &f, 4);
      break;
    }
    case JITK_FLOAT64: {
      double d = v.is_int ? int_double(&v) : v.re;
      memcpy(out, &d, 8);
      break;
    }
    case JITK_COMPLEX64: {
      float c[2] = {(float)v.re, (float)v.im};
      memcpy(out, c, 8);
      break;
    }
    case JITK_COMPLEX128: {
      double c[2] = {v.is_int ? int_double(&v) : v.re, v.im};
      memcpy(out, c, 16);
      break;
    }
    default: return jk_fail(e, JITK_ERR_INTERNAL, "%s: no conversion to dtype %d", what, (int)to);
  }
  return JITK_OK;
}
