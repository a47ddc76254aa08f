/*
 * Engines that share images (jitk_engine_config.share_images_with): one
 * compile per architecture, images held while some engine holds them,
 * waits instead of second compiles, and engines that can go in any order
 * (issue 17). Compile-only engines stand for devices: an engine per
 * "device", sm_90 twice and sm_80 once.
 */
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_common.h"

/* A compile-only engine for `arch`, without a disk cache unless `dir` is
 * given, sharing with `peer` (NULL: none). */
static jitk_engine *share_engine(const char *arch, const char *dir, jitk_engine *peer,
                                 size_t memory_entries) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = arch;
  cfg.cache_dir = dir;
  cfg.cache_mode = dir ? JITK_CACHE_ON : JITK_CACHE_OFF;
  cfg.cache_memory_entries = memory_entries;
  cfg.share_images_with = peer;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "engine for %s: %s", arch, jitk_errmsg(NULL));
  return e;
}

typedef struct counts {
  size_t engines, images;
  uint64_t hits;
} counts;

static counts group(jitk_engine *e) {
  counts c;
  jk_share_counts(e, &c.engines, &c.images, &c.hits);
  return c;
}

static const void *image_of(jitk_module *m, size_t *size) {
  const void *img = NULL;
  cr_assert_eq(jitk_module_image(m, &img, size, NULL), JITK_OK);
  return img;
}

Test(cache_share, one_compile_per_architecture) {
  jitk_engine *a = share_engine("sm_90", NULL, NULL, 0);
  jitk_engine *b = share_engine("sm_90", NULL, a, 0);
  jitk_engine *c = share_engine("sm_80", NULL, b, 0); /* joins through b */
  cr_assert_eq(group(a).engines, 3);

  jitk_module *ma = jt_kernel(a, 1);
  jitk_module *mb = jt_kernel(b, 1);
  jitk_module *mc = jt_kernel(c, 1);
  cr_assert_eq(jt_stats_mine(a).compiles, 1);
  cr_assert_eq(jt_stats_mine(b).compiles, 0, "b compiled what a had compiled");
  cr_assert_eq(jt_stats_mine(b).memory_hits, 1);
  cr_assert_eq(jt_stats_mine(c).compiles, 1, "sm_80 needs its own");
  size_t na, nb, nc;
  const void *ia = image_of(ma, &na), *ib = image_of(mb, &nb), *ic = image_of(mc, &nc);
  cr_assert(ia == ib && na == nb, "one image, not a copy per engine");
  cr_assert(ic != ia);
  counts g = group(c);
  cr_assert_eq(g.images, 2, "%zu images", g.images);
  cr_assert_eq(g.hits, 1);

  /* Another kernel, first asked of b: a then finds it. */
  jitk_module *mb2 = jt_kernel(b, 2);
  jitk_module *ma2 = jt_kernel(a, 2);
  cr_assert_eq(jt_stats_mine(a).compiles, 1);
  cr_assert_eq(jt_stats_mine(b).compiles, 1);
  cr_assert_eq(group(a).images, 3);

  jitk_module_destroy(ma);
  jitk_module_destroy(mb);
  jitk_module_destroy(mc);
  jitk_module_destroy(ma2);
  jitk_module_destroy(mb2);
  jitk_engine_destroy(a);
  jitk_engine_destroy(c);
  jitk_engine_destroy(b);
}

Test(cache_share, engines_go_in_any_order) {
  jitk_engine *a = share_engine("sm_90", NULL, NULL, 0);
  jitk_engine *b = share_engine("sm_90", NULL, a, 0);
  jitk_module *ma = jt_kernel(a, 1);
  jitk_module *mb = jt_kernel(b, 1);
  size_t n;
  const void *img = image_of(ma, &n);
  void *copy = malloc(n);
  memcpy(copy, img, n);

  /* The first engine goes; the second's module still shows the image,
   * which the group keeps while b's entry holds it. */
  jitk_module_destroy(ma);
  jitk_engine_destroy(a);
  cr_assert_eq(group(b).engines, 1);
  cr_assert_eq(group(b).images, 1);
  size_t nb;
  const void *ib = image_of(mb, &nb);
  cr_assert(nb == n && memcmp(ib, copy, n) == 0);

  /* An engine made sharing with the survivor finds it. */
  jitk_engine *d = share_engine("sm_90", NULL, b, 0);
  jitk_module *md = jt_kernel(d, 1);
  cr_assert_eq(jt_stats_mine(d).compiles, 0);
  cr_assert_eq(group(d).engines, 2);
  jitk_module_destroy(mb);
  jitk_engine_destroy(b);
  size_t nd;
  const void *id = image_of(md, &nd);
  cr_assert(nd == n && memcmp(id, copy, n) == 0);
  jitk_module_destroy(md);
  jitk_engine_destroy(d);
  free(copy);
}

