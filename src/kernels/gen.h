/*
 * What the generated kernel kinds (elementwise and reduction kernels)
 * share: the parameter lists and options they are created from and the
 * table of specializations each kernel compiles on demand through the
 * kernel cache (gen.c); binding placeholders to the arguments of a launch,
 * outputs jitk allocates, the overlap rules and the packing of parameters
 * (args.c).
 */
#ifndef JITK_SRC_KERNELS_GEN_H
#define JITK_SRC_KERNELS_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "array/array.h"
#include "engine.h"
#include "codegen/codegen.h"
#include "expr/params.h"

#define JK_GEN_LABEL 80
/* The largest specialization record a kind may hash (jk_ew_spec, jk_red_spec);
 * the asserts below keep every kind's record within it. */
#define JK_GEN_SPEC_MAX 1024
_Static_assert(sizeof(jk_ew_spec) <= JK_GEN_SPEC_MAX, "jk_ew_spec outgrew JK_GEN_SPEC_MAX");
_Static_assert(sizeof(jk_red_spec) <= JK_GEN_SPEC_MAX, "jk_red_spec outgrew JK_GEN_SPEC_MAX");

/* One compiled specialization. */
typedef struct jk_gen_variant {
  unsigned char spec[JK_GEN_SPEC_MAX];
  uint64_t hash;
  jk_entry *entry;
  CUfunction fn[2];     /* the kind's entry points (a split reduction has two) */
  unsigned max_blocks;  /* blocks of fn[0] that fill the device once */
  unsigned max_threads; /* the most threads per block fn[0] can run with */
  size_t slot;          /* reduction: bytes per partial result */
  char *source;
} jk_gen_variant;

/* Writes the source of a specialization; prepares a loaded one (fills
 * fn[], max_blocks, max_threads, slot) with the engine's context current. */
typedef jitk_status (*jk_gen_source_fn)(void *ctx, const void *spec, char **source);
typedef jitk_status (*jk_gen_load_fn)(void *ctx, jk_gen_variant *v);

typedef struct jk_gen {
  jitk_engine *engine;
  char *name, *preamble;
  char **options;
  size_t num_options;
  jk_param_list params;
  int num_in, num_out;
  char (*labels)[JK_GEN_LABEL]; /* "argument `x`", "output `y`": per parameter */
  const char *generator;        /* the cache's generator tag */
  size_t spec_size;
  jk_gen_source_fn source_fn;
  jk_gen_load_fn load_fn;
  void *ctx;
  pthread_mutex_t lock; /* guards the variants and the sources */
  jk_gen_variant *variants;
  size_t num_variants;
  /* Specializations being built outside the lock (jk_gen_variant_get): a
   * link set may not be given while one is, as it would miss the pieces. */
  size_t building;
  size_t last_hit;         /* the variant the last lookup found, plus one; 0: none */
  const char *last_source; /* a variant's source, or failed_source */
  char *failed_source;     /* of the last specialization that failed */
  /* Compiled pieces every specialization is linked with (jk_gen_set_link),
   * or NULL. Set once, before the first specialization. */
  struct jk_link_set *link;
} jk_gen;

/*
 * Parses the lists, checks the name, copies the preamble and the NVRTC
 * options; `what` names the API call in messages. A kind whose outputs
 * cannot be raw passes the reason as `no_raw_outputs` (a raw output is then
 * JITK_ERR_PARSE with a caret under it); NULL allows them. On failure
 * everything is released (jk_gen_fini is safe on a zeroed or half-made
 * jk_gen).
 */
jitk_status jk_gen_init(jk_gen *g, jitk_engine *e, const char *what, const char *in_params,
                        const char *out_params, const char *name, const char *preamble,
                        const char *const *options, size_t num_options, const char *no_raw_outputs);
void jk_gen_fini(jk_gen *g);

/* Whether s is a C identifier. */
bool jk_gen_is_identifier(const char *s);

/* A copy of s (NULL stays NULL); *oom set when out of memory. */
char *jk_gen_dup(jitk_engine *e, const char *s, bool *oom);

/* Compiles the generated `source` of kernel `name` through the kernel
 * cache: program "<name>.cu", NVRTC's log rewritten to cite the user's
 * sections, `generator` in the key; `arch_specific` as in
 * jk_compile_input. */
