/*
 * The remote tier on a real Redis server (redis-server on 127.0.0.1 at a
 * free port, no persistence, started by each test and killed at its end):
 * two "machines" (engines on separate cache folders) compile each kernel
 * once between them; processes sharing one server compile each kernel of
 * overlapping sets once in all; entries damaged or planted in Redis are
 * never loaded; a server killed in the middle, one that accepts
 * connections and never answers, and one that was never there each cost
 * one warning and a bounded delay, and everything still compiles; keys
 * Redis evicts under maxmemory are recompiled without an error; a server
 * that drips its reply, or announces or streams one larger than the
 * command may have, or answers with an array where none was asked for,
 * is given up at the request's deadline, at the cap or at once, and
 * one merely slow within the deadline is served; machines sharing a
 * key serve each other's signed entries and refuse any other; a URL
 * that does not parse, or a password in a file others can read, turns the
 * remote off with one warning. Skipped where redis-server is not
 * installed.
 */
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "unit/cache/cache_common.h"

/* A port nothing listens on now (the kernel's choice for a bound socket,
 * released). */
static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t n = sizeof a;
  cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &n), 0);
  close(s);
  return ntohs(a.sin_port);
}

typedef struct server {
  pid_t pid; /* 0: the server .ci/run started, not this test's */
  int port;
  int db;
  char url[64];
} server;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* redis-server with no persistence on a free port, answering PING. */
static server start_server(void) {
  if (system("command -v redis-server >/dev/null 2>&1") != 0)
    cr_skip_test("redis-server is not installed (Debian: redis-server)");
  server s;
  s.port = free_port();
  s.db = 0;
  snprintf(s.url, sizeof s.url, "redis://127.0.0.1:%d", s.port);
  s.pid = fork();
  cr_assert_geq(s.pid, 0);
  if (s.pid == 0) {
    char port[16];
    snprintf(port, sizeof port, "%d", s.port);
    /* The server dies with the test's process, whatever ends it, and
     * keeps none of its output streams open. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--protected-mode", "no", (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 200; i++) {
    redisContext *c = redisConnect("127.0.0.1", s.port);
    if (c != NULL && !c->err) {
      redisReply *r = redisCommand(c, "PING");
      bool up = r != NULL && r->type == REDIS_REPLY_STATUS;
      if (r) freeReplyObject(r);
      redisFree(c);
      if (up) return s;
    } else if (c != NULL) {
      redisFree(c);
    }
    usleep(10000);
  }
  cr_assert_fail("redis-server did not start on port %d", s.port);
  return s;
}

static void stop_server(server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
  }
  s->pid = 0;
}

static redisContext *client(const server *s) {
  redisContext *c = redisConnect("127.0.0.1", s->port);
  cr_assert(c != NULL && !c->err, "connecting to the test's server");
  if (s->db != 0) {
    redisReply *r = redisCommand(c, "SELECT %d", s->db);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "SELECT %d", s->db);
    freeReplyObject(r);
  }
  return c;
}

/* The server .ci/run started for the suite ($JITK_TEST_REDIS_PORT), in a
 * database of the test's own (emptied first), for the tests that neither
 * stop the server nor change its settings; else a server of the test's
 * own. */
static server shared_server(int db) {
  const char *port = getenv("JITK_TEST_REDIS_PORT");
  if (port == NULL || *port == '\0') return start_server();
  server s;
  s.pid = 0;
  s.port = atoi(port);
  s.db = db;
  snprintf(s.url, sizeof s.url, "redis://127.0.0.1:%d/%d", s.port, db);
  redisContext *c = client(&s);
  redisReply *r = redisCommand(c, "FLUSHDB");
  cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "FLUSHDB on the suite's server");
  freeReplyObject(r);
  redisFree(c);
  return s;
}

/* A compile-only engine on cache folder `dir` with the remote `url`, the
 * cache's size cap `max_bytes` (0: the default). */
static jitk_engine *remote_engine_capped(const char *dir, const char *url, jt_log *log,
                                         int64_t max_bytes) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = JITK_CACHE_ON;
  cfg.cache_max_bytes = max_bytes;
  cfg.cache_remote = url;
  cfg.log_fn = jt_log_fn;
  cfg.log_user = log;
  cfg.log_level = JITK_LOG_WARN;
  jitk_engine *e = NULL;
  cr_assert_eq(jitk_engine_create(&cfg, &e), JITK_OK, "%s", jitk_errmsg(NULL));
  return e;
}

static jitk_engine *remote_engine(const char *dir, const char *url, jt_log *log) {
  return remote_engine_capped(dir, url, log, 0);
}

static jitk_cache_remote_info remote_info(jitk_engine *e) {
  jitk_cache_remote_info i;
  jitk_cache_remote_info_init(&i);
  JT_OK(e, jitk_cache_remote_get_info(e, &i, NULL));
  return i;
}

/* Kernel number `n`: distinct source, so a distinct request. */
static const char *kernel_source(int n, char *buf, size_t size) {
  snprintf(buf, size, "extern \"C\" __global__ void k%d(float *x) { x[0] = %d.0f; }\n", n, n);
  return buf;
}

/* Kernel number `n` with 16 KiB of initialized data in its image, for a
 * server that runs out of memory. */
static void build_big(jitk_engine *e, int n) {
  char src[256];
  snprintf(src, sizeof src,
           "__device__ float table%d[4096] = {%d.0f, 1.0f};\n"
           "extern \"C\" __global__ void big%d(float *x) { x[0] = table%d[x[1] > 0]; }\n",
           n, n, n, n);
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  jitk_module_destroy(m);
}

static void build(jitk_engine *e, int n) {
  char src[256];
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, kernel_source(n, src, sizeof src), NULL, &m));
  jitk_module_destroy(m);
}

/* The one value under jitk's request keys in the server (there must be
 * exactly `expect` of them). */
static size_t entry_keys(redisContext *c, char keys[][96], size_t max) {
  redisReply *r = redisCommand(c, "KEYS jitk:*");
  cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
  size_t n = 0;
  for (size_t i = 0; i < r->elements && n < max; i++)
    if (strstr(r->element[i]->str, ":lease:") == NULL)
      snprintf(keys[n++], 96, "%s", r->element[i]->str);
  freeReplyObject(r);
  return n;
}

Test(remote, two_machines_compile_once) {
  server s = shared_server(1);
  char *a = jt_tmpdir(), *b = jt_tmpdir();
  jt_log la = {0}, lb = {0};
  jitk_engine *ea = remote_engine(a, s.url, &la);
  build(ea, 1);
  jitk_cache_remote_info ia = remote_info(ea);
  cr_assert_eq(jt_stats_mine(ea).compiles, 1);
  cr_assert_eq(ia.stores, 1);
  cr_assert_eq(ia.misses, 1);
  cr_assert_str_eq(ia.state, "on");
  cr_assert(ia.bytes_written > 0);

  /* Another machine: its own folder, the same server. */
  jitk_engine *eb = remote_engine(b, s.url, &lb);
  build(eb, 1);
  jitk_cache_remote_info ib = remote_info(eb);
  cr_assert_eq(jt_stats_mine(eb).compiles, 0, "the remote's entry served");
  cr_assert_eq(ib.hits, 1);
  cr_assert(ib.bytes_read > 0);
  /* The database's sums over every process (of machine b's cache), and a
   * check of the server that the doctor runs. */
  jitk_cache_remote_info all;
  jitk_cache_remote_info_init(&all);
  JT_OK(eb, jitk_cache_remote_get_info(eb, NULL, &all));
  cr_assert_eq(all.hits, 1);
  cr_assert_eq(all.bytes_read, ib.bytes_read);
  double ms = -1;
  JT_OK(eb, jitk_cache_remote_ping(eb, &ms));
  cr_assert(ms >= 0 && ms < 1000, "%g ms", ms);
  jitk_engine_destroy(eb);
  /* ...and went into its local tier: a process there without the remote
   * finds it on disk. */
  jitk_engine *local = jt_cache_engine(b);
  build(local, 1);
  cr_assert_eq(jt_stats_mine(local).disk_hits, 1);
  cr_assert_eq(jt_stats_mine(local).compiles, 0);
  jitk_engine_destroy(local);
  cr_assert_eq(la.warnings + lb.warnings, 0, "%s %s", la.last_warning, lb.last_warning);
  /* The URL is shown, its password never. */
  jitk_engine_destroy(ea);
  char url[128];
  snprintf(url, sizeof url, "redis://someone:s3cret@127.0.0.1:%d/%d", s.port, s.db);
  jt_log lp = {0};
  jitk_engine *ep = remote_engine(a, url, &lp);
  jitk_cache_remote_info ip = remote_info(ep);
  cr_assert(strstr(ip.url, "s3cret") == NULL && strstr(ip.url, "***") != NULL, "%s", ip.url);
  jitk_engine_destroy(ep);
  stop_server(&s);
  jt_rmdir(a);
  jt_rmdir(b);
}

