/* The dtype table, NumPy's promotion, the half/bfloat16 and 8-bit float
 * conversions, and scalar conversion to a parameter's dtype. */
#include <math.h>
#include <stdio.h>

#include "array/array.h"
#include "common.h"

static const char *names[] = {"bool",          "int8",       "int16",   "int32",     "int64",
                              "uint8",         "uint16",     "uint32",  "uint64",    "float16",
                              "bfloat16",      "float32",    "float64", "complex64", "complex128",
                              "float8_e4m3fn", "float8_e5m2"};

Test(dtype, table_rows) {
  static const struct {
    jitk_dtype d;
    size_t size;
    char kind;
    const char *ctype;
    uint8_t code, bits;
  } rows[] = {
      {JITK_BOOL, 1, 'b', "bool", 6, 8},
      {JITK_INT8, 1, 'i', "signed char", kDLInt, 8},
      {JITK_INT64, 8, 'i', "long long", kDLInt, 64},
      {JITK_UINT16, 2, 'u', "unsigned short", kDLUInt, 16},
      {JITK_FLOAT16, 2, 'f', "__half", kDLFloat, 16},
      {JITK_BFLOAT16, 2, 'f', "__nv_bfloat16", kDLBfloat, 16},
      {JITK_FLOAT64, 8, 'f', "double", kDLFloat, 64},
      {JITK_COMPLEX64, 8, 'c', "jitk::complex<float>", kDLComplex, 64},
      {JITK_COMPLEX128, 16, 'c', "jitk::complex<double>", kDLComplex, 128},
      /* DLPack 1.1's kDLFloat8_e4m3fn and kDLFloat8_e5m2. */
      {JITK_FLOAT8_E4M3, 1, 'f', "jitk::float8_e4m3", 10, 8},
      {JITK_FLOAT8_E5M2, 1, 'f', "jitk::float8_e5m2", 12, 8},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info(rows[i].d, &info));
    cr_assert_eq(info.dtype, rows[i].d);
    cr_assert_eq(info.size, rows[i].size);
    cr_assert_eq(info.align, rows[i].size);
    cr_assert_eq(info.kind, rows[i].kind);
    cr_assert_str_eq(info.ctype, rows[i].ctype);
    cr_assert_eq(info.dl.code, rows[i].code);
    cr_assert_eq(info.dl.bits, rows[i].bits);
    cr_assert_eq(info.dl.lanes, 1);
  }
  jitk_dtype_info info;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "not a dtype",
           jitk_dtype_get_info(JITK_DTYPE_NONE, &info));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "not a dtype",
           jitk_dtype_get_info((jitk_dtype)JITK_DTYPE_COUNT, &info));
}

Test(dtype, names_and_dlpack_round_trip) {
  cr_assert_eq(sizeof names / sizeof names[0], JITK_DTYPE_COUNT - 1);
  for (int i = 0; i < JITK_DTYPE_COUNT - 1; i++) {
    jitk_dtype d;
    JT_OK(NULL, jitk_dtype_from_name(names[i], &d));
    cr_assert_eq((int)d, i + 1, "%s", names[i]);
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info(d, &info));
    cr_assert_str_eq(info.name, names[i]);
    jitk_dtype back;
    JT_OK(NULL, jitk_dtype_from_dlpack(info.dl, &back));
    cr_assert_eq(back, d);
  }
  jitk_dtype d;
  JT_FAILS(NULL, JITK_ERR_NOT_FOUND, "\"float\" is not a dtype", jitk_dtype_from_name("float", &d));
  DLDataType vec = {kDLFloat, 32, 4};
  JT_FAILS(NULL, JITK_ERR_UNSUPPORTED, "4 lanes", jitk_dtype_from_dlpack(vec, &d));
  DLDataType f8 = {kDLFloat, 8, 1};
  JT_FAILS(NULL, JITK_ERR_UNSUPPORTED, "8 bits", jitk_dtype_from_dlpack(f8, &d));
  /* The other 8-bit floats of DLPack 1.1 (e4m3, e4m3fnuz, e5m2fnuz, ...)
   * and a 16-bit code 10 are none of jitk's. */
  for (uint8_t code = 7; code <= 13; code++) {
    DLDataType t = {code, 8, 1};
    jitk_status st = jitk_dtype_from_dlpack(t, &d);
    if (code == 10 || code == 12) {
      JT_OK(NULL, st);
      cr_assert_eq(d, code == 10 ? JITK_FLOAT8_E4M3 : JITK_FLOAT8_E5M2);
    } else {
      cr_assert_eq(st, JITK_ERR_UNSUPPORTED, "code %u", code);
    }
  }
  DLDataType wide = {10, 16, 1};
  JT_FAILS(NULL, JITK_ERR_UNSUPPORTED, "code 10, 16 bits", jitk_dtype_from_dlpack(wide, &d));
  JT_OK(NULL, jitk_dtype_from_name("float8_e4m3", &d));
  cr_assert_eq(d, JITK_FLOAT8_E4M3, "the alias of float8_e4m3fn");
  JT_FAILS(NULL, JITK_ERR_NOT_FOUND, "float8_e4m3fn and float8_e5m2",
           jitk_dtype_from_name("float8_e5m2fnuz", &d));
  JT_FAILS(NULL, JITK_ERR_NOT_FOUND, "not a dtype", jitk_dtype_from_name("float8", &d));
}

