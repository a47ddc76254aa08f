/*
 * The launch path without a GPU: a compile-only engine that believes it
 * has a device, a stand-in kernel, and a driver table of stubs that
 * record what reaches them. jitk_kernel_launch and jitk_kernel_launch_ex
 * check and pack arguments the same way; a cooperative launch goes
 * through cuLaunchKernelEx with the cooperative attribute after the grid
 * is checked against what fits on the device at once.
 */
#include <stddef.h>
#include <stdio.h>

#include "common.h"
#include "base/base.h"
#include "kernels/kernels.h"
#include "launch/launch.h"

static CUcontext stub_ctx = (CUcontext)(uintptr_t)0xC0;
static CUfunction stub_fn = (CUfunction)(uintptr_t)0xF0;

/* What the stubs saw. */
static struct {
  int plain, ex, occupancy;
  unsigned grid[3], block[3], shared;
  CUstream stream;
  unsigned num_attrs;
  CUlaunchAttribute attr, attrs[4];
  int raised, set_attr, set_value, cache;
  void *arg0;
  int32_t arg1;
  int occupancy_threads;
  size_t occupancy_shared;
  CUresult ex_result;
} seen;

static CUresult stub_get_current(CUcontext *c) {
  *c = stub_ctx;
  return CUDA_SUCCESS;
}

static void record_args(void **params) {
  memcpy(&seen.arg0, params[0], sizeof seen.arg0);
  memcpy(&seen.arg1, params[1], sizeof seen.arg1);
}

static CUresult stub_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                            void **extra) {
  cr_assert_eq(f, stub_fn);
  cr_assert_null(extra);
  seen.plain++;
  seen.grid[0] = gx, seen.grid[1] = gy, seen.grid[2] = gz;
  seen.block[0] = bx, seen.block[1] = by, seen.block[2] = bz;
  seen.shared = shared;
  seen.stream = s;
  record_args(params);
  return CUDA_SUCCESS;
}

static CUresult stub_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  cr_assert_eq(f, stub_fn);
  cr_assert_null(extra);
  seen.ex++;
  seen.grid[0] = c->gridDimX, seen.grid[1] = c->gridDimY, seen.grid[2] = c->gridDimZ;
  seen.block[0] = c->blockDimX, seen.block[1] = c->blockDimY, seen.block[2] = c->blockDimZ;
  seen.shared = c->sharedMemBytes;
  seen.stream = c->hStream;
  seen.num_attrs = c->numAttrs;
  if (c->numAttrs > 0) seen.attr = c->attrs[0];
  for (unsigned i = 0; i < c->numAttrs && i < 4; i++) seen.attrs[i] = c->attrs[i];
  record_args(params);
  return seen.ex_result;
}

static CUresult stub_set_attribute(CUfunction f, CUfunction_attribute attr, int value) {
  cr_assert_eq(f, stub_fn);
  if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    seen.raised = value;
  else
    seen.set_attr = (int)attr, seen.set_value = value;
  return CUDA_SUCCESS;
}

static CUresult stub_get_attribute(int *v, CUfunction_attribute attr, CUfunction f) {
  cr_assert_eq(f, stub_fn);
  *v = 1000 + (int)attr;
  return CUDA_SUCCESS;
}

static CUresult stub_cache_config(CUfunction f, CUfunc_cache c) {
  cr_assert_eq(f, stub_fn);
  seen.cache = (int)c;
  return CUDA_SUCCESS;
}

/* Four blocks of up to 256 threads fit on a multiprocessor, two of more. */
static CUresult stub_occupancy(int *blocks, CUfunction f, int threads, size_t shared) {
  cr_assert_eq(f, stub_fn);
  seen.occupancy++;
  seen.occupancy_threads = threads;
  seen.occupancy_shared = shared;
  *blocks = threads <= 256 ? 4 : 2;
  return CUDA_SUCCESS;
}

static uint32_t stand_in_sizes[2] = {8, 4};

/* A stand-in GPU of 132 multiprocessors and a kernel (float *x, int n)
 * on it. */
