/*
 * Raw kernels' signatures: "float32 a, float32* x, float32[2] y, int64 n",
 * parsed by a small hand-written scanner, so each error can point at its
 * byte (signature.c).
 */
#ifndef JITK_SRC_EXPR_SIGNATURE_H
#define JITK_SRC_EXPR_SIGNATURE_H

#include <stddef.h>

#include "base/base.h"

/* One parameter of a signature. */
typedef struct jk_param {
  jitk_arg_kind kind;
  jitk_dtype dtype; /* JITK_DTYPE_NONE for void* */
  int ndim;         /* for JITK_ARG_ARRAY */
} jk_param;

/*
 * Parses a signature ("float32 a, float32* x, float32[2] y") into an
 * allocated array. JITK_ERR_PARSE with the offset on bad text.
 */
jitk_status jk_signature_parse(jitk_engine *e, const char *text, jk_param **out, int *count);

/* Describes a parameter as the signature syntax writes it ("float32[2]"). */
void jk_param_describe(const jk_param *p, char *out, size_t size);

#endif
