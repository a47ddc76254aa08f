/*
 * NVRTC's precompiled headers (src/nvrtc/pch.c), without a GPU: made by
 * the first compile of a header state, or beside it on a thread of the
 * engine, and loaded by the next, as NVRTC's own status and messages
 * report, with the same image bytes as a plain compile; the heap grown
 * when too small, within its bound; refused folders, a folder removed
 * under the engine, a failing NVRTC and JITK_PCH=off all mean a plain
 * compile and no error. Most tests make the file in the compile itself
 * (pch.ahead false), which is deterministic; one waits for the thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit/cache/cache_common.h"
#include "common.h"
#include "engine.h"

static jitk_engine *pch_engine(const char *dir, jitk_cache_mode cache, jitk_pch_mode pch,
                               jt_log *log) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = cache;
  cfg.pch = pch;
  cfg.log_fn = jt_log_fn;
  cfg.log_user = log;
  cfg.log_level = JITK_LOG_DEBUG;
  jitk_engine *e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  e->nvrtc.pch.ahead = false;
  return e;
}

static jitk_pch_info pch_info(jitk_engine *e) {
  jitk_pch_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  JT_OK(e, jitk_engine_pch_info(e, &info));
  return info;
}

typedef struct image {
  void *bytes;
  size_t size;
  char *log;
} image;

static void image_free(image *im) {
  free(im->bytes);
  free(im->log);
}

static image module_image(jitk_engine *e, jitk_module *m) {
  const void *img;
  size_t size;
  jitk_image_kind kind;
  JT_OK(e, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_CUBIN);
  const char *log = NULL;
  JT_OK(e, jitk_module_log(m, &log));
  image im = {malloc(size), size, strdup(log ? log : "")};
  memcpy(im.bytes, img, size);
  return im;
}

/* A float16 elementwise kernel named `name` (a new name is a new source,
 * with the same headers), compiled; its image and log. */
static image half_kernel(jitk_engine *e, const char *name, const char *type) {
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x * y + (T)1", name, NULL, &k));
  const char *src;
  jitk_module *m = NULL;
  JT_OK(e, jitk_elementwise_compile(k, type, NULL, &src, &m));
  image im = module_image(e, m);
  jitk_module_destroy(m);
  jitk_elementwise_destroy(k);
  return im;
}

static void same_image(const image *a, const image *b, const char *what) {
  cr_assert_eq(a->size, b->size, "%s: %zu bytes against %zu", what, a->size, b->size);
  cr_assert(memcmp(a->bytes, b->bytes, a->size) == 0, "%s: the images differ", what);
}

static int pch_files_found;
static int count_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  size_t n = strlen(path);
  if (type == FTW_F && n > 4 && strcmp(path + n - 4, ".pch") == 0) pch_files_found++;
  return 0;
}

/* Precompiled header files anywhere under `dir`. */
static int pch_files(const char *dir) {
  pch_files_found = 0;
  nftw(dir, count_one, 16, FTW_PHYS);
  return pch_files_found;
}

/* The log without ptxas's timing line, which differs between any two
 * compiles. */
static void drop_timing(char *log) {
  char *t;
  while ((t = strstr(log, "ptxas info    : Compile time")) != NULL) {
    char *eol = strchr(t, '\n');
    memmove(t, eol ? eol + 1 : t + strlen(t), strlen(eol ? eol + 1 : t + strlen(t)) + 1);
  }
}

