/*
 * jitk: run-time compilation and launch of CUDA kernels from C.
 *
 * This is the whole public interface. It compiles as C11 and as C++17.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *  - Every function returns a jitk_status; JITK_OK is zero. Results come back
 *    through out-parameters, which are left untouched on failure.
 *  - The details of the last failure on an engine in the calling thread are
 *    in jitk_errmsg(engine). Failures that happen before an engine exists, or
 *    with a NULL engine, are described by jitk_errmsg(NULL), which is
 *    per thread as well. A success does not clear the message.
 *  - Handles are opaque. Each *_create has a *_destroy; destroying NULL does
 *    nothing.
 *  - The library never aborts, never exits and never writes to stdout. It
 *    reports what it does through the engine's log callback, or to stderr
 *    according to $JITK_LOG (error, warn, info, debug; default warn).
 *  - An engine may be used from several threads at once. Destroying a
 *    handle must not race with any other use of it.
 */
#ifndef JITK_JITK_H
#define JITK_JITK_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#if defined(JITK_STATIC_DEFINE)
#define JITK_API
#elif defined(_WIN32)
#if defined(JITK_BUILDING)
#define JITK_API __declspec(dllexport)
#else
#define JITK_API __declspec(dllimport)
#endif
#else
#define JITK_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define JITK_VERSION_MAJOR 0
#define JITK_VERSION_MINOR 1
#define JITK_VERSION_PATCH 0
#define JITK_VERSION_STRING "0.1.0"

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". */
JITK_API const char *jitk_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

/*
 * One list generates the enum, jitk_errname and jitk_strerror. Codes are
 * part of the ABI: an entry is never renumbered or removed, new ones are
 * appended with the next free number.
 */
#define JITK_STATUS_LIST(X)                                                            \
  X(JITK_OK, 0, "no error")                                                            \
  X(JITK_ERR_INVALID_ARGUMENT, 1, "invalid argument")                                  \
  X(JITK_ERR_OUT_OF_MEMORY, 2, "out of host memory")                                   \
  X(JITK_ERR_NO_DRIVER, 3, "no usable CUDA driver (libcuda.so.1)")                     \
  X(JITK_ERR_NO_DEVICE, 4, "no CUDA device")                                           \
  X(JITK_ERR_CUDA, 5, "a CUDA driver call failed")                                     \
  X(JITK_ERR_NVRTC, 6, "NVRTC failed")                                                 \
  X(JITK_ERR_COMPILE, 7, "the CUDA source did not compile")                            \
  X(JITK_ERR_NOT_FOUND, 8, "no such kernel or name expression")                        \
  X(JITK_ERR_ARGUMENT_COUNT, 9, "wrong number of kernel arguments")                    \
  X(JITK_ERR_ARGUMENT_TYPE, 10, "kernel argument of the wrong type or size")           \
  X(JITK_ERR_LAUNCH_CONFIG, 11, "grid or block dimensions out of range")               \
  X(JITK_ERR_SHARED_MEMORY, 12, "too much shared memory requested")                    \
  X(JITK_ERR_INVALID_IMAGE, 13, "invalid or incompatible kernel image")                \
  X(JITK_ERR_IO, 14, "file input or output failed")                                    \
  X(JITK_ERR_UNSUPPORTED, 15, "not supported")                                         \
  X(JITK_ERR_DEVICE_OUT_OF_MEMORY, 16, "out of device memory")                         \
  X(JITK_ERR_INVALID_ARRAY, 17, "array not usable here")                               \
  X(JITK_ERR_PARSE, 18, "syntax error")                                                \
  X(JITK_ERR_INTERNAL, 19, "internal error in jitk")                                   \
  X(JITK_ERR_CACHE, 20, "the kernel cache is unavailable")                             \
  X(JITK_ERR_STREAM_CAPTURE, 21, "not allowed while the stream captures a CUDA graph") \
  X(JITK_ERR_AXIS, 22, "axis out of range")

typedef enum jitk_status {
#define JITK_STATUS_ENUM_(name, code, text) name = code,
  JITK_STATUS_LIST(JITK_STATUS_ENUM_)
#undef JITK_STATUS_ENUM_
} jitk_status;

/* "JITK_ERR_NO_DRIVER" for JITK_ERR_NO_DRIVER; "JITK_ERR_UNKNOWN" for a
 * value that is not a status. Never NULL; the string is static. */
JITK_API const char *jitk_errname(jitk_status status);

/* A short English description of the code; never NULL, static. */
JITK_API const char *jitk_strerror(jitk_status status);

typedef struct jitk_engine jitk_engine;
typedef struct jitk_module jitk_module;
typedef struct jitk_kernel jitk_kernel;

/*
 * The details of the last failure on `engine` in the calling thread, or, for
 * engine == NULL, of the last failure in this thread that had no engine
 * (such as jitk_engine_create). Never NULL: "no error" when nothing failed.
 * The string stays valid until the next failing call in this thread on the
 * same engine, or until the engine is destroyed.
 */
JITK_API const char *jitk_errmsg(const jitk_engine *engine);

/*
 * For a failure that came from parsing a user's string (a kernel signature,
 * and later parameter lists and expressions): the byte offset in that string
 * where the problem is, as sqlite3_error_offset does. -1 when the last
 * failure was not a parse error.
 */
JITK_API int jitk_error_offset(const jitk_engine *engine);

/* ------------------------------------------------------------------------ */
/* Data types                                                                */
/* ------------------------------------------------------------------------ */

/* Numbers are part of the ABI and never change. */
typedef enum jitk_dtype {
  JITK_DTYPE_NONE = 0, /* unspecified: an untyped pointer argument */
  JITK_BOOL = 1,
  JITK_INT8 = 2,
  JITK_INT16 = 3,
  JITK_INT32 = 4,
  JITK_INT64 = 5,
  JITK_UINT8 = 6,
  JITK_UINT16 = 7,
  JITK_UINT32 = 8,
  JITK_UINT64 = 9,
  JITK_FLOAT16 = 10,
  JITK_BFLOAT16 = 11,
  JITK_FLOAT32 = 12,
  JITK_FLOAT64 = 13,
  JITK_COMPLEX64 = 14,
  JITK_COMPLEX128 = 15,
  /* 8-bit floats (OCP FP8). float8_e4m3fn: 4 exponent and 3 mantissa
   * bits, finite only (largest 448, NaN is 0x7F or 0xFF); float8_e5m2:
   * 5 and 2, IEEE-like with infinities (largest finite 57344). In kernels
   * they are jitk::float8_e4m3 and jitk::float8_e5m2, which are CUDA's
   * __nv_fp8_e4m3 and __nv_fp8_e5m2 with arithmetic in float. */
  JITK_FLOAT8_E4M3 = 16,
  JITK_FLOAT8_E5M2 = 17
} jitk_dtype;

#define JITK_DTYPE_COUNT 18

typedef struct jitk_dtype_info {
  jitk_dtype dtype;
  const char *name;  /* "float32", as NumPy spells it */
  const char *ctype; /* the type's name in kernel code: "float", "__half" */
  size_t size;       /* bytes */
  size_t align;      /* bytes */
  char kind;         /* NumPy's kind: 'b', 'i', 'u', 'f' or 'c' */
  DLDataType dl;     /* its DLPack code, bits and lanes (lanes == 1) */
} jitk_dtype_info;

/* The table row of `dtype`. JITK_ERR_INVALID_ARGUMENT for JITK_DTYPE_NONE
 * and values outside the enum. */
JITK_API jitk_status jitk_dtype_get_info(jitk_dtype dtype, jitk_dtype_info *info);

/* Looks a dtype up by its NumPy name ("float32", "bfloat16", "bool", ...;
 * "float8_e4m3fn" and "float8_e5m2" as ml_dtypes spells them, and
 * "float8_e4m3" for the first, the name CUDA and DLPack's users often
 * write). The C spellings "float", "double", "half", "int", "long long"
 * and the short NumPy codes are not accepted: one name per type keeps
 * messages and cache keys unambiguous. */
JITK_API jitk_status jitk_dtype_from_name(const char *name, jitk_dtype *dtype);

/* The dtype of a DLPack type with lanes == 1; bool is code 6 (kDLBool,
 * DLPack 0.8 and newer) with 8 bits, float8_e4m3fn code 10 and
 * float8_e5m2 code 12 (kDLFloat8_e4m3fn and kDLFloat8_e5m2, DLPack 1.1)
 * with 8 bits. JITK_ERR_UNSUPPORTED otherwise. */
JITK_API jitk_status jitk_dtype_from_dlpack(DLDataType dl, jitk_dtype *dtype);

/*
 * NumPy's promotion (numpy.result_type for two arrays): the smallest type
 * both convert to without loss, so int8 with uint8 gives int16, int64 with
 * uint64 float64, int16 with float16 float32. bfloat16 follows the same rule
 * with its 8-bit significand: it holds (u)int8 exactly, bfloat16 with
 * float16 gives float32.
 * An 8-bit float promotes only with itself: with any other dtype, the other
 * 8-bit float included, it is JITK_ERR_ARGUMENT_TYPE, naming both. NumPy
 * (through ml_dtypes) has no rule for them and PyTorch refuses the mix;
 * every candidate (float16, bfloat16, float32) would be a guess about the
 * precision wanted, so the caller says it with an explicit type.
 */
JITK_API jitk_status jitk_dtype_promote(jitk_dtype a, jitk_dtype b, jitk_dtype *result);

/* IEEE half and bfloat16 conversions, rounding to nearest even; NaN stays
 * NaN. Pure functions, so they return their value rather than a status. */
JITK_API uint16_t jitk_float_to_half(float value);
JITK_API float jitk_half_to_float(uint16_t bits);
JITK_API uint16_t jitk_float_to_bfloat16(float value);
JITK_API float jitk_bfloat16_to_float(uint16_t bits);

/* 8-bit float conversions, rounding to nearest even as CUDA's
 * __nv_fp8_e4m3(float) and __nv_fp8_e5m2(float) do, and saturating as
 * they do (__NV_SATFINITE): a value beyond the largest finite one,
 * infinity included, becomes the largest finite value of its sign (448
 * for e4m3, which has no infinity; 57344 for e5m2), so that a scalar
 * converted here and a value stored by a kernel agree. NaN becomes 0x7F,
 * the NaN CUDA's conversions give.
 * Decoding is exact: every code gives its value (e5m2's infinities give
 * infinity). */
JITK_API uint8_t jitk_float_to_float8_e4m3(float value);
JITK_API float jitk_float8_e4m3_to_float(uint8_t bits);
JITK_API uint8_t jitk_float_to_float8_e5m2(float value);
JITK_API float jitk_float8_e5m2_to_float(uint8_t bits);

/* What a compiled or loaded kernel image is. */
typedef enum jitk_image_kind {
  JITK_IMAGE_AUTO = 0, /* tell by the content */
  JITK_IMAGE_CUBIN = 1,
  JITK_IMAGE_PTX = 2,
  JITK_IMAGE_FATBIN = 3
} jitk_image_kind;

/* ------------------------------------------------------------------------ */
/* Engine                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum jitk_log_level {
  JITK_LOG_DEFAULT = -1, /* in a config: take $JITK_LOG, else warn */
  JITK_LOG_OFF = 0,
  JITK_LOG_ERROR = 1,
  JITK_LOG_WARN = 2,
  JITK_LOG_INFO = 3,
  JITK_LOG_DEBUG = 4
} jitk_log_level;

/* Receives one complete line without its newline. May be called from any
 * thread that uses the engine, so it must be thread-safe. */
typedef void (*jitk_log_fn)(void *user, jitk_log_level level, const char *message);

/*
 * The engine's allocator, with realloc's contract: size 0 frees `ptr` and
 * returns NULL; ptr NULL allocates. Returning NULL for a non-zero size is an
 * allocation failure, which jitk reports as JITK_ERR_OUT_OF_MEMORY and
 * survives. Every host allocation jitk makes for an engine goes through it.
 */
typedef void *(*jitk_alloc_fn)(void *user, void *ptr, size_t size);

/* How the engine uses the on-disk kernel cache. */
typedef enum jitk_cache_mode {
  JITK_CACHE_DEFAULT = 0,  /* $JITK_CACHE (on, off, read-only), else on */
  JITK_CACHE_ON = 1,       /* read and write */
  JITK_CACHE_OFF = 2,      /* no disk cache; the in-memory table stays */
  JITK_CACHE_READ_ONLY = 3 /* serve hits, never write */
} jitk_cache_mode;

#define JITK_DEVICE_DEFAULT (-1) /* $JITK_DEVICE if set, else device 0 */
#define JITK_DEVICE_NONE (-2)    /* compile only: no driver, no GPU */

/* Which compiles use NVRTC's precompiled headers (jitk_engine_config.pch,
 * docs/GUIDE.md, "Precompiled headers"). */
typedef enum jitk_pch_mode {
  JITK_PCH_DEFAULT = 0, /* $JITK_PCH (off, on, all), else on while the disk cache is on */
  JITK_PCH_OFF = 1,     /* none */
  JITK_PCH_ON = 2,      /* generated kernels (elementwise, reduction, matmul) */
  JITK_PCH_ALL = 3      /* generated kernels and raw modules */
} jitk_pch_mode;

