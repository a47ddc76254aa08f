/*
 * A stand-in for libcuda.so.1 on machines without a GPU, for two uses:
 * measuring the host time jitk adds to a launch (its own work, apart from
 * the driver's), and testing what jitk hands the driver (the packed
 * parameters, the launch dimensions) in CI.
 *
 * It answers as one Hopper device (compute capability 9.0, 132
 * multiprocessors) would, or as FAKECUDA_DEVICES of them, each with its
 * primary context, all reaching each other's memory unless
 * FAKECUDA_NO_PEER is set. "Device memory" is host memory from malloc, so
 * copies and memsets do what they say, but no kernel ever runs: a launch
 * checks its dimensions against the device's limits, records what it was
 * given and returns. Modules keep a copy of their image, and a function
 * or global is found only if its name is in the image's bytes.
 *
 * Only cuGetProcAddress_v2 is exported, as jitk resolves every other
 * entry point through it; the fakecuda_* functions let a test read what
 * the calling thread's last launch received, or run launches itself
 * (fakecuda_set_hooks: tests/emu runs generated kernels on the CPU). Threads may call it at once
 * (an engine per fake device, each on its own thread): what they share,
 * the counts and the table of allocations, is guarded.
 */
#define _GNU_SOURCE /* memmem */
#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakecuda.h"

#define EXPORT __attribute__((visibility("default")))

/* What the calling thread's last launch received, for tests, and how many
 * bytes of each parameter to copy. Per thread, so that threads launching
 * at once (one per fake device) neither race nor wait for each other; the
 * counts are over every thread. */
static _Thread_local fakecuda_launch last_launch;
/* Launches and memsets are counted per thread, each thread's counts added
 * to the `ended` ones when it ends: one shared counter bumped by threads
 * on two cores would cost each launch a cache line's trip between them.
 * A thread sees its own counts and those of threads that ended. */
typedef struct counts {
  unsigned long long launches, memsets, syncs;
} counts;
static counts ended;
static _Thread_local counts mine;
static _Thread_local bool counted;
static pthread_key_t counts_key;
static pthread_once_t counts_once = PTHREAD_ONCE_INIT;
static _Thread_local fakecuda_memset last_memset;
static size_t record_sizes[FAKECUDA_MAX_PARAMS];
static int record_count;
/* A test's hooks (fakecuda_set_hooks) and the multiprocessor count the
 * device reports (fakecuda_set_multiprocessors). */
static fakecuda_load_hook load_hook;
static fakecuda_launch_hook launch_hook;
static void *hook_user;
static int multiprocessors = 132;

/* A primary context per device (FAKECUDA_DEVICES of them, at most
 * FAKE_DEVICES), the calling thread's current one, and which contexts may
 * reach which devices' memory (cuCtxEnablePeerAccess). */
enum { FAKE_DEVICES = 8 };
static char contexts[FAKE_DEVICES];
#define the_context (contexts[0])
static _Thread_local CUcontext current;
static unsigned peer_enabled[FAKE_DEVICES]; /* bit p of [d]: device d's context reaches p */

typedef struct fake_module {
  size_t size;
  unsigned char *image;
  void *tag; /* what the load hook returned */
  struct fake_function *functions;
  struct fake_global *globals;
} fake_module;

typedef struct fake_function {
  struct fake_function *next;
  fake_module *module;
  int max_dynamic_shared;
  int carveout; /* -1 (no preference) until set, as on a GPU */
  char name[];
} fake_function;

typedef struct fake_global {
  struct fake_global *next;
  void *memory;
  char name[];
} fake_global;