Test(pch, made_then_loaded_with_the_same_images) {
  char *dir = jt_tmpdir();
  jt_log log = {0};
  /* The default: on while the disk cache is on. */
  jitk_engine *on = pch_engine(dir, JITK_CACHE_ON, JITK_PCH_DEFAULT, &log);
  jitk_engine *off = pch_engine(NULL, JITK_CACHE_OFF, JITK_PCH_OFF, NULL);
  jitk_pch_info info = pch_info(on);
  cr_assert_str_eq(info.state, "on");
  cr_assert_null(info.dir, "the folder is made at the first compile that wants it");
  cr_assert_str_eq(pch_info(off).state, "off: turned off (jitk_engine_config.pch or JITK_PCH=off)");

  image a = half_kernel(on, "first", "T=float16");
  info = pch_info(on);
  cr_assert_eq(info.compiles, 1);
  cr_assert_eq(info.created, 1, "NVRTC reports the file made");
  cr_assert_eq(info.used, 0);
  cr_assert_not_null(info.dir);
  cr_assert_eq(strncmp(info.dir, dir, strlen(dir)), 0, "the folder %s is in the cache folder",
               info.dir);
  cr_assert_eq(pch_files(info.dir), 1);
  cr_assert(info.bytes > 1000000, "the file's size is counted (%llu)",
            (unsigned long long)info.bytes);
  struct stat st;
  cr_assert_eq(stat(info.dir, &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0700, "the engine's folder is private");

  /* Another kernel with the same headers loads it; a bfloat16 one reads
   * cuda_bf16.h too, and makes a file of its own, which the next loads. */
  image b = half_kernel(on, "second", "T=float16");
  info = pch_info(on);
  cr_assert_eq(info.compiles, 2);
  cr_assert_eq(info.created, 1);
  cr_assert_eq(info.used, 1, "NVRTC reports the file loaded");
  image c1 = half_kernel(on, "third", "T=bfloat16");
  image c = half_kernel(on, "fourth", "T=bfloat16");
  info = pch_info(on);
  cr_assert_eq(info.compiles, 4);
  cr_assert_eq(info.created, 2);
  cr_assert_eq(info.used, 2);
  cr_assert_eq(info.failed, 0);
  cr_assert_eq(pch_files(info.dir), 2);
  image_free(&c1);

  image a0 = half_kernel(off, "first", "T=float16");
  image b0 = half_kernel(off, "second", "T=float16");
  image c0 = half_kernel(off, "fourth", "T=bfloat16");
  same_image(&a, &a0, "the compile that made it");
  same_image(&b, &b0, "a compile that loaded it");
  same_image(&c, &c0, "a bfloat16 compile that loaded it");
  /* The logs hold nothing of it: NVRTC's messages are taken out. */
  drop_timing(b.log);
  drop_timing(b0.log);
  cr_assert_str_eq(b.log, b0.log);
  cr_assert_null(strstr(a.log, "precompiled"), "log: %s", a.log);
  cr_assert_eq(log.warnings, 0, "%s", log.last_warning);

  /* A float32 kernel reads no large header: not offered them. */
  image f = half_kernel(on, "plain", "T=float32");
  cr_assert_eq(pch_info(on).compiles, 4);
  image_free(&f);

  /* The engine's folder goes with it. */
  char *edir = strdup(pch_info(on).dir);
  jitk_engine_destroy(on);
  cr_assert_neq(stat(edir, &st), 0, "%s removed with the engine", edir);
  free(edir);
  jitk_engine_destroy(off);
  image_free(&a);
  image_free(&b);
  image_free(&c);
  image_free(&a0);
  image_free(&b0);
  image_free(&c0);
  jt_rmdir(dir);
}

Test(pch, a_key_and_a_disk_entry_as_without) {
  /* The entry compiled with precompiled headers is stored with a complete
   * dependency record under the same key: another engine finds it. */
  char *dir = jt_tmpdir();
  jitk_engine *e = pch_engine(dir, JITK_CACHE_ON, JITK_PCH_ON, NULL);
  image a = half_kernel(e, "stored", "T=float16");
  cr_assert_eq(pch_info(e).created, 1);
  jitk_engine_destroy(e);
  jitk_engine *g = pch_engine(dir, JITK_CACHE_ON, JITK_PCH_OFF, NULL);
  image b = half_kernel(g, "stored", "T=float16");
  jitk_cache_stats mine;
  JT_OK(g, jitk_cache_get_stats(g, &mine, NULL));
  cr_assert_eq(mine.disk_hits, 1, "the entry made with them serves an engine without them");
  cr_assert_eq(mine.compiles, 0);
  same_image(&a, &b, "the stored image");
  image_free(&a);
  image_free(&b);
  jitk_engine_destroy(g);
  jt_rmdir(dir);
}

Test(pch, a_small_heap_is_grown) {
  char *dir = jt_tmpdir();
  /* NVRTC's heap is the process's: this test runs in a process of its
   * own. 1 MiB holds no half headers (they need about 7). */
  cr_assert_eq(nvrtcSetPCHHeapSize((size_t)1 << 20), NVRTC_SUCCESS);
  jt_log log = {0};
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, &log);
  image a = half_kernel(e, "first", "T=float16");
  jitk_pch_info info = pch_info(e);
  cr_assert_eq(info.heap_grown, 1);
  cr_assert_eq(info.created, 0, "the compile that found the heap small made no file");
  cr_assert(info.heap_bytes >= (size_t)4 << 20, "the heap now holds them (%zu bytes)",
            info.heap_bytes);
  cr_assert_eq(info.heap_bytes % ((size_t)16 << 20), 0, "grown in steps of 16 MiB");
  cr_assert_eq(pch_files(dir), 0);
  cr_assert_eq(log.warnings, 0, "%s", log.last_warning);
  /* The next compile of these headers makes it, the one after loads it. */
  image b = half_kernel(e, "second", "T=float16");
  image c = half_kernel(e, "third", "T=float16");
  info = pch_info(e);
  cr_assert_eq(info.created, 1);
  cr_assert_eq(info.used, 1);
  cr_assert_eq(info.heap_grown, 1);
  jitk_engine *off = pch_engine(NULL, JITK_CACHE_OFF, JITK_PCH_OFF, NULL);
  image a0 = half_kernel(off, "first", "T=float16");
  image c0 = half_kernel(off, "third", "T=float16");
  same_image(&a, &a0, "the compile that found the heap small");
  same_image(&c, &c0, "a compile after the growth");
  image_free(&a);
  image_free(&b);
  image_free(&c);
  image_free(&a0);
  image_free(&c0);
  jitk_engine_destroy(off);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, a_heap_past_the_bound_is_not_grown) {
  char *dir = jt_tmpdir();
  cr_assert_eq(nvrtcSetPCHHeapSize((size_t)1 << 20), NVRTC_SUCCESS);
  jt_log log = {0};
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, &log);
  e->nvrtc.pch.heap_max = (size_t)2 << 20; /* below what the half headers need */
  image a = half_kernel(e, "first", "T=float16");
  jitk_pch_info info = pch_info(e);
  cr_assert_eq(info.heap_grown, 0);
  cr_assert_eq(info.failed, 1);
  size_t heap = 0;
  cr_assert_eq(nvrtcGetPCHHeapSize(&heap), NVRTC_SUCCESS);
  cr_assert(heap < ((size_t)2 << 20), "the heap stays as it was (%zu)", heap);
  cr_assert_eq(log.warnings, 0, "an information line, not a warning: %s", log.last_warning);
  /* Those headers are not offered them again. */
  image b = half_kernel(e, "second", "T=float16");
  info = pch_info(e);
  cr_assert_eq(info.compiles, 1);
  cr_assert_eq(pch_files(dir), 0);
  image_free(&a);
  image_free(&b);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

