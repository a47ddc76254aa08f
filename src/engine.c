/*
 * The engine: configuration, the device and its primary context, and the
 * tables every other stage works through.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

jitk_status jitk_engine_config_init(jitk_engine_config *config) {
  if (config == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_config_init: config is NULL");
  memset(config, 0, sizeof *config);
  config->struct_size = sizeof *config;
  config->device = JITK_DEVICE_DEFAULT;
  config->log_level = JITK_LOG_DEFAULT;
  config->cache_mode = JITK_CACHE_DEFAULT;
  config->cache_shared = -1;
  return JITK_OK;
}

/* Where the config's forms end: a caller built against an older header
 * passes a smaller struct, which ends after one of the fields from
 * `device` on (or in the padding after it). */
#define JK_END(f) (offsetof(jitk_engine_config, f) + sizeof(((jitk_engine_config *)0)->f))
static const size_t config_forms[] = {
    JK_END(device), JK_END(arch), JK_END(log_fn), JK_END(log_user), JK_END(log_level),
    JK_END(alloc_fn), JK_END(alloc_user), JK_END(cuda_include_dir), JK_END(driver_library),
    JK_END(cache_dir), JK_END(cache_mode), JK_END(cache_max_bytes), JK_END(cache_shared),
    JK_END(cache_memory_entries), JK_END(cache_shared_dir), JK_END(cache_shared_owner),
    JK_END(cache_remote), JK_END(cache_record), JK_END(compile_threads), JK_END(pch),
    /* a pointer, whose size is any pointer's */
    offsetof(jitk_engine_config, share_images_with) + sizeof(void *),
    JK_END(cache_remote_key_file)};
#undef JK_END

/* Copies a caller's config: the fields an older form does not have keep
 * their defaults, and a size inside a field is refused rather than read
 * in part. */
static jitk_status read_config(const jitk_engine_config *in, jitk_engine_config *out) {
  jitk_engine_config_init(out);
  if (in == NULL) return JITK_OK;
  size_t n =
      jk_struct_form(in->struct_size, config_forms, sizeof config_forms / sizeof config_forms[0]);
  if (n == 0) {
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_engine_create: config->struct_size is %zu; call "
                   "jitk_engine_config_init before setting fields",
                   in->struct_size);
  }
  memcpy(out, in, n);
  out->struct_size = sizeof *out;
  return JITK_OK;
}

/* The compile pool's size: the config's, $JITK_COMPILE_THREADS, or the
 * CPUs this process may use. More threads than that only share the same
 * cores; the bound keeps a typo from starting thousands. */
static jitk_status compile_threads(const jitk_engine_config *cfg, int *out) {
  enum { MOST = 1024 };
  if (cfg->compile_threads < 0 || cfg->compile_threads > MOST)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_engine_create: compile_threads is %d; give 0 (as many as the CPUs) or "
                   "1 to %d",
                   cfg->compile_threads, MOST);
  if (cfg->compile_threads > 0) {
    *out = cfg->compile_threads;
    return JITK_OK;
  }
  const char *env = getenv("JITK_COMPILE_THREADS");
  if (env == NULL || *env == '\0') {
    *out = jk_cpu_count();
    return JITK_OK;
  }
  char *end;
  errno = 0;
  long v = strtol(env, &end, 10);
  if (errno != 0 || *end != '\0' || v < 1 || v > MOST)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "JITK_COMPILE_THREADS=\"%s\" is not a number of threads from 1 to %d", env,
                   MOST);
  *out = (int)v;
  return JITK_OK;
}

static jitk_status resolve_ordinal(int requested, int *ordinal) {
  if (requested >= 0) {
    *ordinal = requested;
    return JITK_OK;
  }
  if (requested != JITK_DEVICE_DEFAULT)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_engine_create: device %d is neither an ordinal, "
                   "JITK_DEVICE_DEFAULT nor JITK_DEVICE_NONE",
                   requested);
  const char *env = getenv("JITK_DEVICE");
  if (env == NULL || *env == '\0') {
    *ordinal = 0;
    return JITK_OK;
  }
  char *end;
  errno = 0;
  long v = strtol(env, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > 1024)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "JITK_DEVICE=\"%s\" is not a device ordinal",
                   env);
  *ordinal = (int)v;
  return JITK_OK;
}

