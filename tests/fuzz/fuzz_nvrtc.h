/*
 * NVRTC replaced by stubs in an engine's function table, for the fuzz
 * targets that generate kernels (fuzz_codegen, fuzz_matmul): no input
 * costs a compile. The stub "compiles" by returning the outcome and the
 * log the input asks for (stub_result, stub_log), reads every byte of the
 * source, headers and options that NVRTC would (so ASan checks them), and
 * counts the programs created and not yet destroyed (stub_programs).
 */
#ifndef JITK_FUZZ_NVRTC_H
#define JITK_FUZZ_NVRTC_H

#include <stdio.h>
#include <string.h>

#include "nvrtc/nvrtc.h"
#include "engine.h"
#include "fuzz_common.h"

/* What the stubs answer for the current input. */
static const char *stub_log = "";
static nvrtcResult stub_result = NVRTC_SUCCESS;
static char stub_program_name[256];
static int stub_programs; /* created and not yet destroyed */

/* Bytes that only need to look like a cubin: a compile-only engine keeps
 * the image without reading its sections. */
static const unsigned char stub_cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41};

static char stub_program;
/* What out-parameters hold before a call, to see that a failure leaves
 * them alone. */
static const char stub_sentinel_text[] = "untouched";

static nvrtcResult stub_create(nvrtcProgram *prog, const char *src, const char *name,
                               int num_headers, const char *const *headers,
                               const char *const *include_names) {
  /* Touch every byte that NVRTC would read, so ASan checks them. */
  volatile size_t n = strlen(src);
  (void)n;
  for (int i = 0; i < num_headers; i++) {
    n = strlen(headers[i]);
    n = strlen(include_names[i]);
  }
  snprintf(stub_program_name, sizeof stub_program_name, "%s", name);
  stub_programs++;
  *prog = (nvrtcProgram)(void *)&stub_program;
  return NVRTC_SUCCESS;
}

static nvrtcResult stub_destroy(nvrtcProgram *prog) {
  if (*prog != (nvrtcProgram)(void *)&stub_program) jf_broken("destroying a foreign program");
  stub_programs--;
  *prog = NULL;
  return NVRTC_SUCCESS;
}

static nvrtcResult stub_compile(nvrtcProgram prog, int num_options, const char *const *options) {
  (void)prog;
  for (int i = 0; i < num_options; i++) {
    volatile size_t n = strlen(options[i]);
    (void)n;
  }
  return stub_result;
}

static nvrtcResult stub_log_size(nvrtcProgram prog, size_t *size) {
  (void)prog;
  *size = strlen(stub_log) + 1;
  return NVRTC_SUCCESS;
}

static nvrtcResult stub_get_log(nvrtcProgram prog, char *log) {
  (void)prog;
  memcpy(log, stub_log, strlen(stub_log) + 1);
  return NVRTC_SUCCESS;
}

static nvrtcResult stub_cubin_size(nvrtcProgram prog, size_t *size) {
  (void)prog;
  *size = sizeof stub_cubin;
  return NVRTC_SUCCESS;
}

static nvrtcResult stub_get_cubin(nvrtcProgram prog, char *cubin) {
  (void)prog;
  memcpy(cubin, stub_cubin, sizeof stub_cubin);
  return NVRTC_SUCCESS;
}

/* Generated kernels never ask for PTX or lowered names on an sm_90
 * engine; a call would mean the generator changed what it asks for. */
static nvrtcResult stub_ptx_size(nvrtcProgram prog, size_t *size) {
  (void)prog;
  (void)size;
  jf_broken("nvrtcGetPTXSize called for a cubin target");
  return NVRTC_ERROR_INTERNAL_ERROR;
}

static nvrtcResult stub_ptx(nvrtcProgram prog, char *ptx) {
  (void)prog;
  (void)ptx;
  jf_broken("nvrtcGetPTX called for a cubin target");
  return NVRTC_ERROR_INTERNAL_ERROR;
}

static nvrtcResult stub_add_name(nvrtcProgram prog, const char *name) {
  (void)prog;
  (void)name;
  jf_broken("a generated kernel added a name expression");
  return NVRTC_ERROR_INTERNAL_ERROR;
}

static void install_stubs(jitk_engine *e) {
  e->nvrtc.nvrtcCreateProgram = stub_create;
  e->nvrtc.nvrtcDestroyProgram = stub_destroy;
  e->nvrtc.nvrtcCompileProgram = stub_compile;
  e->nvrtc.nvrtcGetProgramLogSize = stub_log_size;
  e->nvrtc.nvrtcGetProgramLog = stub_get_log;
  e->nvrtc.nvrtcGetCUBINSize = stub_cubin_size;
  e->nvrtc.nvrtcGetCUBIN = stub_get_cubin;
  e->nvrtc.nvrtcGetPTXSize = stub_ptx_size;
  e->nvrtc.nvrtcGetPTX = stub_ptx;
  e->nvrtc.nvrtcAddNameExpression = stub_add_name;
}

#endif