/* Replaces the value of `key` on the server with `v` (n bytes). */
static void set_value(redisContext *c, const char *key, const void *v, size_t n) {
  redisReply *r = redisCommand(c, "SET %s %b", key, v, n);
  cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
}

static void *get_value(redisContext *c, const char *key, size_t *n) {
  redisReply *r = redisCommand(c, "GET %s", key);
  cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "no value under %s", key);
  void *v = malloc(r->len);
  memcpy(v, r->str, r->len);
  *n = r->len;
  freeReplyObject(r);
  return v;
}

Test(remote, damaged_or_planted_entries_are_never_loaded) {
  server s = shared_server(2);
  redisContext *c = client(&s);
  char *a = jt_tmpdir();
  jt_log la = {0};
  jitk_engine *ea = remote_engine(a, s.url, &la);
  build(ea, 1);
  build(ea, 2);
  jitk_engine_destroy(ea);
  char keys[8][96];
  cr_assert_eq(entry_keys(c, keys, 8), 2);
  size_t n1, n2;
  unsigned char *v1 = get_value(c, keys[0], &n1), *v2 = get_value(c, keys[1], &n2);

  /* Each damage, then a fresh machine asking for both kernels: it never
   * serves the damaged value, compiles instead and stores its own. */
  const char *what[] = {"a flipped byte of the image", "truncated",        "bytes past its end",
                        "the other request's entry",   "not a jitk value", "empty"};
  for (int d = 0; d < 6; d++) {
    unsigned char *bad = malloc(n1 + 16);
    size_t bn = n1;
    memcpy(bad, v1, n1);
    if (d == 0) bad[n1 - 3] ^= 0x40;
    if (d == 1) bn = n1 / 2;
    if (d == 2) bad[bn++] = 0;
    if (d == 3) {
      free(bad);
      bad = malloc(n2);
      memcpy(bad, v2, n2);
      bn = n2;
    }
    if (d == 4) memcpy(bad, "not jitk", 8);
    if (d == 5) bn = 0;
    set_value(c, keys[0], bad, bn);
    free(bad);
    char *dir = jt_tmpdir();
    jt_log l = {0};
    jitk_engine *e = remote_engine(dir, s.url, &l);
    build(e, 1);
    build(e, 2);
    jitk_cache_remote_info i = remote_info(e);
    jitk_cache_stats st = jt_stats_mine(e);
    /* One of the two is damaged: compiled here; the other served. */
    cr_assert_eq(st.compiles, 1, "%s: %llu compiles", what[d], (unsigned long long)st.compiles);
    cr_assert_eq(i.hits, 1, "%s", what[d]);
    /* An empty value reads as no value (a lookup reads with GETRANGE,
     * which answers an empty string for a missing key): compiled and
     * replaced without a word. */
    if (d != 3) {
      const int want = d == 5 ? 0 : 1;
      cr_assert_eq(i.rejected, (uint64_t)want, "%s: %llu rejected", what[d],
                   (unsigned long long)i.rejected);
      cr_assert_eq(l.warnings, want, "%s: %d warnings, not %d", what[d], l.warnings, want);
    }
    jitk_engine_destroy(e);
    jt_rmdir(dir);
    /* The compile replaced the damaged value with a good one. */
    size_t fixed_n;
    free(get_value(c, keys[0], &fixed_n));
    cr_assert(fixed_n > 64, "%s: the value was not replaced", what[d]);
  }
  free(v1);
  free(v2);
  redisFree(c);
  stop_server(&s);
  jt_rmdir(a);
}

Test(remote, processes_sharing_a_server_compile_each_kernel_once) {
  server s = shared_server(3);
  enum { PROCS = 16, KINDS = 6 };
  char *dirs[PROCS];
  int pipes[PROCS][2];
  pid_t kids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    dirs[p] = jt_tmpdir();
    cr_assert_eq(pipe(pipes[p]), 0);
    kids[p] = fork();
    cr_assert_geq(kids[p], 0);
    if (kids[p] == 0) {
      /* Each process builds three of the six kernels, starting at its own
       * place, so the sets overlap and the same kernel is asked for at
       * the same moment by several processes. */
      jt_log l = {0};
      jitk_engine *e = remote_engine(dirs[p], s.url, &l);
      for (int k = 0; k < 3; k++) build(e, 100 + (p + k) % KINDS);
      unsigned long long compiles = jt_stats_mine(e).compiles;
      jitk_engine_destroy(e);
      if (write(pipes[p][1], &compiles, sizeof compiles) != sizeof compiles) _exit(2);
      _exit(l.warnings == 0 ? 0 : 3);
    }
    close(pipes[p][1]);
  }
  unsigned long long total = 0;
  for (int p = 0; p < PROCS; p++) {
    unsigned long long n = 0;
    cr_assert_eq(read(pipes[p][0], &n, sizeof n), (ssize_t)sizeof n, "process %d reported", p);
    close(pipes[p][0]);
    int status = 0;
    waitpid(kids[p], &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: status %d", p, status);
    total += n;
    jt_rmdir(dirs[p]);
  }
  cr_assert_eq(total, KINDS, "%llu compiles among %d processes for %d kernels", total, PROCS,
               KINDS);
  stop_server(&s);
}

Test(remote, a_server_killed_in_the_middle) {
  server s = start_server();
  char *a = jt_tmpdir();
  jt_log l = {0};
  jitk_engine *e = remote_engine(a, s.url, &l);
  build(e, 1);
  stop_server(&s);
  for (int k = 2; k < 6; k++) build(e, k);
  jitk_cache_remote_info i = remote_info(e);
  cr_assert_eq(jt_stats_mine(e).compiles, 5, "everything still compiles");
  cr_assert_eq(l.warnings, 1, "one warning for the process, not %d: %s", l.warnings,
               l.last_warning);
  cr_assert_eq(i.errors, 1, "one attempt, then the back-off");
  cr_assert(strncmp(i.state, "off for", 7) == 0, "%s", i.state);
  JT_FAILS(e, JITK_ERR_CACHE, "off for", jitk_cache_remote_ping(e, NULL));
  jitk_engine_destroy(e);
  jt_rmdir(a);
}

/* The extra time of a first compile against an engine without a remote:
 * the remote's cost alone. */
static double first_compile_ms(const char *url, jt_log *l) {
  char *a = jt_tmpdir();
  jitk_engine *e = remote_engine(a, url, l);
  double t0 = now_ms();
  build(e, 7);
  double ms = now_ms() - t0;
  jitk_engine_destroy(e);
  jt_rmdir(a);
  return ms;
}

