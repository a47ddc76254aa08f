// jitk.h compiles as strict C++17 (-std=c++17 -pedantic -Werror) and links.
#include <jitk/jitk.h>

#include <cstdio>
#include <cstring>

int main() {
  jitk_arg args[] = {jitk_arg_i64(-5), jitk_arg_bf16_bits(jitk_float_to_bfloat16(2.0f)),
                     jitk_arg_array(nullptr)};
  jitk_engine_config cfg;
  if (jitk_engine_config_init(&cfg) != JITK_OK) return 1;
  if (args[0].value.i64 != -5 || args[2].kind != JITK_ARG_ARRAY) return 1;
  if (std::strcmp(jitk_strerror(JITK_OK), "no error") != 0) return 1;
  std::printf("jitk %s from C++17\n", jitk_version());
  return 0;
}
