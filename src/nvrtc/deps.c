/*
 * What a compile reads from disk.
 *
 * NVRTC reports no dependencies, yet a compile reads every header that
 * its #include directives reach through the include path, and a cached
 * kernel is only as fresh as those files. This scanner finds them the way
 * NVRTC's preprocessor looks them up, and records every path it probed:
 * the files found, with an XXH3-128 of their content, and the places
 * looked at where nothing was (a header created there later would be read
 * instead). The cache checks the record again before it serves an entry
 * (src/cache/deps.c).
 *
 * The scan errs on the side of reading more: it follows every #include
 * whatever the #if around it says, takes every definition of a macro that
 * names a header, and treats __has_include as a lookup. A directive
 * it cannot resolve without running the preprocessor (a header named by a
 * macro) makes the record incomplete, and such a compile is not stored on
 * disk.
 *
 * NVRTC's lookup, as measured with NVRTC 13.0 (tests/unit/nvrtc/test_deps.c
 * compiles each case):
 *  - a header given to nvrtcCreateProgram under exactly the name written
 *    wins, and nothing is read from disk for it;
 *  - "name": the folder of the including file (for the program, the folder
 *    of its name; for a header given as a string, the folder of its name;
 *    both relative to the working directory), then each -I folder in order;
 *  - <name>: each -I folder in order;
 *  - -include name: the working directory, then each -I folder;
 *  - an absolute name is read as it is.
 */
#define XXH_STATIC_LINKING_ONLY
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "engine.h"
#include "nvrtc/nvrtc.h"

/* Headers larger than this are refused as unreadable rather than loaded:
 * no sane header comes near it. */
#define JK_DEPS_MAX_FILE ((off_t)256 << 20)
/* How old a CUDA header's change time must be before its record is
 * replayed on the strength of its stat data alone: a file written within
 * the same tick of the file system's clock as it was read may have
 * changed with stat data that look the same. */
#define JK_SCAN_SETTLE_NS 2000000000LL

/*
 * The CUDA headers a compile reads are the same for every compile of an
 * engine (they are checked as unchanging for its life: src/cache/deps.c),
 * and the common ones are large (cuda_fp16.hpp and cuda_bf16.hpp alone
 * are 1.7 MB). So the first scan of each records what its directives do,
 * and later scans of the engine replay that instead of reading the file:
 * a generated fp16 kernel's scan drops from about 2 ms to a few µs. A
 * replay still asks the file system whether the file is as it was read
 * (its stat data, one stat a file): a toolkit updated, or a header of
 * one's own that lies under the CUDA folder (a conda environment's
 * include folder holds both) edited, while the process runs is read
 * again, so that no record the cache stores claims the content read the
 * first time.
 */
typedef struct scan_event {
  char op;    /* 'l' a lookup, 'n' one that looks at every candidate, 'c' a
                macro-named one, 'd' a #define */
  char kind;  /* for lookups: '"' or '<' */
  char *text; /* the name, the operand, or "NAME value" */
} scan_event;

typedef struct recording {
  scan_event *v;
  size_t n, cap;
  bool failed;
} recording;

typedef struct memo_file {
  char *path;
  char state; /* 'F', 'A' or 'O', as in a jk_dep */
  uint8_t hash[16];
  /* For a file: its stat data when it was read, and whether its change
   * time was then old enough (JK_SCAN_SETTLE_NS) for the same stat data
   * to mean the same content. */
  jk_file_stamp stamp;
  bool settled;
  scan_event *events;
  size_t num_events;
  struct memo_file *next;
} memo_file;

struct jk_scan_memo {
  memo_file **buckets;
  size_t num_buckets, count;
};

typedef struct scan_state {
  jitk_engine *e;
  jk_deps *out;
  /* -I folders in order, jitk's own (the CUDA headers) last. */
  const char **dirs;
  size_t num_dirs;
  /* Headers given as strings: the caller's, then jitk's embedded ones the
   * caller did not replace. */
  const char **hname;
  const char **hsrc;
  size_t num_headers;
  bool *header_seen;
  /* Open-addressing set of the paths probed: index into out->v, plus one
   * (zero marks an empty slot). */
  size_t *slots;
  size_t num_slots;
  /* A stack of files still to scan, indices into out->v, and their
   * contents kept until scanned, or the engine's record of a CUDA header
   * scanned before (todo_memo) to replay instead. */
  size_t *todo;
  char **todo_text;
  size_t *todo_len;
  const struct memo_file **todo_memo;
  size_t num_todo, cap_todo;
  /* While a CUDA header is scanned: what it does, for the engine's memo. */
  struct recording *rec;
  /* Object-like macros, every definition seen whatever the #if around
   * it, for headers named by a macro: a chained hash of names. */
  struct macro {
    char *name, *value;
    size_t next; /* index + 1 of the next definition in the chain */
  } *macros;
  size_t num_macros, cap_macros;
  size_t *macro_slots; /* index + 1 of a chain's head */
  size_t num_macro_slots;
  /* Includes named by a macro, resolved once every file is scanned. */
  struct computed {
    char *operand, *dir, *who;
    size_t dir_len;
  } *computed;
  size_t num_computed, cap_computed;
  /* Files scanned, as the folder they lie in (its device and inode) and
   * their name, with what their first scan did (seen_place), and an
   * open-addressing index of them (index + 1, zero marking an empty
   * slot). */
  struct place {
    uint64_t dev, ino, name;
    bool toolkit;          /* first scanned as a CUDA header */
    recording rec;         /* a user file's directives */
    const memo_file *memo; /* a CUDA header's, in the engine's memo */
    size_t spellings;      /* scans under other spellings of its folder */
  } *places;
  size_t num_places, cap_places;
  size_t *place_slots;
  size_t num_place_slots;
  /* The files being scanned, each with the file whose directive reached
   * it, to tell an include cycle: index + 1 of the place and of the
   * parent visit, zero for none. `visit` is the one whose directives are
   * read now; todo_parent the visit that queued each file. */
  struct visit {
    size_t place, parent;
  } *visits;
  size_t num_visits, cap_visits, visit;
  size_t *todo_parent;
  bool oom;
} scan_state;

void jk_deps_hash(const void *data, size_t n, uint8_t out[16]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(data, n));
  memcpy(out, c.digest, 16);
}

void jk_deps_free(jitk_engine *e, jk_deps *d) {
  for (size_t i = 0; i < d->n; i++) jk_free(e, d->v[i].path);
  jk_free(e, d->v);
  jk_free(e, d->unknown);
  memset(d, 0, sizeof *d);
}

void jk_deps_memo_free(jitk_engine *e, jk_scan_memo *m) {
  if (m == NULL) return;
  for (size_t b = 0; b < m->num_buckets; b++) {
    memo_file *f = m->buckets[b];
    while (f != NULL) {
      memo_file *next = f->next;
      for (size_t i = 0; i < f->num_events; i++) jk_free(e, f->events[i].text);
      jk_free(e, f->events);
      jk_free(e, f->path);
      jk_free(e, f);
      f = next;
    }
  }
  jk_free(e, m->buckets);
  jk_free(e, m);
}

/* The engine's record of a CUDA header path, or NULL. Entries are never
 * changed or freed while the engine lives, so the pointer stays good. */
static const memo_file *memo_find(jitk_engine *e, const char *path) {
  jk_nvrtc *nv = &e->nvrtc;
  const memo_file *found = NULL;
  pthread_mutex_lock(&nv->scan_lock);
  jk_scan_memo *m = nv->scan_memo;
  if (m != NULL) {
    size_t h = (size_t)XXH3_64bits(path, strlen(path)) & (m->num_buckets - 1);
    for (const memo_file *f = m->buckets[h]; f != NULL && found == NULL; f = f->next)
      if (strcmp(f->path, path) == 0) found = f;
  }
  pthread_mutex_unlock(&nv->scan_lock);
  return found;
}

