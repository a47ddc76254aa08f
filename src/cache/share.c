/*
 * Compiled images shared by the engines of one process
 * (jitk_engine_config.share_images_with).
 *
 * A process that drives several GPUs makes one engine per device. Each
 * engine keeps its own table of loaded modules, since a module belongs to
 * one device's context; the image a module is loaded from does not. The
 * engines of a share group keep one table of images, keyed as the memory
 * table is (the key names the target architecture, so devices of different
 * architectures never meet in it). An engine whose own table misses asks
 * the group before its disk tiers: an image another engine compiled or
 * read is loaded from memory, and a key another engine is compiling is
 * waited for rather than compiled twice, even with the disk cache off.
 *
 * The group holds no image of its own: an image is in the table while some
 * engine's entry holds it, and leaves with the last one, so the group never
 * keeps more than the engines' tables together do. Every engine made with
 * the same allocator (jitk_engine_create checks), any member frees what
 * another allocated. The group itself goes with its last engine.
 *
 * Lock order: an engine's table_lock is never held while the group's lock
 * is taken, nor the other way round; the group's lock guards the table,
 * the keys in flight and the count of engines only.
 */
#include <string.h>

#include "cache/cache.h"
#include "engine.h"

struct jk_share {
  pthread_mutex_t lock;
  pthread_cond_t done; /* a key in flight finished, one way or the other */
  int engines;
  jk_image **buckets;
  size_t num_buckets, count;
  jk_key *inflight;
  size_t num_inflight, cap_inflight;
  /* Images one engine took from another's compile or read. */
  uint64_t hits;
};

enum { JK_SHARE_BUCKETS = 1024 };

jitk_status jk_share_create(jitk_engine *e, jk_share **out) {
  jk_share *s = jk_calloc(e, 1, sizeof *s);
  jk_image **b = jk_calloc(e, JK_SHARE_BUCKETS, sizeof *b);
  if (s == NULL || b == NULL) {
    jk_free(e, s);
    jk_free(e, b);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->done, NULL);
  s->engines = 1;
  s->buckets = b;
  s->num_buckets = JK_SHARE_BUCKETS;
  *out = s;
  return JITK_OK;
}

void jk_share_join(jk_share *s) {
  pthread_mutex_lock(&s->lock);
  s->engines++;
  pthread_mutex_unlock(&s->lock);
}

void jk_share_leave(jitk_engine *e, jk_share *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&s->lock);
  bool last = --s->engines == 0;
  pthread_mutex_unlock(&s->lock);
  if (!last) return;
  /* Every engine's entries went before it left, and with them every
   * image: the table is empty. */
  jk_free(e, s->buckets);
  jk_free(e, s->inflight);
  pthread_cond_destroy(&s->done);
  pthread_mutex_destroy(&s->lock);
  jk_free(e, s);
}

static size_t bucket_of(const jk_share *s, const jk_key *k) {
  uint64_t h = 0;
  memcpy(&h, k->bytes + 8, sizeof h);
  return (size_t)(h & (s->num_buckets - 1));
}

static jk_image *find(const jk_share *s, const jk_key *key) {
  for (jk_image *i = s->buckets[bucket_of(s, key)]; i != NULL; i = i->next)
    if (memcmp(i->key.bytes, key->bytes, 16) == 0) return i;
  return NULL;
}

static void unlink_image(jk_share *s, jk_image *img) {
  jk_image **p = &s->buckets[bucket_of(s, &img->key)];
  while (*p != NULL && *p != img) p = &(*p)->next;
  if (*p == img) *p = img->next;
  img->next = NULL;
  img->in_table = false;
  s->count--;
}

static bool inflight_index(const jk_share *s, const jk_key *key, size_t *at) {
  for (size_t i = 0; i < s->num_inflight; i++)
    if (memcmp(s->inflight[i].bytes, key->bytes, 16) == 0) {
      *at = i;
      return true;
    }
  return false;
}

/* The image's fields, seen through the entry, which does not own them. */
static void alias(jk_entry *x, jk_image *img) {
  x->shared = img;
  x->image = img->image;
  x->image_size = img->image_size;
  x->kind = img->kind;
  x->name_expressions = img->name_expressions;
  x->lowered = img->lowered;
  x->num_names = img->num_names;
  x->log = img->log;
  x->compile_ms = img->compile_ms;
  x->deps = img->deps;
}

