/*
 * Dependency records: what a cached compile read from disk, written into
 * its entry, and checked again before the entry is served.
 *
 * An entry's key material is the request (source, options, headers given
 * as strings: key.c) followed by a `toolchain` field, the content hash of
 * the NVRTC in use, and one `dependency` field per path the compile's
 * header lookups touched (src/nvrtc/deps.c): a file with the XXH3-128 of
 * its content, or a place where nothing was. An entry serves a request
 * only while every one of those still holds, as ccache's manifests work:
 * a header edited, a header added earlier on the include path, another
 * working directory with other headers, a toolkit update with the same
 * NVRTC version, each turns the entry into a miss.
 *
 * Large files (libnvrtc is over 100 MB) would make each check slow, so
 * their hashes are remembered with their stat data, per engine and in the
 * database's `files` table: while device, inode, size, modification and
 * change times are all unchanged, the remembered hash stands. A hash is
 * only remembered once the file's change time is a few seconds old, so a
 * file rewritten within one tick of the filesystem's clock is always read
 * again. Small files are read and hashed every time, which costs about as
 * much as looking them up would.
 */
#define XXH_STATIC_LINKING_ONLY
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache/cache.h"
#include "engine.h"

/* Files smaller than this are hashed on every check. */
#define JK_MEMO_MIN_SIZE ((off_t)16 * 1024)
/* How old a file's change time must be before its hash is remembered. */
#define JK_MEMO_SETTLE_NS 2000000000LL

static bool memo_matches(const jk_file_memo *m, const struct stat *st) {
  jk_file_stamp now;
  jk_file_stamp_of(st, &now);
  return m->used && jk_file_stamp_same(&m->stamp, &now);
}

static void memo_fill(jk_file_memo *m, const struct stat *st, const uint8_t hash[16]) {
  m->used = true;
  jk_file_stamp_of(st, &m->stamp);
  memcpy(m->hash, hash, 16);
}

/* Hashes the rest of `fd` in chunks; *stable tells whether its stat data
 * after the read is what `st` says. */
static bool hash_fd(jitk_engine *e, int fd, const struct stat *st, uint8_t out[16], bool *stable) {
  XXH3_state_t *s = XXH3_createState();
  enum { CHUNK = 1 << 20 };
  unsigned char *buf = jk_malloc(e, CHUNK);
  bool ok = s != NULL && buf != NULL && XXH3_128bits_reset(s) == XXH_OK;
  while (ok) {
    ssize_t r = read(fd, buf, CHUNK);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) ok = false;
    if (r <= 0) break;
    XXH3_128bits_update(s, buf, (size_t)r);
  }
  if (ok) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s));
    memcpy(out, c.digest, 16);
    struct stat after;
    jk_file_stamp was, now;
    jk_file_stamp_of(st, &was);
    *stable = fstat(fd, &after) == 0;
    if (*stable) {
      jk_file_stamp_of(&after, &now);
      *stable = jk_file_stamp_same(&was, &now);
    }
  }
  XXH3_freeState(s);
  jk_free(e, buf);
  return ok;
}

/* Reads and hashes the file at `path`; *st is its stat data, from the
 * descriptor read. *stable tells whether a large file was the same before
 * and after the read (small ones are never remembered). */
static bool hash_file(jitk_engine *e, const char *path, struct stat *st, uint8_t out[16],
                      bool *stable) {
  *stable = false;
  int fd = jk_open_regular(path, st);
  if (fd < 0) return false;
  bool ok;
  if (st->st_size < JK_MEMO_MIN_SIZE) {
    /* A small file in one read, and one more that finds its end: disk
     * hits of kernels with a few headers pay for every call here. */
    unsigned char small[JK_MEMO_MIN_SIZE];
    size_t n = 0;
    bool grew = false;
    ok = true;
    for (;;) {
      ssize_t r = read(fd, small + n, sizeof small - n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) ok = false;
      if (r <= 0) break;
      n += (size_t)r;
      if (n == sizeof small) {
        grew = true;
        break;
      }
    }
    if (ok && !grew) {
      XXH128_canonical_t c;
      XXH128_canonicalFromHash(&c, XXH3_128bits(small, n));
      memcpy(out, c.digest, 16);
    } else if (ok) {
      /* It grew while being read: hashed again, whole, in chunks. */
      ok = lseek(fd, 0, SEEK_SET) == 0 && hash_fd(e, fd, st, out, stable);
      *stable = false;
    }
  } else {
    ok = hash_fd(e, fd, st, out, stable);
  }
  close(fd);
  return ok;
}