jitk_status jk_gen_cache(jitk_engine *e, const char *name, const char *source, char *const *options,
                         size_t num_options, const char *generator, bool arch_specific,
                         const struct jk_link_set *link, jk_entry **out);

/* Links every specialization of the kernel compiled from now on with
 * `pieces` (jitk_elementwise_link, jitk_reduction_link; link.c): checked,
 * read and copied here. JITK_ERR_INVALID_ARGUMENT once the kernel has
 * pieces or a specialization already, and for what jk_link_set_make
 * refuses. */
jitk_status jk_gen_set_link(jk_gen *g, const char *what, const jitk_link_piece *pieces, size_t n,
                            const jitk_link_options *options);

/* The variant for `spec` (spec_size bytes, zero-padded), generated and
 * compiled when new; *copy gets its fields. `launching`, when not NULL,
 * is the stream of the launch that asks: a new variant is then refused
 * with JITK_ERR_STREAM_CAPTURE while that stream captures a graph, and
 * `prepare` names the call that would have made it beforehand. */
jitk_status jk_gen_variant_get(jk_gen *g, const void *spec, const jitk_stream *launching,
                               const char *prepare, jk_gen_variant *copy);

/* The variant for `spec` for the kinds' _compile calls: *source gets the
 * source tried (also when it failed), *module (when not NULL) a module
 * handle on the compiled image. */
jitk_status jk_gen_compile(jk_gen *g, const void *spec, const char **source, jitk_module **module);

/* The source of the last specialization used (the kinds' _source calls). */
jitk_status jk_gen_source(jk_gen *g, const char *what, const char **source);

/* The arguments of a launch, classified. */
typedef struct jk_gen_args {
  jk_view views[JK_MAX_EW_PARAMS];
  bool is_array[JK_MAX_EW_PARAMS];
  jitk_dtype bound[JK_MAX_EW_PARAMS]; /* per placeholder */
  jitk_dtype dtype[JK_MAX_EW_PARAMS]; /* per parameter */
  /* The non-raw array inputs and given outputs, to broadcast. */
  const jk_view *bviews[JK_MAX_EW_PARAMS];
  const char *bnames[JK_MAX_EW_PARAMS];
  int bparam[JK_MAX_EW_PARAMS]; /* the parameter of each */
  int nb;
  bool need_alloc;
} jk_gen_args;

/* Checks the argument count and reads the tensors. Reads the tensors'
 * descriptions only, never their memory or the driver, so it works on a
 * compile-only engine. An output left to jitk is an error unless
 * `can_allocate` (a launch with an `outputs` array, or a question about
 * the outputs' shapes). */
jitk_status jk_gen_classify(jk_gen *g, const char *what, const jitk_arg *args, size_t nargs,
                            bool can_allocate, jk_gen_args *a);

/* Binds the placeholders of classified arguments (arrays first, as CuPy:
 * an array's dtype wins over a scalar's) and checks fixed-type arrays.
 * Callers bind after broadcasting, so that arguments wrong in both shape
 * and type get the shape's error, as under CuPy. */
jitk_status jk_gen_bind(const jk_gen *g, const jitk_arg *args, size_t nargs, jk_gen_args *a);

/* A new C-contiguous array from the memory pool, as a DLManagedTensor
 * whose deleter frees it in order on `stream`. */
jitk_status jk_gen_allocate(jitk_engine *e, jitk_stream stream, jitk_dtype dtype, int ndim,
                            const int64_t *shape, DLManagedTensor **out, jk_view *view);

/* Releases what a failed launch allocated. */
void jk_gen_release_outputs(int num_out, DLManagedTensor **outputs);
/* The end of a launch that may have allocated outputs (`made`): on
 * failure they are released and `st` returned, on success they go into
 * `outputs` (when not NULL). */
jitk_status jk_gen_finish_outputs(jitk_status st, int num_out, DLManagedTensor **made,
                                  DLManagedTensor **outputs);

/* An output must not share memory with any non-raw input unless it is
 * exactly that input, nor with another non-raw output; a non-raw output
 * not with itself either (a zero stride). Raw outputs may share memory
 * with raw arrays. Outputs not made yet (not arrays) are skipped. */
