/*
 * Generated kernels run on the CPU, for the tests of machines without a
 * GPU. An engine on the stand-in driver (tests/fakecuda) logs the source
 * of every kernel it generates; the emulator keeps the newest, ties it to
 * the module loaded next, and at each launch of that module compiles the
 * source with the host's C++ compiler after cuda_on_cpu.hpp, loads it and
 * runs the launch's grid there, on the parameters jitk passed the driver.
 * The stand-in's "device memory" is host memory, so the kernel reads and
 * writes the arrays the test gave. Kernels are compiled with the
 * sanitizers the test was built with, and else with UBSan's checks as
 * traps, so a misaligned vector access or an overflowing index stops the
 * test where it happens. JT_EMU_TRACE set in the environment prints each
 * launch (kernel, source file, grid, block) to stderr.
 */
#ifndef JITK_TESTS_EMU_H
#define JITK_TESTS_EMU_H

#include <stdint.h>

#include "jitk/jitk.h"

typedef struct jt_emu jt_emu;

/* Loads the stand-in driver (before any engine does), hooks its loads
 * and launches, and has its device report `sms` multiprocessors (few
 * make small grids, which run faster here and loop more). NULL, with a
 * message on stderr, when the stand-in cannot be loaded. */
jt_emu *jt_emu_open(int sms);

/* An engine on the stand-in whose generated kernels run on the CPU
 * (its log goes to the emulator; JITK_DUMP_SOURCE is set for the whole
 * process). The caller destroys it before jt_emu_close. */
jitk_engine *jt_emu_engine(jt_emu *em);

/* For a process whose engines are not the test's own (the Python
 * package's), which print generated sources to stderr: file descriptor 2
 * goes to a file of the emulator's, which takes the sources from it at
 * each module load and passes every other line on to the real stderr
 * (the rest at jt_emu_close). 0, or -1 when stderr cannot be moved. */
int jt_emu_capture_stderr(jt_emu *em);

/* Non-zero: later launches run their blocks in an order this seed
 * shuffles; 0, in order. */
void jt_emu_set_seed(jt_emu *em, uint64_t seed);

/* What went wrong in the last launch that failed (the compile, a
 * kernel's own error), with the path of its source; "" when none. */
const char *jt_emu_error(const jt_emu *em);

/* Forgets the last error (a scratch folder with a failed kernel's files
 * is kept all the same). */
void jt_emu_clear_error(jt_emu *em);

/* How many launches ran on the CPU. */
unsigned long long jt_emu_runs(const jt_emu *em);

/* Seconds spent compiling kernels for the CPU, and running them. */
void jt_emu_times(const jt_emu *em, double *build_s, double *run_s);

/* Unhooks the stand-in and removes the scratch folder, unless a launch
 * failed (its files stay for a look). */
void jt_emu_close(jt_emu *em);

#endif