static jitk_engine *stand_in(jitk_kernel *k) {
  jitk_engine *e = jt_compile_engine("sm_90");
  e->has_device = true;
  e->ordinal = 0;
  e->context = stub_ctx;
  snprintf(e->info.name, sizeof e->info.name, "a stand-in GPU");
  e->info.multiprocessors = 132;
  e->info.max_threads_per_block = 1024;
  e->info.max_grid[0] = 2147483647;
  e->info.max_grid[1] = e->info.max_grid[2] = 65535;
  e->info.max_block[0] = e->info.max_block[1] = 1024;
  e->info.max_block[2] = 64;
  e->info.shared_per_block_optin = 232448;
  e->drv.cuCtxGetCurrent = stub_get_current;
  e->drv.cuLaunchKernel = stub_launch;
  e->drv.cuLaunchKernelEx = stub_launch_ex;
  e->drv.cuOccupancyMaxActiveBlocksPerMultiprocessor = stub_occupancy;
  e->drv.cuFuncSetAttribute = stub_set_attribute;
  memset(k, 0, sizeof *k);
  k->engine = e;
  k->f.fn = stub_fn;
  k->f.name = "stand_in";
  k->symbol = "stand_in";
  k->f.num_params = 2;
  k->f.param_sizes = stand_in_sizes;
  k->f.max_threads = 1024;
  k->f.max_dynamic_shared = 49152;
  memset(&seen, 0, sizeof seen);
  return e;
}

static void stand_in_destroy(jitk_engine *e) {
  e->has_device = false;
  e->context = NULL;
  memset(&e->drv, 0, sizeof e->drv);
  jitk_engine_destroy(e);
}

static const jitk_dim3 one = {1, 1, 1};

Test(launch, plain_and_cooperative_share_the_packing) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  void *x = (void *)(uintptr_t)0xABC000;
  jitk_arg args[] = {jitk_arg_ptr(x, JITK_FLOAT32), jitk_arg_i32(7)};
  jitk_stream s = (jitk_stream)(uintptr_t)0x57;

  /* config NULL is jitk_kernel_launch. */
  JT_OK(e, jitk_kernel_launch_ex(&k, (jitk_dim3){1000, 1, 1}, (jitk_dim3){256, 1, 1}, 128, s, args,
                                 2, NULL));
  cr_assert_eq(seen.plain, 1);
  cr_assert_eq(seen.ex + seen.occupancy, 0);
  cr_assert(seen.grid[0] == 1000 && seen.block[0] == 256 && seen.shared == 128);
  cr_assert_eq(seen.stream, (CUstream)s);
  cr_assert(seen.arg0 == x && seen.arg1 == 7);

  /* A config that asks for nothing is the same launch. */
  jitk_kernel_launch_config c;
  JT_OK(NULL, jitk_kernel_launch_config_init(&c));
  cr_assert_eq(c.struct_size, sizeof c);
  cr_assert_eq(c.cooperative, 0);
  JT_OK(e, jitk_kernel_launch_ex(&k, (jitk_dim3){1000, 1, 1}, (jitk_dim3){256, 1, 1}, 0, s, args, 2,
                                 &c));
  cr_assert_eq(seen.plain, 2);
  cr_assert_eq(seen.ex, 0);

  /* Cooperative: 4 blocks of 256 threads per multiprocessor, 132 of
   * them: 528 blocks fit, in any shape. */
  c.cooperative = 1;
  JT_OK(e, jitk_kernel_launch_ex(&k, (jitk_dim3){528, 1, 1}, (jitk_dim3){256, 1, 1}, 64, s, args, 2,
                                 &c));
  cr_assert_eq(seen.ex, 1);
  cr_assert_eq(seen.plain, 2);
  cr_assert_eq(seen.occupancy, 1);
  cr_assert_eq(seen.occupancy_threads, 256);
  cr_assert_eq(seen.occupancy_shared, 64);
  cr_assert(seen.grid[0] == 528 && seen.grid[1] == 1 && seen.grid[2] == 1);
  cr_assert(seen.block[0] == 256 && seen.block[1] == 1 && seen.block[2] == 1);
  cr_assert_eq(seen.shared, 64);
  cr_assert_eq(seen.stream, (CUstream)s);
  cr_assert_eq(seen.num_attrs, 1);
  cr_assert_eq(seen.attr.id, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  cr_assert_eq(seen.attr.value.cooperative, 1);
  cr_assert(seen.arg0 == x && seen.arg1 == 7, "the same packing as a plain launch");
  JT_OK(e, jitk_kernel_launch_ex(&k, (jitk_dim3){11, 12, 4}, (jitk_dim3){16, 16, 1}, 0, s, args, 2,
                                 &c));
  cr_assert_eq(seen.ex, 2);
  cr_assert_eq(seen.occupancy_threads, 256, "the block's threads, all dimensions");

  /* One block more does not fit: refused, naming both numbers, before
   * the launch. */
  JT_FAILS(
      e, JITK_ERR_LAUNCH_CONFIG, "529 blocks",
      jitk_kernel_launch_ex(&k, (jitk_dim3){529, 1, 1}, (jitk_dim3){256, 1, 1}, 0, s, args, 2, &c));
  cr_assert(strstr(jitk_errmsg(e), "at most 528") != NULL, "%s", jitk_errmsg(e));
  cr_assert(strstr(jitk_errmsg(e), "4 per multiprocessor") != NULL, "%s", jitk_errmsg(e));
  cr_assert(strstr(jitk_errmsg(e), "132 multiprocessors") != NULL, "%s", jitk_errmsg(e));
  JT_FAILS(
      e, JITK_ERR_LAUNCH_CONFIG, "at most 264",
      jitk_kernel_launch_ex(&k, (jitk_dim3){23, 23, 1}, (jitk_dim3){512, 1, 1}, 0, s, args, 2, &c));
  cr_assert_eq(seen.ex, 2, "nothing launched");
  /* An ordinary launch of that grid is fine. */
  JT_OK(e, jitk_kernel_launch_ex(&k, (jitk_dim3){529, 1, 1}, (jitk_dim3){256, 1, 1}, 0, s, args, 2,
                                 NULL));
  stand_in_destroy(e);
}

