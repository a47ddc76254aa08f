/*
 * Relocatable device code linked with the CUDA device runtime.
 *
 * A program compiled with -dc or -rdc=true (needed for device-side kernel
 * launches, "dynamic parallelism") comes out of NVRTC as a relocatable
 * object that calls into libcudadevrt; the driver cannot load it until it
 * is linked with that library. The link runs right after NVRTC, so the
 * kernel cache stores, and every later hit loads, the linked image.
 *
 * nvJitLink links without a GPU, so compile-only engines produce the
 * linked cubin too. It is not linked into jitk (programs that never use
 * -dc should not need it): it is opened with dlopen at the first such
 * compile, from the places NVRTC itself comes from. When it is missing,
 * an engine with a device links through the driver (cuLinkCreate and the
 * rest), which also covers PTX targets, whose linked code only the driver
 * can compile for the device.
 *
 * Programs of several pieces (jitk_module_link) are linked here too, by
 * nvJitLink only: the driver's linker takes no LTO-IR, and a program that
 * links on one machine should link on every machine of its toolkit.
 *
 * libcudadevrt.a is read by jitk and handed to the linker as bytes, so
 * that what was linked is exactly what was hashed: every place searched
 * goes into the compile's dependency record (nothing there, or the file
 * with the hash of its content), and an entry is served only while that
 * record holds, as for headers (src/cache/deps.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

#ifndef JITK_BUILD_CUDA_INCLUDE_DIR
#define JITK_BUILD_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

/* The toolkit's per-target library folder, for toolkits laid out as the
 * installers do (targets/<triple>/lib, which lib64 links to). */
#if defined(__aarch64__)
#define JK_TARGET_LIB "targets/sbsa-linux/lib"
#else
#define JK_TARGET_LIB "targets/x86_64-linux/lib"
#endif

/* nvJitLink's input kinds and the result that means success, as
 * nvJitLink.h numbers them (the header is not needed to build jitk). */
enum {
  JK_NVJITLINK_SUCCESS = 0,
  JK_NVJITLINK_INPUT_CUBIN = 1,
  JK_NVJITLINK_INPUT_PTX = 2,
  JK_NVJITLINK_INPUT_LTOIR = 3,
  JK_NVJITLINK_INPUT_FATBIN = 4,
  JK_NVJITLINK_INPUT_OBJECT = 5,
  JK_NVJITLINK_INPUT_LIBRARY = 6
};

static const char *jitlink_result_name(int r) {
  static const char *const names[] = {"NVJITLINK_SUCCESS",
                                      "NVJITLINK_ERROR_UNRECOGNIZED_OPTION",
                                      "NVJITLINK_ERROR_MISSING_ARCH",
                                      "NVJITLINK_ERROR_INVALID_INPUT",
                                      "NVJITLINK_ERROR_PTX_COMPILE",
                                      "NVJITLINK_ERROR_NVVM_COMPILE",
                                      "NVJITLINK_ERROR_INTERNAL",
                                      "NVJITLINK_ERROR_THREADPOOL",
                                      "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
                                      "NVJITLINK_ERROR_FINALIZE",
                                      "NVJITLINK_ERROR_NULL_INPUT",
                                      "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
                                      "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
                                      "NVJITLINK_ERROR_ARCH_MISMATCH",
                                      "NVJITLINK_ERROR_OUTDATED_LIBRARY",
                                      "NVJITLINK_ERROR_MISSING_FATBIN",
                                      "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
                                      "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
                                      "NVJITLINK_ERROR_LTO_NOT_ENABLED"};
  if (r >= 0 && (size_t)r < sizeof names / sizeof names[0]) return names[r];
  return "an unknown nvJitLink result";
}

/* Whether option `o` (NULL: none) reads, as NVRTC reads it, as `text`. */
static bool option_is(const char *o, const char *text) {
  if (o == NULL) return false;
  size_t len;
  o = jk_option_trim(o, &len);
  return len == strlen(text) && strncmp(o, text, len) == 0;
}

bool jk_options_rdc(const char *const *options, size_t n) {
  bool rdc = false;
  for (size_t i = 0; i < n; i++) {
    const char *o = options[i];
    if (o == NULL) continue;
    /* NVRTC also takes the value as the next option: {"-rdc", "true"}. */
    const char *next = i + 1 < n ? options[i + 1] : NULL;
    if ((option_is(o, "-rdc") || option_is(o, "--relocatable-device-code")) &&
        (option_is(next, "true") || option_is(next, "false"))) {
      rdc = option_is(options[++i], "true");
      continue;
    }
    if (option_is(o, "-dc") || option_is(o, "--device-c") || option_is(o, "-rdc=true") ||
        option_is(o, "--relocatable-device-code=true"))
      rdc = true;
    else if (option_is(o, "-rdc=false") || option_is(o, "--relocatable-device-code=false"))
      rdc = false; /* as NVRTC reads them, the last one decides */
  }
  return rdc;
}

/* --- the places searched --- */

typedef struct strlist {
  jitk_engine *e;
  char **v;
  size_t n, cap;
  bool oom;
} strlist;

static void strlist_free(strlist *l) {
  for (size_t i = 0; i < l->n; i++) jk_free(l->e, l->v[i]);
  jk_free(l->e, l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

/* Appends base + suffix, once: a folder reached two ways is searched and
 * recorded once. */
static void strlist_add(strlist *l, const char *base, size_t base_len, const char *suffix) {
  if (l->oom) return;
  while (base_len > 1 && base[base_len - 1] == '/') base_len--;
  jk_buf b;
  jk_buf_init(&b, l->e);
  jk_buf_append(&b, base, base_len);
  jk_buf_puts(&b, suffix);
  char *s = jk_buf_take(&b);
  if (s == NULL) {
    l->oom = true;
    return;
  }
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i], s) == 0) {
      jk_free(l->e, s);
      return;
    }
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    char **v = jk_realloc(l->e, l->v, cap * sizeof *v);
    if (v == NULL) {
      jk_free(l->e, s);
      l->oom = true;
      return;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = s;
}

