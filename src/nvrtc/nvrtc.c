#include "nvrtc/nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"

jitk_status jk_nvrtc_init(jitk_engine *e, jk_nvrtc *nv, const char *include_override) {
  memset(nv, 0, sizeof *nv);
  pthread_mutex_init(&nv->scan_lock, NULL);
  pthread_mutex_init(&nv->link_lock, NULL);
  pthread_mutex_init(&nv->pch.lock, NULL);
  atomic_init(&nv->no_cache_refused, false);
  atomic_init(&nv->jitlink_no_cache_refused, false);
#define JK_NVRTC_SET_(name) nv->name = name;
  JK_NVRTC_FUNCS(JK_NVRTC_SET_)
#undef JK_NVRTC_SET_
  nvrtcResult r = nv->nvrtcVersion(&nv->major, &nv->minor);
  if (r != NVRTC_SUCCESS)
    return jk_fail(e, JITK_ERR_NVRTC, "nvrtcVersion failed: %s", nv->nvrtcGetErrorString(r));
  jk_pch_resolve(nv);
  int n = 0;
  r = nv->nvrtcGetNumSupportedArchs(&n);
  if (r != NVRTC_SUCCESS || n <= 0 || n > JK_MAX_ARCHS)
    return jk_fail(e, JITK_ERR_NVRTC, "nvrtcGetNumSupportedArchs failed or gave %d", n);
  r = nv->nvrtcGetSupportedArchs(nv->archs);
  if (r != NVRTC_SUCCESS)
    return jk_fail(e, JITK_ERR_NVRTC, "nvrtcGetSupportedArchs failed: %s",
                   nv->nvrtcGetErrorString(r));
  nv->num_archs = n;

  nv->include_dir = jk_find_cuda_include(e, include_override);
  if (nv->include_dir != NULL) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "%s/cccl/cuda/std/version", nv->include_dir);
    char *probe = jk_buf_take(&b);
    if (probe == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    FILE *f = fopen(probe, "r");
    jk_free(e, probe);
    if (f != NULL) {
      fclose(f);
      jk_buf_init(&b, e);
      jk_buf_printf(&b, "%s/cccl", nv->include_dir);
      nv->cccl_dir = jk_buf_take(&b);
      if (nv->cccl_dir == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    }
  }
  return JITK_OK;
}

void jk_nvrtc_destroy(jitk_engine *e, jk_nvrtc *nv) {
  jk_free(e, nv->include_dir);
  jk_free(e, nv->cccl_dir);
  nv->include_dir = nv->cccl_dir = NULL;
  jk_deps_memo_free(e, nv->scan_memo);
  nv->scan_memo = NULL;
  pthread_mutex_destroy(&nv->scan_lock);
  jk_link_release(e);
  pthread_mutex_destroy(&nv->link_lock);
  jk_pch_destroy(e, nv);
}

static bool nvrtc_supports(const jk_nvrtc *nv, int sm) {
  for (int i = 0; i < nv->num_archs; i++)
    if (nv->archs[i] == sm) return true;
  return false;
}

static void list_archs(const jk_nvrtc *nv, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < nv->num_archs && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, "%s%d", i ? ", " : "", nv->archs[i]);
}

