// moekit — the one layer of inline PTX for Hopper (sm_90a).
//
// Every kernel talks to the hardware through these wrappers: shared-memory addresses, mbarriers,
// the tensor memory accelerator (TMA) loads (with L2 cache policies), prefetches and stores, proxy
// fences, predicated global stores, warpgroup MMA control and descriptors, stmatrix, named
// barriers, setmaxnreg and conversions. The header includes nothing so that NVRTC can compile it
// without the CUDA toolkit headers.
#pragma once

namespace moekit::ptx {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int i32;
typedef long long i64;

/// A CUtensorMap (128 bytes, 64-byte aligned), passed to kernels by value as __grid_constant__.
struct alignas(64) TmaDescriptor {
  u64 opaque[16];
};

// ------------------------------------------------------------------------------------------------
// Thread identity and shared-memory addresses
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ u32 lane_id() {
  u32 r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}

// ------------------------------------------------------------------------------------------------
// Programmatic dependent launch (PDL). A kernel launched with the programmatic-serialization
// attribute may start while its predecessor in the stream still runs; griddep_wait blocks until
// the predecessor grid has completed and its memory is visible (a no-op for a normal launch), and
// griddep_launch_dependents lets the successor grid be scheduled once every CTA of this grid has
// issued it or exited.
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

/// The global nanosecond timer (diagnostics only).
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// The SM's cycle counter (diagnostics only).
__device__ __forceinline__ unsigned long long clock64() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}

/// The SM this thread runs on (diagnostics only).
__device__ __forceinline__ unsigned smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

/// 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ u32 smem_addr(const void* p) {
  u32 r;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

/// A plain (weak) global load, for data that earlier kernels of the same PDL chain write. Never
/// ld.global.nc (__ldg): that is defined only for data that stays read-only for the reading kernel's
/// whole lifetime, and a PDL dependent starts before its predecessor finishes — measured
/// (docs/performance.md §PDL chain and B before the wait): a GEMM scheduler reading the group
/// offsets with __ldg right after the kernel that writes them saw stale ones in a CUDA graph replay. Ordered after griddepcontrol.wait by that wrapper's
/// memory clobber; L1-bypassing ld.global.cg was correct too but cost 8 µs at T = 1 in the token-scale
/// loads of GEMM1's K loop.
template <class V>
__device__ __forceinline__ V ld_chain(const V* p) {
  return *p;
}

/// Broadcasts lane 0's value so the compiler may keep it in a uniform register.
__device__ __forceinline__ u32 warp_uniform(u32 v) { return __shfl_sync(0xffffffffu, v, 0); }

/// True in exactly one lane of the (fully active) warp, chosen by the hardware (elect.sync): a
/// branch on it keeps the warp's uniform values in uniform registers.
__device__ __forceinline__ bool elect_one() {
  u32 elected;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "elect.sync _|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}"
      : "=r"(elected));
  return elected != 0;
}

// ------------------------------------------------------------------------------------------------
// Thread-block clusters
// ------------------------------------------------------------------------------------------------

/// Rank of this CTA in its cluster.
__device__ __forceinline__ u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/// Barrier over every thread of every CTA in the cluster (release/acquire: shared-memory writes
/// before it, e.g. mbarrier initialization, are visible to the peers after it).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/// The shared::cluster address of `smem_address` in the CTA of rank `cta` of this cluster.
__device__ __forceinline__ u32 map_to_cta(u32 smem_address, u32 cta) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_address), "r"(cta));
  return r;
}

// ------------------------------------------------------------------------------------------------
// mbarrier (shared::cta)
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(u32 bar, u32 arrive_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrive_count) : "memory");
}

/// Makes mbarrier initialization visible to the async proxy (TMA) and the other threads.
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/// Arrives `count` times at once on a CTA-local mbarrier (one arrival per warp it stands for).
__device__ __forceinline__ void mbar_arrive_count(u32 bar, u32 count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

/// Arrives on an mbarrier of any CTA of the cluster (address from map_to_cta). Default
/// (.release.cta) semantics: a .cluster-scope release here would fence every outstanding memory
/// access of the thread on every call, which measured 3x slower in the GEMM mainloop; the
/// arrival only has to order this CTA's shared-memory reads (done: wgmma waited) before the peer
/// overwrites the stage.
__device__ __forceinline__ void mbar_arrive_cluster(u32 cluster_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(cluster_bar) : "memory");
}

