/*
 * Raw modules: CUDA source compiled through the kernel cache, or images
 * from memory and files, loaded into the engine's context.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/image.h"
#include "kernels/kernels.h"

/* The generator name and version that go into raw modules' cache keys.
 * Raw source is compiled as given, so this changes only if jitk changes
 * how it compiles raw modules. */
#define JK_RAW_GENERATOR "raw/1"
/* The same for programs linked from pieces. */
#define JK_LINK_GENERATOR "link/1"

static void module_free(jitk_module *m) {
  jitk_engine *e = m->engine;
  jitk_kernel *k = m->kernels;
  while (k != NULL) {
    jitk_kernel *next = k->next;
    jk_fn_facts_free(e, &k->f);
    jk_free(e, k->symbol);
    jk_free(e, k);
    k = next;
  }
  jk_entry_release(e, m->entry);
  jk_free(e, m->program_name);
  jk_free(e, m);
}

/* A handle on `x`, taking over the caller's reference. */
jitk_status jk_module_from_entry(jitk_engine *e, jk_entry *x, const char *program_name,
                                 jitk_module **out) {
  jitk_module *m = jk_calloc(e, 1, sizeof *m);
  char *name = jk_strdup(e, program_name);
  if (m == NULL || name == NULL) {
    jk_free(e, m);
    jk_free(e, name);
    jk_entry_release(e, x);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  m->engine = e;
  m->entry = x;
  m->program_name = name;
  m->image = x->image;
  m->image_size = x->image_size;
  m->kind = x->kind;
  m->cu = (CUmodule)x->cu;
  m->name_expressions = x->name_expressions;
  m->lowered = x->lowered;
  m->num_names = x->num_names;
  m->resources = x->resources;
  m->num_resources = x->num_resources;
  m->log = x->log ? x->log : "";
  pthread_mutex_lock(&e->lock);
  e->live_modules++;
  pthread_mutex_unlock(&e->lock);
  *out = m;
  return JITK_OK;
}

/* Refuses options whose arrays or entries are NULL. */
static jitk_status check_options(jitk_engine *e, const jitk_module_options *opts,
                                 const char *what) {
  if ((opts->num_options && !opts->options) ||
      (opts->num_name_expressions && !opts->name_expressions) ||
      (opts->num_headers && !opts->headers))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "%s: an options array is NULL but its count is not zero", what);
  for (size_t i = 0; i < opts->num_options; i++)
    if (opts->options[i] == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: option %zu is NULL", what, i);
  for (size_t i = 0; i < opts->num_name_expressions; i++)
    if (opts->name_expressions[i] == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: name expression %zu is NULL", what, i);
  for (size_t i = 0; i < opts->num_headers; i++)
    if (opts->headers[i].name == NULL || opts->headers[i].source == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: header %zu has a NULL name or source", what,
                     i);
  return JITK_OK;
}

/* The compile input of `source` with `opts`. */
static void program_input(const char *source, const jitk_module_options *opts,
                          jk_compile_input *in) {
  memset(in, 0, sizeof *in);
  in->source = source;
  in->program_name = opts->program_name;
  in->options = opts->options;
  in->num_options = opts->num_options;
  in->name_expressions = opts->name_expressions;
  in->num_name_expressions = opts->num_name_expressions;
  in->headers = opts->headers;
  in->num_headers = opts->num_headers;
}

jitk_status jitk_module_create(jitk_engine *e, const char *source, const jitk_module_options *opts,
                               jitk_module **out) {
  if (e == NULL || source == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_create: %s is NULL",
                   e == NULL        ? "engine"
                   : source == NULL ? "source"
                                    : "module");
  jitk_module_options none;
  if (opts == NULL) {
    memset(&none, 0, sizeof none);
    opts = &none;
  }
  jitk_status st = check_options(e, opts, "jitk_module_create");
  if (st != JITK_OK) return st;
  jk_compile_input in;
  program_input(source, opts, &in);
  jk_entry *x = NULL;
  st = jk_cache_get(e, &in, JK_RAW_GENERATOR, &x);
  if (st != JITK_OK) return st;
  return jk_module_from_entry(e, x, opts->program_name ? opts->program_name : "module.cu", out);
}

jitk_status jitk_module_create_from_image(jitk_engine *e, jitk_image_kind kind, const void *image,
                                          size_t size, jitk_module **out) {
  if (e == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_create_from_image: %s is NULL",
                   e == NULL ? "engine" : "module");
  jitk_image_kind found;
  jitk_status st = jk_image_check(e, kind, image, size, &found);
  if (st != JITK_OK) return st;
  /* Images are the caller's already: they are loaded, not cached. */
  jk_entry *x = NULL;
  st = jk_entry_from_image(e, found, image, size, &x);
  if (st != JITK_OK) return st;
  return jk_module_from_entry(e, x, "image", out);
}

/* Reads the whole file at `path` into `b`. JITK_ERR_IO when it cannot
 * be read, JITK_ERR_INVALID_IMAGE when it is empty. */
static jitk_status read_file(jitk_engine *e, const char *path, jk_buf *b) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return jk_fail(e, JITK_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  jk_buf_init(b, e);
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) jk_buf_append(b, chunk, n);
  bool read_error = ferror(f) != 0;
  int err = errno;
  fclose(f);
  jitk_status st = JITK_OK;
  if (read_error)
    st = jk_fail(e, JITK_ERR_IO, "cannot read %s: %s", path, strerror(err));
  else if (b->failed)
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
  else if (b->len == 0)
    st = jk_fail(e, JITK_ERR_INVALID_IMAGE, "%s is empty", path);
  if (st != JITK_OK) jk_buf_free(b);
  return st;
}

jitk_status jitk_module_create_from_file(jitk_engine *e, const char *path, jitk_module **out) {
  if (e == NULL || path == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_create_from_file: %s is NULL",
                   e == NULL      ? "engine"
                   : path == NULL ? "path"
                                  : "module");
  jk_buf b;
  jitk_status st = read_file(e, path, &b);
  if (st != JITK_OK) return st;
  st = jitk_module_create_from_image(e, JITK_IMAGE_AUTO, b.data, b.len, out);
  jk_buf_free(&b);
  if (st != JITK_OK) {
    /* Say which file the image problem came from. */
    char *msg = jk_strdup(e, jitk_errmsg(e));
    if (msg != NULL) {
      jk_fail(e, st, "%s: %s", path, msg);
      jk_free(e, msg);
    }
  }
  return st;
}

/* --- Linked programs --- */

jitk_status jitk_link_options_init(jitk_link_options *o) {
  if (o == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_link_options_init: options is NULL");
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  return JITK_OK;
}

/* What jitk_module_link holds while it works: the pieces as the linker
 * takes them, their compile inputs, names and file contents. */
typedef struct link_work {
  jk_link_piece *pieces;
  jk_compile_input *inputs;
  char **names;
  jk_buf *files;
  const char **name_expressions;
  size_t num_name_expressions;
} link_work;

static void link_work_free(jitk_engine *e, link_work *w, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (w->names != NULL) jk_free(e, w->names[i]);
    if (w->files != NULL) jk_buf_free(&w->files[i]);
  }
  jk_free(e, w->pieces);
  jk_free(e, w->inputs);
  jk_free(e, w->names);
  jk_free(e, w->files);
  jk_free(e, w->name_expressions);
}

/* Checks piece `i` and fills its linker piece: a CUDA piece's input, a
 * binary piece's bytes (read from its file when it has one). */
static jitk_status link_piece(jitk_engine *e, const jitk_link_piece *p, size_t i, link_work *w) {
  static const jitk_module_options none;
  const char *what = "jitk_module_link";
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
    if (p->data == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "%s: piece %zu (%s) is CUDA source, and its "
                     "data (the source text) is NULL",
                     what, i, lp->name);
    const jitk_module_options *o = p->options ? p->options : &none;
    jitk_status st = check_options(e, o, what);
    if (st != JITK_OK) return st;
    program_input((const char *)p->data, o, &w->inputs[i]);
    if (w->inputs[i].program_name == NULL) w->inputs[i].program_name = lp->name;
    lp->cuda = &w->inputs[i];
    return JITK_OK;
  }
  if (p->data != NULL) {
    if (p->size == 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: piece %zu (%s) has data but size 0", what,
                     i, lp->name);
    lp->data = p->data;
    lp->size = p->size;
  } else if (p->path != NULL) {
    jitk_status st = read_file(e, p->path, &w->files[i]);
    if (st != JITK_OK) return st;
    lp->data = w->files[i].data;
    lp->size = w->files[i].len;
  } else {
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "%s: piece %zu (%s) has neither data nor a path to read", what, i, lp->name);
  }
  /* PTX is text: the linker reads it up to a NUL, which the caller's
   * bytes need not have. */
  if (p->kind == JITK_LINK_PTX && ((const char *)lp->data)[lp->size - 1] != '\0') {
    if (w->files[i].data == NULL) jk_buf_append(&w->files[i], lp->data, lp->size);
    jk_buf_append(&w->files[i], "", 1);
    if (w->files[i].failed) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    lp->data = w->files[i].data;
    lp->size = w->files[i].len;
  }
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

