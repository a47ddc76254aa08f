/*
 * Where the cache lives and whether that place can be trusted.
 *
 * A cache holds machine code that will run, so whoever can write to it
 * runs code as every user of it. The rule (docs/GUIDE.md, "Who can write
 * to a cache"): a process loads only what it compiled itself or what comes
 * from a tier whose every writer the user trusts.
 *  - The private tier: a folder of the user's, 0700, files 0600. Nobody
 *    else may own or be able to write the folder, its files (the
 *    database, its -wal, -shm and -journal, the lock file), or any folder
 *    on the way to it, where they could swap the cache for their own.
 *  - A group tier (JITK_CACHE_SHARED=1): every member of the folder's
 *    group writes to it, and the user declares that they trust them all.
 *    Nobody outside the group may write or own the folder or its files,
 *    and the folder is setgid so that every file in it belongs to the
 *    group.
 *  - A shared tier (JITK_CACHE_SHARED_DIR): read-only to its users,
 *    written by one trusted account. Everything on its real path belongs
 *    to root, the user, or that account, and nobody else can write it.
 * The checks run at every open, before SQLite touches a file; files are
 * created with their final mode whatever the umask, which is never
 * changed (it belongs to the whole process).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cache/cache.h"
#include "base/base.h"

/* SQLite's Unix VFS refuses longer paths (its mxPathname is 512), and it
 * forms the -journal name from the database's, the longest of the four. */
#define JK_SQLITE_MAX_PATH 512

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

static const char *tier_name(jk_tier_kind kind) {
  switch (kind) {
    case JK_TIER_GROUP: return "group cache";
    case JK_TIER_SHARED: return "shared cache";
    default: return "cache";
  }
}

/* mkdir -p for the parents of a folder (they get the default mode, as
 * mkdir -p gives them). */
