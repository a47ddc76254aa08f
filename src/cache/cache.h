/*
 * The kernel cache: an in-memory table of loaded modules per engine, and an
 * SQLite store of compiled images shared by every process of the user.
 *
 * Every kind of kernel goes through jk_cache_get: raw modules now, the
 * generated kinds later. It returns a shared, reference-counted entry that
 * holds the image, its names and, on a device engine, the loaded CUmodule.
 */
#ifndef JITK_SRC_CACHE_CACHE_H
#define JITK_SRC_CACHE_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jitk/jitk.h>
#include <sqlite3.h>

#include "nvrtc/nvrtc.h"

/* The on-disk format version (cache/schema.sql, cache/FORMAT.md). */
#define JK_CACHE_FORMAT 1
/* PRAGMA application_id of every jitk cache: the bytes "jitk". */
#define JK_APPLICATION_ID 1785295979

typedef struct jk_key {
  uint8_t bytes[16]; /* XXH3-128 of the key material, big-endian */
} jk_key;

/* Labelled, length-prefixed fields: each is a NUL-terminated label, a
 * 64-bit little-endian length, then the bytes. Two different field lists
 * can never serialize to the same bytes. */
typedef struct jk_material {
  jitk_engine *e;
  unsigned char *data;
  size_t len, cap;
  bool failed;
} jk_material;

void jk_material_init(jk_material *m, jitk_engine *e);
void jk_material_free(jk_material *m);
void jk_material_add(jk_material *m, const char *label, const void *bytes, size_t n);
void jk_material_add_str(jk_material *m, const char *label, const char *s);
/* Appends bytes that are already serialized fields. */
void jk_material_append(jk_material *m, const void *bytes, size_t n);
/* Walks the fields of a serialized material; returns false at the end or
 * on malformed input (then *ok is false). */
bool jk_material_next(const unsigned char *data, size_t len, size_t *pos, const char **label,
                      const unsigned char **bytes, size_t *n, bool *ok);

void jk_hash128(const void *data, size_t n, uint8_t out[16]);
void jk_key_hex(const jk_key *k, char out[33]);
/* XXH3-128, in hexadecimal, over the names and contents of the device
 * headers embedded from templates/. */
void jk_headers_digest(jitk_engine *e, char out[33]);

/* Who may write to a cache tier (dir.c says why each rule is there). */
typedef enum jk_tier_kind {
  JK_TIER_PRIVATE = 0, /* the user alone */
  JK_TIER_GROUP,       /* the members of the folder's group (JITK_CACHE_SHARED=1) */
  JK_TIER_SHARED       /* one trusted account; read-only here */
} jk_tier_kind;

typedef struct jk_trust {
  jk_tier_kind kind;
  bool has_owner;
  uid_t owner; /* JK_TIER_SHARED: the account trusted besides root and the user */
  gid_t group; /* JK_TIER_GROUP: the folder's group, set by jk_cache_prepare_dir */
} jk_trust;

/* A remembered content hash of a large file, valid while its stat data
 * is unchanged (deps.c). */
typedef struct jk_file_memo {
  jk_file_stamp stamp;
  uint8_t hash[16];
  bool used, dirty; /* dirty: not yet in the database */
} jk_file_memo;
#define JK_FILE_MEMOS 64

/* One compiled kernel image and what goes with it, shared by every module
 * handle made from it; the memory table holds one reference too. */
typedef struct jk_entry {
  jk_key key; /* the request's key: what the memory table finds it by */
  int refs;   /* under the cache's table_lock */
  struct jk_entry *hash_next, *lru_prev, *lru_next;
  bool in_table;

  void *image;
  size_t image_size;
  jitk_image_kind kind;
  char **name_expressions;
  char **lowered;
  size_t num_names;
  char *log;
  jitk_kernel_resources *resources;
  size_t num_resources;
  double compile_ms;
  void *cu; /* CUmodule, NULL on compile-only engines */
  /* Non-NULL: the fields from image to deps are those of the share
   * group's entry (share.c), which this one holds a reference to, rather
   * than its own. In the group's own entries, refs counts those holders,
   * hash_next chains the group's buckets and cu is NULL. */
  struct jk_entry *shared;
  /* What the compile read from disk; checked again on memory hits (files
   * outside the CUDA headers) and disk hits (all). */
  jk_deps deps;
} jk_entry;

