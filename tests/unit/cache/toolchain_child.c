/*
 * A process whose NVRTC files are replaced while it runs, for the test
 * cache_deps/a_replaced_nvrtc_is_neither_served_nor_stored. It is started
 * with libnvrtc loaded from a scratch folder (LD_LIBRARY_PATH), so the
 * test can put another file at that path, as a package update does.
 *
 * Usage: toolchain_child CACHE WHEN LINK TARGET KERNEL...
 * WHEN is "never", "before" (LINK is made to point at TARGET before the
 * engine is created) or "between" (after the engine is created, before
 * the first kernel). Each KERNEL is
 * a number; for each it prints "k<number> hits <disk hits> compiles
 * <compiles>", and at the end "warning: <the last warning>" if any.
 */
#include <jitk/jitk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char last_warning[4096];

static void on_log(void *user, jitk_log_level level, const char *message) {
  (void)user;
  if (level <= JITK_LOG_WARN) snprintf(last_warning, sizeof last_warning, "%s", message);
}

/* Points `link` at `target` by renaming a new link over it. */
static int swap(const char *link, const char *target) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.new", link);
  unlink(tmp);
  if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
    perror(link);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s CACHE WHEN LINK TARGET KERNEL...\n", argv[0]);
    return 2;
  }
  const char *when = argv[2];
  if (strcmp(when, "before") == 0 && swap(argv[3], argv[4]) != 0) return 1;
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = argv[1];
  cfg.cache_mode = JITK_CACHE_ON;
  cfg.log_fn = on_log;
  jitk_engine *e = NULL;
  if (jitk_engine_create(&cfg, &e) != JITK_OK) {
    fprintf(stderr, "engine: %s\n", jitk_errmsg(NULL));
    return 1;
  }
  if (strcmp(when, "between") == 0 && swap(argv[3], argv[4]) != 0) return 1;
  for (int i = 5; i < argc; i++) {
    int k = atoi(argv[i]);
    char src[512];
    snprintf(src, sizeof src,
             "extern \"C\" __global__ void k%d(float *x, int n) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "  if (i < n) x[i] = x[i] * %d.0f + %d.0f;\n"
             "}\n",
             k, k + 1, k);
    jitk_cache_stats before, after;
    jitk_module *m = NULL;
    if (jitk_cache_get_stats(e, &before, NULL) != JITK_OK ||
        jitk_module_create(e, src, NULL, &m) != JITK_OK ||
        jitk_cache_get_stats(e, &after, NULL) != JITK_OK) {
      fprintf(stderr, "kernel %d: %s\n", k, jitk_errmsg(e));
      return 1;
    }
    jitk_module_destroy(m);
    printf("k%d hits %llu compiles %llu\n", k,
           (unsigned long long)(after.disk_hits - before.disk_hits),
           (unsigned long long)(after.compiles - before.compiles));
  }
  jitk_engine_destroy(e);
  if (last_warning[0] != '\0') printf("warning: %s\n", last_warning);
  return 0;
}
