// Probe: how fast can TMA fill a CTA's shared-memory stages from L2 (or DRAM), with no math? (results:
// docs/performance.md §Stage fill from L2). Traces measured ~62 GB/s per SM of stage fill in the GEMM K
// loops (32 KB per K block of a 128 x 128 tile, 48 KB of a 256 x 128 tile) and the wgmma probe ~33-35
// B/clk/SM for two bulk copies in flight.
// This probe separates what could set that figure:
//   - depth: stages in flight per CTA (latency-bound fill grows with it);
//   - CTAs: 16 ... 132 SMs filling at once (a per-SM limit stays flat, an aggregate one does not);
//   - kind: one contiguous bulk copy per stage, or TMA tensor boxes of 128 B x box_rows with the
//     128-byte swizzle (the kernels' K-major operand tiles: each box row is 128 B of a 1 KB pitch);
//   - source: each CTA its own two L2-resident stages, all CTAs the same two stages, or a 2 GB stream
//     (DRAM);
//   - multicast: 2-CTA clusters, each CTA loading half of every stage into both.
// One thread per CTA issues the copies; stage s % depth is refilled once its previous fill has landed
// (and, with multicast, once both CTAs of the pair have seen it land).
// Built as build/moekit_fill_probe (CMake target moekit_fill_probe); results: docs/performance.md §Stage fill from L2.
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include "gemm/gemm_launch.h"
#include "probe_device.h"
#include "ptx/ptx.cuh"
using namespace moekit;
using u32 = ptx::u32;

