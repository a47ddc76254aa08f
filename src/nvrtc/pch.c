/*
 * NVRTC's precompiled headers (CUDA 12.8 and newer).
 *
 * NVRTC can save its state after the directives a source starts with (its
 * #includes) into a file, and a later compile whose source starts with the
 * same directives loads that file instead of reading the headers again.
 * For a generated float16 kernel that is most of its compile: cuda_fp16.h
 * and cuda_bf16.h cost NVRTC more than the kernel does.
 *
 * What NVRTC does, as measured with NVRTC 13.0 (tests/unit/nvrtc/test_pch.c
 * checks each point that jitk relies on):
 *  - A file holds a snapshot of NVRTC's PCH heap, which lives at an address
 *    of this process; another process, or this one after the heap was
 *    resized, cannot load it. A file only ever serves the process that
 *    made it.
 *  - NVRTC checks that a source starts with the same directives and that
 *    the options are the same, but not that the headers still hold what
 *    they held: a header edited within the second it was read is not
 *    noticed, and a header given as a string is not compared at all.
 *  - The images are the same bytes with or without them.
 *  - Saving one costs the compile that saves it about a quarter more;
 *    loading one saves what reading those headers cost. Headers of a few
 *    kilobytes save nothing.
 *
 * Hence:
 *  - One file per header state, named by a hash of the options, of every
 *    header given as a string, of the source's leading directives, and of
 *    the compile's dependency record (every path its lookups probe, with
 *    the content hash of what is there: deps.c). A compile only ever loads
 *    a file made from exactly the headers it reads: the file is dropped
 *    when one of them was written while NVRTC read them (even if put back
 *    as it was, with its times), since the name then may not say what the
 *    file holds. NVRTC's explicit mode
 *    (--create-pch, --use-pch) is used, never its automatic one, which
 *    would load any compatible file of the folder.
 *  - The key and the dependency record of the cache never see these
 *    options: they are added here, after both are made, so a compile's key
 *    is the same with or without them.
 *  - Only compiles that read at least min_header_bytes from disk are
 *    offered them.
 *  - The first compile of a header state is not slowed down: it compiles
 *    plainly while a thread of the engine compiles its leading directives
 *    alone and saves the file, which the next compiles load. On a process
 *    with one CPU, where that thread would take the compile's CPU, the
 *    first compile saves it itself.
 *  - Whoever can write to the folder can plant a file that NVRTC loads as
 *    compiled code, so the folder is the engine's own (mkdtemp, 0700) under
 *    <cache>/pch, which the engine checked with the cache's trust rules,
 *    and is removed with the engine. Folders of processes that ended
 *    without removing theirs are removed by the next engine that makes one.
 *
 * Nothing fails for precompiled headers: a compile that fails with them
 * and would not without them is compiled again without them (and the
 * engine stops using them), and any other problem means a plain compile,
 * with at most one log line.
 */
#define XXH_STATIC_LINKING_ONLY
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "engine.h"
#include "nvrtc/nvrtc.h"

/* NVRTC's default heap is 256 MiB, and CUB's block reduce alone needs 176
 * MB of it (NVRTC 13.0); jitk grows it to what a compile asks for, up to
 * 1 GiB and at most four times an engine. */
#define JK_PCH_HEAP_MAX ((size_t)1 << 30)
#define JK_PCH_MAX_GROWTHS 4u
/* Files an engine keeps at once: a file is about the heap it used, 9 MB
 * for the CUDA half headers, 178 MB for CUB's block reduce. */
#define JK_PCH_MAX_BYTES ((uint64_t)512 << 20)
/* Headers from disk below this size cost NVRTC less than loading a file. */
#define JK_PCH_MIN_HEADER_BYTES ((size_t)64 << 10)

/* Options of every compile that makes or loads a file. NVRTC's messages
 * about it say whether it was loaded (and are taken out of the log); the
 * diagnostics it gives about precompiled headers alone are suppressed: a
 * source it cannot save (630, 20283), options or a heap that do not match
 * (629, 20282), a heap too small (639). They describe jitk's choice, not
 * the user's code, and must not become errors under a user's -Werror. */
static const char *const pch_options[] = {"--pch-messages=true", "--pch-verbose=false",
                                          "-diag-suppress=629,630,639,20282,20283"};

