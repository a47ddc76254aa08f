/*
 * The ground floor: allocation through the engine's allocator, growable
 * strings, failures with their per-thread messages, and logging. It
 * includes only the public header, and every other layer stands on it.
 *
 * The engine (src/engine.h) holds a jk_base as its first member, so these
 * functions take any jitk_engine * without knowing the rest of it. A NULL
 * engine (before one exists) uses the C library's allocator, the calling
 * thread's fallback message and $JITK_LOG.
 */
#ifndef JITK_SRC_BASE_BASE_H
#define JITK_SRC_BASE_BASE_H

#include <jitk/jitk.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__GNUC__)
#define JK_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define JK_PRINTF(fmt, args)
#endif

/* Hints for the launch path, where a mispredicted error branch costs. */
#define JK_LIKELY(x) __builtin_expect(!!(x), 1)
#define JK_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* One thread's last failure on one engine. Kept in a list on the engine so
 * that destroying the engine frees the records of every thread. */
typedef struct jk_err_record {
  struct jk_err_record *next, *prev;
  jitk_engine *engine;
  char *message; /* heap copy, or NULL when it did not fit anywhere */
  int offset;    /* byte offset for parse errors, else -1 */
  char inline_message[512];
} jk_err_record;

/* What the ground floor keeps on the engine: its allocator and log sink
 * (from the engine's config), and the per-thread error records. */
typedef struct jk_base {
  jitk_alloc_fn alloc_fn;
  void *alloc_user;
  jitk_log_fn log_fn;
  void *log_user;
  jitk_log_level log_level;
  /* Per-thread error records: the key maps a thread to its record. */
  pthread_key_t err_key;
  pthread_mutex_t err_lock;
  jk_err_record *err_records;
  /* The NVTX domain "jitk" when JITK_NVTX=1 at the engine's creation,
   * else NULL: ranges cost one test then (trace.c). */
  void *trace_domain;
} jk_base;

/* The engine's jk_base, its first member (src/engine.h checks that). The
 * const is dropped: the records are the engine's, but a failure on a
 * const engine still records its message. */
static inline jk_base *jk_base_of(const jitk_engine *e) { return (jk_base *)(void *)e; }

/* NVTX ranges around jitk's work, for Nsight Systems: compiles, cache
 * lookups, module loads and launches, in the domain "jitk". Off unless the
 * environment has JITK_NVTX=1 when the engine is made; then a range costs
 * an NVTX push and pop, which do nothing unless a tool is attached. The
 * name is formatted (at most 127 characters) only when tracing is on. */