Test(remote, unreachable_or_silent_servers_cost_little) {
  char *a = jt_tmpdir();
  jt_log l0 = {0};
  jitk_engine *e0 = jt_cache_engine(a);
  (void)l0;
  build(e0, 7); /* NVRTC warmed up, so the timings below are the compile's */
  jitk_engine_destroy(e0);
  jt_rmdir(a);
  /* The fastest of three on each side: on a machine shared with other
   * work, a single compile's time can take a stray 10 ms or more, which
   * would land in the difference. */
  double plain = first_compile_ms(NULL, &l0);
  for (int k = 0; k < 2; k++) plain = fmin(plain, first_compile_ms(NULL, &l0));

  /* Nothing listens on the port. */
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", free_port());
  double dead = 0;
  for (int k = 0; k < 3; k++) {
    jt_log l1 = {0};
    double ms = first_compile_ms(url, &l1);
    cr_assert_eq(l1.warnings, 1, "%d warnings", l1.warnings);
    dead = k == 0 ? ms : fmin(dead, ms);
  }
  cr_log_info("first compile: %.1f ms without a remote, %.1f ms with a dead one", plain, dead);
  cr_assert_lt(dead - plain, 50.0, "a dead server added %.1f ms", dead - plain);

  /* A server that accepts connections (the kernel does, from the listen
   * backlog) and never answers. */
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
  socklen_t n = sizeof sa;
  getsockname(s, (struct sockaddr *)&sa, &n);
  cr_assert_eq(listen(s, 16), 0);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(sa.sin_port));
  /* The fastest of three here too: one compile under ASan beside the
   * stress tests once took 402 ms, its 250 ms wait plus a slow compile. */
  double silent = 0;
  for (int k = 0; k < 3; k++) {
    jt_log l2 = {0};
    double ms = first_compile_ms(url, &l2);
    cr_assert_eq(l2.warnings, 1, "%d warnings", l2.warnings);
    silent = k == 0 ? ms : fmin(silent, ms);
  }
  close(s);
  cr_log_info("first compile with a silent server: %.1f ms", silent);
  /* Bounded by the first answer's 250 ms (a live server on a loaded
   * machine may take a moment). */
  cr_assert_lt(silent - plain, 400.0, "a silent server added %.1f ms", silent - plain);
}

Test(remote, evicted_keys_are_compiled_again) {
  server s = start_server();
  redisContext *c = client(&s);
  /* Room for about half of the entries above what the server uses. */
  redisReply *r = redisCommand(c, "INFO memory");
  const char *used = r && r->str ? strstr(r->str, "used_memory:") : NULL;
  cr_assert_not_null(used);
  long long base = atoll(used + strlen("used_memory:"));
  freeReplyObject(r);
  r = redisCommand(c, "CONFIG SET maxmemory %lld", base + 400000);
  freeReplyObject(r);
  r = redisCommand(c, "CONFIG SET maxmemory-policy allkeys-lru");
  freeReplyObject(r);
  char *a = jt_tmpdir(), *b = jt_tmpdir();
  jt_log la = {0}, lb = {0};
  jitk_engine *ea = remote_engine(a, s.url, &la);
  for (int k = 0; k < 40; k++) build_big(ea, 200 + k);
  jitk_cache_remote_info ia = remote_info(ea);
  cr_log_info("40 entries of %llu bytes on average sent",
              (unsigned long long)ia.bytes_written / 40);
  jitk_engine_destroy(ea);
  /* The older ones were evicted; a new machine gets the rest and
   * compiles those (newest first: its own stores evict the oldest). */
  jitk_engine *eb = remote_engine(b, s.url, &lb);
  for (int k = 39; k >= 0; k--) build_big(eb, 200 + k);
  jitk_cache_remote_info i = remote_info(eb);
  cr_log_info("after eviction: %llu hits, %llu compiled again", (unsigned long long)i.hits,
              (unsigned long long)jt_stats_mine(eb).compiles);
  cr_assert_eq(i.hits + jt_stats_mine(eb).compiles, 40);
  cr_assert_gt(jt_stats_mine(eb).compiles, 0, "nothing was evicted; the test tests nothing");
  cr_assert_gt(i.hits, 0);
  cr_assert_eq(i.errors, 0);
  cr_assert_eq(la.warnings + lb.warnings, 0);
  jitk_engine_destroy(eb);
  redisFree(c);
  stop_server(&s);
  jt_rmdir(a);
  jt_rmdir(b);
}

Test(remote, bad_configurations_turn_the_remote_off) {
  char *a = jt_tmpdir();
  const char *bad[] = {"http://127.0.0.1:6379", "redis://",
                       "redis://host:99999",    "redis://host:12x",
                       "redis://host:6379/db",  "rediss://host:6380"};
  const char *why[] = {"redis://", "no host", "port", "port", "database", "TLS"};
  for (int i = 0; i < 6; i++) {
    jt_log l = {0};
    jitk_engine *e = remote_engine(a, bad[i], &l);
    jitk_cache_remote_info info = remote_info(e);
    cr_assert(strncmp(info.state, "off:", 4) == 0, "%s: %s", bad[i], info.state);
    cr_assert(strstr(info.state, why[i]) != NULL, "%s: %s", bad[i], info.state);
    cr_assert_eq(l.warnings, 1, "%s", bad[i]);
    build(e, 1); /* still compiles */
    jitk_engine_destroy(e);
  }
  /* A password in a file that others can read. */
  char path[512];
  snprintf(path, sizeof path, "%s/remote.url", a);
  FILE *f = fopen(path, "w");
  fprintf(f, "redis://user:s3cret@127.0.0.1:6379\n");
  fclose(f);
  chmod(path, 0644);
  setenv("JITK_CACHE_REMOTE_FILE", path, 1);
  jt_log l = {0};
  jitk_engine *e = remote_engine(a, NULL, &l);
  jitk_cache_remote_info info = remote_info(e);
  cr_assert(strstr(info.state, "chmod 600") != NULL, "%s", info.state);
  cr_assert_eq(l.warnings, 1);
  jitk_engine_destroy(e);
  /* The same file, private: used (the server is not there, which is the
   * back-off's business, not the configuration's). */
  chmod(path, 0600);
  jt_log l2 = {0};
  e = remote_engine(a, NULL, &l2);
  info = remote_info(e);
  cr_assert_str_eq(info.state, "not contacted yet");
  cr_assert(strstr(info.url, "***") != NULL, "%s", info.url);
  jitk_engine_destroy(e);
  unsetenv("JITK_CACHE_REMOTE_FILE");
  jt_rmdir(a);
}

Test(remote, push_and_pull_copy_between_tiers) {
  server s = shared_server(4);
  char *a = jt_tmpdir(), *b = jt_tmpdir();
  /* Machine a compiles three kernels with no remote, then pushes them. */
  jitk_engine *la = jt_cache_engine(a);
  for (int k = 0; k < 3; k++) build(la, 300 + k);
  jitk_engine_destroy(la);
  jt_log l = {0};
  jitk_engine *ea = remote_engine(a, s.url, &l);
  size_t pushed = 0;
  JT_OK(ea, jitk_cache_remote_push(ea, &pushed));
  cr_assert_eq(pushed, 3);
  jitk_engine_destroy(ea);
  /* A planted value under a request's name, and garbage. */
  redisContext *c = client(&s);
  char keys[8][96];
  cr_assert_eq(entry_keys(c, keys, 8), 3);
  size_t n0;
  unsigned char *v0 = get_value(c, keys[0], &n0);
  char other[96];
  snprintf(other, sizeof other, "jitk:1:%032x", 7);
  set_value(c, other, v0, n0); /* another request's name */
  snprintf(other, sizeof other, "jitk:1:%032x", 8);
  set_value(c, other, "garbage", 7);
  free(v0);
  redisFree(c);
  /* Machine b pulls: the three, and not the two planted. */
  jt_log lb = {0};
  jitk_engine *eb = remote_engine(b, s.url, &lb);
  size_t pulled = 0, rejected = 0;
  JT_OK(eb, jitk_cache_remote_pull(eb, &pulled, &rejected));
  cr_assert_eq(pulled, 3);
  cr_assert_eq(rejected, 2);
  cr_assert_eq(lb.warnings, 2);
  jitk_engine_destroy(eb);
  /* Then b has them on disk, with no remote at all. */
  jitk_engine *lb2 = jt_cache_engine(b);
  for (int k = 0; k < 3; k++) build(lb2, 300 + k);
  cr_assert_eq(jt_stats_mine(lb2).disk_hits, 3);
  cr_assert_eq(jt_stats_mine(lb2).compiles, 0);
  jitk_engine_destroy(lb2);
  /* Without a remote, both say so. */
  jitk_engine *none = jt_cache_engine(b);
  JT_FAILS(none, JITK_ERR_CACHE, "no remote cache", jitk_cache_remote_push(none, NULL));
  JT_FAILS(none, JITK_ERR_CACHE, "no remote cache", jitk_cache_remote_pull(none, NULL, NULL));
  jitk_engine_destroy(none);
  stop_server(&s);
  jt_rmdir(a);
  jt_rmdir(b);
}

/* A push sends only rows that pass a lookup's checks. A value is
 * checksummed (and signed, with a key) as it is encoded, so a row damaged
 * on this machine's disk (one byte of its image flipped, its checksum left
 * alone) once went out as a sound entry that every other machine loaded,
 * and kept. */