/* Entries found by key: a power-of-two array of chains through
 * hash_next. The engine's memory table and the share group's table of
 * images are each one, under their own lock. */
typedef struct jk_chains {
  jk_entry **buckets;
  size_t num_buckets, count;
} jk_chains;

/* Keys being made by someone whom others wait for: the threads of an
 * engine, the engines of a share group. Under the owner's lock. */
typedef struct jk_key_list {
  jk_key *v;
  size_t n, cap;
} jk_key_list;

typedef enum jk_disk_state {
  JK_DISK_CLOSED = 0, /* not opened yet: opened at first use */
  JK_DISK_OPEN,
  JK_DISK_READ_ONLY,
  JK_DISK_OFF /* disabled by configuration or after a failure */
} jk_disk_state;

/* Counters. Those of an engine count its own work; the database keeps the
 * sum over every process. */
typedef struct jk_counters {
  uint64_t memory_hits, disk_hits, misses, compiles, corrupt, evictions, disk_errors;
  uint64_t shared_hits; /* of disk_hits, those the shared tier served */
  double compile_ms;
  /* The remote tier's, added under disk_lock (remote.c, with the
   * remote's lock held first). */
  uint64_t remote_hits, remote_misses, remote_errors, remote_rejected, remote_read, remote_written;
} jk_counters;

/* Events for tests: called, when set, at points where a crash matters. */
typedef enum jk_cache_event {
  JK_EVENT_IN_WRITE_TRANSACTION = 1,
  JK_EVENT_KEY_LOCKED = 2,
  JK_EVENT_COMPILED = 3
} jk_cache_event;

/* The remote tier on Redis (remote.c). */
typedef struct jk_remote_counters {
  uint64_t hits, misses, errors, rejected, stores, lease_waits, bytes_read, bytes_written;
} jk_remote_counters;

typedef struct jk_remote {
  bool inited;     /* the lock exists */
  bool configured; /* a URL was given */
  bool enabled;    /* it parsed, and jitk has hiredis */
  char *url;       /* as given, its password hidden */
  char *host, *user, *password;
  int port, db;
  /* The cluster's secret key (cache_remote_key_file), or NULL: entries
   * are signed and checked with it (remote.c, "signed entries"). */
  unsigned char *key;
  size_t key_len;
  /* Timeouts and waits, in milliseconds: connecting, the first answers
   * on a new connection (all of them, whole), every later request (sent
   * and its whole reply read), the pause after a failure, a lease's life,
   * and how long a process waits for another's compile. */
  int connect_ms, answer_ms, request_ms, backoff_ms, lease_ms, wait_ms;
  char node[320]; /* host:pid, the lease's value */
  /* Under lock: the connection (a redisContext), the process that made
   * it, when to try again after a failure, the state in words. */
  pthread_mutex_t lock;
  void *conn;
  pid_t pid;
  int64_t retry_at;
  bool warned;
  /* The request whose value was last rejected: a lease wait polls it
   * again and again, and one warning says it. */
  jk_key last_rejected;
  bool rejected_once;
  char state[640];
  jk_remote_counters stats;
} jk_remote;

typedef enum jk_lease {
  JK_LEASE_NONE = 0, /* no remote, or it failed */
  JK_LEASE_MINE,     /* this process compiles the request */
  JK_LEASE_OTHERS    /* another process of the cluster does */
} jk_lease;

typedef struct jk_share jk_share;

