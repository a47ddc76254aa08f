/*
 * The remote tier: compiled entries shared by the machines of a cluster
 * through Redis, behind the local SQLite store.
 *
 * On a local miss the remote is asked for the request; what it returns is
 * checked exactly as a row of the local store is (format, the key
 * recomputed from the stored key material, the request it answers, the
 * toolchain, the dependency record against this machine's files, the
 * checksum, the names), and then written into the local store. After a
 * compile the entry goes to the remote too. A request being compiled by
 * some process of the cluster is marked with a lease (SET NX PX); other
 * processes wait for its entry for a bounded time, then compile
 * themselves. A process that dies releases nothing, and its lease expires.
 *
 * The remote is never in the way: the connection and its first answers
 * have short timeouts, every command has a deadline for its whole reply
 * and a cap on the bytes that reply may hold, a failure turns the remote
 * off for a back-off period with one warning for the process, and jitk
 * carries on with the local tier. Nothing it returns is loaded without
 * the checks above.
 * Whoever may write to the Redis database may plant entries that pass
 * them: it must be trusted as the local cache's folder is (docs/GUIDE.md),
 * unless the cluster shares a secret key (cache_remote_key_file). Then
 * every value jitk sends is signed, an HMAC-SHA-256 tag of the whole
 * value under the key after it, and only values whose tag the key
 * confirms are served.
 *
 * Redis holds, per request, the most recent entry compiled for it, under
 * "jitk:<format>:<request key>", and the lease under
 * "jitk:<format>:lease:<request key>". The entry is one binary value:
 * the magic "JITKRMT1", then little-endian u32 format, u32 image kind,
 * f64 compile milliseconds, and five fields of a u64 length and the
 * bytes: key material, checksum, names, log, image. A signed value has
 * the magic "JITKRMT2" and its 32-byte tag last, and a signed lease's
 * value is the holder's node with the lease's end and a tag after it
 * (lease_value).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "engine.h"

#ifdef JITK_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#define JK_REMOTE_MAGIC "JITKRMT1"
/* A signed value: the same fields after this magic, then the HMAC-SHA-256
 * tag of everything before it under the cluster's key. */
#define JK_REMOTE_SIGNED "JITKRMT2"
#define JK_REMOTE_TAG 32
/* The bounds of a key file's key. */
#define JK_REMOTE_KEY_MIN 16
#define JK_REMOTE_KEY_MAX 4096
/* Rounds of SCAN a pull takes at most (100 keys a round). */
#define JK_REMOTE_MAX_SCAN_ROUNDS 1000000u
/* What one reply may hold beyond the largest entry the local store keeps
 * (its size cap): the reply's own framing. Also all that a reply without
 * data (a status, a number, a lease's value) may hold. */
#define JK_REMOTE_REPLY_MARGIN ((int64_t)64 << 10)
/* What a SCAN round's reply may hold: it asks for 100 keys of about 50
 * bytes, and Redis answers about that many. The bound is also what keeps
 * hiredis's objects for a reply of many tiny elements (some 60 bytes
 * each, whatever the element's size on the wire) within reason. */
#define JK_REMOTE_LISTING_CAP ((int64_t)1 << 20)

/* The replies a command may have: a value of the store (an entry, as
 * large as the local cap allows), a SCAN's listing (the only arrays jitk
 * asks for), or something small. */
typedef enum jk_reply_kind { JK_REPLY_SMALL, JK_REPLY_VALUE, JK_REPLY_LISTING } jk_reply_kind;

/* --- Configuration --- */

/* The URL without its password, for messages and the info call. The
 * password is what parse_url takes: after the first colon before the '@',
 * or all of it when there is no colon. */
static char *hide_password(jitk_engine *e, const char *url) {
  const char *scheme = strstr(url, "://");
  const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
  if (at == NULL) return jk_strdup(e, url);
  const char *colon = memchr(scheme + 3, ':', (size_t)(at - scheme - 3));
  const char *from = colon != NULL ? colon + 1 : scheme + 3;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_append(&b, url, (size_t)(from - url));
  jk_buf_puts(&b, "***");
  jk_buf_puts(&b, at);
  return jk_buf_take(&b);
}

/* Parses redis://[user:password@]host[:port][/db]. Returns NULL on
 * success, else why the URL is refused. */
static const char *parse_url(jitk_engine *e, const char *url, jk_remote *r) {
  const char *p = NULL;
  if (strncmp(url, "redis://", 8) == 0) {
    p = url + 8;
  } else if (strncmp(url, "rediss://", 9) == 0) {
    return "rediss:// (TLS) needs hiredis 1.0 or newer built with TLS, which this jitk was not "
           "built with; use redis:// over a trusted network or a tunnel";
  } else {
    return "it does not start with redis://";
  }
  const char *at = strchr(p, '@');
  if (at != NULL) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (colon != NULL) {
      r->user = colon > p ? jk_strndup(e, p, (size_t)(colon - p)) : NULL;
      r->password = jk_strndup(e, colon + 1, (size_t)(at - colon - 1));
    } else {
      r->password = jk_strndup(e, p, (size_t)(at - p));
    }
    p = at + 1;
  }
  const char *end = p + strcspn(p, ":/");
  if (end == p) return "it names no host";
  r->host = jk_strndup(e, p, (size_t)(end - p));
  r->port = 6379;
  if (*end == ':') {
    char *stop = NULL;
    errno = 0;
    long port = strtol(end + 1, &stop, 10);
    if (errno != 0 || stop == end + 1 || port < 1 || port > 65535 || (*stop && *stop != '/'))
      return "its port is not a number from 1 to 65535";
    r->port = (int)port;
    end = stop;
  }
  r->db = 0;
  if (*end == '/' && end[1] != '\0') {
    char *stop = NULL;
    errno = 0;
    long db = strtol(end + 1, &stop, 10);
    if (errno != 0 || *stop != '\0' || db < 0 || db > 1000000)
      return "its database (after the /) is not a number";
    r->db = (int)db;
  }
  if (r->host == NULL) return "out of memory";
  return NULL;
}

/* `path` opened for reading when it is a regular file, NULL otherwise
 * (*regular says which). The open does not wait: a FIFO put where a file
 * was expected would otherwise block engine creation until a writer came. */
static FILE *open_regular(const char *path, struct stat *st, bool *regular) {
  int fd = jk_open_regular(path, st);
  *regular = fd != -2;
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "rb");
  if (f == NULL) close(fd);
  return f;
}

/* The URL from the first line of `path`. A password in a file that others
 * can read is refused: anyone on the machine could then write the cluster's
 * cache. */