typedef struct fake_event {
  double seconds;
} fake_event;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static CUresult fk_cuGetErrorName(CUresult r, const char **s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: *s = "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

static CUresult fk_cuGetErrorString(CUresult r, const char **s) {
  const char *name;
  CUresult st = fk_cuGetErrorName(r, &name);
  *s = st == CUDA_SUCCESS ? "reported by the fake driver" : "unknown error";
  return st;
}

static CUresult fk_cuInit(unsigned int flags) {
  return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fk_cuDriverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}

static int device_count(void) {
  const char *v = getenv("FAKECUDA_DEVICES");
  int n = v != NULL ? atoi(v) : 1;
  return n < 0 ? 0 : n > FAKE_DEVICES ? FAKE_DEVICES : n;
}

/* The device of a context, or -1. */
static int device_of(CUcontext c) {
  for (int d = 0; d < FAKE_DEVICES; d++)
    if (c == (CUcontext)(void *)&contexts[d]) return d;
  return -1;
}

static CUresult fk_cuDeviceGetCount(int *n) {
  *n = device_count();
  return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceGetName(char *name, int len, CUdevice d) {
  (void)d;
  snprintf(name, (size_t)len, "fake CUDA device (no GPU)");
  return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = multiprocessors; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 48 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 227 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 228 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = 1; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceTotalMem(size_t *bytes, CUdevice d) {
  (void)d;
  *bytes = (size_t)141 << 30;
  return CUDA_SUCCESS;
}

static CUresult fk_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *c = (CUcontext)(void *)&contexts[d];
  return CUDA_SUCCESS;
}

static CUresult fk_cuDevicePrimaryCtxRelease(CUdevice d) {
  return d < 0 || d >= device_count() ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

static CUresult fk_cuCtxGetCurrent(CUcontext *c) {
  *c = current;
  return CUDA_SUCCESS;
}

static CUresult fk_cuCtxSetCurrent(CUcontext c) {
  current = c;
  return CUDA_SUCCESS;
}

static CUresult fk_cuCtxGetDevice(CUdevice *d) {
  if (current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  *d = device_of(current);
  return CUDA_SUCCESS;
}

/* Every pair of fake devices can reach each other, unless
 * FAKECUDA_NO_PEER is set. */
static CUresult fk_cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
  if (d < 0 || d >= device_count() || peer < 0 || peer >= device_count())
    return CUDA_ERROR_INVALID_DEVICE;
  *can = d != peer && getenv("FAKECUDA_NO_PEER") == NULL;
  return CUDA_SUCCESS;
}

static CUresult fk_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  int me = device_of(current), other = device_of(peer);
  if (me < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (other < 0 || other == me) return CUDA_ERROR_INVALID_DEVICE;
  if (getenv("FAKECUDA_NO_PEER") != NULL) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  unsigned bit = 1u << other;
  if (__atomic_fetch_or(&peer_enabled[me], bit, __ATOMIC_RELAXED) & bit)
    return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}

static CUresult fk_cuCtxSynchronize(void) {
  return current == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

/* The image's size: an ELF's from its section headers' end, else (PTX, a
 * fatbin) up to the first NUL or 64 MiB, which is all the fake needs to
 * look for names in it. */
static size_t image_size(const unsigned char *p) {
  if (memcmp(p, "\177ELF", 4) == 0 && p[4] == 2) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
  }
  if (memcmp(p, "\x50\xed\x55\xba", 4) == 0) {
    uint64_t size;
    uint16_t header;
    memcpy(&header, p + 6, 2);
    memcpy(&size, p + 8, 8);
    return (size_t)(header + size);
  }
  return strnlen((const char *)p, (size_t)64 << 20);
}

static CUresult fk_cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n,
                                      CUjit_option *opts, void **vals) {
  (void)n;
  (void)opts;
  (void)vals;
  fake_module *fm = calloc(1, sizeof *fm);
  if (fm == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  fm->size = image_size(image);
  fm->image = malloc(fm->size + 1);
  if (fm->image == NULL) {
    free(fm);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memcpy(fm->image, image, fm->size);
  if (load_hook != NULL) fm->tag = load_hook(hook_user, fm->image, fm->size);
  *m = (CUmodule)(void *)fm;
  return CUDA_SUCCESS;
}

static CUresult fk_cuModuleUnload(CUmodule m) {
  fake_module *fm = (fake_module *)(void *)m;
  if (fm == NULL) return CUDA_ERROR_INVALID_VALUE;
  while (fm->functions != NULL) {
    fake_function *f = fm->functions;
    fm->functions = f->next;
    free(f);
  }
  while (fm->globals != NULL) {
    fake_global *g = fm->globals;
    fm->globals = g->next;
    free(g->memory);
    free(g);
  }
  free(fm->image);
  free(fm);
  return CUDA_SUCCESS;
}

/* Whether `name` is in the image as a whole string (a symbol name). */
static int has_name(const fake_module *fm, const char *name) {
  size_t n = strlen(name) + 1;
  return n > 1 && memmem(fm->image, fm->size, name, n) != NULL;
}

static CUresult fk_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  fake_module *fm = (fake_module *)(void *)m;
  if (fm == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
  for (fake_function *x = fm->functions; x != NULL; x = x->next)
    if (strcmp(x->name, name) == 0) {
      *f = (CUfunction)(void *)x;
      return CUDA_SUCCESS;
    }
  if (!has_name(fm, name)) return CUDA_ERROR_NOT_FOUND;
  fake_function *x = calloc(1, sizeof *x + strlen(name) + 1);
  if (x == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  strcpy(x->name, name);
  x->module = fm;
  x->max_dynamic_shared = 48 << 10; /* the default opt-in, with no static shared memory */
  x->carveout = -1;
  x->next = fm->functions;
  fm->functions = x;
  *f = (CUfunction)(void *)x;
  return CUDA_SUCCESS;
}

static CUresult fk_cuModuleGetGlobal(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name) {
  fake_module *fm = (fake_module *)(void *)m;
  if (fm == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
  enum { GLOBAL_BYTES = 256 };
  fake_global *g = fm->globals;
  while (g != NULL && strcmp(g->name, name) != 0) g = g->next;
  if (g == NULL) {
    if (!has_name(fm, name)) return CUDA_ERROR_NOT_FOUND;
    g = calloc(1, sizeof *g + strlen(name) + 1);
    if (g == NULL || (g->memory = calloc(1, GLOBAL_BYTES)) == NULL) {
      free(g);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    strcpy(g->name, name);
    g->next = fm->globals;
    fm->globals = g;
  }
  if (p != NULL) *p = (CUdeviceptr)(uintptr_t)g->memory;
  if (bytes != NULL) *bytes = GLOBAL_BYTES;
  return CUDA_SUCCESS;
}

static CUresult fk_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
  fake_function *x = (fake_function *)(void *)f;
  if (x == NULL) return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = x->max_dynamic_shared; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *v = x->carveout; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}

static CUresult fk_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  fake_function *x = (fake_function *)(void *)f;
  if (x == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (v < 0 || v > 227 << 10) return CUDA_ERROR_INVALID_VALUE;
    x->max_dynamic_shared = v;
  } else if (a == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
    if (v < -1 || v > 100) return CUDA_ERROR_INVALID_VALUE;
    x->carveout = v;
  }
  return CUDA_SUCCESS;
}

/* Parameters are read from the image by jitk; the fake knows none. */
static CUresult fk_cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size) {
  (void)f;
  (void)i;
  (void)off;
  (void)size;
  return CUDA_ERROR_INVALID_VALUE;
}

/* Refuses what the driver's documentation for cuTensorMapEncodeTiled
 * says it refuses (tiled mode, no interleave), so that a map jitk encodes
 * wrongly fails here as it would on a GPU; a valid map is written as
 * fakecuda_tensor_map. */
static CUresult fk_cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank,
                                          void *addr, const cuuint64_t *dims,
                                          const cuuint64_t *strides, const cuuint32_t *box,
                                          const cuuint32_t *elem_strides, CUtensorMapInterleave il,
                                          CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                          CUtensorMapFloatOOBfill fill) {
  (void)l2, (void)fill;
  static const unsigned char bytes[] = {
      [CU_TENSOR_MAP_DATA_TYPE_UINT8] = 1,       [CU_TENSOR_MAP_DATA_TYPE_UINT16] = 2,
      [CU_TENSOR_MAP_DATA_TYPE_UINT32] = 4,      [CU_TENSOR_MAP_DATA_TYPE_INT32] = 4,
      [CU_TENSOR_MAP_DATA_TYPE_UINT64] = 8,      [CU_TENSOR_MAP_DATA_TYPE_INT64] = 8,
      [CU_TENSOR_MAP_DATA_TYPE_FLOAT16] = 2,     [CU_TENSOR_MAP_DATA_TYPE_FLOAT32] = 4,
      [CU_TENSOR_MAP_DATA_TYPE_FLOAT64] = 8,     [CU_TENSOR_MAP_DATA_TYPE_BFLOAT16] = 2,
      [CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ] = 4, [CU_TENSOR_MAP_DATA_TYPE_TFLOAT32] = 4,
      [CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ] = 4};
  if (map == NULL || rank == 0 || rank > 5 || (unsigned)t >= sizeof bytes || bytes[t] == 0 ||
      il != CU_TENSOR_MAP_INTERLEAVE_NONE || ((uintptr_t)addr & 15) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  const unsigned es = bytes[t];
  for (cuuint32_t i = 0; i < rank; i++) {
    if (dims[i] == 0 || dims[i] > (1ull << 32) || box[i] == 0 || box[i] > 256 ||
        elem_strides[i] == 0 || elem_strides[i] > 8)
      return CUDA_ERROR_INVALID_VALUE;
    if (i + 1 < rank && (strides[i] % 16 != 0 || strides[i] >= (1ull << 40)))
      return CUDA_ERROR_INVALID_VALUE;
  }
  /* The box's rows are whole 16-byte chunks, within the swizzle's span. */
  const unsigned row = box[0] * es;
  const unsigned span = sw == CU_TENSOR_MAP_SWIZZLE_32B    ? 32
                        : sw == CU_TENSOR_MAP_SWIZZLE_64B  ? 64
                        : sw == CU_TENSOR_MAP_SWIZZLE_128B ? 128
                                                           : 0;
  if (row % 16 != 0 || (span != 0 && row > span)) return CUDA_ERROR_INVALID_VALUE;
  fakecuda_tensor_map m;
  memset(&m, 0, sizeof m);
  m.magic = FAKECUDA_TENSOR_MAP;
  m.rank = rank;
  m.swizzle = (unsigned)sw;
  m.data_type = (unsigned)t;
  m.address = (unsigned long long)(uintptr_t)addr;
  for (cuuint32_t i = 0; i < rank; i++) {
    m.dims[i] = dims[i];
    m.box[i] = box[i];
    if (i + 1 < rank) m.strides[i] = strides[i];
  }
  _Static_assert(sizeof m <= sizeof *map, "the record fits a map");
  memset(map, 0, sizeof *map);
  memcpy(map, &m, sizeof m);
  return CUDA_SUCCESS;
}

/* The driver's own linker is not faked: jitk uses nvJitLink first. */
static CUresult fk_cuLinkCreate(unsigned int n, CUjit_option *o, void **v, CUlinkState *s) {
  (void)n, (void)o, (void)v, (void)s;
  return CUDA_ERROR_NOT_SUPPORTED;
}
static CUresult fk_cuLinkAddData(CUlinkState s, CUjitInputType t, void *d, size_t z,
                                 const char *name, unsigned int n, CUjit_option *o, void **v) {
  (void)s, (void)t, (void)d, (void)z, (void)name, (void)n, (void)o, (void)v;
  return CUDA_ERROR_NOT_SUPPORTED;
}
static CUresult fk_cuLinkAddFile(CUlinkState s, CUjitInputType t, const char *path, unsigned int n,
                                 CUjit_option *o, void **v) {
  (void)s, (void)t, (void)path, (void)n, (void)o, (void)v;
  return CUDA_ERROR_NOT_SUPPORTED;
}
static CUresult fk_cuLinkComplete(CUlinkState s, void **cubin, size_t *size) {
  (void)s, (void)cubin, (void)size;
  return CUDA_ERROR_NOT_SUPPORTED;
}
static CUresult fk_cuLinkDestroy(CUlinkState s) {
  (void)s;
  return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult check_dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared, const fake_function *f) {
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (gx > 2147483647u || gy > 65535 || gz > 65535) return CUDA_ERROR_INVALID_VALUE;
  if (bx > 1024 || by > 1024 || bz > 64 || (unsigned long long)bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (shared > (unsigned)f->max_dynamic_shared) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static void counts_end(void *p) {
  const counts *c = p;
  __atomic_fetch_add(&ended.launches, c->launches, __ATOMIC_RELAXED);
  __atomic_fetch_add(&ended.memsets, c->memsets, __ATOMIC_RELAXED);
  __atomic_fetch_add(&ended.syncs, c->syncs, __ATOMIC_RELAXED);
}

static void make_counts_key(void) { pthread_key_create(&counts_key, counts_end); }

/* This thread's counts, to be added to `ended` when it ends. */
static counts *my_counts(void) {
  if (!counted) {
    pthread_once(&counts_once, make_counts_key);
    pthread_setspecific(counts_key, &mine);
    counted = true;
  }
  return &mine;
}

/* `cluster`: the launch's cluster dimensions, {0, 0, 0} for none. */
static CUresult record_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                              void **extra, const unsigned cluster[3]) {
  fake_function *x = (fake_function *)(void *)f;
  if (x == NULL || current == NULL)
    return current == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_VALUE;
  CUresult r = check_dims(gx, gy, gz, bx, by, bz, shared, x);
  if (r != CUDA_SUCCESS) return r;
  last_launch.function = x->name;
  last_launch.grid[0] = gx, last_launch.grid[1] = gy, last_launch.grid[2] = gz;
  last_launch.block[0] = bx, last_launch.block[1] = by, last_launch.block[2] = bz;
  last_launch.shared = shared;
  last_launch.stream = s;
  last_launch.device = device_of(current);
  memcpy(last_launch.cluster, cluster, sizeof last_launch.cluster);
  last_launch.cluster_policy = last_launch.cooperative = last_launch.programmatic = 0;
  last_launch.num_params = 0;
  size_t at = 0;
  /* A NULL parameter address ends the list early: jitk's generated
   * launches end theirs so, and a test may then ask for more parameters
   * than a launch has. */
  for (int i = 0; i < record_count && params != NULL && extra == NULL && params[i] != NULL; i++) {
    size_t n = record_sizes[i], align = n >= 8 ? 8 : n > 0 ? n : 1;
    at = (at + align - 1) / align * align;
    if (at + n > sizeof last_launch.param_bytes) break;
    memcpy(last_launch.param_bytes + at, params[i], n);
    last_launch.param_offset[i] = at;
    last_launch.num_params = i + 1;
    at += n;
  }
  if (launch_hook != NULL && params != NULL && extra == NULL) {
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    if (launch_hook(hook_user, x->module->tag, x->name, grid, block, cluster, shared, params) != 0)
      return CUDA_ERROR_LAUNCH_FAILED;
  }
  my_counts()->launches++;
  return CUDA_SUCCESS;
}

static CUresult fk_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                  unsigned by, unsigned bz, unsigned shared, CUstream s,
                                  void **params, void **extra) {
  static const unsigned none[3] = {0, 0, 0};
  return record_launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra, none);
}

static CUresult fk_cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
                                    void **extra) {
  /* The clusters first: the launch hook runs them. */
  unsigned cluster[3] = {0, 0, 0};
  for (unsigned i = 0; i < c->numAttrs; i++) {
    const CUlaunchAttribute *a = &c->attrs[i];
    if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = a->value.clusterDim.x;
      cluster[1] = a->value.clusterDim.y;
      cluster[2] = a->value.clusterDim.z;
    }
  }
  CUresult r = record_launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                             c->blockDimZ, c->sharedMemBytes, c->hStream, params, extra, cluster);
  for (unsigned i = 0; r == CUDA_SUCCESS && i < c->numAttrs; i++) {
    const CUlaunchAttribute *a = &c->attrs[i];
    if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      last_launch.cooperative = a->value.cooperative;
    } else if (a->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
      last_launch.programmatic = a->value.programmaticStreamSerializationAllowed;
    } else if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) {
      last_launch.cluster_policy = (int)a->value.clusterSchedulingPolicyPreference;
    }
  }
  return r;
}