/// Arrives on an mbarrier of any CTA of the cluster with .release.cluster semantics: this thread's
/// earlier memory accesses (e.g. shared-memory writes a peer will read through DSMEM, or DSMEM
/// reads of a buffer the peer will overwrite) happen before the peer's matching mbar_wait_cluster.
__device__ __forceinline__ void mbar_arrive_cluster_release(u32 cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_bar) : "memory");
}

/// Arrives and announces `bytes` of transactions (TMA) that will complete this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

/// Adds `bytes` to the current phase's expected transactions without arriving (the thread arrives
/// later, once its own writes to the stage are done).
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

/// Whether the phase with the given parity has completed, without blocking (mbarrier.test_wait;
/// try_wait may suspend the thread for a while when the phase is incomplete).
__device__ __forceinline__ bool mbar_test_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

/// Blocks until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

/// mbar_wait with .acquire.cluster semantics: pairs with mbar_arrive_cluster_release of a peer CTA.
__device__ __forceinline__ void mbar_wait_cluster(u32 bar, u32 parity) {
  u32 done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, "
        "p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// ------------------------------------------------------------------------------------------------
// TMA (cp.async.bulk.tensor)
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ void tma_prefetch_descriptor(const TmaDescriptor* desc) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(desc) : "memory");
}

/// 2D tile load global → shared, completing `bytes` on mbarrier `bar`. c0 is the inner coordinate.
__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaDescriptor* desc, u32 bar, i32 c0, i32 c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      ::"r"(dst), "l"(desc), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

/// The same load with an L2 cache policy (`policy` from l2_policy_evict_first).
__device__ __forceinline__ void tma_load_2d_hint(u32 dst, const TmaDescriptor* desc, u32 bar, i32 c0, i32 c1,
                                                 u64 policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%3, %4}], [%2], %5;"
      ::"r"(dst), "l"(desc), "r"(bar), "r"(c0), "r"(c1), "l"(policy)
      : "memory");
}

/// Prefetches the line holding `p` into this SM's L1 (a hint).
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

/// Prefetches the line holding `p` into L2 (a hint).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

/// Prefetches `bytes` (a multiple of 16) from 16-byte aligned `p` into L2 with the bulk copy engine
/// (a hint): a gather's rows fetched ahead of their loads, without registers or shared memory.
__device__ __forceinline__ void bulk_prefetch_l2(const void* p, u32 bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/// L2 cache policy for the *_hint loads: lines evicted first (data streamed once).
__device__ __forceinline__ u64 l2_policy_evict_first() {
  u64 p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

/// Contiguous bulk copy global → shared of `bytes` (a multiple of 16; both addresses 16-byte
/// aligned), completing `bytes` of transactions on mbarrier `bar` (the wgmma probe's stand-in for a
/// stage's TMA traffic).
__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

/// Contiguous bulk copy of `bytes` (a multiple of 16; 16-byte aligned) from this CTA's shared memory
/// at `src` into another CTA's of the cluster at `dst` (address from map_to_cta), completing them on
/// that CTA's mbarrier `bar` (map_to_cta too). Reads `src` through the async proxy: the writer of
/// those bytes fences (fence_proxy_async_smem) before the copy is issued.
__device__ __forceinline__ void bulk_copy_to_cta(u32 dst, u32 src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(dst), "r"(src), "r"(bytes), "r"(bar)
               : "memory");
}

/// bulk_load multicast to the CTAs in `cta_mask`: the bytes land at offset `dst` of each of them and
/// complete on each one's mbarrier at offset `bar` (the stage-fill probe's multicast mode).
__device__ __forceinline__ void bulk_load_multicast(u32 dst, const void* src, u32 bytes, u32 bar, u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
      ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "h"(cta_mask)
      : "memory");
}

/// 2D tile load multicast to the CTAs in `cta_mask`: the tile lands at the same shared-memory
/// offset `dst` in each of them and completes on each one's mbarrier at offset `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const TmaDescriptor* desc, u32 bar, i32 c0, i32 c1,
                                                      u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;"
      ::"r"(dst), "l"(desc), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

