// What a generated kernel needs of CUDA, on the CPU: the tests' emulator
// (tests/emu/emu.c) compiles jitk's generated source with the host's C++
// compiler after this header, and runs a launch block by block, every
// thread of a block in turn.
//
// Blocks run one after another (in a shuffled order when asked), so a
// kernel whose result depends on the order of its blocks shows it.
// Threads run as coroutines when the kernel synchronizes (the entry's
// `coop`, set when its source names a barrier or a shuffle): a thread runs
// until it reaches __syncthreads, a shuffle or __syncwarp, and a barrier
// opens when every thread of the block (of the warp, for a shuffle) that
// has not returned waits at it. A barrier that can never open (threads of one warp
// waiting at different ones) and a full-warp shuffle missing a lane are
// reported as errors, since on a GPU their result is undefined. Without
// `coop` each thread is one plain call of the kernel. A coroutine starts
// on its own stack through ucontext and switches with _setjmp/_longjmp,
// which, unlike swapcontext, make no system call.
//
// A launch with clusters runs cluster after cluster, and a cluster's
// blocks take turns, each running until every one of its threads has
// returned or waits at a cluster barrier; the barrier opens when all the
// cluster's threads wait at it. A block reads another's shared memory
// (distributed shared memory) as that block left it at the barrier.
//
// Shared memory is a static variable, one copy for the block that runs,
// in a section of its own that each block starts by filling with 0xCD
// bytes, as a GPU leaves it with what was there: a kernel that reads
// shared memory it did not write gets garbage, not the zeros or the last
// block's values. Memory is the host's: the stand-in driver's allocations
// are malloc's.
//
// matmul.cuh's inline PTX has JITK_EMULATOR forms, which call the
// jitk_emu_* functions here: cp.async copies at once (so a kernel that
// read a stage before waiting for its copies would not show it), ldmatrix
// and mma.sync gather the whole warp's registers as the PTX ISA lays them
// out. The wgmma kernel (TMA, mbarriers, wgmma) has no such forms.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <setjmp.h>
#include <ucontext.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define JT_EMU_ASAN 1
#endif

/* CUDA's own vector types (uint3, dim3, float4...), which its headers
 * define for host code too; this header's macros below replace the
 * qualifiers those headers define. */
#include <vector_types.h>