/* Whether code built for target t runs on a device of capability
 * major.minor: a cubin needs the same major and a minor no newer (an
 * "a" target exactly the device), PTX any older or equal version. */
static bool target_runs_on(const jk_target *t, int major, int minor) {
  int dev = major * 10 + minor, tgt = t->major * 10 + t->minor;
  if (t->specific) return tgt == dev;
  if (t->ptx) return tgt <= dev;
  return t->major == major && t->minor <= minor;
}

static jitk_status open_device(jitk_engine *e, const jitk_engine_config *cfg) {
  int ordinal = 0;
  jitk_status st = resolve_ordinal(cfg->device, &ordinal);
  if (st != JITK_OK) return st;

  char why[1024];
  st = jk_driver_load(&e->drv, cfg->driver_library, why, sizeof why);
  if (st != JITK_OK) return jk_fail(NULL, st, "%s", why);

  int count = 0;
  CUresult r = jk_cu_device_count(&e->drv, &count);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(NULL, r, "cuDeviceGetCount");
  if (ordinal >= count)
    return jk_fail(NULL, JITK_ERR_NO_DEVICE, "no CUDA device %d: the driver sees %d device%s",
                   ordinal, count, count == 1 ? "" : "s");
  r = jk_driver_device_info(&e->drv, ordinal, &e->info);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(NULL, r, "reading device properties");
  r = jk_cu_device_get(&e->drv, ordinal, &e->device);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(NULL, r, "cuDeviceGet");
  /* The primary context is the one the CUDA runtime uses, so buffers from
   * cudaMalloc and cudaStream_t streams belong to it already. */
  r = jk_cu_primary_ctx_retain(&e->drv, e->device, &e->context);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(NULL, r, "cuDevicePrimaryCtxRetain");
  e->ordinal = ordinal;
  e->has_device = true;

  if (cfg->arch != NULL) {
    st = jk_target_parse(e, cfg->arch, &e->target);
    if (st != JITK_OK) return st;
    if (!target_runs_on(&e->target, e->info.cc_major, e->info.cc_minor))
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "arch %s cannot run on device %d (%s, compute "
                     "capability %d.%d)",
                     e->target.arch, ordinal, e->info.name, e->info.cc_major, e->info.cc_minor);
  } else {
    st = jk_target_for_device(e, e->info.cc_major, e->info.cc_minor, &e->target);
    if (st != JITK_OK) return st;
  }
  return JITK_OK;
}

/* Opens the engine's cache store; run on a helper thread while the main
 * one brings up the driver, so that SQLite's first-open cost (about half a
 * millisecond) hides under cuInit's (a hundred and more). */
/* Which compiles use NVRTC's precompiled headers: the config's, else
 * $JITK_PCH, else generated kernels while the disk cache is on (a cache
 * that is off or read-only is a wish to write nothing into its folder).
 * *asked says whether the config or the environment chose. */
static jitk_pch_mode pch_mode(jitk_engine *e, const jitk_engine_config *cfg, bool *asked) {
  *asked = true;
  if (cfg->pch != JITK_PCH_DEFAULT) return cfg->pch;
  const char *v = getenv("JITK_PCH");
  if (v != NULL && *v != '\0') {
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) return JITK_PCH_OFF;
    if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0) return JITK_PCH_ON;
    if (strcmp(v, "all") == 0) return JITK_PCH_ALL;
    jk_log(e, JITK_LOG_WARN, "JITK_PCH=\"%s\" is not off, on or all; using the default", v);
  }
  *asked = false;
  return e->cache.mode == JITK_CACHE_ON ? JITK_PCH_ON : JITK_PCH_OFF;
}

/* Where the engine's precompiled headers go: <cache folder>/pch, both
 * checked with the private tier's rules, since a file planted there would
 * be loaded by NVRTC as compiled code. A group cache is written by others
 * and a network filesystem is slow and shared between machines whose
 * processes cannot use each other's files, so neither gets them. Nothing
 * here fails the engine: precompiled headers are off, and the reason is
 * one log line (a warning when they were asked for, else information). */