/* Compiles two half kernels on an engine whose PCH folder is refused, and
 * checks that nothing of them was made. */
static void refused(const char *dir, const char *needle) {
  jt_log log = {0};
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, &log);
  jitk_pch_info info = pch_info(e);
  cr_assert_eq(strncmp(info.state, "off: ", 5), 0, "state: %s", info.state);
  cr_assert(strstr(info.state, needle) != NULL, "state lacks \"%s\": %s", needle, info.state);
  cr_assert_eq(log.warnings, 1, "one warning when they were asked for");
  image a = half_kernel(e, "first", "T=float16");
  image b = half_kernel(e, "second", "T=float16");
  cr_assert_eq(pch_info(e).compiles, 0);
  cr_assert_eq(pch_files(dir), 0);
  cr_assert_eq(log.warnings, 1, "nothing more: %s", log.last_warning);
  image_free(&a);
  image_free(&b);
  jitk_engine_destroy(e);
}

Test(pch, untrusted_folders_mean_none) {
  char *dir = jt_tmpdir();
  char path[600], other[600];
  /* The cache folder writable by others, who could plant a file. */
  cr_assert_eq(chmod(dir, 0777), 0);
  refused(dir, "writable by everyone");
  cr_assert_eq(chmod(dir, 0700), 0);
  /* <cache>/pch a link to a folder elsewhere. */
  snprintf(other, sizeof other, "%s/elsewhere", dir);
  cr_assert_eq(mkdir(other, 0700), 0);
  snprintf(path, sizeof path, "%s/pch", dir);
  cr_assert_eq(symlink(other, path), 0);
  refused(dir, "symbolic link");
  cr_assert_eq(unlink(path), 0);
  /* <cache>/pch a file, where no folder can be made. */
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  cr_assert(fd >= 0);
  close(fd);
  refused(dir, "not a folder");
  cr_assert_eq(unlink(path), 0);
  /* <cache>/pch writable by its group. */
  cr_assert_eq(mkdir(path, 0770), 0);
  cr_assert_eq(chmod(path, 0770), 0);
  refused(dir, "writable by its group");
  jt_rmdir(dir);
}

