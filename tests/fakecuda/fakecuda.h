/*
 * The fake CUDA driver's inspection interface (fakecuda.c): what the last
 * launch received. A test loads the fake through the engine's
 * driver_library, then finds these functions in it with dlsym.
 */
#ifndef JITK_TESTS_FAKECUDA_H
#define JITK_TESTS_FAKECUDA_H

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
} fakecuda_launch;

/* The last launch, and how many launches succeeded so far. */
typedef const fakecuda_launch *(*fakecuda_last_launch_fn)(void);
typedef unsigned long long (*fakecuda_launch_count_fn)(void);
/* Copies `n` parameters of the given sizes at each later launch. */
typedef void (*fakecuda_record_params_fn)(const size_t *sizes, int n);

#endif