typedef struct jk_cache {
  /* The images shared with other engines of the process (share.c); every
   * engine has a group, of one engine unless it was made to share. */
  jk_share *share;

  /* Configuration, fixed at engine creation. */
  jitk_cache_mode mode;
  char *dir;      /* NULL when no directory could be chosen */
  bool shared;    /* a group tier (JITK_CACHE_SHARED=1) */
  jk_trust trust; /* the tier's rules, set at open */
  int64_t max_bytes;
  size_t memory_capacity;
  const char *vfs; /* SQLite VFS name; tests put a faulty one here */
  int busy_ms;     /* how long SQLite waits for a lock; tests shorten it */
  void (*test_hook)(void *user, jk_cache_event event);
  void *test_user;

  /* The in-memory table: a hash of entries with an LRU list, most recent
   * first, and the entries' reference counts. Guarded by table_lock, the
   * cache's own: nothing else of the engine is under it, and the engine's
   * lock is never taken inside it. */
  pthread_mutex_t table_lock;
  jk_chains table;
  jk_entry *lru_head, *lru_tail;

  /* Keys being compiled by a thread of this engine; others wait on
   * `compiled`. Guarded by table_lock. */
  jk_key_list inflight;
  pthread_cond_t compiled;

  /* The disk store, guarded by disk_lock. Opened lazily; reopened in a
   * forked child (owner_pid tells), never shared across fork. */
  pthread_mutex_t disk_lock;
  jk_disk_state disk;
  pid_t owner_pid;
  sqlite3 *db;
  sqlite3_stmt *lookup; /* prepared at open, reused by every lookup */
  int lock_fd;          /* the key-lock file, -1 when closed */
  bool network_fs;
  char *db_path;
  double open_us; /* how long the last open took, for the benchmarks */
  /* Disk hits whose last_used stamp is not written yet. */
  jk_key pending_used[64];
  size_t num_pending_used;
  jk_counters pending; /* counters not yet added to the database */

  /* Identity of the NVRTC in use, and the digest of jitk's embedded
   * device headers: parts of every key. */
  char nvrtc_id[96];
  char headers_digest[33];
  /* The content hash of the NVRTC libraries in use, in hexadecimal, part
   * of every entry's dependency record; empty until first needed. */
  char toolchain[33];
  /* The build IDs of the two library files hashed into it (libnvrtc,
   * libnvrtc-builtins), where they were hashed: what the libraries this
   * process has loaded are compared with (jk_toolchain_runs). */
  jk_build_id toolchain_ids[2];
  bool toolchain_hashed[2];
  /* Set once a loaded library is found not to be the file hashed (it was
   * replaced under this process): from then on the disk and remote tiers
   * neither serve nor store. */
  atomic_bool toolchain_replaced;
  /* Both libraries were found loaded and agreeing (jk_toolchain_runs);
   * under disk_lock. */
  bool toolchain_settled;
  /* What links relocatable programs with the device runtime, for their
   * keys (jk_linker_identity); empty until first needed. */
  char linker_id[160];

  /* Dependency checks (deps.c), under disk_lock: hashes of large files,
   * the database's remembered ones (a statement on the private store)
   * and toolkit records this engine has checked already. */
  jk_file_memo memos[JK_FILE_MEMOS];
  size_t next_memo;
  sqlite3_stmt *memo_get;
  uint64_t *verified;
  size_t verified_slots, verified_count;
  /* Candidates for a request, prepared with the lookup. */
  sqlite3_stmt *candidates;

  /* The shared tier (cache_shared_dir), read-only, under disk_lock:
   * opened at its first use, checked at every open. */
  char *shared_dir; /* NULL: none */
  jk_trust shared_trust;
  jk_disk_state shared_state;
  pid_t shared_pid;
  sqlite3 *shared_db;
  sqlite3_stmt *shared_lookup, *shared_candidates;
  char *shared_db_path;
  char shared_why[768]; /* "on", or "off: " and why */

  /* Entries the remote served, written to the local store at the next
   * flush rather than during the lookup (a first write of a process costs
   * the database's new write-ahead log, milliseconds that a remote hit
   * should not wait for). Under disk_lock. */
  struct jk_deferred *deferred;
  size_t num_deferred;

  /* The remote tier, asked after both local tiers miss, and its counters
   * over every process as jitk_cache_get_stats last read them (stats rows
   * 9 to 14, under disk_lock). */
  jk_remote remote;
  uint64_t remote_totals[6];

  /* The warm-up manifest this engine records into (manifest.c), or NULL;
   * record_off once writing it failed. */
  char *record_path;
  atomic_bool record_off;

  /* This engine's counters (memory hits kept apart: they are counted on
   * the fast path, without the disk lock). */
  jk_counters stats;
  _Atomic uint64_t memory_hits;
  _Atomic uint64_t memory_hits_unflushed;
} jk_cache;

/* Reads the cache settings (config fields, then the environment). */
jitk_status jk_cache_init(jitk_engine *e, const jitk_engine_config *cfg);
/* Flushes pending stamps and counters, closes the store, frees the table
 * (unloading modules nobody holds). */
