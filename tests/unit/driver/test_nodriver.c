/* Without a driver, or with a bad one: clear errors, never a crash. On a
 * compile-only engine, everything that needs a GPU says so. */
#include "common.h"
#include "kernels/kernels.h"

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
  cr_assert(st == JITK_OK || st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE, "%s: %s",
            jitk_errname(st), jitk_errmsg(NULL));
  jitk_engine_destroy(e);
}

Test(nodriver, compile_only_engine_refuses_gpu_work) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_device_info info;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_engine_device_info(e, &info));
  void *p = NULL;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "jitk_device_alloc needs a GPU",
           jitk_device_alloc(e, 16, NULL, &p));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_memcpy(e, &info, &info, 4, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_memset(e, &info, 0, 4, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_stream_synchronize(e, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_device_free(e, &info, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "jitk_engine_enable_peer_access needs a GPU",
           jitk_engine_enable_peer_access(e, 1));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "engine is NULL",
           jitk_engine_enable_peer_access(NULL, 1));
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m));
  jitk_kernel *k = NULL;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "only compiles", jitk_module_get_kernel(m, "k", &k));
  cr_assert(strstr(jitk_errmsg(e), "sm_90") != NULL);
  void *global = NULL;
  size_t global_bytes = 0;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "jitk_module_get_global needs a GPU",
           jitk_module_get_global(m, "k", &global, &global_bytes));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(nodriver, null_arguments) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "engine is NULL",
           jitk_module_create(NULL, "", NULL, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "source is NULL", jitk_module_create(e, NULL, NULL, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "NULL",
           jitk_module_create_from_image(e, JITK_IMAGE_AUTO, NULL, 4, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "path is NULL", jitk_module_create_from_file(e, NULL, &m));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_kernel_launch(NULL, (jitk_dim3){1, 1, 1}, (jitk_dim3){1, 1, 1}, 0, NULL, NULL, 0));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "module is NULL",
           jitk_module_get_kernel(NULL, "k", NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_kernel_set_signature(NULL, "int32"));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_kernel_set_max_dynamic_shared(NULL, 0));
  jitk_kernel_attributes a;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL", jitk_kernel_get_attributes(NULL, &a));
  const uint32_t *sizes = NULL;
  int nsizes = 0;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_kernel_param_sizes(NULL, &sizes, &nsizes));
  int bs;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_kernel_suggest_block_size(NULL, 0, &bs, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_kernel_active_blocks(NULL, 32, 0, &bs));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "engine is NULL",
           jitk_device_alloc(NULL, 4, NULL, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_engine_arch(NULL, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_engine_config_init(NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_nvrtc_version(NULL, NULL));
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.num_options = 2;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "count is not zero", jitk_module_create(e, "", &o, &m));
  JT_OK(e, jitk_module_create(e, "extern \"C\" __constant__ float c[4];", NULL, &m));
  void *global = NULL;
  size_t global_bytes = 0;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "module is NULL",
           jitk_module_get_global(NULL, "c", &global, &global_bytes));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "name is NULL",
           jitk_module_get_global(m, NULL, &global, &global_bytes));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "ptr is NULL",
           jitk_module_get_global(m, "c", NULL, &global_bytes));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "bytes is NULL",
           jitk_module_get_global(m, "c", &global, NULL));
  cr_assert_null(global);
  jitk_module_destroy(m);
  jitk_kernel_launch_config lc;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "config is NULL", jitk_kernel_launch_config_init(NULL));
  JT_OK(NULL, jitk_kernel_launch_config_init(&lc));
  cr_assert_eq(lc.struct_size, sizeof lc);
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_kernel_launch_ex: kernel is NULL",
           jitk_kernel_launch_ex(NULL, (jitk_dim3){1, 1, 1}, (jitk_dim3){1, 1, 1}, 0, NULL, NULL, 0,
                                 &lc));
  /* The config is read before anything else, so a stand-in kernel on a
   * compile-only engine shows its checks without a GPU. */
  jitk_kernel stand_in;
  memset(&stand_in, 0, sizeof stand_in);
  stand_in.engine = e;
  stand_in.f.name = "stand_in";
  lc.struct_size = 0;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT,
           "config->struct_size is 0; call jitk_kernel_launch_config_init",
           jitk_kernel_launch_ex(&stand_in, (jitk_dim3){1, 1, 1}, (jitk_dim3){1, 1, 1}, 0, NULL,
                                 NULL, 0, &lc));
  lc.struct_size = sizeof lc + 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size",
           jitk_kernel_launch_ex(&stand_in, (jitk_dim3){1, 1, 1}, (jitk_dim3){1, 1, 1}, 0, NULL,
                                 NULL, 0, &lc));
  jitk_engine_destroy(e);
}

/* NULL where an answer is required is an error, not a silent success
 * (jitk_driver_query(NULL, NULL, NULL) succeeded, issue 11). */
