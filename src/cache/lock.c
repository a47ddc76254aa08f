/*
 * Cross-process key locks, so that a kernel being compiled by one process
 * is waited for by the others instead of compiled again.
 *
 * One lock file, one byte-range lock per key at an offset taken from the
 * key. Open-file-description locks (F_OFD_SETLK) belong to the descriptor,
 * not the process, so two engines in one process exclude each other too,
 * and the kernel drops them when a process dies: a killed compiler never
 * leaves a key locked. Threads of one engine share its descriptor; the
 * engine's in-flight list orders them (cache.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "engine.h"

/* Offsets up to 2^62: far apart for distinct keys, valid for any off_t. */
static off_t key_offset(const jk_key *key) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | key->bytes[i];
  return (off_t)(v >> 2);
}

static int set_lock(int fd, const jk_key *key, short type) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = key_offset(key);
  fl.l_len = 1;
  fl.l_pid = 0; /* required for OFD locks */
  return fcntl(fd, F_OFD_SETLK, &fl);
}

bool jk_key_lock(jitk_engine *e, const jk_key *key, int timeout_ms) {
  int fd = e->cache.lock_fd;
  if (fd < 0) return false;
  /* Polling with a growing sleep rather than F_OFD_SETLKW: a compile that
   * hangs must not hang everyone else forever. */
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long sleep_us = 200;
  for (;;) {
    if (set_lock(fd, key, F_WRLCK) == 0) return true;
    if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
      jk_log(e, JITK_LOG_DEBUG, "key lock failed: %s", strerror(errno));
      return false;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    long waited = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (waited >= timeout_ms) {
      jk_log(e, JITK_LOG_WARN,
             "waited %ld ms for another process compiling the same kernel; compiling it "
             "here too",
             waited);
      return false;
    }
    struct timespec ts = {0, sleep_us * 1000};
    nanosleep(&ts, NULL);
    if (sleep_us < 20000) sleep_us *= 2;
  }
}

void jk_key_unlock(jitk_engine *e, const jk_key *key) {
  if (e->cache.lock_fd >= 0) set_lock(e->cache.lock_fd, key, F_UNLCK);
}