void jk_cache_destroy(jitk_engine *e);

/*
 * The entry for compiling `in` with generator `generator` ("raw/1" for raw
 * modules): from memory, from disk, or compiled (and stored). The caller
 * owns one reference; release it with jk_entry_release. Disk problems
 * never fail this call: they are logged once and the store is left alone.
 */
jitk_status jk_cache_get(jitk_engine *e, const jk_compile_input *in, const char *generator,
                         jk_entry **out);
void jk_entry_release(jitk_engine *e, jk_entry *entry);
/* Frees an entry that was never handed out (no references, in no table),
 * with whatever fields it has. */
void jk_entry_discard(jitk_engine *e, jk_entry *entry);
/* One more reference to an entry the caller holds one of. */
void jk_entry_retain(jitk_engine *e, jk_entry *entry);
/*
 * An entry of the caller's own image, outside the cache (never stored or
 * found): a copy of the image (NUL-terminated, as PTX must be), an empty
 * log, loaded when the engine has a device. The caller owns its one
 * reference.
 */
jitk_status jk_entry_from_image(jitk_engine *e, jitk_image_kind kind, const void *image,
                                size_t size, jk_entry **out);

/* --- share.c: images shared by the engines of a process --- */
jitk_status jk_share_create(jitk_engine *e, jk_share **out);
void jk_share_join(jk_share *s);
/* The group goes with its last engine, after that engine's entries. */
void jk_share_leave(jitk_engine *e, jk_share *s);
typedef enum jk_share_claim {
  JK_SHARE_NONE = 0, /* not in the group; made here without telling the others */
  JK_SHARE_MINE,     /* not in the group: this engine makes it, then calls jk_share_put */
  JK_SHARE_HIT       /* `x` now shows the group's image */
} jk_share_claim;
/* Looks `key` up in the group, waiting while another engine makes it. */
jk_share_claim jk_share_get(jitk_engine *e, const jk_key *key, jk_entry *x);
/* After JK_SHARE_MINE or NONE: the key is no longer in flight, and when
 * `ok`, x's image joins the group (x then shows it, as on a hit). */
void jk_share_put(jitk_engine *e, const jk_key *key, jk_entry *x, jk_share_claim claim, bool ok);
/* Entry x lets go of its image (entry_free), which leaves the group's
 * table with its last holder, or at once when `stale` (a hit whose files
 * changed). */
void jk_share_release(jitk_engine *e, jk_entry *x, bool stale);
/* The group's engines, its images and the images engines took from each
 * other, for tests and the CLI. */
void jk_share_counts(jitk_engine *e, size_t *engines, size_t *images, uint64_t *hits);

/* The table's entry for a key, or NULL. */
jk_entry *jk_chains_find(const jk_chains *t, const jk_key *key);
/* Adds x (in_table set), or takes it out (in_table cleared). */
void jk_chains_add(jk_chains *t, jk_entry *x);
void jk_chains_remove(jk_chains *t, jk_entry *x);
/* Whether `key` is in the list; adding it (false when out of memory);
 * taking it out. */
bool jk_key_list_has(const jk_key_list *l, const jk_key *key);
bool jk_key_list_add(jitk_engine *e, jk_key_list *l, const jk_key *key);
void jk_key_list_remove(jk_key_list *l, const jk_key *key);

/* The full key material for an input, and its key. */
jitk_status jk_cache_key(jitk_engine *e, const jk_compile_input *in, const char *generator,
                         jk_material *material, jk_key *key);

/* The directory chosen by the rules of DESIGN.md section 4, allocated. */
char *jk_cache_default_dir(jitk_engine *e);

/* --- deps.c: dependency records --- */
/* The content hash of the file at `path`, through the remembered hashes
 * for large files; false when it is not a readable regular file. Under
 * disk_lock. */
bool jk_file_digest(jitk_engine *e, const char *path, uint8_t out[16]);
/* The same for a file whose stat data the caller has. */
struct stat;
bool jk_file_digest_stat(jitk_engine *e, const char *path, const struct stat *st, uint8_t out[16]);
/* Whether every dependency still holds (toolkit ones too when `toolkit`);
 * *failed names the first that does not. Under disk_lock. */
