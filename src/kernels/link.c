/*
 * Programs linked from several pieces: jitk_module_link, and the pieces a
 * generated kernel's specializations are linked with
 * (jitk_elementwise_link, jitk_reduction_link). Here the pieces are
 * checked, named, read from their files and, for a generated kernel,
 * copied, and whether the link optimizes is decided; the compile and the
 * link themselves are src/nvrtc/link.c's, through the kernel cache.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "driver/image.h"
#include "kernels/gen.h"
#include "kernels/kernels.h"

/* The generator name and version that go into linked programs' keys. */
#define JK_LINK_GENERATOR "link/1"

jitk_status jitk_link_options_init(jitk_link_options *o) {
  if (o == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_link_options_init: options is NULL");
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  return JITK_OK;
}

void jk_link_set_free(jitk_engine *e, jk_link_set *w) {
  if (w == NULL) return;
  for (size_t i = 0; i < w->n; i++) {
    if (w->names != NULL) jk_free(e, w->names[i]);
    if (w->files != NULL) jk_buf_free(&w->files[i]);
  }
  for (size_t i = 0; i < w->num_options; i++) jk_free(e, w->options[i]);
  jk_free(e, w->options);
  jk_free(e, w->pieces);
  jk_free(e, w->inputs);
  jk_free(e, w->names);
  jk_free(e, w->files);
  jk_free(e, w->name_expressions);
  memset(w, 0, sizeof *w);
}

/* Checks piece `i` and fills its linker piece: a CUDA piece's input, a
 * binary piece's bytes (read from its file when it has one; copied too
 * when the set must outlive the call). */
static jitk_status check_piece(jitk_engine *e, const char *what, const jitk_link_piece *p, size_t i,
                               bool copy, jk_link_set *w) {
  static const jitk_module_options none;
  if ((unsigned)p->kind > JITK_LINK_DEVICE_RUNTIME)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: piece %zu has an unknown kind (%d)", what, i,
                   (int)p->kind);
  jk_link_piece *lp = &w->pieces[i];
  lp->kind = p->kind;
  const char *base = p->path ? strrchr(p->path, '/') : NULL;
  base = base ? base + 1 : p->path;
  char fallback[32];
  snprintf(fallback, sizeof fallback, "piece%zu", i);
  if ((w->names[i] = jk_strdup(e, p->name ? p->name : base ? base : fallback)) == NULL)
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  lp->name = w->names[i];
  if (p->kind == JITK_LINK_DEVICE_RUNTIME) return JITK_OK;
  if (p->kind == JITK_LINK_CUDA) {
    /* A generated kernel's own source is its CUDA piece; more source
     * belongs in its preamble. */
    if (copy)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "%s: piece %zu (%s) is CUDA source; a generated kernel is linked with "
                     "compiled pieces (PTX, cubins, fatbins, LTO-IR, objects, libraries, the "
                     "device runtime), and source of its own goes into its preamble",
                     what, i, lp->name);
    if (p->data == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "%s: piece %zu (%s) is CUDA source, and its data (the source text) is NULL",
                     what, i, lp->name);
    const jitk_module_options *o = p->options ? p->options : &none;
    jitk_status st = jk_check_module_options(e, o, what);
    if (st != JITK_OK) return st;
    jk_program_input((const char *)p->data, o, &w->inputs[i]);
    if (w->inputs[i].program_name == NULL) w->inputs[i].program_name = lp->name;
    lp->cuda = &w->inputs[i];
    return JITK_OK;
  }
  jk_buf *f = &w->files[i];
  if (p->data != NULL) {
    if (p->size == 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: piece %zu (%s) has data but size 0", what,
                     i, lp->name);
    if (copy) jk_buf_append(f, p->data, p->size);
  } else if (p->path != NULL) {
    jitk_status st = jk_read_file(e, p->path, f);
    if (st != JITK_OK) return st;
  } else {
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "%s: piece %zu (%s) has neither data nor a path to read", what, i, lp->name);
  }
  /* PTX is text: the linker reads it up to a NUL, which the caller's
   * bytes need not have. */
  const unsigned char *bytes = f->data != NULL ? (const unsigned char *)f->data : p->data;
  size_t size = f->data != NULL ? f->len : p->size;
  if (p->kind == JITK_LINK_PTX && bytes != NULL && size > 0 && bytes[size - 1] != '\0') {
    if (f->data == NULL) jk_buf_append(f, p->data, p->size);
    jk_buf_append(f, "", 1);
  }
  if (f->failed) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  lp->data = f->data != NULL ? (const void *)f->data : p->data;
  lp->size = f->data != NULL ? f->len : p->size;
  /* A cubin's architecture is checked here, where the message can name
   * the piece; the linker's would not. */
  if (p->kind == JITK_LINK_CUBIN) {
    jitk_image_kind found;
    jitk_status st = jk_image_check(e, JITK_IMAGE_CUBIN, lp->data, lp->size, &found);
    if (st != JITK_OK) {
      char *msg = jk_strdup(e, jitk_errmsg(e));
      if (msg != NULL) {
        jk_fail(e, st, "%s: piece %zu (%s): %s", what, i, lp->name, msg);
        jk_free(e, msg);
      }
      return st;
    }
  }
  return JITK_OK;
}

