/* SHA-256 and HMAC-SHA-256 against the published test vectors (FIPS
 * 180-4's examples, RFC 4231's HMAC cases), whole and in pieces of every
 * size, so that the block buffering is checked as well as the rounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "common.h"

static void hex(const unsigned char *d, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void expect_sha(const void *msg, size_t n, const char *want) {
  unsigned char d[32];
  char got[65];
  jk_sha256 s;
  jk_sha256_init(&s);
  jk_sha256_update(&s, msg, n);
  jk_sha256_final(&s, d);
  hex(d, 32, got);
  cr_assert_str_eq(got, want, "%zu bytes whole", n);
  /* The same bytes in pieces of every size from 1 to 130. */
  for (size_t piece = 1; piece <= 130; piece++) {
    jk_sha256_init(&s);
    for (size_t at = 0; at < n; at += piece)
      jk_sha256_update(&s, (const unsigned char *)msg + at, n - at < piece ? n - at : piece);
    jk_sha256_final(&s, d);
    hex(d, 32, got);
    cr_assert_str_eq(got, want, "%zu bytes in pieces of %zu", n, piece);
  }
}

Test(base_sha256, the_published_digests) {
  expect_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  expect_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  expect_sha(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* A million 'a's: many blocks, and a length past 32 bits of bits. */
  char *a = malloc(1000000);
  memset(a, 'a', 1000000);
  expect_sha(a, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(a);
}

static void expect_hmac(const void *key, size_t kn, const void *msg, size_t n, const char *want) {
  unsigned char d[32];
  char got[65];
  jk_hmac_sha256(key, kn, msg, n, d);
  hex(d, 32, got);
  cr_assert_str_eq(got, want, "key of %zu bytes", kn);
}

Test(base_sha256, the_rfc_4231_macs) {
  unsigned char k20[20], k131[131];
  memset(k20, 0x0b, sizeof k20);
  memset(k131, 0xaa, sizeof k131);
  expect_hmac(k20, sizeof k20, "Hi There", 8,
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const char *q = "what do ya want for nothing?";
  expect_hmac("Jefe", 4, q, strlen(q),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  /* A key longer than a block is hashed first. */
  const char *big = "Test Using Larger Than Block-Size Key - Hash Key First";
  expect_hmac(k131, sizeof k131, big, strlen(big),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

Test(base_sha256, tags_compare_whole_and_wipes_zero) {
  unsigned char a[32], b[32];
  memset(a, 7, sizeof a);
  memcpy(b, a, sizeof b);
  cr_assert(jk_same_secret(a, b, 32));
  b[31] ^= 1;
  cr_assert_not(jk_same_secret(a, b, 32));
  b[31] ^= 1;
  b[0] ^= 0x80;
  cr_assert_not(jk_same_secret(a, b, 32));
  cr_assert(jk_same_secret(a, b, 0));
  jk_wipe(a, sizeof a);
  for (size_t i = 0; i < sizeof a; i++) cr_assert_eq(a[i], 0);
}
