/*
 * The emulator's host side (emu.h): sources from the engine's log,
 * modules tied to them, each distinct source compiled once into a shared
 * library that runs launches (cuda_on_cpu.hpp).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "emu/emu.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "fakecuda/fakecuda.h"

#ifndef JT_EMU_CXX
#define JT_EMU_CXX "c++"
#endif
#ifndef JT_EMU_FLAGS
#define JT_EMU_FLAGS ""
#endif
#ifndef JT_EMU_INCLUDES
#define JT_EMU_INCLUDES ""
#endif
#ifndef JT_EMU_FAKE
#define JT_EMU_FAKE JITK_TEST_BINARY_DIR "/tests/fakecuda/libcuda.so.1"
#endif

/* Without the test's own sanitizers, UBSan's checks that need no
 * run-time library: a trap where a kernel would misalign, overflow or
 * index out of an array it declares. */
#define JT_EMU_TRAPS                                                                \
  "-fsanitize=alignment,bool,bounds,enum,integer-divide-by-zero,null,return,shift," \
  "signed-integer-overflow,vla-bound,pointer-overflow -fsanitize-undefined-trap-on-error"

typedef struct emu_source {
  struct emu_source *next;
  char *text;
  void *so; /* NULL until its first launch */
  int number;
  int coop; /* it synchronizes: its threads run as coroutines */
} emu_source;

struct jt_emu {
  void *fake;
  fakecuda_set_hooks_fn set_hooks;
  char dir[64];
  char *newest; /* the last source the engine logged */
  emu_source *sources;
  int count;
  int header; /* 0: not yet, 1: precompiled, -1: the precompile failed */
  uint64_t seed;
  unsigned long long runs;
  double build_s, run_s; /* time spent compiling and running */
  int failed;
  char error[4096];
  /* jt_emu_capture_stderr: the file descriptor 2 writes to, the one it
   * wrote to before, and how far the emulator has read the file. */
  int capture_fd, saved_fd;
  off_t capture_read;
};

/* Where the emulator's own messages go: the process's stderr as it was
 * before any capture. */
static int report_fd = 2;

static void absorb_stderr(jt_emu *em);

/* The source the module being loaded was compiled from: the newest one
 * logged (a generated kernel's source is logged at each compile or cache
 * lookup, just before its module loads). */
static void *emu_load(void *user, const void *image, size_t size) {
  (void)image, (void)size;
  jt_emu *em = user;
  if (em->capture_fd >= 0) absorb_stderr(em);
  if (em->newest == NULL) return NULL;
  char *text = em->newest;
  /* From stderr, a source serves the one module loaded next: a module of
   * the user's own source (a RawKernel's), which is not printed, must not
   * take the generated one before it. */
  if (em->capture_fd >= 0) em->newest = NULL;
  emu_source *s;
  for (s = em->sources; s != NULL; s = s->next)
    if (strcmp(s->text, text) == 0) break;
  if (s == NULL && (s = calloc(1, sizeof *s)) != NULL) {
    s->text = strdup(text);
    s->number = em->count++;
    s->next = em->sources;
    em->sources = s;
  }
  if (text != em->newest) free(text);
  return s;
}

/* --- sources from stderr (jt_emu_capture_stderr) --- */

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

/* How the library's log message of a source begins (JITK_DUMP_SOURCE):
 * a generated kernel's, a raw module's. */
static const char *const source_marks[] = {"generated source of ", "source of module "};

static bool is_source(const char *message) {
  for (int i = 0; i < 2; i++)
    if (strncmp(message, source_marks[i], strlen(source_marks[i])) == 0) return true;
  return false;
}

/* Where the first source the library printed to stderr at or after p
 * begins (a line "jitk: " and a source mark), or NULL. */
static const char *next_source(const char *text, const char *p) {
  const char *first = NULL;
  for (const char *m = strstr(p, "jitk: "); m != NULL && first == NULL; m = strstr(m + 1, "jitk: "))
    if ((m == text || m[-1] == '\n') && is_source(m + 6)) first = m;
  return first;
}

/* Reads what the process wrote to stderr since the last call. Each
 * source, printed by the library as "jitk: generated source of NAME:" or
 * "jitk: source of module NAME:" and the source's lines, becomes the
 * newest source; everything else goes on to the real stderr. A source
 * ends where a line of the library's log ("jitk: ...") or the text read
 * so far ends. */