static char *url_from_file(jitk_engine *e, const char *path, const char **why) {
  struct stat st;
  bool regular;
  FILE *f = open_regular(path, &st, &regular);
  if (f == NULL) {
    *why =
        regular
            ? "the file named by JITK_CACHE_REMOTE_FILE cannot be read"
            : "the file named by JITK_CACHE_REMOTE_FILE cannot be read: it is not a regular file";
    return NULL;
  }
  char line[2048];
  if (fgets(line, sizeof line, f) == NULL) line[0] = '\0';
  fclose(f);
  line[strcspn(line, "\r\n")] = '\0';
  char *url = jk_strdup(e, line);
  jk_remote probe;
  memset(&probe, 0, sizeof probe);
  if (url != NULL && parse_url(e, url, &probe) == NULL && probe.password != NULL &&
      (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    *why =
        "the file named by JITK_CACHE_REMOTE_FILE holds a password and others can read it "
        "(chmod 600 it)";
    jk_free(e, url);
    url = NULL;
  }
  jk_free(e, probe.user);
  jk_free(e, probe.password);
  jk_free(e, probe.host);
  return url;
}

/* The cluster's key from the file at `path` (cache_remote_key_file): its
 * bytes less one trailing newline, 16 to 4096 of them, from a regular
 * file that only its owner may read. NULL with *why set otherwise. */
static unsigned char *key_from_file(jitk_engine *e, const char *path, size_t *len,
                                    const char **why) {
  struct stat st;
  bool regular;
  FILE *f = open_regular(path, &st, &regular);
  if (f == NULL) {
    *why = regular ? "its key file cannot be read"
                   : "its key file cannot be read: it is not a regular file";
    return NULL;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    fclose(f);
    *why = "its key file may be read or written by others (chmod 600 it)";
    return NULL;
  }
  unsigned char *key = jk_malloc(e, JK_REMOTE_KEY_MAX + 2);
  size_t n = key ? fread(key, 1, JK_REMOTE_KEY_MAX + 2, f) : 0;
  fclose(f);
  if (key == NULL) {
    *why = "out of memory";
    return NULL;
  }
  if (n > 0 && key[n - 1] == '\n') n--;
  if (n > 0 && key[n - 1] == '\r') n--;
  if (n < JK_REMOTE_KEY_MIN || n > JK_REMOTE_KEY_MAX) {
    jk_wipe(key, JK_REMOTE_KEY_MAX + 2);
    jk_free(e, key);
    *why = n < JK_REMOTE_KEY_MIN ? "its key is shorter than 16 bytes"
                                 : "its key is longer than 4096 bytes";
    return NULL;
  }
  *len = n;
  return key;
}

static void set_off(jk_remote *r, const char *fmt, const char *detail) {
  snprintf(r->state, sizeof r->state, fmt, detail);
}

jitk_status jk_remote_init(jitk_engine *e, const jitk_engine_config *cfg) {
  jk_remote *r = &e->cache.remote;
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->lock, NULL);
  r->inited = true;
  r->connect_ms = 25;
  r->answer_ms = 250;
  r->request_ms = 1000;
  r->backoff_ms = 30000;
  r->lease_ms = 60000;
  r->wait_ms = 60000;
  snprintf(r->state, sizeof r->state, "off: no remote cache is configured");
  const char *why = NULL;
  char *url = NULL;
  const char *given = cfg->cache_remote ? cfg->cache_remote : getenv("JITK_CACHE_REMOTE");
  const char *file = getenv("JITK_CACHE_REMOTE_FILE");
  if (given != NULL && *given != '\0') {
    url = jk_strdup(e, given);
  } else if (file != NULL && *file != '\0') {
    url = url_from_file(e, file, &why);
  } else {
    return JITK_OK;
  }
  r->configured = true;
  if (url == NULL) {
    set_off(r, "off: %s", why ? why : "out of memory");
  } else {
    r->url = hide_password(e, url);
    why = parse_url(e, url, r);
    if (why != NULL) set_off(r, "off: the URL is refused: %s", why);
  }
  /* A key that was asked for and cannot be had leaves the remote off:
   * going on without it would serve what the key was to keep out. */
  const char *key_file = cfg->cache_remote_key_file ? cfg->cache_remote_key_file
                                                    : getenv("JITK_CACHE_REMOTE_KEY_FILE");
  if (why == NULL && url != NULL && key_file != NULL && *key_file != '\0') {
    r->key = key_from_file(e, key_file, &r->key_len, &why);
    if (why != NULL) {
      char detail[512];
      snprintf(detail, sizeof detail, "%s: %s", key_file, why);
      set_off(r, "off: %s", detail);
    }
  }
#ifndef JITK_HAVE_HIREDIS
  if (why == NULL && url != NULL) {
    why = "this jitk was built without hiredis";
    set_off(r, "off: %s (install libhiredis-dev and build again)", why);
  }
#endif
  jk_free(e, url);
  if (why != NULL) {
    jk_log(e, JITK_LOG_WARN, "kernel cache: the remote %s is %s", r->url ? r->url : "tier",
           r->state);
    return JITK_OK;
  }
  r->enabled = true;
  snprintf(r->state, sizeof r->state, "not contacted yet");
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  snprintf(r->node, sizeof r->node, "%s:%ld", host, (long)getpid());
  /* The tests shorten the waits. */
  const char *v = getenv("JITK_CACHE_REMOTE_WAIT_MS");
  if (v != NULL && *v != '\0') r->wait_ms = atoi(v);
  v = getenv("JITK_CACHE_REMOTE_LEASE_MS");
  if (v != NULL && *v != '\0') r->lease_ms = atoi(v);
  /* A request timeout of nothing would fail every command. */
  v = getenv("JITK_CACHE_REMOTE_REQUEST_MS");
  if (v != NULL && atoi(v) > 0) r->request_ms = atoi(v);
  return JITK_OK;
}

bool jk_remote_on(jitk_engine *e) { return e->cache.remote.enabled; }

void jk_remote_count(jitk_engine *e, uint64_t hits, uint64_t misses, uint64_t errors,
                     uint64_t rejected, uint64_t read, uint64_t written) {
  jk_cache *c = &e->cache;
  pthread_mutex_lock(&c->disk_lock);
  c->pending.remote_hits += hits;
  c->pending.remote_misses += misses;
  c->pending.remote_errors += errors;
  c->pending.remote_rejected += rejected;
  c->pending.remote_read += read;
  c->pending.remote_written += written;
  pthread_mutex_unlock(&c->disk_lock);
}

#ifdef JITK_HAVE_HIREDIS

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void disconnect(jk_remote *r) {
  if (r->conn != NULL) redisFree((redisContext *)r->conn);
  r->conn = NULL;
}

/* Turns the remote off for the back-off period after a failure; the first
 * failure of the process is a warning, the later ones debug lines. Under
 * r->lock. */