static jitk_dtype by_name(const char *n) {
  jitk_dtype d = JITK_DTYPE_NONE;
  jitk_dtype_from_name(n, &d);
  return d;
}

Test(dtype, promotion_matches_numpy) {
  char path[1024];
  snprintf(path, sizeof path, "%s/unit/array/promotion_reference.txt", JITK_TEST_DATA_DIR);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot open %s", path);
  char line[256];
  int cells = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char a[32], b[32], r[32];
    cr_assert_eq(sscanf(line, "%31s %31s %31s", a, b, r), 3, "bad line %s", line);
    jitk_dtype got;
    JT_OK(NULL, jitk_dtype_promote(by_name(a), by_name(b), &got));
    cr_assert_eq(got, by_name(r), "promote(%s, %s) gave %d, NumPy says %s", a, b, (int)got, r);
    cells++;
  }
  fclose(f);
  cr_assert_eq(cells, 15 * 15);
}

Test(dtype, promotion_properties) {
  for (int a = 1; a <= 15; a++) {
    jitk_dtype r;
    JT_OK(NULL, jitk_dtype_promote((jitk_dtype)a, (jitk_dtype)a, &r));
    cr_assert_eq((int)r, a, "a type promotes to itself");
    JT_OK(NULL, jitk_dtype_promote(JITK_BOOL, (jitk_dtype)a, &r));
    cr_assert_eq((int)r, a, "bool is the identity");
    for (int b = 1; b <= 15; b++) {
      jitk_dtype ab, ba;
      JT_OK(NULL, jitk_dtype_promote((jitk_dtype)a, (jitk_dtype)b, &ab));
      JT_OK(NULL, jitk_dtype_promote((jitk_dtype)b, (jitk_dtype)a, &ba));
      cr_assert_eq(ab, ba, "symmetric");
    }
  }
  jitk_dtype r;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "not a dtype",
           jitk_dtype_promote(JITK_DTYPE_NONE, JITK_INT8, &r));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "not a dtype",
           jitk_dtype_promote(JITK_FLOAT8_E4M3, (jitk_dtype)JITK_DTYPE_COUNT, &r));
}