/* A CUDA toolkit's library folders. */
static void add_toolkit(strlist *l, const char *root) {
  if (root == NULL || *root == '\0') return;
  strlist_add(l, root, strlen(root), "/lib64");
  strlist_add(l, root, strlen(root), "/" JK_TARGET_LIB);
}

/* The toolkit whose include folder is `inc` ("/usr/local/cuda/include"). */
static void add_toolkit_of_include(strlist *l, const char *inc) {
  if (inc == NULL) return;
  size_t n = strlen(inc);
  while (n > 1 && inc[n - 1] == '/') n--;
  if (n > 8 && memcmp(inc + n - 8, "/include", 8) == 0) {
    char root[4096];
    if (n - 8 >= sizeof root) return;
    memcpy(root, inc, n - 8);
    root[n - 8] = '\0';
    add_toolkit(l, root);
  }
}

/* Beside libnvrtc (the folder it was loaded from, then the folder of its
 * real file), and, when that folder is one of NVIDIA's wheels
 * (site-packages/nvidia/<package>/lib), the wheels `wheel` and
 * cu<major> beside it. */
static void add_beside_nvrtc(strlist *l, jitk_engine *e, const char *wheel) {
  Dl_info info;
  if (dladdr((void *)&nvrtcVersion, &info) == 0 || info.dli_fname == NULL) return;
  char real[4096];
  const char *paths[2] = {info.dli_fname, realpath(info.dli_fname, real) ? real : NULL};
  for (int i = 0; i < 2; i++) {
    if (paths[i] == NULL) continue;
    const char *slash = strrchr(paths[i], '/');
    if (slash == NULL) continue;
    size_t dir_len = (size_t)(slash - paths[i]);
    strlist_add(l, paths[i], dir_len, "");
    /* .../nvidia/<package>/lib: the wheels install side by side. */
    if (dir_len < 4 || memcmp(paths[i] + dir_len - 4, "/lib", 4) != 0) continue;
    size_t pkg_end = dir_len - 4;
    size_t pkg = pkg_end;
    while (pkg > 0 && paths[i][pkg - 1] != '/') pkg--;
    if (pkg < 8 || memcmp(paths[i] + pkg - 8, "/nvidia/", 8) != 0) continue;
    char sub[64];
    snprintf(sub, sizeof sub, "%s/lib", wheel);
    strlist_add(l, paths[i], pkg, sub);
    snprintf(sub, sizeof sub, "cu%d/lib", e->nvrtc.major);
    strlist_add(l, paths[i], pkg, sub);
  }
}

/* The folders searched, in order: beside libnvrtc and its wheels, then
 * the toolkits of $CUDA_HOME, $CUDA_PATH, the CUDA headers in use, the
 * build, and /usr/local/cuda. */
static void search_dirs(jitk_engine *e, const char *wheel, strlist *l) {
  memset(l, 0, sizeof *l);
  l->e = e;
  add_beside_nvrtc(l, e, wheel);
  add_toolkit(l, getenv("CUDA_HOME"));
  add_toolkit(l, getenv("CUDA_PATH"));
  add_toolkit_of_include(l, e->nvrtc.include_dir);
  add_toolkit_of_include(l, JITK_BUILD_CUDA_INCLUDE_DIR);
  add_toolkit(l, "/usr/local/cuda");
}

static void devrt_dirs(jitk_engine *e, strlist *l) {
  if (e->nvrtc.devrt_dirs != NULL) {
    memset(l, 0, sizeof *l);
    l->e = e;
    for (const char *const *d = e->nvrtc.devrt_dirs; *d; d++) strlist_add(l, *d, strlen(*d), "");
    return;
  }
  search_dirs(e, "cuda_runtime", l);
}

jitk_status jk_devrt_search_dirs(jitk_engine *e, char **out) {
  strlist l;
  devrt_dirs(e, &l);
  jk_buf b;
  jk_buf_init(&b, e);
  for (size_t i = 0; i < l.n; i++) jk_buf_printf(&b, "%s%s", i ? "\n" : "", l.v[i]);
  bool oom = l.oom;
  strlist_free(&l);
  char *s = jk_buf_take(&b);
  if (s == NULL || oom) {
    jk_free(e, s);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  *out = s;
  return JITK_OK;
}

/* --- dependency records --- */

static bool deps_add(jitk_engine *e, jk_deps *d, const char *path, char state,
                     const uint8_t hash[16]) {
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 8;
    jk_dep *v = jk_realloc(e, d->v, cap * sizeof *v);
    if (v == NULL) return false;
    d->v = v;
    d->cap = cap;
  }
  jk_dep *x = &d->v[d->n];
  memset(x, 0, sizeof *x);
  if ((x->path = jk_strdup(e, path)) == NULL) return false;
  x->state = state;
  x->hashed = state == 'F';
  if (state == 'F') memcpy(x->hash, hash, 16);
  d->n++;
  return true;
}

