/*
 * What elementwise and reduction kernels share; see gen.h.
 */
#include "kernels/gen.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "array/iter.h"
#include "expr/lex.h"
#include "kernels/kernels.h"

bool jk_gen_is_identifier(const char *s) {
  if (s == NULL) return false;
  jk_lex lx;
  jk_lex_init(&lx, s);
  return jk_lex_ident(&lx) > 0 && jk_lex_peek(&lx) == '\0';
}

char *jk_gen_dup(jitk_engine *e, const char *s, bool *oom) {
  if (s == NULL) return NULL;
  char *d = jk_strdup(e, s);
  if (d == NULL) *oom = true;
  return d;
}

void jk_gen_fini(jk_gen *g) {
  jitk_engine *e = g->engine;
  if (e == NULL) return;
  for (size_t i = 0; i < g->num_variants; i++) {
    jk_entry_release(e, g->variants[i].entry);
    jk_free(e, g->variants[i].source);
  }
  jk_free(e, g->variants);
  jk_free(e, g->labels);
  jk_free(e, g->failed_source);
  jk_params_free(e, &g->params);
  for (size_t i = 0; i < g->num_options; i++) jk_free(e, g->options[i]);
  jk_free(e, g->options);
  jk_free(e, g->name);
  jk_free(e, g->preamble);
  jk_link_set_free(e, g->link);
  jk_free(e, g->link);
  pthread_mutex_destroy(&g->lock);
  memset(g, 0, sizeof *g);
}

jitk_status jk_gen_init(jk_gen *g, jitk_engine *e, const char *what, const char *in_params,
                        const char *out_params, const char *name, const char *preamble,
                        const char *const *options, size_t num_options,
                        const char *no_raw_outputs) {
  memset(g, 0, sizeof *g);
  if (!jk_gen_is_identifier(name) || jk_is_reserved_word(name, strlen(name)))
    return jk_fail_caret(e, JITK_ERR_PARSE, "name", name, 0, strlen(name) ? strlen(name) : 1,
                         "the kernel's name must be a C identifier");
  g->engine = e;
  pthread_mutex_init(&g->lock, NULL);
  jitk_status st = jk_params_parse(e, in_params, "in_params", false, &g->params);
  if (st == JITK_OK) {
    g->num_in = (int)g->params.count;
    st = jk_params_parse(e, out_params, "out_params", true, &g->params);
  }
  if (st != JITK_OK) {
    jk_gen_fini(g);
    return st;
  }
  g->num_out = (int)g->params.count - g->num_in;
  if (g->params.count > JK_MAX_EW_PARAMS) {
    size_t count = g->params.count;
    jk_gen_fini(g);
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%zu parameters; at most %d", count,
                   JK_MAX_EW_PARAMS);
  }
  for (int p = g->num_in; no_raw_outputs != NULL && p < (int)g->params.count; p++)
    if (g->params.params[p].raw) {
      st = jk_fail_caret(e, JITK_ERR_PARSE, "out_params", out_params, g->params.params[p].offset,
                         strlen(g->params.params[p].name), "%s", no_raw_outputs);
      jk_gen_fini(g);
      return st;
    }
  bool oom = false;
  g->name = jk_gen_dup(e, name, &oom);
  g->preamble = jk_gen_dup(e, preamble, &oom);
  if (num_options > 0) {
    if (options == NULL) {
      jk_gen_fini(g);
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: nvrtc_options is NULL", what);
    }
    g->options = jk_calloc(e, num_options, sizeof(char *));
    if (g->options == NULL) oom = true;
    for (size_t i = 0; g->options && i < num_options; i++) {
      if (options[i] == NULL) {
        jk_gen_fini(g);
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: nvrtc option %zu is NULL", what, i);
      }
      g->options[i] = jk_gen_dup(e, options[i], &oom);
      g->num_options = i + 1;
    }
  }
  g->labels = jk_calloc(e, g->params.count ? g->params.count : 1, sizeof *g->labels);
  if (oom || g->labels == NULL) {
    jk_gen_fini(g);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t p = 0; p < g->params.count; p++)
    snprintf(g->labels[p], sizeof g->labels[p], "%s `%s`",
             g->params.params[p].output ? "output" : "argument", g->params.params[p].name);
  return JITK_OK;
}

/* --- specializations --- */