Test(pch, a_group_cache_gets_none) {
  char *dir = jt_tmpdir();
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = JITK_CACHE_ON;
  cfg.cache_shared = 1;
  jitk_engine *e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  jitk_pch_info info = pch_info(e);
  cr_assert(strstr(info.state, "group cache") != NULL, "state: %s", info.state);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, a_folder_removed_under_the_engine) {
  char *dir = jt_tmpdir();
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, NULL);
  image a = half_kernel(e, "first", "T=float16");
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", pch_info(e).dir);
  cr_assert_eq(system(cmd), 0);
  /* Made again, and the file with it. */
  image b = half_kernel(e, "second", "T=float16");
  jitk_pch_info info = pch_info(e);
  cr_assert_eq(info.created, 2);
  cr_assert_eq(pch_files(dir), 1);
  /* A file where the folder was: a new folder. */
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && touch '%s'", info.dir, info.dir);
  cr_assert_eq(system(cmd), 0);
  image c = half_kernel(e, "third", "T=float16");
  cr_assert_eq(pch_info(e).created, 3);
  image_free(&a);
  image_free(&b);
  image_free(&c);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, jitk_pch_off_makes_no_files) {
  char *dir = jt_tmpdir();
  setenv("JITK_PCH", "off", 1);
  jitk_engine *e = pch_engine(dir, JITK_CACHE_ON, JITK_PCH_DEFAULT, NULL);
  jitk_pch_info info = pch_info(e);
  cr_assert(strstr(info.state, "off: turned off") != NULL, "state: %s", info.state);
  image a = half_kernel(e, "first", "T=float16");
  image b = half_kernel(e, "second", "T=float16");
  cr_assert_eq(pch_info(e).compiles, 0);
  cr_assert_eq(pch_files(dir), 0);
  struct stat st;
  char path[600];
  snprintf(path, sizeof path, "%s/pch", dir);
  cr_assert_neq(stat(path, &st), 0, "not even the folder");
  image_free(&a);
  image_free(&b);
  jitk_engine_destroy(e);
  /* JITK_PCH=all reaches raw modules; the config's choice wins over it. */
  setenv("JITK_PCH", "all", 1);
  e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_DEFAULT, NULL);
  cr_assert_eq(e->nvrtc.pch.mode, JITK_PCH_ALL);
  jitk_engine_destroy(e);
  e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_OFF, NULL);
  cr_assert_eq(e->nvrtc.pch.mode, JITK_PCH_OFF);
  jitk_engine_destroy(e);
  unsetenv("JITK_PCH");
  /* The cache off and nothing asked: off. */
  e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_DEFAULT, NULL);
  cr_assert(strstr(pch_info(e).state, "disk cache is not on") != NULL);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, a_bad_mode_is_refused) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.pch = (jitk_pch_mode)9;
  jitk_engine *e = NULL;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "pch 9", jitk_engine_create(&cfg, &e));
  /* An older caller's config, without the field, gets the default. */
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.struct_size = offsetof(jitk_engine_config, pch);
  cfg.pch = (jitk_pch_mode)9;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  jitk_pch_info info;
  info.struct_size = 3;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size", jitk_engine_pch_info(e, &info));
  /* An older caller's smaller struct is filled as far as it goes. */
  memset(&info, 0xAB, sizeof info);
  info.struct_size = offsetof(jitk_pch_info, dir);
  JT_OK(e, jitk_engine_pch_info(e, &info));
  cr_assert_eq(info.struct_size, offsetof(jitk_pch_info, dir));
  cr_assert_not_null(info.state);
  cr_assert_eq(info.compiles, 0xABABABABABABABABull, "fields past its size are left alone");
  jitk_engine_destroy(e);
}