/* The remembered hash of a large file from the database, if any. */
static bool memo_from_db(jitk_engine *e, const struct stat *st, jk_file_memo *out) {
  jk_cache *c = &e->cache;
  if (c->memo_get == NULL) return false;
  sqlite3_stmt *q = c->memo_get;
  sqlite3_bind_int64(q, 1, (int64_t)st->st_dev);
  sqlite3_bind_int64(q, 2, (int64_t)st->st_ino);
  bool found = false;
  if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_bytes(q, 3) == 16) {
    memset(out, 0, sizeof *out);
    out->used = true;
    out->stamp.dev = (uint64_t)st->st_dev;
    out->stamp.ino = (uint64_t)st->st_ino;
    out->stamp.size = sqlite3_column_int64(q, 0);
    out->stamp.mtime_ns = sqlite3_column_int64(q, 1);
    out->stamp.ctime_ns = sqlite3_column_int64(q, 2);
    memcpy(out->hash, sqlite3_column_blob(q, 3), 16);
    found = true;
  }
  sqlite3_reset(q);
  sqlite3_clear_bindings(q);
  return found;
}

bool jk_file_digest(jitk_engine *e, const char *path, uint8_t out[16]) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return jk_file_digest_stat(e, path, &st, out);
}

bool jk_file_digest_stat(jitk_engine *e, const char *path, const struct stat *sp, uint8_t out[16]) {
  jk_cache *c = &e->cache;
  struct stat st = *sp;
  bool large = st.st_size >= JK_MEMO_MIN_SIZE;
  if (large) {
    for (size_t i = 0; i < JK_FILE_MEMOS; i++)
      if (memo_matches(&c->memos[i], &st)) {
        memcpy(out, c->memos[i].hash, 16);
        return true;
      }
    jk_file_memo m;
    if (memo_from_db(e, &st, &m) && memo_matches(&m, &st)) {
      c->memos[c->next_memo++ % JK_FILE_MEMOS] = m;
      memcpy(out, m.hash, 16);
      return true;
    }
  }
  bool stable = false;
  if (!hash_file(e, path, &st, out, &stable)) return false;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (large && stable && jk_timespec_ns(now) - jk_timespec_ns(st.st_ctim) > JK_MEMO_SETTLE_NS) {
    jk_file_memo *m = &c->memos[c->next_memo++ % JK_FILE_MEMOS];
    memo_fill(m, &st, out);
    m->dirty = true;
  }
  return true;
}

