// jitk/matmul_sm90.cuh: the Hopper (sm_90a) tile loop of matmul plans:
// warpgroup MMA (wgmma) on operands the tensor memory accelerator (TMA)
// copies into shared memory, in a persistent, warp-specialized kernel.
//
// A block is three warpgroups (384 threads) and stays resident for the
// whole grid's work (one block per multiprocessor): warpgroup 0 is the
// producer, one thread of which issues the TMA copies of each K-step's A
// and B tiles into a STAGES-deep ring; warpgroups 1 and 2 are consumers
// running wgmma m64nBNk16 (k8 for tf32, k32 for 8-bit floats) straight
// from shared memory. In the ping-pong schedule (the default but for long
// K on 16-bit and tf32 inputs) they take whole 128 x 128 tiles in turns,
// so that one's epilogue overlaps the other's MMAs; in the cooperative one
// each computes 64 rows of every 128 x BN tile. Full and empty mbarriers
// hand ring slots back and forth, so the producer runs
// ahead into the next tile during epilogues. TMA fills rows, columns and K
// beyond the matrices with zeros, so tails need no code; TMA stores (or
// put2) skip outputs outside D.
//
// Shared memory per stage, both tiles in TMA's 128-byte swizzle:
//   A, K-major (A row-major): 128 rows (m) of 128 bytes of K (64 16-bit
//      elements, 32 tf32 or 128 8-bit).
//   A, M-major (A column-major, 16-bit only): 2 slabs of BK rows (k) by 64
//      elements of m.
//   B, K-major (B column-major): BN rows (n) of 128 bytes of K.
//   B, N-major (B row-major, 16-bit only): BN / 64 slabs of BK rows (k)
//      by 64 elements of n.
#pragma once

#include <jitk/matmul.cuh>