/* Whether the link optimizes, as jitk_lto describes. A generated kernel's
 * own source is not among the pieces: its set holds compiled pieces only,
 * so "every piece is source" never holds for it, and LTO-IR, objects and
 * libraries decide alone. */
static jitk_status decide_lto(jitk_engine *e, const char *what, const jk_link_piece *pieces,
                              size_t n, jitk_lto lto, bool *out) {
  if (lto != JITK_LTO_AUTO && lto != JITK_LTO_ON && lto != JITK_LTO_OFF)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: options->lto is %d", what, (int)lto);
  bool carries = false, all_cuda = true;
  size_t lto_piece = n;
  for (size_t i = 0; i < n; i++) {
    jitk_link_kind k = pieces[i].kind;
    if (k == JITK_LINK_LTO_IR && lto_piece == n) lto_piece = i;
    carries |= k == JITK_LINK_LTO_IR || k == JITK_LINK_OBJECT || k == JITK_LINK_LIBRARY;
    all_cuda &= k == JITK_LINK_CUDA;
  }
  if (lto == JITK_LTO_OFF && lto_piece < n)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "%s: piece %zu (%s) is LTO-IR, which links only with link-time optimization, "
                   "and the options turn it off (JITK_LTO_OFF)",
                   what, lto_piece, pieces[lto_piece].name);
  *out = lto == JITK_LTO_ON || (lto == JITK_LTO_AUTO && (carries || all_cuda));
  return JITK_OK;
}

jitk_status jk_link_set_make(jitk_engine *e, const char *what, const jitk_link_piece *pieces,
                             size_t n, const jitk_link_options *options, bool generated,
                             jk_link_set *w) {
  memset(w, 0, sizeof *w);
  if (pieces == NULL && n > 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: pieces is NULL", what);
  if (n == 0) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: no pieces to link", what);
  jitk_link_options o;
  jitk_link_options_init(&o);
  if (options != NULL) {
    /* A caller built against an older header passes a smaller struct:
     * the fields it lacks keep their defaults. */
    static const size_t forms[] = {
        offsetof(jitk_link_options, lto) + sizeof(jitk_lto),
        offsetof(jitk_link_options, num_options) + sizeof(size_t),
        offsetof(jitk_link_options, program_name) + sizeof(const char *)};
    size_t size = jk_struct_form(options->struct_size, forms, sizeof forms / sizeof forms[0]);
    if (size == 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "%s: options->struct_size is %zu; call jitk_link_options_init before "
                     "setting fields",
                     what, options->struct_size);
    memcpy(&o, options, size);
  }
  w->program_name = o.program_name;
  if (o.num_options > 0 && o.options == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "%s: options->options is NULL but num_options is %zu", what, o.num_options);
  for (size_t i = 0; i < o.num_options; i++) {
    const char *x = o.options[i];
    if (x == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: link option %zu is NULL", what, i);
    /* Read past white space at its ends, as NVRTC reads its options: a
     * space must not carry a target past the check. */
    size_t len;
    const char *t = jk_option_trim(x, &len);
    /* jitk gives nvJitLink the target and -lto: another target would link
     * an image for another device into the engine's cache, and -lto is
     * what options->lto decides. */
    if (strncmp(t, "-arch", 5) == 0 || strncmp(t, "--arch", 6) == 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "%s: link option \"%s\": the target is the engine's (%s); set "
                     "jitk_engine_config.arch to link for another one",
                     what, x, e->target.arch);
    if ((len == 4 && strncmp(t, "-lto", 4) == 0) || (len == 5 && strncmp(t, "--lto", 5) == 0))
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "%s: link option \"%s\": set options->lto (JITK_LTO_ON) instead", what, x);
  }
  w->n = n;
  w->pieces = jk_calloc(e, n, sizeof *w->pieces);
  w->inputs = jk_calloc(e, n, sizeof *w->inputs);
  w->names = jk_calloc(e, n, sizeof *w->names);
  w->files = jk_calloc(e, n, sizeof *w->files);
  w->options = jk_calloc(e, o.num_options ? o.num_options : 1, sizeof *w->options);
  jitk_status st = JITK_OK;
  if (w->pieces == NULL || w->inputs == NULL || w->names == NULL || w->files == NULL ||
      w->options == NULL)
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < n && st == JITK_OK; i++) jk_buf_init(&w->files[i], e);
  for (size_t i = 0; i < o.num_options && st == JITK_OK; i++, w->num_options++)
    if ((w->options[i] = jk_strdup(e, o.options[i])) == NULL)
      st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < n && st == JITK_OK; i++)
    st = check_piece(e, what, &pieces[i], i, generated, w);
  if (st == JITK_OK) st = decide_lto(e, what, w->pieces, n, o.lto, &w->lto);
  /* The module's name expressions: every CUDA piece's, in order. */
  for (size_t i = 0; i < n && st == JITK_OK; i++)
    if (w->pieces[i].kind == JITK_LINK_CUDA)
      w->num_name_expressions += w->inputs[i].num_name_expressions;
  if (st == JITK_OK && w->num_name_expressions > 0) {
    w->name_expressions = jk_calloc(e, w->num_name_expressions, sizeof *w->name_expressions);
    if (w->name_expressions == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    size_t at = 0;
    for (size_t i = 0; i < n && st == JITK_OK; i++)
      for (size_t j = 0;
           w->pieces[i].kind == JITK_LINK_CUDA && j < w->inputs[i].num_name_expressions; j++)
        w->name_expressions[at++] = w->inputs[i].name_expressions[j];
  }
  if (st != JITK_OK) jk_link_set_free(e, w);
  return st;
}

