/* Compiles a kernel through an installed jitk, without a GPU. */
#include <jitk/jitk.h>
#include <stdio.h>

int main(void) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  jitk_engine *e = NULL;
  if (jitk_engine_create(&cfg, &e) != JITK_OK) {
    fprintf(stderr, "engine: %s\n", jitk_errmsg(NULL));
    return 1;
  }
  jitk_module *m = NULL;
  jitk_status st =
      jitk_module_create(e,
                         "#include <jitk/array.cuh>\n"
                         "extern \"C\" __global__ void k(jitk::array<float, 1> a) { a(0) = 1; }\n",
                         NULL, &m);
  if (st != JITK_OK) {
    fprintf(stderr, "compile: %s\n", jitk_errmsg(e));
    return 1;
  }
  printf("consumer: compiled with jitk %s\n", jitk_version());
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  return 0;
}
