/*
 * The compile pool (jitk_parallel): every task runs once, on threads that
 * really run at once, failures are reported by the lowest index, the
 * pool's size follows the config and the environment, and a kernel's
 * specializations compile side by side, each once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common.h"
#include "engine.h"

static jitk_engine *engine_with_threads(int threads) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  cfg.compile_threads = threads;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "engine: %s", jitk_errmsg(NULL));
  return e;
}

typedef struct counts {
  _Atomic int ran[1000];
} counts;

static jitk_status count_task(void *user, size_t i) {
  counts *c = user;
  atomic_fetch_add(&c->ran[i], 1);
  return JITK_OK;
}

Test(parallel, every_task_runs_once) {
  jitk_engine *e = engine_with_threads(4);
  counts *c = calloc(1, sizeof *c);
  jitk_status statuses[1000];
  memset(statuses, 0xFF, sizeof statuses);
  JT_OK(e, jitk_parallel(e, 1000, count_task, c, statuses));
  for (int i = 0; i < 1000; i++) {
    cr_assert_eq(atomic_load(&c->ran[i]), 1, "task %d ran %d times", i, c->ran[i]);
    cr_assert_eq(statuses[i], JITK_OK);
  }
  JT_OK(e, jitk_parallel(e, 0, count_task, c, NULL));
  free(c);
  jitk_engine_destroy(e);
}

/* Each task waits until both have started: a pool that ran them one
 * after the other would time out here. */
typedef struct meet {
  _Atomic int arrived;
} meet;

static jitk_status meet_task(void *user, size_t i) {
  (void)i;
  meet *m = user;
  atomic_fetch_add(&m->arrived, 1);
  for (int spin = 0; spin < 5000; spin++) {
    if (atomic_load(&m->arrived) >= 2) return JITK_OK;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return JITK_ERR_INTERNAL;
}

Test(parallel, tasks_run_at_once) {
  jitk_engine *e = engine_with_threads(2);
  meet m = {0};
  JT_OK(e, jitk_parallel(e, 2, meet_task, &m, NULL));
  jitk_engine_destroy(e);
}

static jitk_status failing_task(void *user, size_t i) {
  jitk_engine *e = user;
  if (i == 7 || i == 3 || i == 12)
    return jk_fail(e, i == 3 ? JITK_ERR_COMPILE : JITK_ERR_PARSE, "task says %zu went wrong", i);
  return JITK_OK;
}

Test(parallel, the_lowest_failing_task_is_reported) {
  jitk_engine *e = engine_with_threads(3);
  jitk_status statuses[20];
  JT_FAILS(e, JITK_ERR_COMPILE, "3 of 20 tasks failed; the first, task 3: task says 3 went wrong",
           jitk_parallel(e, 20, failing_task, e, statuses));
  for (size_t i = 0; i < 20; i++) {
    jitk_status want = i == 3 ? JITK_ERR_COMPILE : (i == 7 || i == 12) ? JITK_ERR_PARSE : JITK_OK;
    cr_assert_eq(statuses[i], want, "task %zu", i);
  }
  JT_FAILS(e, JITK_ERR_COMPILE, "task 3 of 5: task says 3 went wrong",
           jitk_parallel(e, 5, failing_task, e, NULL));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "task is NULL", jitk_parallel(e, 3, NULL, NULL, NULL));
  cr_assert_eq(jitk_parallel(NULL, 3, count_task, NULL, NULL), JITK_ERR_INVALID_ARGUMENT);
  jitk_engine_destroy(e);
}

Test(parallel, the_pool_size_follows_the_config_and_the_environment) {
  jitk_engine *e = engine_with_threads(3);
  int n = 0;
  JT_OK(e, jitk_engine_compile_threads(e, &n));
  cr_assert_eq(n, 3);
  jitk_engine_destroy(e);

  unsetenv("JITK_COMPILE_THREADS");
  e = engine_with_threads(0);
  JT_OK(e, jitk_engine_compile_threads(e, &n));
  cr_assert_eq(n, jk_cpu_count());
  cr_assert_geq(n, 1);
  jitk_engine_destroy(e);

  setenv("JITK_COMPILE_THREADS", "5", 1);
  e = engine_with_threads(0);
  JT_OK(e, jitk_engine_compile_threads(e, &n));
  cr_assert_eq(n, 5);
  jitk_engine_destroy(e);

  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  const char *bad[] = {"0", "-2", "many", "99999"};
  for (int i = 0; i < 4; i++) {
    setenv("JITK_COMPILE_THREADS", bad[i], 1);
    JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "JITK_COMPILE_THREADS", jitk_engine_create(&cfg, &e));
  }
  unsetenv("JITK_COMPILE_THREADS");
  cfg.compile_threads = -1;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "compile_threads is -1", jitk_engine_create(&cfg, &e));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "compile_threads",
           jitk_engine_compile_threads(NULL, &n));
}

typedef struct specs {
  jitk_elementwise *k;
  const char *const *types;
} specs;

static jitk_status compile_spec(void *user, size_t i) {
  specs *s = user;
  return jitk_elementwise_compile(s->k, s->types[i], NULL, NULL, NULL);
}

/* Holds each compile until two are running at once (or a second has
 * passed): under a lock held across the compile, the second could never
 * start. */
typedef struct overlap {
  _Atomic int inside, most;
} overlap;

static void on_event(void *user, jk_cache_event ev) {
  if (ev != JK_EVENT_COMPILED) return;
  overlap *o = user;
  int now = atomic_fetch_add(&o->inside, 1) + 1;
  int seen = atomic_load(&o->most);
  while (now > seen && !atomic_compare_exchange_weak(&o->most, &seen, now)) {
  }
  for (int spin = 0; spin < 1000 && atomic_load(&o->most) < 2; spin++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  atomic_fetch_sub(&o->inside, 1);
}

Test(parallel, a_kernels_specializations_compile_side_by_side_each_once) {
  jitk_engine *e = engine_with_threads(2);
  overlap o = {0, 0};
  e->cache.test_hook = on_event;
  e->cache.test_user = &o;
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x * y + x", "fma_like", NULL, &k));
  static const char *const types[] = {"T=float32", "T=float64", "T=int32", "T=int64"};
  specs s = {k, types};
  JT_OK(e, jitk_parallel(e, 4, compile_spec, &s, NULL));
  cr_assert_eq(atomic_load(&o.most), 2, "two specializations never compiled at once");
  jitk_cache_stats st;
  JT_OK(e, jitk_cache_get_stats(e, &st, NULL));
  cr_assert_eq(st.compiles, 4);

  /* Eight tasks asking for one new specialization compile it once. */
  static const char *const same[] = {"T=int16", "T=int16", "T=int16", "T=int16",
                                     "T=int16", "T=int16", "T=int16", "T=int16"};
  specs s2 = {k, same};
  JT_OK(e, jitk_parallel(e, 8, compile_spec, &s2, NULL));
  JT_OK(e, jitk_cache_get_stats(e, &st, NULL));
  cr_assert_eq(st.compiles, 5);
  /* Every specialization is there, once. */
  const char *src = NULL;
  for (int i = 0; i < 4; i++) JT_OK(e, jitk_elementwise_compile(k, types[i], NULL, &src, NULL));
  JT_OK(e, jitk_cache_get_stats(e, &st, NULL));
  cr_assert_eq(st.compiles, 5);
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}