bool jk_deps_hold(jitk_engine *e, const jk_deps *d, bool toolkit, const char **failed);
bool jk_deps_have_user_files(const jk_deps *d);
/* Appends the record to an entry's key material. */
void jk_deps_material(jk_material *m, const char *toolchain, const jk_deps *d);
/* Reads the record back from key material, starting at byte `from` (the
 * end of the request). JITK_ERR_INVALID_IMAGE when it is malformed. */
jitk_status jk_deps_parse(jitk_engine *e, const unsigned char *data, size_t len, size_t from,
                          const unsigned char **toolchain, size_t *toolchain_len, jk_deps *out);
jitk_status jk_deps_copy(jitk_engine *e, const jk_deps *from, jk_deps *to);
/* The NVRTC libraries' digest (cache.toolchain), computed at first use.
 * Under disk_lock. */
const char *jk_toolchain(jitk_engine *e);
/* Whether the NVRTC libraries this process has loaded are still the
 * files the digest was computed from (their build IDs agree). Checked at
 * the digest and before each store (the builtins library is loaded at
 * NVRTC's first compile); a failure is remembered. Under disk_lock. */
bool jk_toolchain_runs(jitk_engine *e);
/* The linker of relocatable programs in words, part of their keys:
 * nvJitLink's version and the content hash of its library, or the
 * driver's version and the device, or "none". Computed at first use;
 * takes disk_lock, so the caller must not hold it. */
const char *jk_linker_identity(jitk_engine *e);
/* Writes remembered hashes not yet in the database; inside a write
 * transaction. jk_memo_written marks them written after the commit. */
int jk_memo_write(jitk_engine *e);
void jk_memo_written(jitk_engine *e);
bool jk_memo_pending(const jitk_engine *e);

/* --- store.c: the SQLite store --- */
jitk_status jk_store_open(jitk_engine *e);
void jk_store_close(jitk_engine *e);
/* Looks a key up; *found false on a miss. Entries that fail their checks
 * are deleted and counted as corrupt, and read as a miss. */
jitk_status jk_store_lookup(jitk_engine *e, const jk_key *key, const jk_material *material,
                            jk_entry *out, bool *found);
/* Stores an entry under its key (the hash of `material`: the request's
 * material and the dependency record) and records that it answers
 * `request`. */
jitk_status jk_store_insert(jitk_engine *e, const jk_key *key, const jk_key *request,
                            const jk_material *material, const jk_entry *entry, const char *label);
/* The entry for a request whose dependency record still holds, from the
 * request's candidates, most recently used first; *found false when none
 * does. */
jitk_status jk_store_find(jitk_engine *e, const jk_key *request, const jk_material *req,
                          jk_entry *out, bool *found);
/* Drops request rows whose entry is gone; inside a write transaction. */
int jk_store_forget_requests(jitk_engine *e);
/* The checks of a stored entry against the key material it must have
 * (`material`: the full one, the request's and the dependency record),
 * and `out` filled from it: *found false and *why set when it fails one.
 * The local tiers' rows and the remote's values go through it alike. */
jitk_status jk_store_check_entry(jitk_engine *e, int kind, double ms, const void *sum,
                                 size_t sum_len, const void *mat, size_t mat_len, const void *names,
                                 size_t names_len, const char *log, size_t log_len,
                                 const void *image, size_t image_len, const jk_material *material,
                                 jk_entry *out, bool *found, const char **why);
/* The shared tier: opened read-only after its checks; turned off with one
 * warning when it cannot be used. */
jitk_status jk_store_shared_open(jitk_engine *e);
void jk_store_shared_close(jitk_engine *e);
void jk_store_shared_disable(jitk_engine *e, const char *why, int rc);
void jk_store_note_hit(jitk_engine *e, const jk_key *key);
void jk_store_flush(jitk_engine *e);
/* Marks the disk tier unusable for this engine after an unexpected SQLite
 * failure, with one warning line. */
void jk_store_disable(jitk_engine *e, const char *why, int rc);