Test(dtype, float8_promotes_only_with_itself) {
  const jitk_dtype f8[] = {JITK_FLOAT8_E4M3, JITK_FLOAT8_E5M2};
  for (int i = 0; i < 2; i++) {
    jitk_dtype r = JITK_DTYPE_NONE;
    JT_OK(NULL, jitk_dtype_promote(f8[i], f8[i], &r));
    cr_assert_eq(r, f8[i]);
    for (int b = 1; b < JITK_DTYPE_COUNT; b++) {
      if (b == (int)f8[i]) continue;
      r = JITK_DTYPE_NONE;
      cr_assert_eq(jitk_dtype_promote(f8[i], (jitk_dtype)b, &r), JITK_ERR_ARGUMENT_TYPE);
      cr_assert_eq(jitk_dtype_promote((jitk_dtype)b, f8[i], &r), JITK_ERR_ARGUMENT_TYPE);
      cr_assert_eq(r, JITK_DTYPE_NONE, "no result written");
    }
  }
  jitk_dtype r;
  JT_FAILS(NULL, JITK_ERR_ARGUMENT_TYPE,
           "float8_e4m3fn and float32 have no common dtype: an 8-bit float promotes only with "
           "itself; convert one of them, or bind the type explicitly (\"T=float32\")",
           jitk_dtype_promote(JITK_FLOAT8_E4M3, JITK_FLOAT32, &r));
  JT_FAILS(NULL, JITK_ERR_ARGUMENT_TYPE, "float8_e5m2 and float8_e4m3fn have no common dtype",
           jitk_dtype_promote(JITK_FLOAT8_E5M2, JITK_FLOAT8_E4M3, &r));
}

Test(dtype, half_round_trips_every_value) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = jitk_half_to_float((uint16_t)h);
    uint16_t back = jitk_float_to_half(f);
    if (isnan(f)) {
      cr_assert(isnan(jitk_half_to_float(back)), "NaN %04x stays NaN", h);
      continue;
    }
    cr_assert_eq(back, h, "half %04x -> %g -> %04x", h, f, back);
  }
}

Test(dtype, half_rounding) {
  cr_assert_eq(jitk_float_to_half(1.0f), 0x3c00);
  cr_assert_eq(jitk_float_to_half(-2.0f), 0xc000);
  cr_assert_eq(jitk_float_to_half(65504.0f), 0x7bff);
  cr_assert_eq(jitk_float_to_half(65520.0f), 0x7c00, "rounds to infinity");
  cr_assert_eq(jitk_float_to_half(1e-8f), 0x0000, "underflow to zero");
  cr_assert_eq(jitk_float_to_half(5.9604645e-8f), 0x0001, "smallest subnormal");
  /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to even (1). */
  cr_assert_eq(jitk_float_to_half(1.0f + 1.0f / 2048.0f), 0x3c00);
  /* 1 + 3 * 2^-11 is halfway between odd and even: up to even. */
  cr_assert_eq(jitk_float_to_half(1.0f + 3.0f / 2048.0f), 0x3c02);
  cr_assert_eq(jitk_float_to_half(INFINITY), 0x7c00);
  cr_assert(isnan(jitk_half_to_float(jitk_float_to_half(NAN))));
}

Test(dtype, bfloat16) {
  cr_assert_eq(jitk_float_to_bfloat16(1.0f), 0x3f80);
  cr_assert_eq(jitk_bfloat16_to_float(0x3f80), 1.0f);
  cr_assert_eq(jitk_float_to_bfloat16(-3.0f), 0xc040);
  /* 1 + 2^-8 is halfway: ties to even gives 1.0. */
  cr_assert_eq(jitk_float_to_bfloat16(1.0f + 1.0f / 256.0f), 0x3f80);
  cr_assert_eq(jitk_float_to_bfloat16(1.0f + 3.0f / 256.0f), 0x3f82);
  cr_assert(isnan(jitk_bfloat16_to_float(jitk_float_to_bfloat16(NAN))));
  for (uint32_t h = 0; h < 65536; h++) {
    float f = jitk_bfloat16_to_float((uint16_t)h);
    if (!isnan(f)) cr_assert_eq(jitk_float_to_bfloat16(f), h);
  }
}

/* Every code decodes to its value and encodes back to itself; NaN stays
 * NaN. e5m2's infinities are the exception: they decode to infinity and
 * encode to the largest finite value, as CUDA's saturating conversion
 * does. */