Test(remote, a_push_leaves_damaged_rows_out) {
  server s = shared_server(9);
  char *a = jt_tmpdir(), *b = jt_tmpdir();
  jitk_engine *la = jt_cache_engine(a);
  for (int k = 0; k < 2; k++) build(la, 320 + k);
  jitk_engine_destroy(la);
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", a);
  sqlite3 *db = NULL;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *q = NULL, *u = NULL;
  cr_assert_eq(
      sqlite3_prepare_v2(db, "SELECT id, image FROM entries ORDER BY id LIMIT 1", -1, &q, NULL),
      SQLITE_OK);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
  size_t n = (size_t)sqlite3_column_bytes(q, 1);
  cr_assert(n > 100);
  unsigned char *image = malloc(n);
  memcpy(image, sqlite3_column_blob(q, 1), n);
  image[100] ^= 1;
  cr_assert_eq(sqlite3_prepare_v2(db, "UPDATE entries SET image = ?1 WHERE id = ?2", -1, &u, NULL),
               SQLITE_OK);
  sqlite3_bind_blob(u, 1, image, (int)n, SQLITE_TRANSIENT);
  sqlite3_bind_int64(u, 2, sqlite3_column_int64(q, 0));
  cr_assert_eq(sqlite3_step(u), SQLITE_DONE);
  sqlite3_finalize(u);
  sqlite3_finalize(q);
  sqlite3_close(db);
  free(image);
  jt_log l = {0};
  jitk_engine *ea = remote_engine(a, s.url, &l);
  size_t pushed = 9;
  JT_OK(ea, jitk_cache_remote_push(ea, &pushed));
  cr_assert_eq(pushed, 1);
  cr_assert_eq(l.warnings, 1);
  cr_assert(strstr(l.last_warning, "1 damaged entries not sent") != NULL, "%s", l.last_warning);
  jitk_engine_destroy(ea);
  redisContext *c = client(&s);
  char keys[8][96];
  cr_assert_eq(entry_keys(c, keys, 8), 1);
  redisFree(c);
  /* Machine b, with the remote, gets the sound one and compiles the other. */
  jt_log lb = {0};
  jitk_engine *eb = remote_engine(b, s.url, &lb);
  for (int k = 0; k < 2; k++) build(eb, 320 + k);
  cr_assert_eq(remote_info(eb).hits, 1);
  cr_assert_eq(jt_stats_mine(eb).compiles, 1);
  jitk_engine_destroy(eb);
  stop_server(&s);
  jt_rmdir(a);
  jt_rmdir(b);
}

/* A machine whose cache keeps less (a smaller size cap) than the one that
 * stored an entry: it reads no more of the entry than its cap and a byte,
 * compiles the kernel itself, and goes on using the remote for the rest,
 * with no warning, error or rejection (it once refused the whole reply as
 * past its bound and turned the remote off for 30 s). A pull skips the
 * large entry the same way and takes the small one. */
Test(remote, an_entry_larger_than_the_cache_keeps_is_compiled_here) {
  server s = shared_server(8);
  char *a = jt_tmpdir(), *b = jt_tmpdir(), *p = jt_tmpdir();
  jt_log la = {0}, lb = {0}, lp = {0};
  jitk_engine *ea = remote_engine(a, s.url, &la);
  build_big(ea, 1); /* 16 KiB of data in its image */
  build(ea, 2);
  cr_assert_eq(remote_info(ea).stores, 2);
  const int64_t cap = 8192;
  jitk_engine *eb = remote_engine_capped(b, s.url, &lb, cap);
  build_big(eb, 1);
  build(eb, 2);
  jitk_cache_remote_info i = remote_info(eb);
  cr_assert_eq(jt_stats_mine(eb).compiles, 1, "the large kernel compiled here, the small served");
  cr_assert_eq(i.hits, 1);
  cr_assert_eq(i.errors, 0, "%s", i.state);
  cr_assert_eq(i.rejected, 0);
  cr_assert(strncmp(i.state, "off", 3) != 0, "%s", i.state);
  cr_assert_eq(lb.warnings, 0, "%s", lb.last_warning);
  cr_assert_leq(i.bytes_read, (uint64_t)(2 * cap + 1), "%llu bytes read",
                (unsigned long long)i.bytes_read);
  jitk_engine *ep = remote_engine_capped(p, s.url, &lp, cap);
  size_t pulled = 0, rejected = 0;
  JT_OK(ep, jitk_cache_remote_pull(ep, &pulled, &rejected));
  cr_assert_eq(pulled, 1, "the small entry pulled");
  cr_assert_eq(rejected, 0, "the large one skipped, not rejected");
  cr_assert_eq(lp.warnings, 0, "%s", lp.last_warning);
  jitk_engine_destroy(ep);
  jitk_engine_destroy(eb);
  jitk_engine_destroy(ea);
  cr_assert_eq(la.warnings, 0, "%s", la.last_warning);
  stop_server(&s);
  jt_rmdir(a);
  jt_rmdir(b);
  jt_rmdir(p);
}

/* A server that answers PING, SCAN with `scan` (by default keys that
 * are not strings, an integer and a nested array, and a cursor of 0), GET
 * with `get` (by default nil) and anything else with nil. Serves one
 * connection after another until `stop`.
 *
 * A SET (a lease's or a store's) is answered with `set` where given.
 * It can also be slow or endless, as a server (or anything else on the
 * port) may be: the GET reply, `get_len` bytes when it holds zero bytes,
 * goes out in pieces of `piece` bytes `pause_ms` apart; and after the GET
 * or SCAN reply it sends `stream` again and again until the client closes
 * or `stream_max` bytes have gone, so that a client that never gives up
 * buffers that much and no more. `sent` counts the bytes streamed. */
typedef struct odd_server {
  int listener;
  atomic_int stop; /* set by the test's thread, read by the server's */
  const char *scan, *get, *exists, *set;
  size_t get_len;
  size_t piece;
  int pause_ms;
  const char *stream;
  size_t stream_max;
  volatile size_t sent;
  pthread_t thread;
  char url[64];
} odd_server;

/* Sends n bytes to the client; false once it has gone. MSG_NOSIGNAL: a
 * client that closes first is what some tests expect, not a SIGPIPE. */