typedef struct jitk_engine_config {
  /* sizeof(jitk_engine_config) as the caller was compiled; set by
   * jitk_engine_config_init so that later fields can be added. */
  size_t struct_size;

  /* The device ordinal, JITK_DEVICE_DEFAULT, or JITK_DEVICE_NONE for an
   * engine that only compiles (then `arch` is required). */
  int device;

  /* The target to compile for: "sm_90" (a cubin), "sm_90a", or "compute_90"
   * (PTX for the driver to compile). NULL means the device's own sm_XY, or
   * PTX for the newest compute_XY NVRTC knows when the device is newer
   * than this NVRTC. */
  const char *arch;

  jitk_log_fn log_fn; /* NULL: lines go to stderr */
  void *log_user;
  jitk_log_level log_level; /* JITK_LOG_DEFAULT: from $JITK_LOG */

  jitk_alloc_fn alloc_fn; /* NULL: malloc, realloc and free */
  void *alloc_user;

  /* Where the CUDA headers are (the folder holding cuda_fp16.h). NULL
   * searches $CUDA_HOME/include, $CUDA_PATH/include, the toolkit jitk was
   * built with, the toolkit next to the loaded NVRTC, /usr/local/cuda. */
  const char *cuda_include_dir;

  /* The driver library to dlopen; NULL means "libcuda.so.1". */
  const char *driver_library;

  /*
   * The kernel cache. Compiled images are kept in an SQLite database in
   * cache_dir, shared by every process of the user; an engine also keeps
   * up to cache_memory_entries loaded modules in memory.
   * cache_dir NULL: $JITK_CACHE_DIR, else $XDG_CACHE_HOME/jitk, else
   * ~/.cache/jitk. The folder is made with mode 0700. A folder or file in
   * it that is a symlink, owned by someone else or writable by group or
   * others, or a folder on its path that someone else owns or can write,
   * is refused (the engine then compiles without a disk cache and says so
   * in one log line). cache_shared 1 makes the folder a group cache
   * instead: written by every member of its group, whom the user thereby
   * trusts (docs/GUIDE.md, "Who can write to a cache").
   */
  const char *cache_dir;
  jitk_cache_mode cache_mode;
  int64_t cache_max_bytes;     /* 0: $JITK_CACHE_MAX_SIZE, else 1 GiB */
  int cache_shared;            /* -1: $JITK_CACHE_SHARED=1 means yes; 0 no; 1 yes */
  size_t cache_memory_entries; /* 0: 256 */

  /*
   * A shared cache, read after the engine's own misses and never written:
   * a folder published by one trusted account with jitk_cache_publish.
   * NULL: $JITK_CACHE_SHARED_DIR, else none. Everything on its path must
   * belong to root, to this user or to cache_shared_owner (a user name or
   * id; NULL: $JITK_CACHE_SHARED_OWNER), and be writable by its owner
   * alone; otherwise it is refused with one log line.
   */
  const char *cache_shared_dir;
  const char *cache_shared_owner;

  /*
   * A remote tier shared by the machines of a cluster, asked after the
   * local ones miss and given every new compile:
   * "redis://[user:password@]host[:port][/db]" (port 6379, database 0 by
   * default). NULL: $JITK_CACHE_REMOTE, else the first line of the file
   * named by $JITK_CACHE_REMOTE_FILE (refused when it holds a password and
   * others can read it), else none. Whoever can write to that database is
   * trusted as the cache's folder is: entries are checked as local ones
   * are, but one planted by such a writer passes the checks, unless the
   * cluster shares a key (cache_remote_key_file below). A URL that
   * does not parse, a jitk built without hiredis, or a server that cannot
   * be reached turns the remote off with one warning; nothing fails for
   * it (docs/GUIDE.md, "A cache for a cluster").
   */
  const char *cache_remote;

  /*
   * The warm-up manifest: when set, every kernel the engine looks up in the
   * cache (once per kernel and engine, whether it was compiled or found)
   * is appended to this file as one line that says how to compile it
   * again, for `jitk cache warm` (jitk_cache_warm). NULL:
   * $JITK_CACHE_RECORD, else none. The file is created readable by its
   * owner alone, since it holds the kernels' sources. A file that cannot
   * be written turns recording off with one warning.
   */
  const char *cache_record;

  /*
   * How many compiles the engine runs at once when it is given several
   * (jitk_parallel, jitk_cache_warm). 0: $JITK_COMPILE_THREADS, else the
   * number of CPUs this process may run on.
   */
  int compile_threads;

  /*
   * NVRTC's precompiled headers (NVRTC 12.8 and newer): NVRTC's state after
   * the large headers a compile reads (cuda_fp16.h, CUB) is saved in a file,
   * made beside the first compile of those headers by a thread of the
   * engine, and later compiles of this process that start with the same
   * headers load it instead of reading them again. The images are the same
   * bytes either way, so cache keys do not change. The files live in a
   * folder of the engine's own under <cache folder>/pch, under the private
   * cache's trust rules, and are removed with the engine; no trusted
   * folder, no precompiled headers. Nothing fails for them: any problem
   * means a plain compile and at most one log line (docs/GUIDE.md,
   * "Precompiled headers"). JITK_PCH_DEFAULT: $JITK_PCH, else JITK_PCH_ON
   * while cache_mode is on.
   */
  jitk_pch_mode pch;

  /*
   * Another engine of this process whose compiled images this one shares:
   * the engines made sharing with each other (directly or through a third)
   * keep one in-memory table of images beside each engine's own table of
   * loaded modules. A kernel that one engine compiled or read from the
   * cache is loaded from that table by the others whose target is the
   * same, and a kernel one engine is compiling is waited for by the
   * others rather than compiled again, with or without the disk cache.
   * That is the way to drive several GPUs: one engine per device, each
   * made sharing with the first, so that every device of an architecture
   * costs one compile (docs/GUIDE.md, "Several GPUs"). Engines of other
   * architectures share the table without meeting in it. The engine named
   * must stay alive until jitk_engine_create returns; after that the
   * engines may be destroyed in any order and used from any threads. Both
   * must have the same alloc_fn and alloc_user. NULL: share with none.
   */
  jitk_engine *share_images_with;

  /*
   * A file holding the remote tier's secret key (16 to 4096 bytes; one
   * trailing newline is not part of it), which every machine of the
   * cluster shares. With a key, jitk signs each entry it sends to the
   * remote (HMAC-SHA-256 over the whole value) and serves from the remote
   * only entries whose signature the key confirms, and signs its leases
   * and waits only for signed ones, so that whoever can write to the
   * Redis database without the key can neither plant a kernel nor hold
   * the cluster's compiles.
   * The file must be readable by its owner alone; one that others may
   * read, or that cannot be read, turns the remote off with one warning
   * (never on without the check). NULL: $JITK_CACHE_REMOTE_KEY_FILE, else
   * no key: entries go unsigned, and the database is trusted as the
   * cache's folder is.
   */
  const char *cache_remote_key_file;
} jitk_engine_config;

/* Fills `config` with the defaults described above. */
JITK_API jitk_status jitk_engine_config_init(jitk_engine_config *config);

/*
 * Creates an engine. config may be NULL for the defaults. For a device, it
 * loads the driver, retains the device's primary context (the one the CUDA
 * runtime uses, so cudaMalloc'd buffers and cudaStream_t streams work as
 * they are), and reads the device's properties once.
 * Errors: JITK_ERR_NO_DRIVER when libcuda.so.1 cannot be loaded or is too
 * old; JITK_ERR_NO_DEVICE when there is no such device; JITK_ERR_UNSUPPORTED
 * when NVRTC cannot target the device, or for an arch of the right form
 * that NVRTC does not know (sm_91, compute_999); JITK_ERR_INVALID_ARGUMENT
 * for a bad config (an arch not of the form sm_XY, sm_XYa, sm_XYf or
 * compute_XY, a compile-only engine without an arch).
 */
JITK_API jitk_status jitk_engine_create(const jitk_engine_config *config, jitk_engine **engine);

/* Releases the engine's context reference and everything it owns. Modules
 * and kernels created from it must have been destroyed first, and every
 * other thread that used it must have returned from its calls and not be
 * exiting meanwhile (join threads that are ending first): a thread's
 * exit frees the error record it keeps in the engine. */
JITK_API void jitk_engine_destroy(jitk_engine *engine);

typedef struct jitk_device_info {
  int ordinal;
  char name[256];
  int cc_major, cc_minor; /* compute capability */
  int multiprocessors;
  size_t total_memory; /* bytes */
  int max_threads_per_block;
  int warp_size;
  size_t shared_per_block;       /* default limit per block, bytes */
  size_t shared_per_block_optin; /* the most a kernel can opt into */
  size_t shared_per_multiprocessor;
  int l2_cache_bytes;
  int max_grid[3];
  int max_block[3];
} jitk_device_info;

/* The engine's device. JITK_ERR_NO_DEVICE on a compile-only engine. */
JITK_API jitk_status jitk_engine_device_info(const jitk_engine *engine, jitk_device_info *info);

/*
 * Lets the engine's kernels use memory of device `peer` through NVLink or
 * PCIe: peer access from the engine's context to the peer's primary
 * context (cuCtxEnablePeerAccess), which stays retained until the engine
 * is destroyed. Until then an array whose DLPack device_id names another
 * device than the engine's is refused with JITK_ERR_INVALID_ARRAY, rather
 * than handed to a kernel that would fault on it. Enabling it twice, or
 * after the CUDA runtime did (cudaDeviceEnablePeerAccess), is no error;
 * jitk never disables it. Thread-safe.
 * Errors: JITK_ERR_NO_DEVICE on a compile-only engine or for a device the
 * driver does not see; JITK_ERR_INVALID_ARGUMENT for the engine's own
 * device or a negative one; JITK_ERR_UNSUPPORTED when the two devices
 * cannot reach each other (cuDeviceCanAccessPeer), or for ordinals from
 * 64 on.
 */
JITK_API jitk_status jitk_engine_enable_peer_access(jitk_engine *engine, int peer);

/* The target the engine compiles for, such as "sm_90" or "compute_120";
 * the string lives as long as the engine. */
JITK_API jitk_status jitk_engine_arch(const jitk_engine *engine, const char **arch);

/* The CUDA header folder the engine found, or NULL in *dir when none was
 * found (sources that include CUDA headers then fail to compile). */
JITK_API jitk_status jitk_engine_cuda_include_dir(const jitk_engine *engine, const char **dir);

/*
 * System queries that need no engine and create no context. The config
 * supplies driver_library (NULL config: the defaults). jitk_driver_query
 * fills the driver's CUDA version (12080 for 12.8) and the number of
 * devices (both pointers are required); JITK_ERR_NO_DRIVER when there is
 * no driver. jitk_device_query describes one device.
 */
JITK_API jitk_status jitk_driver_query(const jitk_engine_config *config, int *driver_version,
                                       int *device_count);
JITK_API jitk_status jitk_device_query(const jitk_engine_config *config, int ordinal,
                                       jitk_device_info *info);

/*
 * Runs task(user, i) for every i below `count` on the engine's compile
 * pool: up to jitk_engine_compile_threads threads, the calling one among
 * them, which returns when every task has. Compiles are what a program
 * waits for at its start, and NVRTC compiles one program on one thread:
 * a task that creates a module, compiles a kernel's specialization
 * (jitk_elementwise_compile, jitk_reduction_compile, the _prepare calls)
 * or makes a matmul plan runs beside the others, each from the cache or
 * compiled once however many tasks ask for it. Every jitk call on one
 * engine may be made from several threads at once.
 * `statuses` (may be NULL) gets each task's status. Returns JITK_OK when
 * every task succeeded, else the status of the lowest index that failed,
 * with jitk_errmsg on the calling thread naming that task and its
 * message (a task's own jitk_errmsg is on the thread that ran it, and
 * gone when the call returns).
 */
typedef jitk_status (*jitk_task_fn)(void *user, size_t index);
JITK_API jitk_status jitk_parallel(jitk_engine *engine, size_t count, jitk_task_fn task, void *user,
                                   jitk_status *statuses);

/* The number of threads the engine's compile pool uses. */
JITK_API jitk_status jitk_engine_compile_threads(const jitk_engine *engine, int *threads);

/* NVRTC's version, such as 13 and 0. */
JITK_API jitk_status jitk_nvrtc_version(int *major, int *minor);

/* The sm numbers NVRTC can target (75, 80, ... 120), ascending. Writes at
 * most `capacity` of them and the total into *count. */
JITK_API jitk_status jitk_nvrtc_supported_archs(int *archs, size_t capacity, size_t *count);