/* Keeps a record (taking its events); another thread may have kept one
 * for the path meanwhile, which then stays. Failures only lose a
 * shortcut. */
static void memo_add(jitk_engine *e, const char *path, char state, const uint8_t hash[16],
                     const jk_dep *read, recording *rec) {
  jk_nvrtc *nv = &e->nvrtc;
  memo_file *f = jk_calloc(e, 1, sizeof *f);
  if (f != NULL) f->path = jk_strdup(e, path);
  if (f == NULL || f->path == NULL || (rec != NULL && rec->failed)) {
    if (f != NULL) jk_free(e, f->path);
    jk_free(e, f);
    return;
  }
  f->state = state;
  if (hash) memcpy(f->hash, hash, 16);
  if (read != NULL && read->stamped) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    f->stamp = read->stamp;
    f->settled = jk_timespec_ns(now) - read->stamp.ctime_ns >= JK_SCAN_SETTLE_NS;
  }
  if (rec != NULL) {
    f->events = rec->v;
    f->num_events = rec->n;
    rec->v = NULL;
    rec->n = rec->cap = 0;
  }
  pthread_mutex_lock(&nv->scan_lock);
  jk_scan_memo *m = nv->scan_memo;
  if (m == NULL && (m = jk_calloc(e, 1, sizeof *m)) != NULL) {
    m->num_buckets = 1024;
    m->buckets = jk_calloc(e, m->num_buckets, sizeof(memo_file *));
    if (m->buckets == NULL) {
      jk_free(e, m);
      m = NULL;
    }
    nv->scan_memo = m;
  }
  bool kept = false;
  if (m != NULL) {
    size_t h = (size_t)XXH3_64bits(path, strlen(path)) & (m->num_buckets - 1);
    bool known = false;
    for (memo_file *g = m->buckets[h]; g != NULL && !known; g = g->next)
      known = strcmp(g->path, path) == 0;
    if (!known) {
      f->next = m->buckets[h];
      m->buckets[h] = f;
      m->count++;
      kept = true;
    }
  }
  pthread_mutex_unlock(&nv->scan_lock);
  if (!kept) {
    for (size_t i = 0; i < f->num_events; i++) jk_free(e, f->events[i].text);
    jk_free(e, f->events);
    jk_free(e, f->path);
    jk_free(e, f);
  }
}

static void record(scan_state *s, char op, char kind, const char *text, size_t n) {
  recording *r = s->rec;
  if (r == NULL || r->failed) return;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    scan_event *v = jk_realloc(s->e, r->v, cap * sizeof *v);
    if (v == NULL) {
      r->failed = true;
      return;
    }
    r->v = v;
    r->cap = cap;
  }
  char *t = jk_strndup(s->e, text, n);
  if (t == NULL) {
    r->failed = true;
    return;
  }
  r->v[r->n++] = (scan_event){op, kind, t};
}

static void recording_free(jitk_engine *e, recording *r) {
  for (size_t i = 0; i < r->n; i++) jk_free(e, r->v[i].text);
  jk_free(e, r->v);
  memset(r, 0, sizeof *r);
}

/* Records that the scan cannot know every file read, keeping the first
 * reason. */
static void set_unknown(scan_state *s, const char *fmt, const char *a, const char *b) {
  if (s->out->unknown != NULL) return;
  jk_buf buf;
  jk_buf_init(&buf, s->e);
  jk_buf_printf(&buf, fmt, a, b);
  s->out->unknown = jk_buf_take(&buf);
  if (s->out->unknown == NULL) s->oom = true;
}

static size_t path_hash(const char *p) { return (size_t)XXH3_64bits(p, strlen(p)); }

static bool grow_slots(scan_state *s) {
  size_t n = s->num_slots ? s->num_slots * 2 : 256;
  size_t *v = jk_calloc(s->e, n, sizeof *v);
  if (v == NULL) return false;
  for (size_t i = 0; i < s->num_slots; i++) {
    if (s->slots[i] == 0) continue;
    size_t h = path_hash(s->out->v[s->slots[i] - 1].path) & (n - 1);
    while (v[h] != 0) h = (h + 1) & (n - 1);
    v[h] = s->slots[i];
  }
  jk_free(s->e, s->slots);
  s->slots = v;
  s->num_slots = n;
  return true;
}

/* The record of `path`, or NULL when it was never probed; *slot is where
 * a new one would go. */
static jk_dep *find_probe(scan_state *s, const char *path, size_t *slot) {
  size_t h = path_hash(path) & (s->num_slots - 1);
  while (s->slots[h] != 0) {
    jk_dep *d = &s->out->v[s->slots[h] - 1];
    if (strcmp(d->path, path) == 0) return d;
    h = (h + 1) & (s->num_slots - 1);
  }
  *slot = h;
  return NULL;
}

/* How many spellings of its folder a file is scanned under, besides the
 * first, before the scan gives up on knowing every file read. */
#define JK_DEPS_MAX_SPELLINGS 64

/*
 * The place of the file `path` (its folder the first dir_len bytes): the
 * folder's device and inode, and the name, as index + 1 into s->places,
 * added if new; 0 when the folder cannot be stat'ed (then it counts as
 * new) or memory runs out (s->oom).
 *
 * One file met under several spellings of its folder (a symlink b ->
 * real1 reaches real1/x.h as b/x.h too; a/../b/../a is a) has the same
 * place. Its own lookups are relative to the spelling it was reached by,
 * and NVRTC probes b/y.h for an #include "y.h" in b/x.h, not real1/y.h:
 * the two differ once b is pointed elsewhere. So a file met again under
 * another spelling has its first scan's directives replayed there
 * (replay_spelling), and the record holds both probes. Within its own
 * inclusion (a cycle: a/a.cuh includes "../b/b.cuh", which includes
 * "../a/a.cuh") it is not replayed: include guards stop NVRTC there, and
 * without them the compile never ends, while the scan, which does not
 * evaluate guards, would spell ever longer paths (a/../b/../a/...). The
 * path met is recorded all the same.
 */
static size_t find_place(scan_state *s, const char *path, size_t dir_len) {
  char dir[PATH_MAX];
  if (dir_len >= sizeof dir) return 0;
  memcpy(dir, dir_len ? path : ".", dir_len ? dir_len : 1);
  dir[dir_len ? dir_len : 1] = '\0';
  struct stat st;
  if (stat(dir, &st) != 0) return 0;
  const char *name = path + dir_len + (path[dir_len] == '/');
  struct place p;
  memset(&p, 0, sizeof p);
  p.dev = (uint64_t)st.st_dev;
  p.ino = (uint64_t)st.st_ino;
  p.name = XXH3_64bits(name, strlen(name));
  if (2 * (s->num_places + 1) > s->num_place_slots) {
    size_t n = s->num_place_slots ? s->num_place_slots * 2 : 64;
    size_t *v = jk_calloc(s->e, n, sizeof *v);
    if (v == NULL) {
      s->oom = true;
      return 0;
    }
    for (size_t i = 0; i < s->num_places; i++) {
      size_t h = (size_t)(s->places[i].name ^ s->places[i].ino) & (n - 1);
      while (v[h] != 0) h = (h + 1) & (n - 1);
      v[h] = i + 1;
    }
    jk_free(s->e, s->place_slots);
    s->place_slots = v;
    s->num_place_slots = n;
  }
  size_t h = (size_t)(p.name ^ p.ino) & (s->num_place_slots - 1);
  for (; s->place_slots[h] != 0; h = (h + 1) & (s->num_place_slots - 1)) {
    const struct place *q = &s->places[s->place_slots[h] - 1];
    if (q->name == p.name && q->ino == p.ino && q->dev == p.dev) return s->place_slots[h];
  }
  if (s->num_places == s->cap_places) {
    size_t cap = s->cap_places ? s->cap_places * 2 : 64;
    struct place *v = jk_realloc(s->e, s->places, cap * sizeof *v);
    if (v == NULL) {
      s->oom = true;
      return 0;
    }
    s->places = v;
    s->cap_places = cap;
  }
  s->places[s->num_places++] = p;
  s->place_slots[h] = s->num_places;
  return s->num_places;
}