void jk_pch_resolve(jk_nvrtc *nv) {
  jk_pch *p = &nv->pch;
  p->heap_max = JK_PCH_HEAP_MAX;
  p->max_bytes = JK_PCH_MAX_BYTES;
  p->min_header_bytes = JK_PCH_MIN_HEADER_BYTES;
  p->owner = -1;
  snprintf(p->state, sizeof p->state, "off: not configured");
  if (nv->major * 100 + nv->minor < 1208) return;
  /* NVRTC is linked, but these entry points are newer than some of the
   * libraries a process may load under its name: they are found in the
   * library already loaded, by its handle (RTLD_NOLOAD only takes another
   * reference), never in whatever the global scope holds. */
  Dl_info info;
  if (dladdr((void *)&nvrtcVersion, &info) == 0 || info.dli_fname == NULL) return;
  p->lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (p->lib == NULL) return;
#define JK_PCH_LOOKUP_(name, type) *(void **)&nv->name = dlsym(p->lib, #name);
  JK_NVRTC_PCH_FUNCS(JK_PCH_LOOKUP_)
#undef JK_PCH_LOOKUP_
}

bool jk_pch_available(const jk_nvrtc *nv) {
  /* The flow callback, which stops a thread's compile when the engine
   * goes, is optional. */
  return nv->nvrtcGetPCHHeapSize != NULL && nv->nvrtcSetPCHHeapSize != NULL &&
         nv->nvrtcGetPCHCreateStatus != NULL && nv->nvrtcGetPCHHeapSizeRequired != NULL;
}

void jk_pch_configure(jitk_engine *e, int mode, char *root, const char *why) {
  jk_pch *p = &e->nvrtc.pch;
  p->mode = root != NULL ? mode : JITK_PCH_OFF;
  p->root = root;
  p->ahead = jk_cpu_count() >= 2;
  if (root != NULL)
    snprintf(p->state, sizeof p->state, "on");
  else
    snprintf(p->state, sizeof p->state, "off: %s", why ? why : "not asked for");
}

/* Removes `name` under the folder `parent`: a file, or a folder with what
 * it holds down to `depth` levels of folders. Links are removed, never
 * followed. */
static void remove_at(int parent, const char *name, int depth) {
  struct stat st;
  if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    unlinkat(parent, name, 0);
    return;
  }
  if (depth <= 0) return;
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (d == NULL) {
    if (fd >= 0) close(fd);
    return;
  }
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL)
    if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0)
      remove_at(dirfd(d), ent->d_name, depth - 1);
  closedir(d);
  unlinkat(parent, name, AT_REMOVEDIR);
}

/* Removes the folders that processes which have ended left in `root`
 * (killed before they could remove them). A folder is named
 * "<pid>-XXXXXX"; one whose process is alive, or that belongs to someone
 * else, is left alone. */
static void sweep(const char *root) {
  int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (d == NULL) {
    if (fd >= 0) close(fd);
    return;
  }
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL) {
    char *end;
    errno = 0;
    long pid = strtol(ent->d_name, &end, 10);
    if (errno != 0 || end == ent->d_name || *end != '-' || pid <= 0 || pid == (long)getpid())
      continue;
    struct stat st;
    if (fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid())
      continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    remove_at(dirfd(d), ent->d_name, 2);
  }
  closedir(d);
}

/* Turns precompiled headers off for the engine, with one log line. Under
 * the lock. */
static void turn_off(jitk_engine *e, const char *fmt, const char *detail) {
  jk_pch *p = &e->nvrtc.pch;
  char why[400];
  snprintf(why, sizeof why, fmt, detail);
  snprintf(p->state, sizeof p->state, "off: %s", why);
  p->mode = JITK_PCH_OFF;
  if (!p->warned)
    jk_log(e, JITK_LOG_INFO, "precompiled headers off: %s; compiling without them", why);
  p->warned = true;
}

/* The engine's folder, made at the first compile that wants it; again when
 * it is gone (a cleaner of old files removed it), and in a forked child,
 * for whom the parent's folder and files are the parent's. Under the lock;
 * false when it cannot be made. */
