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
 * The group's table is an entry per image, which owns the image's fields
 * (cu NULL) and which engines' entries show and hold (jk_entry.shared).
 * The table takes no reference of its own: an image is in it while some
 * engine's entry holds it and leaves with the last one, so the group never
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
  jk_chains table;
  jk_key_list inflight;
  /* Images one engine took from another's compile or read. */
  uint64_t hits;
};

enum { JK_SHARE_BUCKETS = 1024 };

jitk_status jk_share_create(jitk_engine *e, jk_share **out) {
  jk_share *s = jk_calloc(e, 1, sizeof *s);
  jk_entry **b = jk_calloc(e, JK_SHARE_BUCKETS, sizeof(jk_entry *));
  if (s == NULL || b == NULL) {
    jk_free(e, s);
    jk_free(e, b);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->done, NULL);
  s->engines = 1;
  s->table.buckets = b;
  s->table.num_buckets = JK_SHARE_BUCKETS;
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
  jk_free(e, s->table.buckets);
  jk_free(e, s->inflight.v);
  pthread_cond_destroy(&s->done);
  pthread_mutex_destroy(&s->lock);
  jk_free(e, s);
}

/* The fields of a compiled image, from one entry to another: the group's
 * entry takes a new image's, an engine's entry shows the group's. */
static void copy_image(jk_entry *to, const jk_entry *from) {
  to->image = from->image;
  to->image_size = from->image_size;
  to->kind = from->kind;
  to->name_expressions = from->name_expressions;
  to->lowered = from->lowered;
  to->num_names = from->num_names;
  to->log = from->log;
  to->compile_ms = from->compile_ms;
  to->deps = from->deps;
}

/* An engine's entry stops showing the group's image. */
static void unalias(jk_entry *x) {
  static const jk_entry none;
  copy_image(x, &none);
  x->shared = NULL;
}

jk_share_claim jk_share_get(jitk_engine *e, const jk_key *key, jk_entry *x) {
  jk_share *s = e->cache.share;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    jk_entry *img = jk_chains_find(&s->table, key);
    if (img != NULL) {
      img->refs++;
      s->hits++;
      pthread_mutex_unlock(&s->lock);
      copy_image(x, img);
      x->shared = img;
      return JK_SHARE_HIT;
    }
    if (!jk_key_list_has(&s->inflight, key)) break;
    pthread_cond_wait(&s->done, &s->lock);
  }
  /* Without room to say so, the key is made here without telling the
   * others: at worst another engine makes it too. */
  jk_share_claim claim = jk_key_list_add(e, &s->inflight, key) ? JK_SHARE_MINE : JK_SHARE_NONE;
  pthread_mutex_unlock(&s->lock);
  return claim;
}

void jk_share_put(jitk_engine *e, const jk_key *key, jk_entry *x, jk_share_claim claim, bool ok) {
  jk_share *s = e->cache.share;
  jk_entry *img = ok ? jk_calloc(e, 1, sizeof *img) : NULL;
  if (img != NULL) {
    /* The entry's image moves to the group's entry, which it then holds. */
    img->key = *key;
    img->refs = 1;
    copy_image(img, x);
    x->shared = img;
  }
  pthread_mutex_lock(&s->lock);
  if (claim == JK_SHARE_MINE) jk_key_list_remove(&s->inflight, key);
  /* An image of the key may be in the table already when this engine made
   * the key without claiming it; the first one stays. */
  if (img != NULL && jk_chains_find(&s->table, key) == NULL) jk_chains_add(&s->table, img);
  pthread_cond_broadcast(&s->done);
  pthread_mutex_unlock(&s->lock);
}

void jk_share_release(jitk_engine *e, jk_entry *x, bool stale) {
  jk_entry *img = x->shared;
  jk_share *s = e->cache.share;
  pthread_mutex_lock(&s->lock);
  bool last = --img->refs == 0;
  if ((last || stale) && img->in_table) jk_chains_remove(&s->table, img);
  pthread_mutex_unlock(&s->lock);
  unalias(x);
  if (last) jk_entry_discard(e, img);
}

void jk_share_counts(jitk_engine *e, size_t *engines, size_t *images, uint64_t *hits) {
  jk_share *s = e->cache.share;
  pthread_mutex_lock(&s->lock);
  if (engines) *engines = (size_t)s->engines;
  if (images) *images = s->table.count;
  if (hits) *hits = s->hits;
  pthread_mutex_unlock(&s->lock);
}