/* Whether the link optimizes, as jitk_lto describes. */
static jitk_status decide_lto(jitk_engine *e, const jk_link_piece *pieces, size_t n, jitk_lto lto,
                              bool *out) {
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
                   "jitk_module_link: piece %zu (%s) is LTO-IR, which links only with link-time "
                   "optimization, and the options turn it off (JITK_LTO_OFF)",
                   lto_piece, pieces[lto_piece].name);
  if (lto != JITK_LTO_AUTO && lto != JITK_LTO_ON && lto != JITK_LTO_OFF)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_link: options->lto is %d", (int)lto);
  *out = lto == JITK_LTO_ON || (lto == JITK_LTO_AUTO && (carries || all_cuda));
  return JITK_OK;
}

jitk_status jitk_module_link(jitk_engine *e, const jitk_link_piece *pieces, size_t n,
                             const jitk_link_options *options, jitk_module **out) {
  if (e == NULL || out == NULL || (pieces == NULL && n > 0))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_link: %s is NULL",
                   e == NULL     ? "engine"
                   : out == NULL ? "module"
                                 : "pieces");
  if (n == 0) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_link: no pieces to link");
  jitk_link_options o;
  jitk_link_options_init(&o);
  if (options != NULL) {
    /* A caller built against an older header passes a smaller struct:
     * the fields it lacks keep their defaults. */
    size_t size = options->struct_size;
    if (size < offsetof(jitk_link_options, lto) + sizeof(jitk_lto) || size > sizeof o)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "jitk_module_link: options->struct_size is %zu; call jitk_link_options_init "
                     "before setting fields",
                     size);
    memcpy(&o, options, size);
  }
  if (o.num_options > 0 && o.options == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_link: options->options is NULL but num_options is %zu",
                   o.num_options);
  for (size_t i = 0; i < o.num_options; i++)
    if (o.options[i] == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_link: link option %zu is NULL", i);

  link_work w;
  memset(&w, 0, sizeof w);
  w.pieces = jk_calloc(e, n, sizeof *w.pieces);
  w.inputs = jk_calloc(e, n, sizeof *w.inputs);
  w.names = jk_calloc(e, n, sizeof *w.names);
  w.files = jk_calloc(e, n, sizeof *w.files);
  jitk_status st = JITK_OK;
  if (w.pieces == NULL || w.inputs == NULL || w.names == NULL || w.files == NULL)
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < n && st == JITK_OK; i++) jk_buf_init(&w.files[i], e);
  for (size_t i = 0; i < n && st == JITK_OK; i++) st = link_piece(e, &pieces[i], i, &w);
  jk_link_input li;
  memset(&li, 0, sizeof li);
  if (st == JITK_OK) st = decide_lto(e, w.pieces, n, o.lto, &li.lto);
  /* The module's name expressions: every CUDA piece's, in order. */
  for (size_t i = 0; i < n && st == JITK_OK; i++)
    if (w.pieces[i].kind == JITK_LINK_CUDA)
      w.num_name_expressions += w.inputs[i].num_name_expressions;
  if (st == JITK_OK && w.num_name_expressions > 0) {
    w.name_expressions = jk_calloc(e, w.num_name_expressions, sizeof *w.name_expressions);
    if (w.name_expressions == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    size_t at = 0;
    for (size_t i = 0; i < n && st == JITK_OK; i++)
      for (size_t j = 0; w.pieces[i].kind == JITK_LINK_CUDA && j < w.inputs[i].num_name_expressions;
           j++)
        w.name_expressions[at++] = w.inputs[i].name_expressions[j];
  }
  jk_entry *x = NULL;
  const char *pname = o.program_name ? o.program_name : "linked.cu";
  if (st == JITK_OK) {
    li.pieces = w.pieces;
    li.num_pieces = n;
    li.options = o.options;
    li.num_options = o.num_options;
    jk_compile_input in;
    memset(&in, 0, sizeof in);
    in.program_name = pname;
    in.name_expressions = w.name_expressions;
    in.num_name_expressions = w.num_name_expressions;
    in.link = &li;
    st = jk_cache_get(e, &in, JK_LINK_GENERATOR, &x);
  }
  link_work_free(e, &w, n);
  if (st != JITK_OK) return st;
  return jk_module_from_entry(e, x, pname, out);
}