/* A header on disk, large enough to be worth saving, whose VAL is `val`.
 * It is written beside the path and renamed over it, so that a compile
 * reading it at the same time (the caller's, while a thread saves the
 * headers) finds either the old file or the new one whole, never a part. */
static void write_header(const char *path, int val) {
  char tmp[720];
  snprintf(tmp, sizeof tmp, "%s.new", path);
  FILE *f = fopen(tmp, "w");
  cr_assert_not_null(f);
  fprintf(f, "#pragma once\n#define VAL %d.0f\n", val);
  fprintf(f, "__device__ inline float shift(float x) { return x + VAL; }\n");
  for (int i = 0; i < 1200; i++)
    fprintf(f, "__device__ inline float pad%d(float x) { return x * %d.0f; }\n", i, i);
  cr_assert_eq(fclose(f), 0);
  cr_assert_eq(rename(tmp, path), 0, "%s", strerror(errno));
}

/* A folder dir/include holding big.h (VAL 1): its path in header[700],
 * the option naming the folder in opt[700]. */
static void big_header_folder(const char *dir, char *header, char *opt) {
  char inc[600];
  snprintf(inc, sizeof inc, "%s/include", dir);
  cr_assert_eq(mkdir(inc, 0700), 0);
  snprintf(header, 700, "%s/big.h", inc);
  snprintf(opt, 700, "-I%s", inc);
  write_header(header, 1);
}

static image raw_module(jitk_engine *e, const char *inc_option, const char *name) {
  char src[300];
  snprintf(
      src, sizeof src,
      "#include \"big.h\"\n"
      "extern \"C\" __global__ void %s(float *x) { x[threadIdx.x] = shift(x[threadIdx.x]); }\n",
      name);
  jitk_module_options mo;
  memset(&mo, 0, sizeof mo);
  const char *opts[] = {inc_option};
  mo.options = opts;
  mo.num_options = 1;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &mo, &m));
  image im = module_image(e, m);
  jitk_module_destroy(m);
  return im;
}

Test(pch, an_edited_header_is_never_served_from_an_old_file) {
  /* NVRTC does not notice a header edited within the second it was read,
   * nor one whose time was put back: the folder per header state does. */
  char *dir = jt_tmpdir();
  char header[700], opt[700];
  big_header_folder(dir, header, opt);
  struct stat before;
  cr_assert_eq(stat(header, &before), 0);
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ALL, NULL);
  image a = raw_module(e, opt, "first");
  cr_assert_eq(pch_info(e).created, 1, "raw modules get them with JITK_PCH_ALL");
  write_header(header, 2);
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  cr_assert_eq(utimensat(AT_FDCWD, header, times, 0), 0);
  image b = raw_module(e, opt, "second");
  jitk_engine *off = pch_engine(NULL, JITK_CACHE_OFF, JITK_PCH_OFF, NULL);
  image b0 = raw_module(off, opt, "second");
  same_image(&b, &b0, "after the edit");
  cr_assert_eq(pch_info(e).used, 0, "the old file is not loaded");
  cr_assert_eq(pch_info(e).created, 2, "the new headers get a file of their own");
  /* And with the header as it was (its time too, which NVRTC does
   * check), the first file serves again. */
  write_header(header, 1);
  cr_assert_eq(utimensat(AT_FDCWD, header, times, 0), 0);
  image c = raw_module(e, opt, "third");
  cr_assert_eq(pch_info(e).used, 1);
  image_free(&a);
  image_free(&b);
  image_free(&b0);
  image_free(&c);
  jitk_engine_destroy(off);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, raw_modules_only_when_asked) {
  char *dir = jt_tmpdir();
  char header[700], opt[700];
  big_header_folder(dir, header, opt);
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, NULL);
  image a = raw_module(e, opt, "first");
  cr_assert_eq(pch_info(e).compiles, 0);
  image_free(&a);
  jitk_engine_destroy(e);
  /* A user's own -pch is theirs: jitk adds nothing. */
  e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ALL, NULL);
  char src[] =
      "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(__half *x) { x[0] = x[1]; }\n";
  jitk_module_options mo;
  memset(&mo, 0, sizeof mo);
  char pdir[720];
  snprintf(pdir, sizeof pdir, "--pch-dir=%s", opt + 2); /* the include folder */
  const char *opts[] = {"-pch", pdir};
  mo.options = opts;
  mo.num_options = 2;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &mo, &m));
  jitk_module_destroy(m);
  cr_assert_eq(pch_info(e).compiles, 0);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