jitk_status jk_target_parse(jitk_engine *e, const char *arch, jk_target *t) {
  if (arch == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "arch is NULL");
  jk_target tmp;
  memset(&tmp, 0, sizeof tmp);
  const char *digits;
  if (strncmp(arch, "sm_", 3) == 0) {
    digits = arch + 3;
  } else if (strncmp(arch, "compute_", 8) == 0) {
    digits = arch + 8;
    tmp.ptx = true;
  } else {
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "arch \"%s\" is not of the form sm_XY, sm_XYa or "
                   "compute_XY",
                   arch);
  }
  int value = 0, nd = 0;
  while (digits[nd] >= '0' && digits[nd] <= '9' && nd < 4) {
    value = value * 10 + (digits[nd] - '0');
    nd++;
  }
  const char *rest = digits + nd;
  if (nd < 2 || (*rest != '\0' && strcmp(rest, "a") != 0 && strcmp(rest, "f") != 0))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "arch \"%s\" is not of the form sm_XY, sm_XYa or "
                   "compute_XY",
                   arch);
  tmp.specific = *rest != '\0';
  tmp.major = value / 10;
  tmp.minor = value % 10;
  if (!nvrtc_supports(&e->nvrtc, value)) {
    char list[256];
    list_archs(&e->nvrtc, list, sizeof list);
    return jk_fail(e, JITK_ERR_UNSUPPORTED, "NVRTC %d.%d cannot compile for %s; it supports %s",
                   e->nvrtc.major, e->nvrtc.minor, arch, list);
  }
  snprintf(tmp.arch, sizeof tmp.arch, "%s", arch);
  *t = tmp;
  return JITK_OK;
}

jitk_status jk_target_for_device(jitk_engine *e, int major, int minor, jk_target *t) {
  int cc = major * 10 + minor;
  const jk_nvrtc *nv = &e->nvrtc;
  memset(t, 0, sizeof *t);
  if (nvrtc_supports(nv, cc)) {
    snprintf(t->arch, sizeof t->arch, "sm_%d", cc);
    t->major = major;
    t->minor = minor;
    return JITK_OK;
  }
  /* The device is newer than this NVRTC (or an odd minor): PTX for the
   * newest older target, which the driver compiles for the device. */
  int best = -1;
  for (int i = 0; i < nv->num_archs; i++)
    if (nv->archs[i] <= cc && nv->archs[i] > best) best = nv->archs[i];
  if (best < 0)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "the device (compute capability %d.%d) is older than "
                   "anything NVRTC %d.%d can target (oldest: sm_%d)",
                   major, minor, nv->major, nv->minor, nv->archs[0]);
  snprintf(t->arch, sizeof t->arch, "compute_%d", best);
  t->major = best / 10;
  t->minor = best % 10;
  t->ptx = true;
  jk_log(e, JITK_LOG_INFO,
         "NVRTC %d.%d has no sm_%d target; compiling PTX for %s, which the "
         "driver compiles for the device",
         nv->major, nv->minor, cc, t->arch);
  return JITK_OK;
}

const char *jk_option_trim(const char *option, size_t *len) {
  while (*option == ' ' || (*option >= '\t' && *option <= '\r')) option++;
  size_t n = strlen(option);
  while (n > 0 && (option[n - 1] == ' ' || (option[n - 1] >= '\t' && option[n - 1] <= '\r'))) n--;
  *len = n;
  return option;
}

static bool has_prefix_option(const char *const *options, size_t n, const char *const *prefixes) {
  for (size_t i = 0; i < n; i++) {
    size_t len;
    const char *o = jk_option_trim(options[i], &len);
    for (const char *const *p = prefixes; *p; p++)
      if (len >= strlen(*p) && strncmp(o, *p, strlen(*p)) == 0) return true;
  }
  return false;
}

unsigned jk_final_flags(const jk_compile_input *in) {
  return (in->arch_specific ? JK_FINAL_ARCH_SPECIFIC : 0u) |
         (in->output == JK_OUTPUT_LTO_IR ? JK_FINAL_LTO_IR : 0u);
}

