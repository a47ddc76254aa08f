/*
 * jitk-bench remote: the cache's remote tier on Redis, on this machine's
 * loopback (a redis-server started here, no persistence).
 *
 *  - compile once across a cluster: 2 "nodes" (cache folders) of 8
 *    processes each, every process building 6 of 12 kernels, the sets
 *    overlapping, all started together: the compiles of all 16 processes
 *    together, against the 12 distinct kernels;
 *  - a remote hit in a fresh engine whose local cache lacks the kernel:
 *    the jitk_module_create that asks Redis, checks the value and stores
 *    it locally (median over 20 kernels, each in a new engine), beside a
 *    local disk hit and a compile of the same kernels.
 * Without a GPU the engines compile only (the figures are the cache's, not
 * the module loads').
 *
 *   jitk-bench remote [--json FILE]
 */
#include <jitk/jitk.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

enum { NODES = 2, PER_NODE = 8, KINDS = 12, EACH = 6, HITS = 20 };

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(s, (struct sockaddr *)&a, &n) != 0) {
    perror("jitk-bench remote: a free port");
    exit(1);
  }
  close(s);
  return ntohs(a.sin_port);
}

/* A compile-only engine (or a device one when there is a GPU) on `dir`
 * with the remote `url`. */
static jitk_engine *engine(const char *dir, const char *url) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.cache_dir = dir;
  cfg.cache_mode = JITK_CACHE_ON;
  cfg.cache_remote = url;
  jitk_engine *e = NULL;
  if (jitk_engine_create(&cfg, &e) == JITK_OK) return e;
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  if (jitk_engine_create(&cfg, &e) != JITK_OK) {
    fprintf(stderr, "jitk-bench remote: %s\n", jitk_errmsg(NULL));
    exit(1);
  }
  return e;
}

static void build(jitk_engine *e, int n, int salt) {
  char src[256];
  snprintf(src, sizeof src,
           "extern \"C\" __global__ void r%d_%d(float *x, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) x[i] = x[i] * %d.0f + %d.0f;\n"
           "}\n",
           salt, n, n, salt);
  jitk_module *m = NULL;
  BENCH_CHECK(e, jitk_module_create(e, src, NULL, &m));
  jitk_module_destroy(m);
}

static char *tmpdir(void) {
  char *d = strdup("/tmp/jitk-bench-remote-XXXXXX");
  if (d == NULL || mkdtemp(d) == NULL) {
    perror("jitk-bench remote: mkdtemp");
    exit(1);
  }
  return d;
}

static void rmdir_all(char *d) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  if (system(cmd) != 0) fprintf(stderr, "jitk-bench remote: could not remove %s\n", d);
  free(d);
}

static double median_of(double *v, int n) { return bench_median(v, (size_t)n); }