static CUresult fk_cuOccupancyMaxPotentialBlockSize(int *grid, int *block, CUfunction f,
                                                    CUoccupancyB2DSize smem, size_t dyn,
                                                    int limit) {
  (void)f, (void)smem, (void)dyn;
  int b = limit > 0 && limit < 1024 ? limit : 1024;
  *block = b;
  *grid = multiprocessors * (2048 / b);
  return CUDA_SUCCESS;
}

static CUresult fk_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int block,
                                                               size_t dyn) {
  (void)f, (void)dyn;
  if (block <= 0 || block > 1024) return CUDA_ERROR_INVALID_VALUE;
  *n = 2048 / block < 32 ? 2048 / block : 32;
  return CUDA_SUCCESS;
}

/* The fake's own allocations and the device current at each, so that
 * cuPointerGetAttribute can name a device other than 0; any other address
 * (a caller's host buffer) is device 0's. */
enum { FAKE_BLOCKS = 4096 };
static struct {
  uintptr_t start;
  size_t size;
  int device;
} blocks[FAKE_BLOCKS];
static int blocks_top; /* no block at or above this index */
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;

static int device_of_pointer(CUdeviceptr p) {
  int d = 0;
  pthread_mutex_lock(&blocks_lock);
  for (int i = 0; i < blocks_top; i++)
    if (blocks[i].size != 0 && p >= blocks[i].start && p - blocks[i].start < blocks[i].size) {
      d = blocks[i].device;
      break;
    }
  pthread_mutex_unlock(&blocks_lock);
  return d;
}

