/*
 * Where the cache lives and whether that place can be trusted. A cache
 * holds machine code that will be run, so a folder another user can write
 * to (or swap through a symlink) would let them run code as this user.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/core.h"

char *jk_cache_default_dir(jitk_engine *e) {
  jk_buf b;
  jk_buf_init(&b, e);
  const char *env = getenv("JITK_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (env != NULL && *env != '\0')
    jk_buf_puts(&b, env);
  else if (xdg != NULL && xdg[0] == '/')
    jk_buf_printf(&b, "%s/jitk", xdg);
  else if (home != NULL && *home != '\0')
    jk_buf_printf(&b, "%s/.cache/jitk", home);
  else
    return NULL;
  return jk_buf_take(&b);
}

/* mkdir -p for the parents (default modes), `mode` for the last. */
static int make_dirs(const char *path, mode_t mode) {
  char tmp[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(tmp, path, n + 1);
  while (n > 1 && tmp[n - 1] == '/') tmp[--n] = '\0';
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, mode) != 0 && errno != EEXIST) return -1;
  return 0;
}

static jitk_status check_owner_and_mode(jitk_engine *e, const char *path, const struct stat *st,
                                        bool shared, const char *what) {
  if (shared) return JITK_OK; /* asked for explicitly: other owners, links, group */
  if (S_ISLNK(st->st_mode))
    return jk_fail(e, JITK_ERR_CACHE,
                   "the cache %s %s is a symbolic link; refusing it (a link can point "
                   "anywhere). Use the real path, or set JITK_CACHE_SHARED=1 for a shared "
                   "cache",
                   what, path);
  if (st->st_uid != geteuid())
    return jk_fail(e, JITK_ERR_CACHE,
                   "the cache %s %s belongs to user %u, not to this user (%u); refusing it. "
                   "Set JITK_CACHE_DIR to a folder of your own, or JITK_CACHE_SHARED=1 for a "
                   "shared cache",
                   what, path, (unsigned)st->st_uid, (unsigned)geteuid());
  if (st->st_mode & (S_IWGRP | S_IWOTH))
    return jk_fail(e, JITK_ERR_CACHE,
                   "the cache %s %s is writable by %s (mode %03o); refusing it, since others "
                   "could plant code in it. Run chmod go-w on it, or set JITK_CACHE_SHARED=1 "
                   "for a shared cache",
                   what, path, st->st_mode & S_IWOTH ? "everyone" : "its group",
                   (unsigned)(st->st_mode & 0777));
  return JITK_OK;
}

jitk_status jk_cache_prepare_dir(jitk_engine *e, const char *dir, bool shared) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    if (errno != ENOENT)
      return jk_fail(e, JITK_ERR_CACHE, "cannot use the cache folder %s: %s", dir,
                     strerror(errno));
    if (make_dirs(dir, shared ? 0770 : 0700) != 0)
      return jk_fail(e, JITK_ERR_CACHE, "cannot create the cache folder %s: %s", dir,
                     strerror(errno));
    if (lstat(dir, &st) != 0)
      return jk_fail(e, JITK_ERR_CACHE, "cannot use the cache folder %s: %s", dir,
                     strerror(errno));
  }
  if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
    return jk_fail(e, JITK_ERR_CACHE, "the cache folder %s is not a folder", dir);
  return check_owner_and_mode(e, dir, &st, shared, "folder");
}

jitk_status jk_cache_check_file(jitk_engine *e, const char *path, bool shared) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return JITK_OK; /* made next, with our mode */
    return jk_fail(e, JITK_ERR_CACHE, "cannot use the cache file %s: %s", path,
                   strerror(errno));
  }
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    return jk_fail(e, JITK_ERR_CACHE, "the cache file %s is not a regular file", path);
  return check_owner_and_mode(e, path, &st, shared, "file");
}

bool jk_is_network_fs_type(long type, const char **name) {
  static const struct {
    unsigned long magic;
    const char *name;
  } fs[] = {
      {0x6969, "NFS"},           {0x517B, "SMB"},          {0xFF534D42, "CIFS"},
      {0xFE534D42, "SMB2"},      {0x01021997, "9P"},       {0x00C36400, "Ceph"},
      {0x0BD00BD0, "Lustre"},    {0x47504653, "GPFS"},     {0x5346414F, "AFS"},
      {0x65735546, "FUSE"},      {0x013111A8, "IBRIX"},    {0x19830326, "FhGFS/BeeGFS"},
      {0x7461636f, "OCFS2"},     {0x564c, "NCP"},          {0x73757245, "Coda"},
  };
  for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
    if ((unsigned long)(unsigned int)type == fs[i].magic) {
      if (name) *name = fs[i].name;
      return true;
    }
  return false;
}

bool jk_is_network_fs(const char *path, const char **name) {
  const char *forced = getenv("JITK_CACHE_ASSUME_NETWORK_FS");
  if (forced != NULL && strcmp(forced, "1") == 0) {
    /* For tests: no network filesystem can be mounted in CI. */
    if (name) *name = "network (JITK_CACHE_ASSUME_NETWORK_FS=1)";
    return true;
  }
  struct statfs s;
  if (statfs(path, &s) != 0) return false;
  return jk_is_network_fs_type((long)s.f_type, name);
}