// ------------------------------------------------------------------------------------------------
// Per-thread asynchronous copies (cp.async, "LDGSTS"): gathers whose rows TMA cannot address.
// Their completion is tracked on an mbarrier with cp_async_mbar_arrive_noinc; the writes are made
// by the generic proxy, so a consumer that reads them with wgmma (async proxy) must execute
// fence_proxy_async_smem after its wait.
// ------------------------------------------------------------------------------------------------

/// 16 bytes global → shared (`dst` and `src` 16-byte aligned). Only the first `src_bytes` (0 or
/// 16) are read; the rest of the 16 bytes are zero-filled. Bypasses L1 (.cg).
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

/// Closes this thread's group of cp.async issued since the last commit (possibly empty).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

/// Waits until at most N of this thread's committed cp.async groups are still in flight; the
/// completed copies are visible to this thread (to others after a barrier).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/// One arrival on mbarrier `bar` once every cp.async this thread issued before has completed.
/// .noinc: the barrier's expected count must include this arrival (mbar_init).
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

/// 2D tile store shared → global (out-of-bounds parts of the box are not written).
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* desc, u32 src, i32 c0, i32 c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"(desc), "r"(src), "r"(c0), "r"(c1)
               : "memory");
}

__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/// Waits until at most N committed store groups are still reading their shared-memory source.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/// Waits until at most N committed store groups are incomplete (writes done).
template <int N>
__device__ __forceinline__ void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

/// Orders this thread's generic-proxy shared-memory writes before later async-proxy (TMA/wgmma) reads.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ------------------------------------------------------------------------------------------------
// Barriers and register reallocation
// ------------------------------------------------------------------------------------------------

/// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (multiple of 32).
__device__ __forceinline__ void named_barrier_sync(u32 id, u32 threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// Arrives on named barrier `id` without waiting (the other threads of `threads` bar.sync on it).
__device__ __forceinline__ void named_barrier_arrive(u32 id, u32 threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

template <u32 N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

template <u32 N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

// ------------------------------------------------------------------------------------------------
// Warpgroup MMA control and shared-memory matrix descriptors
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/// Pins a register so the compiler neither reads it early nor moves writes across wgmma control.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
/// The same for a wgmma's register A fragment: placed after the wait, it keeps the registers
/// allocated (and unchanged) until the MMAs that read them are done.
__device__ __forceinline__ void fence_operand(u32& r) { asm volatile("" : "+r"(r)::"memory"); }

/// Descriptor of a K-major operand tile in shared memory with 128-byte swizzling: rows of 128
/// bytes (128 FP8 or 64 bf16 values of K), 8-row core groups 1024 bytes apart. The tile must start on a
/// 1024-byte boundary; advancing K by 32 FP8 values adds 2 to the descriptor (32 bytes >> 4).
__device__ __forceinline__ u64 smem_desc_k_sw128(u32 smem_address) {
  u64 d = 0;
  // Start address >> 4 (14 bits): shared-memory addresses stay below 2^18 (228 KB), so no mask,
  // which lets the compiler fold constant offsets into the descriptor.
  d |= static_cast<u64>(smem_address >> 4);
  d |= static_cast<u64>(1) << 16;                          // leading byte offset (unused here)
  d |= static_cast<u64>(1024 >> 4) << 32;                  // stride byte offset: 8 rows x 128 B
  d |= static_cast<u64>(1) << 62;                          // layout: 128-byte swizzle
  return d;
}

/// Descriptor of an MN-major operand tile with 128-byte swizzling (bf16: 64 values of N per
/// 128-byte row, one row per K): 8-row core groups 1024 bytes apart along K, the next 64 values of
/// N `lbo_bytes` further (a multiple of 16, < 256 KiB). Starts on a 1024-byte boundary plus whole
/// 8-row groups.
__device__ __forceinline__ u64 smem_desc_mn_sw128(u32 smem_address, u32 lbo_bytes) {
  u64 d = 0;
  d |= static_cast<u64>((smem_address & 0x3FFFFu) >> 4);
  d |= static_cast<u64>((lbo_bytes >> 4) & 0x3FFFu) << 16;  // leading byte offset: next 64 of N
  d |= static_cast<u64>(1024 >> 4) << 32;                   // stride byte offset: next 8 of K
  d |= static_cast<u64>(1) << 62;
  return d;
}

// ------------------------------------------------------------------------------------------------
// stmatrix and conversions
// ------------------------------------------------------------------------------------------------

/// Stores two 8x8 b16 matrices; lanes 0-7 give matrix 0's row addresses, lanes 8-15 matrix 1's.
__device__ __forceinline__ void stmatrix_x2(u32 addr, u32 r0, u32 r1) {
  asm volatile("stmatrix.sync.aligned.x2.m8n8.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r0), "r"(r1) : "memory");
}

/// 1- and 8-byte shared-memory loads.
__device__ __forceinline__ u32 ld_shared_u8(u32 addr) {
  u32 v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void ld_shared_v2(u32 addr, u32& lo, u32& hi) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(lo), "=r"(hi) : "r"(addr) : "memory");
}
/// ld_shared_v2 of data that no longer changes (written before a barrier that precedes every
/// read): a plain load the compiler may schedule freely (not volatile, no memory clobber).
__device__ __forceinline__ void ld_shared_const_v2(u32 addr, u32& lo, u32& hi) {
  asm("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(lo), "=r"(hi) : "r"(addr));
}
__device__ __forceinline__ void st_shared_v2(u32 addr, u32 lo, u32 hi) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(addr), "r"(lo), "r"(hi) : "memory");
}

/// 16-byte shared-memory load.
__device__ __forceinline__ void ld_shared_v4(u32 addr, u32 (&v)[4]) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void st_shared_v4(u32 addr, const u32 (&v)[4]) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
}