static int make_parents(const char *path) {
  char tmp[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(tmp, path, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

bool jk_trust_uid(const jk_trust *t, uid_t uid) {
  return uid == 0 || uid == geteuid() ||
         (t->kind == JK_TIER_SHARED && t->has_owner && uid == t->owner);
}

static bool in_my_groups(gid_t g) {
  if (g == getegid()) return true;
  gid_t groups[256];
  int n = getgroups(256, groups);
  for (int i = 0; i < n; i++)
    if (groups[i] == g) return true;
  return false;
}

/* Whether user `uid` may be one of a group cache's writers: root, this
 * user, or a member of group `g` (its primary group, or listed in the
 * group's entry). A user outside the group who owns the folder or a file
 * of it (one who made it in a setgid parent of that group, or who has
 * left the group) could write code into it. A user the user database does
 * not know (or cannot be asked about) is let be: containers run users of
 * bare numeric ids whose groups are given to the process alone, so their
 * membership cannot be told, and refusing them would refuse every group
 * cache there. */
static bool group_writer(jitk_engine *e, uid_t uid, gid_t g) {
  if (uid == 0 || uid == geteuid()) return true;
  bool member = false, known = false;
  /* Groups of many members need more than the usual 16 KiB. */
  for (size_t size = 16384; size <= ((size_t)1 << 24) && !member; size *= 4) {
    char *buf = jk_malloc(e, size);
    if (buf == NULL) return false;
    struct passwd pw, *who = NULL;
    int r = getpwuid_r(uid, &pw, buf, size, &who);
    known = r == ERANGE || (r == 0 && who != NULL);
    if (r == 0 && who != NULL && who->pw_gid == g) member = true;
    char *name = r == 0 && who != NULL ? jk_strdup(e, who->pw_name) : NULL;
    struct group gr, *grp = NULL;
    int q = name != NULL && !member ? getgrgid_r(g, &gr, buf, size, &grp) : 0;
    for (size_t i = 0; q == 0 && grp != NULL && grp->gr_mem[i] != NULL && !member; i++)
      member = strcmp(grp->gr_mem[i], name) == 0;
    jk_free(e, name);
    jk_free(e, buf);
    if (r != ERANGE && q != ERANGE) break;
  }
  return member || !known;
}

/* One folder on the way to a cache: owned by a trusted user, and
 * writable by nobody else unless sticky (as /tmp is: others may add
 * entries there but not rename or remove ours). */
static jitk_status check_ancestor(jitk_engine *e, const char *component, const jk_trust *t,
                                  const char *dir) {
  struct stat st;
  if (lstat(component, &st) != 0)
    return jk_fail(e, JITK_ERR_CACHE, "cannot use the %s %s: %s: %s", tier_name(t->kind), dir,
                   component, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return jk_fail(e, JITK_ERR_CACHE, "cannot use the %s folder %s: %s is not a folder",
                   tier_name(t->kind), dir, component);
  if (!jk_trust_uid(t, st.st_uid))
    return jk_fail(e, JITK_ERR_CACHE,
                   "refusing the %s %s: the folder %s on its path belongs to user %u, who could "
                   "replace the cache with one of their own. Set JITK_CACHE_DIR to a folder whose "
                   "every parent belongs to you or to root",
                   tier_name(t->kind), dir, component, (unsigned)st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return jk_fail(e, JITK_ERR_CACHE,
                   "refusing the %s %s: the folder %s on its path is writable by %s (mode %03o), "
                   "who could replace the cache with one of their own. Set JITK_CACHE_DIR to a "
                   "folder whose every parent only you or root can write",
                   tier_name(t->kind), dir, component,
                   st.st_mode & S_IWOTH ? "everyone" : "its group", (unsigned)(st.st_mode & 0777));
  return JITK_OK;
}

/* Every folder from / down to `real`, a path without links. */
static jitk_status check_ancestors(jitk_engine *e, const char *real, const jk_trust *t,
                                   const char *dir) {
  char p[PATH_MAX];
  size_t n = strlen(real);
  if (n >= sizeof p) return jk_fail(e, JITK_ERR_CACHE, "the cache folder %s is too long", dir);
  memcpy(p, real, n + 1);
  jitk_status st = check_ancestor(e, "/", t, dir);
  for (size_t i = 2; i <= n && st == JITK_OK; i++) {
    if (i < n && p[i] != '/') continue;
    char saved = p[i];
    p[i] = '\0';
    st = check_ancestor(e, p, t, dir);
    p[i] = saved;
  }
  return st;
}

/* The owner and mode rules of a tier, for its folder (is_dir) or a file. */
static jitk_status check_entry(jitk_engine *e, const char *path, const struct stat *st,
                               const jk_trust *t, bool is_dir) {
  const char *what = is_dir ? "folder" : "file";
  const char *tier = tier_name(t->kind);
  if (S_ISLNK(st->st_mode))
    return jk_fail(e, JITK_ERR_CACHE,
                   "refusing the %s %s %s: it is a symbolic link, which can point anywhere; "
                   "use the real path",
                   tier, what, path);
  if (is_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
    return jk_fail(e, JITK_ERR_CACHE, "the %s %s %s is not a %s", tier, what, path,
                   is_dir ? "folder" : "regular file");
  if (!is_dir && st->st_nlink > 1)
    return jk_fail(e, JITK_ERR_CACHE,
                   "refusing the %s file %s: it has %lu hard links, so it may be changed "
                   "through a path outside the cache folder",
                   tier, path, (unsigned long)st->st_nlink);
  switch (t->kind) {
    case JK_TIER_PRIVATE:
      if (st->st_uid != geteuid())
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the cache %s %s: it belongs to user %u, not to this user (%u). "
                       "Set JITK_CACHE_DIR to a folder of your own; a cache for a group is set "
                       "up with JITK_CACHE_SHARED=1",
                       what, path, (unsigned)st->st_uid, (unsigned)geteuid());
      if (st->st_mode & (S_IWGRP | S_IWOTH))
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the cache %s %s: it is writable by %s (mode %03o), who could "
                       "plant code in it. Run chmod go-w on it, or set JITK_CACHE_SHARED=1 if "
                       "every member of its group is to write to it",
                       what, path, st->st_mode & S_IWOTH ? "everyone" : "its group",
                       (unsigned)(st->st_mode & 0777));
      return JITK_OK;
    case JK_TIER_GROUP:
      if (st->st_mode & S_IWOTH)
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the group cache %s %s: it is writable by everyone (mode %03o), "
                       "not only by its group; run chmod o-w on it",
                       what, path, (unsigned)(st->st_mode & 0777));
      if (is_dir && !in_my_groups(st->st_gid))
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the group cache folder %s: its group (%u) is not one of this "
                       "user's groups; set JITK_CACHE_DIR to a folder of your own",
                       path, (unsigned)st->st_gid);
      if (!is_dir && st->st_gid != t->group)
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the group cache file %s: it belongs to group %u, not to the "
                       "folder's group %u, whose members alone are trusted to write",
                       path, (unsigned)st->st_gid, (unsigned)t->group);
      if (!group_writer(e, st->st_uid, is_dir ? st->st_gid : t->group))
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the group cache %s %s: it belongs to user %u, who is not a "
                       "member of its group %u, whose members alone are trusted to write; set "
                       "JITK_CACHE_DIR to a folder of your group's",
                       what, path, (unsigned)st->st_uid,
                       (unsigned)(is_dir ? st->st_gid : t->group));
      return JITK_OK;
    case JK_TIER_SHARED:
      if (!jk_trust_uid(t, st->st_uid))
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the shared cache %s %s: it belongs to user %u, whom nothing "
                       "declares trusted. Set JITK_CACHE_SHARED_OWNER to the account that "
                       "publishes it, if you trust it",
                       what, path, (unsigned)st->st_uid);
      if (st->st_mode & (S_IWGRP | S_IWOTH))
        return jk_fail(e, JITK_ERR_CACHE,
                       "refusing the shared cache %s %s: it is writable by %s (mode %03o), not "
                       "only by its owner",
                       what, path, st->st_mode & S_IWOTH ? "everyone" : "its group",
                       (unsigned)(st->st_mode & 0777));
      return JITK_OK;
  }
  return JITK_OK;
}