static void pch_setup(jitk_engine *e, const jitk_engine_config *cfg) {
  bool asked = false;
  jitk_pch_mode mode = pch_mode(e, cfg, &asked);
  char why[768];
  why[0] = '\0';
  char *dir = NULL, *real = NULL, *pch = NULL, *root = NULL;
  jk_trust t;
  memset(&t, 0, sizeof t);
  t.kind = JK_TIER_PRIVATE;
  const char *fs = NULL;
  if (mode == JITK_PCH_OFF) {
    snprintf(why, sizeof why, "%s",
             asked ? "turned off (jitk_engine_config.pch or JITK_PCH=off)"
                   : "the disk cache is not on (JITK_PCH=on uses its folder anyway)");
    asked = false;
  } else if (!jk_pch_available(&e->nvrtc)) {
    snprintf(why, sizeof why, "NVRTC %d.%d has none (they came with CUDA 12.8)", e->nvrtc.major,
             e->nvrtc.minor);
  } else if (e->cache.shared) {
    snprintf(why, sizeof why,
             "the cache is a group cache (JITK_CACHE_SHARED=1), whose folder others write; they "
             "are kept only in a private one");
  } else if ((dir = e->cache.dir     ? jk_strdup(e, e->cache.dir)
                    : cfg->cache_dir ? jk_strdup(e, cfg->cache_dir)
                                     : jk_cache_default_dir(e)) == NULL) {
    snprintf(why, sizeof why, "no cache folder (set JITK_CACHE_DIR)");
  } else if (jk_cache_prepare_dir(e, dir, &t, true, &real) != JITK_OK) {
    snprintf(why, sizeof why, "%s", jitk_errmsg(e));
  } else {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "%s/pch", real);
    pch = jk_buf_take(&b);
    if (pch == NULL)
      snprintf(why, sizeof why, "out of memory");
    else if (jk_cache_prepare_dir(e, pch, &t, true, &root) != JITK_OK)
      snprintf(why, sizeof why, "%s", jitk_errmsg(e));
    else if (jk_is_network_fs(root, &fs))
      snprintf(why, sizeof why, "the cache folder is on a network filesystem (%s)", fs);
  }
  if (why[0] != '\0') {
    jk_free(e, root);
    root = NULL;
    if (mode != JITK_PCH_OFF)
      jk_log(e, asked ? JITK_LOG_WARN : JITK_LOG_INFO, "precompiled headers off: %s", why);
  }
  jk_free(e, dir);
  jk_free(e, real);
  jk_free(e, pch);
  jk_pch_configure(e, mode, root, why);
}

static void *open_store(void *p) {
  jitk_engine *e = p;
  pthread_mutex_lock(&e->cache.disk_lock);
  jk_store_open(e);
  pthread_mutex_unlock(&e->cache.disk_lock);
  return NULL;
}