static bool odd_send(int c, const char *p, size_t n) {
  while (n > 0) {
    ssize_t k = send(c, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

/* The GET reply, in pieces when the test asks for them. */
static bool odd_send_get(odd_server *o, int c) {
  size_t n = o->get_len ? o->get_len : strlen(o->get);
  size_t piece = o->piece ? o->piece : n;
  for (size_t at = 0; at < n; at += piece) {
    if (at > 0) usleep((useconds_t)o->pause_ms * 1000);
    if (!odd_send(c, o->get + at, n - at < piece ? n - at : piece)) return false;
  }
  return true;
}

/* `stream`, again and again, until the client closes or stream_max. */
static void odd_stream(odd_server *o, int c) {
  size_t n = strlen(o->stream);
  while (o->sent + n <= o->stream_max && !atomic_load(&o->stop)) {
    if (!odd_send(c, o->stream, n)) return;
    o->sent += n;
  }
}

static void *odd_serve(void *arg) {
  odd_server *o = arg;
  while (!atomic_load(&o->stop)) {
    int c = accept(o->listener, NULL, NULL);
    if (c < 0) break;
    char buf[4096];
    ssize_t n;
    while ((n = read(c, buf, sizeof buf - 1)) > 0) {
      buf[n] = '\0';
      const char *scan = o->scan ? o->scan : "*2\r\n$1\r\n0\r\n*3\r\n:5\r\n*0\r\n$3\r\nabc\r\n";
      bool ping = strstr(buf, "PING") != NULL, is_scan = !ping && strstr(buf, "SCAN");
      bool get = !ping && !is_scan && strstr(buf, "GET") && o->get;
      bool set = !ping && !is_scan && !get && strstr(buf, "SET") && o->set;
      const char *reply = ping                                 ? "+PONG\r\n"
                          : is_scan                            ? scan
                          : set                                ? o->set
                          : strstr(buf, "EXISTS") && o->exists ? o->exists
                                                               : "$-1\r\n";
      if (get ? !odd_send_get(o, c) : !odd_send(c, reply, strlen(reply))) break;
      if ((get || is_scan || set) && o->stream != NULL) odd_stream(o, c);
    }
    close(c);
  }
  return NULL;
}

/* A pull from such a server pulls nothing and fails nothing (a key that
 * is not a string once crashed it). */
static void odd_start(odd_server *o) {
  o->listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(o->listener, (struct sockaddr *)&sa, sizeof sa), 0);
  socklen_t len = sizeof sa;
  cr_assert_eq(getsockname(o->listener, (struct sockaddr *)&sa, &len), 0);
  cr_assert_eq(listen(o->listener, 16), 0);
  cr_assert_eq(pthread_create(&o->thread, NULL, odd_serve, o), 0);
  snprintf(o->url, sizeof o->url, "redis://127.0.0.1:%d", ntohs(sa.sin_port));
}

static void odd_stop(odd_server *o) {
  atomic_store(&o->stop, 1);
  shutdown(o->listener, SHUT_RDWR);
  close(o->listener);
  pthread_join(o->thread, NULL);
}

Test(remote, a_pull_takes_only_string_keys) {
  odd_server o = {0};
  odd_start(&o);
  char *dir = jt_tmpdir();
  jt_log log = {0};
  jitk_engine *e = remote_engine(dir, o.url, &log);
  size_t pulled = 7, rejected = 7;
  JT_OK(e, jitk_cache_remote_pull(e, &pulled, &rejected));
  cr_assert_eq(pulled, 0);
  cr_assert_eq(rejected, 0);
  jitk_engine_destroy(e);
  odd_stop(&o);
  jt_rmdir(dir);
}

/* A server decides when a scan ends: one whose cursor does not move, or
 * is not a number, once kept a pull going for ever; a GET refused part of
 * the way through once left a pull that said it succeeded. */
Test(remote, a_pull_from_a_server_that_misleads_it_fails) {
  static const char *const scans[] = {
      "*2\r\n$1\r\n1\r\n*0\r\n",   /* cursor 1, again and again */
      "*2\r\n$2\r\n00\r\n*0\r\n",  /* not a cursor */
      "*2\r\n$3\r\n-17\r\n*0\r\n", /* nor this */
      "*2\r\n$1\r\n0\r\n*1\r\n$39\r\njitk:1:0123456789abcdef0123456789abcdef\r\n"};
  static const char *const whys[] = {"the same cursor again", "a cursor that is not one",
                                     "a cursor that is not one", "GET"};
  char *dir = jt_tmpdir();
  for (size_t i = 0; i < sizeof scans / sizeof scans[0]; i++) {
    odd_server o = {0};
    o.scan = scans[i];
    o.get = "-ERR boom\r\n";
    odd_start(&o);
    jt_log log = {0};
    jitk_engine *e = remote_engine(dir, o.url, &log);
    JT_FAILS(e, JITK_ERR_CACHE, whys[i], jitk_cache_remote_pull(e, NULL, NULL));
    jitk_engine_destroy(e);
    odd_stop(&o);
  }
  jt_rmdir(dir);
}

/* A lease held by another process while the request's value is bad: the
 * wait polls the value again and again, and says it is bad once (it once
 * warned at every poll). */
Test(remote, a_bad_value_during_a_lease_wait_is_one_warning) {
  setenv("JITK_CACHE_REMOTE_WAIT_MS", "1500", 1);
  odd_server o = {0};
  o.get = "$7\r\ngarbage\r\n";
  o.exists = ":1\r\n";
  odd_start(&o);
  char *dir = jt_tmpdir();
  jt_log log = {0};
  jitk_engine *e = remote_engine(dir, o.url, &log);
  build(e, 1);
  cr_assert_eq(jt_stats_mine(e).compiles, 1);
  cr_assert_geq(remote_info(e).rejected, 3, "the wait polled the value");
  cr_assert_eq(log.warnings, 1, "%d warnings, the last: %s", log.warnings, log.last_warning);
  jitk_engine_destroy(e);
  odd_stop(&o);
  unsetenv("JITK_CACHE_REMOTE_WAIT_MS");
  jt_rmdir(dir);
}

/* A server that sends its reply one byte every 50 ms: every read of it
 * is within the timeout, and such a server once held a lookup for as
 * long as it liked (51 s measured). The whole reply has the request
 * timeout (300 ms here, where this one would take 12 s): the lookup gives
 * up, is a miss, the kernel compiles here and the local tier keeps it. */
Test(remote, a_dripping_reply_is_given_up_at_the_deadline) {
  setenv("JITK_CACHE_REMOTE_REQUEST_MS", "300", 1);
  char reply[256];
  snprintf(reply, sizeof reply, "$240\r\n%0240d\r\n", 0);
  odd_server o = {0};
  o.get = reply;
  o.piece = 1;
  o.pause_ms = 50;
  odd_start(&o);
  char *dir = jt_tmpdir();
  jt_log log = {0};
  jitk_engine *e = remote_engine(dir, o.url, &log);
  double t0 = now_ms();
  build(e, 1);
  double ms = now_ms() - t0;
  jitk_cache_remote_info i = remote_info(e);
  cr_log_info("a lookup from a dripping server: %.0f ms, %s", ms, i.state);
  cr_assert_lt(ms, 3000.0, "the dripping reply held the lookup %.0f ms", ms);
  cr_assert_eq(jt_stats_mine(e).compiles, 1, "compiled here");
  cr_assert_eq(i.hits, 0);
  cr_assert_eq(i.errors, 1);
  cr_assert_eq(log.warnings, 1, "%d warnings, the last: %s", log.warnings, log.last_warning);
  cr_assert(strncmp(i.state, "off for", 7) == 0 && strstr(i.state, "GET") != NULL &&
                strstr(i.state, "within 300 ms") != NULL,
            "%s", i.state);
  jitk_engine_destroy(e);
  jitk_engine *local = jt_cache_engine(dir);
  build(local, 1);
  cr_assert_eq(jt_stats_mine(local).disk_hits, 1, "the compile was kept locally");
  jitk_engine_destroy(local);
  odd_stop(&o);
  unsetenv("JITK_CACHE_REMOTE_REQUEST_MS");
  jt_rmdir(dir);
}

/* 64 KiB of one byte, what the servers below stream. */
static const char *filler(void) {
  static char bytes[(64 << 10) + 1];
  memset(bytes, 'x', sizeof bytes - 1);
  return bytes;
}

/* Against odd server `o`, which streams a reply larger than the command
 * may have (a value: the cap of an engine's cache, `max_bytes`, 0: the
 * default), or an array where none was asked for: a lookup (or a pull,
 * which then fails) refuses the reply, the remote goes off with one
 * warning saying `why`, the kernel compiles here, and the client closes
 * having taken far less than the server would have sent. */
static void refused_reply(odd_server *o, int64_t max_bytes, bool pull, const char *why) {
  odd_start(o);
  char *dir = jt_tmpdir();
  jt_log log = {0};
  jitk_engine *e = remote_engine_capped(dir, o->url, &log, max_bytes);
  if (pull) JT_FAILS(e, JITK_ERR_CACHE, why, jitk_cache_remote_pull(e, NULL, NULL));
  build(e, 1);
  jitk_cache_remote_info i = remote_info(e);
  cr_assert_eq(jt_stats_mine(e).compiles, 1, "compiled here");
  cr_assert_eq(i.errors, 1);
  cr_assert_eq(log.warnings, 1, "%d warnings, the last: %s", log.warnings, log.last_warning);
  cr_assert(strncmp(i.state, "off for", 7) == 0 && strstr(i.state, why) != NULL, "%s", i.state);
  jitk_engine_destroy(e);
  odd_stop(o);
  cr_log_info("%zu bytes streamed before the client closed", o->sent);
  cr_assert_lt(o->sent, (size_t)16 << 20, "%zu bytes streamed", o->sent);
  jt_rmdir(dir);
}

/* A server that announces a value of 2 GB and streams it: the client once
 * buffered all of it before looking at it. A reply may hold the largest
 * entry the local cache keeps (its size cap, 1 GiB by default) and a
 * margin: this one is refused as soon as it is announced. The server
 * stops at 256 MiB, which a client without the cap buffers. */
/* refused_reply for a lookup against a server that answers GET with
 * `get` (or a SET with `set`), then streams `stream` up to `max` bytes. */
static void refused_lookup(const char *get, const char *set, const char *stream, size_t max,
                           const char *why) {
  odd_server o = {0};
  o.get = get;
  o.set = set;
  o.stream = stream;
  o.stream_max = max;
  refused_reply(&o, 0, false, why);
}

Test(remote, a_huge_announced_reply_is_refused) {
  refused_lookup("$2000000000\r\n", NULL, filler(), (size_t)256 << 20, "more than");
}

/* A reply of many small parts, none of them large, adds up all the same:
 * a SCAN that answers 100000 keys of 1000 bytes (100 MB) is refused once
 * it passes a listing's cap (1 MiB, whatever the cache's). */
Test(remote, a_reply_past_the_cap_is_refused) {
  static char key[1100];
  snprintf(key, sizeof key, "$1000\r\n%.1000s\r\n", filler());
  odd_server o = {0};
  o.scan = "*2\r\n$1\r\n0\r\n*100000\r\n";
  o.stream = key;
  o.stream_max = (size_t)100000 * strlen(key);
  refused_reply(&o, 0, true, "more than 1048576 bytes");
}

/* A value answered with an array of two billion empty strings: hiredis
 * would make room for that many elements at the count, and an object for
 * each as it came (some 60 bytes for every 6 on the wire). It is refused
 * at its first byte. */
Test(remote, an_array_where_a_value_was_asked_for_is_refused) {
  refused_lookup("*2000000000\r\n", NULL, "$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n",
                 (size_t)256 << 20, "an array");
}

/* The process's peak of virtual memory, in KiB (0 where not known). */
static long long vm_peak_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long long kib = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmPeak: %lld kB", &kib) == 1) break;
  if (f != NULL) fclose(f);
  return kib;
}

/* A listing may hold arrays, but not of more elements than its 1 MiB
 * could carry (3 bytes each at least): hiredis makes room for all of an
 * array's elements at its count, so a SCAN answered with two billion keys
 * once reserved 16 GB before the first of them came. Refused at the count,
 * the outer array's or the keys', whatever follows; the process's peak of
 * virtual memory stays where it was. */
Test(remote, a_listing_announcing_too_many_keys_is_refused) {
  static const char *const scans[] = {"*2\r\n$1\r\n0\r\n*2000000000\r\n",
                                      "*2000000000\r\n$1\r\n0\r\n",
                                      "*2\r\n$1\r\n0\r\n*99999999999999999999999\r\n"};
  for (size_t i = 0; i < sizeof scans / sizeof scans[0]; i++) {
    const long long before = vm_peak_kib();
    odd_server o = {0};
    o.scan = scans[i];
    o.stream = "$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n";
    o.stream_max = (size_t)64 << 20;
    refused_reply(&o, 0, true, "more elements than 1048576 bytes can hold");
    const long long grew = vm_peak_kib() - before;
    cr_log_info("listing %zu: virtual memory's peak grew %lld KiB", i, grew);
    cr_assert_lt(grew, 1LL << 20, "listing %zu: the peak grew %lld KiB", i, grew);
  }
}

/* A reply that carries no data (here, to the lease's SET) may hold 64
 * KiB, not the cache's cap: a 100 MB value there is refused as soon as
 * it is announced. */
Test(remote, a_large_reply_where_a_small_one_was_asked_for_is_refused) {
  refused_lookup(NULL, "$100000000\r\n", filler(), (size_t)100 << 20, "more than 65536 bytes");
}

/* No false failures: a real entry whose reply comes in four pieces 100 ms
 * apart, within the request timeout (1 s), is served. */
Test(remote, a_slow_reply_within_the_deadline_is_served) {
  server s = shared_server(6);
  char *a = jt_tmpdir(), *b = jt_tmpdir();
  jt_log la = {0}, lb = {0};
  jitk_engine *ea = remote_engine(a, s.url, &la);
  build(ea, 1);
  jitk_engine_destroy(ea);
  redisContext *c = client(&s);
  char keys[8][96];
  cr_assert_eq(entry_keys(c, keys, 8), 1);
  size_t n = 0;
  unsigned char *v = get_value(c, keys[0], &n);
  redisFree(c);
  char *reply = malloc(n + 64);
  int head = snprintf(reply, 64, "$%zu\r\n", n);
  memcpy(reply + head, v, n);
  memcpy(reply + head + n, "\r\n", 2);
  free(v);
  odd_server o = {0};
  o.get = reply;
  o.get_len = (size_t)head + n + 2;
  o.piece = o.get_len / 4 + 1;
  o.pause_ms = 100;
  odd_start(&o);
  jitk_engine *eb = remote_engine(b, o.url, &lb);
  double t0 = now_ms();
  build(eb, 1);
  double ms = now_ms() - t0;
  jitk_cache_remote_info i = remote_info(eb);
  cr_log_info("a reply of %zu bytes in four pieces: %.0f ms", o.get_len, ms);
  cr_assert_eq(jt_stats_mine(eb).compiles, 0, "the slow reply served");
  cr_assert_eq(i.hits, 1);
  cr_assert_eq(i.errors, 0, "%s", i.state);
  cr_assert_str_eq(i.state, "on");
  cr_assert_eq(lb.warnings, 0, "%s", lb.last_warning);
  cr_assert_geq(ms, 250.0, "the reply was not slow: the test tests nothing");
  jitk_engine_destroy(eb);
  odd_stop(&o);
  free(reply);
  stop_server(&s);
  jt_rmdir(a);
  jt_rmdir(b);
}

/* The password is what the URL's parser takes (after the first colon, or
 * all before the '@'): none of it is ever shown. */
Test(remote, no_part_of_the_password_is_shown) {
  static const char *const urls[] = {"redis://user:topsecret:tail@127.0.0.1:1",
                                     "redis://topsecret@127.0.0.1:1",
                                     "redis://:topsecret@127.0.0.1:1/2"};
  char *dir = jt_tmpdir();
  for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
    jt_log log = {0};
    jitk_engine *e = remote_engine(dir, urls[i], &log);
    jitk_cache_remote_info info = remote_info(e);
    cr_assert(strstr(info.url, "topsecret") == NULL && strstr(info.url, "tail") == NULL &&
                  strstr(info.url, "***@127.0.0.1:1") != NULL,
              "%s", info.url);
    jitk_engine_destroy(e);
  }
  jt_rmdir(dir);
}