jitk_status jk_gen_check_overlap(const jk_gen *g, const jk_gen_args *a);

/* Whether every raw array's elements lie within 2^31 bytes of its start,
 * as the non-raw arrays' must for 32-bit indices: the code indexes a raw
 * array with expressions of the element's index and of its sizes
 * (`x[i * 4]`, `r[_j * 4096]`), which in 32 bits would wrap on a larger
 * one, as CuPy's 32-bit indexing is chosen only where every array is
 * small. */
bool jk_gen_raw_fits_32(const jk_gen *g, const jk_gen_args *a);

/* --- The launch memo (args.c): a kernel's last plan, reused by a launch
 * whose arguments have the same layout. --- */

/* What a launch's plan depends on, per argument, besides what the plan's
 * views record (each array's extents, and its strides when it has them):
 * the rest of its DLTensor, and the alignment of its first element, which
 * decides the vector width. A scalar's plan depends on its dtype alone. */
typedef struct jk_memo_arg {
  jitk_arg_kind kind;
  jitk_dtype dtype; /* a scalar's */
  DLDevice device;
  DLDataType dl;
  bool strided;        /* the tensor has strides (not NULL) */
  unsigned char align; /* the first element's address modulo 16 */
} jk_memo_arg;

/* Records the layout of `nargs` arguments; false when one cannot be
 * recorded (an output left to jitk, which the next launch allocates
 * again). */
bool jk_memo_record(jk_memo_arg *rec, const jitk_arg *args, size_t nargs);

/* Whether the arguments have the recorded layout: `rec` for the kinds,
 * dtypes, devices and alignments, the plan's `views` for the extents and
 * strides. Reads the tensors' descriptions only. */
bool jk_memo_matches(const jk_memo_arg *rec, const jk_view *views, const jitk_arg *args,
                     size_t nargs);

/* Packs parameter p when it is raw (its jitk::array descriptor) or a
 * scalar (its value, converted to the parameter's dtype) at *cur. */
jitk_status jk_gen_push_other(const jk_gen *g, const jk_gen_args *a, const jitk_arg *args, int p,
                              bool raw, void **kp, int *np, unsigned char **cur);

/* Multiply-shift constants for dividing by d without a divide (see
 * templates/jitk/elementwise.cuh). */
void jk_gen_magic(uint64_t d, bool wide, uint64_t *magic, unsigned *shift);

/* Whether `name` is in the comma- or space-separated `list`. */
bool jk_gen_listed(const char *list, const char *name);

/* Every name in the comma-separated `list` (labelled `label` in messages)
 * is a parameter of the kernel, and none is listed twice: JITK_ERR_PARSE
 * with a caret otherwise. A name that matches nothing would be ignored,
 * and compile something other than what was asked for. */
jitk_status jk_gen_check_names(const jk_gen *g, const char *label, const char *list);

/* The outputs' specs (jitk_*_outputs): given outputs (arrays in `a`)
 * report their own dtype and shape, the others their bound dtype and the
 * shape a launch would allocate (`ndim`, `shape`). */
void jk_gen_output_specs(const jk_gen *g, const jk_gen_args *a, int ndim, const int64_t *shape,
                         jitk_output_spec *specs);

/* jitk_*_num_params and jitk_*_param on a kind's jk_gen; `what` names the
 * API call in messages. */
jitk_status jk_gen_num_params(const jk_gen *g, int *num_in, int *num_out);
jitk_status jk_gen_param(const jk_gen *g, const char *what, int index, jitk_param_info *info);

/* Appends one kernel parameter: its bytes at *cursor, its address in kp.
 * The padding up to the next 8 bytes is zeroed, so that a launch's
 * parameter bytes do not depend on what the stack held before (the tests
 * compare launches byte for byte). */
#define JK_PUSH(kp, np, cursor, value)                      \
  do {                                                      \
    size_t jk_push_room = (sizeof(value) + 7) & ~(size_t)7; \
    memset((cursor), 0, jk_push_room);                      \
    memcpy((cursor), &(value), sizeof(value));              \
    (kp)[(np)++] = (cursor);                                \
    (cursor) += jk_push_room;                               \
  } while (0)

#endif