/* What an engine does with NVRTC's precompiled headers (jitk_engine_config.pch). */
typedef struct jitk_pch_info {
  size_t struct_size; /* sizeof(jitk_pch_info), set by the caller */
  /* "on", or "off: " and why; lives as long as the engine. */
  const char *state;
  /* The engine's folder of precompiled headers, or NULL before its first
   * use or when off; lives as long as the engine. */
  const char *dir;
  uint64_t compiles;   /* compiles that gave NVRTC one to make or to load */
  uint64_t created;    /* files made, by such a compile or by the engine's thread */
  uint64_t used;       /* compiles that loaded one */
  uint64_t failed;     /* files that could not be made (heap, disk, a source NVRTC
                          cannot save) or that NVRTC refused to load twice */
  uint64_t heap_grown; /* times the engine grew NVRTC's heap for them */
  uint64_t bytes;      /* size of the files the engine's folder holds */
  size_t heap_bytes;   /* NVRTC's heap for them now (one for the whole process) */
  int making;          /* 1 while a thread of the engine makes one */
} jitk_pch_info;

/* Fills `info` for the engine; its struct_size must be set. */
JITK_API jitk_status jitk_engine_pch_info(jitk_engine *engine, jitk_pch_info *info);

/* ------------------------------------------------------------------------ */
/* The kernel cache                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Counters. For an engine, its own work; for the store, the sum over every
 * process that used the database (hits and stamps are written in batches,
 * so another process's last few may not show yet).
 */
typedef struct jitk_cache_stats {
  uint64_t memory_hits; /* found loaded in the engine's table */
  uint64_t disk_hits;   /* read from the database */
  uint64_t misses;      /* in neither */
  uint64_t compiles;    /* NVRTC runs (a miss waits for another process's
                           compile instead when it can) */
  double compile_ms;    /* NVRTC time of those compiles */
  uint64_t corrupt;     /* entries that failed their checks, removed */
  uint64_t evictions;   /* entries removed to stay under the size cap */
  uint64_t disk_errors; /* times the database could not be used */
  /* The store's contents (zero for an engine's own counters). */
  uint64_t entries;
  uint64_t bytes;
  int64_t max_bytes;
} jitk_cache_stats;

/* Either pointer may be NULL. `all` needs the disk cache:
 * JITK_ERR_CACHE when it is off or unusable, with the reason. */
JITK_API jitk_status jitk_cache_get_stats(jitk_engine *engine, jitk_cache_stats *mine,
                                          jitk_cache_stats *all);

/* The remote tier (jitk_engine_config.cache_remote) and what it did for
 * this engine. */
typedef struct jitk_cache_remote_info {
  /* sizeof(jitk_cache_remote_info) as the caller was compiled; set by
   * jitk_cache_remote_info_init. */
  size_t struct_size;
  const char *url;      /* as configured, the password shown as ***; NULL: none */
  const char *state;    /* "on", "not contacted yet", "off: " and why, "off for
                        30 s after an error: " and which; it may change */
  uint64_t hits;        /* entries it served (checked, then written locally) */
  uint64_t misses;      /* requests it did not have, or not for this machine */
  uint64_t errors;      /* failed connections and requests */
  uint64_t rejected;    /* entries it returned that failed their checks */
  uint64_t stores;      /* compiles sent to it */
  uint64_t lease_waits; /* misses that waited for another process's compile */
  uint64_t bytes_read, bytes_written;
  /* 1: entries are signed with the cluster's key and only entries it
   * signed are served (jitk_engine_config.cache_remote_key_file); 0: no
   * key. */
  int signed_entries;
} jitk_cache_remote_info;

JITK_API jitk_status jitk_cache_remote_info_init(jitk_cache_remote_info *info);
/* `mine`: this engine's remote and counters; `all`: the same URL and
 * state, with hits, misses, errors, rejected entries and bytes summed over
 * every process of this machine's cache (stores and lease waits are
 * zero there); it needs the disk cache, JITK_ERR_CACHE otherwise. Either
 * may be NULL. The strings live as long as the engine.
 * JITK_ERR_INVALID_ARGUMENT for an info whose struct_size was not set by
 * jitk_cache_remote_info_init. */
JITK_API jitk_status jitk_cache_remote_get_info(jitk_engine *engine, jitk_cache_remote_info *mine,
                                                jitk_cache_remote_info *all);
/* Connects to the remote now (whatever the back-off) and asks it to
 * answer; *milliseconds (may be NULL) gets how long that took.
 * JITK_ERR_CACHE, saying why, when there is no remote or it does not
 * answer (which turns it off for the back-off, as any failure does). */
JITK_API jitk_status jitk_cache_remote_ping(jitk_engine *engine, double *milliseconds);

/* Copies every entry of the local store to the remote (each under the
 * request it answers, replacing what the remote had): `jitk cache push`.
 * *pushed (may be NULL) counts them. JITK_ERR_CACHE when there is no
 * remote, no usable disk cache, or the remote fails (the entries sent
 * before stay sent). */
JITK_API jitk_status jitk_cache_remote_push(jitk_engine *engine, size_t *pushed);
/* Copies every entry of the remote that serves this machine into the
 * local store, each checked as a lookup checks it (and its key checked
 * against the request it is stored under): `jitk cache pull`. Entries
 * for other files or another NVRTC build are left alone; values that fail
 * a check are counted in *rejected and warned about. JITK_ERR_CACHE as
 * for push, or when the disk cache is read-only. */
JITK_API jitk_status jitk_cache_remote_pull(jitk_engine *engine, size_t *pulled, size_t *rejected);

/*
 * Warming a cache from a manifest (jitk_engine_config.cache_record,
 * JITK_CACHE_RECORD): every kernel recorded for the engine's target is
 * looked up and, where no tier has it, compiled, on the engine's compile
 * pool, into the engine's tiers: the local one, and the remote one when
 * it is configured (a compile-only engine with the cache off and a remote
 * fills the remote alone). The engine's target must be the recorded one:
 * kernels recorded for other targets are counted and left alone, since
 * what jitk generates can depend on the device. `jitk cache warm`.
 */
typedef struct jitk_cache_warm_options {
  /* sizeof(jitk_cache_warm_options); set by jitk_cache_warm_options_init. */
  size_t struct_size;
  int threads; /* compiles at once; 0: the engine's compile pool */
  /* Called after each kernel, one call at a time, from any of the
   * compiling threads; NULL: none. */
  void (*progress)(void *user, size_t finished, size_t total, size_t failed);
  void *progress_user;
} jitk_cache_warm_options;

JITK_API jitk_status jitk_cache_warm_options_init(jitk_cache_warm_options *options);

typedef struct jitk_cache_warm_report {
  size_t struct_size;   /* sizeof(jitk_cache_warm_report), set by the caller */
  size_t lines;         /* lines that are not empty */
  size_t kernels;       /* distinct kernels for the engine's target */
  size_t compiled;      /* of those, compiled now (the others were in a tier, or failed) */
  size_t remote_hits;   /* of those, found in the remote tier */
  size_t failed;        /* kernels that do not compile now (each warned about) */
  size_t damaged;       /* lines skipped: cut short, edited, not a record, a newer format */
  size_t duplicates;    /* lines repeating an earlier one */
  size_t other_targets; /* kernels recorded for other targets */
  double seconds;
} jitk_cache_warm_report;

/*
 * Warms the engine's tiers from the manifest at `path`; `options` may be
 * NULL, `report` too. A damaged line or a kernel that no longer compiles
 * (a header changed, an option no longer accepted) is one warning in the
 * engine's log, counted in the report, and the others go on: the call
 * still returns JITK_OK. JITK_ERR_IO when the file cannot be read,
 * JITK_ERR_OUT_OF_MEMORY, JITK_ERR_INVALID_ARGUMENT for bad options.
 */
JITK_API jitk_status jitk_cache_warm(jitk_engine *engine, const char *path,
                                     const jitk_cache_warm_options *options,
                                     jitk_cache_warm_report *report);

/* The cache's folder and database file (NULL when there is none), and
 * the state of the disk cache in words: "on", "read-only", or "off: "
 * and why. The strings live as long as the engine. */
JITK_API jitk_status jitk_cache_location(jitk_engine *engine, const char **dir,
                                         const char **database, const char **state);

typedef struct jitk_cache_entry_info {
  char key[33];      /* hexadecimal */
  const char *label; /* the program name it was compiled from */
  const char *target;
  jitk_image_kind kind;
  size_t bytes;
  double compile_ms;
  int64_t created, last_used; /* Unix seconds */
} jitk_cache_entry_info;

/* Called for each entry, least recently used first; return non-zero to
 * stop. The strings live for the call only. */
typedef int (*jitk_cache_entry_fn)(void *user, const jitk_cache_entry_info *info);

JITK_API jitk_status jitk_cache_list(jitk_engine *engine, jitk_cache_entry_fn fn, void *user);

/* Checks every entry (key material, checksum, names) and removes those
 * that fail. Either count pointer may be NULL. */
JITK_API jitk_status jitk_cache_verify(jitk_engine *engine, size_t *checked, size_t *removed);

/* Removes least recently used entries until the store holds at most
 * max_bytes (0: the configured cap). */
JITK_API jitk_status jitk_cache_prune(jitk_engine *engine, int64_t max_bytes, size_t *removed);

/* Removes every entry. */
JITK_API jitk_status jitk_cache_clear(jitk_engine *engine, size_t *removed);

/* Writes every entry to a new database file (which must not exist), to
 * warm the cache of other machines with jitk_cache_import. */
JITK_API jitk_status jitk_cache_export(jitk_engine *engine, const char *file, size_t *exported);

/* Adds the entries of an exported file that this store lacks. Each one is
 * verified first (its key recomputed from its key material, its checksum,
 * its size); those that fail are counted in *rejected and skipped. An
 * imported entry runs as your code: import only files you made or got
 * from someone you trust. */
JITK_API jitk_status jitk_cache_import(jitk_engine *engine, const char *file, size_t *imported,
                                       size_t *rejected);

/* Copies every sound entry of the engine's own cache into the shared
 * cache at `dir`, creating the folder (0755) and its database (0644,
 * with a rollback journal, which readers need no write access for) when
 * they are missing. Run by the account that owns the shared cache; its
 * readers name it in cache_shared_owner. Entries already there stay. */
JITK_API jitk_status jitk_cache_publish(jitk_engine *engine, const char *dir, size_t *published);

/* The shared cache the engine reads (NULL when none is configured) and
 * its state: "on", or "off: " and why. */
JITK_API jitk_status jitk_cache_shared_location(jitk_engine *engine, const char **dir,
                                                const char **state);

/* ------------------------------------------------------------------------ */
/* Device memory and streams                                                 */
/* ------------------------------------------------------------------------ */

/*
 * A stream: a CUstream or a cudaStream_t, which are the same pointer.
 * NULL is the legacy default stream.
 */
typedef struct CUstream_st *jitk_stream;

/* Stream-ordered allocation from the device's default memory pool
 * (cuMemAllocAsync): usable by work on `stream` at once. */
JITK_API jitk_status jitk_device_alloc(jitk_engine *engine, size_t bytes, jitk_stream stream,
                                       void **ptr);
/* Frees memory from jitk_device_alloc (or cudaMallocAsync) once the work
 * queued on `stream` before it is done. NULL ptr does nothing. */
JITK_API jitk_status jitk_device_free(jitk_engine *engine, void *ptr, jitk_stream stream);
/* Copies between any two of host and device memory (unified addressing
 * tells which is which), in order on `stream`. */
JITK_API jitk_status jitk_memcpy(jitk_engine *engine, void *dst, const void *src, size_t bytes,
                                 jitk_stream stream);
/* Sets `bytes` bytes of device memory to `value`, in order on `stream`. */
JITK_API jitk_status jitk_memset(jitk_engine *engine, void *dst, int value, size_t bytes,
                                 jitk_stream stream);
/* Waits for the work queued on `stream`; reports a failed kernel. */
JITK_API jitk_status jitk_stream_synchronize(jitk_engine *engine, jitk_stream stream);

/*
 * Where `ptr` lives, for callers given a bare address
 * (__cuda_array_interface__ carries no device): *is_device_memory is 1 for
 * device memory (cudaMalloc, memory pools, managed memory), with its
 * device's ordinal in *ordinal (for managed memory, the device that was
 * current when it was allocated); 0 for anything else, host memory
 * (pinned or not), an address the driver does not know, or NULL, with
 * *ordinal -1. An
 * unknown address is an answer, not an error. Asks the driver
 * (cuPointerGetAttributes) with the engine's context current, and may be
 * called from any thread. JITK_ERR_NO_DEVICE on a compile-only engine.
 */
JITK_API jitk_status jitk_pointer_device(jitk_engine *engine, const void *ptr, int *ordinal,
                                         int *is_device_memory);

/* ------------------------------------------------------------------------ */
/* Modules: CUDA source, cubin, PTX or fatbin                                */
/* ------------------------------------------------------------------------ */

/* A header the source can #include by `name`, given as a string. */
typedef struct jitk_header {
  const char *name;
  const char *source;
} jitk_header;

typedef struct jitk_module_options {
  /* NVRTC options, such as "-DN=4" or "--use_fast_math". jitk adds
   * "-std=c++17", the target ("--gpu-architecture=sm_90") and the CUDA
   * include folders unless the options name them already. With "-dc",
   * "--device-c", "-rdc=true" or "--relocatable-device-code=true" (what
   * kernels that launch kernels need), NVRTC's relocatable output is
   * linked with the CUDA device runtime (see jitk_module_create). */
  const char *const *options;
  size_t num_options;

  /* C++ expressions naming __global__ functions, such as "scale<float>";
   * each can then be given to jitk_module_get_kernel. */
  const char *const *name_expressions;
  size_t num_name_expressions;

  const jitk_header *headers;
  size_t num_headers;

  /* The file name NVRTC's messages cite; NULL: "module.cu". */
  const char *program_name;
} jitk_module_options;