/* Stand-ins for NVRTC's compile, counting calls: one that refuses any
 * compile offered precompiled headers, as a broken NVRTC might. */
static int compiles_seen;
static nvrtcResult refuse_pch(nvrtcProgram prog, int n, const char *const *opts) {
  compiles_seen++;
  for (int i = 0; i < n; i++)
    if (strncmp(opts[i], "--create-pch=", 13) == 0 || strncmp(opts[i], "--use-pch=", 10) == 0)
      return NVRTC_ERROR_INVALID_OPTION;
  return nvrtcCompileProgram(prog, n, opts);
}
static nvrtcResult counting(nvrtcProgram prog, int n, const char *const *opts) {
  compiles_seen++;
  return nvrtcCompileProgram(prog, n, opts);
}

Test(pch, a_compile_failing_with_them_is_compiled_without) {
  char *dir = jt_tmpdir();
  jt_log log = {0};
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, &log);
  e->nvrtc.nvrtcCompileProgram = refuse_pch;
  compiles_seen = 0;
  image a = half_kernel(e, "first", "T=float16");
  cr_assert_eq(compiles_seen, 2, "refused with them, then compiled without");
  jitk_pch_info info = pch_info(e);
  cr_assert(strstr(info.state, "off: a compile failed with them") != NULL, "state: %s", info.state);
  cr_assert_eq(log.warnings, 0);
  image b = half_kernel(e, "second", "T=float16");
  cr_assert_eq(compiles_seen, 3, "off for the engine from then on");
  image_free(&a);
  image_free(&b);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, an_error_in_the_code_is_compiled_once) {
  char *dir = jt_tmpdir();
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, NULL);
  e->nvrtc.nvrtcCompileProgram = counting;
  compiles_seen = 0;
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = x + undefined_name", "bad", NULL, &k));
  const char *src;
  JT_FAILS(e, JITK_ERR_COMPILE, "undefined_name",
           jitk_elementwise_compile(k, "T=float16", NULL, &src, NULL));
  cr_assert_eq(compiles_seen, 1);
  cr_assert_null(strstr(jitk_errmsg(e), "precompiled"), "%s", jitk_errmsg(e));
  cr_assert_null(strstr(jitk_errmsg(e), "-pch"), "the options shown are the compile's own");
  cr_assert_str_eq(pch_info(e).state, "on");
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, folders_of_ended_processes_are_swept) {
  char *dir = jt_tmpdir();
  char root[600], stale[700], file[800], live[700];
  snprintf(root, sizeof root, "%s/pch", dir);
  cr_assert_eq(mkdir(root, 0700), 0);
  /* A process that has ended, and one that is alive (this one's parent). */
  pid_t child = fork();
  if (child == 0) _exit(0);
  cr_assert(child > 0);
  waitpid(child, NULL, 0);
  snprintf(stale, sizeof stale, "%s/%ld-abcdef", root, (long)child);
  snprintf(live, sizeof live, "%s/%ld-ghijkl", root, (long)getppid());
  cr_assert_eq(mkdir(stale, 0700), 0);
  cr_assert_eq(mkdir(live, 0700), 0);
  snprintf(file, sizeof file, "%s/0123456789abcdef0123456789abcdef.pch", stale);
  int fd = open(file, O_CREAT | O_WRONLY, 0600);
  cr_assert(fd >= 0);
  close(fd);
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, NULL);
  image a = half_kernel(e, "first", "T=float16");
  struct stat st;
  cr_assert_neq(stat(stale, &st), 0, "the ended process's folder is gone");
  cr_assert_eq(stat(live, &st), 0, "the live one's stays");
  image_free(&a);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