/* Whether the place `place` is being scanned in the chain of inclusions
 * that led to the visit `v`. */
static bool in_chain(const scan_state *s, size_t v, size_t place) {
  for (; v != 0; v = s->visits[v - 1].parent)
    if (s->visits[v - 1].place == place) return true;
  return false;
}

/* A new visit of `place` reached from `parent`; its index + 1, or 0 for
 * want of memory. */
static size_t add_visit(scan_state *s, size_t place, size_t parent) {
  if (s->num_visits == s->cap_visits) {
    size_t cap = s->cap_visits ? s->cap_visits * 2 : 64;
    struct visit *v = jk_realloc(s->e, s->visits, cap * sizeof *v);
    if (v == NULL) {
      s->oom = true;
      return 0;
    }
    s->visits = v;
    s->cap_visits = cap;
  }
  s->visits[s->num_visits++] = (struct visit){place, parent};
  return s->num_visits;
}

static bool push_todo(scan_state *s, size_t index, char *text, size_t len, const memo_file *memo) {
  if (s->num_todo == s->cap_todo) {
    size_t cap = s->cap_todo ? s->cap_todo * 2 : 32;
    size_t *t = jk_realloc(s->e, s->todo, cap * sizeof *t);
    if (t != NULL) s->todo = t;
    char **tt = t ? jk_realloc(s->e, s->todo_text, cap * sizeof *tt) : NULL;
    if (tt != NULL) s->todo_text = tt;
    size_t *tl = tt ? jk_realloc(s->e, s->todo_len, cap * sizeof *tl) : NULL;
    if (tl != NULL) s->todo_len = tl;
    const memo_file **tm = tl ? jk_realloc(s->e, s->todo_memo, cap * sizeof(memo_file *)) : NULL;
    if (tm != NULL) s->todo_memo = tm;
    size_t *tp = tm ? jk_realloc(s->e, s->todo_parent, cap * sizeof *tp) : NULL;
    if (tp == NULL) return false;
    s->todo_parent = tp;
    s->cap_todo = cap;
  }
  s->todo[s->num_todo] = index;
  s->todo_text[s->num_todo] = text;
  s->todo_len[s->num_todo] = len;
  s->todo_memo[s->num_todo] = memo;
  s->todo_parent[s->num_todo] = s->visit;
  s->num_todo++;
  return true;
}

/* Reads a regular file whole. Returns false when it is not one or cannot
 * be read; *kind says which ('F' read, 'O' something else, 'A' gone). */
static bool read_file(jitk_engine *e, const char *path, char **text, size_t *len, char *kind,
                      struct stat *stp) {
  /* A FIFO put where a header was expected must not hang the scan: it is
   * "something else", as anything but a regular file is. */
  struct stat st;
  int fd = jk_open_regular(path, &st);
  if (fd == -1) {
    *kind = errno == ENOENT || errno == ENOTDIR ? 'A' : 'O';
    return false;
  }
  if (fd == -2 || st.st_size > JK_DEPS_MAX_FILE) {
    if (fd >= 0) close(fd);
    *kind = 'O';
    return false;
  }
  *stp = st;
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *buf = jk_malloc(e, cap);
  if (buf == NULL) {
    close(fd);
    *kind = 'O';
    return false;
  }
  for (;;) {
    if (n + 1 == cap) {
      /* The file grew while being read, or says a size of 0 as /proc's
       * do: it is read to its end, up to the same bound. */
      if ((off_t)n >= JK_DEPS_MAX_FILE) {
        n = (size_t)-1;
        break;
      }
      char *b = jk_realloc(e, buf, cap * 2);
      if (b == NULL) {
        /* Not a hash of part of the file: unreadable. */
        n = (size_t)-1;
        break;
      }
      buf = b;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r < 0) n = (size_t)-1;
      break;
    }
    n += (size_t)r;
  }
  close(fd);
  if (n == (size_t)-1) {
    jk_free(e, buf);
    *kind = 'O';
    return false;
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  *kind = 'F';
  return true;
}

static void stamp_of(jk_dep *d, const struct stat *st) {
  d->stamped = true;
  jk_file_stamp_of(st, &d->stamp);
}

/* Whether `path` still holds what a scan found there: nothing ('A'),
 * something other than a file ('O'), or a file ('F'), which has the stat
 * data `stamp` where that is given. */
static bool as_found(const char *path, char state, const jk_file_stamp *stamp) {
  struct stat st;
  int r = stat(path, &st);
  if (state == 'A') return r != 0 && (errno == ENOENT || errno == ENOTDIR);
  if (state == 'O') return r == 0 && !S_ISREG(st.st_mode);
  if (r != 0 || !S_ISREG(st.st_mode)) return false;
  if (stamp == NULL) return true;
  jk_file_stamp now;
  jk_file_stamp_of(&st, &now);
  return jk_file_stamp_same(&now, stamp);
}

bool jk_deps_unchanged(const jk_deps *d, const char **failed) {
  for (size_t i = 0; i < d->n; i++) {
    const jk_dep *x = &d->v[i];
    if (!as_found(x->path, x->state, x->stamped ? &x->stamp : NULL)) {
      if (failed) *failed = x->path;
      return false;
    }
  }
  return true;
}

/* Whether the engine's record of a CUDA header path still describes what
 * is there: the same kind of thing, and for a file the stat data it was
 * read with, the file having been settled then. */
static bool memo_holds(const memo_file *m, const char *path) {
  if (m->state == 'F' && !m->settled) return false;
  return as_found(path, m->state, m->state == 'F' ? &m->stamp : NULL);
}