/*
 * Compiles `source` with NVRTC for the engine's target and, on an engine
 * with a device, loads it. On a compile-only engine the module holds the
 * compiled image, which jitk_module_image returns.
 * Every device header in jitk's templates/ folder is available too:
 * #include <jitk/array.cuh> gives jitk::array<T, N>, the descriptor that
 * jitk_arg_array passes.
 * Relocatable device code (-dc and its spellings in options) is linked
 * with the CUDA device runtime, libcudadevrt.a, right after NVRTC, and the
 * module holds (and the cache keeps) the linked cubin: through nvJitLink
 * (libnvJitLink.so of NVRTC's major version, opened at the first such
 * compile), which needs no GPU; without it, through the driver's linker
 * on an engine with a device (which is also the only way for a PTX
 * target). Both libraries are looked for beside libnvrtc (and NVIDIA's
 * wheels next to its own), then in the lib64 and targets/<arch>/lib of
 * $CUDA_HOME, $CUDA_PATH, the toolkit of the CUDA headers in use, the one
 * jitk was built with and /usr/local/cuda (nvJitLink last on the loader's
 * path). Which libcudadevrt.a was linked, and every place searched before
 * it, is part of the cached entry's dependency record: a changed or newly
 * found library is a miss, never a stale hit. With JITK_DUMP_SOURCE=1
 * the source is logged (to stderr without a log callback) as "source of
 * module NAME:", after a comment line for each option and name expression.
 * Errors: JITK_ERR_COMPILE with NVRTC's log and the options in
 * jitk_errmsg (or the linker's log when relocatable code does not link),
 * also for a name expression that names no kernel, which NVRTC refuses;
 * JITK_ERR_CUDA when the driver refuses the image; JITK_ERR_UNSUPPORTED
 * for relocatable code when no linker or no libcudadevrt.a is found (the
 * message says where it looked and what to install).
 */
JITK_API jitk_status jitk_module_create(jitk_engine *engine, const char *source,
                                        const jitk_module_options *options, jitk_module **module);

/*
 * Loads a cubin, a PTX text or a fatbin from memory (the bytes are copied).
 * A cubin is checked first: a truncated one, or one for another
 * architecture than the engine's, is refused with JITK_ERR_INVALID_IMAGE
 * and a message that names both architectures.
 */
JITK_API jitk_status jitk_module_create_from_image(jitk_engine *engine, jitk_image_kind kind,
                                                   const void *image, size_t size,
                                                   jitk_module **module);

/* As jitk_module_create_from_image, reading the file at `path`.
 * JITK_ERR_IO when it cannot be read. */
JITK_API jitk_status jitk_module_create_from_file(jitk_engine *engine, const char *path,
                                                  jitk_module **module);

/* What one piece of a linked program is (jitk_module_link). */
typedef enum jitk_link_kind {
  /* CUDA C++ source, compiled by NVRTC as relocatable device code: to a
   * cubin, or to LTO-IR when the link optimizes across pieces. Its
   * kernels and device functions may call those of other pieces. */
  JITK_LINK_CUDA = 0,
  JITK_LINK_PTX = 1,    /* PTX text of relocatable code (nvcc -rdc=true -ptx) */
  JITK_LINK_CUBIN = 2,  /* a relocatable cubin (nvcc -rdc=true -cubin) */
  JITK_LINK_FATBIN = 3, /* a fatbin (nvcc -rdc=true -fatbin) */
  JITK_LINK_LTO_IR = 4, /* LTO-IR (nvcc -dlto -dc, or NVRTC with -dlto) */
  /* A host object file with device code in it, as nvcc -dc (with -dlto
   * or without) writes it: `nvcc -rdc=true -dlto -c file.cu`. */
  JITK_LINK_OBJECT = 5,
  JITK_LINK_LIBRARY = 6, /* an archive (.a) of such objects */
  /* The CUDA device runtime (libcudadevrt.a), which kernels that launch
   * kernels need: found where jitk_module_create looks for it; `data`,
   * `size` and `path` are not used. */
  JITK_LINK_DEVICE_RUNTIME = 7
} jitk_link_kind;

/* One piece of a linked program. */
typedef struct jitk_link_piece {
  jitk_link_kind kind;
  /* JITK_LINK_CUDA: the source text, NUL-terminated (`size` is not used).
   * Other kinds: the bytes, `size` of them, copied; or NULL with `path`
   * set, to read the file there. */
  const void *data;
  size_t size;
  const char *path;
  /* The name the linker's messages and jitk's errors give the piece;
   * NULL: the file name for a piece read from `path`, else "pieceN". A
   * CUDA piece's NVRTC messages cite options->program_name when it is
   * set, else this name. */
  const char *name;
  /* JITK_LINK_CUDA only (NULL for the defaults): NVRTC options, name
   * expressions and headers, as for jitk_module_create. jitk adds
   * "-rdc=true" (and "-dlto" when the link optimizes). */
  const jitk_module_options *options;
} jitk_link_piece;

/* Link-time optimization. */
typedef enum jitk_lto {
  /* On when some piece is LTO-IR, an object or a library (which may carry
   * LTO-IR), or when every piece is CUDA source: the CUDA pieces are then
   * compiled to LTO-IR and optimized together (a device function of one
   * source is inlined into a kernel of another). Off otherwise. */
  JITK_LTO_AUTO = 0,
  JITK_LTO_ON = 1, /* CUDA pieces to LTO-IR, nvJitLink -lto */
  JITK_LTO_OFF = 2 /* CUDA pieces to relocatable cubins; LTO-IR pieces are refused */
} jitk_lto;

typedef struct jitk_link_options {
  /* sizeof(jitk_link_options) as the caller was compiled; set by
   * jitk_link_options_init. */
  size_t struct_size;
  jitk_lto lto;
  /* Options for nvJitLink, such as "-O3", "-maxrregcount=64",
   * "-lineinfo", "-ftz=1" or "-Xptxas=-v"; jitk adds the target
   * ("-arch=sm_90") and "-lto" as decided above, and refuses either
   * among these (JITK_ERR_INVALID_ARGUMENT). */
  const char *const *options;
  size_t num_options;
  /* The name of the linked program in messages, the cache's listing and
   * NVTX ranges; NULL: "linked.cu". */
  const char *program_name;
} jitk_link_options;

/* Fills `options` with the defaults and sets struct_size. */
JITK_API jitk_status jitk_link_options_init(jitk_link_options *options);

/*
 * Builds one module from several pieces, linked by nvJitLink
 * (libnvJitLink.so of NVRTC's major version, opened with dlopen where
 * jitk_module_create looks for it; no GPU is needed, so a compile-only
 * engine links too). CUDA pieces are compiled by NVRTC first, each with
 * its own options. The module's kernels are found by symbol, or by a name
 * expression given with any CUDA piece's options.
 * The linked image goes through the kernel cache like any compiled one:
 * its key covers every piece (the bytes of binary ones, the source,
 * options, headers and name expressions of CUDA ones, the folders searched
 * for the device runtime), the link options, whether the link optimized,
 * and nvJitLink's version and library; a later call with the same pieces
 * is a hit and runs neither NVRTC nor the linker. What the CUDA pieces'
 * #includes read from disk, and the device runtime found, are checked on
 * every hit, as for jitk_module_create.
 * Errors: JITK_ERR_INVALID_ARGUMENT for no pieces, a piece of an unknown
 * kind, a CUDA piece without source, a binary one without bytes or path,
 * an LTO-IR piece with JITK_LTO_OFF, or options whose struct_size was not
 * set by jitk_link_options_init; JITK_ERR_IO for a path that cannot be
 * read; JITK_ERR_INVALID_IMAGE for a cubin piece that is not one, or is
 * for another architecture; JITK_ERR_COMPILE with NVRTC's log (naming the
 * piece) or with nvJitLink's (an undefined or twice-defined symbol, a
 * piece it cannot read); JITK_ERR_UNSUPPORTED when nvJitLink cannot be
 * found (the message says where it looked and what to install) or the
 * engine's target is PTX (a device newer than NVRTC).
 */
JITK_API jitk_status jitk_module_link(jitk_engine *engine, const jitk_link_piece *pieces,
                                      size_t num_pieces, const jitk_link_options *options,
                                      jitk_module **module);

/* Unloads the module and frees its kernels. NULL does nothing. */
JITK_API void jitk_module_destroy(jitk_module *module);

/* The module's image (the compiled cubin or PTX, or the bytes it was loaded
 * from). The pointer lives as long as the module. */
JITK_API jitk_status jitk_module_image(const jitk_module *module, const void **image, size_t *size,
                                       jitk_image_kind *kind);

/* The mangled name NVRTC gave a name expression ("_Z5scaleIfEvPT_i" for
 * "scale<float>"). JITK_ERR_NOT_FOUND when the expression was not given at
 * creation. The string lives as long as the module. */
JITK_API jitk_status jitk_module_lowered_name(const jitk_module *module,
                                              const char *name_expression, const char **lowered);

/* What ptxas reported for each kernel of a module compiled to a cubin from
 * source; modules loaded from images, or compiled to PTX, report none. */
typedef struct jitk_kernel_resources {
  const char *name; /* the mangled (lowered) name */
  int registers;
  size_t shared_bytes;   /* static shared memory */
  size_t stack_bytes;    /* stack frame */
  size_t spill_stores;   /* bytes */
  size_t spill_loads;    /* bytes */
  size_t constant_bytes; /* cmem[0] where ptxas reports it, else 0 */
} jitk_kernel_resources;

JITK_API jitk_status jitk_module_resources(const jitk_module *module,
                                           const jitk_kernel_resources **resources, size_t *count);

/* NVRTC's log of a module compiled from source: ptxas's report and any
 * warnings. "" for modules from images. Lives as long as the module. */
JITK_API jitk_status jitk_module_log(const jitk_module *module, const char **log);

/*
 * The device address and size in bytes of a __device__, __constant__ or
 * __managed__ variable of the module (cuModuleGetGlobal), so the host can
 * fill it or read it back with jitk_memcpy (or cuMemcpyHtoD, or
 * cudaMemcpy): a __constant__ table the kernels read, a __device__
 * counter they update. `name` is a name expression given at creation
 * ("&ns::table", "&table<float>": a variable's takes the &) or the
 * variable's symbol: its own name for a variable of the global namespace
 * or an extern "C" one, the mangled name for one inside a namespace. The
 * address lives as long as the module. Module handles of the same source
 * and options share one loaded module (the kernel cache gives each the
 * same one), and so share its variables: a value written through one is
 * seen by kernels of the other.
 * Errors: JITK_ERR_NOT_FOUND, naming the variable and listing the
 * module's; JITK_ERR_NO_DEVICE on a compile-only engine;
 * JITK_ERR_INVALID_ARGUMENT when an argument is NULL.
 */
JITK_API jitk_status jitk_module_get_global(jitk_module *module, const char *name, void **ptr,
                                            size_t *bytes);

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The kernel named `name`: a name expression given at creation
 * ("scale<float>"), or a symbol (an extern "C" name, or a mangled one).
 * The kernel belongs to the module: asking twice gives the same handle,
 * and it lives until the module is destroyed.
 * Errors: JITK_ERR_NOT_FOUND, with the module's kernels listed in the
 * message; JITK_ERR_NO_DEVICE on a compile-only engine.
 */
JITK_API jitk_status jitk_module_get_kernel(jitk_module *module, const char *name,
                                            jitk_kernel **kernel);

/*
 * Declares the kernel's parameters so launches check each argument's kind
 * and dtype, not only its size. The text lists parameters separated by
 * commas, each a dtype name followed by "*" for a pointer, or "[N]" for a
 * jitk::array<T, N> descriptor, and optionally a name:
 *     "float32 a, float32* x, float32[2] y, int64 n"
 * "void*" is an untyped pointer. JITK_ERR_PARSE with jitk_error_offset on
 * bad text; JITK_ERR_ARGUMENT_COUNT when it disagrees with the number of
 * parameters the compiled kernel has. Set it before launching from other
 * threads.
 */
JITK_API jitk_status jitk_kernel_set_signature(jitk_kernel *kernel, const char *signature);

typedef struct jitk_kernel_attributes {
  int registers;
  int max_threads_per_block;
  size_t static_shared_bytes;
  size_t max_dynamic_shared_bytes; /* the current limit */
  size_t constant_bytes;
  size_t local_bytes; /* per thread */
  int ptx_version;    /* 90 for 9.0 */
  int binary_version; /* 90 for sm_90 */
  int num_params;     /* -1 when the driver cannot tell */
} jitk_kernel_attributes;

JITK_API jitk_status jitk_kernel_get_attributes(const jitk_kernel *kernel,
                                                jitk_kernel_attributes *attrs);

/* The size in bytes of each of the kernel's parameters, the sizes a launch
 * checks its arguments against. *count is -1 and *sizes NULL when neither
 * the image nor the driver tells them (launches are then not checked). The
 * array lives as long as the kernel. Both pointers are required. */