namespace {

constexpr int kMaxDepth = 8;
constexpr size_t kStreamBytes = size_t(2) << 30;  // the DRAM source: 2 GB, far beyond the 50 MB L2
constexpr u32 kPitch = 1024;                      // bytes per row of the tensor view

enum Source { kPrivate = 0, kShared = 1, kStream = 2 };

struct Params {
  int tensor;    // 0: bulk copies, 1: TMA tensor boxes
  int mcast;     // 0: single CTAs, 1: 2-CTA clusters sharing every stage
  int depth;     // stages
  u32 stage;     // bytes per stage
  u32 box_rows;  // rows per tensor box (box = 128 B x box_rows)
  int source;    // Source
  int steps;     // stage fills per CTA
};

// mbar_wait with a bound: a probe configuration that never completes a phase reports itself instead
// of hanging the run. Returns false after ~2^22 polls.
__device__ bool wait_bounded(u32 bar, u32 parity) {
  for (int i = 0; i < (1 << 22); ++i)
    if (ptx::mbar_try_wait(bar, parity)) return true;
  return false;
}

__device__ void fill_stages(const CUtensorMap& tmap, const unsigned char* src, const Params& p, u32 base, u32 rank,
                            unsigned long long* full, unsigned long long* empty, unsigned long long* cycles) {
  const u32 issue = p.mcast ? p.stage / 2 : p.stage;  // bytes this CTA loads per stage (bulk)
  const u32 box = 128u * p.box_rows;
  // Linear source offset of this CTA's part of fill s.
  auto offset = [&](int s) -> size_t {
    const size_t cta = p.mcast ? blockIdx.x / 2 : blockIdx.x;  // the pair loads one stage's bytes
    size_t o;
    if (p.source == kStream)
      o = ((cta * size_t(p.steps) + size_t(s)) * p.stage) % kStreamBytes;
    else
      o = (p.source == kShared ? 0 : cta * 2 * size_t(p.stage)) + size_t(s & 1) * p.stage;
    return o;
  };
  bool ok = true;
  const unsigned long long t0 = clock64();
  for (int s = 0; s < p.steps; ++s) {
    const int slot = s % p.depth, round = s / p.depth;
    const u32 full_bar = ptx::smem_addr(&full[slot]);
    if (round > 0) {
      ok = ok && wait_bounded(full_bar, u32(round - 1) & 1u);
      if (p.mcast) {
        const u32 empty_bar = ptx::smem_addr(&empty[slot]);
        ptx::mbar_arrive_cluster(ptx::map_to_cta(empty_bar, 0));
        ptx::mbar_arrive_cluster(ptx::map_to_cta(empty_bar, 1));
        ok = ok && wait_bounded(empty_bar, u32(round - 1) & 1u);
      }
      if (!ok) break;
    }
    ptx::mbar_arrive_expect_tx(full_bar, p.stage);
    const u32 dst = base + u32(slot) * p.stage;
    const size_t o = offset(s);
    if (!p.tensor) {
      if (p.mcast) {  // rank r loads half r of the stage into both CTAs
        ptx::bulk_load_multicast(dst + rank * issue, src + o + rank * issue, issue, full_bar, ptx::u16(3));
      } else {
        ptx::bulk_load(dst, src + o, issue, full_bar);
      }
    } else {
      // Every box of the stage; with multicast, rank r loads boxes r, r + 2, ... into both CTAs.
      for (u32 b = rank; b < p.stage / box; b += p.mcast ? 2u : 1u) {
        const size_t idx = o / box + b;
        const int c0 = int(idx % (kPitch / 128)) * 128, c1 = int(idx / (kPitch / 128)) * int(p.box_rows);
        const auto* desc = reinterpret_cast<const ptx::TmaDescriptor*>(&tmap);
        if (p.mcast)
          ptx::tma_load_2d_multicast(dst + b * box, desc, full_bar, c0, c1, 3);
        else
          ptx::tma_load_2d(dst + b * box, desc, full_bar, c0, c1);
      }
    }
  }
  for (int s = p.steps - p.depth < 0 ? 0 : p.steps - p.depth; ok && s < p.steps; ++s)
    ok = wait_bounded(ptx::smem_addr(&full[s % p.depth]), u32(s / p.depth) & 1u);
  cycles[blockIdx.x] = ok ? clock64() - t0 : 0ull;
}


__global__ void __launch_bounds__(32, 1)
    fill(const __grid_constant__ CUtensorMap tmap, const unsigned char* src, Params p, unsigned long long* cycles) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long full[kMaxDepth], empty[kMaxDepth];
  const u32 raw = ptx::smem_addr(smem_raw);
  const u32 base = (raw + 1023u) & ~1023u;
  const u32 rank = p.mcast ? ptx::cluster_ctarank() : 0u;
  if (threadIdx.x == 0) {
    for (int i = 0; i < p.depth; ++i) {
      ptx::mbar_init(ptx::smem_addr(&full[i]), 1);
      ptx::mbar_init(ptx::smem_addr(&empty[i]), 2);
    }
    ptx::fence_mbar_init();
  }
  if (p.mcast) ptx::cluster_sync(); else __syncthreads();
  if (threadIdx.x == 0) fill_stages(tmap, src, p, base, rank, full, empty, cycles);
  // Keep both CTAs of a pair alive until the peer's last multicast into this one has landed.
  if (p.mcast) ptx::cluster_sync();
}

