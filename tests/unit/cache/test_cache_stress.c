/* Many processes at once, processes killed at random, and the size cap. */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "cache/cache.h"
#include "cache_common.h"

enum { STAMPEDE_PROCS = 8, STAMPEDE_KERNELS = 50, STAMPEDE_ROUNDS = 5 };

/* One stampede process: every kernel, in an order of its own. Exit 0 when
 * each came back, the log stayed free of warnings, and no SQLITE_BUSY
 * reached the surface (it would be a disk error). */
static int stampede_child(const char *dir, int who) {
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  int order[STAMPEDE_KERNELS];
  for (int i = 0; i < STAMPEDE_KERNELS; i++) order[i] = i;
  uint64_t seed = 0x1234 + (uint64_t)who;
  for (int i = STAMPEDE_KERNELS - 1; i > 0; i--) {
    int j = (int)(jt_next(&seed) % (uint64_t)(i + 1));
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int bad = 0;
  for (int i = 0; i < STAMPEDE_KERNELS; i++) {
    char src[512];
    jt_kernel_source(order[i], src, sizeof src);
    jitk_module *m = NULL;
    if (jitk_module_create(e, src, NULL, &m) != JITK_OK) {
      fprintf(stderr, "child %d: kernel %d: %s\n", who, order[i], jitk_errmsg(e));
      bad++;
    }
    jitk_module_destroy(m);
  }
  if (jt_stats_mine(e).disk_errors != 0 || log.warnings != 0) {
    fprintf(stderr, "child %d: %d warnings, last: %s\n", who, log.warnings, log.last_warning);
    bad++;
  }
  jitk_engine_destroy(e);
  return bad ? 1 : 0;
}

Test(cache_stress, stampede, .timeout = 280) {
  for (int round = 0; round < STAMPEDE_ROUNDS; round++) {
    char *dir = jt_tmpdir();
    pid_t pids[STAMPEDE_PROCS];
    for (int p = 0; p < STAMPEDE_PROCS; p++) {
      pids[p] = fork();
      cr_assert(pids[p] >= 0);
      if (pids[p] == 0) _exit(stampede_child(dir, p));
    }
    for (int p = 0; p < STAMPEDE_PROCS; p++) {
      int status = 0;
      waitpid(pids[p], &status, 0);
      cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d: process %d failed", round,
                p);
    }
    jitk_engine *e = jt_cache_engine(dir);
    jitk_cache_stats all = jt_stats_all(e);
    cr_assert_eq(all.entries, STAMPEDE_KERNELS);
    cr_assert_eq(all.compiles, STAMPEDE_KERNELS,
                 "round %d: %llu compiles for %d kernels: a key was compiled twice", round,
                 (unsigned long long)all.compiles, STAMPEDE_KERNELS);
    cr_assert_eq(all.disk_hits + all.compiles, (uint64_t)STAMPEDE_PROCS * STAMPEDE_KERNELS);
    jitk_engine_destroy(e);
    char ic[64];
    jt_integrity(dir, ic, sizeof ic);
    cr_assert_str_eq(ic, "ok", "round %d", round);
    jt_rmdir(dir);
  }
}

/* --- kills --- */

typedef struct kill_ctx {
  int pipe_fd;
  uint64_t seed;
} kill_ctx;

/* Inside a write transaction, sometimes tell the parent and linger, so
 * that some kills land there. */
static void kill_hook(void *user, jk_cache_event ev) {
  kill_ctx *k = user;
  if (ev != JK_EVENT_IN_WRITE_TRANSACTION || jt_next(&k->seed) % 3 != 0) return;
  char b = 'T';
  if (write(k->pipe_fd, &b, 1) != 1) return;
  struct timespec ts = {0, 3000000};
  nanosleep(&ts, NULL);
}

/* Writes entries as fast as it can: real cubins under fresh keys, with a
 * small cap so that evictions and stamp updates happen too. */