jitk_status jk_deps_move(jitk_engine *e, jk_deps *to, jk_deps *from) {
  if (from->n > 0) {
    size_t need = to->n + from->n;
    if (need > to->cap) {
      jk_dep *v = jk_realloc(e, to->v, need * sizeof *v);
      if (v == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
      to->v = v;
      to->cap = need;
    }
    memcpy(to->v + to->n, from->v, from->n * sizeof *from->v);
    to->n = need;
    from->n = 0;
  }
  /* A record that cannot be complete stays so once joined to another. */
  if (to->unknown == NULL) {
    to->unknown = from->unknown;
    from->unknown = NULL;
  }
  jk_deps_free(e, from);
  return JITK_OK;
}

/* Reads a whole regular file. false when it is not one, or unreadable. */
static bool read_all(jitk_engine *e, const char *path, void **data, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      (uint64_t)st.st_size > (uint64_t)SIZE_MAX - 1) {
    close(fd);
    return false;
  }
  size_t cap = (size_t)st.st_size, n = 0;
  unsigned char *buf = jk_malloc(e, cap);
  bool ok = buf != NULL;
  while (ok) {
    if (n == cap) {
      /* It grew while being read: read on, the hash covers what was read. */
      unsigned char *more = jk_realloc(e, buf, 2 * cap);
      if (more == NULL) {
        ok = false;
        break;
      }
      buf = more;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) ok = false;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (!ok || n == 0) {
    jk_free(e, buf);
    return false;
  }
  *data = buf;
  *size = n;
  return true;
}

jitk_status jk_find_devrt(jitk_engine *e, jk_deps *deps, char **path, void **data, size_t *size) {
  strlist l;
  devrt_dirs(e, &l);
  if (l.oom) {
    strlist_free(&l);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  jitk_status st = JITK_OK;
  bool found = false;
  for (size_t i = 0; i < l.n && !found && st == JITK_OK; i++) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "%s/libcudadevrt.a", l.v[i]);
    char *p = jk_buf_take(&b);
    if (p == NULL) {
      st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
      break;
    }
    struct stat sb;
    char state = 'A';
    uint8_t hash[16] = {0};
    if (stat(p, &sb) == 0) {
      state = 'O';
      if (S_ISREG(sb.st_mode) && read_all(e, p, data, size)) {
        jk_deps_hash(*data, *size, hash);
        state = 'F';
      }
    }
    if (!deps_add(e, deps, p, state, hash)) {
      if (state == 'F') jk_free(e, *data);
      st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    } else if (state == 'F') {
      found = true;
      *path = p;
      p = NULL;
    }
    jk_free(e, p);
  }
  if (st == JITK_OK && !found) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_puts(&b,
                "relocatable device code (-dc, -rdc=true) must be linked with the CUDA device "
                "runtime, libcudadevrt.a, which was not found; looked in:");
    for (size_t i = 0; i < l.n; i++) jk_buf_printf(&b, " %s", l.v[i]);
    if (l.n == 0) jk_buf_puts(&b, " (no folder to look in)");
    jk_buf_puts(&b,
                ". Install the CUDA toolkit (its lib64 has it), or NVIDIA's wheel "
                "nvidia-cuda-runtime beside nvidia-cuda-nvrtc, or set CUDA_HOME to a toolkit "
                "that has it");
    char *msg = jk_buf_take(&b);
    st = jk_fail(e, JITK_ERR_UNSUPPORTED, "%s", msg ? msg : "libcudadevrt.a was not found");
    jk_free(e, msg);
  }
  strlist_free(&l);
  return st;
}

/* --- nvJitLink --- */

/* Resolves one entry point: the plain name, else the versioned one the
 * header's inline wrappers call (__nvJitLinkCreate_13_0). */
static void *jitlink_sym(void *h, const char *name, int major) {
  void *p = dlsym(h, name);
  if (p == NULL) {
    char versioned[96];
    snprintf(versioned, sizeof versioned, "__%s_%d_0", name, major);
    p = dlsym(h, versioned);
  }
  return p;
}

static bool jitlink_resolve(jk_jitlink *j, void *h, int major) {
#define JK_JITLINK_RESOLVE_(field, name)             \
  *(void **)&j->field = jitlink_sym(h, name, major); \
  if (j->field == NULL) return false;
  JK_JITLINK_RESOLVE_(create, "nvJitLinkCreate")
  JK_JITLINK_RESOLVE_(destroy, "nvJitLinkDestroy")
  JK_JITLINK_RESOLVE_(add_data, "nvJitLinkAddData")
  JK_JITLINK_RESOLVE_(complete, "nvJitLinkComplete")
  JK_JITLINK_RESOLVE_(cubin_size, "nvJitLinkGetLinkedCubinSize")
  JK_JITLINK_RESOLVE_(cubin, "nvJitLinkGetLinkedCubin")
  JK_JITLINK_RESOLVE_(error_log_size, "nvJitLinkGetErrorLogSize")
  JK_JITLINK_RESOLVE_(error_log, "nvJitLinkGetErrorLog")
  JK_JITLINK_RESOLVE_(info_log_size, "nvJitLinkGetInfoLogSize")
  JK_JITLINK_RESOLVE_(info_log, "nvJitLinkGetInfoLog")
#undef JK_JITLINK_RESOLVE_
  /* nvJitLinkVersion came with CUDA 12.3; without it the version is the
   * library's major. */
  *(void **)&j->version = dlsym(h, "nvJitLinkVersion");
  return true;
}

/* Opens nvJitLink from the first place that has it, then from the
 * loader's own search path; records where it looked. Under link_lock. */
