/* The dtype table, NumPy's promotion and the half/bfloat16 conversions. */
#include <math.h>
#include <stdio.h>

#include "array/array.h"
#include "common.h"

static const char *names[] = {"bool",     "int8",    "int16",   "int32",     "int64",
                              "uint8",    "uint16",  "uint32",  "uint64",    "float16",
                              "bfloat16", "float32", "float64", "complex64", "complex128"};

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
           jitk_dtype_get_info((jitk_dtype)16, &info));
}

Test(dtype, names_and_dlpack_round_trip) {
  for (int i = 0; i < 15; i++) {
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