static bool own_dir(jitk_engine *e) {
  jk_pch *p = &e->nvrtc.pch;
  struct stat st;
  if (p->dir != NULL && p->owner == (int)getpid() && lstat(p->dir, &st) == 0 && S_ISDIR(st.st_mode))
    return true;
  if (p->owner != (int)getpid()) {
    /* The parent's thread is not this process's to join. */
    p->maker_started = p->making = false;
  }
  jk_free(e, p->dir);
  p->dir = NULL;
  p->bytes = 0;
  p->num_states = 0;
  sweep(p->root);
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "%s/%ld-XXXXXX", p->root, (long)getpid());
  char *dir = jk_buf_take(&b);
  if (dir == NULL) return false;
  /* mkdtemp makes the folder 0700 whatever the umask. */
  if (mkdtemp(dir) == NULL) {
    turn_off(e, "cannot make a folder in %s", p->root);
    jk_free(e, dir);
    return false;
  }
  p->dir = dir;
  p->owner = (int)getpid();
  return true;
}

/* The entry of a header state, made (status 'N') when `add`. Under the
 * lock; NULL when absent, or out of memory. */
static jk_pch_state *find_state(jitk_engine *e, const uint8_t key[16], bool add) {
  jk_pch *p = &e->nvrtc.pch;
  for (size_t i = 0; i < p->num_states; i++)
    if (memcmp(p->states[i].key, key, 16) == 0) return &p->states[i];
  if (!add) return NULL;
  if (p->num_states == p->cap_states) {
    size_t cap = p->cap_states ? 2 * p->cap_states : 16;
    void *v = jk_realloc(e, p->states, cap * sizeof *p->states);
    if (v == NULL) return NULL;
    p->states = v;
    p->cap_states = cap;
  }
  jk_pch_state *s = &p->states[p->num_states++];
  memset(s, 0, sizeof *s);
  memcpy(s->key, key, 16);
  s->status = 'N';
  return s;
}

static void set_status(jitk_engine *e, const uint8_t key[16], char status) {
  jk_pch_state *s = find_state(e, key, true);
  if (s != NULL) s->status = status;
}

/* Labelled fields of the header state, so that no two lists of fields run
 * together into the same bytes. */
static void hash_field(XXH3_state_t *h, const char *label, const void *data, size_t n) {
  uint64_t len = n;
  XXH3_128bits_update(h, label, strlen(label) + 1);
  XXH3_128bits_update(h, &len, sizeof len);
  XXH3_128bits_update(h, data, n);
}

/* Whether the caller's own options already speak of precompiled headers:
 * then NVRTC does what they say, and jitk adds nothing. */
static bool user_pch_option(char **opts, size_t nopts) {
  static const char *const names[] = {"-pch",         "--pch",     "-create-pch",
                                      "--create-pch", "-use-pch",  "--use-pch",
                                      "-pch-dir",     "--pch-dir", NULL};
  for (size_t i = 0; i < nopts; i++)
    for (const char *const *n = names; *n; n++) {
      size_t l = strlen(*n);
      if (strncmp(opts[i], *n, l) == 0 && (opts[i][l] == '\0' || opts[i][l] == '=')) return true;
    }
  return false;
}

/* Appends a space to `norm` unless it ends in one (or a line). */
static void norm_space(jk_buf *norm) {
  if (norm->len > 0 && norm->data[norm->len - 1] != ' ' && norm->data[norm->len - 1] != '\n')
    jk_buf_append(norm, " ", 1);
}

/*
 * The length of the directives a source starts with, with the comments
 * and blank lines among them: what NVRTC saves, and the source of the
 * compile that saves it ahead. It ends with the line before the first one
 * that holds code; *includes tells whether it has any #include. `norm`
 * gets the directives alone, one a line, without comments and with each
 * run of spaces made one: NVRTC loads a file for a source whose
 * directives differ from its maker's only in those (and in the lines they
 * are on), so the header state is named by these.
 */