static void failed(jitk_engine *e, jk_remote *r, const char *what, const char *detail) {
  /* The message first: `detail` may be the connection's own error text,
   * which the disconnect frees. */
  char msg[512];
  snprintf(msg, sizeof msg, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
  disconnect(r);
  r->stats.errors++;
  jk_remote_count(e, 0, 0, 1, 0, 0, 0);
  r->retry_at = now_ms() + r->backoff_ms;
  snprintf(r->state, sizeof r->state, "off for %d s after an error: %s", r->backoff_ms / 1000, msg);
  jk_log(e, r->warned ? JITK_LOG_DEBUG : JITK_LOG_WARN,
         "kernel cache: the remote %s cannot be used (%s); going on with the local cache, trying "
         "again in %d s",
         r->url, msg, r->backoff_ms / 1000);
  r->warned = true;
}

static void set_timeout(redisContext *c, int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  redisSetTimeout(c, tv);
}

/* Whether the reader waits for the rest of a bulk string announced longer
 * than `cap` bytes. Of everything a server sends, hiredis leaves only a
 * bulk string's length line in its buffer once that line is whole (it
 * takes the lines of every other reply, an array's count included, as
 * soon as they are whole, and a bulk string only with all its bytes):
 * digits and CRLF at its cursor are that length. A length has at most 20
 * digits, so nothing longer is scanned however much is buffered. */
static bool announces_more(const redisReader *rd, int64_t cap) {
  const char *p = rd->buf + rd->pos, *end = rd->buf + rd->len;
  int64_t announced = 0;
  int digits = 0;
  for (; p < end && *p >= '0' && *p <= '9' && digits <= 20; p++, digits++)
    if (announced <= cap) announced = announced * 10 + (*p - '0');
  return digits > 0 && digits <= 20 && end - p >= 2 && p[0] == '\r' && p[1] == '\n' &&
         announced > cap;
}

/* Whether a listing's unread bytes hold an array that announces more
 * than `most` elements. hiredis makes room for an array's elements (8
 * bytes each) as soon as it reads the count, before any of them arrive:
 * a count of two billion would reserve 16 GB. The reader's cursor is
 * always at the start of an item it has not taken, so the items are
 * walked from there, over bulk strings' bytes (which may hold anything)
 * and up to the first one not wholly buffered. */
static bool announces_too_many(const redisReader *rd, int64_t most) {
  const char *p = rd->buf + rd->pos, *end = rd->buf + rd->len;
  while (p < end) {
    const char type = *p;
    const char *eol = memchr(p, '\r', (size_t)(end - p));
    if (eol == NULL || end - eol < 2) return false; /* the line is not whole yet */
    if (type == '*' || type == '$') {
      /* A count or length: more than 18 digits is more than any bound. */
      int64_t n = 0;
      int digits = 0;
      const char *q = p + 1;
      for (; q < eol && *q >= '0' && *q <= '9'; q++, digits++)
        if (digits < 18) n = n * 10 + (*q - '0');
      if (type == '*' && (digits > 18 || n > most)) return true;
      if (type == '$' && digits > 0 && q == eol) {
        /* A bulk string's bytes and their CRLF are skipped whole, or the
         * walk waits for them (a length past the reply's cap is refused
         * by announces_more). */
        if (digits > 18 || n > end - eol - 4) return false;
        p = eol + 4 + n;
        continue;
      }
    }
    /* An array's count, a nil, a status, an error or a number: the next
     * item starts after the line (hiredis rejects what is not one). */
    p = eol + 2;
  }
  return false;
}

/* Sends the commands appended to the connection and reads their `n`
 * replies into `out`, each of any type but an error. The socket's timeout
 * bounds each read or write, not a reply: a server that sends a byte at a
 * time, each inside it, would hold the caller for as long as it liked,
 * and hiredis buffers a bulk string whole, however long the server says
 * it is. So the whole exchange has a deadline `ms` from now (each write
 * bounded by what is left of it, each read waited for by poll() with
 * what is left), and the replies may hold at most what their `kind`
 * needs, checked as they come: a value, the local store's size cap and a
 * margin (an entry larger than the cap would not be kept anyway); a
 * listing, JK_REMOTE_LISTING_CAP; anything else, the margin. Only a
 * listing may be an array, and none of its arrays may announce more
 * elements than its cap could carry. Under r->lock, on r->conn; false after
 * failed() (the connection dropped, `out` empty). A failed append leaves
 * its error on the connection, which ends the exchange here. */
static bool exchange(jitk_engine *e, jk_remote *r, int ms, jk_reply_kind kind,
                     const char *const *what, redisReply **out, int n) {
  redisContext *c = r->conn;
  const int64_t cap = kind == JK_REPLY_VALUE     ? e->cache.max_bytes + JK_REMOTE_REPLY_MARGIN
                      : kind == JK_REPLY_LISTING ? JK_REMOTE_LISTING_CAP
                                                 : JK_REMOTE_REPLY_MARGIN;
  int64_t deadline = now_ms() + ms, received = 0, left;
  int got = 0, done = 0;
  bool too_big = false, array = false, too_many = false;
  while (!c->err && !done && (left = deadline - now_ms()) > 0) {
    set_timeout(c, (int)left);
    redisBufferWrite(c, &done);
  }
  while (!c->err && done && got < n && !too_big && !array && !too_many) {
    /* An array where none was asked for is refused at its first byte,
     * before hiredis reads its count and makes room for that many
     * elements. The reader is at a reply's first byte between replies
     * (ridx -1) and once it has set up the reply's task without reading
     * its type yet (ridx 0, type -1). */
    const redisReader *rd = c->reader;
    const bool at_start = rd->ridx == -1 || (rd->ridx == 0 && rd->rstack[0].type < 0);
    array = kind != JK_REPLY_LISTING && at_start && rd->pos < rd->len && rd->buf[rd->pos] == '*';
    if (array) break;
    /* In a listing, each element takes 3 bytes on the wire at least. */
    too_many = kind == JK_REPLY_LISTING && announces_too_many(rd, cap / 3);
    if (too_many) break;
    void *reply = NULL;
    if (redisGetReplyFromReader(c, &reply) != REDIS_OK) break;
    if (reply != NULL) {
      out[got++] = reply;
      if (((redisReply *)reply)->type == REDIS_REPLY_ERROR) break;
      continue;
    }
    too_big = received > cap || announces_more(c->reader, cap);
    if (too_big || (left = deadline - now_ms()) <= 0) break;
    struct pollfd p = {c->fd, POLLIN, 0};
    int ready = poll(&p, 1, (int)left);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    size_t before = c->reader->len;
    if (redisBufferRead(c) != REDIS_OK) break;
    received += (int64_t)(c->reader->len - before);
  }
  redisReply *last = got > 0 ? out[got - 1] : NULL;
  bool refused = last != NULL && last->type == REDIS_REPLY_ERROR;
  if (got == n && !refused) return true;
  char detail[256];
  if (refused) {
    /* The server's words go into logs and the state: control characters
     * (a forged second line, terminal escapes) are not passed on. */
    snprintf(detail, sizeof detail, "%s", last->str ? last->str : "an error");
    for (char *q = detail; *q; q++)
      if ((unsigned char)*q < 0x20 || (unsigned char)*q == 0x7f) *q = '?';
  } else if (array) {
    snprintf(detail, sizeof detail, "an array in reply, where none was asked for");
  } else if (too_many) {
    snprintf(detail, sizeof detail, "an array of more elements than %lld bytes can hold",
             (long long)cap);
  } else if (too_big) {
    snprintf(detail, sizeof detail, "a reply of more than %lld bytes%s", (long long)cap,
             kind == JK_REPLY_VALUE ? " (the cache's size cap and 64 KiB)" : "");
  } else if (now_ms() >= deadline) {
    snprintf(detail, sizeof detail, "no whole reply within %d ms", ms);
  } else {
    snprintf(detail, sizeof detail, "%s", c->err ? c->errstr : strerror(errno));
  }
  for (int i = 0; i < got; i++) {
    freeReplyObject(out[i]);
    out[i] = NULL;
  }
  /* The command whose reply failed: the one refused, or the first not
   * read whole. */
  failed(e, r, what[refused ? got - 1 : got], detail);
  return false;
}

/* One command, formatted as redisCommand formats it, and its reply within
 * the request timeout; NULL after failed(). Under r->lock, on r->conn. */
static redisReply *ask(jitk_engine *e, jk_remote *r, jk_reply_kind kind, const char *what,
                       const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  redisvAppendCommand(r->conn, format, ap);
  va_end(ap);
  redisReply *reply = NULL;
  return exchange(e, r, r->request_ms, kind, &what, &reply, 1) ? reply : NULL;
}

/* The connection, made when there is none and the back-off has passed:
 * the connect bounded by connect_ms (what a dead or unreachable server
 * costs), then AUTH, SELECT and a PING sent together and all their
 * replies within answer_ms (what a server that accepts and never answers,
 * or answers too slowly, costs; longer than connecting, as a live server
 * on a loaded machine may take a moment to answer the first time). Under
 * r->lock; NULL when the remote cannot be used now. */
static redisContext *connection(jitk_engine *e, jk_remote *r) {
  if (r->conn != NULL && r->pid != getpid()) {
    /* A forked child never uses its parent's socket. */
    redisFree((redisContext *)r->conn);
    r->conn = NULL;
  }
  if (r->conn != NULL) return r->conn;
  if (r->retry_at != 0 && now_ms() < r->retry_at) return NULL;
  struct timeval tv = {r->connect_ms / 1000, (r->connect_ms % 1000) * 1000};
  redisContext *c = redisConnectWithTimeout(r->host, r->port, tv);
  if (c == NULL || c->err) {
    char detail[256];
    snprintf(detail, sizeof detail, "%s", c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    failed(e, r, "connecting", detail);
    return NULL;
  }
  r->conn = c;
  r->pid = getpid();
  /* One round trip: a refused AUTH is the first error read, and the
   * replies after it are dropped with the connection. */
  const char *what[3];
  redisReply *replies[3] = {NULL, NULL, NULL};
  int n = 0;
  if (r->password != NULL) {
    if (r->user)
      redisAppendCommand(c, "AUTH %s %s", r->user, r->password);
    else
      redisAppendCommand(c, "AUTH %s", r->password);
    what[n++] = "AUTH";
  }
  if (r->db != 0) {
    redisAppendCommand(c, "SELECT %d", r->db);
    what[n++] = "SELECT";
  }
  redisAppendCommand(c, "PING");
  what[n++] = "PING";
  if (!exchange(e, r, r->answer_ms, JK_REPLY_SMALL, what, replies, n)) return NULL;
  for (int i = 0; i < n; i++) freeReplyObject(replies[i]);
  r->retry_at = 0;
  snprintf(r->state, sizeof r->state, "on");
  return c;
}

static void key_name(const jk_key *k, const char *kind, char *out, size_t n) {
  char hex[33];
  jk_key_hex(k, hex);
  snprintf(out, n, "jitk:%d:%s%s", JK_CACHE_FORMAT, kind, hex);
}

/* --- The value's encoding --- */

static void put_u32(jk_material *m, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  jk_material_append(m, b, 4);
}

static void put_u64(jk_material *m, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  jk_material_append(m, b, 8);
}

static void put_field(jk_material *m, const void *data, size_t n) {
  put_u64(m, n);
  jk_material_append(m, data, n);
}

/* A reader over a value that never reads past its end. */
typedef struct reader {
  const unsigned char *p;
  size_t n, at;
  bool ok;
} reader;

static uint64_t get_u(reader *rd, int bytes) {
  if (!rd->ok || rd->n - rd->at < (size_t)bytes) {
    rd->ok = false;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)rd->p[rd->at + (size_t)i] << (8 * i);
  rd->at += (size_t)bytes;
  return v;
}

static const unsigned char *get_field(reader *rd, size_t *len) {
  uint64_t n = get_u(rd, 8);
  if (!rd->ok || n > rd->n - rd->at) {
    rd->ok = false;
    *len = 0;
    return NULL;
  }
  const unsigned char *f = rd->p + rd->at;
  rd->at += (size_t)n;
  *len = (size_t)n;
  return f;
}

/* An entry's value under `name`, as GETRANGE gives it: its first bytes,
 * up to the local store's size cap and one more. A value larger than the
 * cap (stored by a machine with a larger one) would not be kept here,
 * and read whole it would pass the reply's bound and turn the remote off;
 * read so, it costs the cap and a byte and is seen for what it is
 * (larger_than_kept). A key that is not there reads as an empty string.
 * NULL after failed(). Under r->lock. */
static redisReply *get_entry(jitk_engine *e, jk_remote *r, const char *name) {
  redisReply *rep = ask(e, r, JK_REPLY_VALUE, "GETRANGE", "GETRANGE %s 0 %lld", name,
                        (long long)e->cache.max_bytes);
  /* Its bytes count as read, whatever becomes of them. */
  if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
    r->stats.bytes_read += (uint64_t)rep->len;
    jk_remote_count(e, 0, 0, 0, 0, (uint64_t)rep->len, 0);
  }
  return rep;
}

/* Whether get_entry's string is a value larger than the local store
 * keeps: more bytes than its cap came back. */
static bool larger_than_kept(const jitk_engine *e, const redisReply *rep) {
  return (int64_t)rep->len > e->cache.max_bytes;
}

/* Checks a value for the request and fills `out`; *why says what was
 * wrong with a value that does not serve (NULL: it does, or it is for
 * files this machine does not have, which is a miss, not damage). */
static jitk_status decode(jitk_engine *e, const unsigned char *v, size_t n, const jk_material *req,
                          jk_entry *out, bool *found, const char **why) {
  *found = false;
  *why = NULL;
  const jk_remote *r = &e->cache.remote;
  const bool plain = n >= 8 && memcmp(v, JK_REMOTE_MAGIC, 8) == 0,
             signed_ = n >= 8 + JK_REMOTE_TAG && memcmp(v, JK_REMOTE_SIGNED, 8) == 0;
  if (!plain && !signed_) {
    *why = "it is not a jitk entry";
    return JITK_OK;
  }
  /* With a key, only values it signed; without one, a signed value is
   * read as a plain one (the database is then trusted, as the cache's
   * folder is). */
  if (r->key != NULL) {
    unsigned char tag[JK_REMOTE_TAG];
    if (signed_) jk_hmac_sha256(r->key, r->key_len, v, n - JK_REMOTE_TAG, tag);
    if (!signed_ || !jk_same_secret(tag, v + n - JK_REMOTE_TAG, JK_REMOTE_TAG)) {
      *why = "it is not signed with this cluster's key";
      return JITK_OK;
    }
  }
  if (signed_) n -= JK_REMOTE_TAG;
  reader rd = {v, n, 0, true};
  rd.at = 8;
  uint32_t format = (uint32_t)get_u(&rd, 4), kind = (uint32_t)get_u(&rd, 4);
  uint64_t ms_bits = get_u(&rd, 8);
  size_t mat_len, sum_len, names_len, log_len, image_len;
  const unsigned char *mat = get_field(&rd, &mat_len), *sum = get_field(&rd, &sum_len),
                      *names = get_field(&rd, &names_len), *log = get_field(&rd, &log_len),
                      *image = get_field(&rd, &image_len);
  if (!rd.ok || rd.at != n) {
    *why = "it is truncated or has bytes past its end";
    return JITK_OK;
  }
  if (format != JK_CACHE_FORMAT) {
    *why = "it is of another format";
    return JITK_OK;
  }
  /* The request it answers is the start of its key material. */
  if (mat_len <= req->len || memcmp(mat, req->data, req->len) != 0) {
    *why = "it answers another request";
    return JITK_OK;
  }
  const unsigned char *tc;
  size_t tcl;
  jk_deps deps;
  jitk_status st = jk_deps_parse(e, mat, mat_len, req->len, &tc, &tcl, &deps);
  if (st == JITK_ERR_INVALID_IMAGE) {
    *why = "its dependency record does not parse";
    return JITK_OK;
  }
  if (st != JITK_OK) return st;
  /* The toolchain's digest and the dependency checks are the disk
   * lock's (their remembered hashes); taken after the remote's. */
  pthread_mutex_lock(&e->cache.disk_lock);
  const char *toolchain = jk_toolchain(e);
  const char *changed = NULL;
  bool holds = tcl == strlen(toolchain) && memcmp(tc, toolchain, tcl) == 0 &&
               jk_toolchain_runs(e) && jk_deps_hold(e, &deps, true, &changed);
  pthread_mutex_unlock(&e->cache.disk_lock);
  if (!holds) {
    /* Compiled against other files or another NVRTC build: not ours. */
    jk_deps_free(e, &deps);
    return JITK_OK;
  }
  double ms;
  memcpy(&ms, &ms_bits, sizeof ms);
  jk_material view = {e, (unsigned char *)mat, mat_len, mat_len, false};
  st = jk_store_check_entry(e, (int)kind, ms, sum, sum_len, mat, mat_len, names, names_len,
                            (const char *)log, log_len, image, image_len, &view, out, found, why);
  if (*found) {
    out->deps = deps;
  } else {
    jk_deps_free(e, &deps);
  }
  return st;
}

jitk_status jk_remote_find(jitk_engine *e, const jk_key *request, const jk_material *req,
                           jk_entry *out, bool *found, bool *present) {
  jk_remote *r = &e->cache.remote;
  *found = false;
  *present = false;
  if (!r->enabled) return JITK_OK;
  pthread_mutex_lock(&r->lock);
  redisContext *c = connection(e, r);
  jitk_status st = JITK_OK;
  if (c != NULL) {
    char name[96];
    key_name(request, "", name, sizeof name);
    redisReply *rep = get_entry(e, r, name);
    *present = rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len > 0;
    if (rep != NULL && rep->type == REDIS_REPLY_STRING && larger_than_kept(e, rep)) {
      jk_log(e, JITK_LOG_INFO,
             "kernel cache: the remote's entry for request %s is larger than this machine's "
             "cache keeps (its size cap, %lld bytes); compiling here",
             name, (long long)e->cache.max_bytes);
    } else if (rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len > 0) {
      const char *why = NULL;
      /* Decoded into an entry of its own: one that fails a check after
       * some fields were read leaves `out` as it was. */
      jk_entry *got = jk_calloc(e, 1, sizeof *got);
      if (got == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
      if (got != NULL)
        st = decode(e, (const unsigned char *)rep->str, (size_t)rep->len, req, got, found, &why);
      if (got != NULL && *found) {
        out->kind = got->kind;
        out->compile_ms = got->compile_ms;
        out->image = got->image;
        out->image_size = got->image_size;
        out->log = got->log;
        out->name_expressions = got->name_expressions;
        out->lowered = got->lowered;
        out->num_names = got->num_names;
        out->deps = got->deps;
        jk_free(e, got);
      } else if (got != NULL) {
        jk_entry_discard(e, got);
      }
      if (why != NULL) {
        r->stats.rejected++;
        jk_remote_count(e, 0, 0, 0, 1, 0, 0);
        bool again = r->rejected_once && memcmp(&r->last_rejected, request, sizeof *request) == 0;
        jk_log(e, again ? JITK_LOG_DEBUG : JITK_LOG_WARN,
               "kernel cache: the remote's entry for request %s is not used: %s", name, why);
        r->last_rejected = *request;
        r->rejected_once = true;
      }
    }
    if (rep != NULL) freeReplyObject(rep);
  }
  if (*found) {
    r->stats.hits++;
    jk_remote_count(e, 1, 0, 0, 0, 0, 0);
  }
  pthread_mutex_unlock(&r->lock);
  return st;
}

/* The value of an entry: its fields as the remote stores them, the
 * checksum computed over them as the local store's is. */
static void encode(const jk_remote *r, jk_material *v, int kind, double ms, const jk_material *full,
                   const void *names, size_t names_len, const char *log, size_t log_len,
                   const void *image, size_t image_len) {
  uint8_t sum[16];
  jk_store_checksum(kind, image, image_len, names, names_len, log, log_len, sum);
  uint64_t ms_bits;
  memcpy(&ms_bits, &ms, sizeof ms_bits);
  jk_material_append(v, r->key != NULL ? JK_REMOTE_SIGNED : JK_REMOTE_MAGIC, 8);
  put_u32(v, JK_CACHE_FORMAT);
  put_u32(v, (uint32_t)kind);
  put_u64(v, ms_bits);
  put_field(v, full->data, full->len);
  put_field(v, sum, 16);
  put_field(v, names, names_len);
  put_field(v, log, log_len);
  put_field(v, image, image_len);
  if (r->key != NULL && !v->failed) {
    unsigned char tag[JK_REMOTE_TAG];
    jk_hmac_sha256(r->key, r->key_len, v->data, v->len, tag);
    jk_material_append(v, tag, sizeof tag);
  }
}

/* Whether a value is whole and within the local store's size cap: a
 * larger one is neither kept by the local store nor by a machine with the
 * same cap, which would read its first cap and a byte (get_entry) only to
 * compile the kernel itself. */
static bool sendable(jitk_engine *e, const jk_material *v) {
  if (v->failed) return false;
  if ((int64_t)v->len <= e->cache.max_bytes) return true;
  jk_log(e, JITK_LOG_INFO,
         "kernel cache: an entry of %zu bytes exceeds the cap of %lld; not sent to the remote",
         v->len, (long long)e->cache.max_bytes);
  return false;
}

/* SETs a value under the request's key; false when the remote failed.
 * Under r->lock. */
static bool send_value(jitk_engine *e, jk_remote *r, const jk_key *request, const jk_material *v) {
  redisContext *c = connection(e, r);
  if (c == NULL) return false;
  char name[96];
  key_name(request, "", name, sizeof name);
  redisReply *rep = ask(e, r, JK_REPLY_SMALL, "SET", "SET %s %b", name, v->data, v->len);
  if (rep == NULL) return false;
  r->stats.stores++;
  r->stats.bytes_written += v->len;
  jk_remote_count(e, 0, 0, 0, 0, 0, v->len);
  freeReplyObject(rep);
  return true;
}

void jk_remote_put(jitk_engine *e, const jk_key *request, const jk_material *full,
                   const jk_entry *x) {
  jk_remote *r = &e->cache.remote;
  if (!r->enabled) return;
  jk_material names, v;
  jk_material_init(&names, e);
  jk_material_init(&v, e);
  if (jk_names_pack(e, x, &names) != JITK_OK) {
    jk_material_free(&names);
    return;
  }
  const char *log = x->log ? x->log : "";
  encode(r, &v, x->kind, x->compile_ms, full, names.data, names.len, log, strlen(log), x->image,
         x->image_size);
  jk_material_free(&names);
  if (sendable(e, &v)) {
    pthread_mutex_lock(&r->lock);
    send_value(e, r, request, &v);
    pthread_mutex_unlock(&r->lock);
  }
  jk_material_free(&v);
}

/* Where the request ends in a full key material: at its dependency
 * record, whose first field is the toolchain's. */
static bool request_end(const unsigned char *m, size_t n, size_t *end) {
  size_t pos = 0, at = 0;
  const char *label;
  const unsigned char *bytes;
  size_t len;
  bool ok = true;
  while (jk_material_next(m, n, &pos, &label, &bytes, &len, &ok)) {
    if (strcmp(label, "toolchain") == 0) {
      *end = at;
      return at > 0;
    }
    at = pos;
  }
  return false;
}

jitk_status jitk_cache_remote_push(jitk_engine *e, size_t *pushed) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_remote_push: engine is NULL");
  jk_remote *r = &e->cache.remote;
  jk_cache *c = &e->cache;
  if (!r->enabled) return jk_fail(e, JITK_ERR_CACHE, "the remote cache is %s", r->state);
  size_t sent = 0, skipped = 0;
  int64_t last = INT64_MIN;
  jitk_status st = JITK_OK;
  for (;;) {
    /* A batch of rows read under the disk's lock, sent under the
     * remote's: the two locks are never held the other way round. */
    enum { BATCH = 16 };
    jk_key requests[BATCH];
    jk_material values[BATCH];
    int n = 0, rows = 0;
    pthread_mutex_lock(&c->disk_lock);
    if (c->mode == JITK_CACHE_OFF || jk_store_open(e) != JITK_OK || c->db == NULL) {
      pthread_mutex_unlock(&c->disk_lock);
      st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_remote_push: the disk cache cannot be used");
      break;
    }
    sqlite3_stmt *q = NULL;
    /* Only rows that pass the checks a lookup makes are sent: a value is
     * checksummed (and signed) as it is encoded, so a row damaged here
     * would otherwise reach every machine as a sound entry. */
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT id, " JK_ROW_COLUMNS
                                ", compile_ms FROM entries WHERE id > "
                                "?1 ORDER BY id LIMIT 16",
                                -1, &q, NULL);
    if (rc == SQLITE_OK) sqlite3_bind_int64(q, 1, last);
    while (rc == SQLITE_OK && rows < BATCH && sqlite3_step(q) == SQLITE_ROW) {
      last = sqlite3_column_int64(q, 0);
      rows++;
      if (!jk_store_row_is_sound(e, q, 1, last)) {
        skipped++;
        continue;
      }
      const unsigned char *mat = sqlite3_column_blob(q, 4);
      size_t mat_len = (size_t)sqlite3_column_bytes(q, 4), end = 0;
      if (mat == NULL || !request_end(mat, mat_len, &end)) continue;
      jk_hash128(mat, end, requests[n].bytes);
      jk_material full = {e, (unsigned char *)mat, mat_len, mat_len, false};
      jk_material_init(&values[n], e);
      const char *log = (const char *)sqlite3_column_text(q, 6);
      encode(r, &values[n], sqlite3_column_int(q, 2), sqlite3_column_double(q, 8), &full,
             sqlite3_column_blob(q, 5), (size_t)sqlite3_column_bytes(q, 5), log ? log : "",
             (size_t)sqlite3_column_bytes(q, 6), sqlite3_column_blob(q, 7),
             (size_t)sqlite3_column_bytes(q, 7));
      n++;
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&c->disk_lock);
    bool failed_send = false;
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < n; i++) {
      if (!failed_send && sendable(e, &values[i])) {
        if (send_value(e, r, &requests[i], &values[i]))
          sent++;
        else
          failed_send = true;
      }
      jk_material_free(&values[i]);
    }
    pthread_mutex_unlock(&r->lock);
    if (failed_send) {
      st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_remote_push: the remote %s is %s", r->url,
                   r->state);
      break;
    }
    if (rc != SQLITE_OK) {
      st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_remote_push: cannot read the entries");
      break;
    }
    if (rows == 0) break;
  }
  if (skipped > 0)
    jk_log(e, JITK_LOG_WARN,
           "jitk_cache_remote_push: %zu damaged entries not sent (jitk_cache_verify removes them)",
           skipped);
  if (pushed != NULL) *pushed = sent;
  return st;
}