/* How many compiles of a kind run before the thread's file is ready. */
static void wait_for_maker(jitk_engine *e) {
  for (int i = 0; i < 3000 && pch_info(e).making; i++) usleep(10000);
  cr_assert_eq(pch_info(e).making, 0, "the thread making the file has not ended in 30 s");
}

Test(pch, made_beside_the_first_compile) {
  char *dir = jt_tmpdir();
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, NULL);
  e->nvrtc.pch.ahead = true;
  image a = half_kernel(e, "first", "T=float16");
  jitk_pch_info info = pch_info(e);
  cr_assert_eq(info.compiles, 0, "the first compile is a plain one");
  wait_for_maker(e);
  info = pch_info(e);
  cr_assert_eq(info.created, 1, "a thread made the file from the kernel's directives");
  cr_assert_eq(pch_files(dir), 1);
  image b = half_kernel(e, "second", "T=float16");
  info = pch_info(e);
  cr_assert_eq(info.compiles, 1);
  cr_assert_eq(info.used, 1);
  jitk_engine *off = pch_engine(NULL, JITK_CACHE_OFF, JITK_PCH_OFF, NULL);
  image b0 = half_kernel(off, "second", "T=float16");
  same_image(&b, &b0, "a compile that loaded the thread's file");
  image_free(&a);
  image_free(&b);
  image_free(&b0);
  jitk_engine_destroy(off);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, an_engine_destroyed_while_its_thread_works) {
  char *dir = jt_tmpdir();
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ON, NULL);
  e->nvrtc.pch.ahead = true;
  image a = half_kernel(e, "first", "T=float16");
  char *edir = strdup(pch_info(e).dir);
  /* Destroyed at once: the thread is stopped and joined, the folder
   * removed. */
  jitk_engine_destroy(e);
  struct stat st;
  cr_assert_neq(stat(edir, &st), 0);
  free(edir);
  image_free(&a);
  jt_rmdir(dir);
}

Test(pch, the_leading_directives) {
  /* What NVRTC saves, and the stub a thread compiles: the directives, with
   * their comments, continued lines and blank lines, before the first
   * line of code. */
  char *dir = jt_tmpdir();
  jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ALL, NULL);
  const char *src =
      "// a comment\n"
      "/* a comment\n"
      "   over lines */\n"
      "#include <cuda_fp16.h>\n"
      "#define TWICE(x) \\\n"
      "  ((x) + (x))\n"
      "\n"
      "  #  include <cuda_bf16.h> // and a comment\n"
      "/* code after a comment */ extern \"C\" __global__ void k(__half *x) { x[0] = TWICE(x[1]); "
      "}\n";
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  jitk_module_destroy(m);
  cr_assert_eq(pch_info(e).created, 1);
  /* The same directives with another kernel load the file. */
  const char *src2 =
      "// a comment\n"
      "/* a comment\n"
      "   over lines */\n"
      "#include <cuda_fp16.h>\n"
      "#define TWICE(x) \\\n"
      "  ((x) + (x))\n"
      "\n"
      "  #  include <cuda_bf16.h> // and a comment\n"
      "extern \"C\" __global__ void k2(__half *x) { x[1] = TWICE(x[0]); }\n";
  JT_OK(e, jitk_module_create(e, src2, NULL, &m));
  jitk_module_destroy(m);
  cr_assert_eq(pch_info(e).used, 1);
  /* Code first: nothing to save, nothing offered. */
  const char *src3 =
      "typedef int I;\n#include <cuda_fp16.h>\n"
      "extern \"C\" __global__ void k3(__half *x) { x[1] = x[0]; }\n";
  JT_OK(e, jitk_module_create(e, src3, NULL, &m));
  jitk_module_destroy(m);
  cr_assert_eq(pch_info(e).compiles, 2);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(pch, a_users_own_options_in_the_dependency_record) {
  /* A caller's -pch, --create-pch or --use-pch makes what the compile
   * reads unknown (the cache then keeps it off the disk); options that only
   * say where or how verbosely do not, and jitk's own never reach the
   * record. */
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.source = "#include <cuda_fp16.h>\n__global__ void k() {}\n";
  static const struct {
    const char *option;
    bool unknown;
  } cases[] = {{"-pch", true},
               {"--pch", true},
               {"--create-pch=/tmp/x.pch", true},
               {"-use-pch=/tmp/x.pch", true},
               {"--pch-dir=/tmp", false},
               {"--pch-messages=false", false},
               {"-pch-verbose=true", false},
               {"--instantiate-templates-in-pch=false", false}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char **opts;
    size_t n;
    JT_OK(e, jk_nvrtc_final_options(e, &cases[i].option, 1, 0, &opts, &n));
    jk_deps deps;
    JT_OK(e, jk_deps_scan(e, &in, opts, n, &deps));
    cr_assert_eq(deps.unknown != NULL, cases[i].unknown, "%s: %s", cases[i].option,
                 deps.unknown ? deps.unknown : "(known)");
    jk_deps_free(e, &deps);
    jk_options_free(e, opts, n);
  }
  jitk_engine_destroy(e);
}