/* The built-in variables, as variables rather than macros: CUDA's host
 * headers name function parameters gridDim and blockDim. */
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace jt_emu {

inline uint3 &tid = threadIdx, &bid = blockIdx;
inline dim3 &bdim = blockDim, &gdim = gridDim;

enum state { READY, AT_BLOCK, AT_WARP, AT_CLUSTER, DONE };

struct thread {
  jmp_buf at;
  state st;
  /* What a lane puts out for the others: a shuffle's value, an
   * ldmatrix's row address, an mma's fragments. */
  unsigned char slot[48];
  bool started;
#ifdef JT_EMU_ASAN
  void *fake_stack;
#endif
};

/* A launch's threads: the block's, or with clusters each block's of the
 * cluster that runs, block after block (nthreads a block, `blocks` of
 * them; the cluster's block q is blockIdx `in_cluster[q]`). */
inline thread *threads;
inline unsigned int nthreads, current, blocks = 1;
inline uint3 in_cluster[8];
inline bool coop;
inline jmp_buf scheduler;
inline ucontext_t first;
inline char *stacks;
inline size_t stack_size;
inline char error[512];
inline void (*body)(void *);
inline void *body_arg;
#ifdef JT_EMU_ASAN
inline const void *sched_bottom;
inline size_t sched_size;
inline void *sched_fake_stack;
#endif

inline void fail(const char *what) {
  if (error[0] == '\0')
    snprintf(error, sizeof error, "block (%u, %u, %u), thread (%u, %u, %u): %s", bid.x, bid.y,
             bid.z, tid.x, tid.y, tid.z, what);
}

/* The bounds of the shared variables' section, which the linker defines
 * when the kernel has any. */
extern "C" char __start_jt_emu_shared[] __attribute__((weak));
extern "C" char __stop_jt_emu_shared[] __attribute__((weak));

/* Not instrumented: under ASan the section holds the variables' red zones
 * too, which only ASan's own shadow describes. */
__attribute__((no_sanitize("address"))) inline void poison_shared() {
  if (__start_jt_emu_shared == nullptr) return;
  for (volatile char *p = __start_jt_emu_shared; p < __stop_jt_emu_shared; p++) *p = (char)0xCD;
}

/* Clusters: the blocks of a cluster take turns in the one section of
 * shared variables, each from barrier to cluster barrier; `saved` holds
 * each block's shared memory while it does not run, which is what the
 * others read through distributed shared memory. Byte by byte and not
 * instrumented, like poison_shared. */
inline unsigned char *saved;
inline size_t shared_size() {
  return __start_jt_emu_shared == nullptr ? 0 : (size_t)(__stop_jt_emu_shared - __start_jt_emu_shared);
}
__attribute__((no_sanitize("address"))) inline void shared_swap(unsigned int q, bool in) {
  volatile char *sec = __start_jt_emu_shared, *mine = (volatile char *)saved + q * shared_size();
  for (size_t i = 0; i < shared_size(); i++) {
    if (in)
      sec[i] = mine[i];
    else
      mine[i] = sec[i];
  }
}

inline void set_tid(unsigned int t) {
  bid = in_cluster[t / nthreads];
  t %= nthreads;
  tid.x = t % bdim.x;
  tid.y = t / bdim.x % bdim.y;
  tid.z = t / (bdim.x * bdim.y);
}

/* The running thread waits at a barrier: back to the scheduler, which
 * resumes it once the barrier opens. */
inline void wait(state at) {
  if (!coop) {
    fail("a barrier or shuffle in a kernel run without coroutines");
    return;
  }
  thread *me = &threads[current];
  me->st = at;
  if (_setjmp(me->at) == 0) {
#ifdef JT_EMU_ASAN
    __sanitizer_start_switch_fiber(&me->fake_stack, sched_bottom, sched_size);
#endif
    _longjmp(scheduler, 1);
  }
#ifdef JT_EMU_ASAN
  __sanitizer_finish_switch_fiber(me->fake_stack, nullptr, nullptr);
#endif
}

inline void trampoline() {
#ifdef JT_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &sched_bottom, &sched_size);
#endif
  body(body_arg);
  threads[current].st = DONE;
#ifdef JT_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, sched_bottom, sched_size);
#endif
  _longjmp(scheduler, 1);
}

/* Lanes of warp `w` that exist and have not returned, and how many of
 * them wait at a shuffle. */
inline void warp_counts(unsigned int w, unsigned int *live, unsigned int *waiting) {
  *live = *waiting = 0;
  for (unsigned int t = w * 32; t < nthreads * blocks && t < w * 32 + 32; t++) {
    if (threads[t].st == DONE) continue;
    ++*live;
    *waiting += threads[t].st == AT_WARP;
  }
}

/* Runs block q's threads (of the cluster that runs; q = 0 without
 * clusters) as coroutines until every one returns (1) or every one that
 * has not waits at a cluster barrier (2); 0 on an error. A thread starts,
 * at its first turn, on its own stack from a copy of `first` (made once a
 * launch); later turns resume it. */
inline int run_block_coop(unsigned int q) {
  const unsigned int lo = q * nthreads, hi = lo + nthreads;
  for (;;) {
    bool ran = false;
    for (unsigned int t = lo; t < hi; t++) {
      if (threads[t].st != READY) continue;
      current = t;
      set_tid(t);
      if (_setjmp(scheduler) == 0) {
#ifdef JT_EMU_ASAN
        __sanitizer_start_switch_fiber(&sched_fake_stack, stacks + (size_t)t * stack_size,
                                       stack_size);
#endif
        if (!threads[t].started) {
          /* Threads start in order, each on its own stack. */
          threads[t].started = true;
          ucontext_t c = first;
          c.uc_stack.ss_sp = stacks + (size_t)t * stack_size;
          c.uc_stack.ss_size = stack_size;
          c.uc_link = nullptr;
          makecontext(&c, trampoline, 0);
          setcontext(&c);
        }
        _longjmp(threads[t].at, 1);
      }
#ifdef JT_EMU_ASAN
      __sanitizer_finish_switch_fiber(sched_fake_stack, nullptr, nullptr);
#endif
      ran = true;
      if (error[0] != '\0') return 0;
    }
    if (ran) continue;
    /* Nothing can run: open the barriers that every thread they concern
     * has reached. */
    unsigned int live = 0, at_block = 0, at_cluster = 0;
    for (unsigned int t = lo; t < hi; t++) {
      live += threads[t].st != DONE;
      at_block += threads[t].st == AT_BLOCK;
      at_cluster += threads[t].st == AT_CLUSTER;
    }
    if (live == 0) return 1;
    if (at_cluster == live) return 2;
    bool opened = false;
    for (unsigned int w = lo / 32; w * 32 < hi; w++) {
      unsigned int wl, ww;
      warp_counts(w, &wl, &ww);
      if (ww == 0) continue;
      if (ww != wl) continue;
      for (unsigned int t = w * 32; t < hi && t < w * 32 + 32; t++)
        if (threads[t].st == AT_WARP) threads[t].st = READY;
      opened = true;
    }
    if (!opened && at_block == live) {
      for (unsigned int t = lo; t < hi; t++)
        if (threads[t].st == AT_BLOCK) threads[t].st = READY;
      opened = true;
    }
    if (!opened) {
      tid.x = tid.y = tid.z = 0;
      fail(
          "deadlock: the block's threads wait at barriers that cannot open (a warp divided "
          "between a shuffle and __syncthreads, or a block between __syncthreads and a "
          "cluster barrier)");
      return 0;
    }
  }
}

/* One cluster's blocks (or one block), each in turn from cluster barrier
 * to cluster barrier; a cluster barrier opens when every thread of every
 * block of the cluster waits at it. */
inline bool run_cluster_coop() {
  for (unsigned int t = 0; t < nthreads * blocks; t++) {
    threads[t].st = READY;
    threads[t].started = false;
  }
  poison_shared();
  for (unsigned int q = 0; blocks > 1 && q < blocks; q++) shared_swap(q, false);
  for (;;) {
    bool waiting = false;
    for (unsigned int q = 0; q < blocks; q++) {
      if (blocks > 1) shared_swap(q, true);
      const int r = run_block_coop(q);
      if (blocks > 1) shared_swap(q, false);
      if (r == 0) return false;
      waiting |= r == 2;
    }
    if (!waiting) return true;
    for (unsigned int t = 0; t < nthreads * blocks; t++) {
      if (threads[t].st == DONE) {
        current = t;
        set_tid(t);
        fail("a cluster barrier while threads of the cluster have returned");
        return false;
      }
      threads[t].st = READY;
    }
  }
}

/* A parameter's value from where the launch's caller left it: the driver
 * copies the bytes, so their address need not be aligned for the type. */
template <typename T>
T load(const void *p) {
  T v;
  memcpy(static_cast<void *>(&v), p, sizeof v);
  return v;
}

/* The launch: every block of the grid in order, or in an order shuffled
 * by `seed` (non-zero); with clusters (cluster[0] > 0), every cluster so,
 * its blocks together. */
template <typename... A, size_t... I>
int launch(void (*kernel)(A...), void **params, const unsigned *grid, const unsigned *block,
           const unsigned *cluster, int with_coroutines, unsigned long long seed, char *err,
           size_t err_size, std::index_sequence<I...>) {
  error[0] = '\0';
  coop = with_coroutines != 0;
  gdim.x = grid[0], gdim.y = grid[1], gdim.z = grid[2];
  bdim.x = block[0], bdim.y = block[1], bdim.z = block[2];
  nthreads = block[0] * block[1] * block[2];
  const unsigned cd[3] = {cluster[0] ? cluster[0] : 1, cluster[0] ? cluster[1] : 1,
                          cluster[0] ? cluster[2] : 1};
  blocks = cd[0] * cd[1] * cd[2];
  if (blocks > sizeof in_cluster / sizeof in_cluster[0] || grid[0] % cd[0] || grid[1] % cd[1] ||
      grid[2] % cd[2] || (blocks > 1 && (!coop || nthreads % 32 != 0))) {
    snprintf(err, err_size,
             "clusters of (%u, %u, %u) blocks: the emulator takes up to 8 blocks of whole warps "
             "that synchronize, in a grid of whole clusters",
             cd[0], cd[1], cd[2]);
    blocks = 1;
    return 1;
  }
  struct call {
    void (*kernel)(A...);
    void **params;
    static void run(void *p) {
      call *c = static_cast<call *>(p);
      c->kernel(load<A>(c->params[I])...);
    }
  } c{kernel, params};
  body = call::run;
  body_arg = &c;
  const size_t all = (size_t)nthreads * blocks;
  if (coop) {
    getcontext(&first);
    stack_size = (size_t)256 << 10;
    threads = static_cast<thread *>(calloc(all, sizeof(thread)));
    void *m = mmap(nullptr, stack_size * all, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    stacks = m == MAP_FAILED ? nullptr : static_cast<char *>(m);
    saved = blocks > 1 ? static_cast<unsigned char *>(malloc(shared_size() * blocks + 1)) : nullptr;
    if (threads == nullptr || stacks == nullptr || (blocks > 1 && saved == nullptr)) {
      snprintf(err, err_size, "no memory for %zu threads' stacks", all);
      free(threads);
      free(saved);
      if (stacks != nullptr) munmap(stacks, stack_size * all);
      blocks = 1;
      return 1;
    }
  }
  /* The units the walk below visits: clusters, numbered as the grid's
   * blocks would be in a grid of clusters. */
  const unsigned ug[3] = {grid[0] / cd[0], grid[1] / cd[1], grid[2] / cd[2]};
  unsigned long long units = (unsigned long long)ug[0] * ug[1] * ug[2];
  /* A full-period walk of the units: start + k * step (mod units) with
   * the step prime to the count visits each once. */
  unsigned long long start = 0, step = 1;
  if (seed != 0 && units > 1) {
    start = seed % units;
    step = (seed >> 17) % units | 1;
    for (;;) {
      unsigned long long a = step, b = units;
      while (b != 0) {
        unsigned long long r = a % b;
        a = b;
        b = r;
      }
      if (a == 1) break;
      step = (step + 2) % units;
      if (step == 0) step = 1;
    }
  }
  bool ok = true;
  for (unsigned long long k = 0; k < units && ok; k++) {
    unsigned long long u = (start + k * step) % units;
    const unsigned ux = (unsigned)(u % ug[0]), uy = (unsigned)(u / ug[0] % ug[1]),
                   uz = (unsigned)(u / ((unsigned long long)ug[0] * ug[1]));
    /* The cluster's blocks in the order of their ranks (x fastest). */
    for (unsigned q = 0; q < blocks; q++) {
      in_cluster[q].x = ux * cd[0] + q % cd[0];
      in_cluster[q].y = uy * cd[1] + q / cd[0] % cd[1];
      in_cluster[q].z = uz * cd[2] + q / (cd[0] * cd[1]);
    }
    bid = in_cluster[0];
    if (coop) {
      ok = run_cluster_coop();
      continue;
    }
    poison_shared();
    for (unsigned int t = 0; t < nthreads && ok; t++) {
      set_tid(t);
      body(body_arg);
      ok = error[0] == '\0';
    }
  }
  if (coop) {
    munmap(stacks, stack_size * all);
    free(threads);
    free(saved);
    threads = nullptr;
    saved = nullptr;
  }
  blocks = 1;
  if (!ok) snprintf(err, err_size, "%s", error);
  return ok ? 0 : 1;
}

/* A shuffle: every lane of the warp puts its value out, then reads the
 * one of `src` (its own when `src` is out of range). */
template <typename T>
T shuffle(T x, unsigned int mask, int src, bool in_range) {
  static_assert(sizeof(T) <= 16, "a shuffle moves at most 16 bytes");
  if (mask != 0xffffffffu) fail("a shuffle with a partial mask (the emulator knows full warps)");
  thread *me = &threads[current];
  memcpy(me->slot, &x, sizeof(T));
  wait(AT_WARP);
  unsigned int w = current / 32, live, waiting;
  warp_counts(w, &live, &waiting);
  if (live != 32) fail("a full-warp shuffle while lanes of the warp are missing or returned");
  T r = x;
  if (in_range) memcpy(&r, threads[w * 32 + (unsigned)src].slot, sizeof(T));
  wait(AT_WARP);
  return r;
}

inline unsigned int lane() { return current % 32; }

/* A warp-wide instruction: every lane of the warp puts n bytes out, all
 * wait, then `use` reads the slots of the warp's lanes (it gets the
 * first lane's thread), and all wait again before a slot is reused. */
template <typename F>
void warp_exchange(const void *mine, size_t n, const char *what, F use) {
  thread *me = &threads[current];
  memcpy(me->slot, mine, n);
  wait(AT_WARP);
  unsigned int w = current / 32, live, waiting;
  warp_counts(w, &live, &waiting);
  if (live != 32) fail(what);
  use(&threads[w * 32]);
  wait(AT_WARP);
}

/* Shared memory's addresses, as __cvta_generic_to_shared gives them and
 * inline PTX takes them: offsets into the section of shared variables. */
inline unsigned char *shared_at(unsigned int addr) {
  return reinterpret_cast<unsigned char *>(__start_jt_emu_shared) + addr;
}

/* __syncthreads_and, _or and _count: at a barrier every thread of the
 * block puts its predicate out, then each reads those of the threads
 * that have not returned, and a second barrier keeps the values until
 * all have read them. */
enum vote { ALL, ANY, COUNT };
inline int block_vote(int p, vote op) {
  thread *me = &threads[current];
  p = p != 0;
  memcpy(me->slot, &p, sizeof p);
  wait(AT_BLOCK);
  int all = 1, any = 0, count = 0;
  const unsigned int lo = current / nthreads * nthreads;
  for (unsigned int t = lo; t < lo + nthreads; t++) {
    if (threads[t].st == DONE) continue;
    int v;
    memcpy(&v, threads[t].slot, sizeof v);
    all &= v;
    any |= v;
    count += v;
  }
  wait(AT_BLOCK);
  return op == ALL ? all : op == ANY ? any : count;
}

}  // namespace jt_emu

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __shared__
#undef __constant__
#undef __align__
#undef __launch_bounds__
constexpr int warpSize = 32;
/* The dynamic shared memory a kernel declares (extern __shared__), which
 * the emulator turns into an array of this many bytes: the most a block
 * of an sm_90 device may have. */
#define JT_EMU_DYNAMIC_SHARED (227 * 1024)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static __attribute__((section("jt_emu_shared")))
#define __constant__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

inline void __syncthreads() { jt_emu::wait(jt_emu::AT_BLOCK); }
inline void __syncwarp(unsigned int = 0xffffffffu) { jt_emu::wait(jt_emu::AT_WARP); }
inline int __syncthreads_and(int p) { return jt_emu::block_vote(p, jt_emu::ALL); }
inline int __syncthreads_or(int p) { return jt_emu::block_vote(p, jt_emu::ANY); }
inline int __syncthreads_count(int p) { return jt_emu::block_vote(p, jt_emu::COUNT); }
inline void __threadfence() {}
inline void __threadfence_block() {}

template <typename T>
T __shfl_sync(unsigned int mask, T x, int src, int width = 32) {
  int l = (int)jt_emu::lane();
  return jt_emu::shuffle(x, mask, (l / width) * width + (src % width), true);
}
template <typename T>
T __shfl_down_sync(unsigned int mask, T x, unsigned int d, int width = 32) {
  int l = (int)jt_emu::lane(), to = l + (int)d;
  return jt_emu::shuffle(x, mask, to, to / width == l / width);
}
template <typename T>
T __shfl_up_sync(unsigned int mask, T x, unsigned int d, int width = 32) {
  int l = (int)jt_emu::lane(), to = l - (int)d;
  return jt_emu::shuffle(x, mask, to, to >= 0 && to / width == l / width);
}
template <typename T>
T __shfl_xor_sync(unsigned int mask, T x, int m, int width = 32) {
  int l = (int)jt_emu::lane(), to = l ^ m;
  return jt_emu::shuffle(x, mask, to, to / width == l / width);
}

inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }

