/*
 * libFuzzer target for the kernel signature parser (jk_signature_parse)
 * and jitk_kernel_set_signature, which checks a parsed signature against
 * the kernel's parameter sizes.
 *
 * A kernel handle needs a device, so the target makes a stand-in kernel on
 * a compile-only engine with the parameter sizes the input asks for.
 * Input: one byte giving the number of compiled parameters (255: unknown,
 * as when the driver cannot tell; otherwise the byte modulo 9), one byte
 * per parameter picking its size from those real parameters have, then
 * the signature text (up to its first NUL).
 *
 * Promises checked: no crash, leak or out-of-bounds read; a parse error is
 * JITK_ERR_PARSE with an offset inside the text and a caret line; a count
 * or size mismatch is JITK_ERR_ARGUMENT_COUNT or _TYPE with a message; a
 * failure leaves the kernel's signature as it was; an accepted signature
 * has valid kinds, dtypes and ranks, matches the kernel's parameters, and
 * reads back the same when written out as jk_param_describe writes it.
 */
#include <jitk/jitk.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "fuzz_common.h"
#include "kernels/kernels.h"

static jitk_engine *engine;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  engine = jf_engine("fuzz_signature");
  return 0;
}

/* Sizes of real parameters: scalars of each width, pointers, descriptors
 * of rank 0, 1, 2 and 16, and one no signature can match. */
static const uint32_t param_sizes[] = {1, 2, 4, 8, 16, 8, 24, 40, 264, 3};

static void check_params(const jk_param *p, int n, const char *text) {
  for (int i = 0; i < n; i++) {
    JF_CHECK(p[i].kind == JITK_ARG_SCALAR || p[i].kind == JITK_ARG_POINTER ||
                 p[i].kind == JITK_ARG_ARRAY,
             "parameter %d of \"%s\" has kind %d", i, text, (int)p[i].kind);
    JF_CHECK(p[i].dtype == JITK_DTYPE_NONE ? p[i].kind == JITK_ARG_POINTER
                                           : jk_dtype(p[i].dtype) != NULL,
             "parameter %d of \"%s\" has dtype %d", i, text, (int)p[i].dtype);
    JF_CHECK(p[i].kind != JITK_ARG_ARRAY || (p[i].ndim >= 0 && p[i].ndim <= JITK_MAX_NDIM),
             "parameter %d of \"%s\" has rank %d", i, text, p[i].ndim);
  }
}

/* Writing the parameters out and parsing that gives them back. */
static void check_round_trip(const jk_param *p, int n) {
  char *text = malloc((size_t)n * 40 + 1);
  if (text == NULL) return;
  size_t len = 0;
  text[0] = '\0';
  for (int i = 0; i < n; i++) {
    char d[32];
    jk_param_describe(&p[i], d, sizeof d);
    len += (size_t)sprintf(text + len, "%s%s", i ? ", " : "", d);
  }
  jk_param *q = NULL;
  int m = -1;
  jitk_status st = jk_signature_parse(engine, text, &q, &m);
  JF_CHECK(st == JITK_OK, "\"%s\", written from a parsed signature, does not parse: %s", text,
           jitk_errmsg(engine));
  JF_CHECK(m == n, "\"%s\" reads back as %d parameters, not %d", text, m, n);
  for (int i = 0; i < n; i++)
    JF_CHECK(q[i].kind == p[i].kind && q[i].dtype == p[i].dtype &&
                 (p[i].kind != JITK_ARG_ARRAY || q[i].ndim == p[i].ndim),
             "parameter %d of \"%s\" reads back differently", i, text);
  jk_free(engine, q);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int nparams = data[0] == 255 ? -1 : data[0] % 9;
  size_t at = 1;
  uint32_t psizes[8] = {0};
  for (int i = 0; i < nparams; i++)
    psizes[i] =
        param_sizes[at < size ? data[at++] % (sizeof param_sizes / sizeof *param_sizes) : 0];
  size_t tlen = size - (at < size ? at : size);
  char *text = malloc(tlen + 1);
  if (text == NULL) return 0;
  memcpy(text, data + (size - tlen), tlen);
  text[tlen] = '\0';
  tlen = strlen(text);

  /* The parser alone. */
  jk_param *p = NULL;
  int n = -1;
  jitk_status st = jk_signature_parse(engine, text, &p, &n);
  if (st == JITK_OK) {
    JF_CHECK(p != NULL && n >= 0, "an accepted signature gave no parameters");
    check_params(p, n, text);
    check_round_trip(p, n);
    jk_free(engine, p);
  } else {
    jf_check_failure(engine, st, "jk_signature_parse");
    JF_CHECK(st == JITK_ERR_PARSE || st == JITK_ERR_OUT_OF_MEMORY,
             "jk_signature_parse failed with %s", jitk_errname(st));
    int off = jitk_error_offset(engine);
    JF_CHECK(st != JITK_ERR_PARSE || (off >= 0 && (size_t)off <= tlen),
             "parse error at offset %d of a %zu-byte signature", off, tlen);
    JF_CHECK(st != JITK_ERR_PARSE || strstr(jitk_errmsg(engine), "signature:") != NULL,
             "a parse error does not name the signature: %s", jitk_errmsg(engine));
    JF_CHECK(st != JITK_ERR_PARSE || strchr(jitk_errmsg(engine), '^') != NULL,
             "a parse error has no caret: %s", jitk_errmsg(engine));
  }

  /* Through a stand-in kernel with a signature already set, which a
   * failure must leave in place. */
  jitk_kernel k;
  memset(&k, 0, sizeof k);
  k.engine = engine;
  k.f.name = "fuzzed";
  k.f.num_params = nparams;
  k.f.param_sizes = psizes;
  jk_param *before = jk_calloc(engine, 1, sizeof *before);
  if (before == NULL) abort();
  k.f.signature = before;
  k.f.num_signature = 1;
  jitk_status st2 = jitk_kernel_set_signature(&k, text);
  if (st2 == JITK_OK) {
    JF_CHECK(st == JITK_OK, "jitk_kernel_set_signature accepted what the parser refused");
    JF_CHECK(nparams < 0 || k.f.num_signature == nparams,
             "a signature of %d parameters was set on a kernel of %d", k.f.num_signature, nparams);
    for (int i = 0; nparams >= 0 && i < nparams; i++) {
      const jk_param *q = &k.f.signature[i];
      uint32_t want = q->kind == JITK_ARG_SCALAR    ? (uint32_t)jk_dtype(q->dtype)->size
                      : q->kind == JITK_ARG_POINTER ? 8u
                                                    : 8u + 16u * (uint32_t)q->ndim;
      JF_CHECK(want == psizes[i], "parameter %d of %u bytes accepted for %u", i, want, psizes[i]);
    }
  } else {
    jf_check_failure(engine, st2, "jitk_kernel_set_signature");
    JF_CHECK(st2 == st || (st == JITK_OK &&
                           (st2 == JITK_ERR_ARGUMENT_COUNT || st2 == JITK_ERR_ARGUMENT_TYPE)),
             "jitk_kernel_set_signature failed with %s after the parser's %s", jitk_errname(st2),
             jitk_errname(st));
    JF_CHECK(k.f.signature == before && k.f.num_signature == 1,
             "a refused signature replaced the kernel's");
  }
  jk_free(engine, k.f.signature);
  free(text);
  return 0;
}