static bool under(const char *path, const char *dir) {
  if (dir == NULL) return false;
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Probes `path` once: records what is there and queues a file for
 * scanning. Returns whether a file is there. */
static bool probe(scan_state *s, const char *path) {
  if (s->oom) return false;
  if (s->num_slots == 0 || 2 * (s->out->n + 1) > s->num_slots) {
    if (!grow_slots(s)) {
      s->oom = true;
      return false;
    }
  }
  size_t slot = 0;
  jk_dep *seen = find_probe(s, path, &slot);
  if (seen != NULL) return seen->state == 'F';
  if (s->out->n == s->out->cap) {
    size_t cap = s->out->cap ? s->out->cap * 2 : 32;
    jk_dep *v = jk_realloc(s->e, s->out->v, cap * sizeof *v);
    if (v == NULL) {
      s->oom = true;
      return false;
    }
    s->out->v = v;
    s->out->cap = cap;
  }
  jk_dep *d = &s->out->v[s->out->n];
  memset(d, 0, sizeof *d);
  d->path = jk_strdup(s->e, path);
  if (d->path == NULL) {
    s->oom = true;
    return false;
  }
  char *text = NULL;
  size_t len = 0;
  char kind = 'A';
  d->toolkit = under(path, s->e->nvrtc.include_dir) || under(path, s->e->nvrtc.cccl_dir);
  const memo_file *memo = d->toolkit ? memo_find(s->e, path) : NULL;
  if (memo != NULL && !memo_holds(memo, path)) memo = NULL; /* changed: read it again */
  bool found;
  if (memo != NULL) {
    kind = memo->state;
    found = kind == 'F';
    memcpy(d->hash, memo->hash, 16);
    d->stamped = found;
    d->stamp = memo->stamp;
  } else {
    struct stat st;
    found = read_file(s->e, path, &text, &len, &kind, &st);
    if (found) {
      jk_deps_hash(text, len, d->hash);
      stamp_of(d, &st);
    }
    /* A CUDA header place found empty stays so for the engine's life. */
    if (!found && d->toolkit) memo_add(s->e, path, kind, NULL, NULL, NULL);
  }
  d->state = kind;
  d->hashed = found;
  size_t index = s->out->n++;
  s->slots[slot] = index + 1;
  if (found && !push_todo(s, index, text, len, memo)) {
    jk_free(s->e, text);
    s->oom = true;
  }
  return found;
}

/* "dir/name", or name alone when dir is empty. */
static char *join(jitk_engine *e, const char *dir, size_t dir_len, const char *name) {
  jk_buf b;
  jk_buf_init(&b, e);
  if (dir_len > 0) {
    jk_buf_append(&b, dir, dir_len);
    if (dir[dir_len - 1] != '/') jk_buf_puts(&b, "/");
  }
  jk_buf_puts(&b, name);
  return jk_buf_take(&b);
}

static bool probe_in(scan_state *s, const char *dir, size_t dir_len, const char *name) {
  char *p = join(s->e, dir, dir_len, name);
  if (p == NULL) {
    s->oom = true;
    return false;
  }
  bool found = probe(s, p);
  jk_free(s->e, p);
  return found;
}

static void scan_text(scan_state *s, const char *text, size_t len, const char *dir, size_t dir_len,
                      const char *who);

/* One #include (or __has_include) of `name`. kind: '"' quoted, '<' angle,
 * 'p' a -include option; `dir` is the including file's folder, NULL where
 * NVRTC does not look there (the program's, under -no-source-include).
 * The lookup stops at the first file found, as NVRTC's does (the order is
 * tested against NVRTC), unless `all`: #include_next starts after the
 * folder its file came from, which is simplest to cover by looking at
 * every candidate. */
static void lookup_in(scan_state *s, char kind, const char *name, const char *dir, size_t dir_len,
                      bool all) {
  if (*name == '\0') return;
  for (size_t i = 0; i < s->num_headers; i++) {
    if (strcmp(s->hname[i], name) != 0) continue;
    /* A header given as a string: nothing on disk is read for this name,
     * but its own includes are looked up from the folder of its name. */
    if (!s->header_seen[i]) {
      s->header_seen[i] = true;
      const char *slash = strrchr(s->hname[i], '/');
      size_t n = slash ? (size_t)(slash - s->hname[i]) + (slash == s->hname[i]) : 0;
      /* The string header's own directives belong to it, not to a CUDA
       * header being recorded. */
      recording *saved = s->rec;
      s->rec = NULL;
      scan_text(s, s->hsrc[i], strlen(s->hsrc[i]), s->hname[i], n, s->hname[i]);
      s->rec = saved;
    }
    return;
  }
  if (name[0] == '/') {
    probe(s, name);
    return;
  }
  bool found = false;
  if (kind == '"' && dir != NULL) found = probe_in(s, dir, dir_len, name);
  if (kind == 'p') found = probe(s, name);
  for (size_t i = 0; i < s->num_dirs && !s->oom && (all || !found); i++)
    found = probe_in(s, s->dirs[i], strlen(s->dirs[i]), name) || found;
}

static void lookup(scan_state *s, char kind, const char *name, const char *dir, size_t dir_len) {
  lookup_in(s, kind, name, dir, dir_len, false);
}

static bool ident_char(char c) {
  return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

/* Whether out[0..o) ends inside a preprocessing number (1'000), where a
 * quote is a digit separator, not a character literal. */
static bool ends_in_number(const char *out, size_t o) {
  size_t k = o;
  while (k > 0 && (ident_char(out[k - 1]) || out[k - 1] == '.' || out[k - 1] == '\'')) k--;
  if (k == o) return false;
  char first = (char)(out[k] == '.' && k + 1 < o ? out[k + 1] : out[k]);
  return first >= '0' && first <= '9';
}

/* Whether out[0..o) ends with a raw string prefix: R, u8R, uR, UR, LR. */
static bool ends_in_raw_prefix(const char *out, size_t o) {
  size_t k = o;
  while (k > 0 && ident_char(out[k - 1])) k--;
  size_t n = o - k;
  const char *p = out + k;
  return (n == 1 && p[0] == 'R') || (n == 2 && p[1] == 'R' && strchr("uUL", p[0]) != NULL) ||
         (n == 3 && p[0] == 'u' && p[1] == '8' && p[2] == 'R');
}

/*
 * Translation phases 1-3, as far as directives need them: line splices
 * removed, each comment replaced by one space (a comment spanning lines
 * joins them, as the preprocessor does), and literals copied whole so that
 * comment markers inside them stay text. Raw strings become "" since their
 * lines are not source lines. The result is as long as the input at most.
 * Runs of ordinary characters are copied in one go: headers such as
 * cuda_fp16.hpp are large, and every compile scans them.
 */
static char *clean(jitk_engine *e, const char *in, size_t len, size_t *out_len) {
  char *out = jk_malloc(e, len + 1);
  if (out == NULL) return NULL;
  size_t o = 0, i = 0;
  while (i < len) {
    /* strcspn finds the next character that matters quickly (the text is
     * NUL-terminated; a NUL inside it is an ordinary character). */
    size_t run = i;
    for (;;) {
      run += strcspn(in + run, "\\/\"'");
      if (run >= len || in[run] != '\0') break;
      run++;
    }
    if (run > len) run = len;
    memcpy(out + o, in + i, run - i);
    o += run - i;
    i = run;
    if (i >= len) break;
    char c = in[i];
    if (c == '\\' && i + 1 < len && (in[i + 1] == '\n' || in[i + 1] == '\r')) {
      i += 2;
      if (in[i - 1] == '\r' && i < len && in[i] == '\n') i++;
      continue;
    }
    if (c == '/' && i + 1 < len && in[i + 1] == '/') {
      /* A line comment ends at the newline, which stays; a splice just
       * before it continues it. */
      i += 2;
      for (;;) {
        const char *nl = memchr(in + i, '\n', len - i);
        if (nl == NULL) {
          i = len;
          break;
        }
        i = (size_t)(nl - in);
        size_t k = i;
        if (k > 0 && in[k - 1] == '\r') k--;
        if (k > 0 && in[k - 1] == '\\') {
          i++;
          continue;
        }
        break;
      }
      out[o++] = ' ';
      continue;
    }
    if (c == '/' && i + 1 < len && in[i + 1] == '*') {
      /* The closing slash is rarer than a star in comments that draw
       * boxes of them, so it is the one searched for. */
      size_t from = i + 2, end_at = len;
      while (from < len) {
        const char *slash = memchr(in + from, '/', len - from);
        if (slash == NULL) break;
        size_t k = (size_t)(slash - in);
        if (k >= i + 3 && in[k - 1] == '*') {
          end_at = k + 1;
          break;
        }
        from = k + 1;
      }
      i = end_at;
      out[o++] = ' ';
      continue;
    }
    if (c == '"' && ends_in_raw_prefix(out, o)) {
      size_t d0 = i + 1, d = d0;
      while (d < len && d - d0 <= 16 && in[d] != '(' && in[d] != '"' && in[d] != '\n') d++;
      if (d < len && in[d] == '(') {
        size_t dl = d - d0, j = d + 1;
        while (j < len && !(in[j] == ')' && j + 1 + dl < len &&
                            memcmp(in + j + 1, in + d0, dl) == 0 && in[j + 1 + dl] == '"'))
          j++;
        i = j < len ? j + dl + 2 : len;
        out[o++] = '"';
        out[o++] = '"';
        continue;
      }
    }
    if (c == '"' || (c == '\'' && !ends_in_number(out, o))) {
      /* An ordinary literal: copied to its end or to the end of the line
       * (an unterminated one is an error NVRTC reports; it ends there). */
      out[o++] = in[i++];
      while (i < len && in[i] != c && in[i] != '\n') {
        if (in[i] == '\\' && i + 1 < len) {
          if (in[i + 1] == '\n') {
            i += 2;
            continue;
          }
          out[o++] = in[i++];
        }
        out[o++] = in[i++];
      }
      if (i < len && in[i] == c) out[o++] = in[i++];
      continue;
    }
    out[o++] = in[i++];
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\f' || *p == '\v' || *p == '\r')) p++;
  return p;
}

/* Reads "name" or <name> at p; returns the kind ('"' or '<') and copies
 * the name, or 0 when something else (a macro) is there. */
static char header_name(const char *p, const char *end, char *name, size_t cap) {
  if (p >= end || (*p != '"' && *p != '<')) return 0;
  char close = *p == '"' ? '"' : '>';
  const char *q = p + 1;
  while (q < end && *q != close) q++;
  if (q >= end || (size_t)(q - p - 1) >= cap) return 0;
  memcpy(name, p + 1, (size_t)(q - p - 1));
  name[q - p - 1] = '\0';
  return *p;
}

static bool word_at(const char *p, const char *end, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(end - p) < n || memcmp(p, w, n) != 0) return false;
  return p + n >= end || !ident_char(p[n]);
}

static size_t name_hash(const char *p, size_t n) { return (size_t)XXH3_64bits(p, n); }

/* The first definition of the macro p[0..n), or NULL. */
static struct macro *find_macro(scan_state *s, const char *p, size_t n) {
  if (s->num_macro_slots == 0) return NULL;
  size_t h = name_hash(p, n) & (s->num_macro_slots - 1);
  for (; s->macro_slots[h] != 0; h = (h + 1) & (s->num_macro_slots - 1)) {
    struct macro *m = &s->macros[s->macro_slots[h] - 1];
    if (strlen(m->name) == n && memcmp(m->name, p, n) == 0) return m;
  }
  return NULL;
}

/* Records `#define NAME value` (object-like); p is at NAME. */
static void add_macro(scan_state *s, const char *p, const char *end) {
  const char *n0 = p;
  while (p < end && ident_char(*p)) p++;
  size_t n = (size_t)(p - n0);
  if (n == 0 || s->oom) return;
  const char *v = skip_ws(p, end), *ve = end;
  while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r')) ve--;
  if (s->num_macros == s->cap_macros) {
    size_t cap = s->cap_macros ? s->cap_macros * 2 : 256;
    struct macro *m = jk_realloc(s->e, s->macros, cap * sizeof *m);
    if (m == NULL) {
      s->oom = true;
      return;
    }
    s->macros = m;
    s->cap_macros = cap;
  }
  if (2 * (s->num_macros + 1) > s->num_macro_slots) {
    size_t slots = s->num_macro_slots ? s->num_macro_slots * 2 : 1024;
    size_t *v2 = jk_calloc(s->e, slots, sizeof *v2);
    if (v2 == NULL) {
      s->oom = true;
      return;
    }
    for (size_t i = 0; i < s->num_macro_slots; i++) {
      if (s->macro_slots[i] == 0) continue;
      const char *mn = s->macros[s->macro_slots[i] - 1].name;
      size_t h = name_hash(mn, strlen(mn)) & (slots - 1);
      while (v2[h] != 0) h = (h + 1) & (slots - 1);
      v2[h] = s->macro_slots[i];
    }
    jk_free(s->e, s->macro_slots);
    s->macro_slots = v2;
    s->num_macro_slots = slots;
  }
  struct macro *m = &s->macros[s->num_macros];
  m->name = jk_strndup(s->e, n0, n);
  m->value = jk_strndup(s->e, v, (size_t)(ve - v));
  m->next = 0;
  if (m->name == NULL || m->value == NULL) {
    jk_free(s->e, m->name);
    jk_free(s->e, m->value);
    s->oom = true;
    return;
  }
  size_t index = ++s->num_macros;
  struct macro *head = find_macro(s, n0, n);
  if (head != NULL && head != m) {
    /* Another definition of a known name: chained behind the first. */
    while (head->next != 0) head = &s->macros[head->next - 1];
    head->next = index;
    return;
  }
  size_t h = name_hash(n0, n) & (s->num_macro_slots - 1);
  while (s->macro_slots[h] != 0) h = (h + 1) & (s->num_macro_slots - 1);
  s->macro_slots[h] = index;
}

static void add_computed(scan_state *s, const char *p, const char *end, const char *dir,
                         size_t dir_len, const char *who) {
  if (s->oom) return;
  if (s->num_computed == s->cap_computed) {
    size_t cap = s->cap_computed ? s->cap_computed * 2 : 16;
    struct computed *c = jk_realloc(s->e, s->computed, cap * sizeof *c);
    if (c == NULL) {
      s->oom = true;
      return;
    }
    s->computed = c;
    s->cap_computed = cap;
  }
  struct computed *c = &s->computed[s->num_computed];
  const char *pe = end;
  while (pe > p && (pe[-1] == ' ' || pe[-1] == '\t' || pe[-1] == '\r')) pe--;
  c->operand = jk_strndup(s->e, p, (size_t)(pe - p));
  c->dir = dir ? jk_strndup(s->e, dir, dir_len) : NULL;
  c->who = jk_strdup(s->e, who);
  c->dir_len = dir_len;
  if (c->operand == NULL || (dir != NULL && c->dir == NULL) || c->who == NULL) {
    jk_free(s->e, c->operand);
    jk_free(s->e, c->dir);
    jk_free(s->e, c->who);
    s->oom = true;
    return;
  }
  s->num_computed++;
}

/* How many spellings one macro-named include may expand to before the
 * scan gives up on it (Thrust's reach a few dozen). */
#define JK_DEPS_MAX_EXPANSIONS 256

typedef struct expansions {
  char **v;
  size_t n;
  bool failed; /* too many, too deep, or a function-like macro */
} expansions;

static void expansions_free(jitk_engine *e, expansions *x) {
  for (size_t i = 0; i < x->n; i++) jk_free(e, x->v[i]);
  jk_free(e, x->v);
  x->v = NULL;
  x->n = 0;
}

/* Every text `text` can become when each identifier that names a macro
 * is replaced by any of its definitions, again and again (the
 * definitions of all #if branches are taken, so the result holds what the
 * preprocessor makes, and more). */
static void expand(scan_state *s, const char *text, int depth, expansions *out) {
  out->v = jk_calloc(s->e, 1, sizeof *out->v);
  out->n = 0;
  if (out->v == NULL || (out->v[0] = jk_strdup(s->e, "")) == NULL) {
    s->oom = true;
    out->failed = true;
    return;
  }
  out->n = 1;
  const char *p = text;
  while (*p && !out->failed && !s->oom) {
    const char *q = p;
    expansions sub = {NULL, 0, false};
    char *lit = NULL;
    if (ident_char(*p) && !(*p >= '0' && *p <= '9')) {
      while (ident_char(*q)) q++;
      struct macro *m = find_macro(s, p, (size_t)(q - p));
      const char *after = q;
      while (*after == ' ' || *after == '\t') after++;
      if (m != NULL) {
        if (depth >= 16) {
          out->failed = true;
          break;
        }
        /* All definitions, each expanded in turn. */
        sub.v = NULL;
        for (; m != NULL && !out->failed; m = m->next ? &s->macros[m->next - 1] : NULL) {
          expansions one = {NULL, 0, false};
          expand(s, m->value, depth + 1, &one);
          if (one.failed || s->oom) {
            out->failed = true;
            expansions_free(s->e, &one);
            break;
          }
          char **v = jk_realloc(s->e, sub.v, (sub.n + one.n) * sizeof *v);
          if (v == NULL) {
            s->oom = true;
            expansions_free(s->e, &one);
            break;
          }
          sub.v = v;
          memcpy(sub.v + sub.n, one.v, one.n * sizeof *v);
          sub.n += one.n;
          jk_free(s->e, one.v);
        }
      } else if (*after == '(') {
        /* Likely a function-like macro, which the scan does not apply. */
        out->failed = true;
        break;
      }
    } else {
      while (*q && !(ident_char(*q) && !(*q >= '0' && *q <= '9'))) q++;
      if (q == p) q++;
    }
    if (sub.v == NULL) {
      lit = jk_strndup(s->e, p, (size_t)(q - p));
      if (lit == NULL) {
        s->oom = true;
        break;
      }
      sub.v = &lit;
      sub.n = 1;
    }
    if (!out->failed && !s->oom) {
      size_t total = out->n * sub.n;
      if (total > JK_DEPS_MAX_EXPANSIONS) {
        out->failed = true;
      } else {
        char **v = jk_calloc(s->e, total ? total : 1, sizeof *v);
        if (v == NULL) s->oom = true;
        for (size_t a = 0; v != NULL && a < out->n; a++)
          for (size_t b = 0; b < sub.n; b++) {
            jk_buf bb;
            jk_buf_init(&bb, s->e);
            jk_buf_puts(&bb, out->v[a]);
            jk_buf_puts(&bb, sub.v[b]);
            if ((v[a * sub.n + b] = jk_buf_take(&bb)) == NULL) s->oom = true;
          }
        if (v != NULL) {
          expansions_free(s->e, out);
          out->v = v;
          out->n = total;
        }
      }
    }
    if (lit != NULL)
      jk_free(s->e, lit);
    else
      expansions_free(s->e, &sub);
    p = q;
  }
  if (s->oom) out->failed = true;
}

/* Resolves the includes named by macros with every definition seen so
 * far; returns whether that probed anything new. */
static bool resolve_computed(scan_state *s) {
  size_t before = s->out->n;
  char name[4096];
  for (size_t i = 0; i < s->num_computed && !s->oom && s->out->unknown == NULL; i++) {
    struct computed *c = &s->computed[i];
    expansions x = {NULL, 0, false};
    expand(s, c->operand, 0, &x);
    for (size_t j = 0; j < x.n && !x.failed; j++) {
      const char *t = x.v[j];
      while (*t == ' ' || *t == '\t') t++;
      size_t n = strlen(t);
      while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
      char kind = header_name(t, t + n, name, sizeof name);
      if (kind == 0 || (size_t)(strlen(name) + 2) != n) {
        x.failed = true;
        break;
      }
      /* Spaces between the tokens after < and before > are not part of
       * the name. */
      char *nm = name;
      size_t nl = strlen(nm);
      while (*nm == ' ') nm++, nl--;
      while (nl > 0 && nm[nl - 1] == ' ') nm[--nl] = '\0';
      lookup(s, kind, nm, c->dir, c->dir_len);
    }
    if (x.failed && !s->oom)
      set_unknown(s, "%s names a header by a macro that jitk cannot follow (%s)", c->who,
                  c->operand);
    expansions_free(s->e, &x);
  }
  return s->out->n != before;
}

/* What a directive does, recorded when a CUDA header is being scanned for
 * the engine's memo (replay below does the same from the record). */
static void ev_lookup(scan_state *s, char kind, const char *name, const char *dir, size_t dir_len,
                      bool all) {
  record(s, all ? 'n' : 'l', kind, name, strlen(name));
  lookup_in(s, kind, name, dir, dir_len, all);
}

static void ev_computed(scan_state *s, const char *p, const char *end, const char *dir,
                        size_t dir_len, const char *who) {
  record(s, 'c', 0, p, (size_t)(end - p));
  add_computed(s, p, end, dir, dir_len, who);
}

static void ev_define(scan_state *s, const char *p, const char *end) {
  record(s, 'd', 0, p, (size_t)(end - p));
  add_macro(s, p, end);
}

/* Does again what a file's directives did (`events`), for the file in the
 * folder `dir`; its definitions only where `defines` (a file met again
 * under another spelling has added them already). */
static void replay_events(scan_state *s, const scan_event *events, size_t num_events,
                          const char *dir, size_t dir_len, const char *who, bool defines) {
  for (size_t i = 0; i < num_events && !s->oom; i++) {
    const scan_event *ev = &events[i];
    const char *t = ev->text, *end = t + strlen(t);
    switch (ev->op) {
      case 'l': lookup_in(s, ev->kind, t, dir, dir_len, false); break;
      case 'n': lookup_in(s, ev->kind, t, dir, dir_len, true); break;
      case 'c': add_computed(s, t, end, dir, dir_len, who); break;
      case 'd':
        if (defines) add_macro(s, t, end);
        break;
      default: break;
    }
  }
}

static void replay(scan_state *s, const memo_file *f, const char *dir, size_t dir_len,
                   const char *who) {
  replay_events(s, f->events, f->num_events, dir, dir_len, who, true);
}

/* One directive line (after its '#'). */
static void directive(scan_state *s, const char *p, const char *end, const char *dir,
                      size_t dir_len, const char *who) {
  char name[4096];
  p = skip_ws(p, end);
  if (word_at(p, end, "include") || word_at(p, end, "include_next") || word_at(p, end, "import")) {
    bool next = word_at(p, end, "include_next");
    while (p < end && *p != ' ' && *p != '\t' && *p != '"' && *p != '<') p++;
    p = skip_ws(p, end);
    char kind = header_name(p, end, name, sizeof name);
    if (kind == 0)
      ev_computed(s, p, end, dir, dir_len, who);
    else
      ev_lookup(s, kind, name, dir, dir_len, next);
    return;
  }
  /* A function-like macro's parameters: a __has_include of one of them
   * is a wrapper (CCCL's _CCCL_HAS_INCLUDE(_X)), resolved where it is
   * used, which the pattern below catches. */
  const char *params = NULL, *params_end = NULL;
  if (word_at(p, end, "define")) {
    const char *q = skip_ws(p + 6, end);
    while (q < end && ident_char(*q)) q++;
    if (q < end && *q == '(') {
      params = q + 1;
      params_end = memchr(params, ')', (size_t)(end - params));
    }
  }
  for (const char *q = p; q < end && !s->oom; q++) {
    if (*q != '(') continue;
    /* The identifier before the parenthesis: __has_include, or any macro
     * that may wrap it. _Pragma("...") and friends take text, not names. */
    const char *id_end = q;
    while (id_end > p && (id_end[-1] == ' ' || id_end[-1] == '\t')) id_end--;
    const char *id = id_end;
    while (id > p && ident_char(id[-1])) id--;
    size_t idn = (size_t)(id_end - id);
    if (idn == 0) continue;
    bool has_next = idn == 18 && memcmp(id, "__has_include_next", 18) == 0;
    bool has_include = (idn == 13 && memcmp(id, "__has_include", 13) == 0) || has_next;
    const char *r = skip_ws(q + 1, end);
    char kind = header_name(r, end, name, sizeof name);
    if (kind != 0) {
      const char *after = skip_ws(r + strlen(name) + 2, end);
      bool plain = after < end && *after == ')' && strpbrk(name, " \t") == NULL;
      bool pragma = (idn == 7 && memcmp(id, "_Pragma", 7) == 0) ||
                    (idn == 7 && memcmp(id, "message", 7) == 0);
      if ((has_include || plain) && !pragma) ev_lookup(s, kind, name, dir, dir_len, has_next);
      continue;
    }
    if (!has_include) continue;
    const char *a = r;
    while (a < end && ident_char(*a)) a++;
    bool is_param = false;
    if (params != NULL && params_end != NULL && a > r) {
      for (const char *t = params; t < params_end;) {
        while (t < params_end && !ident_char(*t)) t++;
        const char *t0 = t;
        while (t < params_end && ident_char(*t)) t++;
        if ((size_t)(t - t0) == (size_t)(a - r) && memcmp(t0, r, (size_t)(a - r)) == 0)
          is_param = true;
      }
    }
    if (!is_param) {
      const char *close = memchr(r, ')', (size_t)(end - r));
      ev_computed(s, r, close ? close : end, dir, dir_len, who);
    }
  }
  if (params == NULL && word_at(p, end, "define")) ev_define(s, skip_ws(p + 6, end), end);
}

/* Trigraphs: "??" and one of `trigraph_from`, which translation phase 1
 * replaces by the character at the same place in `trigraph_to` under
 * -std=c++14 and earlier (NVRTC honours them there: ??=include is an
 * #include, ??/ at a line's end a splice) and leaves as text from C++17
 * on. */
static const char trigraph_from[] = "=/'()!<>-", trigraph_to[] = "#\\^[]|{}~";

static bool has_trigraph(const char *t, size_t len) {
  for (const char *p = t, *end = t + len; p + 2 < end;) {
    const char *q = memchr(p, '?', (size_t)(end - p - 2));
    if (q == NULL) return false;
    if (q[1] == '?' && q[2] != '\0' && strchr(trigraph_from, q[2]) != NULL) return true;
    p = q + 1;
  }
  return false;
}

/* The text with its trigraphs replaced; no longer than the text. */
static char *replace_trigraphs(jitk_engine *e, const char *in, size_t len, size_t *out_len) {
  char *out = jk_malloc(e, len + 1);
  if (out == NULL) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    const char *r = i + 2 < len && in[i] == '?' && in[i + 1] == '?' && in[i + 2] != '\0'
                        ? strchr(trigraph_from, in[i + 2])
                        : NULL;
    if (r != NULL) {
      out[o++] = trigraph_to[r - trigraph_from];
      i += 2;
    } else {
      out[o++] = in[i];
    }
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}

static void scan_once(scan_state *s, const char *text, size_t len, const char *dir, size_t dir_len,
                      const char *who) {
  size_t n = 0;
  char *c = clean(s->e, text, len, &n);
  if (c == NULL) {
    s->oom = true;
    return;
  }
  const char *p = c, *end = c + n;
  while (p < end && !s->oom) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL) eol = end;
    const char *q = skip_ws(p, eol);
    if (q < eol && *q == '#')
      directive(s, q + 1, eol, dir, dir_len, who);
    else if (q + 1 < eol && q[0] == '%' && q[1] == ':')
      directive(s, q + 2, eol, dir, dir_len, who);
    p = eol + 1;
  }
  jk_free(s->e, c);
}