jitk_status jitk_cache_remote_pull(jitk_engine *e, size_t *pulled, size_t *rejected) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_remote_pull: engine is NULL");
  jk_remote *r = &e->cache.remote;
  jk_cache *c = &e->cache;
  if (!r->enabled) return jk_fail(e, JITK_ERR_CACHE, "the remote cache is %s", r->state);
  pthread_mutex_lock(&c->disk_lock);
  bool writable =
      c->mode != JITK_CACHE_OFF && jk_store_open(e) == JITK_OK && c->disk == JK_DISK_OPEN;
  pthread_mutex_unlock(&c->disk_lock);
  if (!writable)
    return jk_fail(e, JITK_ERR_CACHE,
                   "jitk_cache_remote_pull: the disk cache cannot be written (off or read-only)");
  size_t got = 0, bad = 0;
  char cursor[32] = "0";
  /* A server decides when a scan ends (cursor 0): one that never says so
   * is stopped by the count of rounds, far above what any real cache
   * needs (100 keys a round). */
  uint64_t rounds = 0;
  char pattern[32];
  snprintf(pattern, sizeof pattern, "jitk:%d:*", JK_CACHE_FORMAT);
  size_t prefix = strlen(pattern) - 1;
  jitk_status st = JITK_OK;
  do {
    pthread_mutex_lock(&r->lock);
    redisContext *ctx = connection(e, r);
    redisReply *scan =
        ctx ? ask(e, r, JK_REPLY_LISTING, "SCAN", "SCAN %s MATCH %s COUNT 100", cursor, pattern)
            : NULL;
    if (scan == NULL || scan->type != REDIS_REPLY_ARRAY || scan->elements != 2 ||
        scan->element[0]->type != REDIS_REPLY_STRING ||
        scan->element[1]->type != REDIS_REPLY_ARRAY) {
      if (scan) freeReplyObject(scan);
      pthread_mutex_unlock(&r->lock);
      st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_remote_pull: the remote %s is %s", r->url,
                   r->state);
      break;
    }
    /* A cursor is a decimal number that moves. */
    const char *next = scan->element[0]->str;
    size_t digits = next ? strspn(next, "0123456789") : 0;
    const char *why_stop =
        digits == 0 || digits > 20 || next[digits] != '\0' || (digits > 1 && next[0] == '0')
            ? "answered a cursor that is not one"
        : strcmp(next, "0") != 0 && strcmp(next, cursor) == 0 ? "answered the same cursor again"
        : ++rounds > JK_REMOTE_MAX_SCAN_ROUNDS                ? "did not end its scan"
                                                              : NULL;
    if (why_stop != NULL) {
      freeReplyObject(scan);
      pthread_mutex_unlock(&r->lock);
      st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_remote_pull: the remote %s %s", r->url, why_stop);
      break;
    }
    snprintf(cursor, sizeof cursor, "%s", next);
    redisReply *keys = scan->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
      /* A request's key: a string of 32 hexadecimal digits after the
       * prefix (a server could answer anything). */
      if (keys->element[i]->type != REDIS_REPLY_STRING || keys->element[i]->str == NULL) continue;
      const char *name = keys->element[i]->str;
      jk_key request;
      if (keys->element[i]->len != prefix + 32 || strncmp(name, pattern, prefix) != 0 ||
          strspn(name + prefix, "0123456789abcdefABCDEF") != 32)
        continue;
      for (int b = 0; b < 16; b++) {
        unsigned v = 0;
        sscanf(name + prefix + 2 * b, "%2x", &v);
        request.bytes[b] = (unsigned char)v;
      }
      redisReply *rep = get_entry(e, r, name);
      if (rep == NULL) {
        st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_remote_pull: the remote %s is %s", r->url,
                     r->state);
        break;
      }
      bool found = false;
      const char *why = NULL;
      jk_entry *x = NULL;
      jk_material full = {0};
      if (rep->type == REDIS_REPLY_STRING && larger_than_kept(e, rep)) {
        jk_log(e, JITK_LOG_INFO,
               "kernel cache: the remote's %s is larger than this machine's cache keeps (its "
               "size cap, %lld bytes); not pulled",
               name, (long long)e->cache.max_bytes);
      } else if (rep->type == REDIS_REPLY_STRING && rep->len > 0) {
        /* The value must answer the request it is stored under. */
        reader rd = {(const unsigned char *)rep->str, (size_t)rep->len, 8 + 16, true};
        size_t mat_len = 0, end = 0;
        const unsigned char *mat = rep->len > 24 ? get_field(&rd, &mat_len) : NULL;
        jk_key check;
        if (mat != NULL && request_end(mat, mat_len, &end)) jk_hash128(mat, end, check.bytes);
        if (mat == NULL || end == 0 || memcmp(check.bytes, request.bytes, 16) != 0) {
          why = "it does not answer the request it is stored under";
        } else {
          jk_material req = {e, (unsigned char *)mat, end, end, false};
          x = jk_calloc(e, 1, sizeof *x);
          if (x != NULL)
            st =
                decode(e, (const unsigned char *)rep->str, (size_t)rep->len, &req, x, &found, &why);
          if (found) {
            jk_material_init(&full, e);
            jk_material_append(&full, mat, mat_len);
          }
        }
      }
      freeReplyObject(rep);
      if (why != NULL) {
        bad++;
        r->stats.rejected++;
        jk_remote_count(e, 0, 0, 0, 1, 0, 0);
        jk_log(e, JITK_LOG_WARN, "kernel cache: the remote's %s is not pulled: %s", name, why);
      }
      if (found && !full.failed) {
        /* The local store's write under its own lock, the remote's let go
         * first (the order the locks are always taken in). */
        pthread_mutex_unlock(&r->lock);
        jk_key key;
        jk_hash128(full.data, full.len, key.bytes);
        pthread_mutex_lock(&c->disk_lock);
        if (jk_store_insert(e, &key, &request, &full, x, "pulled") == JITK_OK) got++;
        pthread_mutex_unlock(&c->disk_lock);
        pthread_mutex_lock(&r->lock);
        ctx = connection(e, r);
      }
      if (full.e != NULL) jk_material_free(&full);
      if (x != NULL) jk_entry_discard(e, x);
      if (st != JITK_OK || ctx == NULL) break;
    }
    freeReplyObject(scan);
    pthread_mutex_unlock(&r->lock);
  } while (st == JITK_OK && strcmp(cursor, "0") != 0);
  if (pulled != NULL) *pulled = got;
  if (rejected != NULL) *rejected = bad;
  return st;
}

