/*
 * Finding the CUDA headers at run time. The build machine's toolkit path
 * is only one guess: a binary often runs where the toolkit lives elsewhere,
 * so the environment comes first and the folder next to the NVRTC that was
 * actually loaded comes after the build-time location.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine.h"

#ifndef JITK_BUILD_CUDA_INCLUDE_DIR
#define JITK_BUILD_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

/* A folder counts as the CUDA headers when it has cuda_fp16.h, which
 * NVRTC does not carry built in. */
static bool is_cuda_include(const char *dir) {
  char path[4096];
  struct stat st;
  if (snprintf(path, sizeof path, "%s/cuda_fp16.h", dir) >= (int)sizeof path) return false;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static char *try_dir(jitk_engine *e, const char *base, const char *suffix) {
  if (base == NULL || *base == '\0') return NULL;
  char path[4096];
  if (snprintf(path, sizeof path, "%s%s", base, suffix) >= (int)sizeof path) return NULL;
  if (!is_cuda_include(path)) return NULL;
  return jk_strdup(e, path);
}

/* The toolkit that holds the loaded libnvrtc: lib64/../include, or
 * targets/<arch>/lib/../include. */
static char *beside_nvrtc(jitk_engine *e) {
  Dl_info info;
  if (dladdr((void *)&nvrtcVersion, &info) == 0 || info.dli_fname == NULL) return NULL;
  char lib[4096];
  if (snprintf(lib, sizeof lib, "%s", info.dli_fname) >= (int)sizeof lib) return NULL;
  char *slash = strrchr(lib, '/');
  if (slash == NULL) return NULL;
  *slash = '\0';
  char *found = try_dir(e, lib, "/../include");
  if (found == NULL) found = try_dir(e, lib, "/../../include");
  return found;
}

char *jk_find_cuda_include(jitk_engine *e, const char *override) {
  if (override != NULL) {
    if (!is_cuda_include(override))
      jk_log(e, JITK_LOG_WARN, "cuda_include_dir \"%s\" has no cuda_fp16.h; using it anyway",
             override);
    return jk_strdup(e, override);
  }
  char *dir = try_dir(e, getenv("CUDA_HOME"), "/include");
  if (dir == NULL) dir = try_dir(e, getenv("CUDA_PATH"), "/include");
  if (dir == NULL) dir = try_dir(e, JITK_BUILD_CUDA_INCLUDE_DIR, "");
  if (dir == NULL) dir = beside_nvrtc(e);
  if (dir == NULL) dir = try_dir(e, "/usr/local/cuda", "/include");
  if (dir != NULL) jk_log(e, JITK_LOG_DEBUG, "CUDA headers in %s", dir);
  return dir;
}

/*
 * The files that make up the NVRTC in use: the loaded libnvrtc, and the
 * libnvrtc-builtins it loads at its first compile (its device headers and
 * built-in declarations). NVRTC opens the builtins library beside the
 * real path of its own file, by that path alone (seen with strace on
 * NVRTC 13.0), so that is the file named here; loading it to ask the
 * loader would cost milliseconds (it pulls in the C++ runtime). Either
 * path is NULL when it cannot be found.
 */
jitk_status jk_nvrtc_library_files(jitk_engine *e, char **nvrtc_path, char **builtins_path) {
  jk_nvrtc *nv = &e->nvrtc;
  *nvrtc_path = *builtins_path = NULL;
  Dl_info info;
  if (dladdr((void *)&nvrtcVersion, &info) == 0 || info.dli_fname == NULL) return JITK_OK;
  if ((*nvrtc_path = jk_strdup(e, info.dli_fname)) == NULL)
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  char real[4096];
  if (realpath(info.dli_fname, real) == NULL) return JITK_OK;
  char *slash = strrchr(real, '/');
  if (slash == NULL) return JITK_OK;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - real), real, nv->major,
                nv->minor);
  if ((*builtins_path = jk_buf_take(&b)) == NULL)
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  return JITK_OK;
}

void jk_nvrtc_loaded_build_ids(const jitk_engine *e, jk_build_id ids[2], bool loaded[2]) {
  /* NVRTC opens its builtins by a path ending in this name (above); the
   * loader keeps that path as the library's name. */
  char name[64];
  snprintf(name, sizeof name, "libnvrtc-builtins.so.%d.%d", e->nvrtc.major, e->nvrtc.minor);
  loaded[0] = jk_loaded_build_id((const void *)&nvrtcVersion, NULL, &ids[0]);
  loaded[1] = jk_loaded_build_id(NULL, name, &ids[1]);
}
