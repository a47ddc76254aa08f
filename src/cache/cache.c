/*
 * The cache's front: configuration, the in-memory table, and jk_cache_get,
 * which every kernel kind compiles through.
 *
 * Order of a lookup: the engine's table (loaded modules); the disk store;
 * then, holding the key's cross-process lock, the store again (another
 * process may have just compiled it) and finally NVRTC, whose result is
 * stored before the lock is let go. Threads of one engine that want the
 * same key wait for the first one (the in-flight list), so each key is
 * compiled once per machine however many threads and processes ask.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "engine.h"
#include "driver/image.h"

#define JK_DEFAULT_MAX_BYTES ((int64_t)1 << 30)
#define JK_DEFAULT_MEMORY_ENTRIES 256
/* How long to wait for another process compiling the same key. */
#define JK_KEY_LOCK_TIMEOUT_MS 300000

static jitk_cache_mode mode_from_env(jitk_engine *e) {
  const char *v = getenv("JITK_CACHE");
  if (v == NULL || *v == '\0') return JITK_CACHE_ON;
  if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0) return JITK_CACHE_ON;
  if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) return JITK_CACHE_OFF;
  if (strcmp(v, "read-only") == 0 || strcmp(v, "readonly") == 0) return JITK_CACHE_READ_ONLY;
  jk_log(e, JITK_LOG_WARN, "JITK_CACHE=\"%s\" is not on, off or read-only; using on", v);
  return JITK_CACHE_ON;
}

/* "1073741824", "512M", "1G", "64k": bytes. -1 when malformed or too
 * large for an int64_t (inf, 1e30). */
static int64_t parse_size(const char *s) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || !(v >= 0) || v > 1e18) return -1;
  while (*end == ' ') end++;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
    case 'K':
      mult = 1024.0;
      end++;
      break;
    case 'M':
      mult = 1024.0 * 1024;
      end++;
      break;
    case 'G':
      mult = 1024.0 * 1024 * 1024;
      end++;
      break;
    case 'T':
      mult = 1024.0 * 1024 * 1024 * 1024;
      end++;
      break;
    default: break;
  }
  if (toupper((unsigned char)*end) == 'I') end++; /* MiB */
  if (toupper((unsigned char)*end) == 'B') end++;
  if (*end != '\0' || v * mult > 9.0e18) return -1;
  return (int64_t)(v * mult);
}

/* NVRTC's version and build: major.minor, and the size of the library
 * file that was loaded, which differs between builds of one version. The
 * file's time is left out so machines with the same toolkit share keys. */
static void nvrtc_identity(jitk_engine *e, char *out, size_t n) {
  long long size = -1;
  Dl_info info;
  struct stat st;
  if (dladdr((void *)&nvrtcVersion, &info) != 0 && info.dli_fname != NULL &&
      stat(info.dli_fname, &st) == 0)
    size = (long long)st.st_size;
  snprintf(out, n, "%d.%d/%lld", e->nvrtc.major, e->nvrtc.minor, size);
}