/* Blocks start on 256 bytes, as the driver's do (jitk's pooled buffers
 * rely on it for rows on 128-byte lines), and end where asked, so that
 * AddressSanitizer still sees a byte read past them. */
static CUresult plain_alloc(CUdeviceptr *p, size_t n) {
  void *m = NULL;
  if (posix_memalign(&m, 256, n ? n : 1) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}

/* Only cuMemAlloc's blocks are in the table: jitk allocates in stream
 * order (cuMemAllocAsync, its pool), which stays off the table's lock, so
 * that threads launching at once on their devices do not wait for each
 * other inside the stand-in. */
static CUresult fk_cuMemAlloc(CUdeviceptr *p, size_t n) {
  CUresult r = plain_alloc(p, n);
  if (r != CUDA_SUCCESS) return r;
  uintptr_t m = (uintptr_t)*p;
  int d = device_of(current);
  if (d > 0) {
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < FAKE_BLOCKS; i++)
      if (blocks[i].size == 0) {
        blocks[i].start = m;
        blocks[i].size = n ? n : 1;
        blocks[i].device = d;
        if (i >= blocks_top) __atomic_store_n(&blocks_top, i + 1, __ATOMIC_RELAXED);
        break;
      }
    pthread_mutex_unlock(&blocks_lock);
  }
  return CUDA_SUCCESS;
}

