/*
 * Independent tasks on several threads: the compile pool. Compiling is
 * what jitk spends seconds on, and NVRTC compiles one program on one
 * thread, so a kernel's several specializations, several kernels created
 * together and a manifest's warm-up go as fast as the machine has cores
 * only when they run side by side. The threads live for one call: they
 * cost tens of microseconds to start, against milliseconds for the
 * smallest compile, and an engine that keeps none between calls keeps no
 * threads that a fork or the engine's destruction would have to mind.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

int jk_cpu_count(void) {
  /* The CPUs this process may run on (taskset, cgroups' cpusets), which
   * is what a pool can use; the machine's count only when that is not
   * known. */
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

typedef struct jk_pool_run {
  jitk_engine *e;
  size_t count;
  jk_task_fn fn;
  void *user;
  jitk_status *statuses;
  jk_progress_fn progress;
  void *progress_user;
  pthread_mutex_t lock;
  size_t next, finished, failed;
  /* The failure of the lowest index, with its message copied out of the
   * worker's per-thread record before the worker ends. */
  size_t first_index;
  jitk_status first_status;
  char *first_message;
} jk_pool_run;

static void *pool_worker(void *arg) {
  jk_pool_run *r = arg;
  for (;;) {
    pthread_mutex_lock(&r->lock);
    size_t i = r->next < r->count ? r->next++ : r->count;
    pthread_mutex_unlock(&r->lock);
    if (i == r->count) break;
    jitk_status st = r->fn(r->user, i);
    char *msg = NULL;
    if (st != JITK_OK) msg = jk_strdup(r->e, jitk_errmsg(r->e));
    pthread_mutex_lock(&r->lock);
    if (r->statuses != NULL) r->statuses[i] = st;
    r->finished++;
    if (st != JITK_OK) {
      r->failed++;
      if (r->first_status == JITK_OK || i < r->first_index) {
        jk_free(r->e, r->first_message);
        r->first_message = msg;
        msg = NULL;
        r->first_index = i;
        r->first_status = st;
      }
    }
    /* Under the lock, so that a progress bar is drawn by one thread at a
     * time and its counts only grow. */
    if (r->progress != NULL) r->progress(r->progress_user, r->finished, r->count, r->failed);
    pthread_mutex_unlock(&r->lock);
    jk_free(r->e, msg);
  }
  return NULL;
}

jitk_status jk_parallel_run(jitk_engine *e, size_t count, int threads, jk_task_fn fn, void *user,
                            jitk_status *statuses, jk_progress_fn progress, void *progress_user) {
  jk_pool_run r;
  memset(&r, 0, sizeof r);
  r.e = e;
  r.count = count;
  r.fn = fn;
  r.user = user;
  r.statuses = statuses;
  r.progress = progress;
  r.progress_user = progress_user;
  pthread_mutex_init(&r.lock, NULL);
  size_t want = threads < 1 ? 1 : (size_t)threads;
  if (want > count) want = count;
  /* The calling thread is one of the workers; the others are started
   * here, and a thread that cannot be started leaves its share to the
   * rest rather than failing the call. */
  pthread_t *tids = want > 1 ? jk_calloc(e, want - 1, sizeof *tids) : NULL;
  size_t started = 0;
  if (tids != NULL) {
    for (size_t t = 0; t + 1 < want; t++) {
      if (pthread_create(&tids[t], NULL, pool_worker, &r) != 0) break;
      started++;
    }
  }
  if (want > 1 && started + 1 < want)
    jk_log(e, JITK_LOG_DEBUG, "compile pool: %zu of %zu threads started", started + 1, want);
  pool_worker(&r);
  for (size_t t = 0; t < started; t++) pthread_join(tids[t], NULL);
  jk_free(e, tids);
  pthread_mutex_destroy(&r.lock);
  if (r.first_status == JITK_OK) return JITK_OK;
  jitk_status st;
  if (r.failed == 1)
    st = jk_fail(e, r.first_status, "task %zu of %zu: %s", r.first_index, count,
                 r.first_message ? r.first_message : "out of memory");
  else
    st = jk_fail(e, r.first_status, "%zu of %zu tasks failed; the first, task %zu: %s", r.failed,
                 count, r.first_index, r.first_message ? r.first_message : "out of memory");
  jk_free(e, r.first_message);
  return st;
}