/* The bit casts, one memcpy each. */
template <typename To, typename From>
inline To jt_emu_bits(From x) {
  static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
  To r;
  memcpy(&r, &x, sizeof r);
  return r;
}

/* A shared variable's address in the shared window: its offset in the
 * section (jt_emu::shared_at goes back). */
inline size_t __cvta_generic_to_shared(const void *p) {
  return (size_t)(reinterpret_cast<const char *>(p) - jt_emu::__start_jt_emu_shared);
}

/* What matmul.cuh's inline PTX does, for its JITK_EMULATOR forms. */
#define JITK_EMULATOR 1

/* Clusters: the block's rank in its cluster, the cluster's barrier, and
 * four floats of the shared memory of the cluster's block `rank` at the
 * place of `p` in this block's (jt_emu::saved holds the others'). */
inline unsigned int jitk_emu_cluster_rank() { return jt_emu::current / jt_emu::nthreads; }
inline void jitk_emu_cluster_barrier() { jt_emu::wait(jt_emu::AT_CLUSTER); }
inline float4 jitk_emu_cluster_load4(const float *p, unsigned int rank) {
  float4 v;
  if (rank >= jt_emu::blocks) {
    jt_emu::fail("a load from the shared memory of a block the cluster does not have");
    memset(&v, 0, sizeof v);
    return v;
  }
  const char *at = reinterpret_cast<const char *>(p);
  if (rank != jitk_emu_cluster_rank())
    at = reinterpret_cast<const char *>(jt_emu::saved) + rank * jt_emu::shared_size() +
         (at - jt_emu::__start_jt_emu_shared);
  memcpy(&v, at, sizeof v);
  return v;
}
inline float jitk_emu_exp2_ftz(float x) {
  float y = exp2f(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}
inline float jitk_emu_rcp_ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.0f, x);
  float y = 1.0f / x;
  return std::fpclassify(y) == FP_SUBNORMAL ? std::copysign(0.0f, y) : y;
}
/* cp.async: size bytes to shared memory, the first src_size of them from
 * global memory and the rest zeros; done at once, so commit and wait
 * have nothing to do. */
