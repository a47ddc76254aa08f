/*
 * Raw modules and kernels, the layer every generated kernel kind ends in.
 */
#ifndef JITK_SRC_KERNELS_KERNELS_H
#define JITK_SRC_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "expr/signature.h"
#include "launch/launch.h"

/* One declared parameter of a kernel signature. */

struct jitk_kernel {
  jitk_engine *engine;
  jitk_module *module;
  jitk_kernel *next; /* the module's list */
  char *symbol;      /* the lowered name */
  jk_fn_facts f;     /* the function, its name and what launches check */
};

/* A user's handle on a cache entry. The fields below `entry` point into
 * it (valid while the handle holds its reference); kernels are the
 * handle's own, so a signature set through one handle stays there. */
struct jitk_module {
  jitk_engine *engine;
  jk_entry *entry;
  char *program_name;

  const void *image;
  size_t image_size;
  jitk_image_kind kind;
  CUmodule cu; /* NULL on a compile-only engine */
  char **name_expressions;
  char **lowered;
  size_t num_names;
  const jitk_kernel_resources *resources;
  size_t num_resources;
  const char *log;

  jitk_kernel *kernels;
};

/* A module handle on a cache entry, taking over one reference to it (the
 * reference is released on failure too). */
jitk_status jk_module_from_entry(jitk_engine *e, jk_entry *x, const char *program_name,
                                 jitk_module **out);

/* Reads the whole file at `path` into `b` (initialized here). JITK_ERR_IO
 * when it cannot be read, JITK_ERR_INVALID_IMAGE when it is empty. */
jitk_status jk_read_file(jitk_engine *e, const char *path, jk_buf *b);

/* Refuses module options whose arrays or entries are NULL; `what` names
 * the API call. */
jitk_status jk_check_module_options(jitk_engine *e, const jitk_module_options *opts,
                                    const char *what);
/* JITK_DUMP_SOURCE=1: `src` to the log as "WHAT NAME:" and its lines,
 * after a comment line for each NVRTC option it is compiled with, so that
 * what is printed compiles as jitk compiled it (a -D option changes what
 * the source means), then one for each name expression NVRTC is asked to
 * instantiate. Generated kernels print "generated source of", raw modules
 * "source of module". */
void jk_dump_source(jitk_engine *e, const char *what, const char *name, const char *src,
                    const char *const *options, size_t num_options,
                    const char *const *name_expressions, size_t num_name_expressions);
/* The compile input of `source` with `opts`. */
void jk_program_input(const char *source, const jitk_module_options *opts, jk_compile_input *in);

/* --- link.c: the pieces of a linked program --- */

/* Pieces checked, named and read (and copied, for a generated kernel's),
 * with the decision whether the link optimizes and nvJitLink's options. */
typedef struct jk_link_set {
  jk_link_piece *pieces;
  size_t n;
  jk_compile_input *inputs; /* of CUDA pieces */
  char **names;
  jk_buf *files; /* bytes read from files, or copied */
  bool lto;
  char **options;
  size_t num_options;
  const char **name_expressions; /* every CUDA piece's, in order */
  size_t num_name_expressions;
  const char *program_name; /* the caller's options', while the call lasts; NULL: none */
} jk_link_set;

/* Makes a set from the caller's pieces and options (NULL: defaults);
 * `generated` for a generated kernel's, which copies every byte and takes
 * no CUDA piece. Errors name the API call `what` and the piece. */
jitk_status jk_link_set_make(jitk_engine *e, const char *what, const jitk_link_piece *pieces,
                             size_t n, const jitk_link_options *options, bool generated,
                             jk_link_set *set);
void jk_link_set_free(jitk_engine *e, jk_link_set *set);
/* The linker's input over `pieces` (the set's, or a generated kernel's
 * own source followed by them) with the set's decision and options. */
void jk_link_set_input(const jk_link_set *set, const jk_link_piece *pieces, size_t n,
                       jk_link_input *li);

/* How many launches of `k` took the plan of the launch before them
 * (elementwise.c's memo): for the tests. */
unsigned long long jk_elementwise_memo_hits(jitk_elementwise *k);
/* The same for a reduction's memo. */
unsigned long long jk_reduction_memo_hits(jitk_reduction *k);

#endif