Test(remote, wrong_password_and_full_server) {
  server s = start_server();
  redisContext *c = client(&s);
  redisReply *r = redisCommand(c, "CONFIG SET requirepass s3cret");
  cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  char *a = jt_tmpdir();
  /* The wrong password: one warning, and everything compiles. */
  char url[128];
  snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", s.port);
  jt_log l1 = {0};
  jitk_engine *e = remote_engine(a, url, &l1);
  build(e, 1);
  build(e, 2);
  jitk_cache_remote_info i = remote_info(e);
  cr_assert_eq(l1.warnings, 1, "%d warnings", l1.warnings);
  cr_assert(strstr(i.state, "AUTH") != NULL, "%s", i.state);
  cr_assert_eq(jt_stats_mine(e).compiles, 2);
  jitk_engine_destroy(e);
  /* The right one: used. */
  snprintf(url, sizeof url, "redis://:s3cret@127.0.0.1:%d", s.port);
  jt_log l2 = {0};
  e = remote_engine(a, url, &l2);
  build(e, 3);
  i = remote_info(e);
  cr_assert_eq(i.stores, 1, "%s", i.state);
  cr_assert_eq(l2.warnings, 0, "%s", l2.last_warning);
  jitk_engine_destroy(e);
  /* A full server that refuses writes (noeviction): one warning, the
   * kernel compiled and kept locally, nothing lost. */
  r = redisCommand(c, "AUTH s3cret");
  freeReplyObject(r);
  r = redisCommand(c, "CONFIG SET maxmemory-policy noeviction");
  freeReplyObject(r);
  r = redisCommand(c, "CONFIG SET maxmemory 1");
  freeReplyObject(r);
  jt_log l3 = {0};
  e = remote_engine(a, url, &l3);
  build(e, 4);
  i = remote_info(e);
  cr_assert_eq(l3.warnings, 1, "%d warnings", l3.warnings);
  cr_assert(strstr(i.state, "OOM") != NULL || strstr(i.state, "memory") != NULL, "%s", i.state);
  jitk_engine_destroy(e);
  jitk_engine *local = jt_cache_engine(a);
  build(local, 4);
  cr_assert_eq(jt_stats_mine(local).disk_hits, 1, "the compile was kept locally");
  jitk_engine_destroy(local);
  redisFree(c);
  stop_server(&s);
  jt_rmdir(a);
}