void jitk_module_destroy(jitk_module *m) {
  if (m == NULL) return;
  jitk_engine *e = m->engine;
  pthread_mutex_lock(&e->lock);
  e->live_modules--;
  pthread_mutex_unlock(&e->lock);
  module_free(m);
}

jitk_status jitk_module_image(const jitk_module *m, const void **image, size_t *size,
                              jitk_image_kind *kind) {
  if (m == NULL || image == NULL || size == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_image: an argument is NULL");
  *image = m->image;
  *size = m->image_size;
  if (kind != NULL) *kind = m->kind;
  return JITK_OK;
}

jitk_status jitk_module_lowered_name(const jitk_module *m, const char *expr, const char **lowered) {
  if (m == NULL || expr == NULL || lowered == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_lowered_name: an argument is NULL");
  for (size_t i = 0; i < m->num_names; i++)
    if (strcmp(m->name_expressions[i], expr) == 0) {
      *lowered = m->lowered[i];
      return JITK_OK;
    }
  return jk_fail(m->engine, JITK_ERR_NOT_FOUND,
                 "\"%s\" was not among the module's name expressions "
                 "(jitk_module_options.name_expressions)",
                 expr);
}

jitk_status jitk_module_resources(const jitk_module *m, const jitk_kernel_resources **resources,
                                  size_t *count) {
  if (m == NULL || resources == NULL || count == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_resources: an argument is NULL");
  *resources = m->resources;
  *count = m->num_resources;
  return JITK_OK;
}

typedef struct global_list {
  jk_buf *b;
  int n;
} global_list;

static void list_global(void *user, const char *name, size_t len) {
  global_list *l = user;
  jk_buf_puts(l->b, l->n++ ? ", " : "; it has ");
  jk_buf_append(l->b, name, len);
}

static jitk_status global_not_found(jitk_module *m, const char *name, const char *symbol) {
  jitk_engine *e = m->engine;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "no __device__ or __constant__ variable \"%s\"", name);
  if (strcmp(name, symbol) != 0) jk_buf_printf(&b, " (%s)", symbol);
  jk_buf_printf(&b, " in module %s", m->program_name);
  global_list l = {&b, 0};
  int n = jk_image_globals(m->kind, m->image, m->image_size, list_global, &l);
  if (n == 0) jk_buf_puts(&b, "; it has none");
  char *msg = jk_buf_take(&b);
  jitk_status st = jk_fail(e, JITK_ERR_NOT_FOUND, "%s", msg ? msg : "no such variable");
  jk_free(e, msg);
  return st;
}

jitk_status jitk_module_get_global(jitk_module *m, const char *name, void **ptr, size_t *bytes) {
  if (m == NULL || name == NULL || ptr == NULL || bytes == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_get_global: %s is NULL",
                   m == NULL      ? "module"
                   : name == NULL ? "name"
                   : ptr == NULL  ? "ptr"
                                  : "bytes");
  jitk_engine *e = m->engine;
  jitk_status st = jk_require_device(e, "jitk_module_get_global");
  if (st != JITK_OK) return st;
  const char *symbol = name;
  for (size_t i = 0; i < m->num_names; i++)
    if (strcmp(m->name_expressions[i], name) == 0) symbol = m->lowered[i];
  /* A name the image does not define fails here, not in the driver, whose
   * CUDA_ERROR_NOT_FOUND tools such as compute-sanitizer would report as
   * an error of the caller's program. */
  if (jk_image_has_global(m->kind, m->image, m->image_size, symbol) == 0)
    return global_not_found(m, name, symbol);
  CUcontext saved;
  st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  CUdeviceptr dptr = 0;
  size_t size = 0;
  CUresult r = jk_cu_module_global(e, m->cu, symbol, &dptr, &size);
  jk_ctx_leave(e, saved);
  if (r == CUDA_ERROR_NOT_FOUND) return global_not_found(m, name, symbol);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuModuleGetGlobal");
  *ptr = (void *)(uintptr_t)dptr;
  *bytes = size;
  return JITK_OK;
}

jitk_status jitk_module_log(const jitk_module *m, const char **log) {
  if (m == NULL || log == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_log: an argument is NULL");
  *log = m->log;
  return JITK_OK;
}
