/*
 * What every code generator shares: the user's code under #line
 * directives of its own section names, so that NVRTC's messages cite
 * `map_expr:1:5` rather than a generated line, and the prologue of
 * includes and typedefs (index types, placeholders) that elementwise,
 * reduction and matmul sources start with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array/array.h"
#include "codegen/codegen.h"

static size_t lines_so_far(const jk_buf *b) {
  size_t n = 1;
  for (size_t i = 0; i < b->len; i++) n += b->data[i] == '\n';
  return n;
}

void jk_cg_line_back(jk_buf *b, const char *file) {
  jk_buf_printf(b, "#line %zu \"%s\"\n", lines_so_far(b) + 1, file);
}

void jk_cg_user_code(jk_buf *b, const char *label, const char *code, const char *close,
                     const char *file) {
  jk_buf_printf(b, "#line 1 \"%s\"\n", label);
  size_t n = strlen(code);
  while (n > 0 && (code[n - 1] == ' ' || code[n - 1] == '\t' || code[n - 1] == '\n' ||
                   code[n - 1] == '\r' || code[n - 1] == '\f' || code[n - 1] == '\v'))
    n--;
  if (!jk_code_tail_open(code, n)) {
    /* Closed on the user's own last line: a message about the end of the
     * code (`a + ` lacking its operand) then cites that line and the
     * column after it, not a generated line below. */
    jk_buf_append(b, code, n);
    jk_buf_puts(b, close);
    jk_buf_puts(b, "\n");
  } else {
    /* The last line is a comment, a preprocessor line or a splice, which
     * would swallow the closing text: it goes on a line of its own, still
     * numbered as the user's. */
    size_t all = strlen(code);
    jk_buf_puts(b, code);
    jk_buf_puts(b, all > 0 && code[all - 1] == '\\' ? "\n\n" : "\n");
    jk_buf_puts(b, close);
    jk_buf_puts(b, "\n");
  }
  jk_cg_line_back(b, file);
}

void jk_cg_user_section(jk_buf *b, const char *label, const char *code, const char *file) {
  if (code == NULL || *code == '\0') return;
  /* An empty declaration or statement: harmless after any complete code,
   * and it gives NVRTC a token of the user's section to report an
   * unfinished statement at. */
  jk_cg_user_code(b, label, code, ";", file);
}

/* Whether the user's code names anything of bfloat16: the type
 * (__nv_bfloat16, nv_bfloat16, __nv_bfloat162), its conversions
 * (__float2bfloat16...) and constants (CUDART_INF_BF16...) all spell
 * "bfloat16" or "bf16", and its overloads of other names (hexp, __hadd,
 * __shfl_sync) take one of those. Comments and strings count too, which
 * only errs towards reading the header. */
static bool names_bfloat16(const char *const *code, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (code[i] == NULL) continue;
    for (const char *c = code[i]; *c != '\0'; c++)
      if ((c[0] | 0x20) == 'b' && (((c[1] | 0x20) == 'f' && c[2] == '1' && c[3] == '6') ||
                                   strncasecmp(c, "bfloat16", 8) == 0))
        return true;
  }
  return false;
}

/* The includes the types need (half, 8-bit floats, complex, raw arrays),
 * the index types, and the placeholders as typedefs. Each header comes
 * only with its types: cuda_fp8.h and cuda_fp16.h cost NVRTC time that a
 * float32 kernel should not pay. */
void jk_cg_prologue(jk_buf *b, const jk_param_list *params, int nparams, const unsigned char *dtype,
                    const unsigned char *kind, bool idx64, jitk_dtype extra,
                    const char *const *code, size_t ncode) {
  bool half = false, bf16 = false, fp8 = false, cplx = false, raw = false;
  for (int p = 0; p <= nparams; p++) {
    jitk_dtype d = p < nparams ? (jitk_dtype)dtype[p] : extra;
    half |= d == JITK_FLOAT16;
    bf16 |= d == JITK_BFLOAT16;
    fp8 |= d == JITK_FLOAT8_E4M3 || d == JITK_FLOAT8_E5M2;
    cplx |= d == JITK_COMPLEX64 || d == JITK_COMPLEX128;
    raw |= p < nparams && kind[p] == JK_EW_RAW;
  }
  /* cuda_bf16.h (which includes cuda_fp16.h) costs NVRTC about 25 ms
   * more than cuda_fp16.h alone: a float16 kernel reads it only when its
   * code speaks of bfloat16. */
  if (half && !bf16) bf16 = names_bfloat16(code, ncode);
  if (half || bf16)
    jk_buf_puts(
        b, bf16 ? "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <jitk/half_math.cuh>\n"
                : "#include <cuda_fp16.h>\n#include <jitk/half_math.cuh>\n");
  if (fp8) jk_buf_puts(b, "#include <cuda_fp8.h>\n#include <jitk/fp8.cuh>\n");
  if (cplx) jk_buf_puts(b, "#include <jitk/complex.cuh>\nusing jitk::complex;\n");
  if (raw) jk_buf_puts(b, "#include <jitk/array.cuh>\n");
  if (idx64)
    jk_buf_puts(b, "typedef unsigned long long _jk_u;\ntypedef long long _jk_s;\n");
  else
    jk_buf_puts(b, "typedef unsigned int _jk_u;\ntypedef int _jk_s;\n");
  /* Placeholders become typedefs, so user code can name them. */
  for (size_t h = 0; h < params->num_placeholders; h++) {
    for (int p = 0; p < nparams; p++)
      if (params->params[p].placeholder == (int)h) {
        jk_buf_printf(b, "typedef %s %s;\n", jk_dtype((jitk_dtype)dtype[p])->ctype,
                      params->placeholders[h]);
        break;
      }
  }
}