/* A manifest warmed into the remote alone (a build machine with no local
 * cache): a fresh machine then finds every kernel there. */
Test(remote, a_manifest_warms_the_remote) {
  server s = shared_server(5);
  char *work = jt_tmpdir();
  char man[512];
  snprintf(man, sizeof man, "%s/m.jsonl", work);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  cfg.cache_record = man;
  jitk_engine *rec = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &rec));
  for (int k = 0; k < 4; k++) build(rec, 500 + k);
  jitk_engine_destroy(rec);

  cfg.cache_record = NULL;
  cfg.cache_remote = s.url;
  jitk_engine *warm = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &warm));
  jitk_cache_warm_report rep;
  memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep;
  JT_OK(warm, jitk_cache_warm(warm, man, NULL, &rep));
  cr_assert_eq(rep.kernels, 4);
  cr_assert_eq(rep.compiled, 4);
  cr_assert_eq(remote_info(warm).stores, 4);
  /* Warming again, in a new process, finds them in the remote. */
  jitk_engine_destroy(warm);
  JT_OK(NULL, jitk_engine_create(&cfg, &warm));
  JT_OK(warm, jitk_cache_warm(warm, man, NULL, &rep));
  cr_assert_eq(rep.compiled, 0);
  cr_assert_eq(rep.remote_hits, 4);
  jitk_engine_destroy(warm);

  char *fresh = jt_tmpdir();
  jt_log l = {0};
  jitk_engine *e = remote_engine(fresh, s.url, &l);
  for (int k = 0; k < 4; k++) build(e, 500 + k);
  cr_assert_eq(jt_stats_mine(e).compiles, 0);
  cr_assert_eq(remote_info(e).hits, 4);
  cr_assert_eq(l.warnings, 0, "%s", l.last_warning);
  jitk_engine_destroy(e);
  stop_server(&s);
  jt_rmdir(fresh);
  jt_rmdir(work);
}

/* A key file in `dir` holding `key` (and a newline), of mode `mode`. */
static char *key_file(const char *dir, const char *name, const char *key, mode_t mode) {
  char *path = malloc(512);
  snprintf(path, 512, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "%s\n", key);
  fclose(f);
  chmod(path, mode);
  return path;
}

static jitk_engine *keyed_engine(const char *dir, const char *url, const char *key_path,
                                 jt_log *log) {
  setenv("JITK_CACHE_REMOTE_KEY_FILE", key_path, 1);
  jitk_engine *e = remote_engine(dir, url, log);
  unsetenv("JITK_CACHE_REMOTE_KEY_FILE");
  return e;
}

/* Machines sharing a key serve each other's entries; an entry written
 * without the key (by a machine without one, or one with another key),
 * or a signed one changed in a byte that no other check covers (its
 * compile time), is refused, compiled again, and replaced with a signed
 * one. A machine without a key still reads signed entries. */
/* Node "other-host:1"'s lease `name` as a keyed process writes it, into
 * out (128 bytes): the node, "/", the end `claimed`, "/" and the first 16
 * bytes of HMAC-SHA-256(secret, name "\n" node "\n" until) in hex (a
 * claimed end other than the signed one is a forgery). */
static void signed_lease(char *out, const char *name, const char *secret, long long until,
                         long long claimed) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s\nother-host:1\n%lld", name, until);
  unsigned char tag[32];
  jk_hmac_sha256(secret, strlen(secret), msg, strlen(msg), tag);
  int at = snprintf(out, 128, "other-host:1/%lld/", claimed);
  for (int i = 0; i < 16; i++) at += snprintf(out + at, 3, "%02x", tag[i]);
}

/* A fresh keyed machine (key file `key`) asks for kernel 1, whose entry
 * `entry` is gone and whose lease `lease` holds `value`: it compiles the
 * kernel, after waiting for the lease or not. Its remote's figures, and
 * in *took the milliseconds the build took. */
static jitk_cache_remote_info build_beside_lease(redisContext *c, const char *url, const char *key,
                                                 const char *entry, const char *lease,
                                                 const char *value, double *took) {
  redisReply *r = redisCommand(c, "DEL %s", entry);
  freeReplyObject(r);
  r = redisCommand(c, "SET %s %s PX 60000", lease, value);
  cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  char *dir = jt_tmpdir();
  jt_log l = {0};
  jitk_engine *e = keyed_engine(dir, url, key, &l);
  const double t0 = now_ms();
  build(e, 1);
  *took = now_ms() - t0;
  jitk_cache_remote_info i = remote_info(e);
  cr_assert_eq(jt_stats_mine(e).compiles, 1, "%s", value);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
  return i;
}