jitk_status jitk_engine_create(const jitk_engine_config *config, jitk_engine **out) {
  if (out == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_create: engine is NULL");
  jitk_engine_config cfg;
  jitk_status st = read_config(config, &cfg);
  if (st != JITK_OK) return st;
  if (cfg.device == JITK_DEVICE_NONE && cfg.arch == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_engine_create: a compile-only engine "
                   "(JITK_DEVICE_NONE) needs an arch, such as \"sm_90\"");

  int threads = 0;
  st = compile_threads(&cfg, &threads);
  if (st != JITK_OK) return st;
  if (cfg.pch < JITK_PCH_DEFAULT || cfg.pch > JITK_PCH_ALL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_engine_create: pch %d is not a jitk_pch_mode", (int)cfg.pch);

  jitk_engine *e;
  if (cfg.alloc_fn != NULL)
    e = cfg.alloc_fn(cfg.alloc_user, NULL, sizeof *e);
  else
    e = malloc(sizeof *e);
  if (e == NULL) return jk_fail(NULL, JITK_ERR_OUT_OF_MEMORY, "jitk_engine_create: out of memory");
  memset(e, 0, sizeof *e);
  e->base.alloc_fn = cfg.alloc_fn;
  e->base.alloc_user = cfg.alloc_user;
  e->base.log_fn = cfg.log_fn;
  e->base.log_user = cfg.log_user;
  e->base.log_level = cfg.log_level == JITK_LOG_DEFAULT ? jk_log_level_from_env() : cfg.log_level;
  e->ordinal = -1;
  e->compile_threads = threads;
  jk_errors_init(e);
  jk_trace_init(e);
  pthread_mutex_init(&e->lock, NULL);
  pthread_mutex_init(&e->attr_lock, NULL);

  st = jk_nvrtc_init(e, &e->nvrtc, cfg.cuda_include_dir);
  if (st == JITK_OK) {
    /* jk_cache_init sets up what jk_cache_destroy needs before anything
     * that can fail, so the flag goes up whatever it returns. */
    st = jk_cache_init(e, &cfg);
    e->cache_initialized = true;
  }
  pthread_t opener;
  bool opening = false;
  if (st == JITK_OK && cfg.device != JITK_DEVICE_NONE && e->cache.mode != JITK_CACHE_OFF)
    opening = pthread_create(&opener, NULL, open_store, e) == 0;
  if (st == JITK_OK) {
    if (cfg.device == JITK_DEVICE_NONE)
      st = jk_target_parse(e, cfg.arch, &e->target);
    else
      st = open_device(e, &cfg);
  }
  if (opening) pthread_join(opener, NULL);
  if (st == JITK_OK) pch_setup(e, &cfg);
  if (st != JITK_OK) {
    /* Messages recorded on the engine die with it; move the last one to
     * the per-thread fallback, where jitk_errmsg(NULL) finds it. */
    jk_err_record *r =
        e->base.err_key != (pthread_key_t)-1 ? pthread_getspecific(e->base.err_key) : NULL;
    if (r != NULL)
      jk_fail_at(NULL, st, r->offset, "%s", r->message ? r->message : r->inline_message);
    jitk_engine_destroy(e);
    return st;
  }
  if (e->has_device)
    jk_log(e, JITK_LOG_INFO,
           "engine on device %d (%s, compute capability %d.%d), target %s, "
           "NVRTC %d.%d",
           e->ordinal, e->info.name, e->info.cc_major, e->info.cc_minor, e->target.arch,
           e->nvrtc.major, e->nvrtc.minor);
  else
    jk_log(e, JITK_LOG_INFO, "compile-only engine, target %s, NVRTC %d.%d", e->target.arch,
           e->nvrtc.major, e->nvrtc.minor);
  /* The store is opened with the engine rather than at the first kernel:
   * SQLite's first open in a process (its schema parse, its code paged in)
   * costs about half a millisecond, three times a disk hit, which should
   * cost what reading and loading a cubin costs. A device engine did it on
   * the helper thread above; a compile-only one does it here. A store that
   * cannot be used is reported now, once. */
  if (e->cache.mode != JITK_CACHE_OFF) {
    pthread_mutex_lock(&e->cache.disk_lock);
    jk_store_open(e);
    pthread_mutex_unlock(&e->cache.disk_lock);
  }
  if (e->nvrtc.include_dir == NULL)
    jk_log(e, JITK_LOG_WARN,
           "CUDA headers not found (set CUDA_HOME); sources that include "
           "cuda_fp16.h and other toolkit headers will not compile");
  *out = e;
  return JITK_OK;
}

void jitk_engine_destroy(jitk_engine *e) {
  if (e == NULL) return;
  if (e->live_modules != 0)
    jk_log(e, JITK_LOG_WARN,
           "jitk_engine_destroy: %zu module(s) still alive; destroy them "
           "first",
           e->live_modules);
  /* The cache goes first: its entries unload modules through the driver. */
  if (e->cache_initialized) jk_cache_destroy(e);
  if (e->temp_pool != NULL) jk_cu_mem_pool_destroy(e, e->temp_pool);
  uint64_t peers = atomic_load(&e->peers);
  for (int d = 0; d < JK_PEER_BITS; d++) {
    CUdevice dev;
    if ((peers >> d & 1) && jk_cu_device_get(&e->drv, d, &dev) == CUDA_SUCCESS)
      jk_cu_primary_ctx_release(&e->drv, dev);
  }
  if (e->has_device) jk_cu_primary_ctx_release(&e->drv, e->device);
  if (e->drv.handle != NULL) jk_driver_unload(&e->drv);
  jk_nvrtc_destroy(e, &e->nvrtc);
  pthread_mutex_destroy(&e->lock);
  pthread_mutex_destroy(&e->attr_lock);
  jk_trace_fini(e);
  jk_errors_destroy(e);
  jitk_alloc_fn fn = e->base.alloc_fn;
  void *user = e->base.alloc_user;
  if (fn != NULL)
    fn(user, e, 0);
  else
    free(e);
}

static jitk_status enable_peer(jitk_engine *e, int peer) {
  int count = 0;
  CUresult r = jk_cu_device_count(&e->drv, &count);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuDeviceGetCount");
  if (peer >= count)
    return jk_fail(e, JITK_ERR_NO_DEVICE,
                   "jitk_engine_enable_peer_access: no CUDA device %d: the driver sees %d device%s",
                   peer, count, count == 1 ? "" : "s");
  CUdevice dev;
  r = jk_cu_device_get(&e->drv, peer, &dev);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuDeviceGet");
  int can = 0;
  r = jk_cu_can_access_peer(&e->drv, e->device, dev, &can);
  if (r == CUDA_ERROR_NOT_SUPPORTED)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "jitk_engine_enable_peer_access: the driver has no cuDeviceCanAccessPeer");
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuDeviceCanAccessPeer");
  if (!can)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "jitk_engine_enable_peer_access: device %d cannot reach device %d's memory "
                   "(cuDeviceCanAccessPeer says no: no NVLink or PCIe path between them)",
                   e->ordinal, peer);
  CUcontext ctx = NULL;
  r = jk_cu_primary_ctx_retain(&e->drv, dev, &ctx);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuDevicePrimaryCtxRetain");
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st == JITK_OK) {
    r = jk_cu_enable_peer_access(&e->drv, ctx);
    jk_ctx_leave(e, saved);
    if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
      st = jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "jitk_engine_enable_peer_access: device %d cannot reach device %d's memory "
                   "(cuCtxEnablePeerAccess: %s)",
                   e->ordinal, peer,
                   r == CUDA_ERROR_NOT_SUPPORTED ? "not in this driver" : "unsupported");
    else if (r != CUDA_SUCCESS)
      st = jk_cuda_fail(e, r, "cuCtxEnablePeerAccess");
  }
  if (st != JITK_OK) {
    jk_cu_primary_ctx_release(&e->drv, dev);
    return st;
  }
  atomic_fetch_or(&e->peers, (uint64_t)1 << peer);
  return JITK_OK;
}

