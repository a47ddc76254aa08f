/*
 * Linking with the CUDA driver's own linker (cuLinkCreate and the rest),
 * which relocatable device code uses where nvJitLink cannot: for PTX
 * targets, whose code only the driver compiles for the device it runs on,
 * and where nvJitLink is missing. The NVRTC floor decides what to link and
 * reports failures; this file only drives the linker (driver.h says why
 * the table's calls stay on this floor).
 */
#include <stdint.h>
#include <string.h>

#include "engine.h"
#include "driver/driver.h"

bool jk_cu_has_linker(const jitk_engine *e) {
  const jk_driver *d = &e->drv;
  return d->cuLinkCreate != NULL && d->cuLinkAddData != NULL && d->cuLinkComplete != NULL &&
         d->cuLinkDestroy != NULL;
}

/* Adds one piece; a library the driver refuses as data comes from its
 * file instead, when there is one and the driver can read it. */
static CUresult add_piece(const jk_driver *d, CUlinkState state, const jk_cu_link_piece *p,
                          const char *library_file, char *log, const char **step) {
  *step = "cuLinkAddData";
  CUresult r = d->cuLinkAddData(state, p->type, (void *)p->data, p->size, p->name, 0, NULL, NULL);
  if (p->type == CU_JIT_INPUT_LIBRARY &&
      (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED) && library_file != NULL &&
      d->cuLinkAddFile != NULL) {
    *step = "cuLinkAddFile";
    log[0] = '\0';
    r = d->cuLinkAddFile(state, CU_JIT_INPUT_LIBRARY, library_file, 0, NULL, NULL);
  }
  return r;
}

CUresult jk_cu_link(jitk_engine *e, const jk_cu_link_piece *pieces, int n, const char *library_file,
                    unsigned target, char *log, size_t log_size, void **image, size_t *image_size,
                    const char **step) {
  const jk_driver *d = &e->drv;
  *image = NULL;
  *image_size = 0;
  log[0] = '\0';
  *step = "cuLinkCreate";
  if (!jk_cu_has_linker(e)) return CUDA_ERROR_NOT_SUPPORTED;
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_TARGET};
  void *vals[] = {log, (void *)(uintptr_t)log_size, (void *)(uintptr_t)target};
  CUlinkState state = NULL;
  CUresult r = d->cuLinkCreate(target != 0 ? 3 : 2, opts, vals, &state);
  if (r != CUDA_SUCCESS) return r;
  for (int i = 0; i < n && r == CUDA_SUCCESS; i++)
    r = add_piece(d, state, &pieces[i], library_file, log, step);
  void *linked = NULL;
  size_t size = 0;
  if (r == CUDA_SUCCESS) {
    *step = "cuLinkComplete";
    r = d->cuLinkComplete(state, &linked, &size);
  }
  if (r == CUDA_SUCCESS && size > 0) {
    /* The driver's buffer dies with the link state, so the cubin is
     * copied out first; the NUL after it lets it be read as text. */
    unsigned char *copy = jk_malloc(e, size + 1);
    if (copy != NULL) {
      memcpy(copy, linked, size);
      copy[size] = '\0';
    } else {
      *step = "copying the linked cubin";
    }
    *image = copy;
    *image_size = size;
  }
  d->cuLinkDestroy(state);
  return r;
}
