/* jk_cu_link drives the driver's linker: pieces in order, a library the
 * driver takes only as a file added from it, the error log emptied for the
 * file's attempt, the failed step named and the cubin copied out before the
 * link state dies. The stand-in driver does not link, so the linker's entry
 * points are stubs of this file, set in a compile-only engine's table. */
#include <stdio.h>

#include "common.h"
#include "engine.h"

/* What the stubs saw, and how they answer. */
static struct {
  unsigned nopts;
  uintptr_t log_size, target;
  char *log;
  int added;
  CUjitInputType types[4];
  size_t sizes[4];
  const char *names[4];
  const char *file;
  CUresult library_answer, file_answer, create_answer;
  int destroyed;
} fk;

static unsigned char linked[3] = {0x7f, 'E', 'L'};
static int state_token;

static CUresult link_create(unsigned n, CUjit_option *o, void **v, CUlinkState *s) {
  fk.nopts = n;
  for (unsigned i = 0; i < n; i++) {
    if (o[i] == CU_JIT_ERROR_LOG_BUFFER) fk.log = v[i];
    if (o[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) fk.log_size = (uintptr_t)v[i];
    if (o[i] == CU_JIT_TARGET) fk.target = (uintptr_t)v[i];
  }
  *s = (CUlinkState)(void *)&state_token;
  return fk.create_answer;
}

static CUresult link_add_data(CUlinkState s, CUjitInputType t, void *d, size_t z, const char *name,
                              unsigned n, CUjit_option *o, void **v) {
  (void)s, (void)d, (void)n, (void)o, (void)v;
  if (t == CU_JIT_INPUT_LIBRARY && fk.library_answer != CUDA_SUCCESS) {
    snprintf(fk.log, fk.log_size, "archives only as files");
    return fk.library_answer;
  }
  fk.types[fk.added] = t;
  fk.sizes[fk.added] = z;
  fk.names[fk.added++] = name;
  return CUDA_SUCCESS;
}

static CUresult link_add_file(CUlinkState s, CUjitInputType t, const char *path, unsigned n,
                              CUjit_option *o, void **v) {
  (void)s, (void)t, (void)n, (void)o, (void)v;
  fk.file = path;
  if (fk.file_answer != CUDA_SUCCESS) snprintf(fk.log, fk.log_size, "no such archive");
  return fk.file_answer;
}

static CUresult link_complete(CUlinkState s, void **cubin, size_t *size) {
  (void)s;
  *cubin = linked;
  *size = sizeof linked;
  return CUDA_SUCCESS;
}

static CUresult link_destroy(CUlinkState s) {
  cr_assert_eq((void *)s, (void *)&state_token);
  fk.destroyed++;
  return CUDA_SUCCESS;
}

static jitk_engine *engine_with_linker(void) {
  memset(&fk, 0, sizeof fk);
  jitk_engine *e = jt_compile_engine("sm_90");
  cr_assert(!jk_cu_has_linker(e), "a compile-only engine has no driver");
  e->drv.cuLinkCreate = link_create;
  e->drv.cuLinkAddData = link_add_data;
  e->drv.cuLinkAddFile = link_add_file;
  e->drv.cuLinkComplete = link_complete;
  e->drv.cuLinkDestroy = link_destroy;
  cr_assert(jk_cu_has_linker(e));
  return e;
}

static const char ptx[] = ".version 8.0";
static const unsigned char archive[] = "!<arch>\n";

static const jk_cu_link_piece pieces[2] = {
    {CU_JIT_INPUT_PTX, ptx, sizeof ptx, "module.cu"},
    {CU_JIT_INPUT_LIBRARY, archive, sizeof archive - 1, "libcudadevrt.a"},
};

Test(driver_link, pieces_in_order_and_the_cubin_copied) {
  jitk_engine *e = engine_with_linker();
  char log[64] = "stale";
  void *image = NULL;
  size_t size = 0;
  const char *step = NULL;
  CUresult r =
      jk_cu_link(e, pieces, 2, "/lib/libcudadevrt.a", 0, log, sizeof log, &image, &size, &step);
  cr_assert_eq(r, CUDA_SUCCESS);
  cr_assert_eq(fk.nopts, 2, "no target: only the log's two options");
  cr_assert_eq(fk.log, log);
  cr_assert_eq(fk.log_size, sizeof log);
  cr_assert_str_empty(log);
  cr_assert_eq(fk.added, 2);
  cr_assert_eq(fk.types[0], CU_JIT_INPUT_PTX);
  cr_assert_eq(fk.sizes[0], sizeof ptx);
  cr_assert_str_eq(fk.names[1], "libcudadevrt.a");
  cr_assert_null(fk.file, "the data was taken: no file");
  cr_assert_eq(fk.destroyed, 1);
  cr_assert_eq(size, sizeof linked);
  cr_assert_neq(image, (void *)linked, "the driver's buffer dies with the state");
  cr_assert_eq(memcmp(image, linked, size), 0);
  cr_assert_eq(((unsigned char *)image)[size], 0);
  jk_free(e, image);
  jitk_engine_destroy(e);
}

Test(driver_link, target_passed) {
  jitk_engine *e = engine_with_linker();
  char log[64];
  void *image = NULL;
  size_t size = 0;
  const char *step = NULL;
  cr_assert_eq(
      jk_cu_link(e, pieces, 1, NULL, CU_TARGET_COMPUTE_90, log, sizeof log, &image, &size, &step),
      CUDA_SUCCESS);
  cr_assert_eq(fk.nopts, 3);
  cr_assert_eq(fk.target, CU_TARGET_COMPUTE_90);
  jk_free(e, image);
  jitk_engine_destroy(e);
}

Test(driver_link, library_from_its_file) {
  jitk_engine *e = engine_with_linker();
  fk.library_answer = CUDA_ERROR_NOT_SUPPORTED;
  char log[64];
  void *image = NULL;
  size_t size = 0;
  const char *step = NULL;
  CUresult r =
      jk_cu_link(e, pieces, 2, "/lib/libcudadevrt.a", 0, log, sizeof log, &image, &size, &step);
  cr_assert_eq(r, CUDA_SUCCESS);
  cr_assert_str_eq(fk.file, "/lib/libcudadevrt.a");
  cr_assert_str_empty(log, "the refusal of the data is not the file's: %s", log);
  cr_assert_eq(fk.added, 1);
  jk_free(e, image);
  jitk_engine_destroy(e);
}

Test(driver_link, failed_step_named) {
  jitk_engine *e = engine_with_linker();
  char log[64];
  void *image = NULL;
  size_t size = 0;
  const char *step = NULL;
  /* The file refused too: its own message, nothing copied. */
  fk.library_answer = CUDA_ERROR_INVALID_VALUE;
  fk.file_answer = CUDA_ERROR_FILE_NOT_FOUND;
  CUresult r =
      jk_cu_link(e, pieces, 2, "/lib/libcudadevrt.a", 0, log, sizeof log, &image, &size, &step);
  cr_assert_eq(r, CUDA_ERROR_FILE_NOT_FOUND);
  cr_assert_str_eq(step, "cuLinkAddFile");
  cr_assert_str_eq(log, "no such archive");
  cr_assert_null(image);
  cr_assert_eq(fk.destroyed, 1);
  /* No file to fall back on: the data's refusal stands. */
  fk.destroyed = 0;
  fk.file = NULL;
  r = jk_cu_link(e, pieces, 2, NULL, 0, log, sizeof log, &image, &size, &step);
  cr_assert_eq(r, CUDA_ERROR_INVALID_VALUE);
  cr_assert_str_eq(step, "cuLinkAddData");
  cr_assert_str_eq(log, "archives only as files");
  cr_assert_null(fk.file);
  cr_assert_eq(fk.destroyed, 1);
  /* No state made: none destroyed. */
  fk.destroyed = 0;
  fk.create_answer = CUDA_ERROR_INVALID_CONTEXT;
  r = jk_cu_link(e, pieces, 2, NULL, 0, log, sizeof log, &image, &size, &step);
  cr_assert_eq(r, CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_str_eq(step, "cuLinkCreate");
  cr_assert_eq(fk.destroyed, 0);
  jitk_engine_destroy(e);
}

Test(driver_link, no_linker) {
  jitk_engine *e = engine_with_linker();
  e->drv.cuLinkComplete = NULL;
  cr_assert(!jk_cu_has_linker(e));
  char log[8];
  void *image = NULL;
  size_t size = 0;
  const char *step = NULL;
  cr_assert_eq(jk_cu_link(e, pieces, 2, NULL, 0, log, sizeof log, &image, &size, &step),
               CUDA_ERROR_NOT_SUPPORTED);
  cr_assert_eq(fk.nopts, 0, "nothing was called");
  jitk_engine_destroy(e);
}