static size_t leading_directives(const char *src, bool *includes, jk_buf *norm) {
  *includes = false;
  size_t end = 0, norm_end = 0;
  const char *p = src;
  bool in_comment = false;
  while (*p != '\0') {
    const char *line = p;
    bool code = false, directive = false;
    /* One logical line: a directive goes on past a backslash-newline. */
    while (*p != '\0') {
      if (in_comment) {
        if (p[0] == '*' && p[1] == '/') {
          in_comment = false;
          p += 2;
        } else {
          p++;
        }
        continue;
      }
      if (*p == '\n') {
        if (directive && p > line && p[-1] == '\\') {
          p++;
          continue;
        }
        break;
      }
      if (p[0] == '/' && p[1] == '*') {
        in_comment = true;
        if (directive) norm_space(norm);
        p += 2;
      } else if (p[0] == '/' && p[1] == '/') {
        while (*p != '\0' && *p != '\n') p++;
      } else if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\f' || *p == '\v' ||
                 (*p == '\\' && p[1] == '\n')) {
        if (directive) norm_space(norm);
        p++;
      } else if (!directive && !code && *p == '#') {
        directive = true;
        const char *q = p + 1;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, "include", 7) == 0) *includes = true;
        jk_buf_append(norm, p, 1);
        p++;
      } else {
        if (!directive) code = true;
        if (directive) jk_buf_append(norm, p, 1);
        p++;
      }
    }
    if (code) break;
    if (directive) {
      if (norm->len > 0 && norm->data[norm->len - 1] == ' ') norm->data[--norm->len] = '\0';
      jk_buf_append(norm, "\n", 1);
    }
    if (*p == '\n') p++;
    /* A comment still open at the end of the line may hold the start of
     * the code: the line counts only once the comment is closed. */
    if (!in_comment) {
      end = (size_t)(p - src);
      norm_end = norm->len;
    }
  }
  /* Directives after the last line counted (a comment open into the
   * code) are not the file's. */
  if (norm->data != NULL) norm->data[norm->len = norm_end] = '\0';
  return end;
}

/* What a thread of the engine needs to save a header state's file: copies
 * of everything, since the compile that started it returns meanwhile. */
typedef struct pch_job {
  jitk_engine *e;
  uint8_t key[16];
  char *stub, *pname, *file;
  char **opts;
  size_t nopts;
  char **hname, **hsrc;
  size_t nh;
  jk_deps read; /* what the key was made from */
} pch_job;

static void job_free(pch_job *j) {
  if (j == NULL) return;
  jitk_engine *e = j->e;
  jk_free(e, j->stub);
  jk_free(e, j->pname);
  jk_free(e, j->file);
  for (size_t i = 0; j->opts != NULL && i < j->nopts; i++) jk_free(e, j->opts[i]);
  for (size_t i = 0; j->hname != NULL && j->hsrc != NULL && i < j->nh; i++) {
    jk_free(e, j->hname[i]);
    jk_free(e, j->hsrc[i]);
  }
  jk_free(e, j->opts);
  jk_free(e, j->hname);
  jk_free(e, j->hsrc);
  jk_deps_free(e, &j->read);
  jk_free(e, j);
}

/* NVRTC's heap was too small for a header state: grows it to what the
 * compile asked for, within the bounds, and the state is made again at its
 * next compile. The compile that found it too small is not run again for
 * it: its image is made, and running it only to save the headers would
 * double its time, where the next compile of them makes the file on the
 * side. Under the lock. */
static void grow_heap(jitk_engine *e, nvrtcProgram prog, const uint8_t key[16]) {
  jk_nvrtc *nv = &e->nvrtc;
  jk_pch *p = &nv->pch;
  size_t need = 0, now = 0;
  if (nv->nvrtcGetPCHHeapSizeRequired(prog, &need) != NVRTC_SUCCESS || need == 0 ||
      nv->nvrtcGetPCHHeapSize(&now) != NVRTC_SUCCESS) {
    p->failed++;
    set_status(e, key, 'X');
    return;
  }
  if (now >= need) {
    /* Another engine of the process grew it meanwhile. */
    set_status(e, key, 'N');
    return;
  }
  if (need > p->heap_max || p->heap_growths >= JK_PCH_MAX_GROWTHS) {
    p->failed++;
    set_status(e, key, 'X');
    if (!p->warned)
      jk_log(e, JITK_LOG_INFO,
             "precompiled headers: a compile's headers need a heap of %zu MiB, and jitk grows "
             "NVRTC's (now %zu MiB) to at most %zu MiB, %u times an engine; those headers are "
             "compiled without one",
             need >> 20, now >> 20, p->heap_max >> 20, JK_PCH_MAX_GROWTHS);
    p->warned = true;
    return;
  }
  /* A quarter more than asked, in steps of 16 MiB, so that headers a
   * little larger do not need another growth. */
  size_t step = (size_t)16 << 20;
  size_t want = need + need / 4;
  want = (want + step - 1) / step * step;
  if (want > p->heap_max) want = p->heap_max;
  if (nv->nvrtcSetPCHHeapSize(want) != NVRTC_SUCCESS) {
    p->failed++;
    set_status(e, key, 'X');
    return;
  }
  p->heap_growths++;
  /* Every file made from the old heap names its address, which is gone:
   * they are removed, and their states made again. */
  for (size_t i = 0; i < p->num_states; i++)
    if (p->states[i].status == 'R') p->states[i].status = 'N';
  set_status(e, key, 'N');
  if (p->dir != NULL) {
    int fd = open(p->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL && fd >= 0) close(fd);
    if (d != NULL) {
      struct dirent *ent;
      while ((ent = readdir(d)) != NULL)
        if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0)
          unlinkat(dirfd(d), ent->d_name, 0);
      closedir(d);
    }
  }
  p->bytes = 0;
  jk_log(e, JITK_LOG_INFO,
         "precompiled headers: NVRTC's heap grown from %zu to %zu MiB for headers that needed "
         "%zu MiB",
         now >> 20, want >> 20, need >> 20);
}