jitk_status jk_nvrtc_final_options(jitk_engine *e, const char *const *options, size_t num_options,
                                   unsigned flags, char ***out, size_t *num_out) {
  bool arch_specific = (flags & JK_FINAL_ARCH_SPECIFIC) != 0;
  static const char *const std_opts[] = {"-std=", "--std=", NULL};
  static const char *const arch_opts[] = {"-arch", "--gpu-architecture", "--gpu-code", "-code",
                                          NULL};
  /* The engine owns the target: its modules must load on its device, and
   * one place deciding the arch keeps cache keys consistent. */
  for (size_t i = 0; i < num_options; i++)
    if (options[i] != NULL && has_prefix_option(&options[i], 1, arch_opts))
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "option \"%s\": the target is the engine's (%s); set "
                     "jitk_engine_config.arch to compile for another one",
                     options[i], e->target.arch);
  /* Options that make NVRTC produce something other than a cubin or PTX
   * (LTO IR for a later link, OptiX IR, nothing at all): NVRTC succeeds
   * and jitk would find no image to load or cache. */
  static const struct {
    const char *name, *what;
  } other_output[] = {{"-dlto", "LTO IR for a later link step"},
                      {"--dlink-time-opt", "LTO IR for a later link step"},
                      {"-dlink-time-opt", "LTO IR for a later link step"},
                      {"--gen-opt-lto", "LTO IR for a later link step"},
                      {"-gen-opt-lto", "LTO IR for a later link step"},
                      {"--optix-ir", "OptiX IR"},
                      {"-optix-ir", "OptiX IR"},
                      {"--fdevice-syntax-only", "no code (a syntax check only)"},
                      {"-fdevice-syntax-only", "no code (a syntax check only)"}};
  for (size_t i = 0; i < num_options; i++) {
    if (options[i] == NULL) continue;
    size_t len;
    const char *o = jk_option_trim(options[i], &len);
    for (size_t k = 0; k < sizeof other_output / sizeof other_output[0]; k++) {
      size_t n = strlen(other_output[k].name);
      if (len >= n && strncmp(o, other_output[k].name, n) == 0 && (len == n || o[n] == '='))
        return jk_fail(e, JITK_ERR_UNSUPPORTED,
                       "option \"%s\" is not supported: it makes NVRTC produce %s, where jitk "
                       "needs a %s to load and cache",
                       options[i], other_output[k].what, e->target.ptx ? "PTX text" : "cubin");
    }
  }
  size_t cap = num_options + 6;
  char **v = jk_calloc(e, cap, sizeof *v);
  if (v == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  size_t n = 0;
  bool oom = false;
  for (size_t i = 0; i < num_options; i++) {
    if (options[i] == NULL) {
      jk_options_free(e, v, n);
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "option %zu is NULL", i);
    }
    /* As NVRTC reads it: the key then holds the same text for the same
     * compile, and the dependency scan reads what NVRTC reads. */
    size_t len;
    const char *o = jk_option_trim(options[i], &len);
    if ((v[n++] = jk_strndup(e, o, len)) == NULL) oom = true;
  }
  jk_buf b;
  if (!has_prefix_option(options, num_options, std_opts))
    if ((v[n++] = jk_strdup(e, "-std=c++17")) == NULL) oom = true;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "--gpu-architecture=%s%s", e->target.arch,
                arch_specific && !e->target.ptx && !e->target.specific ? "a" : "");
  if ((v[n++] = jk_buf_take(&b)) == NULL) oom = true;
  /* ptxas's report costs nothing and gives registers, spills and shared
   * memory per kernel even without a GPU. It only exists for cubins. */
  if (!e->target.ptx && !(flags & JK_FINAL_LTO_IR))
    if ((v[n++] = jk_strdup(e, "--ptxas-options=-v")) == NULL) oom = true;
  /* LTO-IR for a piece of a linked program: ptxas runs at the link. */
  if (flags & JK_FINAL_LTO_IR)
    if ((v[n++] = jk_strdup(e, "-dlto")) == NULL) oom = true;
  if (e->nvrtc.include_dir != NULL) {
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "-I%s", e->nvrtc.include_dir);
    if ((v[n++] = jk_buf_take(&b)) == NULL) oom = true;
  }
  if (e->nvrtc.cccl_dir != NULL) {
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "-I%s", e->nvrtc.cccl_dir);
    if ((v[n++] = jk_buf_take(&b)) == NULL) oom = true;
  }
  if (oom) {
    jk_options_free(e, v, n);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory building options");
  }
  *out = v;
  *num_out = n;
  return JITK_OK;
}