static CUresult fk_cuMemFree(CUdeviceptr p) {
  /* The table is only ever filled from device 1 on: with one device, a
   * free costs what free costs. */
  if (__atomic_load_n(&blocks_top, __ATOMIC_RELAXED) > 0) {
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < blocks_top; i++)
      if (blocks[i].size != 0 && blocks[i].start == p) blocks[i].size = 0;
    int top = blocks_top;
    while (top > 0 && blocks[top - 1].size == 0) top--;
    __atomic_store_n(&blocks_top, top, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&blocks_lock);
  }
  free((void *)(uintptr_t)p);
  return CUDA_SUCCESS;
}

static CUresult fk_cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
  (void)s;
  return plain_alloc(p, n);
}

static CUresult fk_cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  (void)s;
  free((void *)(uintptr_t)p);
  return CUDA_SUCCESS;
}

static char the_pool;

static CUresult fk_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  (void)props;
  *pool = (CUmemoryPool)(void *)&the_pool;
  return CUDA_SUCCESS;
}

static CUresult fk_cuMemPoolDestroy(CUmemoryPool pool) {
  return pool == (CUmemoryPool)(void *)&the_pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fk_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void *v) {
  (void)a, (void)v;
  return fk_cuMemPoolDestroy(pool);
}

static CUresult fk_cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool,
                                           CUstream s) {
  (void)pool, (void)s;
  return plain_alloc(p, n);
}