inline void jitk_emu_cp_async(unsigned int dst, const void *src, int size, int src_size) {
  unsigned char *d = jt_emu::shared_at(dst);
  if ((uintptr_t)d % (unsigned)size != 0 || (uintptr_t)src % (unsigned)size != 0)
    jt_emu::fail("cp.async of a misaligned address");
  memcpy(d, src, (size_t)src_size);
  memset(d + src_size, 0, (size_t)(size - src_size));
}
template <typename T>
inline void jitk_emu_ld_shared(unsigned int addr, T *dst, size_t bytes) {
  if (addr % bytes != 0) jt_emu::fail("a vector load from shared memory off its size");
  memcpy(dst, jt_emu::shared_at(addr), bytes);
}
/* ldmatrix .x4 (.trans): lanes 8i to 8i + 7 give the rows of 8 x 8
 * matrix i of 16-bit elements; lane l gets in register i the elements
 * (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i, or of its
 * transpose. */
inline void jitk_emu_ldmatrix_x4(unsigned int &r0, unsigned int &r1, unsigned int &r2,
                                 unsigned int &r3, unsigned int addr, bool trans) {
  unsigned int out[4] = {0, 0, 0, 0};
  const unsigned int l = jt_emu::lane();
  jt_emu::warp_exchange(&addr, sizeof addr, "an ldmatrix while lanes of the warp are missing",
                        [&](jt_emu::thread *warp) {
                          auto row = [&](unsigned int i, unsigned int r) {
                            unsigned int a;
                            memcpy(&a, warp[8 * i + r].slot, 4);
                            if (a % 16 != 0) jt_emu::fail("an ldmatrix row off 16 bytes");
                            return jt_emu::shared_at(a);
                          };
                          for (unsigned int i = 0; i < 4; i++) {
                            uint16_t lo, hi;
                            if (!trans) {
                              memcpy(&lo, row(i, l / 4) + 4 * (l % 4), 2);
                              memcpy(&hi, row(i, l / 4) + 4 * (l % 4) + 2, 2);
                            } else {
                              memcpy(&lo, row(i, 2 * (l % 4)) + 2 * (l / 4), 2);
                              memcpy(&hi, row(i, 2 * (l % 4) + 1) + 2 * (l / 4), 2);
                            }
                            out[i] = lo | (unsigned int)hi << 16;
                          }
                        });
  r0 = out[0], r1 = out[1], r2 = out[2], r3 = out[3];
}
/* mma.sync with float32 accumulators, D = A B + D: m16n8k16 of float16
 * (kind 0) or bfloat16 (1) elements, m16n8k8 of tf32 (2: float32 whose low
 * 13 bits of mantissa are ignored), fragments as the PTX ISA lays them
 * out over the lanes (g = lane / 4, t = lane % 4): D's (g, 2t + v % 2),
 * plus 8 rows for v >= 2; A's row g (+ 8 for registers 1 and 3) and B's
 * column g, at k 2t and 2t + 1 (+ 8 for registers 2 and 3 of A, 1 of
 * B), or for tf32 at k t (+ 4 for registers 2 and 3 of A, 1 of B). */