/* What a compile that was to save the file of `key` did: the state is
 * ready, made again later (a heap grown for it, or a header written while
 * NVRTC read it), or never. The key names the headers as the scan `read`
 * them before NVRTC ran; a header written since (even if put back as it
 * was) leaves what the file holds unknown. Under the lock. */
static void after_create(jitk_engine *e, nvrtcProgram prog, const uint8_t key[16], const char *file,
                         const jk_deps *read) {
  jk_pch *p = &e->nvrtc.pch;
  nvrtcResult status = e->nvrtc.nvrtcGetPCHCreateStatus(prog);
  struct stat st;
  const char *changed = NULL;
  if (status == NVRTC_SUCCESS && stat(file, &st) == 0 && !jk_deps_unchanged(read, &changed)) {
    unlink(file);
    set_status(e, key, 'N');
    jk_log(e, JITK_LOG_INFO,
           "precompiled headers: %s was written while NVRTC saved them; the file is dropped",
           changed);
  } else if (status == NVRTC_SUCCESS && stat(file, &st) == 0) {
    p->created++;
    p->bytes += (uint64_t)st.st_size;
    set_status(e, key, 'R');
  } else if ((int)status == JK_NVRTC_PCH_CREATE_HEAP_EXHAUSTED) {
    grow_heap(e, prog, key);
  } else {
    /* The source cannot be saved (its headers end inside a declaration or
     * an #if, an error comes before they end) or the file cannot be
     * written: trying again would cost the same every time. */
    p->failed++;
    set_status(e, key, 'X');
  }
}

/* NVRTC's flow callback: 1 stops the compile of a thread whose engine is
 * being destroyed. */
static int should_stop(void *payload, void *unused) {
  (void)unused;
  return __atomic_load_n((int *)payload, __ATOMIC_ACQUIRE);
}

static void *make_ahead(void *arg) {
  pch_job *j = arg;
  jitk_engine *e = j->e;
  jk_nvrtc *nv = &e->nvrtc;
  jk_pch *p = &nv->pch;
  nvrtcProgram prog = NULL;
  if (nv->nvrtcCreateProgram(&prog, j->stub, j->pname, (int)j->nh, (const char *const *)j->hsrc,
                             (const char *const *)j->hname) != NVRTC_SUCCESS) {
    prog = NULL;
  } else {
    if (nv->nvrtcSetFlowCallback != NULL) nv->nvrtcSetFlowCallback(prog, should_stop, &p->stop);
    /* Its result says nothing the status of the file does not. */
    (void)nv->nvrtcCompileProgram(prog, (int)j->nopts, (const char *const *)j->opts);
  }
  pthread_mutex_lock(&p->lock);
  if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
    /* The engine is going: nothing of it is to be changed. */
  } else if (prog == NULL) {
    p->failed++;
    set_status(e, j->key, 'X');
  } else {
    /* The stub has no code, so a failed compile means its directives
     * cannot be saved alone; after_create reads NVRTC's status either
     * way. */
    after_create(e, prog, j->key, j->file, &j->read);
  }
  p->making = false;
  pthread_mutex_unlock(&p->lock);
  if (prog != NULL) nv->nvrtcDestroyProgram(&prog);
  job_free(j);
  return NULL;
}