Test(remote, a_shared_key_keeps_planted_entries_out) {
  server s = shared_server(7);
  redisContext *c = client(&s);
  char *keys_dir = jt_tmpdir();
  char *k1 = key_file(keys_dir, "k1", "the cluster's secret, 41 bytes long......", 0600),
       *k2 = key_file(keys_dir, "k2", "another cluster's secret of some length", 0600);
  char *a = jt_tmpdir(), *b = jt_tmpdir();
  jt_log la = {0}, lb = {0};
  jitk_engine *ea = keyed_engine(a, s.url, k1, &la);
  build(ea, 1);
  cr_assert_eq(remote_info(ea).stores, 1);
  cr_assert_eq(remote_info(ea).signed_entries, 1);
  char names[8][96];
  cr_assert_eq(entry_keys(c, names, 8), 1);
  size_t n1;
  unsigned char *v1 = get_value(c, names[0], &n1);
  cr_assert(n1 > 40 && memcmp(v1, "JITKRMT2", 8) == 0, "a signed value");
  /* Its signed lease was let go once the entry was stored. */
  redisReply *leases = redisCommand(c, "KEYS *:lease:*");
  cr_assert(leases != NULL && leases->type == REDIS_REPLY_ARRAY && leases->elements == 0,
            "the lease released");
  freeReplyObject(leases);
  /* Another machine with the same key is served. */
  jitk_engine *eb = keyed_engine(b, s.url, k1, &lb);
  build(eb, 1);
  cr_assert_eq(jt_stats_mine(eb).compiles, 0);
  cr_assert_eq(remote_info(eb).hits, 1);
  jitk_engine_destroy(eb);
  jt_rmdir(b);

  /* A machine without a key reads the signed entry. */
  char *u = jt_tmpdir();
  jt_log lu = {0};
  jitk_engine *eu = remote_engine(u, s.url, &lu);
  cr_assert_eq(remote_info(eu).signed_entries, 0);
  build(eu, 1);
  cr_assert_eq(jt_stats_mine(eu).compiles, 0);
  cr_assert_eq(remote_info(eu).hits, 1);
  jitk_engine_destroy(eu);
  jt_rmdir(u);

  /* The plants, each a value under kernel 1's name before a fresh keyed
   * machine asks for kernel 1: well-formed entries for the request
   * compiled by a machine without the key and by one with another key,
   * and the signed value with its compile time changed. */
  unsigned char *later = malloc(n1);
  memcpy(later, v1, n1);
  later[16] ^= 1; /* the compile time's lowest byte */
  const char *what[] = {"kernel 1 unsigned", "kernel 1 signed with another key",
                        "kernel 1 with its compile time changed"};
  for (int d = 0; d < 3; d++) {
    if (d < 2) {
      redisReply *r = redisCommand(c, "DEL %s", names[0]);
      freeReplyObject(r);
      char *o = jt_tmpdir();
      jt_log lo = {0};
      jitk_engine *eo = d == 0 ? remote_engine(o, s.url, &lo) : keyed_engine(o, s.url, k2, &lo);
      build(eo, 1);
      cr_assert_eq(jt_stats_mine(eo).compiles, 1, "%s", what[d]);
      jitk_engine_destroy(eo);
      jt_rmdir(o);
      size_t nv;
      unsigned char *v = get_value(c, names[0], &nv);
      cr_assert(memcmp(v, d == 0 ? "JITKRMT1" : "JITKRMT2", 8) == 0, "%s", what[d]);
      free(v);
    } else {
      set_value(c, names[0], later, n1);
    }
    char *dir = jt_tmpdir();
    jt_log l = {0};
    jitk_engine *e = keyed_engine(dir, s.url, k1, &l);
    build(e, 1);
    jitk_cache_remote_info i = remote_info(e);
    cr_assert_eq(jt_stats_mine(e).compiles, 1, "%s: compiled again", what[d]);
    cr_assert_eq(i.hits, 0, "%s: not served", what[d]);
    cr_assert_eq(i.rejected, 1, "%s: rejected", what[d]);
    cr_assert_eq(l.warnings, 1, "%s: one warning", what[d]);
    cr_assert(strstr(l.last_warning, "not signed with this cluster's key") != NULL, "%s: %s",
              what[d], l.last_warning);
    jitk_engine_destroy(e);
    jt_rmdir(dir);
    /* The compile put a signed value back. */
    size_t fixed_n;
    unsigned char *fixed = get_value(c, names[0], &fixed_n);
    cr_assert(memcmp(fixed, "JITKRMT2", 8) == 0, "%s: replaced with a signed value", what[d]);
    free(fixed);
  }
  /* A pull by a keyed machine takes the signed entry and leaves an
   * unsigned one (kernel 2, from a machine without the key) alone. */
  char *u2 = jt_tmpdir();
  jt_log lu2 = {0};
  jitk_engine *eu2 = remote_engine(u2, s.url, &lu2);
  build(eu2, 2);
  jitk_engine_destroy(eu2);
  jt_rmdir(u2);
  char *p = jt_tmpdir();
  jt_log lp = {0};
  jitk_engine *ep = keyed_engine(p, s.url, k1, &lp);
  size_t pulled = 0, rejected = 0;
  JT_OK(ep, jitk_cache_remote_pull(ep, &pulled, &rejected));
  cr_assert_eq(pulled, 1, "the signed entry pulled");
  cr_assert_eq(rejected, 1, "the unsigned one rejected");
  build(ep, 1);
  build(ep, 2);
  cr_assert_eq(jt_stats_mine(ep).compiles, 1, "kernel 1 from the pull, kernel 2 compiled");
  jitk_engine_destroy(ep);
  jt_rmdir(p);
  /* Leases: one written without the key is not waited for; a signed one
   * is, for the remote's wait (shortened here), until its end. The
   * lease's name is the entry's with "lease:" before the request's key;
   * its value the node, "/", the lease's end (ms since the epoch), "/" and
   * the first 16 bytes of HMAC-SHA-256(key, name "\n" node "\n" end) in
   * hex. A copy of an earlier lease, its end passed, is not waited for,
   * nor is one whose end was moved. */
  setenv("JITK_CACHE_REMOTE_WAIT_MS", "1500", 1);
  const char *colon = strrchr(names[0], ':');
  char lease[128];
  snprintf(lease, sizeof lease, "%.*slease:%s", (int)(colon + 1 - names[0]), names[0], colon + 1);
  const char *secret = "the cluster's secret, 41 bytes long......";
  const long long now = jk_now_ms(); /* as leases' ends are written */
  char live[128], ended[128], moved[128];
  const struct {
    char *out;
    long long until, claimed;
  } signs[] = {{live, now + 60000, now + 60000},
               {ended, now - 5000, now - 5000},
               {moved, now - 5000, now + 60000}};
  for (int v = 0; v < 3; v++)
    signed_lease(signs[v].out, lease, secret, signs[v].until, signs[v].claimed);
  const char *values[] = {"other-host:1",
                          "other-host:1/0123456789abcdef0123456789abcdef",
                          ended,
                          moved,
                          "other-host:1/99999999999999/0123456789abcdef0123456789abcdef",
                          live};
  const int nv = (int)(sizeof values / sizeof values[0]);
  for (int v = 0; v < nv; v++) {
    double took;
    jitk_cache_remote_info i = build_beside_lease(c, s.url, k1, names[0], lease, values[v], &took);
    if (v < nv - 1) {
      cr_assert_eq(i.lease_waits, 0, "%s: not waited for", values[v]);
      cr_assert(took < 1000, "%s: %.0f ms", values[v], took);
    } else {
      cr_assert_eq(i.lease_waits, 1, "a signed lease is waited for");
      cr_assert(took >= 1400, "%.0f ms", took);
    }
  }
  /* A signed lease is waited for until its end (and a second's slack for
   * the machines' clocks), however long Redis keeps the key: a copy of a
   * lease about to end holds a process for that long, not for the wait. */
  setenv("JITK_CACHE_REMOTE_WAIT_MS", "8000", 1);
  {
    const long long until = jk_now_ms() + 500;
    char ending[128];
    signed_lease(ending, lease, secret, until, until);
    double took;
    jitk_cache_remote_info i = build_beside_lease(c, s.url, k1, names[0], lease, ending, &took);
    cr_assert_eq(i.lease_waits, 1, "a signed lease is waited for");
    cr_assert(took >= 1000 && took < 4000, "waited %.0f ms for a lease ending in 500", took);
  }
  unsetenv("JITK_CACHE_REMOTE_WAIT_MS");
  redisReply *del = redisCommand(c, "DEL %s", lease);
  freeReplyObject(del);
  free(later);
  free(v1);
  jitk_engine_destroy(ea);
  cr_assert_eq(la.warnings, 0, "%s", la.last_warning);
  cr_assert_eq(lb.warnings, 0, "%s", lb.last_warning);

  /* Keys that cannot be had leave the remote off, never on unsigned. */
  char *open_key = key_file(keys_dir, "open", "readable by everyone, long enough", 0644),
       *short_key = key_file(keys_dir, "short", "too short", 0600);
  const char *bad[] = {open_key, short_key, "/nonexistent/jitk.key", keys_dir};
  const char *why[] = {"chmod 600", "shorter than 16 bytes", "cannot be read", "cannot be read"};
  for (int i = 0; i < 4; i++) {
    char *dir = jt_tmpdir();
    jt_log l = {0};
    jitk_engine *e = keyed_engine(dir, s.url, bad[i], &l);
    jitk_cache_remote_info info = remote_info(e);
    cr_assert(strncmp(info.state, "off:", 4) == 0 && strstr(info.state, why[i]) != NULL, "%s: %s",
              bad[i], info.state);
    cr_assert_eq(l.warnings, 1, "%s", bad[i]);
    build(e, 1);
    cr_assert_eq(jt_stats_mine(e).compiles, 1, "%s: compiled, the remote unused", bad[i]);
    jitk_engine_destroy(e);
    jt_rmdir(dir);
  }
  free(open_key);
  free(short_key);
  free(k1);
  free(k2);
  redisFree(c);
  stop_server(&s);
  jt_rmdir(a);
  jt_rmdir(keys_dir);
}

/* A FIFO named as the URL's file or the key file turns the remote off at
 * once, rather than blocking the engine's creation until some writer
 * comes. The alarm turns a hang into a failure. */
Test(remote, fifos_as_its_files_are_refused_without_waiting) {
  alarm(60);
  char *a = jt_tmpdir();
  char fifo[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", a);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  setenv("JITK_CACHE_REMOTE_FILE", fifo, 1);
  jt_log l = {0};
  jitk_engine *e = remote_engine(a, NULL, &l);
  jitk_cache_remote_info info = remote_info(e);
  cr_assert(strncmp(info.state, "off:", 4) == 0 && strstr(info.state, "not a regular file"), "%s",
            info.state);
  cr_assert_eq(l.warnings, 1);
  jitk_engine_destroy(e);
  unsetenv("JITK_CACHE_REMOTE_FILE");
  jt_log l2 = {0};
  e = keyed_engine(a, "redis://127.0.0.1:1", fifo, &l2);
  info = remote_info(e);
  cr_assert(strncmp(info.state, "off:", 4) == 0 && strstr(info.state, "not a regular file"), "%s",
            info.state);
  cr_assert_eq(l2.warnings, 1);
  build(e, 1); /* still compiles */
  jitk_engine_destroy(e);
  jt_rmdir(a);
}
