// Thin wrappers over the Hopper (sm_90a) asynchronous-copy PTX that the
// warp-specialized tree kernel (tree_tma.cuh) uses: shared-memory mbarriers
// (init, arrive, expect-tx, parity wait), bulk copies global -> shared that
// complete on an mbarrier (1-D cp.async.bulk and 5-D tensor-map TMA loads),
// register reallocation between warpgroups (setmaxnreg) and named barriers.
// Like wgmma.cuh, every function compiles to nothing outside an sm_90a pass
// (BANYAN_WGMMA_ENABLED); callers guard their use with the same macro.
//
// mbarrier protocol used here (PTX ISA "mbarrier"): a barrier completes its
// current phase when its pending arrivals reach zero and its transaction
// count (bytes announced by expect-tx minus bytes the copies delivered) is
// zero; waiting on parity P returns once the phase of parity P completed. A
// freshly initialized barrier is in phase 0, so waiting on parity 1 returns
// at once (the "previous" phase counts as complete): producers wait on
// `empty` barriers with the flipped parity, consumers on `full` ones with
// the plain parity.
#ifndef BANYAN_ATTENTION_KERNELS_TMA_CUH_
#define BANYAN_ATTENTION_KERNELS_TMA_CUH_

#include <cuda.h>

#include <cstdint>

#include "attention/kernels/wgmma.cuh"

namespace banyan::attention::kernels {

__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void MbarrierInit(uint64_t* bar, uint32_t arrivals) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddress(bar)), "r"(arrivals) : "memory");
#endif
}

// Makes initialized barriers visible to the async proxy (the copies that
// complete on them) and to the other threads; follow with __syncthreads.
__device__ __forceinline__ void FenceMbarrierInit() {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Adds `bytes` to the transaction count of the current phase (no arrival).
__device__ __forceinline__ void MbarrierExpectTx(uint64_t* bar, uint32_t bytes) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddress(bar)), "r"(bytes)
               : "memory");
#endif
}

// One arrival (release: this thread's earlier memory accesses happen before
// the phase completes for the waiters).
__device__ __forceinline__ void MbarrierArrive(uint64_t* bar) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddress(bar)) : "memory");
#endif
}

// One arrival that also announces `bytes` of copies for this phase.
__device__ __forceinline__ void MbarrierArriveExpectTx(uint64_t* bar, uint32_t bytes) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddress(bar)), "r"(bytes)
               : "memory");
#endif
}

// Whether the phase of parity `parity` has completed, without waiting (acquire when true, as MbarrierWait).
__device__ __forceinline__ bool MbarrierTest(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(SmemAddress(bar)), "r"(parity)
      : "memory");
#endif
  return done != 0;
}

// Spins until the phase of parity `parity` has completed (acquire: what the
// arriving threads wrote and the copies delivered is visible afterwards).
__device__ __forceinline__ void MbarrierWait(uint64_t* bar, uint32_t parity) {
#ifdef BANYAN_WGMMA_ENABLED
  const uint32_t addr = SmemAddress(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
// global to shared memory; completes `bytes` of transactions on `bar`.
__device__ __forceinline__ void BulkCopyToShared(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   SmemAddress(dst)),
               "l"(src), "r"(bytes), "r"(SmemAddress(bar))
               : "memory");
#endif
}

// Arrives on `bar` once every cp.async (non-bulk) this thread issued before
// has completed; .noinc: the barrier's expected arrival count includes it.
__device__ __forceinline__ void CpAsyncArriveNoinc(uint64_t* bar) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(SmemAddress(bar)) : "memory");
#endif
}

// Loads the box of `map` at element coordinates (c0 innermost, c1, ..., c4)
// into shared memory at `dst` (laid out and swizzled as the map says);
// completes the box's bytes on `bar`. Elements outside the tensor read as
// zero. `map` must live in parameter / constant / global memory
// (__grid_constant__).
__device__ __forceinline__ void TmaLoad5d(void* dst, const CUtensorMap* map, int32_t c0, int32_t c1, int32_t c2,
                                          int32_t c3, int32_t c4, uint64_t* bar) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
      "%6}], [%7];\n" ::"r"(SmemAddress(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(SmemAddress(bar))
      : "memory");
#endif
}

// Brings a tensor map into the TMA unit's descriptor cache ahead of its
// first box: without it the first copy of a cold launch waits for the
// descriptor's own fetch.
__device__ __forceinline__ void PrefetchTensorMap(const CUtensorMap* map) {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// Register reallocation between the warpgroups of a CTA (every thread of a
// warpgroup executes the same call): the producer warpgroup gives registers
// back, the consumer warpgroups take them.
template <int kRegs>
__device__ __forceinline__ void GrowRegisters() {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void ShrinkRegisters() {
#ifdef BANYAN_WGMMA_ENABLED
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a
// multiple of 32), with memory ordering among them.
__device__ __forceinline__ void NamedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives at barrier `id` without waiting (the other `threads` - 32k
// participants wait with NamedBarrierSync).
__device__ __forceinline__ void NamedBarrierArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace banyan::attention::kernels

#endif  // BANYAN_ATTENTION_KERNELS_TMA_CUH_