jitk_status jk_gen_cache(jitk_engine *e, const char *name, const char *source, char *const *options,
                         size_t num_options, const char *generator, bool arch_specific,
                         const jk_link_set *link, jk_entry **out) {
  jk_dump_source(e, "generated source of", name, source, (const char *const *)options, num_options,
                 NULL, 0);
  /* The program's name, which NVRTC's messages cite: the kernel's whole. */
  jk_buf pb;
  jk_buf_init(&pb, e);
  jk_buf_printf(&pb, "%s.cu", name);
  char *pname = jk_buf_take(&pb);
  if (pname == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  jk_compile_input ci;
  memset(&ci, 0, sizeof ci);
  ci.source = source;
  ci.program_name = pname;
  ci.options = (const char *const *)options;
  ci.num_options = num_options;
  ci.rewrite_log = true;
  ci.arch_specific = arch_specific;
  if (link == NULL) {
    jitk_status st = jk_cache_get(e, &ci, generator, out);
    jk_free(e, pname);
    return st;
  }
  /* Linked: the generated source is the first piece, the kernel's
   * compiled pieces follow; the key covers them all. */
  jk_link_piece *pieces = jk_calloc(e, link->n + 1, sizeof *pieces);
  if (pieces == NULL) {
    jk_free(e, pname);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  pieces[0].kind = JITK_LINK_CUDA;
  pieces[0].name = pname;
  pieces[0].cuda = &ci;
  memcpy(pieces + 1, link->pieces, link->n * sizeof *pieces);
  jk_link_input li;
  jk_link_set_input(link, pieces, link->n + 1, &li);
  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.program_name = pname;
  in.link = &li;
  jitk_status st = jk_cache_get(e, &in, generator, out);
  jk_free(e, pieces);
  jk_free(e, pname);
  return st;
}

/* Generates, compiles (through the cache) and loads one specialization,
 * without g->lock: specializations of one kernel compile side by side
 * (jitk_parallel), and the cache compiles each key once however many
 * threads ask. On failure *failed_source gets the source, which explains
 * the error. */
static jitk_status build_variant(jk_gen *g, const void *spec, uint64_t hash,
                                 const struct jk_link_set *link, jk_gen_variant *out,
                                 char **failed_source) {
  jitk_engine *e = g->engine;
  char *src = NULL;
  jitk_status st = g->source_fn(g->ctx, spec, &src);
  if (st != JITK_OK) return st;
  jk_entry *entry = NULL;
  st = jk_gen_cache(e, g->name, src, g->options, g->num_options, g->generator, false, link, &entry);
  if (st != JITK_OK) {
    *failed_source = src;
    return st;
  }
  jk_gen_variant v;
  memset(&v, 0, sizeof v);
  memcpy(v.spec, spec, g->spec_size);
  v.hash = hash;
  v.entry = entry;
  v.source = src;
  if (e->has_device) {
    CUcontext saved;
    st = jk_ctx_enter(e, &saved);
    if (st == JITK_OK) {
      st = g->load_fn(g->ctx, &v);
      jk_ctx_leave(e, saved);
    }
  }
  if (st != JITK_OK) {
    jk_entry_release(e, entry);
    jk_free(e, src);
    return st;
  }
  *out = v;
  return JITK_OK;
}

/* Adds a built variant to the table; under g->lock. */
static jitk_status add_variant(jk_gen *g, const jk_gen_variant *v, jk_gen_variant *copy) {
  jitk_engine *e = g->engine;
  jk_gen_variant *grown = jk_realloc(e, g->variants, (g->num_variants + 1) * sizeof *grown);
  if (grown == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  g->variants = grown;
  g->variants[g->num_variants++] = *v;
  g->last_hit = g->num_variants;
  g->last_source = v->source;
  *copy = *v;
  return JITK_OK;
}

/* The variant of `spec` (hash h) already made, copied into *copy and
 * remembered as the last hit; under g->lock. */
static bool find_variant(jk_gen *g, const void *spec, uint64_t h, jk_gen_variant *copy) {
  for (size_t i = 0; i < g->num_variants; i++) {
    jk_gen_variant *v = &g->variants[i];
    if (v->hash == h && memcmp(v->spec, spec, g->spec_size) == 0) {
      *copy = *v;
      g->last_source = v->source;
      g->last_hit = i + 1;
      return true;
    }
  }
  return false;
}

/* XXH3 over the whole (zero-padded) specialization: a few dozen
 * nanoseconds, where a byte-wise hash of its few hundred bytes cost a fair
 * part of a launch. */
jitk_status jk_gen_variant_get(jk_gen *g, const void *spec, const jitk_stream *launching,
                               const char *prepare, jk_gen_variant *copy) {
  /* A loop calls a kernel with one layout again and again: the variant
   * found last is compared first, which costs a memcmp where hashing the
   * spec costs several times that. */
  pthread_mutex_lock(&g->lock);
  if (g->last_hit > 0) {
    jk_gen_variant *v = &g->variants[g->last_hit - 1];
    if (memcmp(v->spec, spec, g->spec_size) == 0) {
      *copy = *v;
      g->last_source = v->source;
      pthread_mutex_unlock(&g->lock);
      return JITK_OK;
    }
  }
  pthread_mutex_unlock(&g->lock);
  uint64_t h = XXH3_64bits(spec, g->spec_size);
  pthread_mutex_lock(&g->lock);
  if (find_variant(g, spec, h, copy)) {
    pthread_mutex_unlock(&g->lock);
    return JITK_OK;
  }
  if (launching != NULL) {
    /* A launch's miss: the driver is asked outside the lock, then the
     * table again, which another thread may have filled meanwhile. */
    pthread_mutex_unlock(&g->lock);
    bool capturing = false;
    jitk_status st = jk_stream_capturing(g->engine, *launching, &capturing);
    if (st != JITK_OK) return st;
    if (capturing)
      return jk_fail(g->engine, JITK_ERR_STREAM_CAPTURE,
                     "kernel %s: this launch needs a specialization (its arguments' dtypes and "
                     "layout) that is not compiled yet, and its stream is capturing a CUDA "
                     "graph, during which jitk neither compiles nor loads a module; launch it "
                     "once with such arguments before the capture, or call %s with them",
                     g->name, prepare);
    pthread_mutex_lock(&g->lock);
    if (find_variant(g, spec, h, copy)) {
      pthread_mutex_unlock(&g->lock);
      return JITK_OK;
    }
  }
  /* The link set is read under the lock (it is set once, before any
   * build: jk_gen_set_link counts the builds under way). */
  const struct jk_link_set *link = g->link;
  g->building++;
  pthread_mutex_unlock(&g->lock);
  jk_gen_variant v;
  char *failed = NULL;
  jitk_status st = build_variant(g, spec, h, link, &v, &failed);
  pthread_mutex_lock(&g->lock);
  g->building--;
  if (find_variant(g, spec, h, copy)) {
    /* Another thread made it meanwhile (from the same cache entry): its
     * variant stays, and this one goes. */
    pthread_mutex_unlock(&g->lock);
    if (st == JITK_OK) {
      jk_entry_release(g->engine, v.entry);
      jk_free(g->engine, v.source);
    }
    jk_free(g->engine, failed);
    return JITK_OK;
  }
  if (st == JITK_OK) {
    st = add_variant(g, &v, copy);
    if (st != JITK_OK) {
      jk_entry_release(g->engine, v.entry);
      jk_free(g->engine, v.source);
    }
  } else if (failed != NULL) {
    /* Kept for the kind's _source call: it explains the error. */
    jk_free(g->engine, g->failed_source);
    g->failed_source = failed;
    g->last_source = failed;
  }
  pthread_mutex_unlock(&g->lock);
  return st;
}

jitk_status jk_gen_compile(jk_gen *g, const void *spec, const char **source, jitk_module **module) {
  jitk_engine *e = g->engine;
  jk_gen_variant copy;
  jitk_status st = jk_gen_variant_get(g, spec, NULL, NULL, &copy);
  /* Out-parameters are written only on success, as the API promises; the
   * source of a failed compile is the kind's _source call's to give. */
  if (st != JITK_OK) return st;
  if (module != NULL) {
    jk_entry *x = copy.entry;
    jk_entry_retain(e, x);
    jitk_module *m = NULL;
    st = jk_module_from_entry(e, x, g->name, &m);
    if (st != JITK_OK) return st;
    *module = m;
  }
  if (source != NULL) *source = copy.source;
  return JITK_OK;
}

jitk_status jk_gen_source(jk_gen *g, const char *what, const char **source) {
  if (g == NULL || source == NULL)
    return jk_fail(g ? g->engine : NULL, JITK_ERR_INVALID_ARGUMENT, "%s: an argument is NULL",
                   what);
  pthread_mutex_lock(&g->lock);
  const char *last = g->last_source;
  pthread_mutex_unlock(&g->lock);
  if (last == NULL)
    return jk_fail(g->engine, JITK_ERR_NOT_FOUND,
                   "kernel %s has not been specialized yet: launch or compile it first", g->name);
  *source = last;
  return JITK_OK;
}

/* The next name of a comma- or space-separated list: its length, 0 at the
 * end of the list; it ends at the cursor. */
static size_t next_name(jk_lex *lx) {
  jk_lex_skip(lx, " ,");
  return jk_lex_span(lx, " ,");
}

jitk_status jk_gen_check_names(const jk_gen *g, const char *label, const char *list) {
  if (list == NULL) return JITK_OK;
  jk_lex lx;
  jk_lex_init(&lx, list);
  for (size_t n; (n = next_name(&lx)) > 0;) {
    const char *p = list + lx.pos - n;
    int found = -1;
    for (size_t i = 0; i < g->params.count; i++)
      if (strlen(g->params.params[i].name) == n && memcmp(g->params.params[i].name, p, n) == 0)
        found = (int)i;
    if (found < 0)
      return jk_fail_caret(g->engine, JITK_ERR_PARSE, label, list, (size_t)(p - list), n,
                           "kernel %s has no parameter `%.*s`", g->name, (int)n, p);
    /* Listed again further on: one of the two is a typo for another name. */
    jk_lex rest = lx;
    for (size_t m; (m = next_name(&rest)) > 0;)
      if (m == n && memcmp(list + rest.pos - m, p, n) == 0)
        return jk_fail_caret(g->engine, JITK_ERR_PARSE, label, list, rest.pos - m, n,
                             "`%.*s` is listed twice", (int)n, p);
  }
  return JITK_OK;
}

bool jk_gen_listed(const char *list, const char *name) {
  if (list == NULL) return false;
  size_t n = strlen(name);
  jk_lex lx;
  jk_lex_init(&lx, list);
  for (size_t m; (m = next_name(&lx)) > 0;)
    if (m == n && memcmp(list + lx.pos - m, name, n) == 0) return true;
  return false;
}

void jk_gen_output_specs(const jk_gen *g, const jk_gen_args *a, int ndim, const int64_t *shape,
                         jitk_output_spec *specs) {
  for (int j = 0; j < g->num_out; j++) {
    int p = g->num_in + j;
    jitk_output_spec o;
    memset(&o, 0, sizeof o);
    o.dtype = a->dtype[p];
    /* A given output reports its own shape: for a raw one that is not the
     * loop's, and a binding allocates nothing for it anyway. */
    const int64_t *src = a->is_array[p] ? a->views[p].shape : shape;
    o.ndim = a->is_array[p] ? a->views[p].ndim : ndim;
    for (int d = 0; d < o.ndim; d++) o.shape[d] = src[d];
    specs[j] = o;
  }
}

jitk_status jk_gen_num_params(const jk_gen *g, int *num_in, int *num_out) {
  if (num_in != NULL) *num_in = g->num_in;
  if (num_out != NULL) *num_out = g->num_out;
  return JITK_OK;
}

/* The end of the first version of jitk_param_info. */
#define JK_PARAM_INFO_V1 (offsetof(jitk_param_info, placeholder) + sizeof(const char *))

jitk_status jk_gen_param(const jk_gen *g, const char *what, int index, jitk_param_info *info) {
  if (info == NULL) return jk_fail(g->engine, JITK_ERR_INVALID_ARGUMENT, "%s: info is NULL", what);
  if (info->struct_size < JK_PARAM_INFO_V1)
    return jk_fail(g->engine, JITK_ERR_INVALID_ARGUMENT,
                   "%s: info->struct_size is %zu; set it to sizeof(jitk_param_info)", what,
                   info->struct_size);
  if (index < 0 || index >= (int)g->params.count)
    return jk_fail(g->engine, JITK_ERR_INVALID_ARGUMENT,
                   "%s: kernel %s has %d parameters (%d inputs, %d outputs); there is no "
                   "parameter %d",
                   what, g->name, (int)g->params.count, g->num_in, g->num_out, index);
  const jk_param_decl *d = &g->params.params[index];
  /* Only the first version's fields exist yet; a larger struct_size (a
   * caller built against a later header) leaves the rest to the caller. */
  info->name = d->name;
  info->is_output = d->output ? 1 : 0;
  info->is_raw = d->raw ? 1 : 0;
  info->dtype = d->placeholder >= 0 ? JITK_DTYPE_NONE : d->dtype;
  info->placeholder = d->placeholder >= 0 ? g->params.placeholders[d->placeholder] : NULL;
  return JITK_OK;
}
