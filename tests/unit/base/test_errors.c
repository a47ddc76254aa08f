/* The error model: codes, names, per-engine and per-thread messages, and
 * the log sink. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

Test(errors, codes_are_stable) {
  /* Codes are ABI: these numbers must never change. */
  cr_assert_eq(JITK_OK, 0);
  cr_assert_eq(JITK_ERR_INVALID_ARGUMENT, 1);
  cr_assert_eq(JITK_ERR_OUT_OF_MEMORY, 2);
  cr_assert_eq(JITK_ERR_NO_DRIVER, 3);
  cr_assert_eq(JITK_ERR_NO_DEVICE, 4);
  cr_assert_eq(JITK_ERR_CUDA, 5);
  cr_assert_eq(JITK_ERR_NVRTC, 6);
  cr_assert_eq(JITK_ERR_COMPILE, 7);
  cr_assert_eq(JITK_ERR_NOT_FOUND, 8);
  cr_assert_eq(JITK_ERR_ARGUMENT_COUNT, 9);
  cr_assert_eq(JITK_ERR_ARGUMENT_TYPE, 10);
  cr_assert_eq(JITK_ERR_LAUNCH_CONFIG, 11);
  cr_assert_eq(JITK_ERR_SHARED_MEMORY, 12);
  cr_assert_eq(JITK_ERR_INVALID_IMAGE, 13);
  cr_assert_eq(JITK_ERR_IO, 14);
  cr_assert_eq(JITK_ERR_UNSUPPORTED, 15);
  cr_assert_eq(JITK_ERR_DEVICE_OUT_OF_MEMORY, 16);
  cr_assert_eq(JITK_ERR_INVALID_ARRAY, 17);
  cr_assert_eq(JITK_ERR_PARSE, 18);
  cr_assert_eq(JITK_ERR_INTERNAL, 19);
  cr_assert_eq(JITK_ERR_CACHE, 20);
  cr_assert_eq(JITK_ERR_STREAM_CAPTURE, 21);
  cr_assert_eq(JITK_ERR_AXIS, 22);
}

Test(errors, every_code_has_a_name_and_text) {
#define CHECK_NAME(name, code, text)           \
  cr_assert_str_eq(jitk_errname(name), #name); \
  cr_assert_str_eq(jitk_strerror(name), text); \
  cr_assert(strlen(text) > 0);
  JITK_STATUS_LIST(CHECK_NAME)
#undef CHECK_NAME
  cr_assert_str_eq(jitk_errname((jitk_status)9999), "JITK_ERR_UNKNOWN");
  cr_assert_str_eq(jitk_strerror((jitk_status)-3), "unknown status code");
}

Test(errors, failure_without_engine_goes_to_thread_fallback) {
  jitk_engine_config cfg;
  JT_OK(NULL, jitk_engine_config_init(&cfg));
  cfg.struct_size = 3; /* a caller who forgot jitk_engine_config_init */
  jitk_engine *e = (jitk_engine *)0x1;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_config_init",
           jitk_engine_create(&cfg, &e));
  cr_assert_eq(e, (jitk_engine *)0x1, "out-parameter touched on failure");
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "engine is NULL", jitk_engine_create(NULL, NULL));
  /* A size that ends inside a field (half of the arch pointer, half of
   * the cache_max_bytes) is refused rather than read in part. */
  const size_t cut[] = {offsetof(jitk_engine_config, arch) + 4,
                        offsetof(jitk_engine_config, cache_max_bytes) + 4, sizeof cfg + 8};
  for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
    JT_OK(NULL, jitk_engine_config_init(&cfg));
    cfg.struct_size = cut[i];
    char needle[64];
    snprintf(needle, sizeof needle, "struct_size is %zu", cut[i]);
    JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, needle, jitk_engine_create(&cfg, &e));
  }
  /* An older form, ending after `cache_mode`: the fields past it keep
   * their defaults (a cache_max_bytes of -5 would be refused). */
  JT_OK(NULL, jitk_engine_config_init(&cfg));
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  cfg.struct_size = offsetof(jitk_engine_config, cache_mode) + sizeof cfg.cache_mode;
  cfg.cache_max_bytes = -5;
  e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  jitk_engine_destroy(e);
}

Test(errors, compile_only_engine_needs_arch) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  jitk_engine *e = NULL;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "needs an arch", jitk_engine_create(&cfg, &e));
  cfg.arch = "sm_9";
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "sm_XY", jitk_engine_create(&cfg, &e));
  cfg.arch = "sm_35";
  JT_FAILS(NULL, JITK_ERR_UNSUPPORTED, "cannot compile for sm_35", jitk_engine_create(&cfg, &e));
  cfg.arch = "vulkan";
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "\"vulkan\"", jitk_engine_create(&cfg, &e));
  cfg.device = -7;
  cfg.arch = NULL;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "device -7", jitk_engine_create(&cfg, &e));
}