JITK_API jitk_status jitk_kernel_param_sizes(const jitk_kernel *kernel, const uint32_t **sizes,
                                             int *count);

/* Raises (or lowers) the dynamic shared memory a launch may ask for.
 * JITK_ERR_SHARED_MEMORY when static plus dynamic would exceed the device's
 * opt-in limit. */
JITK_API jitk_status jitk_kernel_set_max_dynamic_shared(jitk_kernel *kernel, size_t bytes);

/* Every attribute the driver reports of a kernel (cuFuncGetAttribute),
 * numbered as CUfunction_attribute is. */
typedef enum jitk_kernel_attribute {
  JITK_KERNEL_MAX_THREADS_PER_BLOCK = 0,
  JITK_KERNEL_SHARED_SIZE_BYTES = 1, /* static */
  JITK_KERNEL_CONST_SIZE_BYTES = 2,
  JITK_KERNEL_LOCAL_SIZE_BYTES = 3, /* per thread */
  JITK_KERNEL_NUM_REGS = 4,
  JITK_KERNEL_PTX_VERSION = 5,
  JITK_KERNEL_BINARY_VERSION = 6,
  JITK_KERNEL_CACHE_MODE_CA = 7,
  JITK_KERNEL_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,    /* settable */
  JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT = 9, /* settable: -1, or 0 to 100 % */
  JITK_KERNEL_CLUSTER_SIZE_MUST_BE_SET = 10,
  JITK_KERNEL_REQUIRED_CLUSTER_WIDTH = 11,              /* settable */
  JITK_KERNEL_REQUIRED_CLUSTER_HEIGHT = 12,             /* settable */
  JITK_KERNEL_REQUIRED_CLUSTER_DEPTH = 13,              /* settable */
  JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,   /* settable: 0 or 1 */
  JITK_KERNEL_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15 /* settable */
} jitk_kernel_attribute;

/* One attribute's value. JITK_ERR_INVALID_ARGUMENT for a number outside
 * the list; the driver's error when it does not know the attribute. */
JITK_API jitk_status jitk_kernel_get_attribute(const jitk_kernel *kernel,
                                               jitk_kernel_attribute attribute, int *value);

/* Sets a settable attribute (cuFuncSetAttribute): the dynamic shared memory
 * limit (as jitk_kernel_set_max_dynamic_shared), the preferred carveout of
 * shared memory against L1, the cluster shape a launch must use, whether
 * clusters may be larger than 8 blocks (up to 16 on the H100 and H200,
 * which launches then allow), the cluster scheduling policy.
 * JITK_ERR_INVALID_ARGUMENT for a read-only attribute or a value out of
 * range, with the reason; the driver's refusal otherwise. */
JITK_API jitk_status jitk_kernel_set_attribute(jitk_kernel *kernel, jitk_kernel_attribute attribute,
                                               int value);

/* Whether the kernel would rather have more shared memory or more L1
 * (cuFuncSetCacheConfig), numbered as CUfunc_cache is. A preference: the
 * driver may use another configuration. */
typedef enum jitk_cache_preference {
  JITK_PREFER_NONE = 0,
  JITK_PREFER_SHARED = 1,
  JITK_PREFER_L1 = 2,
  JITK_PREFER_EQUAL = 3
} jitk_cache_preference;
JITK_API jitk_status jitk_kernel_set_cache_preference(jitk_kernel *kernel,
                                                      jitk_cache_preference preference);

/* The block size with the most resident threads per multiprocessor for
 * this kernel and per-block dynamic shared memory, and the smallest grid
 * that fills the device at that size (cuOccupancyMaxPotentialBlockSize). */
JITK_API jitk_status jitk_kernel_suggest_block_size(const jitk_kernel *kernel,
                                                    size_t dynamic_shared, int *block_size,
                                                    int *min_grid_size);

/* How many blocks of `block_size` threads fit on one multiprocessor. */
JITK_API jitk_status jitk_kernel_active_blocks(const jitk_kernel *kernel, int block_size,
                                               size_t dynamic_shared, int *blocks_per_sm);

/* ------------------------------------------------------------------------ */
/* Kernel arguments and launches                                             */
/* ------------------------------------------------------------------------ */

typedef enum jitk_arg_kind {
  JITK_ARG_SCALAR = 1,  /* a value of `dtype` */
  JITK_ARG_POINTER = 2, /* a device pointer to elements of `dtype` */
  JITK_ARG_ARRAY = 3,   /* a jitk::array<T, N> descriptor of a tensor */
  JITK_ARG_ALLOCATE = 4 /* for a kernel's output: let jitk allocate it */
} jitk_arg_kind;

/*
 * One kernel argument. Build it with the jitk_arg_* functions below rather
 * than by hand. A pointer or array argument built from a DLTensor refers to
 * the tensor, which must stay valid until the launch call returns.
 */
typedef struct jitk_arg {
  jitk_arg_kind kind;
  jitk_dtype dtype;
  const DLTensor *tensor;
  union {
    uint8_t b;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    uint16_t f16; /* the bits of a half or a bfloat16 */
    uint8_t f8;   /* the bits of an 8-bit float */
    float f32;
    double f64;
    float c64[2]; /* real, imaginary */
    double c128[2];
    void *ptr;
  } value;
} jitk_arg;

typedef struct jitk_dim3 {
  unsigned int x, y, z;
} jitk_dim3;

/*
 * Launches `kernel` on `stream`. Before anything reaches the driver, the
 * arguments are checked against the kernel's parameters: their number, and
 * each one's size (and kind and dtype, where a signature was set); the
 * grid and block against the device's limits and the kernel's maximum
 * threads. Dynamic shared memory beyond the kernel's current limit raises
 * the limit (as jitk_kernel_set_max_dynamic_shared would), so a launch may
 * ask for more than 48 KiB without opting in first; more than the device
 * allows with the kernel's static shared memory is JITK_ERR_SHARED_MEMORY.
 * Array arguments must be CUDA memory (kDLCUDA, kDLCUDAManaged or
 * kDLCUDAHost) of the engine's device; their byte_offset is honoured and
 * NULL strides mean C-contiguous.
 * The call queues the kernel and returns; errors inside the kernel show
 * at the next synchronization.
 */
JITK_API jitk_status jitk_kernel_launch(jitk_kernel *kernel, jitk_dim3 grid, jitk_dim3 block,
                                        size_t dynamic_shared, jitk_stream stream,
                                        const jitk_arg *args, size_t num_args);

/*
 * How a launch runs beyond its grid, block and shared memory. Fields may
 * be added at the end; struct_size tells jitk which ones a caller has.
 */
typedef struct jitk_kernel_launch_config {
  /* sizeof(jitk_kernel_launch_config) as the caller was compiled; set by
   * jitk_kernel_launch_config_init. */
  size_t struct_size;
  /* Non-zero: a cooperative launch, whose blocks are all resident on the
   * device at once, so the kernel may synchronize the whole grid
   * (cooperative_groups::this_grid().sync()). The grid must fit: at most
   * the blocks per multiprocessor that the kernel's registers, shared
   * memory and this block size allow (jitk_kernel_active_blocks) times
   * the device's multiprocessors. */
  int cooperative;
  /* Thread-block clusters (compute capability 9.0 and newer): the blocks
   * of each cluster of this shape run at once on one GPU processing
   * cluster and may read and write each other's shared memory
   * (cooperative_groups::this_cluster(), distributed shared memory). The
   * grid must be a whole number of clusters, of at most 8 blocks each.
   * {0, 0, 0}, the default: no clusters (a kernel compiled with
   * __cluster_dims__ still gets its own). */
  jitk_dim3 cluster;
  /* Non-zero: programmatic dependent launch. The kernel may begin while
   * the kernel before it on the stream is still running, once that one
   * calls cudaTriggerProgrammaticLaunchCompletion() (or as it finishes);
   * it must call cudaGridDependencySynchronize() before it reads what the
   * one before wrote. Hides the gap between back-to-back kernels. */
  int programmatic_dependent_launch;
} jitk_kernel_launch_config;

/* Fills `config` with the defaults (an ordinary launch) and sets
 * struct_size. */
JITK_API jitk_status jitk_kernel_launch_config_init(jitk_kernel_launch_config *config);

/*
 * jitk_kernel_launch with a launch configuration; config NULL is exactly
 * jitk_kernel_launch. The arguments, grid, block and shared memory are
 * checked as there. A cooperative, clustered or programmatic dependent
 * launch goes through cuLaunchKernelEx with those attributes. A
 * cooperative one is checked first for a grid that can be resident at
 * once: JITK_ERR_LAUNCH_CONFIG otherwise, giving the grid's blocks and the
 * most that fit. Clusters: JITK_ERR_LAUNCH_CONFIG for a grid that is not
 * a whole number of them, a zero dimension or more than 8 blocks;
 * JITK_ERR_UNSUPPORTED before compute capability 9.0. JITK_ERR_INVALID_ARGUMENT
 * for a config whose struct_size was not set by
 * jitk_kernel_launch_config_init (or is larger than this library's).
 */
JITK_API jitk_status jitk_kernel_launch_ex(jitk_kernel *kernel, jitk_dim3 grid, jitk_dim3 block,
                                           size_t dynamic_shared, jitk_stream stream,
                                           const jitk_arg *args, size_t num_args,
                                           const jitk_kernel_launch_config *config);

/* Argument constructors. They only fill the struct, so they are inline. */
static inline jitk_arg jitk_arg_make_(jitk_arg_kind kind, jitk_dtype dtype) {
  jitk_arg a;
  a.kind = kind;
  a.dtype = dtype;
  a.tensor = NULL;
  a.value.c128[0] = 0.0;
  a.value.c128[1] = 0.0;
  return a;
}
static inline jitk_arg jitk_arg_bool(int v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_BOOL);
  a.value.b = (uint8_t)(v != 0);
  return a;
}
static inline jitk_arg jitk_arg_i8(int8_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_INT8);
  a.value.i8 = v;
  return a;
}
static inline jitk_arg jitk_arg_i16(int16_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_INT16);
  a.value.i16 = v;
  return a;
}
static inline jitk_arg jitk_arg_i32(int32_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_INT32);
  a.value.i32 = v;
  return a;
}
static inline jitk_arg jitk_arg_i64(int64_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_INT64);
  a.value.i64 = v;
  return a;
}
static inline jitk_arg jitk_arg_u8(uint8_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_UINT8);
  a.value.u8 = v;
  return a;
}
static inline jitk_arg jitk_arg_u16(uint16_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_UINT16);
  a.value.u16 = v;
  return a;
}
static inline jitk_arg jitk_arg_u32(uint32_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_UINT32);
  a.value.u32 = v;
  return a;
}
static inline jitk_arg jitk_arg_u64(uint64_t v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_UINT64);
  a.value.u64 = v;
  return a;
}
/* float16 and bfloat16 from their bits; see jitk_float_to_half. */
static inline jitk_arg jitk_arg_f16_bits(uint16_t bits) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_FLOAT16);
  a.value.f16 = bits;
  return a;
}
static inline jitk_arg jitk_arg_bf16_bits(uint16_t bits) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_BFLOAT16);
  a.value.f16 = bits;
  return a;
}
/* float8_e4m3fn and float8_e5m2 from their bits; see
 * jitk_float_to_float8_e4m3. */
static inline jitk_arg jitk_arg_f8e4m3_bits(uint8_t bits) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_FLOAT8_E4M3);
  a.value.f8 = bits;
  return a;
}
static inline jitk_arg jitk_arg_f8e5m2_bits(uint8_t bits) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_FLOAT8_E5M2);
  a.value.f8 = bits;
  return a;
}
static inline jitk_arg jitk_arg_f32(float v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_FLOAT32);
  a.value.f32 = v;
  return a;
}
static inline jitk_arg jitk_arg_f64(double v) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_FLOAT64);
  a.value.f64 = v;
  return a;
}
static inline jitk_arg jitk_arg_c64(float re, float im) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_COMPLEX64);
  a.value.c64[0] = re;
  a.value.c64[1] = im;
  return a;
}
static inline jitk_arg jitk_arg_c128(double re, double im) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_SCALAR, JITK_COMPLEX128);
  a.value.c128[0] = re;
  a.value.c128[1] = im;
  return a;
}
/* A device pointer; dtype JITK_DTYPE_NONE leaves it untyped. */
static inline jitk_arg jitk_arg_ptr(const void *ptr, jitk_dtype dtype) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_POINTER, dtype);
  a.value.ptr = (void *)ptr;
  return a;
}
/* The address of a tensor's first element (data + byte_offset), typed by
 * the tensor's dtype: for kernels that take `T *`. */
static inline jitk_arg jitk_arg_tensor_ptr(const DLTensor *tensor) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_POINTER, JITK_DTYPE_NONE);
  a.tensor = tensor;
  return a;
}
/* A jitk::array<T, N> descriptor (pointer, shape, strides in elements) of
 * the tensor, N = tensor->ndim: for kernels that honour strides. A
 * non-empty tensor whose first element (data + byte_offset) is not
 * aligned to its dtype's alignment is refused with JITK_ERR_INVALID_ARRAY
 * before anything is launched: the GPU faults on a misaligned element,
 * and the fault ends the CUDA context. */