void jk_trace_init(jitk_engine *e);
void jk_trace_fini(jitk_engine *e);
void jk_trace_push_(const jitk_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void jk_trace_pop_(const jitk_engine *e);
#define jk_trace_push(e, ...)                                                               \
  do {                                                                                      \
    if (JK_UNLIKELY(jk_base_of(e)->trace_domain != NULL)) jk_trace_push_((e), __VA_ARGS__); \
  } while (0)
#define jk_trace_pop(e)                                                     \
  do {                                                                      \
    if (JK_UNLIKELY(jk_base_of(e)->trace_domain != NULL)) jk_trace_pop_(e); \
  } while (0)

/* The compile pool (parallel.c): runs fn(user, i) for every i below
 * `count` on up to `threads` threads, the calling one among them, and
 * returns the status of the lowest index that failed, its message
 * prefixed with the index (JITK_OK when none did). `statuses` (may be
 * NULL) gets every task's status. `progress`, when set, is called after
 * each task, one call at a time, with the tasks finished and failed so
 * far. */
typedef jitk_status (*jk_task_fn)(void *user, size_t index);
typedef void (*jk_progress_fn)(void *user, size_t finished, size_t total, size_t failed);
jitk_status jk_parallel_run(jitk_engine *e, size_t count, int threads, jk_task_fn fn, void *user,
                            jitk_status *statuses, jk_progress_fn progress, void *progress_user);
/* The CPUs this process may run on. */
int jk_cpu_count(void);

/* Allocation through the engine's allocator. A NULL engine (before one
 * exists) uses the C library. */
void *jk_malloc(jitk_engine *e, size_t size);
void *jk_calloc(jitk_engine *e, size_t count, size_t size);
void *jk_realloc(jitk_engine *e, void *ptr, size_t size);
void jk_free(jitk_engine *e, void *ptr);
char *jk_strdup(jitk_engine *e, const char *s);
char *jk_strndup(jitk_engine *e, const char *s, size_t n);

/* Records a failure and returns `status`, so that callers can write
 * `return jk_fail(e, JITK_ERR_..., "...")`. A NULL engine records it in the
 * calling thread's fallback. The macro returns `status` itself (it has no
 * side effects at any call), so that a reader, and the static analyzer,
 * which sees one file at a time, know that `st = jk_fail(...)` failed. */
jitk_status jk_fail_record(const jitk_engine *e, jitk_status status, const char *fmt, ...)
    JK_PRINTF(3, 4);
static inline jitk_status jk_status_of(jitk_status status) { return status; }
#define jk_fail(e, status, ...) jk_status_of((jk_fail_record((e), (status), __VA_ARGS__), (status)))
jitk_status jk_failv(const jitk_engine *e, jitk_status status, const char *fmt, va_list ap);
/* As jk_fail, and remembers the byte offset for jitk_error_offset. */
jitk_status jk_fail_at(const jitk_engine *e, jitk_status status, int offset, const char *fmt, ...)
    JK_PRINTF(4, 5);

/*
 * A parse error in a user's string, in a compiler's style:
 *   label:LINE:COL: what is wrong
 *       the line of text
 *       ^~~~
 * `offset` and `length` mark the bad bytes; the offset is also kept for
 * jitk_error_offset.
 */
jitk_status jk_fail_caret(const jitk_engine *e, jitk_status status, const char *label,
                          const char *text, size_t offset, size_t length, const char *fmt, ...)
    JK_PRINTF(7, 8);

/* Sets up the engine's per-thread records (at create), and releases
 * every one of them (at destroy). */
void jk_errors_init(jitk_engine *e);
void jk_errors_destroy(jitk_engine *e);

void jk_log(const jitk_engine *e, jitk_log_level level, const char *fmt, ...) JK_PRINTF(3, 4);
/* Whether a message at `level` would be written, to skip costly
 * formatting. */
bool jk_log_enabled(const jitk_engine *e, jitk_log_level level);
/* Reads $JITK_LOG; unknown values give warn. */
jitk_log_level jk_log_level_from_env(void);

/* A growable string on the engine's allocator. On allocation failure it
 * keeps what it has and sets `failed`; callers check once at the end. */
typedef struct jk_buf {
  jitk_engine *e;
  char *data;
  size_t len, cap;
  bool failed;
} jk_buf;

void jk_buf_init(jk_buf *b, jitk_engine *e);
void jk_buf_free(jk_buf *b);
void jk_buf_append(jk_buf *b, const char *s, size_t n);
void jk_buf_puts(jk_buf *b, const char *s);
void jk_buf_printf(jk_buf *b, const char *fmt, ...) JK_PRINTF(2, 3);
/* Hands over the string (NUL-terminated) and resets the buffer. NULL when
 * an allocation failed. */
char *jk_buf_take(jk_buf *b);

/* A shared library's GNU build ID: the linker's digest of its contents,
 * written into the file and mapped with its code (build_id.c). n is 0
 * where there is none. */
typedef struct jk_build_id {
  uint32_t n;
  uint8_t bytes[64];
} jk_build_id;

/* The build ID of a library loaded in this process: the one holding
 * `addr`, or, where addr is NULL, the one whose file name ends in /name.
 * False when no such library is loaded. */
bool jk_loaded_build_id(const void *addr, const char *name, jk_build_id *out);
/* The build ID written in the ELF file at `path`; false when it cannot be
 * read as a 64-bit ELF file. */
bool jk_file_build_id(const char *path, jk_build_id *out);
bool jk_build_id_same(const jk_build_id *a, const jk_build_id *b);

/* What stat says of a file that changes whenever its contents may have:
 * its device and inode, size, and modification and change times to the
 * nanosecond (file_stamp.c). */
struct stat;
typedef struct jk_file_stamp {
  uint64_t dev, ino;
  int64_t size, mtime_ns, ctime_ns;
} jk_file_stamp;

void jk_file_stamp_of(const struct stat *st, jk_file_stamp *out);
/* A time as nanoseconds since its clock's epoch. */
int64_t jk_timespec_ns(struct timespec t);
bool jk_file_stamp_same(const jk_file_stamp *a, const jk_file_stamp *b);

/* Opens `path` for reading when it is a regular file: the descriptor,
 * *st its stat data. The open does not wait (O_NONBLOCK), so that a FIFO
 * put where a file was expected cannot block the caller until a writer
 * comes. -2 when it is something else (*st says what), -1 with errno
 * when it cannot be opened or stat'ed. */
int jk_open_regular(const char *path, struct stat *st);

/* How many bytes of a caller's options struct jitk reads, given its
 * struct_size: the struct's forms end at `ends` (ascending: where each
 * form's last field ends, the last entry the current form's), and a
 * caller's size is one of those or in the padding after one (as sizeof of
 * that form gives it); the bytes read are that form's. 0 for any other
 * size: one that ends inside a field would have jitk read part of the
 * caller's value (half a pointer), or take the padding for a field. */
size_t jk_struct_form(size_t size, const size_t *ends, size_t n);

/* SHA-256 over data given in pieces, and HMAC-SHA-256 (sha256.c). */
typedef struct jk_sha256 {
  uint32_t h[8];
  uint64_t len; /* bytes hashed */
  unsigned char block[64];
  size_t used; /* bytes of `block` filled */
} jk_sha256;

void jk_sha256_init(jk_sha256 *s);
void jk_sha256_update(jk_sha256 *s, const void *data, size_t n);
/* The digest; the state is wiped and must be initialized again. */
void jk_sha256_final(jk_sha256 *s, unsigned char out[32]);
void jk_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t n,
                    unsigned char out[32]);
/* Whether n bytes are equal, in a time that does not depend on where they
 * differ (for comparing tags). */
bool jk_same_secret(const void *a, const void *b, size_t n);
/* Zeroes n bytes in a way the compiler does not drop. */
void jk_wipe(void *p, size_t n);

#endif