Test(launch, cooperative_launches_check_what_plain_ones_check) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  jitk_kernel_launch_config c;
  jitk_kernel_launch_config_init(&c);
  c.cooperative = 1;
  jitk_arg args[] = {jitk_arg_ptr(NULL, JITK_FLOAT32), jitk_arg_i32(7)};
  jitk_arg wrong[] = {jitk_arg_ptr(NULL, JITK_FLOAT32), jitk_arg_f64(7)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_COUNT, "takes 2 arguments; 1 given",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 1, &c));
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "argument 1",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, wrong, 2, &c));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_kernel_launch_ex: args is NULL",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, NULL, 2, &c));
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "a block of 2048 threads",
           jitk_kernel_launch_ex(&k, one, (jitk_dim3){1024, 2, 1}, 0, NULL, args, 2, &c));
  JT_FAILS(e, JITK_ERR_SHARED_MEMORY, "240000 bytes of dynamic shared memory",
           jitk_kernel_launch_ex(&k, one, one, 240000, NULL, args, 2, &c));
  cr_assert_eq(seen.ex + seen.plain + seen.occupancy, 0, "nothing reached the driver");

  /* The driver's own refusal reads as a launch configuration error. */
  seen.ex_result = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "cuLaunchKernelEx refused kernel stand_in",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  seen.ex_result = CUDA_SUCCESS;
  /* A driver without cuLaunchKernelEx cannot launch cooperatively. */
  e->drv.cuLaunchKernelEx = NULL;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "cuLaunchKernelEx",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  JT_OK(e, jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, NULL));
  stand_in_destroy(e);
}