Test(cache_share, images_live_as_long_as_an_engine_holds_them) {
  /* Tables of one entry: a's second kernel pushes its first out, and with
   * no module holding it, the image leaves the group too. */
  jitk_engine *a = share_engine("sm_90", NULL, NULL, 1);
  jitk_engine *b = share_engine("sm_90", NULL, a, 1);
  jitk_module_destroy(jt_kernel(a, 1));
  cr_assert_eq(group(a).images, 1);
  jitk_module_destroy(jt_kernel(a, 2));
  cr_assert_eq(group(a).images, 1, "%zu images", group(a).images);
  jitk_module_destroy(jt_kernel(b, 2));
  cr_assert_eq(jt_stats_mine(b).compiles, 0);
  jitk_module_destroy(jt_kernel(b, 1));
  cr_assert_eq(jt_stats_mine(b).compiles, 1, "kernel 1 was gone from every table");

  /* A module keeps its image in the group after its engine's table let
   * the entry go. */
  jitk_module *held = jt_kernel(a, 3);
  jitk_module_destroy(jt_kernel(a, 4));
  jitk_module_destroy(jt_kernel(b, 3));
  cr_assert_eq(jt_stats_mine(b).compiles, 1, "the held image was not shared");
  jitk_module_destroy(held);
  jitk_engine_destroy(a);
  jitk_engine_destroy(b);
}

/* Four engines, four threads, the same kernels asked of each at once in
 * different orders: each kernel compiled once in all. */
enum { ENGINES = 4, KERNELS = 6 };

typedef struct racer {
  jitk_engine *e;
  int first;
  pthread_barrier_t *go;
  jitk_status st;
  char err[512];
} racer;

static void *race(void *p) {
  racer *r = p;
  pthread_barrier_wait(r->go);
  for (int k = 0; k < KERNELS && r->st == JITK_OK; k++) {
    char src[512];
    jt_kernel_source(10 + (r->first + k) % KERNELS, src, sizeof src);
    jitk_module *m = NULL;
    r->st = jitk_module_create(r->e, src, NULL, &m);
    if (r->st != JITK_OK) snprintf(r->err, sizeof r->err, "%s", jitk_errmsg(r->e));
    jitk_module_destroy(m);
  }
  return NULL;
}

Test(cache_share, engines_at_once_compile_each_kernel_once) {
  for (int round = 0; round < 2; round++) {
    /* The second round with a disk cache: the group is asked first, and
     * the key's file lock is never held by two engines of one group for
     * the same kernel. */
    char *dir = round == 1 ? jt_tmpdir() : NULL;
    jitk_engine *e[ENGINES];
    for (int i = 0; i < ENGINES; i++) e[i] = share_engine("sm_90", dir, i ? e[0] : NULL, 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, ENGINES);
    racer r[ENGINES];
    pthread_t t[ENGINES];
    for (int i = 0; i < ENGINES; i++) {
      r[i] = (racer){.e = e[i], .first = i % 2 ? 0 : 3, .go = &go};
      cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < ENGINES; i++) pthread_join(t[i], NULL);
    uint64_t compiles = 0, hits = 0;
    for (int i = 0; i < ENGINES; i++) {
      cr_assert_eq(r[i].st, JITK_OK, "engine %d: %s", i, r[i].err);
      compiles += jt_stats_mine(e[i]).compiles;
      hits += jt_stats_mine(e[i]).memory_hits + jt_stats_mine(e[i]).disk_hits;
    }
    cr_assert_eq(compiles, KERNELS, "round %d: %llu compiles", round, (unsigned long long)compiles);
    cr_assert_eq(hits, (ENGINES - 1) * KERNELS);
    cr_assert_eq(group(e[0]).images, KERNELS);
    for (int i = 0; i < ENGINES; i++) jitk_engine_destroy(e[i]);
    pthread_barrier_destroy(&go);
    if (dir) jt_rmdir(dir);
  }
}