inline float jt_emu_mma_element(int kind, const unsigned char *slot, int reg, int half) {
  unsigned int bits;
  memcpy(&bits, slot + 4 * reg, 4);
  if (kind == 2) return jt_emu_bits<float>(bits & 0xFFFFE000u);
  const uint16_t h = (uint16_t)(half ? bits >> 16 : bits);
  if (kind == 1) return jt_emu_bits<float>((unsigned int)h << 16);
  return (float)jt_emu_bits<_Float16>(h);
}
inline void jitk_emu_mma(int kind, float (&d)[4], const unsigned int (&a)[4], unsigned int b0,
                         unsigned int b1) {
  unsigned int mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
  const unsigned int l = jt_emu::lane(), g = l / 4, t = l % 4;
  const int ks = kind == 2 ? 8 : 16;
  float out[4];
  jt_emu::warp_exchange(
      mine, sizeof mine, "an mma while lanes of the warp are missing", [&](jt_emu::thread *warp) {
        /* A[r][k] and B[k][n], found in the lane and register that
                           * hold them. */
        auto A = [&](int r, int k) {
          if (kind == 2)
            return jt_emu_mma_element(2, warp[(r % 8) * 4 + k % 4].slot, (r >= 8) + 2 * (k >= 4),
                                      0);
          return jt_emu_mma_element(kind, warp[(r % 8) * 4 + (k % 8) / 2].slot,
                                    (r >= 8) + 2 * (k >= 8), k % 2);
        };
        auto B = [&](int k, int n) {
          if (kind == 2) return jt_emu_mma_element(2, warp[n * 4 + k % 4].slot, 4 + (k >= 4), 0);
          return jt_emu_mma_element(kind, warp[n * 4 + (k % 8) / 2].slot, 4 + (k >= 8), k % 2);
        };
        for (int v = 0; v < 4; v++) {
          const int r = (int)g + (v >= 2) * 8, n = 2 * (int)t + v % 2;
          double sum = d[v];
          for (int k = 0; k < ks; k++) sum += (double)A(r, k) * B(k, n);
          out[v] = (float)sum;
        }
      });
  for (int v = 0; v < 4; v++) d[v] = out[v];
}