/// 16 bytes of another CTA's shared memory (address from map_to_cta), as four floats.
__device__ __forceinline__ void ld_shared_cluster_v4(u32 cluster_addr, float (&v)[4]) {
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
               : "r"(cluster_addr)
               : "memory");
}

/// 4-byte store into another CTA's shared memory (address from map_to_cta).
__device__ __forceinline__ void st_shared_cluster_u32(u32 cluster_addr, u32 v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(cluster_addr), "r"(v) : "memory");
}

/// 16-byte shared-memory store of four floats.
__device__ __forceinline__ void st_shared_v4_f32(u32 addr, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

/// 16-byte global store.
__device__ __forceinline__ void st_global_v4(void* ptr, const u32 (&v)[4]) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
}

/// 16-byte global store, predicated inside the instruction (`on` false: nothing is stored), so a
/// per-lane condition adds no branch: the warp stays converged around it.
__device__ __forceinline__ void st_global_v4_if(void* ptr, const u32 (&v)[4], bool on) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %5, 0;\n @p st.global.v4.u32 [%0], {%1, %2, %3, %4};\n}" ::"l"(ptr),
      "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(u32(on))
      : "memory");
}

/// Two floats → two E4M3 bytes (`lo` in the low byte), round to nearest even, saturating to ±448
/// (NaN stays NaN): the SPEC §1 conversion.
__device__ __forceinline__ u16 pack_e4m3x2(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

/// 4-byte shared-memory store and load.
__device__ __forceinline__ void st_shared_u32(u32 addr, u32 v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_f32(u32 addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ float ld_shared_f32(u32 addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

/// 1-byte shared-memory store.
__device__ __forceinline__ void st_shared_u8(u32 addr, u32 v) {
  asm volatile("st.shared.u8 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

/// 2-byte shared-memory store.
__device__ __forceinline__ void st_shared_u16(u32 addr, u16 v) {
  asm volatile("st.shared.u16 [%0], %1;" ::"r"(addr), "h"(v) : "memory");
}

/// Vector atomic add without return: ptr[0..3] += v[0..3] (FP32, 16-byte aligned, sm_90).
__device__ __forceinline__ void red_add_v4_f32(float* ptr, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

/// The special-function unit's 2^x and 1/x (MUFU.EX2 / MUFU.RCP, a few ulps; denormal inputs and
/// results flushed to zero) without the range fix-ups __expf and __fdividef wrap around them.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rcp_approx_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/// Packs two floats to bf16x2 (round to nearest even): `lo` to the low half (lower address).
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

}  // namespace moekit::ptx
