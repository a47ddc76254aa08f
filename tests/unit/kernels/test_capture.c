/*
 * Launches on a stream that captures a CUDA graph, on the stand-in driver
 * (tests/fakecuda), whose cuStreamIsCapturing the test steers: a launch
 * that would compile a specialization while its stream captures is
 * refused with JITK_ERR_STREAM_CAPTURE and a message saying what to do,
 * runs nothing, and leaves the capture alone; after the kind's prepare
 * call (or one launch outside the capture) the same launch is captured.
 * Autotuning, which times with events, is refused too. Launches on other
 * streams are not affected.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "fakecuda/fixture.h"

Test(capture, elementwise_needs_its_specialization_before_the_capture) {
  fakecuda_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  /* Streams are handles the stand-in only compares. */
  jitk_stream s = (jitk_stream)(uintptr_t)0x51, other = (jitk_stream)(uintptr_t)0x52;
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "add", NULL, &k));
  float *x = calloc(1024, 4), *y = calloc(1024, 4), *z = calloc(1024, 4);
  double *xd = calloc(1024, 8), *yd = calloc(1024, 8), *zd = calloc(1024, 8);
  int64_t shape[1] = {1024};
  DLTensor tx = jt_tensor(x, JITK_FLOAT32, 1, shape, NULL),
           ty = jt_tensor(y, JITK_FLOAT32, 1, shape, NULL),
           tz = jt_tensor(z, JITK_FLOAT32, 1, shape, NULL);
  DLTensor dx = jt_tensor(xd, JITK_FLOAT64, 1, shape, NULL),
           dy = jt_tensor(yd, JITK_FLOAT64, 1, shape, NULL),
           dz = jt_tensor(zd, JITK_FLOAT64, 1, shape, NULL);
  jitk_arg a32[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
  jitk_arg a64[] = {jitk_arg_array(&dx), jitk_arg_array(&dy), jitk_arg_array(&dz)};

  /* float32 launched once before the capture; float64 prepared (with its
   * output left out, as a launch may). */
  JT_OK(e, jitk_elementwise_launch(k, s, a32, 3, -1, NULL));
  unsigned long long before = f.count();
  f.capture(s, true);
  JT_OK(e, jitk_elementwise_launch(k, s, a32, 3, -1, NULL));
  cr_assert_eq(f.count(), before + 1, "captured");
  JT_FAILS(e, JITK_ERR_STREAM_CAPTURE, "call jitk_elementwise_prepare with them",
           jitk_elementwise_launch(k, s, a64, 3, -1, NULL));
  cr_assert_eq(f.count(), before + 1, "nothing launched");
  /* Another stream compiles as usual. */
  JT_OK(e, jitk_elementwise_launch(k, other, a64, 3, -1, NULL));
  f.capture(s, false);
  JT_OK(e, jitk_elementwise_prepare(k, a32, 2, -1));
  f.capture(s, true);
  JT_OK(e, jitk_elementwise_launch(k, s, a64, 3, -1, NULL));
  f.capture(s, false);
  /* prepare checks arguments as a launch does. */
  JT_FAILS(e, JITK_ERR_ARGUMENT_COUNT, "", jitk_elementwise_prepare(k, a32, 1, -1));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_elementwise_prepare(NULL, a32, 3, -1));

  jitk_elementwise_destroy(k);
  free(x), free(y), free(z), free(xd), free(yd), free(zd);
  jitk_engine_destroy(e);
}

Test(capture, reduction_prepare_and_autotune) {
  fakecuda_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_stream s = (jitk_stream)(uintptr_t)0x51;
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "colsum", NULL,
                                 &k));
  float *x = calloc(64 * 256, 4), *y = calloc(256, 4);
  int64_t xs[2] = {64, 256}, ys[1] = {256};
  DLTensor tx = jt_tensor(x, JITK_FLOAT32, 2, xs, NULL),
           ty = jt_tensor(y, JITK_FLOAT32, 1, ys, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  int axis0[1] = {0}, axis1[1] = {1};
  f.capture(s, true);
  JT_FAILS(e, JITK_ERR_STREAM_CAPTURE, "call jitk_reduction_prepare with them",
           jitk_reduction_launch(k, s, args, 2, axis0, 1, 0, NULL));
  JT_FAILS(e, JITK_ERR_STREAM_CAPTURE, "autotune before the capture",
           jitk_reduction_autotune(k, s, args, 2, axis0, 1, 0));
  f.capture(s, false);
  JT_OK(e, jitk_reduction_prepare(k, args, 1, axis0, 1, 0));
  f.capture(s, true);
  unsigned long long before = f.count();
  JT_OK(e, jitk_reduction_launch(k, s, args, 2, axis0, 1, 0, NULL));
  cr_assert(f.count() > before, "captured");
  /* Another axis is another specialization. */
  int64_t ys1[1] = {64};
  DLTensor ty1 = jt_tensor(y, JITK_FLOAT32, 1, ys1, NULL);
  jitk_arg args1[] = {jitk_arg_array(&tx), jitk_arg_array(&ty1)};
  JT_FAILS(e, JITK_ERR_STREAM_CAPTURE, "capturing a CUDA graph",
           jitk_reduction_launch(k, s, args1, 2, axis1, 1, 0, NULL));
  f.capture(s, false);
  int bad[1] = {7};
  JT_FAILS(e, JITK_ERR_AXIS, "axis", jitk_reduction_prepare(k, args, 2, bad, 1, 0));

  jitk_reduction_destroy(k);
  free(x), free(y);
  jitk_engine_destroy(e);
}