/* How far past a signed lease's end (by the reader's clock) it is still
 * waited for: the machines' clocks may differ by this much. */
#define JK_REMOTE_LEASE_SLACK_MS 1000

/* A lease's value: this process's node; with a key, "/", the lease's end
 * `until` (ms since the epoch by the wall clock, jk_now_ms, which every
 * machine of the cluster reads alike; in decimal), "/" and the first 16 bytes
 * (in hex) of the HMAC-SHA-256 of the lease's name, the node and the end,
 * one a line, under the key. Without the key nobody can write a lease
 * that keyed processes wait for: a planted one would otherwise hold every
 * such process a minute per kernel. With the end signed, a copy of an
 * earlier lease is honoured only as long as that lease was. */
static void lease_value(const jk_remote *r, const char *name, const char *node, int64_t until,
                        char *out, size_t n) {
  if (r->key == NULL) {
    snprintf(out, n, "%s", node);
    return;
  }
  /* The name is under 96 bytes and the node under 400 (lease_honoured's
   * bound; this process's own is under 320). */
  char msg[540];
  const int len = snprintf(msg, sizeof msg, "%s\n%s\n%lld", name, node, (long long)until);
  unsigned char tag[32];
  jk_hmac_sha256(r->key, r->key_len, msg, len > 0 && (size_t)len < sizeof msg ? (size_t)len : 0,
                 tag);
  /* Its first 16 bytes in hex, as a key's are written. */
  jk_key first;
  memcpy(first.bytes, tag, sizeof first.bytes);
  char hex[33];
  jk_key_hex(&first, hex);
  snprintf(out, n, "%s/%lld/%s", node, (long long)until, hex);
}

