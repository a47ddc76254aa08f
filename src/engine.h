/*
 * The engine, at the top of src/: it wires the layers together (the
 * driver and device, NVRTC and the target, the kernel cache) and every
 * kernel kind works through it. Internal: hidden from the shared library's
 * exports; tests reach it by linking the static library.
 */
#ifndef JITK_SRC_ENGINE_H
#define JITK_SRC_ENGINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "cache/cache.h"
#include "driver/driver.h"
#include "nvrtc/nvrtc.h"

/* How the engine compiles: the target and what NVRTC makes for it. */
typedef struct jk_target {
  char arch[24]; /* "sm_90", "sm_90a", "compute_90" */
  int major;     /* 9 */
  int minor;     /* 0 */
  bool ptx;      /* true: PTX for the driver to compile, false: a cubin */
  bool specific; /* an "a" target (sm_90a): runs on exactly that chip */
} jk_target;

struct jitk_engine {
  /* The ground floor's part comes first: base/ reaches it through any
   * engine pointer (jk_base_of). */
  jk_base base;

  /* The driver and the device; drv.loaded is false on a compile-only
   * engine. */
  jk_driver drv;
  bool has_device;
  int ordinal;
  CUdevice device;
  CUcontext context;
  jitk_device_info info;
  /* jitk's own temporaries (split reductions) come from this pool, made
   * on first use under `lock`, which keeps freed memory for the next
   * launch instead of unmapping it at every synchronization as the
   * device's default pool does. NULL until then. */
  CUmemoryPool temp_pool;

  jk_target target;
  jk_nvrtc nvrtc;
  jk_cache cache;
  bool cache_initialized;

  /* Guards the module list and kernel creation; never held on the launch
   * path. */
  pthread_mutex_t lock;
  size_t live_modules;
  /* Serializes changes of a function's dynamic shared-memory limit, so
   * that the driver's value and the one jitk keeps agree (launches raise
   * it: jk_fn_set_max_dynamic_shared). */
  pthread_mutex_t attr_lock;
  /* Counts the attribute changes that may lower what a function allows
   * (an explicit dynamic shared-memory limit, the non-portable cluster
   * flag). Kernel handles of one source share a loaded function, each
   * keeping its own copy of those facts: a handle whose copy is older
   * than the latest change reads them from the driver again
   * (jk_fn_refresh). */
  unsigned long attr_epoch;

  /* Threads of the compile pool (jitk_parallel), fixed at creation. */
  int compile_threads;

  /* Devices whose memory the engine's kernels may use besides its own, bit
   * d for ordinal d (jitk_engine_enable_peer_access): set under `lock`,
   * read on the launch path without it. Their primary contexts are
   * retained until the engine goes. */
  _Atomic uint64_t peers;
};

/* The devices `peers` has a bit for: ordinals 0 to JK_PEER_BITS - 1. */
enum { JK_PEER_BITS = 64 };

_Static_assert(offsetof(struct jitk_engine, base) == 0,
               "base/ finds its part at the start of the engine");

/* Whether a DLPack array on device `ordinal` may go to the engine's
 * kernels: the engine's own device, or a peer enabled for it. */
static inline bool jk_device_usable(const jitk_engine *e, int64_t ordinal) {
  if (ordinal == e->ordinal) return true;
  if (ordinal < 0 || ordinal >= JK_PEER_BITS) return false;
  /* The field is atomic, the engine const for the reader only. */
  uint64_t p = atomic_load_explicit(&((jitk_engine *)e)->peers, memory_order_acquire);
  return (p >> ordinal) & 1;
}

/* Fails with JITK_ERR_NO_DEVICE on a compile-only engine. */
jitk_status jk_require_device(const jitk_engine *e, const char *what);

/* A temporary for jitk's own kernels, in stream order, from the engine's
 * pool; freed with jk_temp_free on the same stream. */
jitk_status jk_temp_alloc(jitk_engine *e, size_t bytes, jitk_stream stream, void **ptr);
void jk_temp_free(jitk_engine *e, void *ptr, jitk_stream stream);

/* Whether `stream` is capturing a CUDA graph (cuStreamIsCapturing);
 * false when the driver cannot tell. jitk compiles and loads nothing
 * while a launch's stream captures: the compile's work would not be in
 * the graph, and timing it would end the capture. */
jitk_status jk_stream_capturing(jitk_engine *e, jitk_stream stream, bool *capturing);

#endif