template <typename T>
T __ldg(const T *p) {
  return *p;
}

/* Atomics: one thread runs at a time, so plain reads and writes. */
inline unsigned int atomicInc(unsigned int *p, unsigned int v) {
  unsigned int old = *p;
  *p = old >= v ? 0 : old + 1;
  return old;
}
template <typename T>
T atomicAdd(T *p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
T atomicExch(T *p, T v) {
  T old = *p;
  *p = v;
  return old;
}
template <typename T>
T atomicCAS(T *p, T cmp, T v) {
  T old = *p;
  if (old == cmp) *p = v;
  return old;
}
template <typename T>
T atomicMax(T *p, T v) {
  T old = *p;
  if (v > old) *p = v;
  return old;
}
template <typename T>
T atomicMin(T *p, T v) {
  T old = *p;
  if (v < old) *p = v;
  return old;
}

/* CUDA's global min and max for mixed integer and floating arguments. */
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

inline int __float_as_int(float x) { return jt_emu_bits<int>(x); }
inline float __int_as_float(int x) { return jt_emu_bits<float>(x); }
inline unsigned int __float_as_uint(float x) { return jt_emu_bits<unsigned int>(x); }
inline float __uint_as_float(unsigned int x) { return jt_emu_bits<float>(x); }
inline long long __double_as_longlong(double x) { return jt_emu_bits<long long>(x); }
inline double __longlong_as_double(long long x) { return jt_emu_bits<double>(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __tanhf(float x) { return tanhf(x); }
/* The funnel shifts: the 64 bits hi:lo shifted by s % 32, the low (r) or
 * high (l) 32 bits of the result. */
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int s) {
  return (unsigned int)((((unsigned long long)hi << 32) | lo) >> (s & 31));
}
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int s) {
  return (unsigned int)(((((unsigned long long)hi << 32) | lo) << (s & 31)) >> 32);
}

/* An entry point `sym`(params, grid, block, coop, seed, error, size) that
 * runs the kernel the rest names (variadic, as an expression such as
 * `f<float, double>` has commas); 0 when every block ran without an
 * error. */
#define JT_EMU_ENTRY_AT(sym, ...)                                                          \
  extern "C" int sym(void **params, const unsigned *grid, const unsigned *block,            \
                     const unsigned *cluster, int coop, unsigned long long seed, char *err,  \
                     size_t err_size) {                                                     \
    return jt_emu::launch(&__VA_ARGS__, params, grid, block, cluster, coop, seed, err,       \
                          err_size, std::make_index_sequence<jt_emu_arity(&__VA_ARGS__)>{}); \
  }

/* One entry point a kernel: jt_emu_<name>. */
#define JT_EMU_ENTRY(name) JT_EMU_ENTRY_AT(jt_emu_##name, name)

/* The N-th name expression's entry, jt_emu_expr_N, and its function's
 * address, jt_emu_expr_fn_N (see emu.c's write_expressions). */
#define JT_EMU_EXPR(n, ...)                                                                \
  extern "C" void *jt_emu_expr_fn_##n() { return reinterpret_cast<void *>(&__VA_ARGS__); } \
  JT_EMU_ENTRY_AT(jt_emu_expr_##n, __VA_ARGS__)

template <typename... A>
constexpr size_t jt_emu_arity(void (*)(A...)) {
  return sizeof...(A);
}