static void jitlink_open(jitk_engine *e) {
  jk_nvrtc *nv = &e->nvrtc;
  jk_jitlink *j = &nv->jitlink;
  char lib[64];
  snprintf(lib, sizeof lib, "libnvJitLink.so.%d", nv->major);
  strlist l;
  search_dirs(e, "nvjitlink", &l);
  jk_buf why;
  jk_buf_init(&why, e);
  jk_buf_printf(&why, "%s was not found; looked in:", lib);
  void *h = NULL;
  for (size_t i = 0; i <= l.n && h == NULL; i++) {
    char path[4096];
    if (i < l.n) {
      if (snprintf(path, sizeof path, "%s/%s", l.v[i], lib) >= (int)sizeof path) continue;
      struct stat sb;
      if (stat(path, &sb) != 0) {
        jk_buf_printf(&why, " %s", l.v[i]);
        continue;
      }
    } else {
      snprintf(path, sizeof path, "%s", lib); /* LD_LIBRARY_PATH, the loader's cache */
    }
    /* RTLD_LOCAL, as for the driver: another copy elsewhere in the
     * process does not clash with this one. */
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      const char *err = dlerror();
      if (i < l.n)
        jk_buf_printf(&why, " %s (%s)", l.v[i], err ? err : "cannot be loaded");
      else
        jk_buf_puts(&why, " and the loader's search path");
      continue;
    }
    memset(j, 0, sizeof *j);
    if (!jitlink_resolve(j, h, nv->major)) {
      jk_buf_printf(&why, " %s (it lacks nvJitLink's entry points)", path);
      dlclose(h);
      h = NULL;
      continue;
    }
    Dl_info info;
    const char *where =
        dladdr(*(void **)&j->create, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : path;
    j->path = jk_strdup(e, where);
    unsigned major = (unsigned)nv->major, minor = 0;
    if (j->version != NULL && j->version(&major, &minor) != JK_NVJITLINK_SUCCESS) {
      major = (unsigned)nv->major;
      minor = 0;
    }
    j->major = major;
    j->minor = minor;
    j->handle = h;
  }
  strlist_free(&l);
  if (h == NULL) {
    nv->jitlink_why = jk_buf_take(&why);
  } else {
    jk_buf_free(&why);
    jk_log(e, JITK_LOG_DEBUG, "nvJitLink %u.%u from %s", j->major, j->minor,
           j->path ? j->path : lib);
  }
}

jk_linker jk_link_probe(jitk_engine *e) {
  jk_nvrtc *nv = &e->nvrtc;
  pthread_mutex_lock(&nv->link_lock);
  if (!nv->link_probed) {
    if (!nv->no_jitlink) jitlink_open(e);
    nv->link_probed = true;
  }
  bool have = nv->jitlink.handle != NULL;
  pthread_mutex_unlock(&nv->link_lock);
  /* PTX targets are for devices this NVRTC does not know; the driver
   * compiles their code for the device, and only it can link it. */
  if (!e->target.ptx && have) return JK_LINKER_NVJITLINK;
  if (e->has_device && jk_cu_has_linker(e)) return JK_LINKER_DRIVER;
  return JK_LINKER_NONE;
}

void jk_link_release(jitk_engine *e) {
  jk_nvrtc *nv = &e->nvrtc;
  /* nvJitLink stays loaded (its handle's reference is not given back):
   * its C++ runtime allocates at load time what an unload leaves behind
   * (LeakSanitizer counts 71 KiB per unload), and the next engine would
   * pay for loading its 100 MB again. The loader keeps one copy however
   * many engines open it, as it keeps the linked NVRTC. */
  jk_free(e, nv->jitlink.path);
  jk_free(e, nv->jitlink_why);
  memset(&nv->jitlink, 0, sizeof nv->jitlink);
  nv->jitlink_why = NULL;
  nv->link_probed = false;
}

/* A linker's log, trimmed of trailing blank space; "" when it has none. */
static char *jitlink_log(void *h, jitk_engine *e, bool error) {
  const jk_jitlink *j = &e->nvrtc.jitlink;
  size_t n = 0;
  int r = error ? j->error_log_size(h, &n) : j->info_log_size(h, &n);
  if (r != JK_NVJITLINK_SUCCESS || n == 0) return jk_strdup(e, "");
  char *log = jk_malloc(e, n + 1);
  if (log == NULL) return NULL;
  r = error ? j->error_log(h, log) : j->info_log(h, log);
  if (r != JK_NVJITLINK_SUCCESS) log[0] = '\0';
  log[n] = '\0';
  size_t len = strlen(log);
  while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == ' ')) log[--len] = '\0';
  return log;
}

/* The target the link produces: the engine's, with the arch-specific
 * suffix a generator asked for. */
static void link_arch(const jitk_engine *e, const jk_compile_input *in, char *out, size_t n) {
  snprintf(out, n, "%s%s", e->target.arch,
           in->arch_specific && !e->target.ptx && !e->target.specific ? "a" : "");
}

static jitk_status link_failed(jitk_engine *e, const jk_compile_input *in, const char *linker,
                               const char *devrt, const char *what, const char *log) {
  const char *pname = in->program_name ? in->program_name : "module.cu";
  return jk_fail(e, JITK_ERR_COMPILE,
                 "%s%s%s compiled, but linking it with the CUDA device runtime (%s) through %s "
                 "failed: %s%s%s",
                 in->what ? in->what : "", in->what ? "\n" : "", pname, devrt, linker, what,
                 log && *log ? ":\n" : "", log ? log : "");
}

/* nvJitLink, like NVRTC (nvrtc.c, own_cache_off), keeps what it links in
 * a cache of its own, in CUDA's compute cache (~/.nv/ComputeCache, or
 * wherever CUDA_CACHE_PATH points) when a driver can be loaded. On an H100
 * with nvJitLink 13.0 its key did follow -maxrregcount (PTX) and -ftz
 * (LTO), but that directory is outside what jitk checks of a cache before
 * it reads one (whose it is, who may write it), and jitk's own cache
 * keeps every link already, so a file written there by anyone who can
 * would be served and then stored as jitk's. Every link turns it off with
 * -no-cache, after the key was made: opts has room for it at opts[n]. An
 * nvJitLink that refuses it (one that predates the option) gets the same
 * options again without it, and the engine stops giving it; a refusal of
 * the caller's options is the second call's. */