Test(launch, config_struct_size) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  jitk_arg args[] = {jitk_arg_ptr(NULL, JITK_FLOAT32), jitk_arg_i32(7)};
  jitk_kernel_launch_config c;
  memset(&c, 0, sizeof c);
  c.cooperative = 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size is 0",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  c.struct_size = sizeof c + 8;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_kernel_launch_config_init",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  c.struct_size = offsetof(jitk_kernel_launch_config, cooperative);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  /* Ending inside the cluster's dimensions: refused, not read in part. */
  c.struct_size = offsetof(jitk_kernel_launch_config, cluster) + 8;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size",
           jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  cr_assert_eq(seen.ex + seen.plain, 0);
  /* A caller built when the struct ended at `cooperative`, its size as
   * written or as sizeof gives it (with the padding after the field,
   * which is not read as the cluster's width). */
  c.struct_size = offsetof(jitk_kernel_launch_config, cooperative) + sizeof(int);
  JT_OK(e, jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  cr_assert_eq(seen.ex, 1);
  c.struct_size = (offsetof(jitk_kernel_launch_config, cooperative) + sizeof(int) + 7) / 8 * 8;
  c.cluster.x = 4;
  JT_OK(e, jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  cr_assert_eq(seen.ex, 2);
  cr_assert_eq(seen.num_attrs, 1, "the cooperative attribute alone, no cluster");
  /* The form that ended at the cluster. */
  JT_OK(NULL, jitk_kernel_launch_config_init(&c));
  c.struct_size = offsetof(jitk_kernel_launch_config, cluster) + sizeof(jitk_dim3);
  c.programmatic_dependent_launch = 1;
  JT_OK(e, jitk_kernel_launch_ex(&k, one, one, 0, NULL, args, 2, &c));
  cr_assert(seen.plain == 1 && seen.ex == 2,
            "a plain launch: the dependent launch is past the form");
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "config is NULL", jitk_kernel_launch_config_init(NULL));
  stand_in_destroy(e);
}

/* What cooperative launches are for: a kernel that synchronizes its whole
 * grid through cooperative_groups compiles as whole-program code (no -dc,
 * no device runtime to link). */
Test(launch, grid_sync_compiles_without_relocatable_code) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *src =
      "#include <cooperative_groups.h>\n"
      "namespace cg = cooperative_groups;\n"
      "extern \"C\" __global__ void k(int *a, int *b, int total) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  a[i] = i + 1;\n"
      "  cg::this_grid().sync();\n"
      "  b[i] = a[total - 1 - i];\n"
      "}\n";
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* The steps of one launch, as a split reduction makes them: its tickets
 * cleared, its kernel, the second pass's kernel, in that order on one
 * stream; the first step the driver refuses ends the launch with a
 * message that names the kernel and its configuration, and the steps
 * after it do not run. */
static char order[8];
static int steps;
static CUresult memset_result;

static CUresult stub_memset(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
  cr_assert_eq(p, (CUdeviceptr)0x1000);
  cr_assert_eq(v, 0);
  cr_assert_eq(n, 96);
  cr_assert_eq(s, (CUstream)(uintptr_t)0x5);
  order[steps++] = 'm';
  return memset_result;
}

static CUresult stub_launch_step(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, CUstream s,
                                 void **params, void **extra) {
  (void)gy, (void)gz, (void)by, (void)bz, (void)shared, (void)params, (void)extra;
  cr_assert_eq(s, (CUstream)(uintptr_t)0x5);
  cr_assert_eq(bx, 256);
  order[steps++] = f == stub_fn ? 'k' : 'f';
  return gx == 7 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

Test(launch, steps_run_in_order_and_stop_at_a_refusal) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  e->drv.cuMemsetD8Async = stub_memset;
  e->drv.cuLaunchKernel = stub_launch_step;
  CUfunction second = (CUfunction)(uintptr_t)0xF1;
  void *params[1] = {NULL};
  jk_launch_op ops[3] = {
      {.name = "red", .clear = (void *)0x1000, .clear_bytes = 96},
      {.fn = stub_fn, .name = "red", .grid = {64, 16, 1}, .block = {256, 1, 1}, .params = params},
      {.fn = second, .name = "red", .grid = {4, 1, 1}, .block = {256, 1, 1}, .params = params},
  };
  jitk_stream stream = (jitk_stream)(uintptr_t)0x5;
  memset_result = CUDA_SUCCESS;
  steps = 0;
  JT_OK(e, jk_launch_ops(e, stream, ops, 3));
  cr_assert_eq(steps, 3);
  cr_assert(memcmp(order, "mkf", 3) == 0, "%.3s", order);

  /* The second pass refused: named whole, after the two steps before. */
  ops[2].grid[0] = 7;
  steps = 0;
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG,
           "cuLaunchKernel refused kernel red with grid (7, 1, 1), block (256, 1, 1)",
           jk_launch_ops(e, stream, ops, 3));
  cr_assert_eq(steps, 3);

  /* The memset failing: nothing launches. */
  memset_result = CUDA_ERROR_OUT_OF_MEMORY;
  steps = 0;
  JT_FAILS(e, JITK_ERR_DEVICE_OUT_OF_MEMORY, "cuMemsetD8Async failed",
           jk_launch_ops(e, stream, ops, 3));
  cr_assert_eq(steps, 1);
  stand_in_destroy(e);
}