jitk_status jk_cache_init(jitk_engine *e, const jitk_engine_config *cfg) {
  jk_cache *c = &e->cache;
  memset(c, 0, sizeof *c);
  c->lock_fd = -1;
  c->busy_ms = 30000;
  c->owner_pid = getpid();
  pthread_mutex_init(&c->disk_lock, NULL);
  pthread_mutex_init(&c->table_lock, NULL);
  pthread_cond_init(&c->compiled, NULL);
  atomic_init(&c->memory_hits, 0);
  atomic_init(&c->memory_hits_unflushed, 0);
  nvrtc_identity(e, c->nvrtc_id, sizeof c->nvrtc_id);
  jk_headers_digest(e, c->headers_digest);

  c->mode = cfg->cache_mode == JITK_CACHE_DEFAULT ? mode_from_env(e) : cfg->cache_mode;
  if (c->mode < JITK_CACHE_ON || c->mode > JITK_CACHE_READ_ONLY)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "cache_mode %d is not a jitk_cache_mode",
                   (int)c->mode);
  if (cfg->cache_max_bytes < 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "cache_max_bytes is negative");
  c->max_bytes = cfg->cache_max_bytes;
  if (c->max_bytes == 0) {
    const char *v = getenv("JITK_CACHE_MAX_SIZE");
    c->max_bytes = JK_DEFAULT_MAX_BYTES;
    if (v != NULL && *v != '\0') {
      int64_t parsed = parse_size(v);
      if (parsed > 0)
        c->max_bytes = parsed;
      else
        jk_log(e, JITK_LOG_WARN, "JITK_CACHE_MAX_SIZE=\"%s\" is not a size; using 1 GiB", v);
    }
  }
  if (cfg->cache_shared < 0) {
    const char *v = getenv("JITK_CACHE_SHARED");
    c->shared = v != NULL && strcmp(v, "1") == 0;
  } else {
    c->shared = cfg->cache_shared != 0;
  }
  c->memory_capacity =
      cfg->cache_memory_entries ? cfg->cache_memory_entries : JK_DEFAULT_MEMORY_ENTRIES;
  c->table.num_buckets = 64;
  while (c->table.num_buckets < 2 * c->memory_capacity && c->table.num_buckets < ((size_t)1 << 20))
    c->table.num_buckets *= 2;
  c->table.buckets = jk_calloc(e, c->table.num_buckets, sizeof(jk_entry *));
  if (c->table.buckets == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  const jitk_engine *peer = cfg->share_images_with;
  if (peer != NULL) {
    /* Either engine may free what the other allocated (share.c). */
    if (peer->base.alloc_fn != e->base.alloc_fn || peer->base.alloc_user != e->base.alloc_user)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "share_images_with: that engine has another allocator (alloc_fn and "
                     "alloc_user must be the same for engines that share images)");
    c->share = peer->cache.share;
    jk_share_join(c->share);
  } else {
    jitk_status st = jk_share_create(e, &c->share);
    if (st != JITK_OK) return st;
  }

  if (c->mode != JITK_CACHE_OFF) {
    c->dir = cfg->cache_dir ? jk_strdup(e, cfg->cache_dir) : jk_cache_default_dir(e);
    if (cfg->cache_dir != NULL && c->dir == NULL)
      return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  } else {
    c->disk = JK_DISK_OFF;
  }

  /* The shared tier is read even when the engine's own store is off: it
   * is someone else's, and reading it writes nothing. */
  const char *shared =
      cfg->cache_shared_dir ? cfg->cache_shared_dir : getenv("JITK_CACHE_SHARED_DIR");
  const char *owner =
      cfg->cache_shared_owner ? cfg->cache_shared_owner : getenv("JITK_CACHE_SHARED_OWNER");
  snprintf(c->shared_why, sizeof c->shared_why, "off: no shared cache is configured");
  c->shared_state = JK_DISK_OFF;
  if (shared != NULL && *shared != '\0') {
    if ((c->shared_dir = jk_strdup(e, shared)) == NULL)
      return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    c->shared_state = JK_DISK_CLOSED;
    snprintf(c->shared_why, sizeof c->shared_why, "not opened yet");
  }
  if (owner != NULL && *owner != '\0') {
    jitk_status st = jk_parse_owner(e, owner, &c->shared_trust.owner);
    if (st != JITK_OK) return st;
    c->shared_trust.has_owner = true;
  }
  jitk_status st = jk_manifest_init(e, cfg);
  if (st != JITK_OK) return st;
  return jk_remote_init(e, cfg);
}

static void entry_free(jitk_engine *e, jk_entry *x) {
  if (x == NULL) return;
  if (x->cu != NULL) jk_module_unload(e, (CUmodule)x->cu);
  if (x->shared != NULL) jk_share_release(e, x, false);
  for (size_t i = 0; i < x->num_names; i++) {
    if (x->name_expressions) jk_free(e, x->name_expressions[i]);
    if (x->lowered) jk_free(e, x->lowered[i]);
  }
  jk_free(e, x->name_expressions);
  jk_free(e, x->lowered);
  jk_ptxas_free(e, x->resources, x->num_resources);
  jk_deps_free(e, &x->deps);
  jk_free(e, x->log);
  jk_free(e, x->image);
  jk_free(e, x);
}