static void absorb_stderr(jt_emu *em) {
  struct stat st;
  if (fstat(em->capture_fd, &st) != 0 || st.st_size <= em->capture_read) return;
  size_t n = (size_t)(st.st_size - em->capture_read);
  char *text = malloc(n + 1);
  if (text == NULL) return;
  ssize_t got = pread(em->capture_fd, text, n, em->capture_read);
  if (got <= 0) {
    free(text);
    return;
  }
  n = (size_t)got;
  text[n] = '\0';
  em->capture_read += got;
  const char *p = text, *end = text + n;
  while (p < end) {
    const char *m = next_source(text, p);
    if (m == NULL) {
      write_all(report_fd, p, (size_t)(end - p));
      break;
    }
    write_all(report_fd, p, (size_t)(m - p));
    const char *src = strchr(m, '\n');
    if (src == NULL) { /* a line cut short: not a source after all */
      write_all(report_fd, m, (size_t)(end - m));
      break;
    }
    src++;
    /* The source runs to the next line of the library's log. */
    const char *stop = src;
    while (stop < end && strncmp(stop, "jitk: ", 6) != 0) {
      const char *nl = memchr(stop, '\n', (size_t)(end - stop));
      stop = nl == NULL ? end : nl + 1;
    }
    size_t len = (size_t)(stop - src);
    if (len > 0 && src[len - 1] == '\n') len--; /* the newline the library adds */
    free(em->newest);
    em->newest = strndup(src, len);
    p = stop;
  }
  free(text);
}

int jt_emu_capture_stderr(jt_emu *em) {
  char path[128];
  snprintf(path, sizeof path, "%s/stderr.txt", em->dir);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  fflush(stderr);
  int saved = dup(2);
  if (saved < 0 || dup2(fd, 2) < 0) {
    if (saved >= 0) close(saved);
    close(fd);
    return -1;
  }
  em->capture_fd = fd;
  em->saved_fd = saved;
  em->capture_read = 0;
  report_fd = saved;
  /* A sanitizer's report ends the process before anything is passed on:
   * where a sanitizer's runtime is loaded, it writes to the real stderr. */
  void (*set_report_fd)(void *);
  *(void **)&set_report_fd = dlsym(RTLD_DEFAULT, "__sanitizer_set_report_fd");
  if (set_report_fd != NULL) set_report_fd((void *)(intptr_t)saved);
  return 0;
}

static void fail(jt_emu *em, const char *fmt, const char *a, const char *b) {
  em->failed = 1;
  snprintf(em->error, sizeof em->error, fmt, a, b);
}

/* The sanitizers kernels are compiled with: JT_EMU_SANITIZE from the
 * environment (for a process that preloads the sanitizers' runtimes, as
 * the sanitized Python tests do), else the build's, else UBSan's traps. */
static const char *kernel_flags(void) {
  const char *env = getenv("JT_EMU_SANITIZE");
  if (env != NULL && env[0] != '\0') return env;
  return JT_EMU_FLAGS[0] != '\0' ? JT_EMU_FLAGS : JT_EMU_TRAPS;
}

static int run_compiler(jt_emu *em, const char *args, const char *what, const char *log) {
  char cmd[3072];
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O0 -U_FORTIFY_SOURCE -fPIC -w %s %s %s > '%s' 2>&1",
           JT_EMU_CXX, JT_EMU_INCLUDES, kernel_flags(), args, log);
  if (system(cmd) == 0) return 0;
  char text[3000] = "";
  FILE *l = fopen(log, "r");
  if (l != NULL) {
    size_t n = fread(text, 1, sizeof text - 1, l);
    text[n] = '\0';
    fclose(l);
  }
  fail(em, "the host compiler refused %s:\n%s", what, text);
  return -1;
}

/* The emulator's header, precompiled once for every kernel of the run
 * (it costs the host compiler most of a kernel's compile); where that
 * fails the kernels read it as text. */
static void precompile_header(jt_emu *em) {
  char hpp[128], args[512], log[128];
  snprintf(hpp, sizeof hpp, "%s/emu.hpp", em->dir);
  snprintf(log, sizeof log, "%s/emu.log", em->dir);
  FILE *f = fopen(hpp, "w");
  em->header = -1;
  if (f == NULL) return;
  fputs("#include \"cuda_on_cpu.hpp\"\n", f);
  fclose(f);
  snprintf(args, sizeof args, "-x c++-header -o '%s.gch' '%s'", hpp, hpp);
  em->header = run_compiler(em, args, hpp, log) == 0 ? 1 : -1;
  em->failed = 0;
  em->error[0] = '\0';
}

/* The kernel's NVRTC options, which the library prints as comment lines
 * before the source: macros become #define and #undef lines of the file,
 * include folders arguments of the host compiler; the others (fast math,
 * target, standard) say nothing to a host compile. */