/* Whether a lease's value (as GET returned it) is one that keyed
 * processes wait for: any value without a key, else one whose tag the
 * key confirms and whose end has not passed. */
static bool lease_honoured(const jk_remote *r, const char *name, const redisReply *v) {
  if (r->key == NULL) return true;
  if (v == NULL || v->type != REDIS_REPLY_STRING || v->len >= 400) return false;
  char given[400], node[400], want[520];
  memcpy(given, v->str, v->len);
  given[v->len] = '\0';
  char *slash = strrchr(given, '/');
  if (slash == NULL) return false;
  *slash = '\0';
  char *end_at = strrchr(given, '/');
  *slash = '/';
  if (end_at == NULL) return false;
  /* The end as its writer wrote it: digits only, as lease_value writes. */
  int64_t until = 0;
  int digits = 0;
  for (const char *q = end_at + 1; q < slash; q++, digits++) {
    if (*q < '0' || *q > '9' || digits >= 18) return false;
    until = until * 10 + (*q - '0');
  }
  if (digits == 0 || jk_now_ms() > until + JK_REMOTE_LEASE_SLACK_MS) return false;
  snprintf(node, sizeof node, "%.*s", (int)(end_at - given), given);
  lease_value(r, name, node, until, want, sizeof want);
  return strlen(want) == v->len && jk_same_secret(want, given, v->len);
}

