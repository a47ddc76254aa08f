/* jitk.h compiles as strict C11 (-std=c11 -pedantic -Werror) and links. */
#include <jitk/jitk.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  jitk_arg args[3];
  args[0] = jitk_arg_f32(1.5f);
  args[1] = jitk_arg_c128(1.0, -1.0);
  args[2] = jitk_arg_ptr(NULL, JITK_FLOAT16);
  jitk_dim3 grid = {1, 1, 1};
  (void)grid;
  if (strcmp(jitk_errname(JITK_ERR_NO_DRIVER), "JITK_ERR_NO_DRIVER") != 0) return 1;
  if (args[1].value.c128[1] != -1.0 || args[0].dtype != JITK_FLOAT32) return 1;
  printf("jitk %s from C11\n", jitk_version());
  return 0;
}