/* Clusters and programmatic dependent launch go through cuLaunchKernelEx
 * with their attributes, after the grid is checked against the cluster's
 * shape; a launch asking for more dynamic shared memory than the kernel's
 * limit raises the limit first. */
Test(launch, clusters_dependent_launch_and_shared_memory) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  e->info.cc_major = 9;
  jitk_kernel_launch_config c;
  jitk_kernel_launch_config_init(&c);
  cr_assert(c.cluster.x == 0 && c.cluster.y == 0 && c.cluster.z == 0);
  cr_assert_eq(c.programmatic_dependent_launch, 0);
  jitk_arg args[] = {jitk_arg_ptr(NULL, JITK_FLOAT32), jitk_arg_i32(7)};
  jitk_stream s = (jitk_stream)(uintptr_t)0x5;

  c.cluster = (jitk_dim3){2, 1, 1};
  c.programmatic_dependent_launch = 1;
  JT_OK(e,
        jitk_kernel_launch_ex(&k, (jitk_dim3){8, 2, 1}, (jitk_dim3){128, 1, 1}, 0, s, args, 2, &c));
  cr_assert_eq(seen.ex, 1);
  cr_assert_eq(seen.plain, 0);
  cr_assert_eq(seen.num_attrs, 2);
  cr_assert_eq(seen.attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  cr_assert_eq(seen.attrs[0].value.clusterDim.x, 2);
  cr_assert_eq(seen.attrs[0].value.clusterDim.y, 1);
  cr_assert_eq(seen.attrs[1].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  cr_assert_eq(seen.attrs[1].value.programmaticStreamSerializationAllowed, 1);
  cr_assert_eq(seen.grid[0], 8);
  cr_assert_eq(seen.stream, (CUstream)s);
  cr_assert_eq(seen.arg1, 7);

  /* Shapes the grid does not divide, zero dimensions, too many blocks. */
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "not a whole number of clusters (2, 1, 1): dimension x",
           jitk_kernel_launch_ex(&k, (jitk_dim3){7, 1, 1}, one, 0, s, args, 2, &c));
  c.cluster = (jitk_dim3){2, 0, 1};
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "cluster (2, 0, 1) has a zero dimension",
           jitk_kernel_launch_ex(&k, (jitk_dim3){8, 1, 1}, one, 0, s, args, 2, &c));
  c.cluster = (jitk_dim3){4, 4, 1};
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "a cluster of 16 blocks",
           jitk_kernel_launch_ex(&k, (jitk_dim3){8, 8, 1}, one, 0, s, args, 2, &c));
  /* A device before Hopper has none. */
  e->info.cc_major = 8;
  c.cluster = (jitk_dim3){2, 1, 1};
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "clusters need compute capability 9.0",
           jitk_kernel_launch_ex(&k, (jitk_dim3){8, 1, 1}, one, 0, s, args, 2, &c));
  e->info.cc_major = 9;
  cr_assert_eq(seen.ex, 1, "no refused configuration reached the driver");

  /* The driver refusing a cluster is named with it. */
  seen.ex_result = CUDA_ERROR_INVALID_CLUSTER_SIZE;
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "clusters (2, 1, 1), programmatic dependent: error",
           jitk_kernel_launch_ex(&k, (jitk_dim3){8, 1, 1}, one, 0, s, args, 2, &c));
  seen.ex_result = CUDA_SUCCESS;
  e->drv.cuLaunchKernelEx = NULL;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "a clustered launch needs cuLaunchKernelEx",
           jitk_kernel_launch_ex(&k, (jitk_dim3){8, 1, 1}, one, 0, s, args, 2, &c));
  e->drv.cuLaunchKernelEx = stub_launch_ex;

  /* 100 KiB of dynamic shared memory: the limit (48 KiB) is raised, once. */
  seen.raised = 0;
  JT_OK(e, jitk_kernel_launch(&k, one, one, 102400, s, args, 2));
  cr_assert_eq(seen.raised, 102400);
  cr_assert_eq(k.f.max_dynamic_shared, 102400);
  cr_assert_eq(seen.shared, 102400);
  seen.raised = 0;
  JT_OK(e, jitk_kernel_launch(&k, one, one, 65536, s, args, 2));
  cr_assert_eq(seen.raised, 0, "within the raised limit: no driver call");
  stand_in_destroy(e);
}