static void *other_alloc(void *user, void *ptr, size_t size) {
  (void)user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

Test(cache_share, another_allocator_is_refused) {
  jitk_engine *a = share_engine("sm_90", NULL, NULL, 0);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  cfg.alloc_fn = other_alloc;
  cfg.share_images_with = a;
  jitk_engine *b = (jitk_engine *)&cfg; /* must be left alone on failure */
  cr_assert_eq(jitk_engine_create(&cfg, &b), JITK_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(jitk_errmsg(NULL), "share_images_with") != NULL, "%s", jitk_errmsg(NULL));
  cr_assert(strstr(jitk_errmsg(NULL), "allocator") != NULL, "%s", jitk_errmsg(NULL));
  /* The group lost nothing: one engine, which still works. */
  cr_assert_eq(group(a).engines, 1);
  jitk_module_destroy(jt_kernel(a, 1));
  jitk_engine_destroy(a);
}

Test(cache_share, a_failed_compile_is_not_shared) {
  jitk_engine *a = share_engine("sm_90", NULL, NULL, 0);
  jitk_engine *b = share_engine("sm_90", NULL, a, 0);
  const char *bad = "extern \"C\" __global__ void k(int *p) { *p = undeclared; }\n";
  jitk_module *m = NULL;
  cr_assert_eq(jitk_module_create(a, bad, NULL, &m), JITK_ERR_COMPILE);
  cr_assert_null(m);
  /* b compiles it itself and gets the compiler's message. */
  cr_assert_eq(jitk_module_create(b, bad, NULL, &m), JITK_ERR_COMPILE);
  cr_assert(strstr(jitk_errmsg(b), "undeclared") != NULL, "%s", jitk_errmsg(b));
  cr_assert_eq(group(a).images, 0);
  jitk_engine_destroy(a);
  jitk_engine_destroy(b);
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

static jitk_module *with_header(jitk_engine *e, const char *include) {
  const char *src = "#include \"h.cuh\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  const char *opts[] = {include};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = 1;
  o.program_name = "k.cu";
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  return m;
}

Test(cache_share, an_edited_header_is_compiled_again) {
  char *work = jt_tmpdir();
  char path[600], include[600];
  snprintf(path, sizeof path, "%s/h.cuh", work);
  snprintf(include, sizeof include, "-I%s", work);
  put(path, "#define VALUE 111\n");
  jitk_engine *a = share_engine("sm_90", NULL, NULL, 0);
  jitk_engine *b = share_engine("sm_90", NULL, a, 0);
  jitk_module *ma = with_header(a, include);
  size_t na;
  void *old = jt_image_copy(ma, &na);
  /* Another size too, so the edit shows whatever the clock's grain. */
  put(path, "#define VALUE 22222\n");
  jitk_module *mb = with_header(b, include);
  cr_assert_eq(jt_stats_mine(b).compiles, 1, "b took the image of the old header");
  size_t nb;
  const void *ib = image_of(mb, &nb);
  cr_assert(nb != na || memcmp(ib, old, na) != 0);
  /* a's module keeps its old image; the group now has b's. */
  size_t na2;
  const void *ia = image_of(ma, &na2);
  cr_assert(na2 == na && memcmp(ia, old, na) == 0);
  jitk_module_destroy(ma);
  jitk_module *ma2 = with_header(a, include);
  cr_assert_eq(image_of(ma2, &na2), ib, "a did not take b's new image");
  jitk_module_destroy(ma2);
  jitk_module_destroy(mb);
  jitk_engine_destroy(a);
  jitk_engine_destroy(b);
  free(old);
  jt_rmdir(work);
}

/* Two engines sharing images on one counting allocator (tests/common.h):
 * a reads kernel 1 from the disk cache and publishes it, b takes it from
 * the group; then both go, a first. The first failure is returned. */
static jitk_status counted_pair(const char *dir, jt_counter *c) {
  jitk_engine *e[2] = {NULL, NULL};
  jitk_status first = JITK_OK;
  for (int i = 0; i < 2 && first == JITK_OK; i++) {
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = JITK_DEVICE_NONE;
    cfg.arch = "sm_90";
    cfg.cache_dir = dir;
    cfg.cache_mode = JITK_CACHE_READ_ONLY;
    cfg.alloc_fn = jt_counting;
    cfg.alloc_user = c;
    cfg.log_level = JITK_LOG_OFF;
    cfg.share_images_with = e[0];
    first = jitk_engine_create(&cfg, &e[i]);
  }
  jitk_module *m[2] = {NULL, NULL};
  char src[512];
  jt_kernel_source(1, src, sizeof src);
  for (int i = 0; i < 2 && first == JITK_OK; i++)
    first = jitk_module_create(e[i], src, NULL, &m[i]);
  /* Without failures: a read from disk, then a hit in the group. */
  if (c->fail_at == 0) {
    cr_assert_eq(first, JITK_OK, "%s", jitk_errmsg(NULL));
    cr_assert_eq(jt_stats_mine(e[0]).disk_hits, 1);
    cr_assert_eq(jt_stats_mine(e[1]).memory_hits, 1);
    cr_assert_eq(jt_stats_mine(e[1]).disk_hits + jt_stats_mine(e[1]).compiles, 0);
  }
  for (int i = 0; i < 2; i++) jitk_module_destroy(m[i]);
  for (int i = 0; i < 2; i++) jitk_engine_destroy(e[i]);
  return first;
}

Test(cache_share, allocation_failures_lose_nothing, .timeout = 280) {
  char *dir = jt_cache_with_one_kernel();
  jt_counter full = {0, 0, 0};
  cr_assert_eq(counted_pair(dir, &full), JITK_OK, "%s", jitk_errmsg(NULL));
  cr_assert_eq(full.live, 0, "%ld blocks leaked", full.live);
  cr_log_info("%ld allocations", full.calls);
  for (long n = 1; n <= full.calls; n++) {
    jt_counter c = {0, 0, n};
    jitk_status st = counted_pair(dir, &c);
    cr_assert(st == JITK_OK || st == JITK_ERR_OUT_OF_MEMORY,
              "failing allocation %ld of %ld gave %s: %s", n, full.calls, jitk_errname(st),
              jitk_errmsg(NULL));
    cr_assert_eq(c.live, 0, "failing allocation %ld of %ld leaked %ld blocks", n, full.calls,
                 c.live);
  }
  jt_rmdir(dir);
}