/* Starts the thread that saves `key`'s file from the source's leading
 * directives, reading the headers as `read` (moved into the job) holds
 * them. Under the lock; false when it cannot start (the compile then
 * saves it itself, and keeps `read`). */
static bool start_maker(jitk_engine *e, const jk_compile_input *in, size_t stub_len, char **opts,
                        size_t nopts, const char *const *hname, const char *const *hsrc, size_t nh,
                        const uint8_t key[16], const char *file, jk_deps *read) {
  jk_pch *p = &e->nvrtc.pch;
  if (p->maker_started) {
    /* The last one has ended (making is false): its thread is joined. */
    pthread_join(p->maker, NULL);
    p->maker_started = false;
  }
  pch_job *j = jk_calloc(e, 1, sizeof *j);
  if (j == NULL) return false;
  j->e = e;
  memcpy(j->key, key, 16);
  j->stub = jk_strndup(e, in->source, stub_len);
  j->pname = jk_strdup(e, in->program_name ? in->program_name : "module.cu");
  j->file = jk_strdup(e, file);
  size_t n = nopts + sizeof pch_options / sizeof pch_options[0] + 1;
  j->opts = jk_calloc(e, n, sizeof *j->opts);
  j->hname = jk_calloc(e, nh ? nh : 1, sizeof *j->hname);
  j->hsrc = jk_calloc(e, nh ? nh : 1, sizeof *j->hsrc);
  bool ok = j->stub && j->pname && j->file && j->opts && j->hname && j->hsrc;
  for (size_t i = 0; ok && i < nopts; i++)
    ok = (j->opts[j->nopts++] = jk_strdup(e, opts[i])) != NULL;
  for (size_t i = 0; ok && i < sizeof pch_options / sizeof pch_options[0]; i++)
    ok = (j->opts[j->nopts++] = jk_strdup(e, pch_options[i])) != NULL;
  if (ok) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "--create-pch=%s", file);
    ok = (j->opts[j->nopts++] = jk_buf_take(&b)) != NULL;
  }
  for (size_t i = 0; ok && i < nh; i++) {
    j->hname[i] = jk_strdup(e, hname[i]);
    j->hsrc[i] = jk_strdup(e, hsrc[i]);
    j->nh++;
    ok = j->hname[i] != NULL && j->hsrc[i] != NULL;
  }
  if (!ok) {
    job_free(j);
    return false;
  }
  /* The record goes with the job, and back when its thread cannot start. */
  j->read = *read;
  memset(read, 0, sizeof *read);
  if (pthread_create(&p->maker, NULL, make_ahead, j) != 0) {
    *read = j->read;
    memset(&j->read, 0, sizeof j->read);
    job_free(j);
    return false;
  }
  p->maker_started = p->making = true;
  return true;
}