void run(const char* label, const CUtensorMap& tmap, const unsigned char* src, Params p, int ctas,
         unsigned long long* cyc_dev) {
  const int smem = int(p.depth * p.stage + 1024);
  cudaFuncSetAttribute(fill, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(32);
  cfg.dynamicSmemBytes = size_t(smem);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = p.mcast ? 2 : 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaLaunchKernelEx(&cfg, fill, tmap, src, p, cyc_dev);  // warm-up
  cudaEventRecord(e0);
  cudaLaunchKernelEx(&cfg, fill, tmap, src, p, cyc_dev);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  unsigned long long h[264] = {};
  cudaMemcpy(h, cyc_dev, size_t(ctas) * 8, cudaMemcpyDeviceToHost);
  double mean = 0;
  bool hung = false;
  for (int i = 0; i < ctas; ++i) {
    mean += double(h[i]) / ctas;
    hung = hung || h[i] == 0;
  }
  if (hung) {
    std::printf("%-34s %4d CTAs  HUNG (a stage never completed; %s)\n", label, ctas, cudaGetErrorString(cudaGetLastError()));
    return;
  }
  const double per_cta = double(p.stage) * p.steps;  // bytes landing in each CTA
  const double l2_reads = per_cta * ctas / (p.mcast ? 2.0 : 1.0);
  std::printf("%-34s %4d CTAs  %6.1f B/clk/SM  %7.1f GB/s/SM  %6.2f TB/s landed  %6.2f TB/s read  %s\n", label, ctas,
              per_cta / mean, per_cta / (ms * 1e-3) / 1e9, per_cta * ctas / (ms * 1e-3) / 1e12,
              l2_reads / (ms * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace

int main() {
  const int sms = probe_device_sms("moekit_fill_probe", 264);
  if (sms == 0) return 1;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  unsigned char* src = nullptr;
  if (cudaMalloc(&src, kStreamBytes) != cudaSuccess) {
    std::fprintf(stderr, "moekit_fill_probe: cannot allocate the 2 GB source\n");
    return 1;
  }
  cudaMemset(src, 0x3c, kStreamBytes);
  unsigned long long* cyc = nullptr;
  cudaMalloc(&cyc, 264 * 8);
  const int even = sms & ~1;
  char label[96];
  for (u32 box_rows : {128u, 64u}) {
    const CUtensorMap tmap =
        detail::make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, src, kPitch, kStreamBytes / kPitch, kPitch, 128,
                            box_rows, CU_TENSOR_MAP_SWIZZLE_128B);
    auto go = [&](int tensor, int mcast, int depth, u32 stage_kb, int source, int ctas) {
      static const char* names[] = {"private", "shared", "stream"};
      std::snprintf(label, sizeof label, "%s%s b%u d%d %uKB %s", tensor ? "tma" : "bulk", mcast ? "+mc" : "",
                    tensor ? box_rows : 0u, depth, stage_kb, names[source]);
      Params p{tensor, mcast, depth, stage_kb * 1024u, box_rows, source, source == kStream ? 600 : 3000};
      run(label, tmap, src, p, ctas, cyc);
    };
    if (box_rows == 128) {
      // Depth and stage size, all SMs, L2-resident private stages.
      for (int tensor : {0, 1})
        for (u32 kb : {32u, 48u})
          for (int d : {1, 2, 3, 4})
            if (d * kb <= 192) go(tensor, 0, d, kb, kPrivate, sms);
      go(1, 0, 6, 32, kPrivate, sms);
      // Per SM or aggregate: fewer SMs filling at once.
      for (int c : {16, 33, 66, 99}) go(1, 0, 4, 32, kPrivate, c);
      // Hot lines, DRAM, multicast.
      go(1, 0, 4, 32, kShared, sms);
      go(1, 0, 4, 32, kStream, sms);
      go(0, 0, 4, 32, kStream, sms);
      for (int d : {2, 4}) go(1, 1, d, 32, kPrivate, even);
      go(1, 1, 3, 48, kPrivate, even);
      go(0, 1, 4, 32, kPrivate, even);
      go(0, 1, 4, 48, kPrivate, even);
      go(0, 1, 6, 32, kPrivate, even);
      go(1, 1, 6, 32, kPrivate, even);
      go(1, 1, 4, 32, kStream, even);
      for (int c : {16, 66}) go(1, 1, 4, 32, kPrivate, c);
    } else {
      go(1, 0, 4, 32, kPrivate, sms);
      go(1, 0, 5, 40, kPrivate, sms);
      go(1, 1, 4, 32, kPrivate, even);
      go(1, 1, 6, 32, kPrivate, even);
      go(1, 1, 4, 48, kPrivate, even);
    }
  }
  cudaFree(cyc);
  cudaFree(src);
}