static inline jitk_arg jitk_arg_array(const DLTensor *tensor) {
  jitk_arg a = jitk_arg_make_(JITK_ARG_ARRAY, JITK_DTYPE_NONE);
  a.tensor = tensor;
  return a;
}

/* An output for jitk to allocate (elementwise and reduction kernels). */
static inline jitk_arg jitk_arg_allocate(void) {
  return jitk_arg_make_(JITK_ARG_ALLOCATE, JITK_DTYPE_NONE);
}

/* The most dimensions an array argument may have. */
#define JITK_MAX_NDIM 16

/* ------------------------------------------------------------------------ */
/* What elementwise and reduction kernels share                              */
/* ------------------------------------------------------------------------ */

/*
 * The dtype and shape an output of a launch has or will have, as
 * jitk_elementwise_outputs and jitk_reduction_outputs report them, so that
 * a caller can allocate outputs itself (in CuPy, in PyTorch) before
 * launching. The layout is fixed: a later need for more facts gets a new
 * call rather than a larger struct, since callers pass arrays of these.
 */
typedef struct jitk_output_spec {
  jitk_dtype dtype;
  int ndim;                     /* 0 to JITK_MAX_NDIM */
  int64_t shape[JITK_MAX_NDIM]; /* ndim extents; the rest are 0 */
} jitk_output_spec;

/*
 * One parameter of an elementwise or reduction kernel, as its lists
 * declared it, for a caller that checks arguments itself (a language
 * binding reproducing CuPy's messages) without parsing the lists again.
 * Set struct_size to sizeof(jitk_param_info) before the call: jitk writes
 * only the fields that fit in it, so that fields added later do not
 * overrun a caller compiled against this header.
 */
typedef struct jitk_param_info {
  size_t struct_size;      /* in: sizeof(jitk_param_info) */
  const char *name;        /* "x"; lives as long as the kernel */
  int is_output;           /* 1 for an out_param, 0 for an in_param */
  int is_raw;              /* 1 when declared `raw` */
  jitk_dtype dtype;        /* the declared dtype; JITK_DTYPE_NONE when the
                              type is a placeholder */
  const char *placeholder; /* "T" for a placeholder (lives as long as the
                              kernel), else NULL */
} jitk_param_info;

/*
 * Options of one launch. Fill with jitk_launch_options_init, then set what
 * differs: struct_size records which fields the caller knows, so that
 * fields added later take their defaults for callers compiled before them.
 */
typedef struct jitk_launch_options {
  size_t struct_size; /* sizeof(jitk_launch_options), set by _init */
  /* The element count when no non-raw array fixes it (CuPy's size=);
   * -1 (the default) for none. */
  int64_t size;
  /* Threads per block (CuPy's block_size=); 0 (the default) lets jitk
   * choose, so a binding that mirrors CuPy's ValueError for block_size <= 0
   * checks that itself. Any other value from 1 up to what the device and
   * the compiled kernel allow is honoured; a loop that would run tiled with
   * jitk's own block size then runs as a plain strided loop, which suits
   * any block. */
  unsigned int block_size;
} jitk_launch_options;

/* Fills `options` with the defaults above (no size, jitk's block size).
 * NULL does nothing. */
JITK_API void jitk_launch_options_init(jitk_launch_options *options);

/* ------------------------------------------------------------------------ */
/* Elementwise kernels                                                       */
/* ------------------------------------------------------------------------ */

typedef struct jitk_elementwise jitk_elementwise;

typedef struct jitk_elementwise_options {
  const char *preamble;             /* code before the kernel: helper functions, types */
  const char *loop_prep;            /* code in the kernel before the loop */
  const char *after_loop;           /* code in the kernel after the loop */
  const char *const *nvrtc_options; /* added to jitk's defaults */
  size_t num_nvrtc_options;
} jitk_elementwise_options;

/*
 * An elementwise kernel as CuPy's ElementwiseKernel defines one:
 *   in_params  "T x, T y, float32 a"   out_params "T z"
 *   operation  "z = a * x + y"         name "saxpy"
 * Each parameter is `[raw] TYPE NAME`, TYPE a dtype name or a placeholder
 * bound from the arguments at launch. Non-raw array parameters are read and
 * written one element per index (broadcast against each other as NumPy
 * does); raw ones are whole arrays (jitk::array<T, N>, indexed as x[i] in C
 * order or x(i, j)), outputs too: a raw output (`raw T z`) is written by
 * the operation itself, `z[i] = ...`, and its shape is its own, not the
 * loop's; scalars are values. In the operation, `i` is the
 * element's index in C order over the broadcast shape and _ind.size() the
 * number of elements; placeholders are types (T). Nothing is compiled
 * until a launch (or jitk_elementwise_compile) fixes the types.
 * JITK_ERR_PARSE, with jitk_error_offset and a caret line, for bad lists.
 */
JITK_API jitk_status jitk_elementwise_create(jitk_engine *engine, const char *in_params,
                                             const char *out_params, const char *operation,
                                             const char *name,
                                             const jitk_elementwise_options *options,
                                             jitk_elementwise **kernel);

JITK_API void jitk_elementwise_destroy(jitk_elementwise *kernel);

/*
 * Links every specialization of the kernel with compiled pieces (PTX,
 * cubins, fatbins, LTO-IR, objects and libraries as nvcc -dc or
 * nvcc -rdc=true -dlto -c writes them, the device runtime), as
 * jitk_module_link links a module: the operation may then call device
 * functions defined in them, declared in the preamble
 * ("extern __device__ float gelu(float);"). The generated source is
 * compiled as relocatable code and linked by nvJitLink; with LTO-IR, an
 * object or a library among the pieces (JITK_LTO_AUTO) the link optimizes
 * across them, so the functions are inlined as if they were in the
 * preamble. Bytes and files are read and copied now; each specialization's
 * cache key covers them. Call it once, before the kernel's first launch,
 * prepare or compile. Errors: those of jitk_module_link, and
 * JITK_ERR_INVALID_ARGUMENT for a CUDA source piece (source goes into the
 * preamble), a second call, or a kernel that has compiled already.
 */
JITK_API jitk_status jitk_elementwise_link(jitk_elementwise *kernel, const jitk_link_piece *pieces,
                                           size_t num_pieces, const jitk_link_options *options);

/*
 * Runs the kernel on `stream`. args has one entry per in_param, then
 * optionally one per out_param: a DLTensor (jitk_arg_array), a scalar
 * (jitk_arg_f32 ...), or jitk_arg_allocate() for an output jitk allocates;
 * omitted outputs are allocated too. Allocated outputs have the broadcast
 * shape (raw ones too; one dimension of `size` when only `size` fixes the
 * loop, as CuPy allocates them), are C-contiguous, come from the device's
 * memory pool in stream order, and are returned in outputs[j] (one slot
 * per out_param, NULL for those given) as DLManagedTensors whose deleter
 * frees them in order on `stream` (which must outlive them, as must the
 * engine). Given non-raw outputs must have the broadcast shape; given raw
 * ones may have any shape and strides.
 * `size` is the element count when no non-raw array fixes it (CuPy's
 * size=), else -1.
 * Errors: JITK_ERR_ARGUMENT_TYPE when a placeholder meets two dtypes or an
 * array's dtype differs from its parameter's; JITK_ERR_INVALID_ARRAY when
 * shapes do not broadcast, an output overlaps a non-raw input other than
 * being exactly it, or overlaps another non-raw output (raw arrays may
 * share memory with a raw output, which the operation writes by hand);
 * JITK_ERR_COMPILE for an operation that does not compile, with NVRTC's
 * message citing operation:LINE:COL.
 * A launch of a specialization already compiled allocates no host memory
 * and takes no lock but the kernel's table's.
 */
JITK_API jitk_status jitk_elementwise_launch(jitk_elementwise *kernel, jitk_stream stream,
                                             const jitk_arg *args, size_t num_args, int64_t size,
                                             DLManagedTensor **outputs);

/*
 * jitk_elementwise_launch with options (NULL: the defaults, as
 * jitk_launch_options_init sets them): options->size is the launch's
 * `size`, options->block_size its threads per block.
 * Errors, besides those of jitk_elementwise_launch: JITK_ERR_INVALID_ARGUMENT
 * for options whose struct_size is 0 (not initialized) or that set
 * fields this version of jitk does not know (non-zero bytes past its own
 * jitk_launch_options), and for a block size above the device's maximum
 * threads per block or above what the compiled kernel can run with (its
 * registers decide; the message gives the limit). Nothing is allocated or
 * launched when the options are refused.
 */
JITK_API jitk_status jitk_elementwise_launch_ex(jitk_elementwise *kernel, jitk_stream stream,
                                                const jitk_arg *args, size_t num_args,
                                                const jitk_launch_options *options,
                                                DLManagedTensor **outputs);

/*
 * Compiles and loads the specialization a launch with these arguments
 * would use (their dtypes and layout; `size` as in jitk_elementwise_launch),
 * and runs nothing, so that a later launch with such arguments can be
 * captured into a CUDA graph: a captured launch that needs a specialization
 * not compiled yet fails with JITK_ERR_STREAM_CAPTURE, since jitk neither
 * compiles nor loads while the launch's stream captures. It takes no
 * stream and may itself be called during a capture (the driver lets a
 * module load then), after such a refusal, before launching again. Outputs
 * may be left out, as in a launch; none is kept. The errors of a launch's
 * arguments.
 */
JITK_API jitk_status jitk_elementwise_prepare(jitk_elementwise *kernel, const jitk_arg *args,
                                              size_t num_args, int64_t size);

/*
 * What the outputs of a launch with these arguments would be, without
 * launching: specs[j] (one per out_param) gets each output's dtype and
 * shape. Given outputs report their own (a raw output's shape is its
 * own); outputs to be allocated (omitted, or jitk_arg_allocate()) report
 * the shape a launch would allocate. The arguments are checked as
 * jitk_elementwise_launch checks them, with the same errors (binding,
 * broadcasting, `size`, shapes of given outputs, overlaps among the given
 * arrays), but nothing is compiled, allocated or launched, and no GPU is
 * needed: it works on a compile-only engine, with tensors that say kDLCUDA
 * (their memory is never read). specs is written only on success; it may
 * be NULL for a kernel without outputs. Safe to call from several threads.
 */
JITK_API jitk_status jitk_elementwise_outputs(jitk_elementwise *kernel, const jitk_arg *args,
                                              size_t num_args, int64_t size,
                                              jitk_output_spec *specs);

/* The number of in_params and out_params. Either pointer may be NULL. */
JITK_API jitk_status jitk_elementwise_num_params(const jitk_elementwise *kernel, int *num_in,
                                                 int *num_out);

/*
 * Parameter `index` (in_params first, then out_params: 0 to num_in +
 * num_out - 1) as declared. info->struct_size must be set (see
 * jitk_param_info). JITK_ERR_INVALID_ARGUMENT for an index out of range.
 * The strings live as long as the kernel. Safe to call from several
 * threads.
 */
JITK_API jitk_status jitk_elementwise_param(const jitk_elementwise *kernel, int index,
                                            jitk_param_info *info);

/* The shape of the loop a compiled specialization is for. */
typedef struct jitk_elementwise_layout {
  int ndim;            /* loop dimensions after collapsing: 1 to JITK_MAX_NDIM */
  int index_bits;      /* 32 or 64 */
  int vector;          /* elements per vector access: 1 for none, 0 for the
                      widest 16-byte access the dtypes allow; else 2, 4, 8
                      or 16, at most 16 bytes of the widest array dtype */
  const char *scalars; /* comma-separated names of parameters given as
                          scalars, each an input's, once; the others are
                          arrays (raw: rank 1) */
} jitk_elementwise_layout;

/*
 * Generates and compiles the specialization for `types` ("T=float16,
 * U=int32"; every placeholder must be bound) and `layout` (NULL: one
 * dimension, 32-bit index, vectors), without arrays or a GPU: what the
 * CLI's `jitk compile elementwise` does. *source (owned by the kernel,
 * valid until the next compile or launch) gets the CUDA source; *module,
 * when not NULL, a module holding the compiled image. As everywhere, both
 * are left untouched on failure: jitk_elementwise_source gives the source
 * that failed to compile.
 */
JITK_API jitk_status jitk_elementwise_compile(jitk_elementwise *kernel, const char *types,
                                              const jitk_elementwise_layout *layout,
                                              const char **source, jitk_module **module);

/* The source of the specialization the last launch or compile used. Also
 * printed to stderr for every new specialization when JITK_DUMP_SOURCE=1. */
JITK_API jitk_status jitk_elementwise_source(jitk_elementwise *kernel, const char **source);

/* ------------------------------------------------------------------------ */
/* Reduction kernels                                                         */
/* ------------------------------------------------------------------------ */

typedef struct jitk_reduction jitk_reduction;

typedef struct jitk_reduction_options {
  const char *preamble;             /* code before the kernels: helper functions, types */
  const char *const *nvrtc_options; /* added to jitk's defaults */
  size_t num_nvrtc_options;
} jitk_reduction_options;