/* NVRTC's compile that saves a file, with the header rewritten before it
 * (VAL 2) and put back after it as the scan read it (VAL 1, its times
 * too, which is all NVRTC checks). */
static const char *rewritten;
static struct timespec rewritten_times[2];
static nvrtcResult save_between_edits(nvrtcProgram prog, int n, const char *const *opts) {
  bool saves = false;
  for (int i = 0; i < n; i++) saves |= strncmp(opts[i], "--create-pch=", 13) == 0;
  if (saves) write_header(rewritten, 2);
  nvrtcResult r = nvrtcCompileProgram(prog, n, opts);
  if (saves) {
    write_header(rewritten, 1);
    utimensat(AT_FDCWD, rewritten, rewritten_times, 0);
  }
  return r;
}

Test(pch, a_header_edited_and_put_back_while_saved_drops_the_file) {
  /* The file is named by the headers as the scan read them; one written
   * while NVRTC read them may hold other headers under that name. */
  for (int ahead = 0; ahead < 2; ahead++) {
    char *dir = jt_tmpdir();
    char header[700], opt[700];
    big_header_folder(dir, header, opt);
    struct stat before;
    cr_assert_eq(stat(header, &before), 0);
    rewritten = header;
    rewritten_times[0] = before.st_atim;
    rewritten_times[1] = before.st_mtim;
    jt_log log = {0};
    jitk_engine *e = pch_engine(dir, JITK_CACHE_OFF, JITK_PCH_ALL, &log);
    e->nvrtc.pch.ahead = ahead;
    e->nvrtc.nvrtcCompileProgram = save_between_edits;
    image a = raw_module(e, opt, "first");
    if (ahead) wait_for_maker(e);
    e->nvrtc.nvrtcCompileProgram = nvrtcCompileProgram;
    cr_assert_eq(pch_info(e).created, 0, "ahead %d: a file of VAL 2 kept as VAL 1's", ahead);
    cr_assert_eq(pch_files(dir), 0, "ahead %d", ahead);
    image b = raw_module(e, opt, "second");
    jitk_engine *off = pch_engine(NULL, JITK_CACHE_OFF, JITK_PCH_OFF, NULL);
    image b0 = raw_module(off, opt, "second");
    same_image(&b, &b0, "the next compile of the same headers");
    /* That compile (or the thread beside it) made the file again. */
    if (ahead) wait_for_maker(e);
    cr_assert_eq(pch_info(e).created, 1, "ahead %d", ahead);
    image_free(&a);
    image_free(&b);
    image_free(&b0);
    jitk_engine_destroy(off);
    jitk_engine_destroy(e);
    jt_rmdir(dir);
  }
}