jk_lease jk_remote_lease(jitk_engine *e, const jk_key *request) {
  jk_remote *r = &e->cache.remote;
  if (!r->enabled) return JK_LEASE_NONE;
  pthread_mutex_lock(&r->lock);
  redisContext *c = connection(e, r);
  jk_lease got = JK_LEASE_NONE;
  if (c != NULL) {
    char name[96], value[400];
    key_name(request, "lease:", name, sizeof name);
    lease_value(r, name, r->node, jk_now_ms() + r->lease_ms, value, sizeof value);
    redisReply *rep =
        ask(e, r, JK_REPLY_SMALL, "SET NX", "SET %s %s NX PX %d", name, value, r->lease_ms);
    if (rep != NULL) {
      got = rep->type == REDIS_REPLY_STATUS ? JK_LEASE_MINE : JK_LEASE_OTHERS;
      freeReplyObject(rep);
    }
    /* Someone else's lease: with a key, waited for only when signed. */
    if (got == JK_LEASE_OTHERS && r->key != NULL) {
      rep = ask(e, r, JK_REPLY_SMALL, "GET", "GET %s", name);
      if (rep == NULL || !lease_honoured(r, name, rep)) {
        got = JK_LEASE_NONE;
        if (rep != NULL)
          jk_log(e, JITK_LOG_INFO,
                 "kernel cache: a lease in the remote %s is not signed with this cluster's key; "
                 "compiling without waiting for it",
                 r->url);
      }
      if (rep != NULL) freeReplyObject(rep);
    }
  }
  pthread_mutex_unlock(&r->lock);
  return got;
}

void jk_remote_release(jitk_engine *e, const jk_key *request) {
  jk_remote *r = &e->cache.remote;
  if (!r->enabled) return;
  pthread_mutex_lock(&r->lock);
  redisContext *c = connection(e, r);
  if (c != NULL) {
    char name[96];
    key_name(request, "lease:", name, sizeof name);
    /* Only this process's lease: one that expired may be another's now.
     * Its value is the node alone, or with a key the node, "/" and the
     * end and tag lease_value wrote then. */
    redisReply *rep = ask(e, r, JK_REPLY_SMALL, "EVAL", "EVAL %s 1 %s %s",
                          "local v = redis.call('get', KEYS[1]) "
                          "if v == ARGV[1] or (v and string.sub(v, 1, #ARGV[1] + 1) == "
                          "ARGV[1] .. '/') then return redis.call('del', KEYS[1]) end return 0",
                          name, r->node);
    if (rep != NULL) freeReplyObject(rep);
  }
  pthread_mutex_unlock(&r->lock);
}