/* A step may say how its clusters' blocks are placed: the policy goes to
 * cuLaunchKernelEx after the cluster's shape, and only with clusters. */
Test(launch, cluster_scheduling_policy) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  e->info.cc_major = 9;
  jitk_stream s = (jitk_stream)(uintptr_t)0x5;
  void *params[2] = {NULL, NULL};
  jk_launch_op op = {.fn = stub_fn,
                     .name = "mm",
                     .grid = {6, 1, 3},
                     .block = {256, 1, 1},
                     .params = params,
                     .cluster = {1, 1, 3},
                     .cluster_policy = CU_CLUSTER_SCHEDULING_POLICY_SPREAD};
  int64_t arg0 = 0;
  int32_t arg1 = 7;
  params[0] = &arg0;
  params[1] = &arg1;
  seen.ex = 0;
  JT_OK(e, jk_launch_ops(e, s, &op, 1));
  cr_assert_eq(seen.ex, 1);
  cr_assert_eq(seen.num_attrs, 2);
  cr_assert_eq(seen.attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  cr_assert_eq(seen.attrs[0].value.clusterDim.z, 3);
  cr_assert_eq(seen.attrs[1].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  cr_assert_eq(seen.attrs[1].value.clusterSchedulingPolicyPreference,
               CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
  /* The driver's default: no attribute for it. */
  op.cluster_policy = 0;
  JT_OK(e, jk_launch_ops(e, s, &op, 1));
  cr_assert_eq(seen.num_attrs, 1);
  /* Without clusters a policy means nothing and is not sent. */
  op.cluster[0] = op.cluster[1] = op.cluster[2] = 0;
  op.cluster_policy = CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING;
  op.pdl = true;
  JT_OK(e, jk_launch_ops(e, s, &op, 1));
  cr_assert_eq(seen.num_attrs, 1);
  cr_assert_eq(seen.attrs[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  stand_in_destroy(e);
}

/* Every attribute the driver reports, the settable ones set, the rest
 * refused with the reason; the cache preference; clusters of up to 16
 * blocks once the kernel allows them. */
Test(launch, kernel_attributes) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  e->info.cc_major = 9;
  e->drv.cuFuncGetAttribute = stub_get_attribute;
  int v = 0;
  for (int a = 0; a <= JITK_KERNEL_CLUSTER_SCHEDULING_POLICY_PREFERENCE; a++) {
    JT_OK(e, jitk_kernel_get_attribute(&k, (jitk_kernel_attribute)a, &v));
    cr_assert_eq(v, 1000 + a);
  }
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "16 is not a jitk_kernel_attribute",
           jitk_kernel_get_attribute(&k, (jitk_kernel_attribute)16, &v));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "value is NULL",
           jitk_kernel_get_attribute(&k, JITK_KERNEL_NUM_REGS, NULL));

  JT_OK(e, jitk_kernel_set_attribute(&k, JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
  cr_assert_eq(seen.set_attr, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
  cr_assert_eq(seen.set_value, 50);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "0 to 100 percent",
           jitk_kernel_set_attribute(&k, JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, 101));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "attribute 4 is read-only",
           jitk_kernel_set_attribute(&k, JITK_KERNEL_NUM_REGS, 32));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "0 or 1",
           jitk_kernel_set_attribute(&k, JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 2));
  /* The shared memory limit goes where launches read it. */
  JT_OK(e, jitk_kernel_set_attribute(&k, JITK_KERNEL_MAX_DYNAMIC_SHARED_SIZE_BYTES, 70000));
  cr_assert_eq(seen.raised, 70000);
  cr_assert_eq(k.f.max_dynamic_shared, 70000);

  /* Clusters of 16 only once allowed. */
  jitk_kernel_launch_config c;
  jitk_kernel_launch_config_init(&c);
  c.cluster = (jitk_dim3){16, 1, 1};
  jitk_arg args[] = {jitk_arg_ptr(NULL, JITK_FLOAT32), jitk_arg_i32(7)};
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED",
           jitk_kernel_launch_ex(&k, (jitk_dim3){16, 1, 1}, one, 0, NULL, args, 2, &c));
  JT_OK(e, jitk_kernel_set_attribute(&k, JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  JT_OK(e, jitk_kernel_launch_ex(&k, (jitk_dim3){16, 1, 1}, one, 0, NULL, args, 2, &c));
  cr_assert_eq(seen.attrs[0].value.clusterDim.x, 16);

  /* The cache preference, and a driver without the call. */
  e->drv.cuFuncSetCacheConfig = stub_cache_config;
  JT_OK(e, jitk_kernel_set_cache_preference(&k, JITK_PREFER_SHARED));
  cr_assert_eq(seen.cache, CU_FUNC_CACHE_PREFER_SHARED);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "not a jitk_cache_preference",
           jitk_kernel_set_cache_preference(&k, (jitk_cache_preference)4));
  e->drv.cuFuncSetCacheConfig = NULL;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "cuFuncSetCacheConfig",
           jitk_kernel_set_cache_preference(&k, JITK_PREFER_L1));
  stand_in_destroy(e);
}