/*
 * A reduction kernel as CuPy's ReductionKernel defines one:
 *   in_params  "T x"               out_params    "T y"
 *   map_expr   "x * x"             reduce_expr   "a + b"
 *   post_map_expr "y = sqrt(a)"    identity      "0"
 *   reduce_type "float32" (or "T", or a type the preamble defines; NULL: the
 *   type of the first input)       name          "l2norm"
 * Parameter lists are as for elementwise kernels. map_expr maps one element
 * of the broadcast inputs to a value of the reduce type (_type_reduce);
 * reduce_expr combines two of them, `a` and `b`; post_map_expr assigns the
 * outputs from the result `a`, each output being its element there (read
 * by `y += a`, kept where left unassigned). In map_expr and post_map_expr
 * `_in_ind.size()` is the number of elements reduced into each output and
 * `_out_ind.size()` the number of outputs; in map_expr `_j` is the
 * element's index among those reduced into its output (C order over the
 * reduced axes). reduce_expr and identity are compiled apart from the
 * kernel's body: naming a parameter or an index there is JITK_ERR_PARSE,
 * as are parameters named `_j`, `_in_ind`, `_out_ind` or `_type_reduce`
 * and an output named `a`. Outputs cannot
 * be raw (JITK_ERR_PARSE, as CuPy's ReductionKernel refuses them too):
 * each output element is one reduced value. identity (NULL
 * for none) is the value of an empty reduction and starts every partial
 * result; without it, empty reductions are an error. Results do not depend
 * on the run: the same inputs on the same device give the same bits.
 */
JITK_API jitk_status jitk_reduction_create(jitk_engine *engine, const char *in_params,
                                           const char *out_params, const char *map_expr,
                                           const char *reduce_expr, const char *post_map_expr,
                                           const char *identity, const char *reduce_type,
                                           const char *name, const jitk_reduction_options *options,
                                           jitk_reduction **kernel);

JITK_API void jitk_reduction_destroy(jitk_reduction *kernel);

/* jitk_elementwise_link for a reduction: its map, reduce and post-map
 * expressions may call device functions of the pieces. */
JITK_API jitk_status jitk_reduction_link(jitk_reduction *kernel, const jitk_link_piece *pieces,
                                         size_t num_pieces, const jitk_link_options *options);

/*
 * Reduces over `axes` (num_axes of them, negative ones counting from the
 * end; axes NULL or num_axes -1: every axis) of the broadcast shape of the
 * non-raw array inputs. Outputs have that shape without the reduced axes,
 * or with them as extent 1 when `keepdims` is non-zero; args are as for
 * jitk_elementwise_launch, outputs given or allocated (returned in
 * outputs[j] as DLManagedTensors freed in order on `stream`). Large
 * reductions use a temporary from the device's memory pool, in stream
 * order. An axis outside the broadcast shape's dimensions is
 * JITK_ERR_AXIS (NumPy's AxisError), one given twice
 * JITK_ERR_INVALID_ARGUMENT.
 */
JITK_API jitk_status jitk_reduction_launch(jitk_reduction *kernel, jitk_stream stream,
                                           const jitk_arg *args, size_t num_args, const int *axes,
                                           int num_axes, int keepdims, DLManagedTensor **outputs);

/*
 * jitk_elementwise_prepare for a reduction: the specialization a launch
 * with these arguments, axes and keepdims would use, compiled and loaded,
 * nothing run, so that such a launch can be captured into a CUDA graph.
 */
JITK_API jitk_status jitk_reduction_prepare(jitk_reduction *kernel, const jitk_arg *args,
                                            size_t num_args, const int *axes, int num_axes,
                                            int keepdims);

/*
 * Chooses the strategy for this layout by measuring it: launches the
 * kernel on these arguments (every output given) with each strategy that
 * applies (along the reduced elements, across 32 outputs a block, a block
 * per short row of outputs, warps owning rows of outputs), each timed with
 * CUDA events on `stream` (the median of 7 after 2; the call waits for
 * them), and keeps the fastest for every later launch of the same layout
 * (shape, strides, dtypes, reduced axes) on this kernel, and in the
 * kernel cache's tuning table for other kernels of the same name,
 * expressions and parameters on the same device and target. The outputs end as a
 * launch with the chosen strategy leaves them; so an output that shares
 * memory with an input, or that post_map_expr reads or may leave as it
 * was (`y += a`), is refused (JITK_ERR_INVALID_ARGUMENT), since each run
 * would start from the last one's result. Each strategy is
 * deterministic, but two may round differently: a tuned layout gives the
 * same bits on every run after the tuning, not necessarily the untuned
 * bits. Without a tuning, the strategy follows from which axes are
 * contiguous.
 */
JITK_API jitk_status jitk_reduction_autotune(jitk_reduction *kernel, jitk_stream stream,
                                             const jitk_arg *args, size_t num_args, const int *axes,
                                             int num_axes, int keepdims);

/*
 * What the outputs of jitk_reduction_launch with these arguments, axes and
 * keepdims would be, without launching: specs[j] (one per out_param) gets
 * each output's dtype and shape (given outputs report their own). The
 * arguments are checked as the launch checks them, with the same errors
 * (binding, broadcasting, axes, the reduced shape of given outputs, an
 * empty reduction without identity, overlaps among the given arrays), but
 * nothing is compiled, allocated or launched, and no GPU is needed (a
 * compile-only engine takes tensors that say kDLCUDA; their memory is
 * never read). specs is written only on success. Safe to call from
 * several threads.
 */
JITK_API jitk_status jitk_reduction_outputs(jitk_reduction *kernel, const jitk_arg *args,
                                            size_t num_args, const int *axes, int num_axes,
                                            int keepdims, jitk_output_spec *specs);

/* As jitk_elementwise_num_params and jitk_elementwise_param. */
JITK_API jitk_status jitk_reduction_num_params(const jitk_reduction *kernel, int *num_in,
                                               int *num_out);
JITK_API jitk_status jitk_reduction_param(const jitk_reduction *kernel, int index,
                                          jitk_param_info *info);

/* The shape of the work a compiled specialization is for. */
typedef struct jitk_reduction_layout {
  int kept_ndim;    /* output dimensions after collapsing: 0 (one output) and up */
  int reduced_ndim; /* reduced dimensions after collapsing: 1 and up */
  int index_bits;   /* 32 or 64 */
  char strategy;    /* 'i': along contiguous reduced elements (rows, whole
                       arrays); 'o': across contiguous outputs (columns);
                       'm': each output one element or one 16-byte vector
                       of them (an axis of extent 1, rows of four float32),
                       several outputs a thread; split must be 0;
                       'r': segments of rows of outputs read in vectors
                       of up to 16 bytes, several rows at a time (column
                       sums), compiled for column sums, 32 outputs a
                       segment */
  int split;        /* 0: each output reduced in one piece; 1: in chunks
                       whose partial results the last blocks of each tile
                       of outputs to finish combine in the same kernel
                       (a launch's choice below 16 MiB) with up to a warp
                       per output; 2: up to a block per output; 3: a
                       thread per output (a launch's choice for up to 4
                       chunks a fold) */
} jitk_reduction_layout;

/*
 * Generates and compiles the specialization for `types` ("T=float32") and
 * `layout` (NULL: one output, one reduced dimension, 32-bit index, 'i'),
 * without arrays or a GPU: what `jitk compile reduction` does. As
 * jitk_elementwise_compile for *source and *module.
 */
JITK_API jitk_status jitk_reduction_compile(jitk_reduction *kernel, const char *types,
                                            const jitk_reduction_layout *layout,
                                            const char **source, jitk_module **module);

/* The source of the specialization the last launch or compile used. Also
 * printed to stderr for every new specialization when JITK_DUMP_SOURCE=1. */
JITK_API jitk_status jitk_reduction_source(jitk_reduction *kernel, const char **source);

/* ------------------------------------------------------------------------ */
/* Matmul plans                                                              */
/* ------------------------------------------------------------------------ */

typedef struct jitk_matmul jitk_matmul;

/* The arithmetic of the products and the accumulator. */
typedef enum jitk_compute {
  JITK_COMPUTE_DEFAULT = 0,  /* float64 for float64 inputs, float32 otherwise */
  JITK_COMPUTE_FLOAT32 = 1,  /* float32 products and sums (float16/bfloat16
                                inputs: tensor cores, float32 accumulation) */
  JITK_COMPUTE_TF32 = 2,     /* float32 inputs rounded to tf32 on tensor cores */
  JITK_COMPUTE_FLOAT16 = 3,  /* float16 inputs on tensor cores, float32 sums */
  JITK_COMPUTE_BFLOAT16 = 4, /* bfloat16 inputs on tensor cores, float32 sums */
  JITK_COMPUTE_FLOAT64 = 5,
  /* float8 inputs only: the tensor cores' accumulator takes the whole K,
   * without the promotion of each K-tile's sum into a separate float32
   * one that DEFAULT and FLOAT32 do on sm_90 (cuBLASLt's
   * CUBLASLT_MATMUL_DESC_FAST_ACCUM): faster, less accurate over long K.
   * See "FP8 plans" below. */
  JITK_COMPUTE_FLOAT32_FAST_ACCUM = 6
} jitk_compute;

typedef enum jitk_order { JITK_ROW_MAJOR = 0, JITK_COL_MAJOR = 1 } jitk_order;

/*
 * D[b] = epilogue(alpha * A[b] @ B[b] + beta * C[b]) for b < batch, with A
 * m x k, B k x n, C and D m x n. Leading dimensions are in elements (0:
 * packed for the order); batch strides in elements (0: one matrix after
 * another, packed). The epilogue is an expression over `acc` (that sum, in
 * the accumulator's type, named `T` in the expression), `row`, `col`,
 * `batch` and the extra operands of `epilogue_params` ("raw T bias,
 * float32 scale", at most 64: raw arrays are read as the accumulator's
 * type whatever their dtype, bias[col]; scalars are values), with
 * relu(x), gelu(x) (tanh form), sigmoid(x) and silu(x) available (in
 * float32 from one fast exponential and division: within 1e-5 relative);
 * NULL means `acc`. The result is converted to D's dtype once, in
 * registers, before D's single store. A raw operand that every
 * evaluation reads at the element's own column, as `bias[col]` (not under
 * ?:, && or ||), may be read when the kernel starts a tile rather than
 * when it stores it, so that the read's latency hides behind the tile's
 * MMAs; its elements must not change while the plan executes, as any
 * operand's.
 */
/*
 * An output the epilogue writes besides D, as cuBLASLt's *_AUX epilogues
 * do (the pre-activation that GELU's backward pass needs, a ReLU mask):
 * an M x N matrix per batch, stored in D's order.
 */
typedef struct jitk_matmul_output {
  /* A C identifier, distinct from the epilogue's operands, the other
   * outputs and reductions, and the names below. */
  const char *name;
  /* Any real dtype of the table: float16 to float64, the integers, bool. */
  jitk_dtype dtype;
  /* The element at (batch, row, col): a C++ expression of `acc` (alpha *
   * A B + beta * C, in the accumulator's type T), `value` (D's element as
   * the epilogue made it, in T, before its conversion to D's dtype), `row`,
   * `col`, `batch` and the epilogue's operands. Its errors cite
   * `output NAME:LINE:COL`. */
  const char *expr;
  /* Leading dimension and batch stride in elements; 0: packed. */
  int64_t ld, stride;
} jitk_matmul_output;

typedef enum jitk_reduce_op {
  JITK_REDUCE_SUM = 0,
  JITK_REDUCE_MAX = 1,
  JITK_REDUCE_MIN = 2
} jitk_reduce_op;

typedef enum jitk_reduce_axis {
  /* Over the rows: one value per column, N per batch (cuBLASLt's BGRADB:
   * the bias gradient, the sum of dY over the rows). */
  JITK_REDUCE_ROWS = 0,
  /* Over the columns: one value per row, M per batch (BGRADA). */
  JITK_REDUCE_COLUMNS = 1,
  /* Over the whole matrix: one value per batch (an amax is the MAX of
   * fabs(value)). */
  JITK_REDUCE_ALL = 2
} jitk_reduce_axis;

/*
 * A reduction of an expression of the epilogue's values, computed with
 * the product and written to its own array. Deterministic: the terms are
 * combined in an order fixed by the shape alone, so two executions give
 * the same bits.
 */
typedef struct jitk_matmul_reduction {
  const char *name; /* as an output's */
  jitk_dtype dtype; /* of the result: float16, bfloat16, float32 or float64 */
  const char *expr; /* as an output's; errors cite `reduction NAME:LINE:COL` */
  jitk_reduce_op op;
  jitk_reduce_axis axis;
} jitk_matmul_reduction;

