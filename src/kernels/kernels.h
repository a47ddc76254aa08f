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

/* How many launches of `k` took the plan of the launch before them
 * (elementwise.c's memo): for the tests. */
unsigned long long jk_elementwise_memo_hits(jitk_elementwise *k);
/* The same for a reduction's memo. */
unsigned long long jk_reduction_memo_hits(jitk_reduction *k);

#endif