/* The driver's own limit: the last one set (the stubs record it in
 * seen.raised), 0 for the flag of clusters past 8. */
static CUresult stub_driver_limit(int *v, CUfunction_attribute attr, CUfunction f) {
  cr_assert_eq(f, stub_fn);
  *v = attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ? seen.raised : 0;
  return CUDA_SUCCESS;
}

/* Two handles of one loaded function (two modules of the same source, as
 * the kernel cache makes them, or a name expression and its lowered name)
 * each keep the function's limit: one lowering it must not leave the
 * other trusting the higher value it set, which made the driver refuse
 * that handle's next launch. */
Test(launch, handles_of_one_function_see_each_others_limits) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  e->drv.cuFuncGetAttribute = stub_driver_limit;
  jitk_kernel k2 = k;
  jitk_arg args[] = {jitk_arg_ptr(NULL, JITK_FLOAT32), jitk_arg_i32(7)};
  JT_OK(e, jitk_kernel_launch(&k2, one, one, 102400, NULL, args, 2));
  cr_assert_eq(seen.raised, 102400);
  JT_OK(e, jitk_kernel_set_max_dynamic_shared(&k, 0));
  cr_assert_eq(seen.raised, 0);
  JT_OK(e, jitk_kernel_launch(&k2, one, one, 102400, NULL, args, 2));
  cr_assert_eq(seen.raised, 102400, "the limit the other handle lowered is raised again");
  cr_assert_eq(k2.f.max_dynamic_shared, 102400);
  /* No change since: a launch asks the driver nothing. */
  e->drv.cuFuncGetAttribute = NULL;
  JT_OK(e, jitk_kernel_launch(&k2, one, one, 65536, NULL, args, 2));
  stand_in_destroy(e);
}

/* An array argument of a rank past JITK_MAX_NDIM (or negative) is the
 * caller's mistake, named as such: it was refused as the launch's own
 * fault ("descriptor storage exhausted", JITK_ERR_INTERNAL) when the
 * rank passed twice the largest. Nothing is launched. */
Test(launch, array_ranks_past_the_largest) {
  jitk_kernel k;
  jitk_engine *e = stand_in(&k);
  static float data[4];
  int64_t shape[64], strides[64];
  for (int i = 0; i < 64; i++) shape[i] = 1, strides[i] = 1;
  static const int32_t ranks[] = {JITK_MAX_NDIM + 1, 20, 40, 64, -1};
  for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
    DLTensor t = jt_tensor(data, JITK_FLOAT32, 1, shape, strides);
    t.ndim = ranks[r];
    jitk_arg args[] = {jitk_arg_array(&t), jitk_arg_i32(7)};
    JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "dimensions; jitk handles 0 to",
             jitk_kernel_launch(&k, one, one, 0, NULL, args, 2));
    cr_assert(strstr(jitk_errmsg(e), "argument 0") != NULL, "%s", jitk_errmsg(e));
  }
  cr_assert_eq(seen.plain + seen.ex, 0, "nothing launched");
  stand_in_destroy(e);
}