static void write_options(FILE *f, const char *text, char *includes, size_t size) {
  static const char mark[] = "// NVRTC option: ";
  for (const char *p = text; strncmp(p, mark, sizeof mark - 1) == 0;) {
    const char *o = p + sizeof mark - 1, *nl = strchr(o, '\n');
    int len = (int)(nl ? nl - o : (ptrdiff_t)strlen(o));
    if (strncmp(o, "-D", 2) == 0 || strncmp(o, "--define-macro=", 15) == 0) {
      int skip = o[1] == 'D' ? 2 : 15;
      o += skip;
      len -= skip;
      const char *eq = memchr(o, '=', (size_t)len);
      if (eq == NULL)
        fprintf(f, "#define %.*s 1\n", len, o);
      else
        fprintf(f, "#define %.*s %.*s\n", (int)(eq - o), o, len - (int)(eq - o) - 1, eq + 1);
    } else if (strncmp(o, "-U", 2) == 0 || strncmp(o, "--undefine-macro=", 17) == 0) {
      int skip = o[1] == 'U' ? 2 : 17;
      fprintf(f, "#undef %.*s\n", len - skip, o + skip);
    } else if (strncmp(o, "-I", 2) == 0 || strncmp(o, "--include-path=", 15) == 0) {
      int skip = o[1] == 'I' ? 2 : 15;
      size_t used = strlen(includes);
      snprintf(includes + used, size - used, " -I'%.*s'", len - skip, o + skip);
    }
    if (nl == NULL) break;
    p = nl + 1;
  }
}

/* An entry point for each name expression the source's comment lines
 * list ("// NVRTC name expression: scale<float>", after the options'):
 * jt_emu_expr_N runs the function the expression names, and
 * jt_emu_expr_fn_N returns its address, whose symbol (the host compiler's
 * mangled name, NVRTC's lowered name) tells emu_launch which entry a
 * launch means. */
static void write_expressions(FILE *f, const char *text) {
  static const char option[] = "// NVRTC option: ", expr[] = "// NVRTC name expression: ";
  int n = 0;
  for (const char *p = text; p != NULL && *p != '\0';) {
    const char *nl = strchr(p, '\n');
    int len = (int)(nl ? nl - p : (ptrdiff_t)strlen(p));
    if (strncmp(p, expr, sizeof expr - 1) == 0)
      fprintf(f, "JT_EMU_EXPR(%d, %.*s)\n", n++, len - (int)(sizeof expr - 1), p + sizeof expr - 1);
    else if (strncmp(p, option, sizeof option - 1) != 0)
      break;
    p = nl ? nl + 1 : NULL;
  }
}

/* The source as the host compiler takes it: dynamic shared memory
 * (`extern __shared__ T name[];`) becomes a shared array of the most a
 * block may have, in the section of the other shared variables, where
 * each block's start poisons it and shared addresses count from. */
static void write_source(FILE *f, const char *text) {
  static const char dyn[] = "extern __shared__";
  const char *p = text;
  for (const char *m; (m = strstr(p, dyn)) != NULL;) {
    const char *end = strchr(m, ';'), *brackets = strstr(m, "[]");
    if (end == NULL || brackets == NULL || brackets > end) break;
    fprintf(f, "%.*s%.*s[JT_EMU_DYNAMIC_SHARED]", (int)(m - p), p, (int)(brackets - m - 7), m + 7);
    p = brackets + 2;
  }
  fprintf(f, "%s\n", p);
}

/* Writes the source with an entry point for each kernel it defines, and
 * compiles it after the emulator's header into a shared library. */
