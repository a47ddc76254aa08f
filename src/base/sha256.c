/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the remote tier's
 * signed entries: a cluster that shares a secret key accepts from Redis
 * only entries signed with it, so that whoever can write to the database
 * without the key cannot plant a kernel. xxHash, which keys the cache,
 * is fast but not made to resist a forger; this is.
 */
#include <string.h>

#include "base/base.h"

static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state. */
static void compress(uint32_t h[8], const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; i++) {
    const uint32_t t1 =
        k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

void jk_sha256_init(jk_sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->used = 0;
}

void jk_sha256_update(jk_sha256 *s, const void *data, size_t n) {
  const unsigned char *p = data;
  s->len += (uint64_t)n;
  if (s->used > 0) {
    const size_t take = n < 64 - s->used ? n : 64 - s->used;
    memcpy(s->block + s->used, p, take);
    s->used += take;
    p += take;
    n -= take;
    if (s->used < 64) return;
    compress(s->h, s->block);
    s->used = 0;
  }
  for (; n >= 64; p += 64, n -= 64) compress(s->h, p);
  memcpy(s->block, p, n);
  s->used = n;
}

void jk_sha256_final(jk_sha256 *s, unsigned char out[32]) {
  const uint64_t bits = s->len * 8;
  const unsigned char one = 0x80, zero = 0;
  jk_sha256_update(s, &one, 1);
  while (s->used != 56) jk_sha256_update(s, &zero, 1);
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
  jk_sha256_update(s, len, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) out[4 * i + j] = (unsigned char)(s->h[i] >> (24 - 8 * j));
  memset(s, 0, sizeof *s);
}

void jk_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t n,
                    unsigned char out[32]) {
  /* A key longer than a block is hashed first; the block-sized key is
   * padded with zeros and xored with the inner and outer pads. */
  unsigned char k[64] = {0}, pad[64];
  jk_sha256 s;
  if (key_len > 64) {
    jk_sha256_init(&s);
    jk_sha256_update(&s, key, key_len);
    jk_sha256_final(&s, k);
  } else if (key_len > 0) {
    memcpy(k, key, key_len);
  }
  unsigned char inner[32];
  for (int i = 0; i < 64; i++) pad[i] = (unsigned char)(k[i] ^ 0x36);
  jk_sha256_init(&s);
  jk_sha256_update(&s, pad, 64);
  jk_sha256_update(&s, msg, n);
  jk_sha256_final(&s, inner);
  for (int i = 0; i < 64; i++) pad[i] = (unsigned char)(k[i] ^ 0x5c);
  jk_sha256_init(&s);
  jk_sha256_update(&s, pad, 64);
  jk_sha256_update(&s, inner, 32);
  jk_sha256_final(&s, out);
  /* The key's traces do not outlive the call on the stack. */
  jk_wipe(k, sizeof k);
  jk_wipe(pad, sizeof pad);
  jk_wipe(inner, sizeof inner);
}

bool jk_same_secret(const void *a, const void *b, size_t n) {
  /* Every byte is compared whatever the first difference, so that the
   * time taken tells a forger nothing of how much of a tag was right. */
  const volatile unsigned char *x = a, *y = b;
  unsigned char d = 0;
  for (size_t i = 0; i < n; i++) d |= (unsigned char)(x[i] ^ y[i]);
  return d == 0;
}

void jk_wipe(void *p, size_t n) {
  /* Through a volatile pointer, so that the compiler keeps the stores
   * even though nothing reads the memory after them. */
  volatile unsigned char *q = p;
  for (size_t i = 0; i < n; i++) q[i] = 0;
}
