/*
 * libFuzzer target for the parameter-list parser, through the public API.
 *
 * The input is split at its first two NUL bytes into in_params,
 * out_params and the operation; jitk_elementwise_create parses the two
 * lists, checks names and placeholders, and scans the operation. It must
 * never crash, leak or read out of bounds, and every failure must be a
 * parse or argument error whose offset lies inside one of the three texts.
 * Built only with -DJITK_FUZZ=ON under clang; .ci/run runs it for a
 * bounded time over the checked-in corpus.
 */
#include <jitk/jitk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jitk_engine *engine;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  if (jitk_engine_create(&cfg, &engine) != JITK_OK) {
    fprintf(stderr, "fuzz_params: no engine: %s\n", jitk_errmsg(NULL));
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 3);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = text[size + 1] = text[size + 2] = '\0';
  /* Missing parts get a plain default, so short inputs still reach the
   * parser of the lists they do have. */
  const char *in = text, *out = "T z", *op = "z = x";
  size_t at = strlen(in) + 1;
  if (at <= size) {
    out = text + at;
    at += strlen(out) + 1;
    if (at <= size) op = text + at;
  }
  jitk_elementwise *k = NULL;
  jitk_status st = jitk_elementwise_create(engine, in, out, op, "fuzzed", NULL, &k);
  if (st == JITK_OK) {
    if (k == NULL) abort();
    const char *src = NULL;
    /* Nothing compiled yet: there is no source to show. */
    (void)jitk_elementwise_source(k, &src);
    jitk_elementwise_destroy(k);
  } else {
    if (st != JITK_ERR_PARSE && st != JITK_ERR_INVALID_ARGUMENT) abort();
    int off = jitk_error_offset(engine);
    /* The operation is parsed too: #line directives in it are refused
     * with their offset. */
    size_t longest = strlen(in) > strlen(out) ? strlen(in) : strlen(out);
    if (strlen(op) > longest) longest = strlen(op);
    if (st == JITK_ERR_PARSE && (off < 0 || (size_t)off > longest)) abort();
    if (jitk_errmsg(engine)[0] == '\0') abort();
  }
  free(text);
  return 0;
}
