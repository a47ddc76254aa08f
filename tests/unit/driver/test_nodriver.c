/* Without a driver, or with a bad one: clear errors, never a crash. On a
 * compile-only engine, everything that needs a GPU says so. */
#include "common.h"

Test(nodriver, missing_library) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.driver_library = "/nonexistent/libcuda.so.1";
  jitk_engine *e = NULL;
  JT_FAILS(NULL, JITK_ERR_NO_DRIVER, "/nonexistent/libcuda.so.1", jitk_engine_create(&cfg, &e));
  cr_assert(strstr(jitk_errmsg(NULL), "no CUDA driver") != NULL);
  cr_assert_null(e);
  int version = -1, count = -1;
  JT_FAILS(NULL, JITK_ERR_NO_DRIVER, "could not load", jitk_driver_query(&cfg, &version, &count));
  jitk_device_info info;
  JT_FAILS(NULL, JITK_ERR_NO_DRIVER, "could not load", jitk_device_query(&cfg, 0, &info));
}

Test(nodriver, library_without_cuda_entry_points) {
  /* libm loads fine but is no CUDA driver. */
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.driver_library = "libm.so.6";
  jitk_engine *e = NULL;
  JT_FAILS(NULL, JITK_ERR_NO_DRIVER, "older than CUDA 12.0", jitk_engine_create(&cfg, &e));
}

Test(nodriver, default_device_on_this_machine) {
  /* CI machines have no driver; GPU machines do. Either way the answer is
   * a clean status. */
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  cr_assert(st == JITK_OK || st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE,
            "%s: %s", jitk_errname(st), jitk_errmsg(NULL));
  jitk_engine_destroy(e);
}

Test(nodriver, compile_only_engine_refuses_gpu_work) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_device_info info;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_engine_device_info(e, &info));
  void *p = NULL;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "jitk_device_alloc needs a GPU", jitk_device_alloc(e, 16, NULL, &p));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_memcpy(e, &info, &info, 4, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_memset(e, &info, 0, 4, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_stream_synchronize(e, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_device_free(e, &info, NULL));
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m));
  jitk_kernel *k = NULL;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "only compiles", jitk_module_get_kernel(m, "k", &k));
  cr_assert(strstr(jitk_errmsg(e), "sm_90") != NULL);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(nodriver, null_arguments) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "engine is NULL", jitk_module_create(NULL, "", NULL, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "source is NULL", jitk_module_create(e, NULL, NULL, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_module_create_from_image(e, JITK_IMAGE_AUTO, NULL, 4, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "path is NULL", jitk_module_create_from_file(e, NULL, &m));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_kernel_launch(NULL, (jitk_dim3){1, 1, 1}, (jitk_dim3){1, 1, 1}, 0, NULL, NULL, 0));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "module is NULL", jitk_module_get_kernel(NULL, "k", NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL", jitk_kernel_set_signature(NULL, "int32"));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL", jitk_kernel_set_max_dynamic_shared(NULL, 0));
  jitk_kernel_attributes a;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL", jitk_kernel_get_attributes(NULL, &a));
  int bs;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL", jitk_kernel_suggest_block_size(NULL, 0, &bs, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL", jitk_kernel_active_blocks(NULL, 32, 0, &bs));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "engine is NULL", jitk_device_alloc(NULL, 4, NULL, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_engine_arch(NULL, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_engine_config_init(NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_nvrtc_version(NULL, NULL));
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.num_options = 2;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "count is not zero", jitk_module_create(e, "", &o, &m));
  jitk_engine_destroy(e);
}