static int jitlink_create(jitk_engine *e, void **h, const char **opts, uint32_t n) {
  const jk_jitlink *j = &e->nvrtc.jitlink;
  const bool off = !atomic_load(&e->nvrtc.jitlink_no_cache_refused);
  if (off) opts[n] = "-no-cache";
  int r = j->create(h, n + (off ? 1u : 0u), opts);
  if (r == JK_NVJITLINK_SUCCESS || !off) return r;
  if (*h != NULL) j->destroy(h);
  *h = NULL;
  r = j->create(h, n, opts);
  if (r == JK_NVJITLINK_SUCCESS) atomic_store(&e->nvrtc.jitlink_no_cache_refused, true);
  return r;
}

static jitk_status link_jitlink(jitk_engine *e, const jk_compile_input *in,
                                const jk_compile_output *out, const char *devrt_path,
                                const void *devrt, size_t devrt_size, void **image,
                                size_t *image_size) {
  const jk_jitlink *j = &e->nvrtc.jitlink;
  char target[40], opt[48];
  link_arch(e, in, target, sizeof target);
  snprintf(opt, sizeof opt, "-arch=%s", target);
  const char *opts[] = {opt, NULL};
  const char *pname = in->program_name ? in->program_name : "module.cu";
  void *h = NULL;
  int r = jitlink_create(e, &h, opts, 1);
  if (r != JK_NVJITLINK_SUCCESS)
    return jk_fail(e, JITK_ERR_NVRTC, "nvJitLinkCreate(%s) failed: %s (%d)", opt,
                   jitlink_result_name(r), r);
  jitk_status st = JITK_OK;
  const char *step = "nvJitLinkAddData";
  r = j->add_data(h, out->ptx ? JK_NVJITLINK_INPUT_PTX : JK_NVJITLINK_INPUT_CUBIN, out->image,
                  out->ptx ? out->image_size + 1 : out->image_size, pname);
  if (r == JK_NVJITLINK_SUCCESS)
    r = j->add_data(h, JK_NVJITLINK_INPUT_LIBRARY, devrt, devrt_size, "libcudadevrt.a");
  if (r == JK_NVJITLINK_SUCCESS) {
    step = "nvJitLinkComplete";
    r = j->complete(h);
  }
  if (r != JK_NVJITLINK_SUCCESS) {
    char *log = jitlink_log(h, e, true);
    char what[128];
    snprintf(what, sizeof what, "%s gave %s", step, jitlink_result_name(r));
    st = link_failed(e, in, "nvJitLink", devrt_path, what, log);
    jk_free(e, log);
  }
  size_t size = 0;
  if (st == JITK_OK) {
    r = j->cubin_size(h, &size);
    if (r != JK_NVJITLINK_SUCCESS || size == 0)
      st = jk_fail(e, JITK_ERR_NVRTC, "nvJitLink produced no cubin: %s", jitlink_result_name(r));
  }
  unsigned char *cubin = NULL;
  if (st == JITK_OK && (cubin = jk_malloc(e, size + 1)) == NULL)
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory for the linked cubin");
  if (st == JITK_OK && (r = j->cubin(h, cubin)) != JK_NVJITLINK_SUCCESS)
    st = jk_fail(e, JITK_ERR_NVRTC, "reading nvJitLink's cubin failed: %s", jitlink_result_name(r));
  if (st == JITK_OK && jk_log_enabled(e, JITK_LOG_DEBUG)) {
    char *info = jitlink_log(h, e, false);
    if (info != NULL && *info) jk_log(e, JITK_LOG_DEBUG, "nvJitLink: %s", info);
    jk_free(e, info);
  }
  j->destroy(&h);
  if (st != JITK_OK) {
    jk_free(e, cubin);
    return st;
  }
  cubin[size] = '\0';
  *image = cubin;
  *image_size = size;
  return JITK_OK;
}

/* CU_JIT_TARGET for a cubin target: the engine's sm, its accelerated
 * ("a") or family ("f") variant included. */
static unsigned jit_target(const jitk_engine *e, const jk_compile_input *in) {
  unsigned v = (unsigned)(e->target.major * 10 + e->target.minor);
  size_t n = strlen(e->target.arch);
  char last = (char)(n ? e->target.arch[n - 1] : '\0');
#ifdef CU_COMPUTE_FAMILY_TARGET_BASE
  if (e->target.specific && last == 'f') return v + CU_COMPUTE_FAMILY_TARGET_BASE;
#endif
#ifdef CU_COMPUTE_ACCELERATED_TARGET_BASE
  if ((e->target.specific && last == 'a') || in->arch_specific)
    return v + CU_COMPUTE_ACCELERATED_TARGET_BASE;
#endif
  (void)last;
  (void)in;
  return v;
}