Test(dtype, float8_round_trips_every_code) {
  int nans4 = 0, nans5 = 0;
  for (uint32_t c = 0; c < 256; c++) {
    float f = jitk_float8_e4m3_to_float((uint8_t)c);
    uint8_t back = jitk_float_to_float8_e4m3(f);
    if (isnan(f)) {
      nans4++;
      cr_assert((c & 0x7f) == 0x7f, "e4m3 %02x is not NaN", c);
      cr_assert(isnan(jitk_float8_e4m3_to_float(back)), "NaN %02x stays NaN", c);
    } else {
      cr_assert(!isinf(f), "e4m3 has no infinity");
      cr_assert_eq(back, c, "e4m3 %02x -> %g -> %02x", c, f, back);
    }
    f = jitk_float8_e5m2_to_float((uint8_t)c);
    back = jitk_float_to_float8_e5m2(f);
    if (isnan(f)) {
      nans5++;
      cr_assert(isnan(jitk_float8_e5m2_to_float(back)), "NaN %02x stays NaN", c);
    } else if (isinf(f)) {
      cr_assert((c & 0x7f) == 0x7c, "e5m2 infinity is %02x", c);
      cr_assert_eq(back, (c & 0x80) | 0x7b, "infinity saturates");
    } else {
      cr_assert_eq(back, c, "e5m2 %02x -> %g -> %02x", c, f, back);
    }
  }
  cr_assert_eq(nans4, 2);
  cr_assert_eq(nans5, 6);
  /* The values themselves, at the edges of each format. */
  cr_assert_eq(jitk_float8_e4m3_to_float(0x7e), 448.0f);
  cr_assert_eq(jitk_float8_e4m3_to_float(0x38), 1.0f);
  cr_assert_eq(jitk_float8_e4m3_to_float(0x08), 1.0f / 64.0f, "smallest normal 2^-6");
  cr_assert_eq(jitk_float8_e4m3_to_float(0x01), 1.0f / 512.0f, "smallest subnormal 2^-9");
  cr_assert_eq(jitk_float8_e4m3_to_float(0x80), -0.0f);
  cr_assert(signbit(jitk_float8_e4m3_to_float(0x80)));
  cr_assert_eq(jitk_float8_e5m2_to_float(0x7b), 57344.0f);
  cr_assert_eq(jitk_float8_e5m2_to_float(0x3c), 1.0f);
  cr_assert_eq(jitk_float8_e5m2_to_float(0x01), 1.0f / 65536.0f, "smallest subnormal 2^-16");
  cr_assert(isinf(jitk_float8_e5m2_to_float(0xfc)) && jitk_float8_e5m2_to_float(0xfc) < 0);
}