static void unalias(jk_entry *x) {
  x->shared = NULL;
  x->image = NULL;
  x->image_size = 0;
  x->name_expressions = NULL;
  x->lowered = NULL;
  x->num_names = 0;
  x->log = NULL;
  x->compile_ms = 0;
  memset(&x->deps, 0, sizeof x->deps);
}

static void image_free(jitk_engine *e, jk_image *img) {
  for (size_t i = 0; i < img->num_names; i++) {
    if (img->name_expressions) jk_free(e, img->name_expressions[i]);
    if (img->lowered) jk_free(e, img->lowered[i]);
  }
  jk_free(e, img->name_expressions);
  jk_free(e, img->lowered);
  jk_deps_free(e, &img->deps);
  jk_free(e, img->log);
  jk_free(e, img->image);
  jk_free(e, img);
}

jk_share_claim jk_share_get(jitk_engine *e, const jk_key *key, jk_entry *x) {
  jk_share *s = e->cache.share;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    jk_image *img = find(s, key);
    if (img != NULL) {
      img->refs++;
      s->hits++;
      pthread_mutex_unlock(&s->lock);
      alias(x, img);
      return JK_SHARE_HIT;
    }
    size_t at;
    if (!inflight_index(s, key, &at)) break;
    pthread_cond_wait(&s->done, &s->lock);
  }
  jk_share_claim claim = JK_SHARE_NONE;
  if (s->num_inflight == s->cap_inflight) {
    size_t cap = s->cap_inflight ? 2 * s->cap_inflight : 8;
    jk_key *v = jk_realloc(e, s->inflight, cap * sizeof *v);
    if (v != NULL) {
      s->inflight = v;
      s->cap_inflight = cap;
    }
  }
  /* Without room to say so, the key is made here without telling the
   * others: at worst another engine makes it too. */
  if (s->num_inflight < s->cap_inflight) {
    s->inflight[s->num_inflight++] = *key;
    claim = JK_SHARE_MINE;
  }
  pthread_mutex_unlock(&s->lock);
  return claim;
}

void jk_share_drop(jitk_engine *e, jk_entry *x) {
  jk_share *s = e->cache.share;
  jk_image *img = x->shared;
  pthread_mutex_lock(&s->lock);
  if (img->in_table) unlink_image(s, img);
  bool last = --img->refs == 0;
  pthread_mutex_unlock(&s->lock);
  unalias(x);
  if (last) image_free(e, img);
}

void jk_share_put(jitk_engine *e, const jk_key *key, jk_entry *x, jk_share_claim claim, bool ok) {
  jk_share *s = e->cache.share;
  jk_image *img = ok ? jk_calloc(e, 1, sizeof *img) : NULL;
  if (img != NULL) {
    /* The entry's fields move to the image, which it then holds. */
    img->key = *key;
    img->refs = 1;
    img->image = x->image;
    img->image_size = x->image_size;
    img->kind = x->kind;
    img->name_expressions = x->name_expressions;
    img->lowered = x->lowered;
    img->num_names = x->num_names;
    img->log = x->log;
    img->compile_ms = x->compile_ms;
    img->deps = x->deps;
    x->shared = img;
  }
  pthread_mutex_lock(&s->lock);
  size_t at;
  if (claim == JK_SHARE_MINE && inflight_index(s, key, &at))
    s->inflight[at] = s->inflight[--s->num_inflight];
  /* An image of the key may be in the table already when this engine made
   * the key without claiming it; the first one stays. */
  if (img != NULL && find(s, key) == NULL) {
    size_t b = bucket_of(s, key);
    img->next = s->buckets[b];
    s->buckets[b] = img;
    img->in_table = true;
    s->count++;
  }
  pthread_cond_broadcast(&s->done);
  pthread_mutex_unlock(&s->lock);
}

void jk_share_release(jitk_engine *e, jk_entry *x) {
  jk_image *img = x->shared;
  jk_share *s = e->cache.share;
  pthread_mutex_lock(&s->lock);
  bool last = --img->refs == 0;
  if (last && img->in_table) unlink_image(s, img);
  pthread_mutex_unlock(&s->lock);
  unalias(x);
  if (last) image_free(e, img);
}

void jk_share_counts(jitk_engine *e, size_t *engines, size_t *images, uint64_t *hits) {
  jk_share *s = e->cache.share;
  pthread_mutex_lock(&s->lock);
  if (engines) *engines = (size_t)s->engines;
  if (images) *images = s->count;
  if (hits) *hits = s->hits;
  pthread_mutex_unlock(&s->lock);
}