/* The fixed ids of the rows of the stats table (cache/FORMAT.md). */
enum {
  JK_STAT_MEMORY_HITS = 1,
  JK_STAT_DISK_HITS = 2,
  JK_STAT_MISSES = 3,
  JK_STAT_COMPILES = 4,
  JK_STAT_COMPILE_US = 5,
  JK_STAT_CORRUPT = 6,
  JK_STAT_EVICTIONS = 7,
  JK_STAT_TOTAL_BYTES = 8,
  JK_STAT_REMOTE_HITS = 9,
  JK_STAT_REMOTE_MISSES = 10,
  JK_STAT_REMOTE_ERRORS = 11,
  JK_STAT_REMOTE_REJECTED = 12,
  JK_STAT_REMOTE_READ = 13,
  JK_STAT_REMOTE_WRITTEN = 14
};

/* Unix time in milliseconds: created and last_used stamps, and the
 * remote's leases' ends. */
int64_t jk_now_ms(void);

/* The rowid a key is stored under: its first 63 bits. */
int64_t jk_key_id(const jk_key *key);

/* Transactions: BEGIN IMMEDIATE with retries (then the test hook runs),
 * COMMIT (rolling back when it fails), ROLLBACK. */
int jk_store_begin(jitk_engine *e);
int jk_store_commit(jitk_engine *e);
void jk_store_rollback(jitk_engine *e);
/* Whether an SQLite result means the database cannot be used. */
bool jk_store_is_fatal(int rc);
/* Inside a write transaction: delete one entry, keeping the total right;
 * when the store holds more than `limit` bytes, evict least recently used
 * entries (never the one of rowid `keep`; -1 for none) down to 90 % of
 * it. */
int jk_store_delete_row(jitk_engine *e, const jk_key *key);
/* Whether the row a statement stands on holds a usable entry (its key the
 * hash of its material, the material and names parsing, the checksum
 * matching): the columns from col_key on are JK_ROW_COLUMNS' ), and id
 * is the row's. Whatever leaves the disk store for another (an import, a
 * publish, a push) goes only where this holds. */
#define JK_ROW_COLUMNS "key, kind, checksum, material, names, log, image"
bool jk_store_row_is_sound(jitk_engine *e, sqlite3_stmt *q, int col_key, int64_t id);
int jk_store_evict_to(jitk_engine *e, int64_t limit, int64_t keep, size_t *removed);
/* The trust checks of a database file and its -wal, -shm and -journal. */
jitk_status jk_store_check_files(jitk_engine *e, const char *db_path, const jk_trust *t);
/* A tier's folder prepared and checked (made when `create`), and its
 * database's path (and the lock file's, when lock_path is not NULL) with
 * no links in them, both files checked; allocated. */
jitk_status jk_store_locate(jitk_engine *e, const char *dir, jk_trust *t, bool create,
                            char **db_path, char **lock_path);
/* XXH3-128 over an entry's kind, image, names and log, each
 * length-prefixed: the checksum stored with the row. */
void jk_store_checksum(int kind, const void *image, size_t image_size, const void *names,
                       size_t names_size, const char *log, size_t log_size, uint8_t out[16]);

/* Queues an entry for the local store (its key material `full`, the
 * request it answers, a label), copying what a row needs; written by the
 * next jk_store_flush, at once when 8 are queued. Under disk_lock. */
void jk_store_defer(jitk_engine *e, const jk_key *request, const jk_material *full,
                    const jk_entry *entry, const char *label);
/* Frees what is queued without writing it (a forked child's copy). */
void jk_store_drop_deferred(jitk_engine *e);

/* Serializes an entry's names for the database, and back. */
jitk_status jk_names_pack(jitk_engine *e, const jk_entry *entry, jk_material *out);
jitk_status jk_names_unpack(jitk_engine *e, const unsigned char *data, size_t n, jk_entry *entry);

/* --- tuning.c: autotune choices ---
 * The choice stored under `key` (copied into choice[size]); *found false
 * when there is none, the cache is off or the table does not exist yet. */
jitk_status jk_tuning_get(jitk_engine *e, const char *key, char *choice, size_t size, bool *found);
/* Stores (or replaces) the choice under `key`; JITK_OK without storing
 * when the disk cache is off or read-only. */
jitk_status jk_tuning_put(jitk_engine *e, const char *key, const char *choice);
/* Whether some key starting with `prefix` has a choice: false when none
 * does, the cache is off or the table does not exist. */
bool jk_tuning_any(jitk_engine *e, const char *prefix);