void jk_pch_begin(jitk_engine *e, const jk_compile_input *in, char **opts, size_t nopts,
                  const char *const *hname, const char *const *hsrc, size_t nh, jk_pch_use *use) {
  jk_nvrtc *nv = &e->nvrtc;
  jk_pch *p = &nv->pch;
  memset(use, 0, sizeof *use);
  if (p->root == NULL) return;
  pthread_mutex_lock(&p->lock);
  int mode = p->mode;
  pthread_mutex_unlock(&p->lock);
  if (mode == JITK_PCH_OFF || (!in->rewrite_log && mode != JITK_PCH_ALL)) return;
  if (user_pch_option(opts, nopts)) return;
  bool includes = false;
  jk_buf norm;
  jk_buf_init(&norm, e);
  size_t stub_len = leading_directives(in->source, &includes, &norm);
  char *directives = jk_buf_take(&norm);
  if (!includes || directives == NULL) {
    jk_free(e, directives);
    return;
  }

  /* What the compile reads from disk, as the cache's dependency record
   * has it (the CUDA headers' part comes from the engine's memo, so this
   * costs microseconds after the first compile). A record that cannot be
   * complete cannot name a header state. */
  jk_deps deps;
  if (jk_deps_scan(e, in, opts, nopts, &deps) != JITK_OK) {
    jk_free(e, directives);
    return;
  }
  uint64_t disk_bytes = 0;
  for (size_t i = 0; i < deps.n; i++) {
    struct stat st;
    if (deps.v[i].state == 'F' && stat(deps.v[i].path, &st) == 0)
      disk_bytes += (uint64_t)st.st_size;
  }
  XXH3_state_t *h = NULL;
  if (deps.unknown != NULL || disk_bytes < p->min_header_bytes ||
      (h = XXH3_createState()) == NULL) {
    jk_deps_free(e, &deps);
    jk_free(e, directives);
    return;
  }
  XXH3_128bits_reset(h);
  hash_field(h, "jitk pch", "1", 1);
  for (size_t i = 0; i < nopts; i++) hash_field(h, "option", opts[i], strlen(opts[i]));
  for (size_t i = 0; i < nh; i++) {
    hash_field(h, "header_name", hname[i], strlen(hname[i]));
    hash_field(h, "header", hsrc[i], strlen(hsrc[i]));
  }
  hash_field(h, "directives", directives, strlen(directives));
  jk_free(e, directives);
  for (size_t i = 0; i < deps.n; i++) {
    const jk_dep *d = &deps.v[i];
    hash_field(h, "path", d->path, strlen(d->path));
    hash_field(h, "state", &d->state, 1);
    if (d->hashed) hash_field(h, "hash", d->hash, 16);
  }
  XXH128_hash_t k = XXH3_128bits_digest(h);
  XXH3_freeState(h);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, k);
  memcpy(use->key, c.digest, 16);

  pthread_mutex_lock(&p->lock);
  char kind = 0;
  jk_pch_state *s = NULL;
  if (p->mode != JITK_PCH_OFF && own_dir(e)) s = find_state(e, use->key, true);
  if (s != NULL) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "%s/", p->dir);
    for (int i = 0; i < 16; i++) jk_buf_printf(&b, "%02x", use->key[i]);
    jk_buf_puts(&b, ".pch");
    use->file = jk_buf_take(&b);
  }
  if (s != NULL && use->file != NULL) {
    if (s->status == 'R') {
      kind = 'u';
    } else if (s->status == 'N' && !p->making && p->bytes < p->max_bytes) {
      /* A new file: made beside this compile when the process has a CPU
       * for it, else by this compile. */
      if (!p->ahead ||
          !start_maker(e, in, stub_len, opts, nopts, hname, hsrc, nh, use->key, use->file, &deps))
        kind = 'c';
      s->status = 'M';
    }
  }
  if (kind != 0) p->compiles++;
  pthread_mutex_unlock(&p->lock);
  /* The compile that saves the file checks the headers it read after. */
  if (kind == 'c')
    use->read = deps;
  else
    jk_deps_free(e, &deps);
  if (kind == 0) {
    jk_free(e, use->file);
    use->file = NULL;
    return;
  }
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "%s=%s", kind == 'c' ? "--create-pch" : "--use-pch", use->file);
  use->file_option = jk_buf_take(&b);
  if (use->file_option == NULL) {
    pthread_mutex_lock(&p->lock);
    if (kind == 'c') set_status(e, use->key, 'N');
    pthread_mutex_unlock(&p->lock);
    jk_pch_use_free(e, use);
    return;
  }
  for (size_t i = 0; i < sizeof pch_options / sizeof pch_options[0]; i++)
    use->options[use->num_options++] = pch_options[i];
  use->options[use->num_options++] = use->file_option;
  use->kind = kind;
}

/* Whether the log holds NVRTC's message `what` ("using", "creating")
 * about the use's file, whose line it removes. */
static bool take_message(jitk_engine *e, const jk_pch_use *use, const char *pname, char *log,
                         const char *what) {
  if (log == NULL) return false;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "\"%s\": %s precompiled header file \"%s\"", pname, what, use->file);
  char *message = jk_buf_take(&b);
  if (message == NULL) return false;
  bool found = false;
  size_t n = strlen(message);
  for (char *line = log; *line != '\0';) {
    char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    if (len == n && memcmp(line, message, n) == 0) {
      char *next = eol ? eol + 1 : line + len;
      memmove(line, next, strlen(next) + 1);
      found = true;
      break;
    }
    if (eol == NULL) break;
    line = eol + 1;
  }
  jk_free(e, message);
  return found;
}

