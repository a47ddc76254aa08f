/*
 * What stat says of a file that tells whether it may have changed: the
 * same device, inode, size, modification and change times (to the
 * nanosecond) as before mean the same contents, short of a writer that
 * resets the times, which cannot reset the change time. The cache's
 * remembered hashes of large files and the dependency scan's check after
 * a compile both ask it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

int jk_open_regular(const char *path, struct stat *st) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    return -2;
  }
  return fd;
}

int64_t jk_timespec_ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec; }

void jk_file_stamp_of(const struct stat *st, jk_file_stamp *out) {
  out->dev = (uint64_t)st->st_dev;
  out->ino = (uint64_t)st->st_ino;
  out->size = (int64_t)st->st_size;
  out->mtime_ns = jk_timespec_ns(st->st_mtim);
  out->ctime_ns = jk_timespec_ns(st->st_ctim);
}

bool jk_file_stamp_same(const jk_file_stamp *a, const jk_file_stamp *b) {
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
         a->ctime_ns == b->ctime_ns;
}