void jk_options_free(jitk_engine *e, char **options, size_t num) {
  if (options == NULL) return;
  for (size_t i = 0; i < num; i++) jk_free(e, options[i]);
  jk_free(e, options);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static char *program_log(jitk_engine *e, nvrtcProgram prog) {
  const jk_nvrtc *nv = &e->nvrtc;
  size_t size = 0;
  if (nv->nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0)
    return jk_strdup(e, "");
  char *log = jk_malloc(e, size + 1);
  if (log == NULL) return NULL;
  if (nv->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) log[0] = '\0';
  log[size] = '\0';
  /* NVRTC ends its log with a newline and a NUL; trim trailing space so
   * messages built around it stay tidy. */
  size_t len = strlen(log);
  while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == ' ')) log[--len] = '\0';
  return log;
}

static jitk_status compile_failed(jitk_engine *e, const jk_compile_input *in, const char *log,
                                  char **opts, size_t nopts) {
  jk_buf b;
  jk_buf_init(&b, e);
  char *rewritten = in->rewrite_log && log ? jk_rewrite_log(e, log) : NULL;
  if (rewritten != NULL) log = rewritten;
  if (in->what != NULL) jk_buf_printf(&b, "%s\n", in->what);
  jk_buf_printf(&b, "%s failed to compile for %s:\n%s\noptions:",
                in->program_name ? in->program_name : "module.cu", e->target.arch,
                log && *log ? log : "(NVRTC gave no log)");
  for (size_t i = 0; i < nopts; i++) jk_buf_printf(&b, " %s", opts[i]);
  if (in->rewrite_log)
    jk_buf_puts(&b,
                "\n(the generated source: JITK_DUMP_SOURCE=1, or the kernel's _source "
                "call after the failure)");
  jk_free(e, rewritten);
  char *msg = jk_buf_take(&b);
  jitk_status st = jk_fail(e, JITK_ERR_COMPILE, "%s",
                           msg ? msg
                               : "compilation failed (and out of memory "
                                 "while describing why)");
  jk_free(e, msg);
  return st;
}

/* Creates the program, adds its name expressions and compiles it with
 * `opts`: *r is NVRTC's answer and *log its log (NULL when out of memory).
 * Fails only when the program cannot be made as asked. */
static jitk_status run_nvrtc(jitk_engine *e, const jk_compile_input *in, const char *pname,
                             size_t nh, const char **hsrc, const char **hname,
                             const char *const *opts, size_t nopts, nvrtcProgram *prog,
                             nvrtcResult *r, char **log, double *ms) {
  const jk_nvrtc *nv = &e->nvrtc;
  *prog = NULL;
  *log = NULL;
  nvrtcResult c = nv->nvrtcCreateProgram(prog, in->source, pname, (int)nh, hsrc, hname);
  if (c != NVRTC_SUCCESS) {
    *prog = NULL;
    return jk_fail(e, c == NVRTC_ERROR_OUT_OF_MEMORY ? JITK_ERR_OUT_OF_MEMORY : JITK_ERR_NVRTC,
                   "nvrtcCreateProgram failed: %s", nv->nvrtcGetErrorString(c));
  }
  for (size_t i = 0; i < in->num_name_expressions; i++) {
    if (in->name_expressions[i] == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "name expression %zu is NULL", i);
    c = nv->nvrtcAddNameExpression(*prog, in->name_expressions[i]);
    if (c != NVRTC_SUCCESS)
      return jk_fail(e, JITK_ERR_NVRTC, "nvrtcAddNameExpression(\"%s\") failed: %s",
                     in->name_expressions[i], nv->nvrtcGetErrorString(c));
  }
  double t0 = now_ms();
  *r = nv->nvrtcCompileProgram(*prog, (int)nopts, opts);
  *ms = now_ms() - t0;
  *log = program_log(e, *prog);
  return JITK_OK;
}

