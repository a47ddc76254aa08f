#ifndef JITK_SRC_DRIVER_IMAGE_H
#define JITK_SRC_DRIVER_IMAGE_H

#include <jitk/jitk.h>

const char *jk_image_kind_name(jitk_image_kind k);

/* Reads a cubin's target (90 for sm_90) after checking that the ELF
 * header, section table and sections lie within `size` bytes.
 * JITK_ERR_INVALID_IMAGE describes a truncated or foreign file. */
jitk_status jk_cubin_arch(const jitk_engine *e, const void *data, size_t size,
                          int *sm);

/* Tells the kind of an image (or checks the one given), and for cubins
 * checks structure and that the architecture runs on the engine's device
 * (or matches a compile-only engine's target). */
jitk_status jk_image_check(const jitk_engine *e, jitk_image_kind kind,
                           const void *data, size_t size,
                           jitk_image_kind *kind_out);

#endif
