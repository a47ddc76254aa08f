// A device function in a file of its own, as an existing project has it:
// built by nvcc with -rdc=true -dlto -c into an object that jitk links
// with kernels it compiles (tests/unit/nvrtc/test_link_program.c and the
// linking tests of tests/gpu/test_raw.c).
__device__ float scale(float x) { return 3.0f * x + 1.0f; }