Test(nodriver, driver_query_needs_its_outputs) {
  int v = -1, n = -1;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "driver_version is NULL",
           jitk_driver_query(NULL, NULL, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "device_count is NULL",
           jitk_driver_query(NULL, &v, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "driver_version is NULL",
           jitk_driver_query(NULL, NULL, &n));
  cr_assert(v == -1 && n == -1);
}

/* The header's promise: out-parameters are left untouched on failure
 * (jitk_reduction_create and jitk_matmul_create wrote NULL, the compile
 * calls their source, and launches cleared `outputs`, issue 11). Each
 * call below fails; its outputs hold a sentinel before and after. */
Test(nodriver, out_parameters_are_untouched_on_failure) {
  jitk_engine *e = jt_compile_engine("sm_90");
  void *sentinel = (void *)(uintptr_t)0x5e5e5e5e;
  jitk_engine *eo = sentinel;
  jitk_engine_config bad;
  jitk_engine_config_init(&bad);
  bad.device = JITK_DEVICE_NONE;
  cr_assert_neq(jitk_engine_create(&bad, &eo), JITK_OK);
  cr_assert_eq(eo, sentinel);
  jitk_module *m = sentinel;
  cr_assert_eq(jitk_module_create(e, "not cuda", NULL, &m), JITK_ERR_COMPILE);
  cr_assert_eq(m, sentinel);
  cr_assert_eq(jitk_module_create_from_image(e, JITK_IMAGE_AUTO, "xyz", 3, &m),
               JITK_ERR_INVALID_IMAGE);
  cr_assert_eq(m, sentinel);
  jitk_elementwise *ew = sentinel;
  cr_assert_eq(jitk_elementwise_create(e, "T x, T x", "T z", "z = x", "k", NULL, &ew),
               JITK_ERR_PARSE);
  cr_assert_eq(ew, sentinel);
  jitk_reduction *rd = sentinel;
  cr_assert_eq(
      jitk_reduction_create(e, "T x, T x", "T y", "x", "a + b", "y = a", "0", NULL, "k", NULL, &rd),
      JITK_ERR_PARSE);
  cr_assert_eq(rd, sentinel);
  jitk_matmul *mm = sentinel;
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = d.n = d.k = 64;
  d.batch = 0;
  cr_assert_eq(jitk_matmul_create(e, &d, &mm), JITK_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mm, sentinel);
  /* Compiles that fail in NVRTC, and a source asked for too early. */
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = x +", "k", NULL, &ew));
  const char *src = sentinel;
  m = sentinel;
  cr_assert_eq(jitk_elementwise_source(ew, &src), JITK_ERR_NOT_FOUND);
  cr_assert_eq((const void *)src, sentinel);
  cr_assert_eq(jitk_elementwise_compile(ew, "T=float32", NULL, &src, &m), JITK_ERR_COMPILE);
  cr_assert_eq((const void *)src, sentinel);
  cr_assert_eq(m, sentinel);
  JT_OK(e, jitk_elementwise_source(ew, &src));
  cr_assert(strstr(src, "z = x +") != NULL, "the failed source stays available");
  /* A launch refused on a compile-only engine leaves `outputs` alone. */
  DLManagedTensor *outs[1] = {sentinel};
  cr_assert_eq(jitk_elementwise_launch(ew, NULL, NULL, 0, 4, outs), JITK_ERR_NO_DEVICE);
  cr_assert_eq((void *)outs[0], sentinel);
  jitk_elementwise_destroy(ew);
  JT_OK(e,
        jitk_reduction_create(e, "T x", "T y", "x +", "a + b", "y = a", "0", NULL, "k", NULL, &rd));
  src = sentinel;
  m = sentinel;
  cr_assert_eq(jitk_reduction_compile(rd, "T=float32", NULL, &src, &m), JITK_ERR_COMPILE);
  cr_assert_eq((const void *)src, sentinel);
  cr_assert_eq(m, sentinel);
  cr_assert_eq(jitk_reduction_launch(rd, NULL, NULL, 0, NULL, -1, 0, outs), JITK_ERR_NO_DEVICE);
  cr_assert_eq((void *)outs[0], sentinel);
  cr_assert_eq(jitk_reduction_autotune(rd, NULL, NULL, 0, NULL, -1, 0), JITK_ERR_NO_DEVICE);
  cr_assert_eq(jitk_reduction_autotune(NULL, NULL, NULL, 0, NULL, -1, 0),
               JITK_ERR_INVALID_ARGUMENT);
  jitk_reduction_destroy(rd);
  /* Lookups. */
  JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m));
  const char *lowered = sentinel;
  cr_assert_eq(jitk_module_lowered_name(m, "nope", &lowered), JITK_ERR_NOT_FOUND);
  cr_assert_eq((const void *)lowered, sentinel);
  jitk_kernel *k = sentinel;
  cr_assert_eq(jitk_module_get_kernel(m, "k", &k), JITK_ERR_NO_DEVICE);
  cr_assert_eq(k, sentinel);
  jitk_module_destroy(m);
  jitk_dtype dt = (jitk_dtype)99;
  cr_assert_eq(jitk_dtype_from_name("float", &dt), JITK_ERR_NOT_FOUND);
  cr_assert_eq(jitk_dtype_promote(JITK_DTYPE_NONE, JITK_FLOAT32, &dt), JITK_ERR_INVALID_ARGUMENT);
  cr_assert_eq((int)dt, 99);
  jitk_device_info info;
  memset(&info, 0x5e, sizeof info);
  cr_assert_eq(jitk_engine_device_info(e, &info), JITK_ERR_NO_DEVICE);
  cr_assert_eq(info.ordinal, 0x5e5e5e5e);
  jitk_engine_destroy(e);
}