Test(errors, messages_are_per_engine) {
  jitk_engine *a = jt_compile_engine("sm_90");
  jitk_engine *b = jt_compile_engine("sm_80");
  cr_assert_str_eq(jitk_errmsg(a), "no error");
  jitk_module *m = NULL;
  JT_FAILS(a, JITK_ERR_INVALID_ARGUMENT, "source is NULL", jitk_module_create(a, NULL, NULL, &m));
  JT_FAILS(b, JITK_ERR_INVALID_ARGUMENT, "module is NULL", jitk_module_create(b, "", NULL, NULL));
  cr_assert(strstr(jitk_errmsg(a), "source is NULL") != NULL, "a kept its own message");
  cr_assert_eq(jitk_error_offset(a), -1);
  jitk_engine_destroy(a);
  jitk_engine_destroy(b);
}

typedef struct thread_arg {
  jitk_engine *e;
  const char *bad_option;
  jitk_status status;
  char message[512];
} thread_arg;

static void *fail_in_thread(void *p) {
  thread_arg *t = p;
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = &t->bad_option;
  o.num_options = 1;
  jitk_module *m = NULL;
  t->status = jitk_module_create(t->e, "extern \"C\" __global__ void k() {}", &o, &m);
  snprintf(t->message, sizeof t->message, "%s", jitk_errmsg(t->e));
  return NULL;
}

Test(errors, messages_are_per_thread) {
  jitk_engine *e = jt_compile_engine("sm_90");
  thread_arg args[2] = {{e, "-arch=sm_80", JITK_OK, ""},
                        {e, "--gpu-architecture=sm_75", JITK_OK, ""}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, fail_in_thread, &args[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(args[i].status, JITK_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(args[i].message, args[i].bad_option) != NULL,
              "thread %d sees its own message: %s", i, args[i].message);
  }
  /* This thread never failed on e. */
  cr_assert_str_eq(jitk_errmsg(e), "no error");
  jitk_engine_destroy(e);
}

typedef struct log_capture {
  int lines;
  int warn_or_worse;
  char last[1024];
} log_capture;

static void capture(void *user, jitk_log_level level, const char *message) {
  log_capture *c = user;
  c->lines++;
  if (level <= JITK_LOG_WARN) c->warn_or_worse++;
  snprintf(c->last, sizeof c->last, "%s", message);
}

Test(errors, log_callback_receives_levels) {
  log_capture cap = {0, 0, ""};
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.log_fn = capture;
  cfg.log_user = &cap;
  cfg.log_level = JITK_LOG_INFO;
  jitk_engine *e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  cr_assert(cap.lines >= 1, "engine creation is logged at info");
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m));
  cr_assert(strstr(cap.last, "compiled module.cu for sm_90") != NULL, "last line: %s", cap.last);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);

  /* At error level, info lines are filtered out. */
  cap.lines = 0;
  cfg.log_level = JITK_LOG_ERROR;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m));
  cr_assert_eq(cap.lines, 0);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(errors, nothing_is_written_to_stdout) {
  /* Point stdout at a file, do work with debug logging to stderr, and
   * check the file stays empty. */
  char path[] = "/tmp/jitk-stdout-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  dup2(fd, STDOUT_FILENO);
  setenv("JITK_LOG", "debug", 1);
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m);
  jitk_module_create(e, "this does not compile", NULL, &m);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  jitk_engine *none = NULL;
  jitk_engine_create(NULL, &none); /* fails on a machine without a GPU */
  jitk_engine_destroy(none);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  off_t size = lseek(fd, 0, SEEK_END);
  close(fd);
  unlink(path);
  cr_assert_eq(size, 0, "the library wrote %lld bytes to stdout", (long long)size);
}

Test(errors, destroy_null_is_a_no_op) {
  jitk_engine_destroy(NULL);
  jitk_module_destroy(NULL);
}

Test(errors, env_log_level) {
  setenv("JITK_LOG", "off", 1);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cr_assert_eq(cfg.log_level, JITK_LOG_DEFAULT);
  log_capture cap = {0, 0, ""};
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.log_fn = capture;
  cfg.log_user = &cap;
  jitk_engine *e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  jitk_engine_destroy(e);
  cr_assert_eq(cap.lines, 0);
  setenv("JITK_LOG", "info", 1);
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  jitk_engine_destroy(e);
  cr_assert(cap.lines > 0);
}