/* Ties to even, in the normal and the subnormal range, and saturation. */
Test(dtype, float8_rounding) {
  /* e4m3: 1 + 2^-4 lies halfway between 1 (0x38, even) and 1.125 (0x39). */
  cr_assert_eq(jitk_float_to_float8_e4m3(1.0625f), 0x38);
  cr_assert_eq(jitk_float_to_float8_e4m3(1.0625f + 1e-6f), 0x39, "above the tie");
  cr_assert_eq(jitk_float_to_float8_e4m3(1.1875f), 0x3a, "1.125 is odd: the tie goes up");
  cr_assert_eq(jitk_float_to_float8_e4m3(-1.0625f), 0xb8);
  /* Subnormals: 2^-10 is half the smallest, and ties to zero; 3 * 2^-10
   * lies between 1 and 2 units and goes to 2. */
  cr_assert_eq(jitk_float_to_float8_e4m3(1.0f / 1024.0f), 0x00);
  cr_assert_eq(jitk_float_to_float8_e4m3(1.0f / 1024.0f + 1e-9f), 0x01);
  cr_assert_eq(jitk_float_to_float8_e4m3(3.0f / 1024.0f), 0x02);
  cr_assert_eq(jitk_float_to_float8_e4m3(1e-30f), 0x00);
  cr_assert_eq(jitk_float_to_float8_e4m3(-1e-30f), 0x80, "the sign of zero stays");
  /* The largest subnormal, 7 * 2^-9, rounds up into the smallest normal. */
  cr_assert_eq(jitk_float_to_float8_e4m3(7.5f / 512.0f), 0x08);
  /* Saturation: 464 is the tie between 448 and 480 (which would be NaN's
   * code): even, 448; past it, still 448; infinity too. */
  cr_assert_eq(jitk_float_to_float8_e4m3(464.0f), 0x7e);
  cr_assert_eq(jitk_float_to_float8_e4m3(465.0f), 0x7e);
  cr_assert_eq(jitk_float_to_float8_e4m3(1e30f), 0x7e);
  cr_assert_eq(jitk_float_to_float8_e4m3(INFINITY), 0x7e);
  cr_assert_eq(jitk_float_to_float8_e4m3(-INFINITY), 0xfe);
  cr_assert_eq(jitk_float_to_float8_e4m3(NAN), 0x7f);
  cr_assert_eq(jitk_float_to_float8_e4m3(-NAN), 0x7f);
  /* e5m2: 1 + 2^-3 is halfway between 1 (0x3c) and 1.25 (0x3d). */
  cr_assert_eq(jitk_float_to_float8_e5m2(1.125f), 0x3c);
  cr_assert_eq(jitk_float_to_float8_e5m2(1.375f), 0x3e, "1.25 is odd: the tie goes up");
  cr_assert_eq(jitk_float_to_float8_e5m2(1.0f / 131072.0f), 0x00, "half the smallest: to zero");
  cr_assert_eq(jitk_float_to_float8_e5m2(3.0f / 131072.0f), 0x02);
  /* 61440 is the tie between 57344 and 65536 (infinity's code):
   * saturates, as does everything past it, infinity included. */
  cr_assert_eq(jitk_float_to_float8_e5m2(61439.0f), 0x7b);
  cr_assert_eq(jitk_float_to_float8_e5m2(61440.0f), 0x7b);
  cr_assert_eq(jitk_float_to_float8_e5m2(1e10f), 0x7b);
  cr_assert_eq(jitk_float_to_float8_e5m2(INFINITY), 0x7b);
  cr_assert_eq(jitk_float_to_float8_e5m2(-INFINITY), 0xfb);
  cr_assert_eq(jitk_float_to_float8_e5m2(NAN), 0x7f, "CUDA's canonical NaN");
  cr_assert_eq(jitk_float_to_float8_e5m2(-NAN), 0x7f);
  /* Every float between two neighbouring codes rounds to the nearer. */
  for (uint32_t c = 0; c < 0x7e; c++) {
    float lo = jitk_float8_e4m3_to_float((uint8_t)c);
    float hi = jitk_float8_e4m3_to_float((uint8_t)(c + 1));
    float q1 = lo + (hi - lo) * 0.25f, q3 = lo + (hi - lo) * 0.75f, mid = (lo + hi) / 2;
    cr_assert_eq(jitk_float_to_float8_e4m3(q1), c);
    cr_assert_eq(jitk_float_to_float8_e4m3(q3), c + 1);
    cr_assert_eq(jitk_float_to_float8_e4m3(mid), (c & 1) ? c + 1 : c, "tie at %g", mid);
  }
}

/* Scalars reach an 8-bit float parameter rounded once from their value,
 * and an 8-bit float scalar reaches any parameter with its value. */
Test(dtype, float8_scalar_conversion) {
  uint8_t q = 0;
  jitk_arg a = jitk_arg_f32(1.0625f);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT8_E4M3, &q, "argument 1"));
  cr_assert_eq(q, 0x38);
  a = jitk_arg_f64(1e300);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT8_E4M3, &q, "argument 1"));
  cr_assert_eq(q, 0x7e, "beyond float's range: saturates, not NaN");
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT8_E5M2, &q, "argument 1"));
  cr_assert_eq(q, 0x7b);
  /* A double just above e4m3's tie at 1.0625 that float would round down
   * to the tie itself: rounded once, it goes up. */
  a = jitk_arg_f64(1.0625 + 1e-12);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT8_E4M3, &q, "argument 1"));
  cr_assert_eq(q, 0x39);
  a = jitk_arg_i32(-3);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT8_E5M2, &q, "argument 1"));
  cr_assert_eq(jitk_float8_e5m2_to_float(q), -3.0f);
  a = jitk_arg_i64(100000);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT8_E4M3, &q, "argument 1"));
  cr_assert_eq(q, 0x7e);
  a = jitk_arg_f8e4m3_bits(0xb8); /* -1 */
  float f = 0;
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT32, &f, "argument 1"));
  cr_assert_eq(f, -1.0f);
  int32_t i = 0;
  a = jitk_arg_f8e5m2_bits(0x4a); /* 12 */
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_INT32, &i, "argument 1"));
  cr_assert_eq(i, 12);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT8_E4M3, &q, "argument 1"));
  cr_assert_eq(jitk_float8_e4m3_to_float(q), 12.0f, "one 8-bit float to the other");
  a = jitk_arg_c64(1, 2);
  JT_FAILS(NULL, JITK_ERR_ARGUMENT_TYPE, "imaginary part",
           jk_convert_scalar(NULL, &a, JITK_FLOAT8_E4M3, &q, "argument 1"));
}

