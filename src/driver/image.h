#ifndef JITK_SRC_DRIVER_IMAGE_H
#define JITK_SRC_DRIVER_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <jitk/jitk.h>

const char *jk_image_kind_name(jitk_image_kind k);

/* Reads a cubin's target (90 for sm_90) after checking that the ELF
 * header, section table and sections lie within `size` bytes.
 * JITK_ERR_INVALID_IMAGE describes a truncated or foreign file. */
jitk_status jk_cubin_arch(const jitk_engine *e, const void *data, size_t size, int *sm);

/* Tells the kind of an image (or checks the one given), and for cubins
 * checks structure and that the architecture runs on the engine's device
 * (or matches a compile-only engine's target). */
jitk_status jk_image_check(const jitk_engine *e, jitk_image_kind kind, const void *data,
                           size_t size, jitk_image_kind *kind_out);

/*
 * The parameter sizes of kernel `symbol`, read from the image without the
 * driver: from ptxas's .nv.info.<symbol> section of a cubin, or from the
 * .entry declaration in PTX. Returns the number of parameters (sizes[i]
 * filled for each), -1 when the image does not describe the kernel, -2
 * when it is malformed or has more than `cap` parameters.
 */
int jk_cubin_param_sizes(const void *data, size_t size, const char *symbol, uint32_t *sizes,
                         int cap);
int jk_ptx_param_sizes(const char *ptx, const char *symbol, uint32_t *sizes, int cap);

/* Finds an uncompressed cubin inside a fatbin, preferring the one for
 * `sm` (90 for sm_90), so kernels and parameters can be read from it.
 * false when the fatbin holds none (only PTX, or compressed entries). */
bool jk_fatbin_cubin(const void *data, size_t size, int sm, const void **cubin, size_t *cubin_size);

/* Receives one kernel name (not NUL-terminated). */
typedef void (*jk_kernel_name_fn)(void *user, const char *name, size_t len);

/* Lists the kernels (entry points) an image defines: function symbols
 * marked as entries in a cubin, .entry directives in PTX. Returns how
 * many, or -1 when the image cannot tell (fatbins, malformed images). */
int jk_image_kernels(jitk_image_kind kind, const void *data, size_t size, jk_kernel_name_fn fn,
                     void *user);

/* 1 when the image defines kernel `symbol`, 0 when it does not, -1 when it
 * cannot tell. Lets lookups of unknown names fail without a driver error. */
int jk_image_has_kernel(jitk_image_kind kind, const void *data, size_t size, const char *symbol);

/* Lists the variables an image defines that cuModuleGetGlobal can find:
 * object symbols in a cubin's global, initialized-global and constant
 * sections, .global and .const declarations (not .extern ones) in PTX.
 * jitk's own and the CUDA runtime's internal tables (names starting with
 * "__cudart_" or "$") are left out. Returns how many, or -1 when the image
 * cannot tell (fatbins without a readable cubin, malformed images). */
int jk_image_globals(jitk_image_kind kind, const void *data, size_t size, jk_kernel_name_fn fn,
                     void *user);

/* 1 when the image defines variable `symbol`, 0 when it does not, -1 when
 * it cannot tell. Any object symbol of that name counts, so the driver
 * decides the doubtful cases rather than this reader. */
int jk_image_has_global(jitk_image_kind kind, const void *data, size_t size, const char *symbol);

/* Loads an image into the engine's context (cuModuleLoadDataEx, with the
 * JIT's error log in the message), and unloads a module. */
jitk_status jk_module_load(jitk_engine *e, const void *image, jitk_image_kind kind, CUmodule *out);
void jk_module_unload(jitk_engine *e, CUmodule mod);

#endif
