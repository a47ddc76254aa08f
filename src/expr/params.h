/*
 * Parameter lists as CuPy writes them: "T x, raw T y, float32 a". Each entry
 * is an optional `raw`, a type (a dtype name or a placeholder such as T),
 * and a name.
 */
#ifndef JITK_SRC_EXPR_PARAMS_H
#define JITK_SRC_EXPR_PARAMS_H

#include <stdbool.h>
#include <stddef.h>

#include <jitk/jitk.h>

typedef struct jk_param_decl {
  char *name;
  bool raw;
  bool output;
  jitk_dtype dtype; /* JITK_DTYPE_NONE when the type is a placeholder */
  int placeholder;  /* index into jk_param_list.placeholders, or -1 */
  size_t offset;    /* of the name in its list, for messages */
} jk_param_decl;

typedef struct jk_param_list {
  jk_param_decl *params;
  size_t count;
  char **placeholders;
  size_t num_placeholders;
} jk_param_list;

/*
 * Parses `text` (labelled `label` in messages, such as "in_params") and
 * appends its parameters to `list`, marked as outputs when `outputs`.
 * Names must be C identifiers, not C++ keywords, not `i`, `_ind` or a name
 * starting with `_jk`, and unique across everything already in `list`.
 * JITK_ERR_PARSE with the byte offset and a caret line on bad input.
 */
jitk_status jk_params_parse(jitk_engine *e, const char *text, const char *label, bool outputs,
                            jk_param_list *list);
void jk_params_free(jitk_engine *e, jk_param_list *list);

/* Binds the list's placeholders from "T=float32, U=int8" into bound[h]
 * (one per placeholder): JITK_ERR_PARSE with a caret for a pair that is
 * not PLACEHOLDER=DTYPE, an unknown placeholder or dtype, or a placeholder
 * bound twice; JITK_ERR_ARGUMENT_TYPE when one is left unbound. */
jitk_status jk_params_bind_types(jitk_engine *e, const jk_param_list *params, const char *types,
                                 jitk_dtype *bound);

/* Whether `s` (n bytes) is a C++ keyword or a C type word (`float`,
 * `unsigned`), which cannot name a parameter or a placeholder. */
bool jk_is_reserved_word(const char *s, size_t n);

#endif