namespace jitk {
namespace mm90 {

// A CUtensorMap (cuTensorMapEncodeTiled's output), opaque to the kernel;
// passed as a __grid_constant__ parameter so that TMA can read it.
struct __align__(64) tensor_map {
  unsigned long long w[16];
};

// N maps in one parameter: A's, one a phase, where A is read by phases
// (phase_tile).
template <int N>
struct tensor_maps {
  tensor_map m[N];
};

using mm::smem_u32;

// --- mbarriers --------------------------------------------------------------

__device__ __forceinline__ void bar_init(unsigned int bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
// Arrives and tells the barrier to also wait for `bytes` of TMA traffic.
__device__ __forceinline__ void bar_expect(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned int bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed. A fresh barrier
// counts the phase before its first (parity 1) as completed.
__device__ __forceinline__ void bar_wait(unsigned int bar, unsigned int parity) {
  unsigned int done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// --- TMA --------------------------------------------------------------------

// One box of a 3-D tensor map (coordinates innermost first) into shared
// memory at `dst`, counted on the barrier `bar`.
__device__ __forceinline__ void tma_load(unsigned int dst, const tensor_map *map, unsigned int bar,
                                         int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// The same box into shared memory at `dst` in every block of the cluster
// that `mask` names (bit r: the block of rank r), each counting it on its
// own barrier at `bar` (the same offsets in every block).
__device__ __forceinline__ void tma_load_mc(unsigned int dst, const tensor_map *map, unsigned int bar,
                                            int c0, int c1, int c2, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar),
      "h"(mask)
      : "memory");
}
// Arrives on the barrier at `bar` of the cluster's block of rank `rank`.
__device__ __forceinline__ void bar_arrive_at(unsigned int bar, unsigned int rank) {
  asm volatile(
      "{\n.reg .b32 r;\nmapa.shared::cluster.u32 r, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [r];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}

// One box from shared memory at `src` to the tensor at the coordinates;
// TMA skips the box's elements outside the tensor.
__device__ __forceinline__ void tma_store(const tensor_map *map, unsigned int src, int c0, int c1,
                                          int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
          reinterpret_cast<unsigned long long>(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(src)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until the committed stores have read their shared memory.
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Waits until the committed stores are done.
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Makes this thread's ordinary shared-memory writes visible to TMA.
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Synchronizes the 128 threads of one warpgroup on named barrier `id`.
__device__ __forceinline__ void wg_sync(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

// wg_sync that also counts the warpgroup's threads whose p is true.
__device__ __forceinline__ unsigned int wg_count(int id, bool p) {
  unsigned int n;
  asm volatile(
      "{\n.reg .pred q;\nsetp.ne.u32 q, %2, 0;\nbar.red.popc.u32 %0, %1, 128, q;\n}\n"
      : "=r"(n)
      : "r"(id), "r"(static_cast<unsigned int>(p))
      : "memory");
  return n;
}

// --- wgmma ------------------------------------------------------------------

// Shared-memory matrix descriptor for the 128-byte swizzle: start address,
// leading and stride byte offsets, all in 16-byte units.
__device__ __forceinline__ unsigned long long desc(unsigned int addr, unsigned int lbo,
                                                   unsigned int sbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>(lbo >> 4) << 16) |
         (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 62);
}
// desc(addr + bytes, lbo, sbo) from d = desc(addr, lbo, sbo), bytes a
// multiple of 16: the start address field holds addr / 16 in its low 14
// bits, and shared-memory addresses stay below 2^18, so adding bytes / 16
// to the low word never carries into the next field. A K-step's
// descriptors are then one add each from their stage's, rather than a
// mask, a shift and an or each (docs/PERFORMANCE.md, "2026-12-04, 14:50
// UTC on").
__device__ __forceinline__ unsigned long long desc_at(unsigned long long d, unsigned int bytes) {
  const unsigned int lo = static_cast<unsigned int>(d) + (bytes >> 4);
  return (d & 0xFFFFFFFF00000000ull) | lo;
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the
// asynchronous MMAs that own them.
template <int R>
__device__ __forceinline__ void wg_pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// Generated by tools/gen_wgmma.py: D += A B on a 64 x N tile, A and B
// from descriptors; TA = 1 reads A M-major, TB = 1 B N-major (16-bit
// inputs only).
template <int TA, int TB>
__device__ __forceinline__ void wgmma_f16_n128(float (&d)[64], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, %66, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_bf16_n128(float (&d)[64], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, %66, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
__device__ __forceinline__ void wgmma_tf32_n128(float (&d)[64], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_f16_n256(float (&d)[128], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, %130, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_bf16_n256(float (&d)[128], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, %130, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
__device__ __forceinline__ void wgmma_tf32_n256(float (&d)[128], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b));
}
__device__ __forceinline__ void wgmma_e4m3_n128(float (&d)[64], unsigned long long a, unsigned long long b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_e4m3_e5m2_n128(float (&d)[64], unsigned long long a, unsigned long long b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_e5m2_e4m3_n128(float (&d)[64], unsigned long long a, unsigned long long b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e4m3 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_e4m3_n256(float (&d)[128], unsigned long long a, unsigned long long b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_e4m3_e5m2_n256(float (&d)[128], unsigned long long a, unsigned long long b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_e5m2_e4m3_n256(float (&d)[128], unsigned long long a, unsigned long long b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e4m3 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(scale_d));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_f16_n8(float (&d)[4], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3"
      "}, %4, %5, p, 1, 1, %6, %7;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_bf16_n8(float (&d)[4], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3"
      "}, %4, %5, p, 1, 1, %6, %7;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
__device__ __forceinline__ void wgmma_tf32_n8(float (&d)[4], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3"
      "}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(a), "l"(b));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_f16_n16(float (&d)[8], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, %8, %9, p, 1, 1, %10, %11;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_bf16_n16(float (&d)[8], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, %8, %9, p, 1, 1, %10, %11;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
__device__ __forceinline__ void wgmma_tf32_n16(float (&d)[8], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_f16_n32(float (&d)[16], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, %18, %19;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_bf16_n32(float (&d)[16], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, %18, %19;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
__device__ __forceinline__ void wgmma_tf32_n32(float (&d)[16], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_f16_n64(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, %34, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_bf16_n64(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, %34, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "n"(TA), "n"(TB));
}
__device__ __forceinline__ void wgmma_tf32_n64(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b));
}
__device__ __forceinline__ void wgmma_tf32_rs_n8(float (&d)[4], const unsigned int (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3"
      "}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void wgmma_tf32_rs_n16(float (&d)[8], const unsigned int (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, {%8, %9, %10, %11}, %12, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void wgmma_tf32_rs_n32(float (&d)[16], const unsigned int (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, {%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void wgmma_tf32_rs_n64(float (&d)[32], const unsigned int (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void wgmma_tf32_rs_n128(float (&d)[64], const unsigned int (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void wgmma_tf32_rs_n256(float (&d)[128], const unsigned int (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// KIND: 0 float16, 1 bfloat16, 2 tf32; 8-bit A x B: 3 e4m3 x e4m3, 4 e4m3 x
// e5m2, 5 e5m2 x e4m3 (K-major only, as tf32). BN is 128 or 256, or for
// 16-bit and tf32 inputs also 8, 16, 32 or 64 (the narrow tiles of
// swapped decode plans). scale_d 0 (8-bit inputs only) makes the MMA
// write A B over d instead of adding it to d.
template <int KIND, int BN, int TA, int TB>
__device__ __forceinline__ void wgmma(float (&d)[BN / 2], unsigned long long a,
                                      unsigned long long b, int scale_d = 1) {
  static_assert(BN == 128 || BN == 256 ||
                    (KIND <= 2 && (BN == 8 || BN == 16 || BN == 32 || BN == 64)),
                "no wgmma wrapper for this tile width and input type");
  if constexpr (BN < 128) {
    if constexpr (BN == 8) {
      if constexpr (KIND == 0) wgmma_f16_n8<TA, TB>(d, a, b);
      else if constexpr (KIND == 1) wgmma_bf16_n8<TA, TB>(d, a, b);
      else wgmma_tf32_n8(d, a, b);
    } else if constexpr (BN == 16) {
      if constexpr (KIND == 0) wgmma_f16_n16<TA, TB>(d, a, b);
      else if constexpr (KIND == 1) wgmma_bf16_n16<TA, TB>(d, a, b);
      else wgmma_tf32_n16(d, a, b);
    } else if constexpr (BN == 32) {
      if constexpr (KIND == 0) wgmma_f16_n32<TA, TB>(d, a, b);
      else if constexpr (KIND == 1) wgmma_bf16_n32<TA, TB>(d, a, b);
      else wgmma_tf32_n32(d, a, b);
    } else {
      if constexpr (KIND == 0) wgmma_f16_n64<TA, TB>(d, a, b);
      else if constexpr (KIND == 1) wgmma_bf16_n64<TA, TB>(d, a, b);
      else wgmma_tf32_n64(d, a, b);
    }
  } else if constexpr (BN == 256) {
    if constexpr (KIND == 0) wgmma_f16_n256<TA, TB>(d, a, b);
    else if constexpr (KIND == 1) wgmma_bf16_n256<TA, TB>(d, a, b);
    else if constexpr (KIND == 3) wgmma_e4m3_n256(d, a, b, scale_d);
    else if constexpr (KIND == 4) wgmma_e4m3_e5m2_n256(d, a, b, scale_d);
    else if constexpr (KIND == 5) wgmma_e5m2_e4m3_n256(d, a, b, scale_d);
    else wgmma_tf32_n256(d, a, b);
  } else {
    if constexpr (KIND == 0) wgmma_f16_n128<TA, TB>(d, a, b);
    else if constexpr (KIND == 1) wgmma_bf16_n128<TA, TB>(d, a, b);
    else if constexpr (KIND == 3) wgmma_e4m3_n128(d, a, b, scale_d);
    else if constexpr (KIND == 4) wgmma_e4m3_e5m2_n128(d, a, b, scale_d);
    else if constexpr (KIND == 5) wgmma_e5m2_e4m3_n128(d, a, b, scale_d);
    else wgmma_tf32_n128(d, a, b);
  }
}

// tf32 D += A B on a 64 x BN tile with A from registers: a holds the
// thread's four values of a 64 x 8 slice of A in wgmma's fragment layout
// (rows lane / 4 and lane / 4 + 8 of the warp's 16, columns lane % 4 and
// lane % 4 + 4); B K-major from a descriptor.
template <int BN>
__device__ __forceinline__ void wgmma_rs(float (&d)[BN / 2], const unsigned int (&a)[4],
                                         unsigned long long b) {
  if constexpr (BN == 8) wgmma_tf32_rs_n8(d, a, b);
  else if constexpr (BN == 16) wgmma_tf32_rs_n16(d, a, b);
  else if constexpr (BN == 32) wgmma_tf32_rs_n32(d, a, b);
  else if constexpr (BN == 64) wgmma_tf32_rs_n64(d, a, b);
  else if constexpr (BN == 128) wgmma_tf32_rs_n128(d, a, b);
  else wgmma_tf32_rs_n256(d, a, b);
}

// A warpgroup's tf32 A fragments for one K-tile (32 of K: four k8 steps),
// rows r0 .. r0 + 63 of the tile, from an M-major stage at sa as TMA left
// it: boxes of 32 rows (128 bytes) by 32 values of k, 4 KiB each, one
// after another, each 128-byte row (one k) swizzled by XORing its 16-byte
// chunk index with k % 8. Each value is one 4-byte load: the two rows a
// thread needs are 32 bytes apart and its two columns 512, so no wider
// load covers two of them. The loads are volatile so that they stay
// after the wait for the stage to fill.
__device__ __forceinline__ void tf32_frags(unsigned int (&f)[4][4], unsigned int sa, int r0) {
  const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
#pragma unroll
  for (int kk = 0; kk < 4; kk++)
#pragma unroll
    for (int v = 0; v < 4; v++) {
      const int m = r0 + 16 * w + (lane >> 2) + 8 * (v & 1), k = 8 * kk + (lane & 3) + 4 * (v >> 1);
      const unsigned int at = sa + (m >> 5) * 4096 + k * 128 +
                              ((((m & 31) >> 2) ^ (k & 7)) << 4) + (m & 3) * 4;
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(f[kk][v]) : "r"(at));
    }
}

// Which tile, and of which batch, the i-th work item is: within a batch,
// groups of 8 tile-rows walk the columns together, so that the B tiles the
// resident blocks share stay in L2.
__device__ __forceinline__ void work_of(unsigned int t, unsigned int tiles_m, unsigned int tiles_n,
                                        unsigned int &tm, unsigned int &tn, unsigned int &batch) {
  const unsigned int per = tiles_m * tiles_n;
  batch = t / per;
  mm::tile_of(t - batch * per, tiles_m, tiles_n, tm, tn);
}

// The i-th work item under split-K: work_of's `batch` counts slices of K
// too (z = slice * nbatch + batch; b is the batch), and the slice is
// K-tiles k0 .. k0 + nk - 1 of `ktiles`, cut as evenly as integers allow
// (every slice has one at least when splits <= ktiles).
__device__ __forceinline__ void item_of(unsigned int t, unsigned int tiles_m, unsigned int tiles_n,
                                        unsigned int nbatch, unsigned int splits,
                                        unsigned int ktiles, unsigned int &tm, unsigned int &tn,
                                        unsigned int &b, unsigned int &z, unsigned int &k0,
                                        unsigned int &nk) {
  work_of(t, tiles_m, tiles_n, tm, tn, z);
  const unsigned int slice = z / nbatch;
  b = z - slice * nbatch;
  k0 = static_cast<unsigned int>(static_cast<unsigned long long>(ktiles) * slice / splits);
  nk = static_cast<unsigned int>(static_cast<unsigned long long>(ktiles) * (slice + 1) / splits) -
       k0;
}

// Bytes of dynamic shared memory the kernel needs: the ring, STAGING bytes
// per consumer to stage D (32 KiB, for TMA stores or for stage_rows; none
// in a kernel that stores from registers only, such as a swapped decode
// plan's), the barriers, and slack to align the ring to the swizzle's 1024
// bytes.
template <int BN, int STAGES, int STAGING = 32768>
struct smem_size {
  static constexpr int value =
      STAGES * (128 * 128 + BN * 128) + 2 * STAGING + STAGES * 16 + 16 + 1024;
};

// Reductions of the epilogue's values folded per tile before they leave
// the multiprocessor (the wgmma kernels that are not swapped). store_rows hands a reduction object `red` each element's
// terms, which the value lambda left in it: red.start() before a
// warpgroup's 64 x BN outputs, red.fold(v) after each value (v as in
// acc[4 i + v]), red.group(b, wrow, c, i) after the four values of
// 8-column group i (wrow: the warp's first row, c: the thread's first
// column of the group; groups in order), and red.finish(b, row, tile) after the last
// (row: the thread's first row, tile: the tile's column index). The
// generated object writes partial results to its workspaces: over the
// rows, one row of N per 16 rows of D (a warp's); over the columns, one
// value per row and tile column. The order of every step is fixed by
// the shape, so two executions give the same bits. The value lambda
// calls red.none() for an element outside D, whose terms are then the
// operations' identities. no_red: a kernel without such reductions.
struct no_red {
  __device__ __forceinline__ void none() {}
  __device__ __forceinline__ void start() {}
  __device__ __forceinline__ void fold(int) {}
  __device__ __forceinline__ void group(long long, long long, long long, int) {}
  __device__ __forceinline__ void finish(long long, long long, long long) {}
};

// Over the rows: a warp's 16 rows of 8-column group i. g holds the
// thread's terms of rows r and r + 8 (v / 2) in columns c and c + 1
// (v % 2); the two rows are combined, then the eight threads of each
// column pair (lanes lane % 4 + 4 j) in a butterfly, which leaves them
// all with the same result. Lane j / 4 keeps it for group i % 8 in k,
// and after every eighth group the whole warp writes the 64 columns it
// kept to the partial row `w` (the warp's row of the workspace), those
// inside N: 256 consecutive bytes of float32 in one store, after the
// loads of the groups before (a store the compiler cannot tell from the
// operands would otherwise hold each group's loads back). The tile's
// width is a multiple of 64 (generated code checks). `in`: the warp's
// first row is inside M (a warp wholly beyond M has no workspace row).
template <typename OP, typename W>
__device__ __forceinline__ void red_tile_over_rows(const W (&g)[4], W (&k)[2], W *w, long long n,
                                                   long long c, int i, bool in) {
  W x0 = OP::apply(g[0], g[2]), x1 = OP::apply(g[1], g[3]);
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    x0 = OP::apply(x0, __shfl_xor_sync(0xffffffffu, x0, o));
    x1 = OP::apply(x1, __shfl_xor_sync(0xffffffffu, x1, o));
  }
  const int j = static_cast<int>(threadIdx.x & 31) >> 2;
  if (j == (i & 7)) {
    k[0] = x0;
    k[1] = x1;
  }
  if ((i & 7) == 7 && in) {
    const long long ck = c + (j - 7) * 8; /* the kept group's first column */
    if (ck < n) w[ck] = k[0];
    if (ck + 1 < n) w[ck + 1] = k[1];
  }
}

// Over the columns: q holds the thread's terms of rows row and row + 8,
// each folded over its columns of the tile in column order; the four
// threads of a row (lanes 4 j to 4 j + 3) combine theirs in a butterfly,
// and the first writes w[r * tn] for each of its rows r inside M (w
// points at the tile column's entry of row 0 of the batch).
template <typename OP, typename W>
__device__ __forceinline__ void red_tile_over_cols(const W (&q)[2], W *w, long long m,
                                                   long long tn, long long row) {
  W x[2] = {q[0], q[1]};
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) x[h] = OP::apply(x[h], __shfl_xor_sync(0xffffffffu, x[h], o));
  if ((threadIdx.x & 3) == 0) {
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (row + h * 8 < m) w[(row + h * 8) * tn] = x[h];
  }
}

// Outputs besides D, where D is row-major (so are they), written in
// whole rows of eight elements a thread. The MMA fragment layout leaves a
// thread two columns of two rows per 8-column group, so that stores as
// they come are 2 to 8 bytes each, a warp's touching eight rows at once
// (the forward pass with an auxiliary output ran at 0.62 of cuBLASLt's,
// docs/PERFORMANCE.md). Over four groups, the four threads of a row
// (lanes 4 j to 4 j + 3) hold 32 columns of two rows; they transpose
// them with two rounds of shuffles (lane bit 1, then bit 0), after which
// lane 4 j + q holds columns 8 q to 8 q + 7 of the block in order, and
// stores each row's eight as one vector (16 bytes of a 16-bit output)
// where the address allows and all eight are inside N, else element by
// element. h[4 g + v]: group g's element v (as acc[4 i + v]); o points at
// row 0, column 0 of the batch's output; row: the thread's first row;
// c0: the block's first column.
template <typename O>
struct out_pair {
  unsigned int w[(2 * sizeof(O) + 3) / 4];
};
template <typename O>
__device__ __forceinline__ out_pair<O> out_shfl(const out_pair<O> &u, int lanes) {
  out_pair<O> r;
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(u.w) / 4); i++)
    r.w[i] = __shfl_xor_sync(0xffffffffu, u.w[i], lanes);
  return r;
}
template <typename O>
__device__ __forceinline__ out_pair<O> out_sel(bool c, const out_pair<O> &x, const out_pair<O> &y) {
  out_pair<O> r;
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(x.w) / 4); i++) r.w[i] = c ? x.w[i] : y.w[i];
  return r;
}
template <typename O>
__device__ __forceinline__ void out_rows(const O (&h)[16], O *o, long long ld, long long m,
                                         long long n, long long row, long long c0) {
  const int q = static_cast<int>(threadIdx.x & 3);
  const bool b1 = (q & 2) != 0, b0 = (q & 1) != 0;
#pragma unroll
  for (int hh = 0; hh < 2; hh++) {
    out_pair<O> a[4];
#pragma unroll
    for (int g = 0; g < 4; g++) {
      const O two[2] = {h[4 * g + 2 * hh], h[4 * g + 2 * hh + 1]};
      a[g] = out_pair<O>{};
      memcpy(&a[g], two, sizeof two);
    }
    /* Round 1: lanes q and q ^ 2 swap the groups the other keeps:
     * t[k][j] is group 2 b1 + k of the lane whose bit 1 is j. */
    out_pair<O> t[2][2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const out_pair<O> keep = out_sel(b1, a[2 + k], a[k]);
      const out_pair<O> got = out_shfl(out_sel(b1, a[k], a[2 + k]), 2);
      t[k][0] = out_sel(b1, got, keep);
      t[k][1] = out_sel(b1, keep, got);
    }
    /* Round 2: lanes q and q ^ 1 swap k; res[s] is then group q's pair
     * from lane s: columns 8 q + 2 s and 8 q + 2 s + 1. The eight
     * elements go out as whole words, by vector stores written in PTX:
     * the compiler merged a plain vector store with the element-by-element
     * stores of the other branch, which write the same addresses, into
     * seven narrow stores on both paths (the first row half's, in the
     * forward pass with an output: 1.75 times the sectors, ncu). */
    constexpr int PW = static_cast<int>(sizeof(out_pair<O>) / 4);
    unsigned int w[4 * PW];
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const out_pair<O> keep = out_sel(b0, t[1][j], t[0][j]);
      const out_pair<O> got = out_shfl(out_sel(b0, t[0][j], t[1][j]), 1);
      const out_pair<O> lo = out_sel(b0, got, keep), hi = out_sel(b0, keep, got);
#pragma unroll
      for (int i = 0; i < PW; i++) {
        w[2 * j * PW + i] = lo.w[i];
        w[(2 * j + 1) * PW + i] = hi.w[i];
      }
    }
    const long long r = row + hh * 8, c = c0 + q * 8;
    /* The vector stores' alignment: the eight elements' bytes, at most 16. */
    constexpr unsigned long long ALIGN = 8 * sizeof(O) < 16 ? 8 * sizeof(O) : 16;
    if (r < m) {
      O *const p = o + r * ld + c;
      if (c + 8 <= n && reinterpret_cast<unsigned long long>(p) % ALIGN == 0) {
        if constexpr (sizeof(O) == 1) {
          /* A pair is the low two bytes of its word. */
          asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p),
                       "r"((w[0] & 0xffffu) | (w[1] << 16)), "r"((w[2] & 0xffffu) | (w[3] << 16)));
        } else {
#pragma unroll
          for (int i = 0; i < PW; i++)
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p + 16 / sizeof(O) * i),
                         "r"(w[4 * i]), "r"(w[4 * i + 1]), "r"(w[4 * i + 2]), "r"(w[4 * i + 3]));
        }
      } else {
        O e[8];
#pragma unroll
        for (int k = 0; k < 4; k++) memcpy(&e[2 * k], &w[k * PW], 2 * sizeof(O));
#pragma unroll
        for (int k = 0; k < 8; k++)
          if (c + k < n) p[k] = e[k];
      }
    }
  }
}

// An epilogue operand read at the element's column, as a bias is
// (`bias[col]`), loaded for a tile's columns when the consumer takes the
// tile, before its MMAs, rather than in the epilogue: there each batch of
// values waited out a trip to L2 for its operand before it could be
// stored, which `ncu` found to be about a third of the warps' waits in a
// short-K plan (docs/PERFORMANCE.md). Each warp holds the tile's BN
// columns spread over its lanes, BN / 32 registers a thread (holding
// each thread's own 2 BN / 8 columns took BN / 4, which spilled the
// FP8 kernels that promote), and fetch(i) brings the thread's two
// columns of 8-column group i (8 i + (lane % 4) * 2 + e, e = 0, 1) into
// cur[e] from the lane that holds them: one shuffle for operands of up
// to two bytes, one per 4 bytes otherwise, once per group, as the group's
// four values use two columns. Lane l holds, in register r, column
// 8 (l / 4 + 8 (r / 2)) + 2 (l % 4) + r % 2; a column at or beyond n is
// not read. Every lane of the warp calls fetch with the same i.
template <typename S, int BN>
struct col_vec {
  static_assert(BN % 64 == 0, "whole 64-column groups");
  static_assert(sizeof(S) <= 8, "operands of up to 8 bytes");
  static constexpr int R = BN / 32;
  S v[R];
  S cur[2];
  __device__ __forceinline__ void load(const S *p, long long col0, long long n) {
    const int lane = static_cast<int>(threadIdx.x & 31);
#pragma unroll
    for (int r = 0; r < R; r++) {
      const long long c = col0 + 8 * ((lane >> 2) + 8 * (r >> 1)) + 2 * (lane & 3) + (r & 1);
      v[r] = c < n ? p[c] : S();
    }
  }
  __device__ __forceinline__ void fetch(int i) {
    const int src = (i & 7) * 4 + static_cast<int>(threadIdx.x & 3), r = (i >> 3) * 2;
    if constexpr (sizeof(S) <= 2) {
      unsigned int w = 0;
      memcpy(&w, &v[r], sizeof(S));
      memcpy(reinterpret_cast<unsigned char *>(&w) + 2, &v[r + 1], sizeof(S));
      w = __shfl_sync(0xffffffffu, w, src);
      memcpy(&cur[0], &w, sizeof(S));
      memcpy(&cur[1], reinterpret_cast<unsigned char *>(&w) + 2, sizeof(S));
    } else {
      constexpr int W = (sizeof(S) + 3) / 4;
#pragma unroll
      for (int e = 0; e < 2; e++) {
        unsigned int w[W] = {};
        memcpy(w, &v[r + e], sizeof(S));
#pragma unroll
        for (int j = 0; j < W; j++) w[j] = __shfl_sync(0xffffffffu, w[j], src);
        memcpy(&cur[e], w, sizeof(S));
      }
    }
  }
};

// What the epilogue sees under the operand's name once its column is
// loaded: p[i] as mm::rd gives it, where the element's own column comes
// from the registers (the compiler folds `i == col` away when the index
// is `col` itself; any other index still reads memory, and an index that
// happens to equal col gets the same element either way).
template <typename S, typename A>
struct col_view {
  const S *p;
  long long col;
  S at_col;
  __device__ __forceinline__ A operator[](long long i) const {
    return static_cast<A>(i == col ? at_col : p[i]);
  }
};

// A kernel without such operands.
struct no_pre {
  __device__ __forceinline__ void operator()(long long, long long) const {}
};

// The epilogue's values of 8-column groups i0 .. i0 + G - 1 of a thread's
// accumulators (acc[4 i + v]: row + 8 (v / 2), column col + 8 i + v % 2),
// all computed before any is stored, so that the epilogue's reads of its
// operands go out together; each value's reduction terms go to `red` as
// they are left there (red.fold after each value, red.group after a
// group's four; wrow is the warp's first row). store_rows and stage_rows
// both take them so. The value's last arguments are its column's slot
// in the thread's tile vectors (col_vec): 2 i + v % 2, a constant once
// the loops are unrolled, and whether it is the first of its group (which
// fetches the group's columns).
template <int G, int RS, int R, typename TD, typename Value, typename Red>
__device__ __forceinline__ void values_of(TD (&out)[G][4], const float (&acc)[R], int i0,
                                          long long b, long long row, long long col,
                                          long long wrow, const Value &value, Red &red) {
#pragma unroll
  for (int i = 0; i < G; i++)
#pragma unroll
    for (int v = 0; v < 4; v++) {
      out[i][v] = value(b, row + (v >> 1) * 8 * RS, col + (i0 + i) * 8 + (v & 1), acc[4 * (i0 + i) + v],
                        2 * (i0 + i) + (v & 1), v == 0);
      red.fold(v);
      if (v == 3) red.group(b, wrow, col + (i0 + i) * 8, i0 + i);
    }
}

// Where an element of D falls in its 16-byte chunk of global memory, in
// elements: the shift of a row stored by the threads (stage_rows below).
template <typename TD>
__device__ __forceinline__ int chunk_shift(const TD *g) {
  return static_cast<int>((reinterpret_cast<unsigned long long>(g) & 15u) /
                          static_cast<unsigned int>(sizeof(TD)));
}

// Rows of D that the threads store go through buffers of 64 rows of one
// round (128 bytes of each row), the rows P bytes apart: 144, so that a
// warp reading consecutive 16-byte chunks of the buffer reads
// consecutive chunks of its rows.
struct row_stage {
  static constexpr int P = 128 + 16;
  static constexpr int BUF = 64 * P;
};

// The shifts of a consumer thread's two rows of the warpgroup's 64 (the
// warp's row lane / 4, and the one 8 below it) at column col0.
template <typename TD, int RS, typename RowP>
__device__ __forceinline__ void row_shifts(int (&sh)[2], long long b, long long row0,
                                           long long col0, const RowP &rowp) {
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const long long row = row0 + RS * (warp * 16 + (lane >> 2));
  sh[0] = chunk_shift(rowp(b, row) + col0);
  sh[1] = chunk_shift(rowp(b, row + 8 * RS) + col0);
}

// The epilogue's values of a thread's 8-column groups c0 / 8 .. (c0 + W)
// / 8 - 1 (values_of, G groups computed before any is placed), each pair
// handed to put(h, i, x, y): row + 8 h of the thread's, in group i
// (columns 8 i + (lane % 4) * 2 and the next of the tile). store_rows'
// three ways out (TMA's boxes, stage_round, put2) place them.
template <int G, int W, typename TD, int RS, int R, typename Value, typename Red, typename Put>
__device__ __forceinline__ void each_pair(const float (&acc)[R], int c0, long long b,
                                          long long row, long long col, long long wrow,
                                          const Value &value, Red &red, const Put &put) {
#pragma unroll
  for (int i0 = c0 / 8; i0 < (c0 + W) / 8; i0 += G) {
    TD out[G][4];
    values_of<G, RS>(out, acc, i0, b, row, col, wrow, value, red);
#pragma unroll
    for (int i = 0; i < G; i++)
#pragma unroll
      for (int h = 0; h < 2; h++)
        put(h, i0 + i, out[i][2 * h], out[i][2 * h + 1]);
  }
}

// One round of a warpgroup's rows into `buf`: the epilogue's values of
// the tile's columns c0 .. c0 + RW - 1, row r at r * P, shifted by its
// row's shift (sh, from row_shifts) so that staged chunk j of the row is
// its chunk j in global memory. Element by element: a shift of one
// element leaves pairs on 2 bytes.
template <int BN, typename TD, int RS, typename Value, typename Red>
__device__ __forceinline__ void stage_round(unsigned char *buf, float (&acc)[BN / 2], int c0,
                                            long long b, long long row0, long long col0,
                                            const int (&sh)[2], const Value &value, Red &red) {
  constexpr int RW = 128 / static_cast<int>(sizeof(TD)); /* columns a round */
  constexpr int G = RW / 8 < 8 ? RW / 8 : 8; /* 8-column groups computed before any is staged */
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int r = warp * 16 + (lane >> 2); /* row within the 64 */
  const long long row = row0 + RS * r, col = col0 + (lane & 3) * 2, wrow = row0 + RS * warp * 16;
  each_pair<G, RW, TD, RS>(acc, c0, b, row, col, wrow, value, red, [&](int h, int i, TD x, TD y) {
    TD *const at = reinterpret_cast<TD *>(buf + (r + h * 8) * row_stage::P) +
                   (i * 8 + (lane & 3) * 2 - c0 + sh[h]);
    at[0] = x;
    at[1] = y;
  });
}

// Stores a warpgroup's 64 x BN outputs (as store_rows) to rows that TMA
// cannot reach, through its staging area, so that consecutive threads
// write consecutive bytes of a row. The MMA fragment layout gives each
// thread two columns of eight rows; stored as they are, a warp's 2-byte
// stores touch eight rows at once and the odd-N shapes ran at 0.53-0.75 of
// their aligned neighbours (docs/PERFORMANCE.md, 2026-12-02).
//
// Rounds of 128 bytes of each row (RW columns), in two buffers of 64 rows
// by 144 bytes used in turn (`used` counts the rounds, so a buffer is
// written again only after a barrier that follows its last reads; one
// barrier a round). Row r of a round lies in its buffer shifted by s_r
// elements, s_r being where the row's first element falls in its 16-byte
// chunk of global memory (the same for every round, as a round starts
// 128 bytes further): then staged chunk j of the row is global chunk j,
// and chunks 1..7 (0..7 when s_r = 0) are stored as 16-byte vectors, one
// a thread, 32 consecutive chunks a warp (the buffer's 144-byte rows make
// these reads consecutive too). The V elements the shift cuts off (the
// first V - s_r and the last s_r) go element by element, V threads a row.
// A round that crosses N (the last tile column only) goes element by
// element, a warp along a row; rows at or beyond M store nothing. D's
// pointer must be aligned to its element, as for any store.
template <int BN, typename TD, int RS, typename Value, typename RowP, typename Red>
__device__ __forceinline__ void stage_rows(float (&acc)[BN / 2], unsigned int area,
                                           unsigned int &used, int bar, long long b,
                                           long long row0, long long col0, long long M,
                                           long long N, unsigned char *smem_raw,
                                           const Value &value, const RowP &rowp, Red &red) {
  constexpr int ES = static_cast<int>(sizeof(TD));
  constexpr int RW = 128 / ES;                /* columns a round */
  constexpr int V = 16 / ES;                  /* elements a 16-byte chunk */
  constexpr int P = row_stage::P, BUF = row_stage::BUF; /* one buffer: 9 KiB */
  static_assert(16 % ES == 0 && BN % RW == 0, "a round is whole 16-byte chunks of a tile row");
  static_assert(2 * BUF <= 32768, "both buffers fit the staging area");
  const int t = threadIdx.x & 127;
  unsigned char *const sm = smem_raw + (area - smem_u32(smem_raw));
  int sh[2];
  row_shifts<TD, RS>(sh, b, row0, col0, rowp);
  /* A thread's stores are the same in every round, each round 128 bytes
   * further along the same rows, so where they go is worked out once
   * here: done in every round, that address arithmetic was most of the
   * time the rounds took (the vocabulary projection's stores, in ncu:
   * about 40 instructions a store). Vector task i is chunk j of row rr
   * (q = t + 128 i = 9 rr + j); element task i is element k of row rr's
   * head or tail (q = V rr + k). */
  constexpr int NV = (64 * 9 + 127) / 128, NE = (64 * V + 127) / 128;
  TD *vg[NV], *eg[NE];
  int voff[NV], eoff[NE];
  bool vok[NV], eok[NE];
#pragma unroll
  for (int i = 0; i < NV; i++) {
    const int q = t + i * 128, rr = q / 9, j = q - rr * 9;
    vok[i] = false;
    vg[i] = nullptr;
    voff[i] = rr * P + j * 16;
    if (q < 64 * 9 && row0 + RS * rr < M) {
      TD *const g = rowp(b, row0 + RS * rr) + col0;
      const int s = chunk_shift(g);
      vok[i] = j == 0 ? s == 0 : j < 8;
      vg[i] = g - s + j * V;
    }
  }
#pragma unroll
  for (int i = 0; i < NE; i++) {
    const int q = t + i * 128, rr = q / V, k = q - rr * V;
    eok[i] = false;
    eg[i] = nullptr;
    eoff[i] = 0;
    if (q < 64 * V && row0 + RS * rr < M) {
      TD *const g = rowp(b, row0 + RS * rr) + col0;
      const int s = chunk_shift(g);
      const int p = k >= s ? k : RW + k; /* staged element: the row's head, or its tail */
      eok[i] = s != 0;
      eg[i] = g - s + p;
      eoff[i] = rr * P + p * ES;
    }
  }
#pragma unroll
  for (int c0 = 0; c0 < BN; c0 += RW) {
    unsigned char *const buf = sm + (used & 1u) * BUF;
    used++;
    stage_round<BN, TD, RS>(buf, acc, c0, b, row0, col0, sh, value, red);
    wg_sync(bar);
    const long long cr = col0 + c0, lim = N - cr; /* the round's columns inside D: lim */
    if (lim >= RW) {
      /* Unrolled, so that a thread's shared-memory reads can go out
       * together. */
#pragma unroll
      for (int i = 0; i < NV; i++)
        if (vok[i])
          *reinterpret_cast<uint4 *>(vg[i] + c0) = *reinterpret_cast<const uint4 *>(buf + voff[i]);
#pragma unroll
      for (int i = 0; i < NE; i++)
        if (eok[i]) eg[i][c0] = *reinterpret_cast<const TD *>(buf + eoff[i]);
    } else if (lim > 0) {
#pragma unroll 1
      for (int q = t; q < 64 * RW; q += 128) {
        const int rr = q / RW, c = q - rr * RW;
        if (row0 + RS * rr < M && c < lim) {
          TD *const g = rowp(b, row0 + RS * rr) + cr;
          const int s = chunk_shift(g);
          g[c] = reinterpret_cast<const TD *>(buf + rr * P)[c + s];
        }
      }
    }
  }
}

// Rows of D stored by the producer warpgroup (drained) rather than by
// the consumer that computed them, so that a consumer's epilogue ends
// once its values are in shared memory, as it does where TMA stores D.
// stage_rows above leaves each consumer to store its own rounds, and
// without those stores the vocabulary projection (8192 x 50257 x 1024)
// took a fifth less time (docs/PERFORMANCE.md, "2026-12-04, evening"),
// while warps 1 to 3 of the producer warpgroup have nothing to do (thread
// 0 issues every TMA load). TMA itself cannot store these rows: its boxes
// must start on 16 bytes of global memory.
//
// Rounds are stage_rows's (stage_round), in NB buffers of the consumer's
// staging area used in turn, each with a header saying where its rows go
// and two mbarriers: `full`, on which the consumer's 128 threads arrive
// once their values and the header are written, and `empty`, on which
// the draining warp arrives once it has read the buffer. Warp 1 + cw of
// the producer warpgroup drains consumer cw's rounds in the order they
// come, whatever the schedule (ping-pong, cooperative, split-K items
// whose epilogue another slice runs), and a header marked `end` sends it
// home.
struct drain {
  static constexpr int NB = 3;
  static constexpr int HEADS = NB * row_stage::BUF; /* the buffers' headers, 32 bytes each */
  static constexpr int BARS = HEADS + NB * 32;      /* full[NB], then empty[NB] */
  static constexpr int END = BARS + 2 * NB * 8;
  struct head {
    long long b, row0, col; /* batch, the round's first row and column */
    int end;
  };
  static __device__ __forceinline__ unsigned int full(unsigned int area, unsigned int i) {
    return area + BARS + 8 * i;
  }
  static __device__ __forceinline__ unsigned int empty(unsigned int area, unsigned int i) {
    return area + BARS + 8 * (NB + i);
  }
  static __device__ __forceinline__ head *head_at(unsigned char *smem_raw, unsigned int area,
                                                  unsigned int i) {
    return reinterpret_cast<head *>(smem_raw + (area - smem_u32(smem_raw)) + HEADS + 32 * i);
  }
};
static_assert(drain::END <= 32768 && sizeof(drain::head) == 32,
              "the drain's buffers, headers and barriers fit a consumer's staging area");

// Sets up the barriers of the consumers' drains (one thread, before the
// block's first barrier).
__device__ __forceinline__ void drain_init(unsigned int staging, unsigned int stride) {
  for (unsigned int c = 0; c < 2; c++)
    for (unsigned int i = 0; i < drain::NB; i++) {
      bar_init(drain::full(staging + c * stride, i), 128);
      bar_init(drain::empty(staging + c * stride, i), 1);
    }
}

// The consumer's side: stage_rows's rounds handed to the draining warp.
// `used` counts the consumer's rounds (the next one takes buffer used %
// NB, in its (used / NB)-th use).
template <int BN, typename TD, int RS, typename Value, typename RowP, typename Red>
__device__ __forceinline__ void stage_rows_drained(float (&acc)[BN / 2], unsigned int area,
                                                   unsigned int &used, long long b, long long row0,
                                                   long long col0, unsigned char *smem_raw,
                                                   const Value &value, const RowP &rowp, Red &red) {
  constexpr int RW = 128 / static_cast<int>(sizeof(TD));
  static_assert(BN % RW == 0, "a round is whole 16-byte chunks of a tile row");
  unsigned char *const sm = smem_raw + (area - smem_u32(smem_raw));
  int sh[2];
  row_shifts<TD, RS>(sh, b, row0, col0, rowp);
#pragma unroll
  for (int c0 = 0; c0 < BN; c0 += RW) {
    const unsigned int i = used % drain::NB, u = used / drain::NB;
    used++;
    bar_wait(drain::empty(area, i), (u & 1u) ^ 1u);
    stage_round<BN, TD, RS>(sm + i * row_stage::BUF, acc, c0, b, row0, col0, sh, value, red);
    if ((threadIdx.x & 127) == 0) *drain::head_at(smem_raw, area, i) = {b, row0, col0 + c0, 0};
    bar_arrive(drain::full(area, i));
  }
}

// The consumer's last word to its draining warp.
__device__ __forceinline__ void drain_end(unsigned int area, unsigned int used,
                                          unsigned char *smem_raw) {
  const unsigned int i = used % drain::NB, u = used / drain::NB;
  bar_wait(drain::empty(area, i), (u & 1u) ^ 1u);
  if ((threadIdx.x & 127) == 0) *drain::head_at(smem_raw, area, i) = {0, 0, 0, 1};
  bar_arrive(drain::full(area, i));
}

// The draining warp: stores each round as stage_rows does (whole 16-byte
// chunks as vectors, the heads and tails that the shift cuts off element
// by element, a round crossing N element by element, rows at or beyond M
// not at all). Each row is eight lanes' (lane / 8 + 4 x, x = 0 .. 15),
// lane j taking chunk j and the head or tail elements j E .. j E + E - 1
// (E = V / 8, one at least): a warp's store then writes four whole
// 128-byte lines, and a lane works out one address a row rather than one
// a chunk (the warp runs on the producer warpgroup's 40 registers, and
// issues beside the consumers' warps).
template <typename TD, int RS, typename RowP>
__device__ __forceinline__ void drain_rows(unsigned int area, long long M, long long N,
                                           unsigned char *smem_raw, const RowP &rowp) {
  constexpr int ES = static_cast<int>(sizeof(TD)), RW = 128 / ES, V = 16 / ES;
  constexpr int E = V / 8 > 0 ? V / 8 : 1; /* head or tail elements a lane */
  constexpr int P = row_stage::P;
  const int lane = threadIdx.x & 31, j = lane & 7;
  const unsigned char *const sm = smem_raw + (area - smem_u32(smem_raw));
#pragma unroll 1
  for (unsigned int n = 0;; n++) {
    const unsigned int i = n % drain::NB, u = n / drain::NB;
    bar_wait(drain::full(area, i), u & 1u);
    const drain::head h = *drain::head_at(smem_raw, area, i);
    if (h.end) break;
    const unsigned char *br = sm + i * row_stage::BUF + (lane >> 3) * P;
    const long long lim = N - h.col; /* the round's columns inside D */
    /* The lane's first row, the four rows between its rows (D's rows are
     * equally far apart), and how many of its rows lie inside M (the
     * round's rows are RS apart: row0 + RS * l is its row l). */
    TD *g = rowp(h.b, h.row0 + RS * (lane >> 3)) + h.col;
    const long long step = rowp(h.b, 4 * RS) - rowp(h.b, 0);
    const long long left = (M - h.row0 + RS - 1) / RS - (lane >> 3);
    const int rows = left <= 0 ? 0 : left >= 64 ? 16 : static_cast<int>((left + 3) / 4);
    if (lim >= RW) {
#pragma unroll 2
      for (int x = 0; x < rows; x++, g += step, br += 4 * P) {
        const int s = chunk_shift(g);
        if (j > 0 || s == 0)
          *reinterpret_cast<uint4 *>(g - s + j * V) = *reinterpret_cast<const uint4 *>(br + j * 16);
        if (s != 0)
#pragma unroll
          for (int e = 0; e < E; e++) {
            const int k = j * E + e, p = k >= s ? k : RW + k; /* the row's head, or its tail */
            if (k < V) g[p - s] = *reinterpret_cast<const TD *>(br + p * ES);
          }
      }
    } else if (lim > 0) {
#pragma unroll 1
      for (int x = 0; x < rows; x++, g += step, br += 4 * P) {
        const TD *const from = reinterpret_cast<const TD *>(br) + chunk_shift(g);
#pragma unroll 1
        for (int c = j; c < lim; c += 8) g[c] = from[c];
      }
    }
    __syncwarp();
    if (lane == 0) bar_arrive(drain::empty(area, i));
  }
}

// Whether TMA's boxes, 128 bytes of a row, fit a tile row of D: a
// narrower tile stores from registers or through stage_rows (the plan
// never gives such a kernel a tensor map of D). store_rows and gemm (which
// drains what store_rows does not hand TMA) both ask.
template <int BN, typename TD>
struct d_boxes {
  static constexpr bool value = BN * static_cast<int>(sizeof(TD)) >= 128;
};

// Stores one warpgroup's 64 x BN outputs, rows row0, row0 + RS, ... (RS
// apart: 1, or a phase_tile's PH) and columns col0.. of batch b, from its
// accumulators: acc[4 i + v] is row lane / 4 (+ 8 for v >= 2) of the
// warp's 16, column 8 i + (lane % 4) * 2 + v % 2. TMA stores consecutive
// rows only (RS = 1).
//
// With `td`, the values go to the warpgroup's 32 KiB staging area in boxes
// of 64 rows by 128 bytes, up to four boxes a round, and one thread has TMA
// store each round while the warpgroup moves on. `used` counts the area's
// bytes written since the last wait for TMA to have read them (stage_rows
// counts its rounds in it instead: a launch takes one of the two). Writes to
// shared memory cannot alias the operands the epilogue reads, so the
// compiler issues a round's reads together.
//
// Without `td` but with ROWS (D's rows are the tile's rows in memory:
// rowp(b, row) points at column 0 of a row, and rows are equally far
// apart), the rows start anywhere, so TMA cannot store them, yet they are
// still written whole: by the producer warpgroup's idle warps with DRAIN
// (stage_rows_drained), by the consumer itself without (stage_rows; `used`
// counts rounds in both). Otherwise (column-major D) outputs go
// straight from registers through put2, in chunks of 32 whose reads all
// come before their stores (a store to D might otherwise change what a
// later read sees, as far as the compiler knows). `bar` is the
// warpgroup's named barrier; M and N bound D.
template <int BN, bool ROWS, bool DRAIN, int RS, typename Value, typename Put2, typename RowP,
          typename Red>
__device__ __forceinline__ void store_rows(float (&acc)[BN / 2], const tensor_map *td,
                                           unsigned int area, unsigned int &used, int bar,
                                           long long b, long long row0, long long col0, long long M,
                                           long long N, unsigned char *smem_raw, const Value &value,
                                           const Put2 &put2, const RowP &rowp, Red &red) {
  (void)M;
  (void)N;
  (void)rowp;
  const int tid = threadIdx.x, warp = (tid >> 5) & 3, lane = tid & 31;
  const int r = warp * 16 + (lane >> 2); /* row within the 64 */
  const long long row = row0 + RS * r, col = col0 + (lane & 3) * 2;
  typedef decltype(value(b, row, col, 0.f, 0, false)) TD;
  const long long wrow = row0 + RS * warp * 16;
  red.start();
  if (d_boxes<BN, TD>::value && td != nullptr && RS == 1) {
    constexpr int BOX = 128 / static_cast<int>(sizeof(TD)); /* columns a box */
    constexpr int PER_ROUND = BOX * 4 < BN ? BOX * 4 : BN;  /* columns a round */
    constexpr unsigned int ROUND = 64u * PER_ROUND * sizeof(TD);
    /* 8-column groups whose values are computed before any is written. */
    constexpr int G = PER_ROUND / 8 < 8 ? PER_ROUND / 8 : 8;
    const bool leader = (tid & 127) == 0;
#pragma unroll
    for (int c0 = 0; c0 < BN; c0 += PER_ROUND) {
      if (used + ROUND > 32768u) {
        /* The area is full: wait until TMA has read it. */
        if (leader) bulk_wait_read();
        wg_sync(bar);
        used = 0;
      }
      const unsigned int at0 = area + used;
      each_pair<G, PER_ROUND, TD, RS>(acc, c0, b, row, col, wrow, value, red,
                                  [&](int h, int i, TD x, TD y) {
                                    /* The row, and the column in the round. */
                                    const int rr = r + h * 8, c = i * 8 + (lane & 3) * 2 - c0;
                                    /* The byte in the box's row. */
                                    const int off = (c % BOX) * static_cast<int>(sizeof(TD));
                                    const unsigned int at = at0 + (c / BOX) * 8192 + rr * 128 +
                                                            ((((off >> 4) ^ (rr & 7))) << 4) +
                                                            (off & 15);
                                    struct __align__(2 * sizeof(TD)) two {
                                      TD x, y;
                                    };
                                    *reinterpret_cast<two *>(smem_raw +
                                                             (at - smem_u32(smem_raw))) =
                                        two{x, y};
                                  });
      fence_async_smem();
      wg_sync(bar);
      if (leader) {
#pragma unroll
        for (int x = 0; x < PER_ROUND / BOX; x++)
          tma_store(td, at0 + x * 8192, static_cast<int>(col0 + c0 + x * BOX),
                    static_cast<int>(row0), static_cast<int>(b));
        bulk_commit();
      }
      used += ROUND;
    }
  } else if constexpr (ROWS && DRAIN) {
    stage_rows_drained<BN, TD, RS>(acc, area, used, b, row0, col0, smem_raw, value, rowp, red);
  } else if constexpr (ROWS) {
    stage_rows<BN, TD, RS>(acc, area, used, bar, b, row0, col0, M, N, smem_raw, value, rowp, red);
  } else {
    constexpr int CH = BN / 8 < 8 ? BN / 8 : 8;
    each_pair<CH, BN, TD, RS>(acc, 0, b, row, col, wrow, value, red, [&](int h, int i, TD x, TD y) {
      put2(b, row + h * 8 * RS, col + i * 8, x, y);
    });
  }
  red.finish(b, row, col0 / BN);
}

// Where a tile's rows lie. Without phases (PH = 1), tile tm holds rows
// 128 tm to 128 tm + 127. With PH > 1, A is row-major and its rows do not
// start on 16 bytes, so TMA cannot read them as rows of one tensor map;
// but rows PH apart (PH = 16 bytes of elements) lie 16 lda bytes apart,
// and one map a phase (row % PH) covers those, from the 16 bytes that
// hold the phase's first element, `shift` elements before it (ashift
// holds each phase's shift in 4 bits). The tiles are PH groups of
// tiles_m / PH, one a phase: tile j of phase p holds rows p + PH (128 j +
// i), i < 128, so its D rows are PH apart too (store_rows' RS). A K-tile
// read from column kt BK of a phase's map holds k = kt BK - shift onward
// (TMA's boxes start on 16 bytes of a row), so the tile reads B's rows
// from that k as well, which an N-major B allows: the row coordinate of
// its boxes may be any integer, and TMA fills rows before 0 or past K
// with zeros. A is never copied: an odd K costs no pass over A.
template <int PH>
struct phase_tile {
  unsigned int phase, tile;
  int shift;
  __device__ __forceinline__ phase_tile(unsigned int tm, unsigned int tiles_m,
                                        unsigned int ashift) {
    if constexpr (PH > 1) {
      const unsigned int per = tiles_m / PH;
      phase = tm / per;
      tile = tm - phase * per;
      shift = static_cast<int>((ashift >> (4 * phase)) & 15u);
    } else {
      (void)tiles_m;
      (void)ashift;
      phase = 0;
      tile = tm;
      shift = 0;
    }
  }
  /* The row of the tile's row i. */
  __device__ __forceinline__ long long row0(int i) const {
    return static_cast<long long>(phase) + PH * (static_cast<long long>(tile) * 128 + i);
  }
};

// A phase's first K-tile holds, before k = 0, the last `shift` elements
// of the row before (or, for row 0, what lies before A): zeroed in each of
// the consumer's `rows` rows of the stage's A tile (128-byte rows, 16-byte
// chunks swizzled by the row's index mod 8), so that no NaN or infinity
// there reaches the sums (B's rows before 0 are zeros, but 0 * NaN is
// NaN). One thread a row; the caller makes the stores visible to wgmma.
template <int ES>
__device__ __forceinline__ void zero_heads(unsigned int sa, int rows, int shift) {
  for (int r = static_cast<int>(threadIdx.x & 127); r < rows; r += 128) {
    const unsigned int at = sa + static_cast<unsigned int>(r) * 128u + ((r & 7u) << 4);
    for (int e = 0; e < shift * ES; e += 2)
      asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(at + e), "h"(static_cast<unsigned short>(0))
                   : "memory");
  }
}

// --- B fed by the kernel itself ----------------------------------------------
//
// A row-major 16-bit B whose rows are off 16 bytes is out of TMA's reach
// (its boxes start on 16 bytes of a row), so it is copied onto rows of
// 128-byte lines first. A kernel of its own before the product (the
// module's `_pad` kernel) leaves every tensor core idle while it runs:
// about 20 us of 4095^3's 230 on an H100. With FEED the product copies B
// itself, beside its MMAs. Warps 1 and 2 of the producer warpgroup, idle
// otherwise (thread 0 issues every TMA load), claim units of FEED_SEG
// bytes of one row of B in order (one atomic ticket for the grid), bring
// each into a buffer of their own by one bulk copy of the unit's whole
// 16-byte chunks (the lanes load the few bytes after the last whole
// chunk), shift it onto the copy's 16-byte chunks, one chunk a lane, and
// count it in its chunk's counter: rows 64 c to 64 c + 63 of a batch make
// chunk c. Each warp has two buffers, so one unit's bytes are in flight
// while it stores the other. Thread 0 loads a K-tile of B only once the
// chunks that hold its rows are counted whole (feed_wait). A warp never
// waits for another's work while it holds a claim, and a claimed unit is
// copied by the warp that claimed it, so the kernel cannot hang when
// fewer blocks than its grid are resident. The plan builds such kernels
// only when asked (JITK_MM_FEED=1): the first form of this copier, which
// drew each ticket and fenced each unit's stores in turn, made 4095^3
// slower on an H200 than the copy first (docs/PERFORMANCE.md).
//
// feed_args is a kernel parameter; matmul_execute.c fills a struct of the
// same layout. Strides are in bytes; the copy's batches are K rows apart.
struct feed_args {
  const unsigned char *b; /* the user's B */
  unsigned char *bf;      /* its copy, rows on 128-byte lines */
  long long ldb, sb, ldf; /* B's row and batch strides, the copy's row stride */
  unsigned int *count;    /* [0]: the ticket; [1 + batch * chunks + c]: chunk c's units done */
  unsigned int units;     /* units of all batches */
  unsigned int segs;      /* units a row */
  unsigned int chunks;    /* chunks a batch: ceil(K / 64) */
  unsigned int k;         /* rows a batch */
  unsigned int row_bytes; /* N elements' bytes */
};

// Bytes of a unit, of a buffer (a unit's bytes from the 16 bytes before it
// and one more chunk, which the shift reads past a row's last chunk), and
// of the shared memory of two warps' two buffers and their barriers.
constexpr int FEED_SEG = 4096, FEED_BUF = FEED_SEG + 32, FEED_SMEM = 32 + 4 * FEED_BUF;

// Unit u: its batch, row and first byte in the row.
struct feed_unit {
  unsigned int batch, row, at, bytes;
  __device__ __forceinline__ feed_unit(const feed_args &f, unsigned int u) {
    const unsigned int r = u / f.segs;
    batch = r / f.k;
    row = r - batch * f.k;
    at = (u - r * f.segs) * FEED_SEG;
    bytes = min(static_cast<unsigned int>(FEED_SEG), f.row_bytes - at);
  }
  __device__ __forceinline__ const unsigned char *src(const feed_args &f) const {
    return f.b + batch * f.sb + row * f.ldb + at;
  }
};

// The ticket of the warp's next unit: lane 0 draws it (ask), and the
// warp reads it later (take), so that the atomic's trip overlaps a load.
__device__ __forceinline__ unsigned int feed_ask(const feed_args &f) {
  return (threadIdx.x & 31) == 0 ? atomicAdd(f.count, 1u) : 0u;
}
__device__ __forceinline__ unsigned int feed_take(unsigned int ticket) {
  return __shfl_sync(0xffffffffu, ticket, 0);
}

// Starts unit u's loads into the buffer at `buf`, counted on `bar`: its
// whole 16-byte chunks (from the 16 bytes that hold its first byte) by
// one bulk copy, and the bytes after the last of them, element by element
// by the lanes (16-bit elements: the feed is for 16-bit inputs). The
// buffer's byte i is then global byte src & ~15 + i.
__device__ __forceinline__ void feed_load(const feed_args &f, unsigned int u, unsigned int buf,
                                          unsigned int bar) {
  const int lane = threadIdx.x & 31;
  const feed_unit x(f, u);
  const unsigned long long src = reinterpret_cast<unsigned long long>(x.src(f)),
                           lo = src & ~15ull, end = src + x.bytes, whole = end & ~15ull;
  /* The buffer's last reads (by generic loads) come before the bulk copy
   * writes it again (async proxy). */
  __syncwarp();
  if (lane == 0) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    if (whole > lo) {
      const unsigned int n = static_cast<unsigned int>(whole - lo);
      bar_expect(bar, n);
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
          "[%3];\n" ::"r"(buf),
          "l"(lo), "r"(n), "r"(bar)
          : "memory");
    } else {
      bar_arrive(bar);
    }
  }
  const unsigned long long tail = (whole > src ? whole : src) + 2ull * lane;
  if (tail < end) {
    unsigned short v;
    asm volatile("ld.global.nc.u16 %0, [%1];\n" : "=h"(v) : "l"(tail));
    asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(buf + static_cast<unsigned int>(tail - lo)),
                 "h"(v)
                 : "memory");
  }
}

// Output words 0..3 of a chunk from the buffer's words w (two chunks) at
// byte offset 4 Q + S / 8.
template <int Q>
__device__ __forceinline__ uint4 feed_pick(const unsigned int (&w)[8], unsigned int s) {
  return make_uint4(__funnelshift_r(w[Q], w[Q + 1], s), __funnelshift_r(w[Q + 1], w[Q + 2], s),
                    __funnelshift_r(w[Q + 2], w[Q + 3], s), __funnelshift_r(w[Q + 3], w[Q + 4], s));
}

// Stores unit u from its filled buffer onto the copy's 16-byte chunks,
// one a lane (feed_done counts it). A row's last chunk may carry bytes
// past the row (what the buffer held): they land in the copy's row
// padding, which the tensor map of the copy never reads.
__device__ __forceinline__ void feed_store(const feed_args &f, unsigned int u, unsigned int buf) {
  const int lane = threadIdx.x & 31;
  const feed_unit x(f, u);
  const unsigned int h =
      static_cast<unsigned int>(reinterpret_cast<unsigned long long>(x.src(f)) & 15u);
  const unsigned int q = h >> 2, s = (h & 3u) * 8u;
  unsigned char *dst =
      f.bf + (static_cast<unsigned long long>(x.batch) * f.k + x.row) * f.ldf + x.at;
  /* The lanes' tail elements are in the buffer before any lane reads it. */
  __syncwarp();
  for (unsigned int j = lane; j * 16 < x.bytes; j += 32) {
    unsigned int w[8];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(buf + 16 * j));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(w[4]), "=r"(w[5]), "=r"(w[6]), "=r"(w[7])
                 : "r"(buf + 16 * j + 16));
    const uint4 o = q == 0   ? feed_pick<0>(w, s)
                    : q == 1 ? feed_pick<1>(w, s)
                    : q == 2 ? feed_pick<2>(w, s)
                             : feed_pick<3>(w, s);
    *reinterpret_cast<uint4 *>(dst + 16 * j) = o;
  }
}

// Counts unit u done in its chunk, once the warp's stores of it are made:
// the warp's barrier orders the lanes' stores before lane 0's release,
// which publishes them with the count (the block-wide form of this,
// stores, a barrier, one thread's release, is the usual semaphore).
__device__ __forceinline__ void feed_done(const feed_args &f, unsigned int u) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
    const feed_unit x(f, u);
    const unsigned int *c = f.count + 1 + x.batch * f.chunks + x.row / 64;
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(c) : "memory");
  }
}

// A feeding warp (w: 0 or 1) of the producer warpgroup: its two barriers
// at area + 16 w, its two buffers after the four barriers. Claims are
// taken and stored in order, the buffers in turn, until the tickets run out.
__device__ __forceinline__ void feed_copy(const feed_args &f, unsigned int area, int w) {
  const unsigned int bar = area + 16 * w, buf = area + 32 + 2 * w * FEED_BUF;
  unsigned int u0 = feed_take(feed_ask(f));
  if (u0 < f.units) feed_load(f, u0, buf, bar);
  unsigned int u1 = feed_take(feed_ask(f));
  if (u1 < f.units) feed_load(f, u1, buf + FEED_BUF, bar + 8);
  /* Buffer i's unit u: the next ticket asked for while its bytes arrive,
   * stored once they have, the buffer refilled, and only then counted, so
   * that the wait for its stores to be acknowledged overlaps the new load
   * (unrolled by two, so that each buffer's ticket stays a register). */
  const auto step = [&](unsigned int &u, int i, unsigned int parity) {
    const unsigned int ticket = feed_ask(f);
    bar_wait(bar + 8 * i, parity);
    feed_store(f, u, buf + i * FEED_BUF);
    const unsigned int done = u;
    u = feed_take(ticket);
    if (u < f.units) feed_load(f, u, buf + i * FEED_BUF, bar + 8 * i);
    feed_done(f, done);
  };
  for (unsigned int parity = 0; u0 < f.units; parity ^= 1) {
    step(u0, 0, parity);
    if (u1 >= f.units) break;
    step(u1, 1, parity);
  }
}

// Thread 0's side: waits until chunks *ready .. last of `batch` are
// counted whole (a chunk is its rows times the units a row), moving
// *ready past them; the caller then issues the TMA loads that read them.
__device__ __forceinline__ void feed_wait(const feed_args &f, unsigned int batch,
                                          unsigned int &ready, unsigned int last) {
  if (ready > last) return;
  for (; ready <= last; ready++) {
    const unsigned int rows = min(64u, f.k - 64u * ready), want = rows * f.segs;
    const unsigned int *c = f.count + 1 + batch * f.chunks + ready;
    for (;;) {
      unsigned int got;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(got) : "l"(c) : "memory");
      if (got >= want) break;
      __nanosleep(64);
    }
  }
  /* What the feeding warps wrote (generic proxy) is then what TMA reads. */
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// The whole kernel body: a block of 384 threads works through tiles
// blockIdx.x, + gridDim.x, ... of `work` (tiles_m * tiles_n * batches *
// splits). For each output, in range or not, value(z, row, col, acc) gives
// D's element (and must not read operands out of range); `td`, put2, ROWS,
// rowp and red are as in store_rows; z is the batch (a split tile's
// slices are summed before the epilogue: SERIAL below). A 64-row half of a tile
// wholly beyond M stores nothing. (It still runs its MMAs: skipping them
// under a branch makes ptxas serialize every wgmma of the kernel, C7520,
// and decode shapes are bound by reading B, not by the tensor cores.) A_MN: A is M-major (column-major), B_MN: B is N-major
// (row-major), both for 16-bit inputs, and A_MN for tf32 too (a swapped
// plan's A, the user's row-major B), whose fragments the consumers load
// from shared memory into registers for wgmma_rs, cooperative only.
//
// PP false (cooperative): both consumers work on every tile, each on 64 of
// its 128 rows, and both apply the epilogue at the same time.
// PP true (ping-pong, BN = 128): consumers take tiles in turns, each all
// 128 rows of its tile, and hand the tensor cores to the other as soon as
// their last MMAs are issued: one consumer's epilogue runs while the
// other's MMAs do.
//
// CL: blocks in a cluster (1 or 2). With 2, the cluster's blocks take
// adjacent tile-rows of the same tile column, each producer loads half of
// the B tile they share into both blocks' rings (TMA multicast), and a
// ring slot is refilled only when the consumers of both blocks have
// released it (they arrive on both blocks' empty barriers).
//
// PH > 1: A is read in place by phases (phase_tile), `ashift` holding
// each phase's shift; tiles_m counts PH groups of tile-rows, and D's rows
// go through store_rows RS = PH apart (never by TMA). PH = 1: not so.
//
// FEED: B (16-bit, row-major, rows off 16 bytes) is copied by warps 1 and
// 2 of the producer warpgroup as the product runs, `fa` saying where
// from and to (feed_copy); `tb` maps the copy, and thread 0 loads a
// K-tile of it once its rows are copied (feed_wait). The shared memory
// then holds FEED_SMEM more bytes after the barriers.
//
// pre(b, col0): called as a consumer takes a tile (batch b, first column
// col0), before its MMAs; it loads the tile's column operands (col_vec),
// which the value lambda then reads.
//
// STAGING: bytes of shared memory per consumer for staging D (smem_size's);
// 0 when `td` is always null and ROWS false, which leaves more of shared
// memory to the ring. Tiles narrower than 64 (BN 8 to 32, for swapped
// decode plans) take B K-major only. ROWS and DRAIN as in store_rows;
// with both, and where TMA does not store D, warps 1 and 2 of the
// producer warpgroup store the rows the consumers stage (drain_rows).
//
// PROMOTE (8-bit inputs, cooperative, BN = 128 only): two-level
// accumulation. The tensor cores add an FP8 k32 step's products into
// their float32 accumulator keeping only about 13 bits below its largest
// term, so over a long K the running sum loses precision (each step
// truncates it again). With PROMOTE each K-tile's four k32 steps (128 of
// K) go into a fresh partial accumulator, the first step overwriting it
// (wgmma's scale-d 0), and the partial is then added into a separate
// float32 sum with ordinary FADDs, in K order. The tensor cores' loss
// is then bounded by one K-tile's terms, whatever K (jitk.h, "FP8
// plans"). Two partials are used in turn: a consumer issues K-tile t + 1's
// MMAs into one before waiting (wait_group 1) for tile t's in the other,
// so that its FADDs run while its own tensor-core work goes on, as the
// plain loop's MMAs do across K-steps. That triples the accumulator
// registers: 64 + 64 + 64 per thread at BN = 128 fits the consumers' 232
// without spilling (ptxas: no spills, no serialized wgmma); BN = 256 or
// ping-pong (two 64-row halves a consumer) would need 256 registers with
// a single partial and 384 with two.
//
// SERIAL (split-K, `splits` slices of K): a work item is one slice of a
// tile. Each consumer writes its float32 sums of the slice to the slice's
// copy of the tile in `ws` (splits x batches x tiles of 128 x BN floats,
// each thread's registers as consecutive 16-byte pieces, so that a warp's
// stores are whole lines), then adds one to its counter in `count` (two a
// tile, one per 64-row half; zero before the launch). The consumer whose
// addition makes the count `splits` is the last: it resets the counter,
// sums the copies in slice order (the same bits whichever slice is last)
// and runs the epilogue as an unsplit kernel does; the others go on to
// their next item. No block ever waits for another, so the kernel cannot
// hang when fewer blocks than the grid are resident (MPS, other kernels).
template <int KIND, bool A_MN, bool B_MN, int BN, int STAGES, bool PP, int STAGING, bool ROWS,
          bool PROMOTE, int CL, bool SERIAL, bool DRAIN, int PH, bool FEED, typename Value,
          typename Put2, typename RowP, typename Red, typename Pre = no_pre>
__device__ __forceinline__ void gemm(const tensor_map *ta, const tensor_map *tb,
                                     const tensor_map *td, long long K, unsigned int tiles_m,
                                     unsigned int tiles_n, unsigned int work, unsigned int splits,
                                     float *ws, unsigned int *count, unsigned int ashift,
                                     const feed_args &fa, long long M, long long N,
                                     unsigned char *smem_raw, const Value &value,
                                     const Put2 &put2, const RowP &rowp, Red &red,
                                     const Pre &pre = Pre()) {
  /* Element bytes, K elements in a stage's 128-byte rows, K per wgmma:
   * 32 bytes of K for every input type. */
  constexpr int ES = KIND == 2 ? 4 : KIND >= 3 ? 1 : 2, BK = 128 / ES, KSTEP = 32 / ES;
  constexpr int A_BYTES = 128 * 128, B_BYTES = BN * 128, STAGE = A_BYTES + B_BYTES;
  constexpr int HALVES = PP ? 2 : 1; /* 64-row halves of a tile one consumer computes */
  /* tf32 with A M-major: A goes through registers (wgmma_rs). */
  constexpr bool RS = KIND == 2 && A_MN;
  static_assert(!(B_MN && KIND >= 2) && !(A_MN && KIND >= 3),
                "tf32 wgmma reads B K-major only (an M-major A through registers), 8-bit wgmma "
                "both K-major");
  static_assert(!RS || (!PP && !PROMOTE), "tf32 A through registers is cooperative only");
  static_assert(!PP || BN == 128, "ping-pong consumers hold a whole 128 x 128 tile");
  static_assert(!B_MN || BN % 64 == 0, "an N-major B tile is whole slabs of 64 columns");
  static_assert(STAGING == 0 || STAGING == 32768, "D's staging is 32 KiB a consumer, or none");
  static_assert(!ROWS || STAGING == 32768, "stage_rows works in the staging area");
  static_assert(!PROMOTE || (KIND >= 3 && !PP && BN == 128),
                "promotion is for 8-bit inputs, cooperative at BN = 128 (registers)");
  static_assert(CL == 1 || (CL == 2 && (!B_MN || (BN / 64) % 2 == 0)),
                "clusters of two blocks share B by halves");
  static_assert(PH == 1 || (PH == 16 / ES && KIND <= 1 && !A_MN && B_MN && CL == 1 && !SERIAL &&
                            !PROMOTE && ROWS && STAGING == 32768),
                "A read by phases: 16-bit, A K-major, B N-major, row-major D, no cluster or "
                "split");
  static_assert(!FEED || (KIND <= 1 && B_MN && CL == 1 && !SERIAL && !DRAIN),
                "B fed by the kernel: 16-bit, N-major, no cluster, split or drain (its warps "
                "feed)");
  /* A read in place by phases (PH > 1): a tile's rows are PH apart. */
  if constexpr (PH > 1) td = nullptr;
  const unsigned int base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned int staging = base + STAGES * STAGE, full = staging + 2 * STAGING,
                     empty = full + STAGES * 8, turn = empty + STAGES * 8, feed = turn + 16;
  /* The warpgroup's role, read from lane 0 so that the compiler knows every
   * lane of a warp has it. */
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  /* Read by phases, a phase's K-tiles start `shift` elements before K's
   * multiples of BK, so K takes one more tile where a shift pushes its
   * end past them (phase_of). */
  unsigned int max_shift = 0;
  if constexpr (PH > 1)
    for (int p = 0; p < PH; p++) max_shift = max(max_shift, (ashift >> (4 * p)) & 15u);
  const unsigned int ktiles = static_cast<unsigned int>((K + max_shift + BK - 1) / BK);
  /* With clusters, work items are groups of CL tile-rows, block `rank` of
   * the cluster taking tile-row group * CL + rank. */
  const unsigned int rank = CL > 1 ? mm::cluster_rank() : 0u, tiles_mc = (tiles_m + CL - 1) / CL;
  const unsigned int nbatch = work / (tiles_mc * tiles_n * splits);
  const unsigned int first_item = blockIdx.x / CL, items_step = gridDim.x / CL;
  /* Whether D's rows go through stage_rows_drained (store_rows takes it
   * where TMA does not store D), and so warps 1 and 2 drain them. */
  typedef decltype(value(0ll, 0ll, 0ll, 0.f, 0, false)) TD;
  const bool drains = DRAIN && ROWS && (td == nullptr || !d_boxes<BN, TD>::value);
  if (tid == 0) {
    if (drains) drain_init(staging, STAGING);
    for (int s = 0; s < STAGES; s++) {
      bar_init(full + 8 * s, 1);
      /* Lane 0 of each warp that read the slot, in every block of the
       * cluster: a slot is refilled from both blocks' loads. */
      bar_init(empty + 8 * s, (PP ? 4 : 8) * CL);
    }
    bar_init(turn, 1);
    bar_init(turn + 8, 1);
    if constexpr (FEED)
      for (int i = 0; i < 4; i++) bar_init(feed + 8 * i, 1);
    bar_arrive(turn); /* consumer 0 has the first turn */
    /* Make the initialized barriers visible to the TMA unit. */
    asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::
                     : "memory");
  }
  /* A cluster's blocks load into each other's shared memory and arrive on
   * each other's barriers: none may start before all have set theirs up. */
  if constexpr (CL > 1)
    mm::cluster_barrier();
  else
    __syncthreads();
  /* jitk launches these kernels as programmatic dependents: the setup
   * above may run while the kernel before this one on the stream is still
   * finishing, and nothing below (loads of A, B, C or the epilogue's
   * operands, stores of D or the counters) may start before that kernel
   * has ended and its writes are visible, which the wait ensures (it
   * returns at once in a plain launch). The kernel after this one may then
   * be launched as this one's blocks start: it waits in the same way, and
   * its blocks take multiprocessors only as they are free. */
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  if (wg == 0) {
    /* The producer needs few registers; give them to the consumers. */
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) {
#pragma unroll
      for (int p = 0; p < PH; p++)
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(ta + p))
                     : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(tb))
                   : "memory");
      unsigned int stage = 0, phase = 0;
      /* FEED: chunks 0 .. fed - 1 of batch fed_batch are known copied. */
      unsigned int fed = 0, fed_batch = 0;
      for (unsigned int t = first_item; t < work; t += items_step) {
        unsigned int tm, tn, b, z, k0, nk;
        item_of(t, tiles_mc, tiles_n, nbatch, splits, ktiles, tm, tn, b, z, k0, nk);
        tm = tm * CL + rank;
        (void)z;
        const phase_tile<PH> pt(tm, tiles_m, ashift);
        for (unsigned int kt = k0; kt < k0 + nk; kt++) {
          bar_wait(empty + 8 * stage, phase ^ 1);
          const unsigned int fb = full + 8 * stage, sa = base + stage * STAGE, sb = sa + A_BYTES;
          bar_expect(fb, STAGE);
          if constexpr (A_MN) {
            /* Boxes of 128 bytes of rows (64 of 16 bits, 32 of tf32) by BK. */
            constexpr int AM = 128 / ES;
#pragma unroll
            for (int j = 0; j < 128 / AM; j++)
              tma_load(sa + j * BK * 128, ta, fb, static_cast<int>(tm * 128 + j * AM),
                       static_cast<int>(kt * BK), static_cast<int>(b));
          } else {
            tma_load(sa, ta + pt.phase, fb, static_cast<int>(kt * BK),
                     static_cast<int>(pt.tile * 128), static_cast<int>(b));
          }
          /* The K-tile's rows of B (from kt BK - shift) once copied. */
          if constexpr (FEED) {
            const long long last = min(static_cast<long long>(kt) * BK - pt.shift + BK - 1, K - 1);
            if (b != fed_batch) {
              fed_batch = b;
              fed = 0;
            }
            if (last >= 0) feed_wait(fa, b, fed, static_cast<unsigned int>(last / 64));
          }
          /* The blocks of a cluster share the B tile: each loads its share
           * (slabs, or rows, by rank) into all of them. */
          if constexpr (B_MN) {
#pragma unroll
            for (int j = 0; j < BN / 64; j++) {
              if constexpr (CL == 1)
                tma_load(sb + j * BK * 128, tb, fb, static_cast<int>(tn * BN + j * 64),
                         static_cast<int>(kt * BK) - pt.shift, static_cast<int>(b));
              else if (static_cast<unsigned int>(j % CL) == rank)
                tma_load_mc(sb + j * BK * 128, tb, fb, static_cast<int>(tn * BN + j * 64),
                            static_cast<int>(kt * BK), static_cast<int>(b), (1u << CL) - 1u);
            }
          } else if constexpr (CL == 1) {
            tma_load(sb, tb, fb, static_cast<int>(kt * BK), static_cast<int>(tn * BN),
                     static_cast<int>(b));
          } else {
            tma_load_mc(sb + rank * (BN / CL) * 128, tb, fb, static_cast<int>(kt * BK),
                        static_cast<int>(tn * BN + rank * (BN / CL)), static_cast<int>(b),
                        (1u << CL) - 1u);
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    } else if (drains && (tid >> 5) >= 1 && (tid >> 5) <= 2) {
      drain_rows<TD, PH>(staging + ((tid >> 5) - 1) * STAGING, M, N, smem_raw, rowp);
    } else if (FEED && (tid >> 5) >= 1 && (tid >> 5) <= 2) {
      feed_copy(fa, feed, (tid >> 5) - 1);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1, lane = tid & 31;
    const bool leader = (tid & 127) == 0;
    float acc[HALVES][BN / 2];
    /* With PROMOTE: the two K-tiles' partial sums used in turn (else
     * unused). */
    float part[PROMOTE ? 2 : 1][PROMOTE ? BN / 2 : 1];
#pragma unroll
    for (int q = 0; q < (PROMOTE ? 2 : 1); q++)
#pragma unroll
      for (int i = 0; i < (PROMOTE ? BN / 2 : 1); i++) part[q][i] = 0.f;
    /* Ring entries the block's earlier items took, the other consumer's
     * included: with split-K the items' K-step counts differ by one. */
    unsigned int used = 0, turn_phase = 0, j = 0, entry = 0;
    /* Hands ring slot `slot` back to the producers of every block that
     * fills it. */
    const auto release = [&](unsigned int slot) {
      bar_arrive(empty + 8 * slot);
      if constexpr (CL > 1) bar_arrive_at(empty + 8 * slot, rank ^ 1u);
    };
    for (unsigned int t = first_item; t < work; t += items_step, j++) {
      unsigned int tm, tn, b, z, k0, nk;
      item_of(t, tiles_mc, tiles_n, nbatch, splits, ktiles, tm, tn, b, z, k0, nk);
      tm = tm * CL + rank;
      (void)z;
      (void)k0;
      const phase_tile<PH> pt(tm, tiles_m, ashift);
      const unsigned int first = entry;
      entry += nk;
      if (PP && static_cast<int>(j & 1) != cw) continue;
      /* The tile's column operands (col_vec), in flight during its MMAs. */
      pre(static_cast<long long>(b), static_cast<long long>(tn) * BN);
#pragma unroll
      for (int h = 0; h < HALVES; h++)
#pragma unroll
        for (int i = 0; i < BN / 2; i++) acc[h][i] = 0.f;
      /* The item's K-steps are ring entries first, first + 1, ... */
      unsigned int stage = first % STAGES, phase = (first / STAGES) & 1, prev = 0;
      if (PP) {
        bar_wait(turn + 8 * cw, turn_phase);
        turn_phase ^= 1;
      }
      if constexpr (PROMOTE) {
        /* K-tile kt's MMAs go into part[kt & 1], and tile kt + 1's are
         * issued before tile kt's are waited for (wait_group 1), so that
         * the FADDs adding one partial overlap the MMAs of the other. The
         * loop is unrolled by two so that each partial is a fixed set of
         * registers, and every path through it keeps exactly one group in
         * flight at its head: ptxas tracks which accumulators a wait_group
         * 1 leaves busy only then, and otherwise serializes every wgmma of
         * the kernel (C7514), as it did with a guarded first issue. */
        const auto issue = [&](float(&p)[BN / 2]) {
          bar_wait(full + 8 * stage, phase);
          const unsigned int sa = base + stage * STAGE + cw * 64 * 128,
                             sb = base + stage * STAGE + A_BYTES;
          const unsigned long long da = desc(sa, 16, 1024), db = desc(sb, 16, 1024);
          wg_pin(p);
          wg_fence();
#pragma unroll
          for (int kk = 0; kk < BK / KSTEP; kk++)
            wgmma<KIND, BN, 0, 0>(p, desc_at(da, kk * KSTEP * ES), desc_at(db, kk * KSTEP * ES),
                                  kk > 0 ? 1 : 0);
          wg_commit();
          wg_pin(p);
          prev = stage;
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        };
        /* Once a wait_group says the MMAs into `done` (from ring slot
         * `slot`) are complete, the slot can be refilled and the partial
         * joins the float32 sum, in K order. */
        const auto retire = [&](float(&done)[BN / 2], unsigned int slot) {
          wg_pin(done);
          if (lane == 0) release(slot);
#pragma unroll
          for (int i = 0; i < BN / 2; i++) acc[0][i] += done[i];
        };
        /* A split-K slice without a K-tile (more slices than K-tiles)
         * leaves acc zero and the ring alone, as the plain loop does. */
        if (nk > 0) {
          issue(part[0]);
          unsigned int kt = 1, older;
          for (; kt + 1 < nk; kt += 2) {
            older = prev;
            issue(part[1]);
            wg_wait<1>();
            retire(part[0], older);
            older = prev;
            issue(part[0]);
            wg_wait<1>();
            retire(part[1], older);
          }
          /* The last tile or two: nk even leaves tile nk - 1 to issue into
           * part[1]; nk odd has it in flight in part[0]. */
          if (kt < nk) {
            older = prev;
            issue(part[1]);
            wg_wait<1>();
            retire(part[0], older);
            wg_wait<0>();
            retire(part[1], prev);
          } else {
            wg_wait<0>();
            retire(part[0], prev);
          }
        }
      } else if constexpr (RS) {
        /* Each K-tile's A fragments are loaded from the stage into
         * registers, which its MMAs read until a later wait_group says they
         * are done: tile kt's set is written again at tile kt + 2, after
         * tile kt + 1's wait_group 1. The loop is unrolled by two so that
         * each set is its own registers. */
        unsigned int fa[2][4][4];
        const auto step = [&](unsigned int(&f)[4][4], unsigned int kt) {
          bar_wait(full + 8 * stage, phase);
          const unsigned int sa = base + stage * STAGE, sb = sa + A_BYTES;
          tf32_frags(f, sa, cw * 64);
          const unsigned long long db = desc(sb, 16, 1024);
          wg_pin(acc[0]);
          wg_fence();
#pragma unroll
          for (int kk = 0; kk < BK / KSTEP; kk++)
            wgmma_rs<BN>(acc[0], f[kk], desc_at(db, kk * KSTEP * ES));
          wg_commit();
          wg_pin(acc[0]);
          wg_wait<1>();
          if (kt > 0 && lane == 0) release(prev);
          prev = stage;
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        };
        unsigned int kt = 0;
        for (; kt + 1 < nk; kt += 2) {
          step(fa[0], kt);
          step(fa[1], kt + 1);
        }
        if (kt < nk) step(fa[0], kt);
        wg_wait<0>();
        wg_pin(acc[0]);
        if (nk > 0 && lane == 0) release(prev);
      } else {
        for (unsigned int kt = 0; kt < nk; kt++) {
          bar_wait(full + 8 * stage, phase);
          /* Rows h * 64 ... of the tile: 64 rows of K in the K-major layout,
           * one slab of BK k-rows in the M-major one; the same bytes. */
          const unsigned int sa = base + stage * STAGE + (PP ? 0 : cw * 64 * 128),
                             sb = base + stage * STAGE + A_BYTES;
          if constexpr (PH > 1)
            if (kt == 0 && pt.shift != 0) {
              zero_heads<ES>(sa, PP ? 128 : 64, pt.shift);
              fence_async_smem();
              wg_sync(1 + cw);
            }
          const unsigned long long da0 = A_MN ? desc(sa, BK * 128, 1024) : desc(sa, 16, 1024),
                                   db0 = B_MN ? desc(sb, BK * 128, 1024) : desc(sb, 16, 1024);
#pragma unroll
          for (int h = 0; h < HALVES; h++) wg_pin(acc[h]);
          wg_fence();
#pragma unroll
          for (int kk = 0; kk < BK / KSTEP; kk++) {
            const unsigned long long db = desc_at(db0, kk * KSTEP * (B_MN ? 128 : ES));
#pragma unroll
            for (int h = 0; h < HALVES; h++) {
              const unsigned long long da =
                  desc_at(da0, h * 64 * 128 + kk * KSTEP * (A_MN ? 128 : ES));
              wgmma<KIND, BN, A_MN ? 1 : 0, B_MN ? 1 : 0>(acc[h], da, db);
            }
          }
          wg_commit();
          if (PP && kt + 1 == nk && leader) bar_arrive(turn + 8 * (1 - cw)); /* your turn */
#pragma unroll
          for (int h = 0; h < HALVES; h++) wg_pin(acc[h]);
          /* The previous step's MMAs are done: its slot can be refilled. */
          wg_wait<1>();
          if (kt > 0 && lane == 0) release(prev);
          prev = stage;
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
        wg_wait<0>();
#pragma unroll
        for (int h = 0; h < HALVES; h++) wg_pin(acc[h]);
        if (nk > 0 && lane == 0) release(prev);
      }
      if constexpr (SERIAL) {
        /* Tiles are numbered over whole clusters of tile-rows, as items. */
        const unsigned int slice = z / nbatch;
        const unsigned long long trows = static_cast<unsigned long long>(tiles_mc) * CL;
        const unsigned long long tiles = trows * tiles_n * nbatch;
        const unsigned long long tile = (b * trows + tm) * tiles_n + tn;
        const int th = tid & 127;
        const auto copy = [&](unsigned int s, int h) -> float4 * {
          return reinterpret_cast<float4 *>(ws + (s * tiles + tile) * (128ull * BN) +
                                            (PP ? h : cw) * 64 * BN) +
                 th;
        };
#pragma unroll
        for (int h = 0; h < HALVES; h++) {
          float4 *const q = copy(slice, h);
#pragma unroll
          for (int i = 0; i < BN / 8; i++)
            __stcg(q + i * 128, make_float4(acc[h][4 * i], acc[h][4 * i + 1], acc[h][4 * i + 2],
                                            acc[h][4 * i + 3]));
        }
        /* Every thread's copy is visible before its counter moves; the
         * last one's thread 0 sees every other slice's. */
        __threadfence();
        wg_sync(1 + cw);
        bool last = false;
        if (th == 0) {
          unsigned int *const c = count + tile * 2 + (PP ? 0 : cw);
          last = atomicAdd(c, 1u) == splits - 1;
          if (last) {
            *c = 0;
            __threadfence();
          }
        }
        if (wg_count(1 + cw, last) == 0) continue;
#pragma unroll
        for (int h = 0; h < HALVES; h++)
#pragma unroll 1
          for (unsigned int s = 0; s < splits; s++) {
            const float4 *const q = copy(s, h);
            float4 v[BN / 8];
#pragma unroll
            for (int i = 0; i < BN / 8; i++) v[i] = __ldcg(q + i * 128);
#pragma unroll
            for (int i = 0; i < BN / 8; i++) {
              acc[h][4 * i] = s == 0 ? v[i].x : acc[h][4 * i] + v[i].x;
              acc[h][4 * i + 1] = s == 0 ? v[i].y : acc[h][4 * i + 1] + v[i].y;
              acc[h][4 * i + 2] = s == 0 ? v[i].z : acc[h][4 * i + 2] + v[i].z;
              acc[h][4 * i + 3] = s == 0 ? v[i].w : acc[h][4 * i + 3] + v[i].w;
            }
          }
      } else {
        (void)ws;
        (void)count;
      }
      const auto store = [&](int h) {
        const long long row0 = pt.row0((PP ? h : cw) * 64);
        if (row0 < M)
          store_rows<BN, ROWS, DRAIN, PH>(acc[0], STAGING ? td : nullptr, staging + cw * STAGING,
                                          used, 1 + cw, static_cast<long long>(b), row0,
                                          static_cast<long long>(tn) * BN, M, N, smem_raw, value,
                                          put2, rowp, red);
      };
      if constexpr (HALVES == 1) {
        store(0);
      } else {
        /* One copy of the epilogue serves both halves of a ping-pong
         * tile: the second half's accumulators move into the first's
         * registers once it is stored. Unrolled, the halves were two
         * copies of store_rows, which doubled the kernel's epilogue code
         * and its compile time (the same speed on the H200). The trip
         * count is opaque to the compiler, which otherwise peels the first
         * trip off as a second copy where the epilogue is long. */
        int halves = HALVES;
        asm volatile("" : "+r"(halves));
#pragma unroll 1
        for (int h = 0; h < halves; h++) {
          store(h);
#pragma unroll
          for (int i = 0; i < BN / 2; i++) acc[0][i] = acc[HALVES - 1][i];
        }
      }
    }
    if (drains) drain_end(staging + cw * STAGING, used, smem_raw);
    /* Stores still in flight read shared memory, which dies with the block. */
    if (td != nullptr && leader) bulk_wait();
  }
  /* A block's consumers arrive on the other's barriers until their last
   * K-step: neither block's shared memory may go before both are done. */
  if constexpr (CL > 1) mm::cluster_barrier();
}

}  // namespace mm90
}  // namespace jitk
