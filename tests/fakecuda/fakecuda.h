/*
 * The fake CUDA driver's inspection interface (fakecuda.c): what the last
 * launch received. A test loads the fake through the engine's
 * driver_library, then finds these functions in it with dlsym.
 */
#ifndef JITK_TESTS_FAKECUDA_H
#define JITK_TESTS_FAKECUDA_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

enum { FAKECUDA_MAX_PARAMS = 64, FAKECUDA_PARAM_BYTES = 4096 };

typedef struct fakecuda_launch {
  const char *function; /* the kernel's name, valid while its module is loaded */
  unsigned grid[3], block[3], shared;
  void *stream;
  /* The bytes of each parameter, copied at the launch for the sizes that
   * fakecuda_record_params set (the driver alone does not know them). */
  int num_params;
  size_t param_offset[FAKECUDA_MAX_PARAMS];
  unsigned char param_bytes[FAKECUDA_PARAM_BYTES];
  int device; /* whose context was current */
  /* cuLaunchKernelEx's attributes (0 for cuLaunchKernel): the cluster's
   * shape and scheduling policy, a cooperative launch, programmatic
   * stream serialization. */
  unsigned cluster[3];
  int cluster_policy, cooperative, programmatic;
} fakecuda_launch;

/* What the stand-in's cuTensorMapEncodeTiled writes into the map's 128
 * bytes (where the driver writes its own encoding), so that a test can
 * read a launch's maps back from its parameters. */
typedef struct fakecuda_tensor_map {
  unsigned magic; /* FAKECUDA_TENSOR_MAP */
  unsigned rank, swizzle, data_type;
  unsigned long long address;
  unsigned long long dims[5], strides[4]; /* strides of dims 1.. in bytes */
  unsigned box[5];
} fakecuda_tensor_map;
#define FAKECUDA_TENSOR_MAP 0x70616d74u

/* The last cuMemsetD8Async: where, what, how many bytes, on which stream. */
typedef struct fakecuda_memset {
  void *dst;
  unsigned char value;
  size_t bytes;
  void *stream;
} fakecuda_memset;

/* The calling thread's last launch, and how many launches succeeded so
 * far: the calling thread's and those of threads that have ended. */
typedef const fakecuda_launch *(*fakecuda_last_launch_fn)(void);
typedef unsigned long long (*fakecuda_launch_count_fn)(void);
/* Copies `n` parameters of the given sizes at each later launch. */
typedef void (*fakecuda_record_params_fn)(const size_t *sizes, int n);
/* The calling thread's last memset, and (into *count) how many there
 * were, counted as launches are. */
typedef const fakecuda_memset *(*fakecuda_last_memset_fn)(unsigned long long *count);

/* Makes cuStreamIsCapturing say that `stream` captures a graph (on) or
 * that no stream does (off). */
typedef void (*fakecuda_set_capturing_fn)(void *stream, bool on);

/* Hooks a test may set (fakecuda_set_hooks, found with dlsym): `load`
 * sees each module's image as it is loaded and returns a tag the module
 * keeps; `launch` runs in each launch that passes its checks (with the
 * parameters as the driver receives them, before they go out of scope,
 * and its cluster dimensions, {0, 0, 0} for none) and fails it with
 * CUDA_ERROR_LAUNCH_FAILED by returning non-zero.
 * Either may be NULL. Not for tests whose threads launch at once. */
typedef void *(*fakecuda_load_hook)(void *user, const void *image, size_t size);
typedef int (*fakecuda_launch_hook)(void *user, void *tag, const char *function,
                                    const unsigned grid[3], const unsigned block[3],
                                    const unsigned cluster[3], unsigned shared, void **params);
typedef void (*fakecuda_set_hooks_fn)(fakecuda_load_hook load, fakecuda_launch_hook launch,
                                      void *user);
/* The multiprocessor count the device reports (132 by default); set it
 * before an engine is created, since engines read it once. */
typedef void (*fakecuda_set_multiprocessors_fn)(int n);

/* The inspection functions of the stand-in an engine has already loaded
 * from `path` (the same instance, so the launches it records are the
 * engine's); false when it is not loaded or lacks them. */
typedef struct fakecuda_api {
  void *lib;
  fakecuda_last_launch_fn last;
  fakecuda_launch_count_fn count;
  fakecuda_record_params_fn record;
  fakecuda_last_memset_fn memset;
  fakecuda_set_capturing_fn capture;
} fakecuda_api;

static inline bool fakecuda_api_open(const char *path, fakecuda_api *f) {
  f->lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (f->lib == NULL) return false;
  *(void **)&f->last = dlsym(f->lib, "fakecuda_last_launch");
  *(void **)&f->count = dlsym(f->lib, "fakecuda_launch_count");
  *(void **)&f->record = dlsym(f->lib, "fakecuda_record_params");
  *(void **)&f->memset = dlsym(f->lib, "fakecuda_last_memset");
  *(void **)&f->capture = dlsym(f->lib, "fakecuda_set_capturing");
  return f->last != NULL && f->count != NULL && f->record != NULL && f->memset != NULL &&
         f->capture != NULL;
}

#endif
