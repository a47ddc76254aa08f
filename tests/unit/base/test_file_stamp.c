/* File stamps: the same file unchanged gives the same stamp; a rewrite
 * with the same size and modification time (put back with utimensat, as
 * an editor or `touch -r` may) still changes it, through the change time;
 * another file with the same bytes is another inode. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "common.h"

static jk_file_stamp stamp_at(const char *path) {
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "%s", path);
  jk_file_stamp s;
  jk_file_stamp_of(&st, &s);
  return s;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

Test(base_file_stamp, changes_whenever_the_contents_may_have) {
  char dir[] = "/tmp/jitk-stamp-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/a.h", dir);
  snprintf(b, sizeof b, "%s/b.h", dir);
  write_file(a, "int x;\n");
  jk_file_stamp s0 = stamp_at(a), s1 = stamp_at(a);
  cr_assert(jk_file_stamp_same(&s0, &s1));
  /* Rewritten in place, same size, its modification time put back. */
  struct stat st;
  cr_assert_eq(stat(a, &st), 0);
  struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, NULL);
  write_file(a, "int y;\n");
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  cr_assert_eq(utimensat(AT_FDCWD, a, times, 0), 0);
  jk_file_stamp s2 = stamp_at(a);
  cr_assert_eq(s2.size, s0.size);
  cr_assert_eq(s2.mtime_ns, s0.mtime_ns);
  cr_assert_not(jk_file_stamp_same(&s0, &s2), "the change time moved");
  /* The same bytes in another file. */
  write_file(b, "int y;\n");
  jk_file_stamp sb = stamp_at(b);
  cr_assert_not(jk_file_stamp_same(&s2, &sb));
  unlink(a);
  unlink(b);
  rmdir(dir);
}