jitk_status jk_cache_prepare_dir(jitk_engine *e, const char *dir, jk_trust *t, bool create,
                                 char **real_out) {
  *real_out = NULL;
  char path[PATH_MAX];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path)
    return jk_fail(e, JITK_ERR_CACHE, "cannot use the %s folder \"%s\": %s", tier_name(t->kind),
                   dir, n ? "the path is too long" : "the path is empty");
  memcpy(path, dir, n + 1);
  /* "dir/" would make lstat follow a link named dir. */
  while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
  char *slash = strrchr(path, '/');
  const char *last = slash ? slash + 1 : path;
  char parent[PATH_MAX];
  if (slash == NULL)
    snprintf(parent, sizeof parent, ".");
  else if (slash == path)
    snprintf(parent, sizeof parent, "/");
  else
    snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
  if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0 || *last == '\0')
    return jk_fail(e, JITK_ERR_CACHE,
                   "cannot use the %s folder %s: name the folder itself, not . or ..",
                   tier_name(t->kind), dir);
  /* Links in the parents are followed (a home under a linked /home is
   * common); the folder itself must not be one. */
  char real_parent[PATH_MAX];
  if (realpath(parent, real_parent) == NULL) {
    int err = errno;
    if (err == ENOENT && create && make_parents(parent) == 0 && realpath(parent, real_parent))
      err = 0;
    if (err != 0)
      return jk_fail(e, JITK_ERR_CACHE, "cannot use the %s folder %s: %s: %s", tier_name(t->kind),
                     dir, parent, strerror(err));
  }
  jitk_status st = check_ancestors(e, real_parent, t, dir);
  if (st != JITK_OK) return st;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "%s%s%s", real_parent, strcmp(real_parent, "/") ? "/" : "", last);
  char *real = jk_buf_take(&b);
  if (real == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  if (strlen(real) + strlen("/kernels.db-journal") >= JK_SQLITE_MAX_PATH) {
    jk_free(e, real);
    return jk_fail(e, JITK_ERR_CACHE,
                   "cannot use the %s folder: its path is %zu bytes long, and SQLite opens "
                   "files of at most %d bytes; set JITK_CACHE_DIR to a shorter path (the folder: "
                   "%s)",
                   tier_name(t->kind), strlen(dir), JK_SQLITE_MAX_PATH, dir);
  }
  struct stat sb;
  if (lstat(real, &sb) != 0) {
    int err = errno;
    if (err == ENOENT && create) {
      mode_t mode = t->kind == JK_TIER_PRIVATE ? 0700 : t->kind == JK_TIER_GROUP ? 02770 : 0755;
      if (mkdir(real, 0700) != 0 && errno != EEXIST) {
        err = errno;
      } else {
        /* The mode is set on the folder itself: mkdir's goes through the
         * umask, which belongs to the process, not to jitk. */
        int fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
          struct stat own;
          if (fstat(fd, &own) == 0 && own.st_uid == geteuid()) fchmod(fd, mode);
          close(fd);
        }
        err = lstat(real, &sb) == 0 ? 0 : errno;
      }
    }
    if (err != 0) {
      jitk_status f = jk_fail(e, JITK_ERR_CACHE, "cannot %s the %s folder %s: %s",
                              create ? "create" : "use", tier_name(t->kind), dir, strerror(err));
      jk_free(e, real);
      return f;
    }
  }
  st = check_entry(e, real, &sb, t, true);
  if (st == JITK_OK && t->kind == JK_TIER_GROUP) {
    t->group = sb.st_gid;
    if (!(sb.st_mode & S_ISGID)) {
      /* Without setgid, files other members create (SQLite's -wal and
       * -shm) get their own group, and the others cannot write them. */
      if (sb.st_uid == geteuid() && chmod(real, (sb.st_mode & 07777) | S_ISGID) == 0) {
      } else {
        st = jk_fail(e, JITK_ERR_CACHE,
                     "refusing the group cache folder %s: it is not setgid, so files its "
                     "members create would not belong to its group; its owner should run "
                     "chmod g+s on it",
                     real);
      }
    }
  }
  if (st != JITK_OK) {
    jk_free(e, real);
    return st;
  }
  *real_out = real;
  return JITK_OK;
}