/* A text's directives. One holding trigraphs is scanned as read both with
 * and without them, since whether NVRTC replaces them depends on the
 * language standard, and so the record holds what either reading
 * reaches. */
static void scan_text(scan_state *s, const char *text, size_t len, const char *dir, size_t dir_len,
                      const char *who) {
  scan_once(s, text, len, dir, dir_len, who);
  if (s->oom || !has_trigraph(text, len)) return;
  size_t n = 0;
  char *t = replace_trigraphs(s->e, text, len, &n);
  if (t == NULL) {
    s->oom = true;
    return;
  }
  scan_once(s, t, n, dir, dir_len, who);
  jk_free(s->e, t);
}

/* Options that name files or folders NVRTC reads. In "-Idir" NVRTC skips
 * spaces (not tabs) between -I and the folder ("-I inc" reads inc, "-I
 * \tinc" a folder "\tinc"); after an '=' the value is taken as written
 * ("--include-path= inc" is the folder " inc"), as measured with NVRTC
 * 13.0. */
static const char *option_value(const char *opt, const char *const *names) {
  for (const char *const *n = names; *n; n++) {
    size_t l = strlen(*n);
    if (strncmp(opt, *n, l) == 0) {
      if (opt[l] == '=') return opt + l + 1;
      if ((*n)[1] != '-' && (*n)[l - 1] == 'I') { /* -Idir */
        const char *v = opt + l;
        while (*v == ' ') v++;
        return v;
      }
    }
  }
  return NULL;
}