static int build(jt_emu *em, emu_source *s) {
  if (em->header == 0) precompile_header(em);
  char cpp[128], so[128], log[128], args[1280];
  snprintf(cpp, sizeof cpp, "%s/k%d.cpp", em->dir, s->number);
  snprintf(so, sizeof so, "%s/k%d.so", em->dir, s->number);
  snprintf(log, sizeof log, "%s/k%d.log", em->dir, s->number);
  FILE *f = fopen(cpp, "w");
  if (f == NULL) {
    fail(em, "cannot write %s%s", cpp, "");
    return -1;
  }
  s->coop = strstr(s->text, "__syncthreads") != NULL || strstr(s->text, "__shfl") != NULL ||
            strstr(s->text, "__syncwarp") != NULL || strstr(s->text, "jitk/reduction.cuh") ||
            strstr(s->text, "jitk/matmul.cuh");
  char includes[512] = "";
  write_options(f, s->text, includes, sizeof includes);
  write_source(f, s->text);
  static const char mark[] = "extern \"C\" __global__ void ";
  for (const char *p = strstr(s->text, mark); p != NULL; p = strstr(p + 1, mark)) {
    const char *n = p + sizeof mark - 1;
    if (strncmp(n, "__launch_bounds__(", 18) == 0) {
      n = strchr(n, ')');
      n = n == NULL ? p : n + 1 + strspn(n + 1, " ");
    }
    size_t len = strcspn(n, "( \n");
    fprintf(f, "JT_EMU_ENTRY(%.*s)\n", (int)len, n);
  }
  write_expressions(f, s->text);
  fclose(f);
  /* -Bsymbolic: a kernel named as a function another loaded library
   * defines (libc's `bind`, `socket`) is called as the module's own, not
   * as that function, which the dynamic linker would otherwise find first
   * and run in the kernel's place without a word. */
  if (em->header > 0)
    snprintf(args, sizeof args, "-shared -Wl,-Bsymbolic%s -include '%s/emu.hpp' -o '%s' '%s'",
             includes, em->dir, so, cpp);
  else
    snprintf(args, sizeof args, "-shared -Wl,-Bsymbolic%s -include cuda_on_cpu.hpp -o '%s' '%s'",
             includes, so, cpp);
  if (run_compiler(em, args, cpp, log) != 0) return -1;
  s->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (s->so == NULL) {
    fail(em, "%s", dlerror(), "");
    return -1;
  }
  return 0;
}

/* A kernel that faults or traps takes the test down with it; first the
 * handler names the source it ran. */
static char running[256];