jitk_status jitk_engine_enable_peer_access(jitk_engine *e, int peer) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_engine_enable_peer_access: engine is NULL");
  jitk_status st = jk_require_device(e, "jitk_engine_enable_peer_access");
  if (st != JITK_OK) return st;
  if (peer < 0 || peer == e->ordinal)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_enable_peer_access: device %d %s",
                   peer, peer < 0 ? "is not a device ordinal" : "is the engine's own device");
  if (peer >= JK_PEER_BITS)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "jitk_engine_enable_peer_access: device %d: jitk tracks peers 0 to %d", peer,
                   JK_PEER_BITS - 1);
  pthread_mutex_lock(&e->lock);
  if (!(atomic_load(&e->peers) >> peer & 1)) st = enable_peer(e, peer);
  pthread_mutex_unlock(&e->lock);
  return st;
}

jitk_status jitk_engine_device_info(const jitk_engine *e, jitk_device_info *info) {
  if (e == NULL || info == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_device_info: %s is NULL",
                   e == NULL ? "engine" : "info");
  jitk_status st = jk_require_device(e, "jitk_engine_device_info");
  if (st != JITK_OK) return st;
  *info = e->info;
  return JITK_OK;
}

jitk_status jitk_engine_arch(const jitk_engine *e, const char **arch) {
  if (e == NULL || arch == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_arch: %s is NULL",
                   e == NULL ? "engine" : "arch");
  *arch = e->target.arch;
  return JITK_OK;
}

jitk_status jitk_engine_cuda_include_dir(const jitk_engine *e, const char **dir) {
  if (e == NULL || dir == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_cuda_include_dir: %s is NULL",
                   e == NULL ? "engine" : "dir");
  *dir = e->nvrtc.include_dir;
  return JITK_OK;
}

jitk_status jitk_driver_query(const jitk_engine_config *config, int *driver_version,
                              int *device_count) {
  /* Both answers are what the call is for; a NULL one would make a
   * success that says nothing. */
  if (driver_version == NULL || device_count == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_driver_query: %s is NULL",
                   driver_version == NULL ? "driver_version" : "device_count");
  jitk_engine_config cfg;
  jitk_status st = read_config(config, &cfg);
  if (st != JITK_OK) return st;
  jk_driver drv;
  char why[1024];
  st = jk_driver_load(&drv, cfg.driver_library, why, sizeof why);
  if (st == JITK_ERR_NO_DEVICE) {
    /* The driver is there but cuInit saw no device: a valid answer. */
    *driver_version = drv.version;
    *device_count = 0;
    return JITK_OK;
  }
  if (st != JITK_OK) return jk_fail(NULL, st, "%s", why);
  int count = 0;
  CUresult r = jk_cu_device_count(&drv, &count);
  if (r != CUDA_SUCCESS) {
    st = jk_cuda_fail(NULL, r, "cuDeviceGetCount");
    jk_driver_unload(&drv);
    return st;
  }
  *driver_version = drv.version;
  *device_count = count;
  jk_driver_unload(&drv);
  return JITK_OK;
}