void jk_entry_discard(jitk_engine *e, jk_entry *x) { entry_free(e, x); }

void jk_cache_destroy(jitk_engine *e) {
  jk_cache *c = &e->cache;
  pthread_mutex_lock(&c->disk_lock);
  jk_store_close(e);
  jk_store_shared_close(e);
  /* What the close could not write (a store that failed meanwhile). */
  jk_store_drop_deferred(e);
  pthread_mutex_unlock(&c->disk_lock);
  /* Entries still referenced by modules are the caller's mistake (modules
   * must go before their engine); the table's own are freed here. */
  jk_entry *x = c->lru_head;
  while (x != NULL) {
    jk_entry *next = x->lru_next;
    if (--x->refs == 0) entry_free(e, x);
    x = next;
  }
  jk_free(e, c->table.buckets);
  jk_share_leave(e, c->share);
  jk_free(e, c->verified);
  jk_free(e, c->inflight.v);
  jk_free(e, c->dir);
  jk_free(e, c->db_path);
  jk_free(e, c->shared_dir);
  jk_free(e, c->record_path);
  jk_remote_destroy(e);
  jk_free(e, c->shared_db_path);
  pthread_cond_destroy(&c->compiled);
  pthread_mutex_destroy(&c->table_lock);
  pthread_mutex_destroy(&c->disk_lock);
  memset(c, 0, sizeof *c);
}

/* --- tables of entries and lists of keys, under their owners' locks --- */

static jk_entry **chain_of(const jk_chains *t, const jk_key *k) {
  uint64_t h = 0;
  memcpy(&h, k->bytes + 8, sizeof h);
  return &t->buckets[h & (t->num_buckets - 1)];
}

jk_entry *jk_chains_find(const jk_chains *t, const jk_key *key) {
  for (jk_entry *x = *chain_of(t, key); x != NULL; x = x->hash_next)
    if (memcmp(x->key.bytes, key->bytes, 16) == 0) return x;
  return NULL;
}

void jk_chains_add(jk_chains *t, jk_entry *x) {
  jk_entry **head = chain_of(t, &x->key);
  x->hash_next = *head;
  *head = x;
  x->in_table = true;
  t->count++;
}

void jk_chains_remove(jk_chains *t, jk_entry *x) {
  jk_entry **p = chain_of(t, &x->key);
  while (*p != NULL && *p != x) p = &(*p)->hash_next;
  if (*p == x) *p = x->hash_next;
  x->hash_next = NULL;
  x->in_table = false;
  t->count--;
}

bool jk_key_list_has(const jk_key_list *l, const jk_key *key) {
  for (size_t i = 0; i < l->n; i++)
    if (memcmp(l->v[i].bytes, key->bytes, 16) == 0) return true;
  return false;
}

bool jk_key_list_add(jitk_engine *e, jk_key_list *l, const jk_key *key) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    jk_key *v = jk_realloc(e, l->v, cap * sizeof *v);
    if (v == NULL) return false;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *key;
  return true;
}

void jk_key_list_remove(jk_key_list *l, const jk_key *key) {
  for (size_t i = 0; i < l->n; i++)
    if (memcmp(l->v[i].bytes, key->bytes, 16) == 0) {
      l->v[i] = l->v[--l->n];
      return;
    }
}

/* --- the in-memory table, under the cache's table_lock --- */

static void lru_unlink(jk_cache *c, jk_entry *x) {
  if (x->lru_prev)
    x->lru_prev->lru_next = x->lru_next;
  else
    c->lru_head = x->lru_next;
  if (x->lru_next)
    x->lru_next->lru_prev = x->lru_prev;
  else
    c->lru_tail = x->lru_prev;
  x->lru_prev = x->lru_next = NULL;
}

static void lru_push_front(jk_cache *c, jk_entry *x) {
  x->lru_prev = NULL;
  x->lru_next = c->lru_head;
  if (c->lru_head)
    c->lru_head->lru_prev = x;
  else
    c->lru_tail = x;
  c->lru_head = x;
}