static jitk_status link_driver(jitk_engine *e, const jk_compile_input *in,
                               const jk_compile_output *out, const char *devrt_path,
                               const void *devrt, size_t devrt_size, void **image,
                               size_t *image_size) {
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  char errlog[8192];
  errlog[0] = '\0';
  const char *pname = in->program_name ? in->program_name : "module.cu";
  /* A cubin target keeps its own sm (an sm_86 program on an sm_89 device
   * links for sm_86); PTX is compiled for the device the context is on.
   * A driver that takes archives only as files gets the file; the
   * dependency record checks after the compile that it still holds what
   * was hashed, and an entry whose file changed is not stored. */
  jk_cu_link_piece pieces[] = {{out->ptx ? CU_JIT_INPUT_PTX : CU_JIT_INPUT_CUBIN, out->image,
                                out->ptx ? out->image_size + 1 : out->image_size, pname},
                               {CU_JIT_INPUT_LIBRARY, devrt, devrt_size, "libcudadevrt.a"}};
  void *cubin = NULL;
  size_t size = 0;
  const char *step = "cuLinkCreate";
  CUresult r = jk_cu_link(e, pieces, 2, devrt_path, e->target.ptx ? 0u : jit_target(e, in), errlog,
                          sizeof errlog, &cubin, &size, &step);
  jk_ctx_leave(e, saved);
  if (r != CUDA_SUCCESS) {
    char desc[256], what[320];
    jk_driver_describe(&e->drv, r, desc, sizeof desc);
    snprintf(what, sizeof what, "%s gave %s", step, desc);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return jk_fail(e, JITK_ERR_DEVICE_OUT_OF_MEMORY, "%s", what);
    return link_failed(e, in, "the CUDA driver", devrt_path, what, errlog);
  }
  if (cubin == NULL)
    return size == 0 ? jk_fail(e, JITK_ERR_CUDA, "cuLinkComplete produced no cubin")
                     : jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory for the linked cubin");
  *image = cubin;
  *image_size = size;
  return JITK_OK;
}

static jitk_status no_linker(jitk_engine *e) {
  jk_nvrtc *nv = &e->nvrtc;
  if (e->target.ptx)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "relocatable device code (-dc, -rdc=true) for a PTX target (%s) is linked "
                   "with the CUDA device runtime by the driver, for the device it runs on, so it "
                   "needs an engine with a device; a compile-only engine can link it for a cubin "
                   "target (sm_XY) through nvJitLink",
                   e->target.arch);
  pthread_mutex_lock(&nv->link_lock);
  const char *why = nv->jitlink_why ? nv->jitlink_why : "nvJitLink is not used here";
  jitk_status st = jk_fail(
      e, JITK_ERR_UNSUPPORTED,
      "relocatable device code (-dc, -rdc=true) must be linked with the CUDA device runtime, "
      "which needs nvJitLink, or a GPU whose driver links it: %s%s. Install the CUDA toolkit's "
      "nvJitLink (libnvJitLink.so.%d, in the toolkit's lib64) or NVIDIA's wheel "
      "nvidia-nvjitlink beside nvidia-cuda-nvrtc, or set CUDA_HOME to a toolkit that has it",
      why, e->has_device ? "; the driver lacks cuLinkCreate" : "; this engine only compiles",
      nv->major);
  pthread_mutex_unlock(&nv->link_lock);
  return st;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

jitk_status jk_link_devrt(jitk_engine *e, const jk_compile_input *in, jk_compile_output *out) {
  jk_linker linker = jk_link_probe(e);
  if (linker == JK_LINKER_NONE) return no_linker(e);
  char *devrt_path = NULL;
  void *devrt = NULL;
  size_t devrt_size = 0;
  jitk_status st = jk_find_devrt(e, &out->deps, &devrt_path, &devrt, &devrt_size);
  if (st != JITK_OK) return st;
  void *image = NULL;
  size_t size = 0;
  double t0 = now_ms();
  if (linker == JK_LINKER_NVJITLINK)
    st = link_jitlink(e, in, out, devrt_path, devrt, devrt_size, &image, &size);
  else
    st = link_driver(e, in, out, devrt_path, devrt, devrt_size, &image, &size);
  double ms = now_ms() - t0;
  if (st == JITK_OK) {
    jk_log(e, JITK_LOG_INFO, "linked %s with %s through %s in %.1f ms",
           in->program_name ? in->program_name : "module.cu", devrt_path,
           linker == JK_LINKER_NVJITLINK ? "nvJitLink" : "the CUDA driver", ms);
    jk_free(e, out->image);
    out->image = image;
    out->image_size = size;
    out->ptx = false;
    out->milliseconds += ms;
  }
  jk_free(e, devrt);
  jk_free(e, devrt_path);
  return st;
}

/* --- Programs of several pieces --- */