void jk_link_set_input(const jk_link_set *w, const jk_link_piece *pieces, size_t n,
                       jk_link_input *li) {
  memset(li, 0, sizeof *li);
  li->pieces = pieces;
  li->num_pieces = n;
  li->lto = w->lto;
  li->options = (const char *const *)w->options;
  li->num_options = w->num_options;
}

jitk_status jitk_module_link(jitk_engine *e, const jitk_link_piece *pieces, size_t n,
                             const jitk_link_options *options, jitk_module **out) {
  if (e == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_link: %s is NULL",
                   e == NULL ? "engine" : "module");
  jk_link_set w;
  jitk_status st = jk_link_set_make(e, "jitk_module_link", pieces, n, options, false, &w);
  if (st != JITK_OK) return st;
  const char *pname = w.program_name ? w.program_name : "linked.cu";
  jk_link_input li;
  jk_link_set_input(&w, w.pieces, n, &li);
  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.program_name = pname;
  in.name_expressions = w.name_expressions;
  in.num_name_expressions = w.num_name_expressions;
  in.link = &li;
  jk_entry *x = NULL;
  st = jk_cache_get(e, &in, JK_LINK_GENERATOR, &x);
  jk_link_set_free(e, &w);
  if (st != JITK_OK) return st;
  return jk_module_from_entry(e, x, pname, out);
}

/* The refusal of pieces given too late. */
static jitk_status too_late(jk_gen *g, const char *what) {
  pthread_mutex_lock(&g->lock);
  bool linked = g->link != NULL;
  pthread_mutex_unlock(&g->lock);
  return jk_fail(
      g->engine, JITK_ERR_INVALID_ARGUMENT,
      "%s: kernel %s %s; give its pieces once, before its first launch or compile", what, g->name,
      linked ? "is linked with pieces already" : "has specializations compiled or being compiled");
}

jitk_status jk_gen_set_link(jk_gen *g, const char *what, const jitk_link_piece *pieces, size_t n,
                            const jitk_link_options *options) {
  jitk_engine *e = g->engine;
  /* Refused before the pieces are read: a kernel that cannot take them
   * reads nothing of the caller's. Checked again below, under the lock. */
  pthread_mutex_lock(&g->lock);
  bool late = g->link != NULL || g->num_variants > 0 || g->building > 0;
  pthread_mutex_unlock(&g->lock);
  if (late) return too_late(g, what);
  jk_link_set *w = jk_calloc(e, 1, sizeof *w);
  if (w == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  jitk_status st = jk_link_set_make(e, what, pieces, n, options, true, w);
  /* The set outlives the call; the caller's name does not. */
  w->program_name = NULL;
  if (st != JITK_OK) {
    jk_free(e, w);
    return st;
  }
  pthread_mutex_lock(&g->lock);
  late = g->link != NULL || g->num_variants > 0 || g->building > 0;
  if (!late) g->link = w;
  pthread_mutex_unlock(&g->lock);
  if (late) st = too_late(g, what);
  if (st != JITK_OK) {
    jk_link_set_free(e, w);
    jk_free(e, w);
  }
  return st;
}