int bench_remote(int argc, char **argv) {
  const char *json = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else {
      fprintf(stderr, "usage: jitk-bench remote [--json FILE]\n");
      return 2;
    }
  }
  if (system("command -v redis-server >/dev/null 2>&1") != 0) {
    printf("jitk-bench remote: redis-server is not installed; nothing measured\n");
    return 77;
  }
  int port = free_port();
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  pid_t server = fork();
  if (server == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (freopen("/dev/null", "w", stdout) == NULL) _exit(127);
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", (char *)NULL);
    _exit(127);
  }
  /* Until it answers: an engine's ping, its warnings silenced. */
  setenv("JITK_LOG", "off", 1);
  jitk_engine *probe = engine(NULL, url);
  unsetenv("JITK_LOG");
  int up = 0;
  for (int i = 0; i < 200 && !up; i++) {
    up = jitk_cache_remote_ping(probe, NULL) == JITK_OK;
    if (!up) usleep(20000);
  }
  jitk_engine_destroy(probe);
  if (!up) {
    fprintf(stderr, "jitk-bench remote: redis-server did not answer on port %d\n", port);
    kill(server, SIGKILL);
    return 1;
  }
  int salt = (int)(time(NULL) % 100000);

  /* 1. Two nodes of eight processes. */
  char *node_dir[NODES];
  for (int n = 0; n < NODES; n++) node_dir[n] = tmpdir();
  int pipes[NODES * PER_NODE][2];
  pid_t kids[NODES * PER_NODE];
  double t0 = bench_now_us();
  for (int p = 0; p < NODES * PER_NODE; p++) {
    if (pipe(pipes[p]) != 0) exit(1);
    kids[p] = fork();
    if (kids[p] == 0) {
      jitk_engine *e = engine(node_dir[p / PER_NODE], url);
      for (int k = 0; k < EACH; k++) build(e, (p + k) % KINDS, salt);
      jitk_cache_stats s;
      jitk_cache_get_stats(e, &s, NULL);
      unsigned long long c = s.compiles;
      jitk_engine_destroy(e);
      _exit(write(pipes[p][1], &c, sizeof c) == sizeof c ? 0 : 1);
    }
    close(pipes[p][1]);
  }
  unsigned long long compiles = 0;
  for (int p = 0; p < NODES * PER_NODE; p++) {
    unsigned long long c = 0;
    if (read(pipes[p][0], &c, sizeof c) != (ssize_t)sizeof c)
      fprintf(stderr, "jitk-bench remote: process %d reported nothing\n", p);
    close(pipes[p][0]);
    waitpid(kids[p], NULL, 0);
    compiles += c;
  }
  double cluster_ms = (bench_now_us() - t0) / 1e3;
  for (int n = 0; n < NODES; n++) rmdir_all(node_dir[n]);

  /* 2. A remote hit in a fresh engine whose local cache lacks the kernel,
   * against a compile and a local disk hit of the same kernels. The local
   * cache folder is one the machine has used before (its remembered
   * hashes of the NVRTC libraries are there, as on any machine that ran
   * jitk once; a first run ever hashes them, about 7 ms here). */
  double compile[HITS], remote_hit[HITS], disk_hit[HITS];
  char *b = tmpdir();
  jitk_engine *warm = engine(b, NULL);
  build(warm, 999, salt);
  jitk_engine_destroy(warm);
  for (int k = 0; k < HITS; k++) {
    char *a = tmpdir();
    jitk_engine *ea = engine(a, url);
    double c0 = bench_now_us();
    build(ea, 1000 + k, salt);
    compile[k] = (bench_now_us() - c0) / 1e3;
    jitk_engine_destroy(ea);
    jitk_engine *eb = engine(b, url);
    double r0 = bench_now_us();
    build(eb, 1000 + k, salt);
    remote_hit[k] = (bench_now_us() - r0) / 1e3;
    jitk_cache_remote_info i;
    jitk_cache_remote_info_init(&i);
    jitk_cache_remote_get_info(eb, &i, NULL);
    if (i.hits != 1) fprintf(stderr, "jitk-bench remote: kernel %d was not a remote hit\n", k);
    jitk_engine_destroy(eb);
    jitk_engine *ec = engine(b, NULL);
    double d0 = bench_now_us();
    build(ec, 1000 + k, salt);
    disk_hit[k] = (bench_now_us() - d0) / 1e3;
    jitk_engine_destroy(ec);
    rmdir_all(a);
  }
  rmdir_all(b);
  kill(server, SIGKILL);
  waitpid(server, NULL, 0);

  char n1[96], n2[64];
  snprintf(n1, sizeof n1, "%llu compiles for %d distinct kernels in %.0f ms", compiles, KINDS,
           cluster_ms);
  double rh = median_of(remote_hit, HITS), dh = median_of(disk_hit, HITS),
         cm = median_of(compile, HITS);
  snprintf(n2, sizeof n2, "%.2fx a local disk hit", rh / dh);
  bench_row rows[] = {
      {"2 nodes x 8 processes, 6 of 12 kernels each: compiles", (double)compiles, "compiles", n1},
      {"remote hit, fresh engine, kernel not in the local cache", rh, "ms", n2},
      {"local disk hit, fresh engine", dh, "ms", ""},
      {"compile (a miss in every tier)", cm, "ms", ""},
  };
  bench_print("the cache's remote tier on loopback Redis", rows, sizeof rows / sizeof rows[0],
              json);
  return compiles == KINDS ? 0 : 1;
}