static const char *piece_kind_name(jitk_link_kind k) {
  static const char *const names[] = {"CUDA source", "PTX",    "cubin",   "fatbin",
                                      "LTO-IR",      "object", "library", "device runtime"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "unknown";
}

jitk_status jk_link_piece_input(jitk_engine *e, const jk_compile_input *cuda, bool lto,
                                jk_compile_input *out, const char ***storage) {
  size_t n = cuda->num_options;
  const char **opts = jk_calloc(e, n + 1, sizeof *opts);
  if (opts == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < n; i++) opts[i] = cuda->options[i];
  /* Last, so that it wins over a caller's -rdc=false: a piece that is not
   * relocatable cannot call into the others. "-dlto" comes from the
   * output (jk_nvrtc_final_options), since a caller's own is refused. */
  opts[n++] = "-rdc=true";
  *out = *cuda;
  out->options = opts;
  out->num_options = n;
  out->output = lto ? JK_OUTPUT_LTO_IR : JK_OUTPUT_RELOCATABLE;
  out->link = NULL;
  *storage = opts;
  return JITK_OK;
}

/* The pieces in words, for messages: "a.cu (CUDA source), b (LTO-IR)". */
static void describe_pieces(jk_buf *b, const jk_link_input *li) {
  for (size_t i = 0; i < li->num_pieces; i++)
    jk_buf_printf(b, "%s%s (%s)", i ? ", " : "", li->pieces[i].name,
                  piece_kind_name(li->pieces[i].kind));
}

static jitk_status link_program_failed(jitk_engine *e, const char *pname, const jk_link_input *li,
                                       const char *what, const char *log) {
  jk_buf b;
  jk_buf_init(&b, e);
  describe_pieces(&b, li);
  char *pieces = jk_buf_take(&b);
  jitk_status st =
      jk_fail(e, JITK_ERR_COMPILE, "linking %s (%s) through nvJitLink failed: %s%s%s", pname,
              pieces ? pieces : "", what, log && *log ? ":\n" : "", log ? log : "");
  jk_free(e, pieces);
  return st;
}

/* Compiles the CUDA pieces into cubins or LTO-IR (images[i], sizes[i]),
 * gathering their logs and lowered names into `out`. */
static jitk_status compile_pieces(jitk_engine *e, const jk_compile_input *in,
                                  jk_compile_output *out, void **images, size_t *sizes,
                                  jk_buf *log) {
  const jk_link_input *li = in->link;
  const char *pname = in->program_name ? in->program_name : "linked.cu";
  size_t at = 0;
  for (size_t i = 0; i < li->num_pieces; i++) {
    const jk_link_piece *p = &li->pieces[i];
    if (p->kind != JITK_LINK_CUDA) continue;
    jk_compile_input ci;
    const char **storage = NULL;
    jitk_status st = jk_link_piece_input(e, p->cuda, li->lto, &ci, &storage);
    if (st != JITK_OK) return st;
    char what[512];
    snprintf(what, sizeof what, "piece %zu (%s) of the linked program %s:", i, p->name, pname);
    ci.what = what;
    jk_compile_output co;
    st = jk_nvrtc_compile(e, &ci, &co);
    jk_free(e, storage);
    if (st != JITK_OK) return st;
    images[i] = co.image;
    sizes[i] = co.image_size;
    co.image = NULL;
    out->milliseconds += co.milliseconds;
    if (co.log != NULL && *co.log) jk_buf_printf(log, "%s:\n%s\n", p->name, co.log);
    for (size_t j = 0; j < co.num_lowered && at < out->num_lowered; j++) {
      out->lowered[at++] = co.lowered[j];
      co.lowered[j] = NULL;
    }
    jk_compile_output_free(e, &co);
  }
  return JITK_OK;
}

static jitk_status no_jitlink_for_link(jitk_engine *e) {
  jk_nvrtc *nv = &e->nvrtc;
  pthread_mutex_lock(&nv->link_lock);
  const char *why = nv->jitlink_why ? nv->jitlink_why : "nvJitLink is not used here";
  jitk_status st = jk_fail(e, JITK_ERR_UNSUPPORTED,
                           "jitk_module_link links through nvJitLink, which could not be loaded: "
                           "%s. Install the CUDA toolkit's nvJitLink (libnvJitLink.so.%d, in the "
                           "toolkit's lib64) or NVIDIA's wheel nvidia-nvjitlink beside "
                           "nvidia-cuda-nvrtc, or set CUDA_HOME to a toolkit that has it",
                           why, nv->major);
  pthread_mutex_unlock(&nv->link_lock);
  return st;
}

/* Hands every piece to nvJitLink and reads the linked cubin back. */
static jitk_status jitlink_pieces(jitk_engine *e, const char *pname, const jk_link_input *li,
                                  void *const *images, const size_t *sizes, const void *devrt,
                                  size_t devrt_size, jk_compile_output *out, jk_buf *log) {
  const jk_jitlink *j = &e->nvrtc.jitlink;
  char arch[48];
  snprintf(arch, sizeof arch, "-arch=%s", e->target.arch);
  size_t nopts = 0;
  const char **opts = jk_calloc(e, li->num_options + 4, sizeof *opts); /* and jitlink_create's */
  if (opts == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  opts[nopts++] = arch;
  if (li->lto) opts[nopts++] = "-lto";
  /* ptxas's report of every kernel it compiles at the link (all of them
   * with LTO, those of PTX pieces without), for jitk_module_resources. */
  opts[nopts++] = "-Xptxas=-v";
  for (size_t i = 0; i < li->num_options; i++) opts[nopts++] = li->options[i];
  void *h = NULL;
  int r = jitlink_create(e, &h, opts, (uint32_t)nopts);
  jitk_status st = JITK_OK;
  if (r != JK_NVJITLINK_SUCCESS) {
    /* A bad option is the caller's; the log says which. */
    char *elog = h != NULL ? jitlink_log(h, e, true) : NULL;
    jk_buf b;
    jk_buf_init(&b, e);
    for (size_t i = 0; i < nopts; i++) jk_buf_printf(&b, "%s%s", i ? " " : "", opts[i]);
    char *all = jk_buf_take(&b);
    st = jk_fail(e, r == 1 ? JITK_ERR_INVALID_ARGUMENT : JITK_ERR_NVRTC,
                 "nvJitLinkCreate failed for %s: %s, with the options %s%s%s", pname,
                 jitlink_result_name(r), all ? all : "", elog && *elog ? ":\n" : "",
                 elog ? elog : "");
    jk_free(e, all);
    jk_free(e, elog);
    if (h != NULL) j->destroy(&h);
    jk_free(e, opts);
    return st;
  }
  jk_free(e, opts);
  for (size_t i = 0; i < li->num_pieces && st == JITK_OK; i++) {
    const jk_link_piece *p = &li->pieces[i];
    int kind = 0;
    const void *data = p->data;
    size_t size = p->size;
    switch (p->kind) {
      case JITK_LINK_CUDA:
        kind = li->lto ? JK_NVJITLINK_INPUT_LTOIR : JK_NVJITLINK_INPUT_CUBIN;
        data = images[i];
        size = sizes[i];
        break;
      case JITK_LINK_PTX: kind = JK_NVJITLINK_INPUT_PTX; break;
      case JITK_LINK_CUBIN: kind = JK_NVJITLINK_INPUT_CUBIN; break;
      case JITK_LINK_FATBIN: kind = JK_NVJITLINK_INPUT_FATBIN; break;
      case JITK_LINK_LTO_IR: kind = JK_NVJITLINK_INPUT_LTOIR; break;
      case JITK_LINK_OBJECT: kind = JK_NVJITLINK_INPUT_OBJECT; break;
      case JITK_LINK_LIBRARY: kind = JK_NVJITLINK_INPUT_LIBRARY; break;
      case JITK_LINK_DEVICE_RUNTIME:
        kind = JK_NVJITLINK_INPUT_LIBRARY;
        data = devrt;
        size = devrt_size;
        break;
    }
    r = j->add_data(h, kind, data, size, p->name);
    if (r != JK_NVJITLINK_SUCCESS) {
      char *elog = jitlink_log(h, e, true);
      char what[320];
      snprintf(what, sizeof what, "nvJitLinkAddData of %s (%s) gave %s", p->name,
               piece_kind_name(p->kind), jitlink_result_name(r));
      st = link_program_failed(e, pname, li, what, elog);
      jk_free(e, elog);
    }
  }
  if (st == JITK_OK && (r = j->complete(h)) != JK_NVJITLINK_SUCCESS) {
    char *elog = jitlink_log(h, e, true);
    char what[160];
    snprintf(what, sizeof what, "nvJitLinkComplete gave %s", jitlink_result_name(r));
    st = link_program_failed(e, pname, li, what, elog);
    jk_free(e, elog);
  }
  size_t size = 0;
  if (st == JITK_OK && ((r = j->cubin_size(h, &size)) != JK_NVJITLINK_SUCCESS || size == 0))
    st = jk_fail(e, JITK_ERR_NVRTC, "nvJitLink produced no cubin for %s: %s", pname,
                 jitlink_result_name(r));
  unsigned char *cubin = NULL;
  if (st == JITK_OK && (cubin = jk_malloc(e, size + 1)) == NULL)
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory for the linked cubin");
  if (st == JITK_OK && (r = j->cubin(h, cubin)) != JK_NVJITLINK_SUCCESS)
    st = jk_fail(e, JITK_ERR_NVRTC, "reading nvJitLink's cubin failed: %s", jitlink_result_name(r));
  if (st == JITK_OK) {
    char *info = jitlink_log(h, e, false);
    if (info != NULL && *info) jk_buf_printf(log, "nvJitLink:\n%s\n", info);
    jk_free(e, info);
    cubin[size] = '\0';
    out->image = cubin;
    out->image_size = size;
    cubin = NULL;
  }
  jk_free(e, cubin);
  j->destroy(&h);
  return st;
}

jitk_status jk_link_program(jitk_engine *e, const jk_compile_input *in, jk_compile_output *out) {
  const jk_link_input *li = in->link;
  const char *pname = in->program_name ? in->program_name : "linked.cu";
  memset(out, 0, sizeof *out);
  if (e->target.ptx)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "jitk_module_link: the engine's target is PTX (%s, for a device newer than "
                   "this NVRTC), and nvJitLink links only for a cubin target (sm_XY); use an "
                   "NVRTC that knows the device",
                   e->target.arch);
  if (jk_link_probe(e) != JK_LINKER_NVJITLINK) return no_jitlink_for_link(e);
  size_t n = li->num_pieces;
  void **images = jk_calloc(e, n, sizeof *images);
  size_t *sizes = jk_calloc(e, n, sizeof *sizes);
  if (in->num_name_expressions > 0) {
    out->lowered = jk_calloc(e, in->num_name_expressions, sizeof *out->lowered);
    out->num_lowered = in->num_name_expressions;
  }
  jk_buf log;
  jk_buf_init(&log, e);
  jitk_status st = JITK_OK;
  if (images == NULL || sizes == NULL || (in->num_name_expressions > 0 && out->lowered == NULL))
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  if (st == JITK_OK) st = compile_pieces(e, in, out, images, sizes, &log);
  char *devrt_path = NULL;
  void *devrt = NULL;
  size_t devrt_size = 0;
  for (size_t i = 0; i < n && st == JITK_OK && devrt == NULL; i++)
    if (li->pieces[i].kind == JITK_LINK_DEVICE_RUNTIME)
      st = jk_find_devrt(e, &out->deps, &devrt_path, &devrt, &devrt_size);
  double t0 = now_ms();
  if (st == JITK_OK) st = jitlink_pieces(e, pname, li, images, sizes, devrt, devrt_size, out, &log);
  double ms = now_ms() - t0;
  for (size_t i = 0; images != NULL && i < n; i++) jk_free(e, images[i]);
  jk_free(e, images);
  jk_free(e, sizes);
  jk_free(e, devrt);
  jk_free(e, devrt_path);
  if (st == JITK_OK) {
    out->log = jk_buf_take(&log);
    if (out->log == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  } else {
    jk_buf_free(&log);
  }
  if (st != JITK_OK) {
    jk_compile_output_free(e, out);
    return st;
  }
  out->ptx = false;
  out->milliseconds += ms;
  jk_log(e, JITK_LOG_INFO, "linked %s from %zu pieces through nvJitLink%s in %.1f ms", pname, n,
         li->lto ? " with link-time optimization" : "", ms);
  return JITK_OK;
}