jitk_status jitk_device_query(const jitk_engine_config *config, int ordinal,
                              jitk_device_info *info) {
  if (info == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_device_query: info is NULL");
  jitk_engine_config cfg;
  jitk_status st = read_config(config, &cfg);
  if (st != JITK_OK) return st;
  jk_driver drv;
  char why[1024];
  st = jk_driver_load(&drv, cfg.driver_library, why, sizeof why);
  if (st != JITK_OK) return jk_fail(NULL, st, "%s", why);
  int count = 0;
  CUresult r = jk_cu_device_count(&drv, &count);
  if (r == CUDA_SUCCESS && (ordinal < 0 || ordinal >= count)) {
    jk_driver_unload(&drv);
    return jk_fail(NULL, JITK_ERR_NO_DEVICE, "no CUDA device %d: the driver sees %d", ordinal,
                   count);
  }
  jitk_device_info tmp;
  if (r == CUDA_SUCCESS) r = jk_driver_device_info(&drv, ordinal, &tmp);
  if (r != CUDA_SUCCESS) {
    st = jk_cuda_fail(NULL, r, "reading device properties");
  } else {
    *info = tmp;
  }
  jk_driver_unload(&drv);
  return st;
}

jitk_status jitk_nvrtc_version(int *major, int *minor) {
  if (major == NULL || minor == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_nvrtc_version: an argument is NULL");
  int mj = 0, mn = 0; /* the caller's stay untouched on failure */
  nvrtcResult r = nvrtcVersion(&mj, &mn);
  if (r != NVRTC_SUCCESS)
    return jk_fail(NULL, JITK_ERR_NVRTC, "nvrtcVersion failed: %s", nvrtcGetErrorString(r));
  *major = mj;
  *minor = mn;
  return JITK_OK;
}

jitk_status jitk_nvrtc_supported_archs(int *archs, size_t capacity, size_t *count) {
  if (count == NULL || (archs == NULL && capacity > 0))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_nvrtc_supported_archs: an argument is NULL");
  int n = 0;
  nvrtcResult r = nvrtcGetNumSupportedArchs(&n);
  int all[JK_MAX_ARCHS];
  if (r == NVRTC_SUCCESS && (n < 0 || n > JK_MAX_ARCHS)) r = NVRTC_ERROR_INTERNAL_ERROR;
  if (r == NVRTC_SUCCESS) r = nvrtcGetSupportedArchs(all);
  if (r != NVRTC_SUCCESS)
    return jk_fail(NULL, JITK_ERR_NVRTC, "nvrtcGetSupportedArchs failed: %s",
                   nvrtcGetErrorString(r));
  for (int i = 0; i < n && (size_t)i < capacity; i++) archs[i] = all[i];
  *count = (size_t)n;
  return JITK_OK;
}

jitk_status jk_require_device(const jitk_engine *e, const char *what) {
  if (JK_LIKELY(e->has_device)) return JITK_OK;
  return jk_fail(e, JITK_ERR_NO_DEVICE,
                 "%s needs a GPU, but this engine only compiles (it was "
                 "created with device = JITK_DEVICE_NONE for %s)",
                 what, e->target.arch);
}

jitk_status jitk_engine_compile_threads(const jitk_engine *e, int *threads) {
  if (e == NULL || threads == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_compile_threads: %s is NULL",
                   e == NULL ? "engine" : "threads");
  *threads = e->compile_threads;
  return JITK_OK;
}

jitk_status jitk_parallel(jitk_engine *e, size_t count, jitk_task_fn task, void *user,
                          jitk_status *statuses) {
  if (e == NULL || task == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_parallel: %s is NULL",
                   e == NULL ? "engine" : "task");
  if (count == 0) return JITK_OK;
  return jk_parallel_run(e, count, e->compile_threads, task, user, statuses, NULL, NULL);
}