jitk_status jk_deps_scan(jitk_engine *e, const jk_compile_input *in, char **opts, size_t nopts,
                         jk_deps *out) {
  static const char *const include_opts[] = {"-I", "--include-path", NULL};
  static const char *const pre_opts[] = {"-include", "--pre-include", "--preinclude", NULL};
  /* A caller's own precompiled headers are read from files NVRTC chooses
   * (-pch) or the caller names, made from headers NVRTC does not compare
   * with what they hold now: what such a compile depends on cannot be told
   * from its sources. jitk's own (pch.c) never come through here: they are
   * added after the key and this scan, each file is made from exactly the
   * headers this record lists, and the image is the same bytes. Options
   * that only say where or how verbosely (--pch-dir, --pch-messages) read
   * nothing by themselves. */
  static const char *const pch_opts[] = {"-pch",     "--pch",     "-create-pch", "--create-pch",
                                         "-use-pch", "--use-pch", NULL};
  memset(out, 0, sizeof *out);
  scan_state s;
  memset(&s, 0, sizeof s);
  s.e = e;
  s.out = out;
  jitk_status st = JITK_OK;
  size_t nh = in->num_headers + jk_num_embedded_headers;
  s.dirs = jk_calloc(e, nopts + 1, sizeof *s.dirs);
  s.hname = jk_calloc(e, nh + 1, sizeof *s.hname);
  s.hsrc = jk_calloc(e, nh + 1, sizeof *s.hsrc);
  s.header_seen = jk_calloc(e, nh + 1, sizeof *s.header_seen);
  const char **pre = jk_calloc(e, nopts + 1, sizeof *pre);
  size_t npre = 0;
  if (s.dirs == NULL || s.hname == NULL || s.hsrc == NULL || s.header_seen == NULL || pre == NULL) {
    s.oom = true;
    goto done;
  }
  bool no_source_include = false;
  for (size_t i = 0; i < nopts; i++) {
    const char *v;
    bool separate = i + 1 < nopts;
    if (strcmp(opts[i], "-no-source-include") == 0 || strcmp(opts[i], "--no-source-include") == 0)
      no_source_include = true;
    if (strcmp(opts[i], "-I") == 0 || strcmp(opts[i], "--include-path") == 0) {
      if (separate) s.dirs[s.num_dirs++] = opts[++i];
    } else if ((v = option_value(opts[i], include_opts)) != NULL) {
      s.dirs[s.num_dirs++] = v;
    } else if (strcmp(opts[i], "-include") == 0 || strcmp(opts[i], "--pre-include") == 0) {
      if (separate) pre[npre++] = opts[++i];
    } else if ((v = option_value(opts[i], pre_opts)) != NULL) {
      pre[npre++] = v;
    } else if (strncmp(opts[i], "-D", 2) == 0 || strncmp(opts[i], "--define-macro", 14) == 0) {
      /* -DNAME=VALUE defines what a macro-named include may use; NVRTC
       * also takes -D and --define-macro with the definition as the next
       * option. */
      const char *d = opts[i][1] == 'D' ? opts[i] + 2 : opts[i] + 14;
      /* NVRTC takes "-D=NAME" and "-D NAME" as "-DNAME" (measured). */
      if (*d == '=') d++;
      while (*d == ' ' || *d == '\t') d++;
      if (*d == '\0') {
        if (!separate) continue;
        d = opts[++i];
      }
      const char *eq = strchr(d, '=');
      const char *paren = strchr(d, '(');
      if (paren != NULL && (eq == NULL || paren < eq)) continue; /* function-like */
      jk_buf b;
      jk_buf_init(&b, e);
      if (eq != NULL) {
        jk_buf_append(&b, d, (size_t)(eq - d));
        jk_buf_printf(&b, " %s", eq + 1);
      } else {
        jk_buf_printf(&b, "%s 1", d);
      }
      char *def = jk_buf_take(&b);
      if (def == NULL) {
        s.oom = true;
        goto done;
      }
      add_macro(&s, def, def + strlen(def));
      jk_free(e, def);
    } else {
      for (const char *const *p = pch_opts; *p; p++) {
        size_t l = strlen(*p);
        if (strncmp(opts[i], *p, l) == 0 && (opts[i][l] == '\0' || opts[i][l] == '='))
          set_unknown(&s, "option %s makes NVRTC read precompiled headers%s", opts[i], "");
      }
    }
  }
  for (size_t i = 0; i < in->num_headers; i++) {
    if (in->headers[i].name == NULL || in->headers[i].source == NULL) continue;
    s.hname[s.num_headers] = in->headers[i].name;
    s.hsrc[s.num_headers++] = in->headers[i].source;
  }
  for (size_t i = 0; i < jk_num_embedded_headers; i++) {
    bool replaced = false;
    for (size_t j = 0; j < in->num_headers && !replaced; j++)
      replaced =
          in->headers[j].name && strcmp(in->headers[j].name, jk_embedded_headers[i].name) == 0;
    if (replaced) continue;
    s.hname[s.num_headers] = jk_embedded_headers[i].name;
    s.hsrc[s.num_headers++] = (const char *)jk_embedded_headers[i].data;
  }
  for (size_t i = 0; i < npre && !s.oom; i++) lookup(&s, 'p', pre[i], "", 0);
  const char *pname = in->program_name ? in->program_name : "module.cu";
  const char *slash = strrchr(pname, '/');
  size_t plen = slash ? (size_t)(slash - pname) + (slash == pname) : 0;
  /* -no-source-include: NVRTC does not look beside the program. */
  scan_text(&s, in->source, strlen(in->source), no_source_include ? NULL : pname, plen, pname);
  /* Depth first through what was found; each file is scanned once. Then
   * the includes named by macros, with every definition found, which may
   * find more files, until nothing new turns up. */
  for (;;) {
    while (s.num_todo > 0 && !s.oom) {
      s.num_todo--;
      size_t index = s.todo[s.num_todo];
      char *text = s.todo_text[s.num_todo];
      size_t len = s.todo_len[s.num_todo];
      const memo_file *memo = s.todo_memo[s.num_todo];
      /* The path is copied: scanning may grow (move) the record array. */
      char *path = jk_strdup(e, out->v[index].path);
      bool toolkit = out->v[index].toolkit;
      uint8_t hash[16];
      memcpy(hash, out->v[index].hash, 16);
      jk_dep read = out->v[index]; /* its stamp, for the memo */
      if (path == NULL) {
        jk_free(e, text);
        s.oom = true;
        break;
      }
      const char *sl = strrchr(path, '/');
      size_t dl = sl ? (size_t)(sl - path) + (sl == path) : 0;
      size_t parent = s.todo_parent[s.num_todo];
      size_t pi = find_place(&s, path, dl);
      struct place *pl = pi ? &s.places[pi - 1] : NULL;
      /* Met again within its own inclusion, or as a CUDA header again
       * (those are the toolkit's, which does not play such games with its
       * folders): recorded, not scanned (find_place says why). */
      if (s.oom || (pl != NULL && pl->spellings > 0 &&
                    (in_chain(&s, parent, pi) || (toolkit && pl->toolkit)))) {
        jk_free(e, text);
        jk_free(e, path);
        continue;
      }
      s.visit = add_visit(&s, pi, parent);
      if (s.oom) {
        jk_free(e, text);
        jk_free(e, path);
        break;
      }
      if (pl != NULL && pl->spellings > 0) {
        /* Another spelling of a folder scanned before. */
        if (++pl->spellings > JK_DEPS_MAX_SPELLINGS + 1)
          set_unknown(&s, "%s is reached under too many spellings of its folder%s", path, "");
        else if (pl->memo != NULL)
          replay_events(&s, pl->memo->events, pl->memo->num_events, path, dl, path, false);
        else
          replay_events(&s, pl->rec.v, pl->rec.n, path, dl, path, false);
      } else {
        recording rec;
        memset(&rec, 0, sizeof rec);
        if (memo != NULL) {
          replay(&s, memo, path, dl, path);
        } else {
          /* Every file's directives are kept while the scan lasts, for
           * other spellings of its folder; a CUDA header's go into the
           * engine's memo. */
          s.rec = &rec;
          scan_text(&s, text, len, path, dl, path);
          s.rec = NULL;
          if (rec.failed) s.oom = true;
          if (toolkit && !s.oom) {
            memo_add(e, path, 'F', hash, &read, &rec);
            memo = memo_find(e, path);
            /* Not kept for want of memory: what it did is lost. */
            if (memo == NULL) s.oom = true;
          }
        }
        if (pl != NULL) {
          pl->spellings = 1;
          pl->toolkit = toolkit;
          pl->memo = memo;
          if (memo == NULL) {
            pl->rec = rec;
            memset(&rec, 0, sizeof rec);
          }
        }
        recording_free(e, &rec);
      }
      s.visit = 0;
      jk_free(e, text);
      jk_free(e, path);
    }
    if (s.oom || s.num_computed == 0 || out->unknown != NULL || !resolve_computed(&s)) break;
  }

done:
  while (s.num_todo > 0) jk_free(e, s.todo_text[--s.num_todo]);
  for (size_t i = 0; i < s.num_macros; i++) {
    jk_free(e, s.macros[i].name);
    jk_free(e, s.macros[i].value);
  }
  jk_free(e, s.macros);
  jk_free(e, s.macro_slots);
  for (size_t i = 0; i < s.num_computed; i++) {
    jk_free(e, s.computed[i].operand);
    jk_free(e, s.computed[i].dir);
    jk_free(e, s.computed[i].who);
  }
  jk_free(e, s.computed);
  for (size_t i = 0; i < s.num_places; i++) recording_free(e, &s.places[i].rec);
  jk_free(e, s.places);
  jk_free(e, s.place_slots);
  jk_free(e, s.visits);
  jk_free(e, s.todo_parent);
  jk_free(e, s.todo);
  jk_free(e, s.todo_text);
  jk_free(e, s.todo_len);
  jk_free(e, s.todo_memo);
  jk_free(e, s.slots);
  jk_free(e, s.dirs);
  jk_free(e, s.hname);
  jk_free(e, s.hsrc);
  jk_free(e, s.header_seen);
  jk_free(e, pre);
  if (s.oom) {
    jk_deps_free(e, out);
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory listing the headers a compile reads");
  }
  return st;
}