static void table_remove(jk_cache *c, jk_entry *x) {
  jk_chains_remove(&c->table, x);
  lru_unlink(c, x);
}

/* Inserts x (taking a reference for the table) and returns the entries
 * pushed out beyond the capacity whose last reference went with them,
 * chained through hash_next, for the caller to free outside the lock. */
static jk_entry *table_insert(jk_cache *c, jk_entry *x) {
  jk_chains_add(&c->table, x);
  lru_push_front(c, x);
  x->refs++;
  jk_entry *dead = NULL;
  while (c->table.count > c->memory_capacity && c->lru_tail != NULL && c->lru_tail != x) {
    jk_entry *victim = c->lru_tail;
    table_remove(c, victim);
    if (--victim->refs == 0) {
      victim->hash_next = dead;
      dead = victim;
    }
  }
  return dead;
}

void jk_entry_release(jitk_engine *e, jk_entry *x) {
  if (x == NULL) return;
  pthread_mutex_lock(&e->cache.table_lock);
  bool last = --x->refs == 0;
  pthread_mutex_unlock(&e->cache.table_lock);
  if (last) entry_free(e, x);
}

void jk_entry_retain(jitk_engine *e, jk_entry *x) {
  pthread_mutex_lock(&e->cache.table_lock);
  x->refs++;
  pthread_mutex_unlock(&e->cache.table_lock);
}