/* Scalars reach 16- and 32-bit float parameters rounded once from their
 * value, as NumPy converts them: through float first (a double) or a
 * double first (an int64), a second rounding could land one unit off. */
Test(dtype, scalars_rounded_once) {
  uint16_t h = 0;
  /* Just above float16's tie between 1 and 1 + 2^-10, by less than a
   * float's half unit: through float it fell on the tie and went down. */
  jitk_arg a = jitk_arg_f64(1.0004882812509095);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT16, &h, "argument 1"));
  cr_assert_eq(h, 0x3c01, "got %#x", h);
  /* The same for bfloat16, between 1 and 1 + 2^-7. */
  a = jitk_arg_f64(1.00390625 + 0x1p-40);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_BFLOAT16, &h, "argument 1"));
  cr_assert_eq(h, 0x3f81, "got %#x", h);
  /* Ties, overflow, infinities and NaN. */
  static const struct {
    double x;
    uint16_t half, bf16;
  } cases[] = {{1.0 + 0x1p-11, 0x3c00, 0x3f80}, {1.0 + 3 * 0x1p-11, 0x3c02, 0x3f80},
               {65504.0, 0x7bff, 0x4780},       {65519.99, 0x7bff, 0x4780},
               {65520.0, 0x7c00, 0x4780},       {-1e300, 0xfc00, 0xff80},
               {0x1p-25, 0x0000, 0x3300},       {0x1p-25 + 0x1p-40, 0x0001, 0x3300},
               {-0.0, 0x8000, 0x8000},          {INFINITY, 0x7c00, 0x7f80}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    a = jitk_arg_f64(cases[i].x);
    JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT16, &h, "argument 1"));
    cr_assert_eq(h, cases[i].half, "%a to float16: %#x", cases[i].x, h);
    JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_BFLOAT16, &h, "argument 1"));
    cr_assert_eq(h, cases[i].bf16, "%a to bfloat16: %#x", cases[i].x, h);
  }
  a = jitk_arg_f64(NAN);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT16, &h, "argument 1"));
  cr_assert((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0, "NaN stays NaN: %#x", h);
  /* An int64 past 2^53 to float32: 2^60 + 2^36 + 1 is past the tie
   * between 2^60 and 2^60 + 2^37, which a double first would make it. */
  float f = 0;
  a = jitk_arg_i64((1ll << 60) + (1ll << 36) + 1);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT32, &f, "argument 1"));
  cr_assert_eq(f, 0x1p60f + 0x1p37f, "got %a", (double)f);
  a = jitk_arg_i64(-((1ll << 60) + (1ll << 36) + 1));
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT32, &f, "argument 1"));
  cr_assert_eq(f, -(0x1p60f + 0x1p37f), "got %a", (double)f);
  a = jitk_arg_u64(UINT64_MAX);
  double d = 0;
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT64, &d, "argument 1"));
  cr_assert_eq(d, 0x1p64);
  /* float64 from an int64 rounds the integer itself once. */
  a = jitk_arg_i64((1ll << 60) + 1);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT64, &d, "argument 1"));
  cr_assert_eq(d, 0x1p60);
  a = jitk_arg_i64(INT64_MIN);
  JT_OK(NULL, jk_convert_scalar(NULL, &a, JITK_FLOAT32, &f, "argument 1"));
  cr_assert_eq(f, -0x1p63f);
}