static CUresult fk_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  (void)s;
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}

static CUresult fk_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return fk_cuMemcpyAsync(dst, src, n, NULL);
}

static CUresult fk_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  memset((void *)(uintptr_t)dst, v, n);
  last_memset.dst = (void *)(uintptr_t)dst;
  last_memset.value = v;
  last_memset.bytes = n;
  last_memset.stream = s;
  my_counts()->memsets++;
  return CUDA_SUCCESS;
}

/* Every address is device memory: of the device its allocation was made
 * on when the fake made it, else of device 0 (the fake cannot tell a
 * caller's host buffer from device memory). */
static CUresult pointer_attribute(void *out, CUpointer_attribute a, CUdeviceptr p) {
  switch (a) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int *)out = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)out = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)out = device_of_pointer(p); break;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *(CUcontext *)out = (CUcontext)(void *)&contexts[device_of_pointer(p)];
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

static CUresult fk_cuPointerGetAttribute(void *out, CUpointer_attribute a, CUdeviceptr p) {
  return pointer_attribute(out, a, p);
}

static CUresult fk_cuPointerGetAttributes(unsigned int n, CUpointer_attribute *a, void **out,
                                          CUdeviceptr p) {
  for (unsigned int i = 0; i < n; i++) {
    CUresult r = pointer_attribute(out[i], a[i], p);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

static CUresult fk_cuStreamCreate(CUstream *s, unsigned int flags) {
  (void)flags;
  *s = malloc(1);
  return *s != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fk_cuStreamDestroy(CUstream s) {
  free(s);
  return CUDA_SUCCESS;
}

/* The stream a test says is capturing a graph (fakecuda_set_capturing). */
static CUstream capturing_stream;
static bool capture_on;

static CUresult fk_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status) {
  *status = capture_on && s == capturing_stream ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

static _Thread_local CUstream last_synced;

static CUresult fk_cuStreamSynchronize(CUstream s) {
  my_counts()->syncs++;
  last_synced = s;
  return CUDA_SUCCESS;
}

static CUresult fk_cuEventCreate(CUevent *e, unsigned int flags) {
  (void)flags;
  *e = calloc(1, sizeof(fake_event));
  return *e != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fk_cuEventDestroy(CUevent e) {
  free(e);
  return CUDA_SUCCESS;
}

static CUresult fk_cuEventRecord(CUevent e, CUstream s) {
  (void)s;
  ((fake_event *)(void *)e)->seconds = now();
  return CUDA_SUCCESS;
}

static CUresult fk_cuEventSynchronize(CUevent e) {
  (void)e;
  return CUDA_SUCCESS;
}

static CUresult fk_cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  *ms = (float)((((fake_event *)(void *)b)->seconds - ((fake_event *)(void *)a)->seconds) * 1e3);
  return CUDA_SUCCESS;
}

/* Each fake has the prototype cuda.h gives the entry point it stands for
 * (through cuda.h's macros, the versioned one: cuMemAlloc_v2), so that the
 * caller's function-pointer types are right. */
#define FAKECUDA_SAME_TYPE(name)                                                          \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&fk_##name), __typeof__(&name)), \
                 "fk_" #name " has the wrong prototype");
FAKECUDA_SAME_TYPE(cuGetErrorName)
FAKECUDA_SAME_TYPE(cuGetErrorString)
FAKECUDA_SAME_TYPE(cuInit)
FAKECUDA_SAME_TYPE(cuDriverGetVersion)
FAKECUDA_SAME_TYPE(cuDeviceGetCount)
FAKECUDA_SAME_TYPE(cuDeviceGet)
FAKECUDA_SAME_TYPE(cuDeviceCanAccessPeer)
FAKECUDA_SAME_TYPE(cuCtxEnablePeerAccess)
FAKECUDA_SAME_TYPE(cuDeviceGetName)
FAKECUDA_SAME_TYPE(cuDeviceGetAttribute)
FAKECUDA_SAME_TYPE(cuDeviceTotalMem)
FAKECUDA_SAME_TYPE(cuDevicePrimaryCtxRetain)
FAKECUDA_SAME_TYPE(cuDevicePrimaryCtxRelease)
FAKECUDA_SAME_TYPE(cuCtxGetCurrent)
FAKECUDA_SAME_TYPE(cuCtxSetCurrent)
FAKECUDA_SAME_TYPE(cuCtxGetDevice)
FAKECUDA_SAME_TYPE(cuCtxSynchronize)
FAKECUDA_SAME_TYPE(cuModuleLoadDataEx)
FAKECUDA_SAME_TYPE(cuModuleUnload)
FAKECUDA_SAME_TYPE(cuModuleGetFunction)
FAKECUDA_SAME_TYPE(cuModuleGetGlobal)
FAKECUDA_SAME_TYPE(cuFuncGetAttribute)
FAKECUDA_SAME_TYPE(cuFuncSetAttribute)
FAKECUDA_SAME_TYPE(cuFuncGetParamInfo)
FAKECUDA_SAME_TYPE(cuTensorMapEncodeTiled)
FAKECUDA_SAME_TYPE(cuLinkCreate)
FAKECUDA_SAME_TYPE(cuLinkAddData)
FAKECUDA_SAME_TYPE(cuLinkAddFile)
FAKECUDA_SAME_TYPE(cuLinkComplete)
FAKECUDA_SAME_TYPE(cuLinkDestroy)
FAKECUDA_SAME_TYPE(cuLaunchKernel)
FAKECUDA_SAME_TYPE(cuLaunchKernelEx)
FAKECUDA_SAME_TYPE(cuOccupancyMaxPotentialBlockSize)
FAKECUDA_SAME_TYPE(cuOccupancyMaxActiveBlocksPerMultiprocessor)
FAKECUDA_SAME_TYPE(cuMemAlloc)
FAKECUDA_SAME_TYPE(cuMemFree)
FAKECUDA_SAME_TYPE(cuMemAllocAsync)
FAKECUDA_SAME_TYPE(cuMemFreeAsync)
FAKECUDA_SAME_TYPE(cuMemPoolCreate)
FAKECUDA_SAME_TYPE(cuMemPoolDestroy)
FAKECUDA_SAME_TYPE(cuMemPoolSetAttribute)
FAKECUDA_SAME_TYPE(cuMemAllocFromPoolAsync)
FAKECUDA_SAME_TYPE(cuMemcpyAsync)
FAKECUDA_SAME_TYPE(cuMemcpy)
FAKECUDA_SAME_TYPE(cuMemsetD8Async)
FAKECUDA_SAME_TYPE(cuPointerGetAttribute)
FAKECUDA_SAME_TYPE(cuPointerGetAttributes)
FAKECUDA_SAME_TYPE(cuStreamCreate)
FAKECUDA_SAME_TYPE(cuStreamDestroy)
FAKECUDA_SAME_TYPE(cuStreamSynchronize)
FAKECUDA_SAME_TYPE(cuStreamIsCapturing)
FAKECUDA_SAME_TYPE(cuEventCreate)
FAKECUDA_SAME_TYPE(cuEventDestroy)
FAKECUDA_SAME_TYPE(cuEventRecord)
FAKECUDA_SAME_TYPE(cuEventSynchronize)
FAKECUDA_SAME_TYPE(cuEventElapsedTime)

/* The entry points by the plain names jitk asks cuGetProcAddress for. */
#define FAKECUDA_ENTRY(name) {#name, (void *)fk_##name}
static const struct {
  const char *name;
  void *fn;
} entries[] = {
    FAKECUDA_ENTRY(cuGetErrorName),
    FAKECUDA_ENTRY(cuGetErrorString),
    FAKECUDA_ENTRY(cuInit),
    FAKECUDA_ENTRY(cuDriverGetVersion),
    FAKECUDA_ENTRY(cuDeviceGetCount),
    FAKECUDA_ENTRY(cuDeviceGet),
    FAKECUDA_ENTRY(cuDeviceGetName),
    FAKECUDA_ENTRY(cuDeviceGetAttribute),
    FAKECUDA_ENTRY(cuDeviceTotalMem),
    FAKECUDA_ENTRY(cuDevicePrimaryCtxRetain),
    FAKECUDA_ENTRY(cuDevicePrimaryCtxRelease),
    FAKECUDA_ENTRY(cuCtxGetCurrent),
    FAKECUDA_ENTRY(cuCtxSetCurrent),
    FAKECUDA_ENTRY(cuCtxGetDevice),
    FAKECUDA_ENTRY(cuCtxSynchronize),
    FAKECUDA_ENTRY(cuCtxEnablePeerAccess),
    FAKECUDA_ENTRY(cuDeviceCanAccessPeer),
    FAKECUDA_ENTRY(cuModuleLoadDataEx),
    FAKECUDA_ENTRY(cuModuleUnload),
    FAKECUDA_ENTRY(cuModuleGetFunction),
    FAKECUDA_ENTRY(cuModuleGetGlobal),
    FAKECUDA_ENTRY(cuFuncGetAttribute),
    FAKECUDA_ENTRY(cuFuncSetAttribute),
    FAKECUDA_ENTRY(cuFuncGetParamInfo),
    FAKECUDA_ENTRY(cuTensorMapEncodeTiled),
    FAKECUDA_ENTRY(cuLinkCreate),
    FAKECUDA_ENTRY(cuLinkAddData),
    FAKECUDA_ENTRY(cuLinkAddFile),
    FAKECUDA_ENTRY(cuLinkComplete),
    FAKECUDA_ENTRY(cuLinkDestroy),
    FAKECUDA_ENTRY(cuLaunchKernel),
    FAKECUDA_ENTRY(cuLaunchKernelEx),
    FAKECUDA_ENTRY(cuOccupancyMaxPotentialBlockSize),
    FAKECUDA_ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    FAKECUDA_ENTRY(cuMemAlloc),
    FAKECUDA_ENTRY(cuMemFree),
    FAKECUDA_ENTRY(cuMemAllocAsync),
    FAKECUDA_ENTRY(cuMemFreeAsync),
    FAKECUDA_ENTRY(cuMemPoolCreate),
    FAKECUDA_ENTRY(cuMemPoolDestroy),
    FAKECUDA_ENTRY(cuMemPoolSetAttribute),
    FAKECUDA_ENTRY(cuMemAllocFromPoolAsync),
    FAKECUDA_ENTRY(cuMemcpyAsync),
    FAKECUDA_ENTRY(cuMemcpy),
    FAKECUDA_ENTRY(cuMemsetD8Async),
    FAKECUDA_ENTRY(cuPointerGetAttribute),
    FAKECUDA_ENTRY(cuPointerGetAttributes),
    FAKECUDA_ENTRY(cuStreamCreate),
    FAKECUDA_ENTRY(cuStreamDestroy),
    FAKECUDA_ENTRY(cuStreamSynchronize),
    FAKECUDA_ENTRY(cuStreamIsCapturing),
    FAKECUDA_ENTRY(cuEventCreate),
    FAKECUDA_ENTRY(cuEventDestroy),
    FAKECUDA_ENTRY(cuEventRecord),
    FAKECUDA_ENTRY(cuEventSynchronize),
    FAKECUDA_ENTRY(cuEventElapsedTime),
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
  (void)version;
  (void)flags;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (strcmp(entries[i].name, symbol) == 0) {
      *pfn = entries[i].fn;
      if (status != NULL) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *pfn = NULL;
  if (status != NULL) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

EXPORT const fakecuda_launch *fakecuda_last_launch(void) { return &last_launch; }

EXPORT unsigned long long fakecuda_launch_count(void) {
  return __atomic_load_n(&ended.launches, __ATOMIC_RELAXED) + mine.launches;
}

EXPORT void fakecuda_set_capturing(void *stream, bool on) {
  capturing_stream = (CUstream)stream;
  capture_on = on;
}

EXPORT const fakecuda_memset *fakecuda_last_memset(unsigned long long *count) {
  if (count != NULL) *count = __atomic_load_n(&ended.memsets, __ATOMIC_RELAXED) + mine.memsets;
  return &last_memset;
}

EXPORT unsigned long long fakecuda_sync_count(void **last_stream) {
  if (last_stream != NULL) *last_stream = (void *)last_synced;
  return __atomic_load_n(&ended.syncs, __ATOMIC_RELAXED) + mine.syncs;
}

EXPORT void fakecuda_record_params(const size_t *sizes, int n) {
  record_count = n < 0 ? 0 : n > FAKECUDA_MAX_PARAMS ? FAKECUDA_MAX_PARAMS : n;
  for (int i = 0; i < record_count; i++) record_sizes[i] = sizes[i];
}

EXPORT void fakecuda_set_hooks(fakecuda_load_hook load, fakecuda_launch_hook launch, void *user) {
  load_hook = load;
  launch_hook = launch;
  hook_user = user;
}

EXPORT void fakecuda_set_multiprocessors(int n) { multiprocessors = n > 0 ? n : 132; }