/* run_nvrtc once more, with other options, after a compile whose program
 * and log are given up; *ms adds the second compile's time to the first's. */
static jitk_status run_again(jitk_engine *e, const jk_compile_input *in, const char *pname,
                             size_t nh, const char **hsrc, const char **hname,
                             const char *const *opts, size_t nopts, nvrtcProgram *prog,
                             nvrtcResult *r, char **log, double *ms) {
  double first = *ms;
  e->nvrtc.nvrtcDestroyProgram(prog);
  jk_free(e, *log);
  jitk_status st = run_nvrtc(e, in, pname, nh, hsrc, hname, opts, nopts, prog, r, log, ms);
  *ms += first;
  return st;
}

/* NVRTC 12.9 and newer keep the programs they compile in a cache of their
 * own, in CUDA's compute cache (~/.nv/ComputeCache) wherever a driver can
 * be loaded, and its key leaves out -ftz: with NVRTC 13.0.88 on an H100, a
 * program compiled with -ftz=true and then with -ftz=false got the first
 * cubin both times, in the same process and in later ones, while the PTX
 * of the two compiles differed as it should. jitk's own cache keys every
 * option and covers what NVRTC's would save, so every compile turns
 * NVRTC's off with --no-cache. Like the precompiled headers' options, it
 * is added after the key and the dependency record were made; the key
 * holds a mark of it instead (src/cache/key.c). */
static bool own_cache_off(jitk_engine *e) {
  const jk_nvrtc *nv = &e->nvrtc;
  return nv->major * 100 + nv->minor >= 1209 && !atomic_load(&e->nvrtc.no_cache_refused);
}