jitk_status jk_entry_from_image(jitk_engine *e, jitk_image_kind kind, const void *image,
                                size_t size, jk_entry **out) {
  jk_entry *x = jk_calloc(e, 1, sizeof *x);
  void *copy = jk_malloc(e, size + 1); /* one byte more keeps PTX NUL-terminated */
  char *log = jk_strdup(e, "");
  if (x == NULL || copy == NULL || log == NULL) {
    jk_free(e, x);
    jk_free(e, copy);
    jk_free(e, log);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(copy, image, size);
  ((char *)copy)[size] = '\0';
  x->refs = 1;
  x->image = copy;
  x->image_size = size;
  x->kind = kind;
  x->log = log;
  jitk_status st = JITK_OK;
  if (e->has_device) {
    CUmodule mod = NULL;
    st = jk_module_load(e, copy, kind, &mod);
    x->cu = mod;
  }
  if (st != JITK_OK) {
    jk_entry_release(e, x);
    return st;
  }
  *out = x;
  return JITK_OK;
}

/* Fills an entry from NVRTC's output, taking its buffers. */
static jitk_status entry_from_compile(jitk_engine *e, const jk_compile_input *in,
                                      jk_compile_output *co, jk_entry *x) {
  x->image = co->image;
  x->image_size = co->image_size;
  x->kind = co->ptx ? JITK_IMAGE_PTX : JITK_IMAGE_CUBIN;
  x->log = co->log;
  x->lowered = co->lowered;
  x->num_names = co->num_lowered;
  x->compile_ms = co->milliseconds;
  co->image = NULL;
  co->log = NULL;
  co->lowered = NULL;
  co->num_lowered = 0;
  /* A link with the device runtime read files too: its search joins the
   * headers' record, and is checked with it. */
  if (co->deps.n > 0) {
    jitk_status st = jk_deps_move(e, &x->deps, &co->deps);
    if (st != JITK_OK) return st;
  }
  if (x->num_names > 0) {
    x->name_expressions = jk_calloc(e, x->num_names, sizeof(char *));
    if (x->name_expressions == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < x->num_names; i++)
      if ((x->name_expressions[i] = jk_strdup(e, in->name_expressions[i])) == NULL)
        return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  return JITK_OK;
}

static void count(jitk_engine *e, uint64_t *mine, uint64_t *pending) {
  pthread_mutex_lock(&e->cache.disk_lock);
  ++*mine;
  ++*pending;
  pthread_mutex_unlock(&e->cache.disk_lock);
}

/* Lists what the compile reads from disk (src/nvrtc/deps.c). */
static jitk_status scan_one(jitk_engine *e, const jk_compile_input *in, jk_deps *out) {
  char **opts = NULL;
  size_t nopts = 0;
  jitk_status st =
      jk_nvrtc_final_options(e, in->options, in->num_options, jk_final_flags(in), &opts, &nopts);
  if (st == JITK_OK) st = jk_deps_scan(e, in, opts, nopts, out);
  jk_options_free(e, opts, nopts);
  return st;
}

/* The same for a linked program: what each CUDA piece reads, with the
 * options the link compiles it with, in one record. */
static jitk_status scan_deps(jitk_engine *e, const jk_compile_input *in, jk_deps *out) {
  if (in->link == NULL) return scan_one(e, in, out);
  const jk_link_input *li = in->link;
  jitk_status st = JITK_OK;
  for (size_t i = 0; i < li->num_pieces && st == JITK_OK; i++) {
    if (li->pieces[i].kind != JITK_LINK_CUDA) continue;
    jk_compile_input ci;
    const char **storage = NULL;
    jk_deps one;
    memset(&one, 0, sizeof one);
    st = jk_link_piece_input(e, li->pieces[i].cuda, li->lto, &ci, &storage);
    if (st == JITK_OK) st = scan_one(e, &ci, &one);
    jk_free(e, storage);
    if (st == JITK_OK)
      st = jk_deps_move(e, out, &one);
    else
      jk_deps_free(e, &one);
  }
  return st;
}

/* A file of the caller's that was written while NVRTC ran, even if it
 * holds what the scan read again, leaves what NVRTC read unknown: the
 * record says so, and the entry is neither stored nor served from memory
 * (memory_hit_holds). */
static jitk_status note_edits(jitk_engine *e, jk_deps *d) {
  const char *changed = NULL;
  if (d->unknown != NULL || jk_deps_unchanged(d, &changed)) return JITK_OK;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "%s was written while NVRTC compiled it", changed);
  if ((d->unknown = jk_buf_take(&b)) == NULL)
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  return JITK_OK;
}

/* The full key material of a new compile (the request's and the
 * dependency record), unless the record is incomplete or a file changed
 * while NVRTC ran (then what NVRTC read is unknown, and the entry is
 * stored in no tier). Under disk_lock. */
static bool full_material(jitk_engine *e, const jk_compile_input *in, const jk_key *request,
                          const jk_material *mat, const jk_entry *x, jk_material *full) {
  char hex[33];
  jk_key_hex(request, hex);
  if (x->deps.unknown != NULL) {
    jk_log(e, JITK_LOG_INFO,
           "kernel cache: %s (request %s) is not stored: %s, so the files it reads cannot all be "
           "told",
           in->program_name ? in->program_name : "module.cu", hex, x->deps.unknown);
    return false;
  }
  /* The toolchain's warning says why nothing is stored. */
  if (!jk_toolchain_runs(e)) return false;
  const char *changed = NULL;
  if (!jk_deps_hold(e, &x->deps, true, &changed) || !jk_deps_unchanged(&x->deps, &changed)) {
    jk_log(e, JITK_LOG_INFO,
           "kernel cache: %s changed while %s was compiling; the result is not stored", changed,
           in->program_name ? in->program_name : "module.cu");
    return false;
  }
  jk_material_append(full, mat->data, mat->len);
  jk_deps_material(full, jk_toolchain(e), &x->deps);
  return !full->failed;
}

/* Stores an entry under the key of its full material (the local tier's
 * row, which also records that it answers `request`). Under disk_lock. */
static void store_local(jitk_engine *e, const jk_compile_input *in, const jk_key *request,
                        const jk_material *full, jk_entry *x) {
  jk_key key;
  jk_hash128(full->data, full->len, key.bytes);
  jk_store_insert(e, &key, request, full, x, in->program_name ? in->program_name : "module.cu");
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The lease just taken: whoever held it before may have stored the entry
 * and let go between this process's empty lookup and its lease, so the
 * remote is asked again before compiling. */
static jitk_status after_lease(jitk_engine *e, const jk_key *key, const jk_material *mat,
                               jk_entry *x, bool *found, jk_lease *lease) {
  bool present;
  jitk_status st = jk_remote_find(e, key, mat, x, found, &present);
  if (st != JITK_OK || *found) {
    jk_remote_release(e, key);
    *lease = JK_LEASE_NONE;
  }
  return st;
}

static jitk_status remote_wait(jitk_engine *e, const jk_key *key, const jk_material *mat,
                               jk_entry *x, bool *found, jk_lease *lease);

/* The remote tier after both local ones missed: its entry, or, when
 * another process of the cluster holds the request's lease, the entry it
 * is compiling (remote_wait). *lease says whether this process now
 * compiles the request for the cluster. A lookup that ends without an
 * entry counts as the remote's miss. */
static jitk_status remote_lookup(jitk_engine *e, const jk_key *key, const jk_material *mat,
                                 jk_entry *x, bool *found, jk_lease *lease) {
  *lease = JK_LEASE_NONE;
  bool present = false;
  jitk_status st = jk_remote_find(e, key, mat, x, found, &present);
  if (st == JITK_OK && !*found) {
    *lease = jk_remote_lease(e, key);
    /* Asked again only after an empty lookup: a value that did not serve
     * is still there. */
    if (*lease == JK_LEASE_MINE && !present)
      st = after_lease(e, key, mat, x, found, lease);
    else if (*lease == JK_LEASE_OTHERS)
      st = remote_wait(e, key, mat, x, found, lease);
  }
  if (st == JITK_OK && !*found) {
    jk_remote *r = &e->cache.remote;
    pthread_mutex_lock(&r->lock);
    r->stats.misses++;
    pthread_mutex_unlock(&r->lock);
    jk_remote_count(e, 0, 1, 0, 0, 0, 0);
  }
  return st;
}

/* Another process of the cluster holds the request's lease: its entry,
 * waited for at most the remote's wait; the lease taken over when it ends
 * without one (the holder failed, or died and the lease expired). */
static jitk_status remote_wait(jitk_engine *e, const jk_key *key, const jk_material *mat,
                               jk_entry *x, bool *found, jk_lease *lease) {
  jk_remote *r = &e->cache.remote;
  pthread_mutex_lock(&r->lock);
  r->stats.lease_waits++;
  pthread_mutex_unlock(&r->lock);
  int64_t deadline = mono_ms() + r->wait_ms;
  int pause = 5;
  jitk_status st = JITK_OK;
  while (mono_ms() < deadline) {
    struct timespec ts = {0, (long)pause * 1000000L};
    nanosleep(&ts, NULL);
    if (pause < 100) pause *= 2;
    bool present;
    st = jk_remote_find(e, key, mat, x, found, &present);
    if (st != JITK_OK || *found) return st;
    if (!jk_remote_lease_held(e, key)) {
      *lease = jk_remote_lease(e, key);
      if (*lease == JK_LEASE_MINE) return after_lease(e, key, mat, x, found, lease);
      if (*lease != JK_LEASE_OTHERS) return JITK_OK;
    }
  }
  jk_log(e, JITK_LOG_INFO,
         "kernel cache: another process of the cluster is still compiling a kernel after %d ms; "
         "compiling it here too",
         r->wait_ms);
  *lease = JK_LEASE_NONE;
  return JITK_OK;
}

/* From the store, or compiled (and stored) while holding the request's
 * lock. */
static jitk_status fill_entry(jitk_engine *e, const jk_compile_input *in, const jk_key *key,
                              const jk_material *mat, jk_entry *x) {
  jk_cache *c = &e->cache;
  bool found = false, writable = false;
  jitk_status st = JITK_OK;
  if (c->mode != JITK_CACHE_OFF || c->shared_dir != NULL) {
    pthread_mutex_lock(&c->disk_lock);
    st = jk_store_find(e, key, mat, x, &found);
    writable = c->disk == JK_DISK_OPEN;
    pthread_mutex_unlock(&c->disk_lock);
    if (st != JITK_OK) return st;
  }
  bool locked = false;
  if (!found && writable) {
    locked = jk_key_lock(e, key, JK_KEY_LOCK_TIMEOUT_MS);
    if (locked && c->test_hook) c->test_hook(c->test_user, JK_EVENT_KEY_LOCKED);
    if (locked) {
      /* Whoever held the lock may have stored it meanwhile. */
      pthread_mutex_lock(&c->disk_lock);
      st = jk_store_find(e, key, mat, x, &found);
      pthread_mutex_unlock(&c->disk_lock);
    }
  }
  if (st == JITK_OK && found) {
    pthread_mutex_lock(&c->disk_lock);
    c->stats.disk_hits++;
    c->pending.disk_hits++;
    jk_store_note_hit(e, key);
    pthread_mutex_unlock(&c->disk_lock);
  } else if (st == JITK_OK) {
    count(e, &c->stats.misses, &c->pending.misses);
    /* Both local tiers missed: the cluster's, when there is one. */
    jk_lease lease = JK_LEASE_NONE;
    if (jk_remote_on(e)) st = remote_lookup(e, key, mat, x, &found, &lease);
    bool compiled = false;
    if (st == JITK_OK && !found) {
      /* The headers are read before NVRTC runs and checked again after
       * it: a file edited meanwhile leaves what NVRTC saw unknown. */
      st = scan_deps(e, in, &x->deps);
      jk_compile_output co;
      if (st == JITK_OK) st = jk_nvrtc_compile(e, in, &co);
      if (st == JITK_OK) {
        st = entry_from_compile(e, in, &co, x);
        jk_compile_output_free(e, &co);
        if (st == JITK_OK) st = note_edits(e, &x->deps);
        pthread_mutex_lock(&c->disk_lock);
        c->stats.compiles++;
        c->pending.compiles++;
        c->stats.compile_ms += x->compile_ms;
        c->pending.compile_ms += x->compile_ms;
        pthread_mutex_unlock(&c->disk_lock);
        if (c->test_hook) c->test_hook(c->test_user, JK_EVENT_COMPILED);
        compiled = st == JITK_OK;
      }
    }
    /* A compile goes to every tier, a remote hit to the local one, at
     * the next flush (jk_store_defer says why). */
    if (st == JITK_OK && (writable || compiled)) {
      jk_material full;
      jk_material_init(&full, e);
      pthread_mutex_lock(&c->disk_lock);
      bool ok = full_material(e, in, key, mat, x, &full);
      if (ok && writable && compiled) store_local(e, in, key, &full, x);
      if (ok && writable && !compiled)
        jk_store_defer(e, key, &full, x, in->program_name ? in->program_name : "module.cu");
      pthread_mutex_unlock(&c->disk_lock);
      if (ok && compiled) jk_remote_put(e, key, &full, x);
      jk_material_free(&full);
    }
    if (lease == JK_LEASE_MINE) jk_remote_release(e, key);
  }
  if (locked) jk_key_unlock(e, key);
  return st;
}

/* Whether a memory hit's own files (outside the CUDA headers) are as they
 * were when it was compiled. One whose record of them is incomplete (a
 * header named by a macro jitk cannot follow, precompiled headers) cannot
 * be told, and is compiled again, as it is stored in no tier. */
static bool memory_hit_holds(jitk_engine *e, jk_entry *hit) {
  if (hit->deps.unknown != NULL) {
    jk_log(e, JITK_LOG_INFO,
           "kernel cache: not served from memory: %s, so the files it reads cannot all be told",
           hit->deps.unknown);
    return false;
  }
  if (!jk_deps_have_user_files(&hit->deps)) return true;
  const char *changed = NULL;
  pthread_mutex_lock(&e->cache.disk_lock);
  bool holds = jk_deps_hold(e, &hit->deps, false, &changed);
  pthread_mutex_unlock(&e->cache.disk_lock);
  if (!holds)
    jk_log(e, JITK_LOG_INFO, "kernel cache: %s changed since the kernel was compiled; recompiling",
           changed);
  return holds;
}

/* A memory hit (the share group's count as one), for the statistics and
 * for the next flush of counts to the disk store. */
static void count_memory_hit(jk_cache *c) {
  atomic_fetch_add_explicit(&c->memory_hits, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->memory_hits_unflushed, 1, memory_order_relaxed);
}

static jitk_status cache_get(jitk_engine *e, const jk_compile_input *in, const char *generator,
                             jk_entry **out) {
  jk_cache *c = &e->cache;
  jk_material mat;
  jk_material_init(&mat, e);
  jk_key key;
  jitk_status st = jk_cache_key(e, in, generator, &mat, &key);
  if (st != JITK_OK) {
    jk_material_free(&mat);
    return st;
  }

  pthread_mutex_lock(&e->cache.table_lock);
  for (;;) {
    jk_entry *hit = jk_chains_find(&c->table, &key);
    if (hit != NULL) {
      hit->refs++;
      lru_unlink(c, hit);
      lru_push_front(c, hit);
      pthread_mutex_unlock(&e->cache.table_lock);
      if (memory_hit_holds(e, hit)) {
        count_memory_hit(c);
        jk_material_free(&mat);
        *out = hit;
        return JITK_OK;
      }
      /* Stale: out of the table (handles keep their module), and compiled
       * again below. */
      pthread_mutex_lock(&e->cache.table_lock);
      if (hit->in_table) {
        table_remove(c, hit);
        hit->refs--;
      }
      bool last = --hit->refs == 0;
      pthread_mutex_unlock(&e->cache.table_lock);
      if (last) entry_free(e, hit);
      pthread_mutex_lock(&e->cache.table_lock);
      continue;
    }
    if (!jk_key_list_has(&c->inflight, &key)) break;
    pthread_cond_wait(&c->compiled, &e->cache.table_lock);
  }
  bool added = jk_key_list_add(e, &c->inflight, &key);
  pthread_mutex_unlock(&e->cache.table_lock);
  if (!added) {
    jk_material_free(&mat);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }

  jk_entry *x = jk_calloc(e, 1, sizeof *x);
  if (x == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  if (st == JITK_OK) {
    x->key = key;
    /* Another engine of the group may have made the image; its own files
     * are checked as a memory hit's are. */
    jk_share_claim claim;
    while ((claim = jk_share_get(e, &key, x)) == JK_SHARE_HIT && !memory_hit_holds(e, x))
      jk_share_release(e, x, true);
    if (claim == JK_SHARE_HIT) {
      count_memory_hit(c);
    } else {
      st = fill_entry(e, in, &key, &mat, x);
      jk_share_put(e, &key, x, claim, st == JITK_OK);
    }
  }
  jk_material_free(&mat);
  if (st == JITK_OK && x->kind == JITK_IMAGE_CUBIN && x->log != NULL)
    st = jk_ptxas_parse(e, x->log, &x->resources, &x->num_resources);
  if (st == JITK_OK && e->has_device) {
    CUmodule mod = NULL;
    st = jk_module_load(e, x->image, x->kind, &mod);
    x->cu = mod;
  }

  pthread_mutex_lock(&e->cache.table_lock);
  jk_key_list_remove(&c->inflight, &key);
  pthread_cond_broadcast(&c->compiled);
  jk_entry *dead = NULL;
  if (st == JITK_OK) {
    x->refs = 1; /* the caller's */
    dead = table_insert(c, x);
  }
  pthread_mutex_unlock(&e->cache.table_lock);
  while (dead != NULL) {
    jk_entry *next = dead->hash_next;
    entry_free(e, dead);
    dead = next;
  }
  if (st != JITK_OK) {
    entry_free(e, x);
    return st;
  }
  /* Once per kernel and engine: later lookups are memory hits. */
  if (c->record_path != NULL) jk_manifest_record(e, in, generator);
  *out = x;
  return JITK_OK;
}

jitk_status jk_cache_get(jitk_engine *e, const jk_compile_input *in, const char *generator,
                         jk_entry **out) {
  jk_trace_push(e, "jitk cache get %s", in->program_name ? in->program_name : "program");
  jitk_status st = cache_get(e, in, generator, out);
  jk_trace_pop(e);
  return st;
}