jitk_status jk_cache_check_file(jitk_engine *e, const char *path, const jk_trust *t) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return JITK_OK; /* made later, with our mode */
    return jk_fail(e, JITK_ERR_CACHE, "cannot use the %s file %s: %s", tier_name(t->kind), path,
                   strerror(errno));
  }
  return check_entry(e, path, &st, t, false);
}

mode_t jk_tier_file_mode(const jk_trust *t) {
  return t->kind == JK_TIER_PRIVATE ? 0600 : t->kind == JK_TIER_GROUP ? 0660 : 0644;
}

int jk_cache_open_file(jitk_engine *e, const char *path, const jk_trust *t, bool keep) {
  mode_t mode = jk_tier_file_mode(t);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd >= 0) {
    /* Made here: its mode and group are set on the file itself, whatever
     * the process's umask. */
    if (fchmod(fd, mode) != 0 ||
        (t->kind == JK_TIER_GROUP && fchown(fd, (uid_t)-1, t->group) != 0)) {
      jk_log(e, JITK_LOG_DEBUG, "cannot set the mode of %s: %s", path, strerror(errno));
    }
  } else if (errno == EEXIST) {
    if (!keep) return -2;
    fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd >= 0 && !keep) {
    close(fd);
    return -2;
  }
  return fd;
}

bool jk_is_network_fs_type(long type, const char **name) {
  static const struct {
    unsigned long magic;
    const char *name;
  } fs[] = {
      {0x6969, "NFS"},        {0x517B, "SMB"},       {0xFF534D42, "CIFS"},
      {0xFE534D42, "SMB2"},   {0x01021997, "9P"},    {0x00C36400, "Ceph"},
      {0x0BD00BD0, "Lustre"}, {0x47504653, "GPFS"},  {0x5346414F, "AFS"},
      {0x65735546, "FUSE"},   {0x013111A8, "IBRIX"}, {0x19830326, "FhGFS/BeeGFS"},
      {0x7461636f, "OCFS2"},  {0x564c, "NCP"},       {0x73757245, "Coda"},
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

jitk_status jk_parse_owner(jitk_engine *e, const char *text, uid_t *uid) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(text, &end, 10);
  if (*text != '\0' && *end == '\0' && errno == 0 && v < (unsigned long)UINT32_MAX) {
    *uid = (uid_t)v;
    return JITK_OK;
  }
  struct passwd pw, *found = NULL;
  char buf[4096];
  if (getpwnam_r(text, &pw, buf, sizeof buf, &found) == 0 && found != NULL) {
    *uid = found->pw_uid;
    return JITK_OK;
  }
  return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                 "the shared cache's owner \"%s\" is neither a user name nor a user id", text);
}