/* --- lock.c: cross-process key locks --- */
/* Holds the key while this process compiles it. Waits up to `timeout_ms`
 * for another process that holds it; returns false when the lock could not
 * be taken (then the caller compiles anyway). */
bool jk_key_lock(jitk_engine *e, const jk_key *key, int timeout_ms);
void jk_key_unlock(jitk_engine *e, const jk_key *key);

/* --- dir.c: locations, permissions, filesystems --- */
/* Whether files owned by `uid` may be trusted in a tier. */
bool jk_trust_uid(const jk_trust *t, uid_t uid);
/* Creates `dir` (when `create`; the private tier 0700, a group tier 02770)
 * with its parents, following links in the parents but refusing the
 * folder itself as one, and checks the folder and every parent on its
 * real path against the tier's rules. *real gets the folder's path with
 * no links in it, allocated. */
jitk_status jk_cache_prepare_dir(jitk_engine *e, const char *dir, jk_trust *t, bool create,
                                 char **real);
/* The same rules for a file in the folder, when it exists: not a link, a
 * regular file with one name, owner and mode as the tier wants. */
jitk_status jk_cache_check_file(jitk_engine *e, const char *path, const jk_trust *t);
/* The mode of files a tier makes: 0600, 0660 or 0644. */
mode_t jk_tier_file_mode(const jk_trust *t);
/* Creates `path` with the tier's mode (whatever the umask) when it does
 * not exist. With `keep`, returns a read-write descriptor of it (new or
 * not), -1 on failure; without, -2 once it exists, -1 on failure. */
int jk_cache_open_file(jitk_engine *e, const char *path, const jk_trust *t, bool keep);
/* A user name or numeric id. */
jitk_status jk_parse_owner(jitk_engine *e, const char *text, uid_t *uid);
/* Whether `path` lies on a network filesystem (NFS, SMB, CIFS, ...), whose
 * locking SQLite's WAL cannot rely on; sets *name to the filesystem's. */
bool jk_is_network_fs(const char *path, const char **name);
/* The same decision from a statfs f_type. */
bool jk_is_network_fs_type(long type, const char **name);

/* --- manifest.c: the warm-up manifest --- */
/* Reads cache_record or $JITK_CACHE_RECORD. */
jitk_status jk_manifest_init(jitk_engine *e, const jitk_engine_config *cfg);
/* Appends a request the engine looked up (compiled, or found in a tier)
 * to the manifest, when one is recorded; a failure to write turns
 * recording off with one warning. */
void jk_manifest_record(jitk_engine *e, const jk_compile_input *in, const char *generator);
/* The manifest line of a request, newline included, allocated. */
jitk_status jk_manifest_line(jitk_engine *e, const jk_compile_input *in, const char *generator,
                             const char *target, char **out);

/* --- remote.c: the remote tier --- */
/* Reads cache_remote or the environment; an unusable configuration turns
 * the remote off with one warning, never fails the engine. */
jitk_status jk_remote_init(jitk_engine *e, const jitk_engine_config *cfg);
void jk_remote_destroy(jitk_engine *e);
bool jk_remote_on(jitk_engine *e);
/* The remote's entry for a request, checked as a local row is; *found
 * false on a miss, when the remote is off or failing. *present: the
 * remote had a value for the request (one that may have failed its
 * checks, or be for other files). Counts hits, not misses (the caller
 * knows when a lookup ends in one). */
jitk_status jk_remote_find(jitk_engine *e, const jk_key *request, const jk_material *req,
                           jk_entry *out, bool *found, bool *present);
/* Sends a compiled entry (its full key material) to the remote. */
void jk_remote_put(jitk_engine *e, const jk_key *request, const jk_material *full,
                   const jk_entry *x);
/* Adds to the database's pending remote counters (hits, misses, errors,
 * rejected, bytes read, bytes written); takes disk_lock. */
void jk_remote_count(jitk_engine *e, uint64_t hits, uint64_t misses, uint64_t errors,
                     uint64_t rejected, uint64_t read, uint64_t written);
/* Takes the request's lease for this process when nobody holds it. */
jk_lease jk_remote_lease(jitk_engine *e, const jk_key *request);
void jk_remote_release(jitk_engine *e, const jk_key *request);
/* Whether some process holds the request's lease. */
bool jk_remote_lease_held(jitk_engine *e, const jk_key *request);

#endif
