/*
 * NVTX ranges: off unless JITK_NVTX=1 when the engine is made; then a
 * domain "jitk" and balanced ranges around the cache lookup, the compile,
 * the module load and each launch, seen through a stand-in tool
 * (tests/nvtx/inject.c) that NVTX loads from NVTX_INJECTION64_PATH, as it
 * loads Nsight Systems'. The engine runs on the stand-in driver, so the
 * launch and the load happen without a GPU.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "common.h"

#define INJECT JITK_TEST_BINARY_DIR "/tests/nvtx/libjitk_nvtx_inject.so"
#define FAKE_PATH JITK_TEST_BINARY_DIR "/tests/fakecuda/libcuda.so.1"

static const char *inject_log(void) {
  void *lib = dlopen(INJECT, RTLD_NOW | RTLD_NOLOAD);
  if (lib == NULL) return NULL;
  const char *(*fn)(void) = NULL;
  *(void **)&fn = dlsym(lib, "nvtx_inject_log");
  return fn != NULL ? fn() : NULL;
}

static jitk_engine *engine(void) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.driver_library = FAKE_PATH;
  cfg.cache_mode = JITK_CACHE_OFF; /* so that the kernel is compiled here */
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "engine: %s", jitk_errmsg(NULL));
  return e;
}

static void work(jitk_engine *e) {
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T y", "y = x * 2", "traced", NULL, &k));
  float x[256] = {0}, y[256];
  int64_t shape[1] = {256};
  DLTensor tx = jt_tensor(x, JITK_FLOAT32, 1, shape, NULL),
           ty = jt_tensor(y, JITK_FLOAT32, 1, shape, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 2, -1, NULL));
  jitk_elementwise_destroy(k);
}

Test(trace, ranges_when_asked) {
  setenv("NVTX_INJECTION64_PATH", INJECT, 1);
  setenv("JITK_NVTX", "1", 1);
  jitk_engine *e = engine();
  work(e);
  jitk_engine_destroy(e);
  const char *log = inject_log();
  cr_assert_not_null(log, "the stand-in tool was not loaded: %s", dlerror());
  cr_log_info("%s", log);
  cr_assert(strstr(log, "domain jitk\n") != NULL, "%s", log);
  cr_assert(
      strstr(log, "push jitk cache get traced.cu\npush jitk compile traced.cu\npop\n") != NULL,
      "%s", log);
  cr_assert(strstr(log, "push jitk load cubin\npop\npop\n") != NULL, "%s", log);
  cr_assert(strstr(log, "push jitk launch traced\npop\n") != NULL, "%s", log);
  cr_assert(strstr(log, "destroy\n") != NULL, "%s", log);
  /* Balanced: as many pops as pushes. */
  int pushes = 0, pops = 0;
  for (const char *p = log; (p = strstr(p, "push")) != NULL; p++) pushes++;
  for (const char *p = log; (p = strstr(p, "pop\n")) != NULL; p++) pops++;
  cr_assert_eq(pushes, pops, "%s", log);
}

Test(trace, nothing_unless_asked) {
  setenv("NVTX_INJECTION64_PATH", INJECT, 1);
  unsetenv("JITK_NVTX");
  jitk_engine *e = engine();
  work(e);
  jitk_engine_destroy(e);
  const char *log = inject_log();
  /* NVTX loads its tool at its first call; jitk made none. */
  cr_assert(log == NULL || log[0] == '\0', "%s", log);
}