static void kill_child(const char *dir, int fd, uint64_t seed, void **images, size_t *sizes,
                       int nimages) {
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 256 * 1024, 0, 0, NULL);
  kill_ctx k = {fd, seed};
  e->cache.test_hook = kill_hook;
  e->cache.test_user = &k;
  for (int i = 0;; i++) {
    jk_material m;
    jk_material_init(&m, e);
    char label[64];
    snprintf(label, sizeof label, "%llu/%d", (unsigned long long)seed, i);
    jk_material_add_str(&m, "kill-test", label);
    jk_key key;
    jk_hash128(m.data, m.len, key.bytes);
    jk_entry x;
    memset(&x, 0, sizeof x);
    int which = (int)(jt_next(&seed) % (uint64_t)nimages);
    x.image = images[which];
    x.image_size = sizes[which];
    x.kind = JITK_IMAGE_CUBIN;
    x.log = (char *)"";
    pthread_mutex_lock(&e->cache.disk_lock);
    jk_store_insert(e, &key, &key, &m, &x, label);
    jk_store_note_hit(e, &key);
    if (i % 7 == 0) jk_store_flush(e);
    pthread_mutex_unlock(&e->cache.disk_lock);
    jk_material_free(&m);
  }
}

/* Processes that open a new cache folder at the same moment all switch the
 * new file to WAL at once. SQLite answers some of them SQLITE_BUSY without
 * calling the busy handler (waiting could deadlock); the store retries
 * those, so no process may end up without its disk cache. */
/* No .timeout: Criterion 2.4 leaks the timer of a timed test that ends
 * while another test still runs (LeakSanitizer reports it in the runner),
 * and this one takes well under a second; ctest's limit still applies. */
Test(cache_stress, simultaneous_first_open) {
  enum { PROCS = 8, ROUNDS = 40 };
  for (int round = 0; round < ROUNDS; round++) {
    char *dir = jt_tmpdir();
    int gate[2];
    cr_assert_eq(pipe(gate), 0);
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
      pids[p] = fork();
      cr_assert(pids[p] >= 0);
      if (pids[p] == 0) {
        char go;
        close(gate[1]);
        if (read(gate[0], &go, 1) != 1) _exit(2);
        jt_log log = {0, 0, ""};
        jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
        int bad = jt_stats_mine(e).disk_errors != 0 || log.warnings != 0;
        if (bad) fprintf(stderr, "process %d: %s\n", p, log.last_warning);
        jitk_engine_destroy(e);
        _exit(bad);
      }
    }
    close(gate[0]);
    const char go[PROCS] = {0};
    cr_assert_eq(write(gate[1], go, PROCS), PROCS);
    close(gate[1]);
    for (int p = 0; p < PROCS; p++) {
      int status = 0;
      waitpid(pids[p], &status, 0);
      cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "round %d: process %d lost its disk cache", round, p);
    }
    jt_rmdir(dir);
  }
}

Test(cache_stress, killed_at_random, .timeout = 280) {
  /* Real cubins to store. */
  enum { IMAGES = 4, KILLS = 240 };
  void *images[IMAGES];
  size_t sizes[IMAGES];
  jitk_engine *ce = jt_compile_engine("sm_90");
  for (int i = 0; i < IMAGES; i++) {
    jitk_module *m = jt_kernel(ce, i);
    images[i] = jt_image_copy(m, &sizes[i]);
    jitk_module_destroy(m);
  }
  jitk_engine_destroy(ce);

  char *dir = jt_tmpdir();
  uint64_t seed = 0xC0FFEE;
  int inside = 0;
  for (int kill_no = 0; kill_no < KILLS; kill_no++) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      kill_child(dir, fds[1], seed + (uint64_t)kill_no, images, sizes, IMAGES);
      _exit(0);
    }
    close(fds[1]);
    /* Either at a random moment, or just after the child says it is inside
     * a write transaction. */
    int mode = (int)(jt_next(&seed) % 3);
    if (mode == 0) {
      char b;
      fcntl(fds[0], F_SETFL, O_NONBLOCK);
      struct timespec ts = {0, 200000};
      for (int w = 0; w < 2000; w++) {
        if (read(fds[0], &b, 1) == 1) {
          inside++;
          break;
        }
        nanosleep(&ts, NULL);
      }
    } else {
      struct timespec ts = {0, (long)(jt_next(&seed) % 20000000)};
      nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    close(fds[0]);
  }
  cr_assert(inside >= 30, "only %d kills landed inside a write transaction", inside);

  char ic[64];
  jt_integrity(dir, ic, sizeof ic);
  cr_assert_str_eq(ic, "ok");
  /* Every entry is whole: its checksum holds and its image is one of ours. */
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 256 * 1024, 0, 0, NULL);
  size_t checked = 0, removed = 1;
  JT_OK(e, jitk_cache_verify(e, &checked, &removed));
  cr_assert(checked > 0, "the children stored something");
  cr_assert_eq(removed, 0, "%zu of %zu entries were damaged", removed, checked);
  sqlite3_stmt *q = NULL;
  pthread_mutex_lock(&e->cache.disk_lock);
  cr_assert_eq(sqlite3_prepare_v2(e->cache.db, "SELECT image FROM entries", -1, &q, NULL),
               SQLITE_OK);
  while (sqlite3_step(q) == SQLITE_ROW) {
    const void *img = sqlite3_column_blob(q, 0);
    size_t n = (size_t)sqlite3_column_bytes(q, 0);
    bool known = false;
    for (int i = 0; i < IMAGES; i++) known |= n == sizes[i] && memcmp(img, images[i], n) == 0;
    cr_assert(known, "an entry holds an image nobody stored");
  }
  sqlite3_finalize(q);
  pthread_mutex_unlock(&e->cache.disk_lock);
  cr_log_info("%d kills, %d inside a write transaction, %zu entries left, all sound", KILLS, inside,
              checked);
  jitk_engine_destroy(e);
  for (int i = 0; i < IMAGES; i++) free(images[i]);
  jt_rmdir(dir);
}