void jk_pch_end(jitk_engine *e, jk_pch_use *use, const char *pname, nvrtcProgram prog, char *log) {
  if (use->kind == 0) return;
  jk_pch *p = &e->nvrtc.pch;
  bool loaded = take_message(e, use, pname, log, "using");
  take_message(e, use, pname, log, "creating");
  pthread_mutex_lock(&p->lock);
  if (use->kind == 'c' && prog == NULL) {
    set_status(e, use->key, 'N'); /* not compiled: made at the next compile */
  } else if (use->kind == 'c') {
    after_create(e, prog, use->key, use->file, &use->read);
  } else if (loaded) {
    p->used++;
  } else {
    /* NVRTC refused the file: another engine of the process resized the
     * heap, or the process changed its working folder. It is made again
     * once; a second refusal means never. */
    jk_pch_state *s = find_state(e, use->key, false);
    if (s != NULL && s->status == 'R') {
      s->status = ++s->tries >= 2 ? 'X' : 'N';
      if (s->status == 'X') p->failed++;
    }
  }
  pthread_mutex_unlock(&p->lock);
}

bool jk_pch_retry_plain(const jk_pch_use *use, nvrtcResult r, const char *log) {
  if (use->kind == 0 || r == NVRTC_SUCCESS) return false;
  /* A plain compile error says nothing of precompiled headers (jitk
   * suppresses their warnings); anything else might be theirs. */
  if (r == NVRTC_ERROR_COMPILATION && (log == NULL || strstr(log, "precompiled header") == NULL))
    return false;
  return true;
}

void jk_pch_blame(jitk_engine *e, nvrtcResult r) {
  jk_pch *p = &e->nvrtc.pch;
  pthread_mutex_lock(&p->lock);
  p->failed++;
  turn_off(e, "a compile failed with them (%s) and passed without",
           e->nvrtc.nvrtcGetErrorString(r));
  pthread_mutex_unlock(&p->lock);
}

void jk_pch_use_free(jitk_engine *e, jk_pch_use *use) {
  jk_free(e, use->file_option);
  jk_free(e, use->file);
  jk_deps_free(e, &use->read);
  memset(use, 0, sizeof *use);
}

void jk_pch_destroy(jitk_engine *e, jk_nvrtc *nv) {
  jk_pch *p = &nv->pch;
  /* A thread still making a file is stopped (NVRTC's flow callback cancels
   * its compile) and joined: it uses the engine. */
  pthread_mutex_lock(&p->lock);
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
  bool join = p->maker_started && p->owner == (int)getpid();
  pthread_mutex_unlock(&p->lock);
  if (join) pthread_join(p->maker, NULL);
  /* The files serve this process alone and go with the engine. A forked
   * child leaves its parent's. */
  if (p->dir != NULL && p->owner == (int)getpid()) {
    char *slash = strrchr(p->dir, '/');
    int fd = open(p->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && slash != NULL) remove_at(fd, slash + 1, 2);
    if (fd >= 0) close(fd);
  }
  jk_free(e, p->dir);
  jk_free(e, p->root);
  jk_free(e, p->states);
  p->dir = p->root = NULL;
  p->states = NULL;
  if (p->lib != NULL) dlclose(p->lib);
  p->lib = NULL;
  pthread_mutex_destroy(&p->lock);
}

jitk_status jitk_engine_pch_info(jitk_engine *e, jitk_pch_info *info) {
  if (e == NULL || info == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_pch_info: %s is NULL",
                   e == NULL ? "engine" : "info");
  size_t size = info->struct_size;
  if (size < offsetof(jitk_pch_info, state) + sizeof(const char *) || size > sizeof *info)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_engine_pch_info: info->struct_size is %zu; set it to "
                   "sizeof(jitk_pch_info)",
                   size);
  jk_nvrtc *nv = &e->nvrtc;
  jk_pch *p = &nv->pch;
  jitk_pch_info out;
  memset(&out, 0, sizeof out);
  pthread_mutex_lock(&p->lock);
  out.state = p->state;
  out.dir = p->dir;
  out.compiles = p->compiles;
  out.created = p->created;
  out.used = p->used;
  out.failed = p->failed;
  out.heap_grown = p->heap_growths;
  out.bytes = p->bytes;
  out.making = p->making;
  pthread_mutex_unlock(&p->lock);
  size_t heap = 0;
  if (nv->nvrtcGetPCHHeapSize != NULL && nv->nvrtcGetPCHHeapSize(&heap) == NVRTC_SUCCESS)
    out.heap_bytes = heap;
  memcpy(info, &out, size);
  info->struct_size = size;
  return JITK_OK;
}