static void on_fault(int sig, siginfo_t *info, void *context) {
  /* Not async-signal-safe, but the process ends here: the faulting
   * instruction as library + offset, for addr2line. */
  const ucontext_t *uc = context;
#if defined(__x86_64__)
  void *ip = (void *)uc->uc_mcontext.gregs[REG_RIP];
#else
  void *ip = NULL;
  (void)uc;
#endif
  Dl_info where;
  memset(&where, 0, sizeof where);
  if (ip != NULL) dladdr(ip, &where);
  dprintf(report_fd,
          "\nthe emulated kernel faulted (signal %d at address %p, instruction %s+%#lx) in %s\n",
          sig, info->si_addr, where.dli_fname ? where.dli_fname : "?",
          (unsigned long)((char *)ip - (char *)where.dli_fbase), running);
  signal(sig, SIG_DFL);
  raise(sig);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef int (*entry_fn)(void **params, const unsigned *grid, const unsigned *block,
                        const unsigned *cluster, int coop, unsigned long long seed, char *err,
                        size_t err_size);

static int emu_launch(void *user, void *tag, const char *function, const unsigned grid[3],
                      const unsigned block[3], const unsigned cluster[3], unsigned shared,
                      void **params) {
  jt_emu *em = user;
  emu_source *s = tag;
  if (shared > 227 * 1024) {
    fail(em, "a launch of %s asks for more dynamic shared memory than a block has%s", function, "");
    return 1;
  }
  if (s == NULL) {
    fail(em, "no source is known for the module of %s%s", function, "");
    return 1;
  }
  double t0 = now_s();
  if (s->so == NULL && build(em, s) != 0) return 1;
  double t1 = now_s();
  em->build_s += t1 - t0;
  char sym[256];
  snprintf(sym, sizeof sym, "jt_emu_%s", function);
  entry_fn run;
  *(void **)&run = dlsym(s->so, sym);
  /* A name expression's function: the entry whose function's symbol is
   * the name launched. */
  for (int n = 0; run == NULL; n++) {
    void *(*address)(void);
    snprintf(sym, sizeof sym, "jt_emu_expr_fn_%d", n);
    *(void **)&address = dlsym(s->so, sym);
    if (address == NULL) {
      snprintf(sym, sizeof sym, "jt_emu_%s", function);
      break;
    }
    Dl_info info;
    if (dladdr(address(), &info) != 0 && info.dli_sname != NULL &&
        strcmp(info.dli_sname, function) == 0) {
      snprintf(sym, sizeof sym, "jt_emu_expr_%d", n);
      *(void **)&run = dlsym(s->so, sym);
    }
  }
  if (run == NULL) {
    fail(em, "the emulated module has no %s%s", sym, "");
    return 1;
  }
  char why[512] = "";
  em->runs++;
  snprintf(running, sizeof running, "%s of %s/k%d.cpp, grid (%u, %u, %u), block (%u, %u, %u)",
           function, em->dir, s->number, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
  if (getenv("JT_EMU_TRACE") != NULL)
    dprintf(report_fd, "emulating %s: %.*s\n", running, (int)strcspn(s->text, "\n"), s->text);
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
  struct sigaction fault, old[4];
  memset(&fault, 0, sizeof fault);
  fault.sa_sigaction = on_fault;
  fault.sa_flags = SA_SIGINFO;
  for (int i = 0; i < 4; i++) sigaction(sigs[i], &fault, &old[i]);
  int rc = run(params, grid, block, cluster, s->coop, em->seed, why, sizeof why);
  for (int i = 0; i < 4; i++) sigaction(sigs[i], &old[i], NULL);
  em->run_s += now_s() - t1;
  if (rc != 0) {
    char where[128];
    snprintf(where, sizeof where, "%s/k%d.cpp", em->dir, s->number);
    fail(em, "%s (source %s)", why, where);
    return 1;
  }
  return 0;
}

jt_emu *jt_emu_open(int sms) {
  jt_emu *em = calloc(1, sizeof *em);
  if (em == NULL) return NULL;
  em->fake = dlopen(JT_EMU_FAKE, RTLD_NOW | RTLD_LOCAL);
  fakecuda_set_multiprocessors_fn set_sms = NULL;
  if (em->fake != NULL) {
    *(void **)&em->set_hooks = dlsym(em->fake, "fakecuda_set_hooks");
    *(void **)&set_sms = dlsym(em->fake, "fakecuda_set_multiprocessors");
  }
  snprintf(em->dir, sizeof em->dir, "/tmp/jitk-emu-XXXXXX");
  if (em->fake == NULL || em->set_hooks == NULL || set_sms == NULL || mkdtemp(em->dir) == NULL) {
    fprintf(stderr, "the emulator cannot start: %s\n", em->fake ? "no hooks or folder" : dlerror());
    if (em->fake != NULL) dlclose(em->fake);
    free(em);
    return NULL;
  }
  set_sms(sms);
  em->capture_fd = em->saved_fd = -1;
  em->set_hooks(emu_load, emu_launch, em);
  setenv("JITK_DUMP_SOURCE", "1", 1);
  return em;
}

#ifndef JT_EMU_NO_ENGINE
/* An engine of the test's own logs each source here. */
static void emu_log(void *user, jitk_log_level level, const char *message) {
  jt_emu *em = user;
  if (is_source(message)) {
    const char *src = strchr(message, '\n');
    if (src == NULL) return;
    free(em->newest);
    em->newest = strdup(src + 1);
    return;
  }
  if (level <= JITK_LOG_WARN) fprintf(stderr, "jitk: %s\n", message);
}

jitk_engine *jt_emu_engine(jt_emu *em) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.driver_library = JT_EMU_FAKE;
  cfg.log_fn = emu_log;
  cfg.log_user = em;
  jitk_engine *e = NULL;
  if (jitk_engine_create(&cfg, &e) != JITK_OK) {
    fprintf(stderr, "no engine on the stand-in: %s\n", jitk_errmsg(NULL));
    return NULL;
  }
  return e;
}
#endif

void jt_emu_set_seed(jt_emu *em, uint64_t seed) { em->seed = seed; }

const char *jt_emu_error(const jt_emu *em) { return em->error; }

void jt_emu_clear_error(jt_emu *em) { em->error[0] = '\0'; }

unsigned long long jt_emu_runs(const jt_emu *em) { return em->runs; }

void jt_emu_times(const jt_emu *em, double *build_s, double *run_s) {
  *build_s = em->build_s;
  *run_s = em->run_s;
}

void jt_emu_close(jt_emu *em) {
  if (em == NULL) return;
  em->set_hooks(NULL, NULL, NULL);
  if (em->capture_fd >= 0) {
    /* What is left goes on to stderr, which gets its own file again. */
    fflush(stderr);
    absorb_stderr(em);
    dup2(em->saved_fd, 2);
    close(em->saved_fd);
    close(em->capture_fd);
    report_fd = 2;
  }
  while (em->sources != NULL) {
    emu_source *s = em->sources;
    em->sources = s->next;
    if (s->so != NULL) dlclose(s->so);
    if (!em->failed) {
      char path[128];
      static const char *const ext[] = {"cpp", "so", "log"};
      for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/k%d.%s", em->dir, s->number, ext[k]);
        unlink(path);
      }
    }
    free(s->text);
    free(s);
  }
  if (!em->failed) {
    static const char *const extra[] = {"emu.hpp", "emu.hpp.gch", "emu.log", "stderr.txt"};
    for (int k = 0; k < 4; k++) {
      char path[128];
      snprintf(path, sizeof path, "%s/%s", em->dir, extra[k]);
      unlink(path);
    }
    rmdir(em->dir);
  }
  free(em->newest);
  dlclose(em->fake);
  free(em);
}