/* A kernel whose cubin is about 10 KiB: an unrolled chain of 640
 * multiply-adds with constants of its own. */
static jitk_module *big_kernel(jitk_engine *e, int i) {
  char src[1024];
  snprintf(src, sizeof src,
           "extern \"C\" __global__ void big%d(float *x, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i >= n) return;\n"
           "  float v = x[i];\n"
           "#pragma unroll\n"
           "  for (int j = 0; j < 640; j++) v = v * 1.0001f + (float)(j ^ %d);\n"
           "  x[i] = v;\n"
           "}\n",
           i, i);
  jitk_module *m = NULL;
  jitk_status st = jitk_module_create(e, src, NULL, &m);
  cr_assert_eq(st, JITK_OK, "kernel %d: %s", i, jitk_errmsg(e));
  return m;
}

Test(cache_stress, size_cap_holds, .timeout = 280) {
  enum { KERNELS = 200 };
  const int64_t cap = 1 << 20;
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, cap, 16, 0, NULL);
  void *first = NULL;
  size_t first_size = 0;
  for (int i = 0; i < KERNELS; i++) {
    jitk_module *m = big_kernel(e, i);
    if (i == 0) {
      first = jt_image_copy(m, &first_size);
      cr_assert(first_size > 10000, "a big cubin: %zu bytes", first_size);
    }
    jitk_module_destroy(m);
    if (i % 20 == 19) {
      jitk_cache_stats all = jt_stats_all(e);
      cr_assert(all.bytes <= (uint64_t)cap, "after %d kernels the store holds %llu bytes", i + 1,
                (unsigned long long)all.bytes);
    }
  }
  jitk_cache_stats all = jt_stats_all(e);
  cr_assert(all.entries < KERNELS && all.entries > 10, "%llu entries",
            (unsigned long long)all.entries);
  cr_assert(all.evictions >= KERNELS - all.entries);
  jitk_engine_destroy(e);

  /* Kernel 0 was evicted long ago: a new engine recompiles it, and gets
   * the same cubin. */
  e = jt_cache_engine_ex(dir, JITK_CACHE_ON, cap, 16, 0, NULL);
  jitk_module *m = big_kernel(e, 0);
  cr_assert_eq(jt_stats_mine(e).compiles, 1);
  size_t size;
  void *img = jt_image_copy(m, &size);
  cr_assert(size == first_size && memcmp(img, first, size) == 0);
  jitk_module_destroy(m);
  cr_assert(jt_stats_all(e).bytes <= (uint64_t)cap);
  jitk_engine_destroy(e);
  free(img);
  free(first);
  jt_rmdir(dir);
}