typedef struct jitk_matmul_desc {
  /* sizeof(jitk_matmul_desc) as the caller was compiled; set by
   * jitk_matmul_desc_init. */
  size_t struct_size;
  int64_t m, n, k;
  int64_t batch;
  jitk_dtype a_dtype, b_dtype, c_dtype, d_dtype;
  jitk_compute compute;
  jitk_order a_order, b_order, c_order, d_order;
  int64_t lda, ldb, ldc, ldd;
  int64_t stride_a, stride_b, stride_c, stride_d;
  int has_c; /* C is read (beta * C) */
  /* Finite (beta only matters with C); each execution's unless its
   * operands give others (jitk_matmul_operands). */
  double alpha, beta;
  const char *epilogue;
  const char *epilogue_params;
  const char *preamble; /* helper functions for the epilogue */
  const char *name;     /* the kernel's name (NULL: "matmul") */
  /* Extra outputs and reductions of the epilogue's values (at most 8 of
   * each); a plan with any is executed by jitk_matmul_execute_ex. */
  const jitk_matmul_output *outputs;
  size_t num_outputs;
  const jitk_matmul_reduction *reductions;
  size_t num_reductions;
  /* FP8 scaling, as cuBLASLt's A_SCALE_POINTER, B_SCALE_POINTER,
   * D_SCALE_POINTER and AMAX_D_POINTER: nonzero when each execution passes
   * (in jitk_matmul_operands) a device float32 scale of A (a float8 A
   * only), of B (a float8 B only), of D (a float8 D only), or an array of
   * one float32 for D's amax (a plan of float8 A and B only). Any other
   * use fails at jitk_matmul_create. A plan with any of them is executed
   * by jitk_matmul_execute_ex. See "FP8 plans" below. Fields added here;
   * a caller compiled before them (a smaller struct_size) gets 0. */
  int has_a_scale, has_b_scale, has_d_scale, has_amax_d;
  /* Split-K, for products with too few output tiles to keep the device
   * busy (a few tiles and a long K; decode shapes, M up to a few hundred
   * with N and K large, are bound by reading B, which the busy
   * multiprocessors already do at the memory's pace, so jitk keeps them
   * whole): K is cut into
   * slices computed by separate blocks, whose float32 partial tiles are
   * summed in slice order, then alpha, beta * C, the epilogue, the
   * outputs and the reductions are applied once per element. On Hopper's
   * tensor cores (wgmma) the block that finishes a tile's last slice sums
   * the tile's slices itself (a counter per tile says which block that
   * is; no block waits for another); float32 on CUDA cores (FFMA) on
   * sm_90 and later, in 2 to 4 slices with more blocks than the device
   * has multiprocessors but no more than two a multiprocessor (four on
   * the 128 x 32 tile), runs each tile's slices as one thread-block
   * cluster, whose blocks sum them in their shared memory, with no
   * workspace; the other kernels leave the sum to a second small
   * kernel. 0: jitk chooses from the shape and the
   * device's multiprocessors (and a choice jitk_matmul_autotune stored);
   * 1: no split; N: N slices of K. Deterministic: the slices are added in
   * the same order whichever finishes last, so two executions of a plan
   * give the same bits; a different number of slices sums in a different
   * order, so its last bits may differ (a split summed across clusters
   * gives the bits the same split through the second kernel gives). The
   * workspace (slices x batch x M
   * x N float32, M and N rounded up to whole tiles on wgmma, and its
   * counters) is allocated in stream order at each execution, as the
   * reductions' is, so one plan may run on several streams at once.
   * Refused when the plan is made: a
   * negative value, more slices than the plan's kernel has K-tiles (its
   * depth in K: 64 for 16-bit wgmma, 128 for 8-bit, 32 for tf32, 16 for
   * FFMA; the message says which), and a split of a float64 plan (its
   * sums would be rounded to float32). This field was added last: a
   * caller compiled before it passes the smaller struct_size and gets 0. */
  int split_k;
} jitk_matmul_desc;

/*
 * FP8 plans. A and B float8_e4m3fn or float8_e5m2 (not both e5m2, as
 * cuBLASLt on Hopper), A row-major and B column-major (both K-major, the
 * only layout Hopper's FP8 wgmma reads), their leading dimensions and
 * batch strides multiples of 16 elements, compute DEFAULT or FLOAT32; C
 * and D float16, bfloat16, float32 or either 8-bit float. Then
 *
 *   D = scale_d * epilogue(alpha * scale_a * scale_b * A B + beta * C)
 *
 * (each scale 1 when the plan has none), and amax_d = max |epilogue(...)|
 * over all batches, before scale_d and before the conversion to D's dtype,
 * in float32 (exact whatever the order, so deterministic; a NaN makes it
 * NaN). A conversion to an 8-bit D rounds to nearest even and saturates
 * to the largest finite value (448 for e4m3, 57344 for e5m2); NaN stays
 * NaN. The epilogue's `acc` and outputs' `value` are float32 and exclude
 * scale_d. On sm_90 the product runs on wgmma (m64nNk32, e4m3/e5m2
 * inputs; A or B off 16 bytes at execution is copied first, onto rows
 * of whole 128-byte lines) with promotion: each K-tile (128 of K, four k32 steps) is summed
 * by the tensor cores into a fresh accumulator, which is then added into
 * a separate float32 sum with ordinary float32 additions, in K order (as
 * cuBLASLt without CUBLASLT_MATMUL_DESC_FAST_ACCUM, and DeepGEMM, do).
 * JITK_COMPUTE_FLOAT32_FAST_ACCUM leaves the whole K to the tensor cores'
 * accumulator instead (cuBLASLt's FAST_ACCUM): faster, less accurate
 * over long K. On other targets an FFMA kernel computes it in float32.
 *
 * Accuracy, checked by tests/gpu/test_matmul.c against a float64
 * reference of the dequantized inputs (each FP8 element converted exactly
 * to double and multiplied by its tensor's scale), the epilogue applied in
 * float64, times scale_d, clamped to D's finite range: for each element,
 *
 *   |D - ref| <= (2^-10 * min(ceil(K / 32), 4) + 2^-24 * K) * s * S
 *                + u_D * |ref| + e_D
 *
 * with promotion (and on FFMA), and with fast accumulation
 *
 *   |D - ref| <= (2^-10 * ceil(K / 32) + 2^-24 * K) * s * S + u_D * |ref| + e_D
 *
 * with S = sum over k of |A[i][k] B[k][j]| (dequantized), s = |alpha| *
 * scale_d times the epilogue's Lipschitz constant (1 for bias + ReLU), u_D
 * the unit roundoff of D's dtype (2^-24 float32, 2^-8 bfloat16, 2^-11
 * float16, 2^-4 e4m3, 2^-3 e5m2) and e_D half its smallest subnormal
 * (2^-10 e4m3, 2^-17 e5m2, negligible for the others). Why: the 8-bit
 * products are exact, but each k32 step of the tensor cores adds its 32
 * products to the running accumulator keeping only about 13 bits below
 * the largest of those 33 terms, truncating the rest, so a step may lose
 * several units of that last bit, and the running sum is cut again, in
 * the same direction, at every step. We take a step's error as at most
 * 2^-10 of (|accumulator| + the step's sum of |a b|), so at most 2^-10 of
 * the part of S summed so far. That figure is not documented by NVIDIA:
 * it is the round bound consistent with what an H200 measured without
 * promotion (0.083 S at K = 8192, beyond the 2^-12 per step of S, 0.0625
 * S, that this header assumed before). Without promotion the accumulator
 * carries the whole K, whose ceil(K / 32) steps then err by up to
 * 2^-10 S each. With promotion a K-tile's accumulator starts from zero
 * and holds that tile's terms only, so its four steps err by at most
 * 4 * 2^-10 of the tile's share of S: 2^-8 S over all the tiles, whatever
 * K. The float32 additions of the ceil(K / 128) partial sums add at most
 * 2^-24 S each, as do FFMA's K float32 FMAs: the 2^-24 K S term covers
 * both. At K = 8192 the bound with promotion is 0.0044 S, the one
 * without 0.25 S. amax_d is checked
 * exactly: for a float32 D without scale_d it is max |D| itself, and
 * otherwise max |D| is amax_d * scale_d (in float32) converted to D's
 * dtype, since rounding is monotonic.
 */

/* Defaults: batch 1, float32 everywhere, row-major, packed, alpha 1, beta 0,
 * no C, no epilogue, no scales. Sizes are left 0. */
JITK_API void jitk_matmul_desc_init(jitk_matmul_desc *desc);

/*
 * Plans the product: checks the description, picks a kernel configuration
 * for the shape, dtypes and layouts (the one jitk_matmul_autotune stored
 * for this device and shape class, if any, else the default measured
 * fastest on an H200), generates and compiles it (through the kernel
 * cache), all before any execution. Errors in the epilogue cite
 * `epilogue:LINE:COL`. Works on a compile-only engine (no GPU) too.
 */
JITK_API jitk_status jitk_matmul_create(jitk_engine *engine, const jitk_matmul_desc *desc,
                                        jitk_matmul **plan);

JITK_API void jitk_matmul_destroy(jitk_matmul *plan);

/*
 * Runs the plan on `stream`: a, b, c (NULL without C) and d are device
 * pointers to the first matrix of each (NULL for a matrix without
 * elements, as an empty array's data may be); `extra` holds the epilogue's
 * operands in order (jitk_arg_ptr or jitk_arg_tensor_ptr for raw arrays,
 * jitk_arg_f32 ... for scalars). Each pointer must be aligned to the
 * elements read or written through it (A's, B's, C's and D's dtypes; a
 * raw operand's declared type): a misaligned one is refused with
 * JITK_ERR_INVALID_ARGUMENT before anything is launched. The product is
 * ordered on the stream as any kernel is: on sm_90 its kernel is launched
 * as a programmatic dependent, so its blocks may start while the work
 * before it ends, but it reads and writes no memory until that work has
 * finished.
 */
JITK_API jitk_status jitk_matmul_execute(jitk_matmul *plan, jitk_stream stream, const void *a,
                                         const void *b, const void *c, void *d,
                                         const jitk_arg *extra, size_t num_extra);

/* What an execution works on: jitk_matmul_execute's arguments, and the
 * arrays of the plan's outputs and reductions. */
typedef struct jitk_matmul_operands {
  /* sizeof(jitk_matmul_operands); set by jitk_matmul_operands_init. */
  size_t struct_size;
  const void *a, *b, *c; /* c: NULL without C */
  void *d;
  const jitk_arg *extra; /* the epilogue's operands */
  size_t num_extra;
  /* One device pointer per output, in the description's order. */
  void *const *outputs;
  /* One device pointer per reduction: batch x N elements for
   * JITK_REDUCE_ROWS, batch x M for JITK_REDUCE_COLUMNS, batch for
   * JITK_REDUCE_ALL, of the reduction's dtype, packed. */
  void *const *reductions;
  /* FP8 plans (the description's has_a_scale ... has_amax_d): device
   * pointers to one float32 each, read (or, for amax_d, written) on the
   * stream in order. Fields added here; a caller compiled before them (a
   * smaller struct_size) passes none. */
  const float *a_scale, *b_scale, *d_scale;
  float *amax_d;
  /* This execution's alpha and beta, in place of the description's (NULL:
   * the description's), finite as there; beta only counts with C, and a
   * beta of 0 leaves C unread. They are the kernel's parameters, so no
   * value compiles anything. Fields added here; a caller compiled before
   * them passes none. */
  const double *alpha, *beta;
} jitk_matmul_operands;

JITK_API jitk_status jitk_matmul_operands_init(jitk_matmul_operands *operands);

/*
 * jitk_matmul_execute with the plan's outputs and reductions. The
 * reductions are finished by small kernels after the product's, on the
 * same stream, from a workspace jitk allocates in stream order.
 */
JITK_API jitk_status jitk_matmul_execute_ex(jitk_matmul *plan, jitk_stream stream,
                                            const jitk_matmul_operands *operands);

/*
 * Optional: times the plan's candidate configurations (tile shapes,
 * pipeline depths, schedules of its kernel kind, and where the output
 * tiles are too few to fill the device, split-K slice counts, unless the
 * description set split_k) on the device by running
 * each on these operands, as jitk_matmul_execute would, several times after
 * a warm-up; keeps the fastest as the plan's kernel, and stores the choice
 * in the kernel cache's database under this device and the plan's shape
 * class (dtypes, layouts, and M, N, K rounded up to powers of two), where
 * later plans of the class find it, without timing anything. The plan's
 * own configuration is timed too, before and after the candidates, and
 * stays unless a candidate is more than 1 % faster than its better time,
 * so a tuned plan is never slower than the one it was. D is overwritten, so it
 * must not be C (refused where it is the same pointer). Compiling the
 * candidates takes seconds; the plan must not execute meanwhile. FFMA plans
 * have one configuration: nothing is timed. A tensor-core plan given
 * pointers it cannot use (see jitk_matmul_execute) fails with
 * JITK_ERR_INVALID_ARGUMENT.
 */
JITK_API jitk_status jitk_matmul_autotune(jitk_matmul *plan, jitk_stream stream, const void *a,
                                          const void *b, const void *c, void *d,
                                          const jitk_arg *extra, size_t num_extra);

/* The generated source of the plan's kernel. */
JITK_API jitk_status jitk_matmul_source(jitk_matmul *plan, const char **source);

/* A one-line description of the chosen configuration ("tensor cores bf16
 * m16n8k16, tile 128x128x32, 4 stages, 8 warps"), into buf. */
JITK_API jitk_status jitk_matmul_describe(jitk_matmul *plan, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* JITK_JITK_H */