int jk_memo_write(jitk_engine *e) {
  jk_cache *c = &e->cache;
  sqlite3_stmt *q = NULL;
  int rc = SQLITE_OK;
  for (size_t i = 0; i < JK_FILE_MEMOS && rc == SQLITE_OK; i++) {
    jk_file_memo *m = &c->memos[i];
    if (!m->dirty) continue;
    if (q == NULL)
      rc = sqlite3_prepare_v2(c->db,
                              "INSERT OR REPLACE INTO files (dev, ino, size, mtime_ns, ctime_ns, "
                              "hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                              -1, &q, NULL);
    if (rc != SQLITE_OK) break;
    sqlite3_bind_int64(q, 1, (int64_t)m->stamp.dev);
    sqlite3_bind_int64(q, 2, (int64_t)m->stamp.ino);
    sqlite3_bind_int64(q, 3, m->stamp.size);
    sqlite3_bind_int64(q, 4, m->stamp.mtime_ns);
    sqlite3_bind_int64(q, 5, m->stamp.ctime_ns);
    sqlite3_bind_blob(q, 6, m->hash, 16, SQLITE_STATIC);
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    sqlite3_reset(q);
  }
  sqlite3_finalize(q);
  return rc;
}

void jk_memo_written(jitk_engine *e) {
  for (size_t i = 0; i < JK_FILE_MEMOS; i++) e->cache.memos[i].dirty = false;
}

bool jk_memo_pending(const jitk_engine *e) {
  for (size_t i = 0; i < JK_FILE_MEMOS; i++)
    if (e->cache.memos[i].dirty) return true;
  return false;
}

/* A dependency record holds at most this many places, each a path of at
 * most JK_DEPS_MAX_PATH bytes: a compile of CUB and Thrust probes a few
 * thousand. */
#define JK_DEPS_MAX_RECORD 65536u
#define JK_DEPS_MAX_PATH 4096u
/* Toolkit places remembered as verified, at most. */
#define JK_VERIFIED_MAX ((size_t)1 << 19)

/* --- toolkit dependencies already checked by this engine --- */

static uint64_t dep_fingerprint(const jk_dep *d) {
  XXH3_state_t s;
  XXH3_64bits_reset(&s);
  XXH3_64bits_update(&s, &d->state, 1);
  XXH3_64bits_update(&s, d->hash, 16);
  XXH3_64bits_update(&s, d->path, strlen(d->path));
  uint64_t h = XXH3_64bits_digest(&s);
  return h ? h : 1; /* zero marks an empty slot */
}

static bool verified_has(const jk_cache *c, uint64_t f) {
  if (c->verified_slots == 0) return false;
  for (size_t h = f & (c->verified_slots - 1); c->verified[h] != 0;
       h = (h + 1) & (c->verified_slots - 1))
    if (c->verified[h] == f) return true;
  return false;
}

static void verified_add(jitk_engine *e, uint64_t f) {
  jk_cache *c = &e->cache;
  /* The set only saves stat calls; records of entries later rejected add
   * to it too, so it is bounded (8 MiB of slots). */
  if (c->verified_count >= JK_VERIFIED_MAX) return;
  if (2 * (c->verified_count + 1) > c->verified_slots) {
    size_t n = c->verified_slots ? c->verified_slots * 2 : 1024;
    uint64_t *v = jk_calloc(e, n, sizeof *v);
    if (v == NULL) return; /* only a shortcut is lost */
    for (size_t i = 0; i < c->verified_slots; i++) {
      if (c->verified[i] == 0) continue;
      size_t h = c->verified[i] & (n - 1);
      while (v[h] != 0) h = (h + 1) & (n - 1);
      v[h] = c->verified[i];
    }
    jk_free(e, c->verified);
    c->verified = v;
    c->verified_slots = n;
  }
  size_t h = f & (c->verified_slots - 1);
  while (c->verified[h] != 0) h = (h + 1) & (c->verified_slots - 1);
  c->verified[h] = f;
  c->verified_count++;
}

/* Whether one recorded dependency still holds. */
static bool dep_holds(jitk_engine *e, const jk_dep *d) {
  struct stat st;
  int r = stat(d->path, &st);
  int err = r == 0 ? 0 : errno;
  switch (d->state) {
    case 'A': return r != 0 && (err == ENOENT || err == ENOTDIR);
    case 'O': return r == 0 && !S_ISREG(st.st_mode);
    case 'F': {
      if (r != 0 || !S_ISREG(st.st_mode)) return false;
      uint8_t h[16];
      return jk_file_digest_stat(e, d->path, &st, h) && memcmp(h, d->hash, 16) == 0;
    }
    default: return false;
  }
}

bool jk_deps_hold(jitk_engine *e, const jk_deps *d, bool toolkit, const char **failed) {
  jk_cache *c = &e->cache;
  for (size_t i = 0; i < d->n; i++) {
    const jk_dep *x = &d->v[i];
    uint64_t f = 0;
    if (x->toolkit) {
      /* The CUDA headers do not change under a running program (the
       * NVRTC it loaded would not match them either): checked once per
       * engine, and not at all on memory hits. */
      if (!toolkit) continue;
      f = dep_fingerprint(x);
      if (verified_has(c, f)) continue;
    }
    if (!dep_holds(e, x)) {
      if (failed) *failed = x->path;
      return false;
    }
    if (x->toolkit) verified_add(e, f);
  }
  return true;
}

bool jk_deps_have_user_files(const jk_deps *d) {
  for (size_t i = 0; i < d->n; i++)
    if (!d->v[i].toolkit) return true;
  return false;
}

/* --- the record in key material --- */

void jk_deps_material(jk_material *m, const char *toolchain, const jk_deps *d) {
  jk_material_add_str(m, "toolchain", toolchain);
  for (size_t i = 0; i < d->n && !m->failed; i++) {
    const jk_dep *x = &d->v[i];
    size_t n = strlen(x->path);
    /* One field: state, hash (zeros for no file), path. */
    unsigned char *f = jk_malloc(m->e, 17 + n);
    if (f == NULL) {
      m->failed = true;
      return;
    }
    f[0] = (unsigned char)x->state;
    if (x->state == 'F')
      memcpy(f + 1, x->hash, 16);
    else
      memset(f + 1, 0, 16);
    memcpy(f + 17, x->path, n);
    jk_material_add(m, "dependency", f, 17 + n);
    jk_free(m->e, f);
  }
}

static bool under_dir(const char *path, size_t n, const char *dir) {
  if (dir == NULL) return false;
  size_t dn = strlen(dir);
  while (dn > 1 && dir[dn - 1] == '/') dn--;
  return n > dn && strncmp(path, dir, dn) == 0 && path[dn] == '/';
}

jitk_status jk_deps_parse(jitk_engine *e, const unsigned char *data, size_t len, size_t from,
                          const unsigned char **toolchain, size_t *toolchain_len, jk_deps *out) {
  memset(out, 0, sizeof *out);
  *toolchain = NULL;
  *toolchain_len = 0;
  size_t pos = from, count = 0;
  const char *label;
  const unsigned char *bytes;
  size_t n;
  bool ok = true;
  while (jk_material_next(data, len, &pos, &label, &bytes, &n, &ok)) {
    if (count == 0) {
      if (strcmp(label, "toolchain") != 0) return JITK_ERR_INVALID_IMAGE;
      *toolchain = bytes;
      *toolchain_len = n;
    } else if (strcmp(label, "dependency") != 0 || n < 18 || n - 17 > JK_DEPS_MAX_PATH ||
               (bytes[0] != 'F' && bytes[0] != 'A' && bytes[0] != 'O')) {
      return JITK_ERR_INVALID_IMAGE;
    }
    /* Records come from other machines too: one no compile makes (a
     * remote's planted value) is not read, let alone checked file by file. */
    if (++count > JK_DEPS_MAX_RECORD + 1) return JITK_ERR_INVALID_IMAGE;
  }
  if (!ok || count == 0) return JITK_ERR_INVALID_IMAGE;
  out->n = out->cap = count - 1;
  out->v = out->n ? jk_calloc(e, out->n, sizeof *out->v) : NULL;
  if (out->n && out->v == NULL) {
    out->n = out->cap = 0;
    return JITK_ERR_OUT_OF_MEMORY;
  }
  pos = from;
  jk_material_next(data, len, &pos, &label, &bytes, &n, &ok);
  for (size_t i = 0; i < out->n; i++) {
    jk_material_next(data, len, &pos, &label, &bytes, &n, &ok);
    jk_dep *x = &out->v[i];
    x->state = (char)bytes[0];
    x->hashed = x->state == 'F';
    memcpy(x->hash, bytes + 1, 16);
    /* A path with a NUL in it cannot be a real one. */
    if (memchr(bytes + 17, '\0', n - 17) != NULL) {
      jk_deps_free(e, out);
      return JITK_ERR_INVALID_IMAGE;
    }
    x->path = jk_strndup(e, (const char *)bytes + 17, n - 17);
    if (x->path == NULL) {
      jk_deps_free(e, out);
      return JITK_ERR_OUT_OF_MEMORY;
    }
    x->toolkit = under_dir(x->path, n - 17, e->nvrtc.include_dir) ||
                 under_dir(x->path, n - 17, e->nvrtc.cccl_dir);
  }
  return JITK_OK;
}

jitk_status jk_deps_copy(jitk_engine *e, const jk_deps *from, jk_deps *to) {
  memset(to, 0, sizeof *to);
  if (from->n == 0) return JITK_OK;
  to->v = jk_calloc(e, from->n, sizeof *to->v);
  if (to->v == NULL) return JITK_ERR_OUT_OF_MEMORY;
  to->cap = from->n;
  for (size_t i = 0; i < from->n; i++) {
    to->v[i] = from->v[i];
    to->v[i].path = jk_strdup(e, from->v[i].path);
    if (to->v[i].path == NULL) {
      jk_deps_free(e, to);
      return JITK_ERR_OUT_OF_MEMORY;
    }
    to->n++;
  }
  return JITK_OK;
}

/* --- the NVRTC in use --- */

/* Marks the toolchain as not the one running, and says so once. */
static void replaced(jitk_engine *e, const char *library) {
  if (!atomic_exchange(&e->cache.toolchain_replaced, true))
    jk_log(e, JITK_LOG_WARN,
           "kernel cache: the %s file on disk is not the library this process loaded (it was "
           "replaced after the process started); until the process is restarted, kernels are "
           "neither served from nor stored in the disk and remote tiers",
           library);
}

bool jk_toolchain_runs(jitk_engine *e) {
  jk_cache *c = &e->cache;
  jk_toolchain(e);
  if (atomic_load(&c->toolchain_replaced)) return false;
  /* A library loaded stays what it is: once both were found loaded and
   * agreeing, the answer cannot change, and lookups skip the walk of the
   * loaded libraries. */
  if (c->toolchain_settled) return true;
  jk_build_id loaded[2];
  bool is_loaded[2];
  jk_nvrtc_loaded_build_ids(e, loaded, is_loaded);
  for (int i = 0; i < 2; i++) {
    /* A file that could not be hashed is named in the digest instead
     * (a statically linked NVRTC): there is nothing to compare. */
    if (!c->toolchain_hashed[i] || !is_loaded[i] ||
        jk_build_id_same(&loaded[i], &c->toolchain_ids[i]))
      continue;
    replaced(e, i ? "libnvrtc-builtins" : "libnvrtc");
    return false;
  }
  c->toolchain_settled = is_loaded[0] && is_loaded[1];
  return true;
}

const char *jk_toolchain(jitk_engine *e) {
  jk_cache *c = &e->cache;
  if (c->toolchain[0] != '\0') return c->toolchain;
  char *paths[2] = {NULL, NULL};
  jk_material m;
  jk_material_init(&m, e);
  jk_material_add_str(&m, "nvrtc", c->nvrtc_id);
  if (jk_nvrtc_library_files(e, &paths[0], &paths[1]) == JITK_OK) {
    for (int i = 0; i < 2; i++) {
      uint8_t h[16];
      if (paths[i] == NULL || !jk_file_digest(e, paths[i], h)) {
        /* Without the file, its name stands in: a statically linked
         * NVRTC is part of the program, whose build the version tells. */
        jk_material_add_str(&m, i ? "builtins_missing" : "library_missing",
                            paths[i] ? paths[i] : "");
        continue;
      }
      jk_material_add(&m, i ? "builtins" : "library", h, 16);
      /* Read after the digest, so that a file replaced before or during
       * it shows an ID other than the loaded library's. */
      c->toolchain_hashed[i] = jk_file_build_id(paths[i], &c->toolchain_ids[i]);
    }
  }
  jk_free(e, paths[0]);
  jk_free(e, paths[1]);
  jk_key k;
  jk_hash128(m.data ? m.data : (const unsigned char *)"", m.len, k.bytes);
  jk_material_free(&m);
  jk_key_hex(&k, c->toolchain);
  jk_toolchain_runs(e);
  return c->toolchain;
}

/* --- the linker of relocatable programs --- */

const char *jk_linker_identity(jitk_engine *e) {
  jk_cache *c = &e->cache;
  jk_linker linker = jk_link_probe(e);
  pthread_mutex_lock(&c->disk_lock);
  if (c->linker_id[0] == '\0') {
    if (linker == JK_LINKER_NVJITLINK) {
      /* The library loaded cannot change under the engine, so its hash is
       * taken once, like NVRTC's (remembered across processes by its stat
       * data, as large files are). Its file can, as NVRTC's can: then
       * nothing is stored or served (jk_toolchain_runs). */
      const jk_jitlink *j = &e->nvrtc.jitlink;
      uint8_t h[16];
      if (j->path != NULL && jk_file_digest(e, j->path, h)) {
        jk_build_id on_disk, loaded;
        if (jk_file_build_id(j->path, &on_disk) &&
            jk_loaded_build_id(*(const void *const *)&j->create, NULL, &loaded) &&
            !jk_build_id_same(&on_disk, &loaded))
          replaced(e, "libnvJitLink");
        jk_key k;
        memcpy(k.bytes, h, 16);
        char hex[33];
        jk_key_hex(&k, hex);
        snprintf(c->linker_id, sizeof c->linker_id, "nvJitLink %u.%u %s", j->major, j->minor, hex);
      } else {
        snprintf(c->linker_id, sizeof c->linker_id, "nvJitLink %u.%u %.100s", j->major, j->minor,
                 j->path ? j->path : "(path unknown)");
      }
    } else if (linker == JK_LINKER_DRIVER) {
      /* The driver compiles PTX for the device it runs on. */
      snprintf(c->linker_id, sizeof c->linker_id, "driver %d sm_%d%d", e->drv.version,
               e->info.cc_major, e->info.cc_minor);
    } else {
      snprintf(c->linker_id, sizeof c->linker_id, "none");
    }
  }
  pthread_mutex_unlock(&c->disk_lock);
  return c->linker_id;
}