static jitk_status nvrtc_compile(jitk_engine *e, const jk_compile_input *in,
                                 jk_compile_output *out) {
  const jk_nvrtc *nv = &e->nvrtc;
  memset(out, 0, sizeof *out);
  char **opts = NULL;
  size_t nopts = 0;
  jitk_status st =
      jk_nvrtc_final_options(e, in->options, in->num_options, jk_final_flags(in), &opts, &nopts);
  if (st != JITK_OK) return st;

  /* The caller's headers come first, so a caller can stand in for one of
   * jitk's own; then every embedded header under templates/. */
  size_t nh = in->num_headers + jk_num_embedded_headers;
  const char **hsrc = jk_calloc(e, nh ? nh : 1, sizeof *hsrc);
  const char **hname = jk_calloc(e, nh ? nh : 1, sizeof *hname);
  nvrtcProgram prog = NULL;
  char *log = NULL;
  jk_pch_use pch;
  memset(&pch, 0, sizeof pch);
  const char **with_pch = NULL;
  const char **plain = NULL;
  if (hsrc == NULL || hname == NULL) {
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < in->num_headers; i++) {
    if (in->headers[i].name == NULL || in->headers[i].source == NULL) {
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "header %zu has a NULL name or source", i);
      goto done;
    }
    /* NVRTC refuses two headers of one name with a bare INVALID_INPUT. */
    for (size_t j = 0; j < i; j++)
      if (strcmp(in->headers[j].name, in->headers[i].name) == 0) {
        st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "headers %zu and %zu are both named \"%s\"", j,
                     i, in->headers[i].name);
        goto done;
      }
    hname[i] = in->headers[i].name;
    hsrc[i] = in->headers[i].source;
  }
  /* An embedded header that a caller's header replaces is left out: NVRTC
   * takes no two headers of one name. The cache key stays right, since it
   * holds the caller's headers by content (src/cache/key.c). */
  nh = in->num_headers;
  for (size_t i = 0; i < jk_num_embedded_headers; i++) {
    bool replaced = false;
    for (size_t j = 0; j < in->num_headers && !replaced; j++)
      replaced = strcmp(in->headers[j].name, jk_embedded_headers[i].name) == 0;
    if (replaced) continue;
    hname[nh] = jk_embedded_headers[i].name;
    hsrc[nh++] = (const char *)jk_embedded_headers[i].data;
  }

  const char *pname = in->program_name ? in->program_name : "module.cu";
  /* What NVRTC is given: the final options, then --no-cache where NVRTC
   * keeps a cache of its own (see own_cache_off). */
  bool no_cache = own_cache_off(e);
  plain = jk_calloc(e, nopts + 1, sizeof *plain);
  if (plain == NULL) {
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < nopts; i++) plain[i] = opts[i];
  if (no_cache) plain[nopts] = "--no-cache";
  size_t nplain = nopts + (no_cache ? 1 : 0);
  /* Precompiled headers, when they apply, add options of their own after
   * those: the key and the dependency record never see them. */
  jk_pch_begin(e, in, opts, nopts, hname, hsrc, nh, &pch);
  if (pch.kind != 0) {
    with_pch = jk_calloc(e, nplain + pch.num_options, sizeof *with_pch);
    if (with_pch == NULL) {
      jk_pch_end(e, &pch, pname, NULL, NULL);
      jk_pch_use_free(e, &pch);
    } else {
      for (size_t i = 0; i < nplain; i++) with_pch[i] = plain[i];
      for (size_t i = 0; i < pch.num_options; i++) with_pch[nplain + i] = pch.options[i];
    }
  }
  nvrtcResult r;
  if (pch.kind != 0) {
    st = run_nvrtc(e, in, pname, nh, hsrc, hname, with_pch, nplain + pch.num_options, &prog, &r,
                   &log, &out->milliseconds);
    /* A program that could not be made was not compiled: no file either. */
    jk_pch_end(e, &pch, pname, st == JITK_OK ? prog : NULL, log);
    if (st != JITK_OK) goto done;
    if (jk_pch_retry_plain(&pch, r, log)) {
      /* NVRTC failed where a plain compile might not: the same program
       * again, without them, decides. */
      nvrtcResult first = r;
      st = run_again(e, in, pname, nh, hsrc, hname, plain, nplain, &prog, &r, &log,
                     &out->milliseconds);
      if (st != JITK_OK) goto done;
      if (r == NVRTC_SUCCESS) jk_pch_blame(e, first);
    }
  } else {
    st = run_nvrtc(e, in, pname, nh, hsrc, hname, plain, nplain, &prog, &r, &log,
                   &out->milliseconds);
    if (st != JITK_OK) goto done;
  }
  if (no_cache && r == NVRTC_ERROR_INVALID_OPTION && log != NULL && strstr(log, "no-cache")) {
    /* An NVRTC that refuses the option: the same program again without it
     * (and without precompiled headers, whose file this compile has already
     * been given its chance to make), and the engine's later compiles go
     * without it too. */
    atomic_store(&e->nvrtc.no_cache_refused, true);
    st =
        run_again(e, in, pname, nh, hsrc, hname, plain, nopts, &prog, &r, &log, &out->milliseconds);
    if (st != JITK_OK) goto done;
  }
  if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) {
    st = compile_failed(e, in, log, opts, nopts);
    goto done;
  }
  if (r != NVRTC_SUCCESS) {
    st = jk_fail(e, r == NVRTC_ERROR_OUT_OF_MEMORY ? JITK_ERR_OUT_OF_MEMORY : JITK_ERR_NVRTC,
                 "nvrtcCompileProgram failed: %s%s%s", nv->nvrtcGetErrorString(r),
                 log && *log ? "\n" : "", log ? log : "");
    goto done;
  }
  if (log == NULL) {
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading the log");
    goto done;
  }

  size_t size = 0;
  bool want_ptx = e->target.ptx, want_lto = in->output == JK_OUTPUT_LTO_IR;
  const char *made = want_lto ? "LTO-IR" : want_ptx ? "PTX" : "cubin";
  r = want_lto   ? nv->nvrtcGetLTOIRSize(prog, &size)
      : want_ptx ? nv->nvrtcGetPTXSize(prog, &size)
                 : nv->nvrtcGetCUBINSize(prog, &size);
  if (r != NVRTC_SUCCESS || size == 0) {
    st = jk_fail(e, JITK_ERR_NVRTC, "NVRTC produced no %s: %s", made, nv->nvrtcGetErrorString(r));
    goto done;
  }
  out->image = jk_malloc(e, size + 1);
  if (out->image == NULL) {
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory for the image");
    goto done;
  }
  r = want_lto   ? nv->nvrtcGetLTOIR(prog, out->image)
      : want_ptx ? nv->nvrtcGetPTX(prog, out->image)
                 : nv->nvrtcGetCUBIN(prog, out->image);
  if (r != NVRTC_SUCCESS) {
    st = jk_fail(e, JITK_ERR_NVRTC, "reading the compiled image failed: %s",
                 nv->nvrtcGetErrorString(r));
    goto done;
  }
  ((char *)out->image)[size] = '\0';
  /* NVRTC counts PTX's terminating NUL; the image is the text alone (the
   * NUL stays in the buffer for the driver). */
  if (want_ptx && !want_lto) size = strlen(out->image);
  out->image_size = size;
  out->ptx = want_ptx && !want_lto;

  if (in->num_name_expressions > 0) {
    out->lowered = jk_calloc(e, in->num_name_expressions, sizeof *out->lowered);
    if (out->lowered == NULL) {
      st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
      goto done;
    }
    out->num_lowered = in->num_name_expressions;
    for (size_t i = 0; i < in->num_name_expressions; i++) {
      const char *lowered = NULL;
      r = nv->nvrtcGetLoweredName(prog, in->name_expressions[i], &lowered);
      if (r != NVRTC_SUCCESS || lowered == NULL) {
        st = jk_fail(e, JITK_ERR_NOT_FOUND,
                     "name expression \"%s\" does not name a __global__ "
                     "function of %s: %s",
                     in->name_expressions[i], pname, nv->nvrtcGetErrorString(r));
        goto done;
      }
      if ((out->lowered[i] = jk_strdup(e, lowered)) == NULL) {
        st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
      }
    }
  }
  jk_log(e, JITK_LOG_INFO, "compiled %s for %s in %.1f ms (%zu bytes of %s)", pname, e->target.arch,
         out->milliseconds, size, made);
  /* Relocatable code cannot be loaded as it is: linked with the device
   * runtime here, so that what is cached and loaded is the linked image.
   * A piece of a linked program is linked with the others instead. */
  if (in->output == JK_OUTPUT_PROGRAM && jk_options_rdc(in->options, in->num_options)) {
    st = jk_link_devrt(e, in, out);
    if (st != JITK_OK) goto done;
  }
  out->log = log;
  log = NULL;

done:
  if (prog != NULL) nv->nvrtcDestroyProgram(&prog);
  jk_free(e, log);
  jk_pch_use_free(e, &pch);
  jk_free(e, with_pch);
  jk_free(e, plain);
  jk_free(e, hsrc);
  jk_free(e, hname);
  jk_options_free(e, opts, nopts);
  if (st != JITK_OK) jk_compile_output_free(e, out);
  return st;
}

void jk_compile_output_free(jitk_engine *e, jk_compile_output *out) {
  jk_deps_free(e, &out->deps);
  jk_free(e, out->image);
  jk_free(e, out->log);
  if (out->lowered != NULL)
    for (size_t i = 0; i < out->num_lowered; i++) jk_free(e, out->lowered[i]);
  jk_free(e, out->lowered);
  memset(out, 0, sizeof *out);
}

jitk_status jk_nvrtc_compile(jitk_engine *e, const jk_compile_input *in, jk_compile_output *out) {
  jk_trace_push(e, "jitk compile %s", in->program_name ? in->program_name : "program");
  jitk_status st = in->link != NULL ? jk_link_program(e, in, out) : nvrtc_compile(e, in, out);
  jk_trace_pop(e);
  return st;
}