bool jk_remote_lease_held(jitk_engine *e, const jk_key *request) {
  jk_remote *r = &e->cache.remote;
  if (!r->enabled) return false;
  pthread_mutex_lock(&r->lock);
  redisContext *c = connection(e, r);
  bool held = false;
  if (c != NULL) {
    char name[96];
    key_name(request, "lease:", name, sizeof name);
    /* With a key, a lease counts only when signed (lease_honoured). */
    redisReply *rep = r->key != NULL ? ask(e, r, JK_REPLY_SMALL, "GET", "GET %s", name)
                                     : ask(e, r, JK_REPLY_SMALL, "EXISTS", "EXISTS %s", name);
    if (rep != NULL) {
      held = r->key != NULL ? rep->type == REDIS_REPLY_STRING && lease_honoured(r, name, rep)
                            : rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
      freeReplyObject(rep);
    }
  }
  pthread_mutex_unlock(&r->lock);
  return held;
}

#else /* !JITK_HAVE_HIREDIS: the remote is never on (jk_remote_init said why). */

jitk_status jk_remote_find(jitk_engine *e, const jk_key *request, const jk_material *req,
                           jk_entry *out, bool *found, bool *present) {
  (void)e, (void)request, (void)req, (void)out;
  *found = false;
  *present = false;
  return JITK_OK;
}

void jk_remote_put(jitk_engine *e, const jk_key *request, const jk_material *full,
                   const jk_entry *x) {
  (void)e, (void)request, (void)full, (void)x;
}

jk_lease jk_remote_lease(jitk_engine *e, const jk_key *request) {
  (void)e, (void)request;
  return JK_LEASE_NONE;
}

void jk_remote_release(jitk_engine *e, const jk_key *request) { (void)e, (void)request; }

jitk_status jitk_cache_remote_push(jitk_engine *e, size_t *pushed) {
  if (pushed != NULL) *pushed = 0;
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_remote_push: engine is NULL");
  return jk_fail(e, JITK_ERR_CACHE, "the remote cache is %s", e->cache.remote.state);
}

jitk_status jitk_cache_remote_pull(jitk_engine *e, size_t *pulled, size_t *rejected) {
  if (pulled != NULL) *pulled = 0;
  if (rejected != NULL) *rejected = 0;
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_remote_pull: engine is NULL");
  return jk_fail(e, JITK_ERR_CACHE, "the remote cache is %s", e->cache.remote.state);
}

bool jk_remote_lease_held(jitk_engine *e, const jk_key *request) {
  (void)e, (void)request;
  return false;
}

#endif

void jk_remote_destroy(jitk_engine *e) {
  jk_remote *r = &e->cache.remote;
#ifdef JITK_HAVE_HIREDIS
  disconnect(r);
#endif
  jk_free(e, r->url);
  jk_free(e, r->host);
  jk_free(e, r->user);
  jk_free(e, r->password);
  if (r->key != NULL) {
    jk_wipe(r->key, r->key_len);
    jk_free(e, r->key);
  }
  if (r->inited) pthread_mutex_destroy(&r->lock);
  memset(r, 0, sizeof *r);
}

jitk_status jitk_cache_remote_info_init(jitk_cache_remote_info *info) {
  if (info == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_remote_info_init: info is NULL");
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  return JITK_OK;
}

/* Checks a caller's info struct. */
static jitk_status check_info(jitk_engine *e, const jitk_cache_remote_info *info) {
  size_t size = info->struct_size;
  if (size < offsetof(jitk_cache_remote_info, state) + sizeof(const char *) || size > sizeof *info)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_cache_remote_get_info: struct_size is %zu; call "
                   "jitk_cache_remote_info_init first",
                   size);
  return JITK_OK;
}

jitk_status jitk_cache_remote_get_info(jitk_engine *e, jitk_cache_remote_info *mine,
                                       jitk_cache_remote_info *all) {
  if (e == NULL || (mine == NULL && all == NULL))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_remote_get_info: %s is NULL",
                   e == NULL ? "engine" : "both infos");
  jitk_status st = JITK_OK;
  if (mine != NULL) st = check_info(e, mine);
  if (st == JITK_OK && all != NULL) st = check_info(e, all);
  if (st != JITK_OK) return st;
  jk_remote *r = &e->cache.remote;
  jitk_cache_remote_info m, a;
  jitk_cache_remote_info_init(&m);
  pthread_mutex_lock(&r->lock);
  m.url = r->url;
  m.state = r->state;
  m.hits = r->stats.hits;
  m.misses = r->stats.misses;
  m.errors = r->stats.errors;
  m.rejected = r->stats.rejected;
  m.stores = r->stats.stores;
  m.lease_waits = r->stats.lease_waits;
  m.bytes_read = r->stats.bytes_read;
  m.bytes_written = r->stats.bytes_written;
  m.signed_entries = r->key != NULL;
  pthread_mutex_unlock(&r->lock);
  if (all != NULL) {
    /* The database's sums, read (with this process's pending counts
     * added first) by the local stats call. */
    jitk_cache_stats ignored;
    st = jitk_cache_get_stats(e, NULL, &ignored);
    if (st != JITK_OK) return st;
    a = m;
    jk_cache *c = &e->cache;
    pthread_mutex_lock(&c->disk_lock);
    a.hits = c->remote_totals[0];
    a.misses = c->remote_totals[1];
    a.errors = c->remote_totals[2];
    a.rejected = c->remote_totals[3];
    a.bytes_read = c->remote_totals[4];
    a.bytes_written = c->remote_totals[5];
    pthread_mutex_unlock(&c->disk_lock);
    /* Stores and lease waits are this engine's only. */
    a.stores = 0;
    a.lease_waits = 0;
    size_t size = all->struct_size;
    memcpy(all, &a, size);
    all->struct_size = size;
  }
  if (mine != NULL) {
    size_t size = mine->struct_size;
    memcpy(mine, &m, size);
    mine->struct_size = size;
  }
  return JITK_OK;
}

jitk_status jitk_cache_remote_ping(jitk_engine *e, double *milliseconds) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_remote_ping: engine is NULL");
  jk_remote *r = &e->cache.remote;
  if (!r->enabled) return jk_fail(e, JITK_ERR_CACHE, "the remote cache is %s", r->state);
#ifdef JITK_HAVE_HIREDIS
  pthread_mutex_lock(&r->lock);
  /* A check asked for now: the back-off does not apply. */
  r->retry_at = 0;
  int64_t t0 = now_ms();
  redisContext *c = connection(e, r);
  jitk_status st = JITK_OK;
  if (c != NULL) {
    redisReply *rep = ask(e, r, JK_REPLY_SMALL, "PING", "PING");
    if (rep != NULL)
      freeReplyObject(rep);
    else
      c = NULL;
  }
  if (c == NULL) st = jk_fail(e, JITK_ERR_CACHE, "the remote cache %s is %s", r->url, r->state);
  if (c != NULL && milliseconds != NULL) *milliseconds = (double)(now_ms() - t0);
  pthread_mutex_unlock(&r->lock);
  return st;
#else
  (void)milliseconds;
  return jk_fail(e, JITK_ERR_CACHE, "the remote cache is %s", r->state);
#endif
}
