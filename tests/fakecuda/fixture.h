/*
 * An engine on the stand-in driver, for the CPU tests that launch on it
 * (include after common.h, which brings Criterion and jitk).
 */
#ifndef JITK_TESTS_FAKECUDA_FIXTURE_H
#define JITK_TESTS_FAKECUDA_FIXTURE_H

#include <dlfcn.h>

#include "fakecuda/fakecuda.h"

#define JT_FAKE_PATH JITK_TEST_BINARY_DIR "/tests/fakecuda/libcuda.so.1"

/* An engine whose driver is the stand-in. `cache_dir` not NULL: a disk
 * cache there, on whatever JITK_CACHE says (tuning tables need one).
 * `f` not NULL: the stand-in's inspection functions, on the engine's own
 * instance of the library (so the launches it records are the engine's),
 * recording every parameter as 8 bytes, as jitk packs each in an 8-byte
 * slot with zeroed padding and ends the list with NULL. */
static inline jitk_engine *jt_fake_engine(fakecuda_api *f, const char *cache_dir) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.driver_library = JT_FAKE_PATH;
  if (cache_dir != NULL) {
    cfg.cache_dir = cache_dir;
    cfg.cache_mode = JITK_CACHE_ON;
  }
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "engine on the stand-in driver %s: %s", JT_FAKE_PATH,
               jitk_errmsg(NULL));
  if (f != NULL) {
    cr_assert(fakecuda_api_open(JT_FAKE_PATH, f),
              "the stand-in is not loaded or lacks its inspection functions: %s", dlerror());
    size_t sizes[FAKECUDA_MAX_PARAMS];
    for (int i = 0; i < FAKECUDA_MAX_PARAMS; i++) sizes[i] = 8;
    f->record(sizes, FAKECUDA_MAX_PARAMS);
  }
  return e;
}

#endif
