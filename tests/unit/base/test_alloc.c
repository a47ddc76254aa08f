/* Every host allocation goes through the engine's allocator, is freed by
 * destroy, and a failure of any one of them is a clean error. */
#include <stdbool.h>
#include <stdlib.h>

#include "common.h"

static const char *source =
    "#include \"extra.h\"\n"
    "#include <jitk/array.cuh>\n"
    "template <typename T> __global__ void scale(jitk::array<T, 1> x, T a) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < x.size()) x(i) = x(i) * a * EXTRA;\n"
    "}\n";

/* Engine, a module with a header and name expressions, a failing compile,
 * and teardown. Returns the first failing status, or JITK_OK. */
static jitk_status scenario(jt_counter *c) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.alloc_fn = jt_counting;
  cfg.alloc_user = c;
  cfg.log_level = JITK_LOG_OFF;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  if (st != JITK_OK) return st;
  jitk_header h = {"extra.h", "#define EXTRA 2\n"};
  const char *names[] = {"scale<float>", "scale<double>"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.headers = &h;
  o.num_headers = 1;
  o.name_expressions = names;
  o.num_name_expressions = 2;
  jitk_module *m = NULL;
  st = jitk_module_create(e, source, &o, &m);
  if (st == JITK_OK) {
    const char *lowered = NULL;
    st = jitk_module_lowered_name(m, "scale<double>", &lowered);
    jitk_module_destroy(m);
  }
  jitk_module *bad = NULL;
  jitk_status st2 = jitk_module_create(e, "not cuda", NULL, &bad);
  if (st2 != JITK_ERR_COMPILE && st2 != JITK_ERR_OUT_OF_MEMORY)
    cr_assert_fail("a bad source gave %s", jitk_errname(st2));
  jitk_engine_destroy(e);
  return st;
}

Test(alloc, everything_freed) {
  jt_counter c = {0, 0, 0};
  cr_assert_eq(scenario(&c), JITK_OK);
  cr_assert(c.calls > 10, "allocations go through the hook (%ld)", c.calls);
  cr_assert_eq(c.live, 0, "%ld blocks leaked", c.live);
}

Test(alloc, each_failure_is_clean, .timeout = 240) {
  jt_counter full = {0, 0, 0};
  cr_assert_eq(scenario(&full), JITK_OK);
  for (long n = 1; n <= full.calls; n++) {
    jt_counter c = {0, 0, n};
    jitk_status st = scenario(&c);
    cr_assert(st == JITK_OK || st == JITK_ERR_OUT_OF_MEMORY, "failing allocation %ld gave %s: %s",
              n, jitk_errname(st), jitk_errmsg(NULL));
    cr_assert_eq(c.live, 0, "failing allocation %ld leaked %ld blocks", n, c.live);
  }
}
