// Probe: FP8 wgmma throughput of two math warpgroups by operand sharing (results:
// docs/performance.md §MMA rate by schedule (wgmma probe)).
//   mode 0 "stacked":  warpgroup w reads A_w and the shared B (dense / grouped 128 x 128 tiles)
//   mode 1 "side":     warpgroup w reads the shared A and B_w (MoE GEMM1 64 x 256 tiles)
//   mode 2 "indep":    A_w and B_w
//   mode 3 "single":   warpgroup 0 alone (A_0, B_0)
//   mode 4 "chained":  as 1, two chains of 64 per K block (2 wgmmas each, two accumulator sets), wait,
//                      sum, promote into a third set: the MoE GEMM1 prefill step (serial)
//   mode 5 "piped":    as 0, two accumulator sets, K block s+1 issued before s is waited for and
//                      promoted: the dense step (pipelined)
//   mode 6/7 "chain-o2/o3": mode 4 with the warpgroups taking turns (named barriers): the turn is
//                      passed right after issuing (6) or once the MMAs are done (7)
//   mode 8 "chain-pipe": two chains of 64 per K block, each promoted on its own under the next
//                      chain's wgmmas (a GEMM1 schedule since removed, with its part-0 exit)
//   mode 9 "halves":   as 0 (A_w, shared B) with B twice as wide (256 rows): per K block each
//                      warpgroup runs 4 chains of 64 (2 column halves x 2 K halves), each waited for and
//                      promoted into that half's sums (128 registers): a 128 x 256 GEMM1 tile
//   mode 10 "serial-prom": as 0, with the 64 FFMA promotion after each wait (the serial step)
//   mode 11 "quarters-pipe": as 9 with 64-column chains (m64n64k32) in two 32-register accumulators,
//                      each chain promoted under the next one's wgmmas
// "+copy": the same, while thread 0 keeps two bulk copies global -> shared in flight, one per step,
// of the bytes a TMA stage of that tile brings (the shared-memory fill the real kernel adds).
// Each warpgroup issues 4 m64n128k32 wgmmas per step (one 128-wide K block; 8 in mode 9, 16 m64n64k32
// in mode 11), commits and waits.
// Built as build/moekit_wgmma_probe (CMake target moekit_wgmma_probe); results: docs/performance.md §MMA rate by schedule (wgmma probe).
#include <cstdio>
#include <cuda_runtime.h>
#include "probe_device.h"
#include "ptx/ptx.cuh"
#include "ptx/wgmma_fp8.cuh"
using namespace moekit;
using u32 = ptx::u32;
using Mma = ptx::WgmmaE4M3<128>;

constexpr u32 kOperandBytes = 48 * 1024;

template <int kMode, int kSteps, u32 kCopyBytes>
__global__ void __launch_bounds__(256, 1)
    probe(float* out, unsigned long long* cycles, int steps, const unsigned char* copy_src) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long copy_bar[2];
  const u32 raw = ptx::smem_addr(smem_raw);
  const u32 base = (raw + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  for (u32 i = threadIdx.x; i < kOperandBytes; i += blockDim.x) {
    u32 h = i * 2654435761u ^ (blockIdx.x * 40503u);
    h ^= h >> 13;
    smem[i] = static_cast<unsigned char>((h & 0x37u) | ((h >> 8) & 0x80u));  // finite e4m3, |x| < 2
  }
  const u32 bar0 = ptx::smem_addr(&copy_bar[0]);
  if (threadIdx.x == 0) {
    ptx::mbar_init(bar0, 1);
    ptx::mbar_init(bar0 + 8, 1);
    ptx::fence_mbar_init();
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();
  // Step s's copy (thread 0): slot s % 2, after the copy two steps back has landed.
  auto copy = [&](int s) {
    if constexpr (kCopyBytes > 0) {
      if (threadIdx.x != 0) return;
      const u32 slot = u32(s) & 1u;
      if (s >= 2) ptx::mbar_wait(bar0 + 8 * slot, u32((s - 2) / 2) & 1u);
      ptx::mbar_arrive_expect_tx(bar0 + 8 * slot, kCopyBytes);
      ptx::bulk_load(base + kOperandBytes + slot * kCopyBytes, copy_src + (blockIdx.x * 2 + slot) * kCopyBytes,
                     kCopyBytes, bar0 + 8 * slot);
    }
  };
  auto copy_drain = [&](int s_end) {
    if constexpr (kCopyBytes > 0) {
      if (threadIdx.x != 0) return;
      for (int s = s_end - 2 < 0 ? 0 : s_end - 2; s < s_end; ++s)
        ptx::mbar_wait(bar0 + 8 * (u32(s) & 1u), u32(s / 2) & 1u);
    }
  };
  const u32 wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  if (kMode == 3 && wg == 1) return;
  const u32 a_off = (kMode == 1 || kMode == 4) ? 0u : wg * 8192u;
  const u32 b_off = 16384u + ((kMode == 0 || kMode == 5 || kMode >= 9) ? 0u : wg * 16384u);
  const ptx::u64 da = ptx::smem_desc_k_sw128(base + a_off);
  const ptx::u64 db = ptx::smem_desc_k_sw128(base + b_off);
  float acc[64], acc1[64], prom[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = acc1[i] = prom[i] = 0.0f;
  float sum = 0.0f;
  const float sc = 1.0f + 1e-3f * float(threadIdx.x % 7);
  auto fence_all = [&](float (&x)[64]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) ptx::fence_operand(x[i]);
  };
  auto promote = [&](float (&x)[64]) {  // the FP32 promotion: prom += scale * x
    fence_all(x);
#pragma unroll
    for (int i = 0; i < 64; ++i) prom[i] += sc * x[i];
  };
  const unsigned long long t0 = clock64();
  if constexpr (kMode == 4 || kMode == 6 || kMode == 7) {
    constexpr bool kOrd = kMode != 4;
    if (kOrd && wg == 1) ptx::named_barrier_arrive(2, 256);
    for (int s = 0; s < kSteps; ++s) {
      copy(s);
      fence_all(acc);
      fence_all(acc1);
      if (kOrd) ptx::named_barrier_sync(2 + wg, 256);
      ptx::wgmma_fence();
      Mma::mma(da, db, acc, 0);
      Mma::mma(da + 2, db + 2, acc, 1);
      ptx::wgmma_commit();
      Mma::mma(da + 4, db + 4, acc1, 0);
      Mma::mma(da + 6, db + 6, acc1, 1);
      ptx::wgmma_commit();
      if (kMode == 6) ptx::named_barrier_arrive(3 - wg, 256);
      ptx::wgmma_wait<0>();
      if (kMode == 7) ptx::named_barrier_arrive(3 - wg, 256);
      fence_all(acc);
      fence_all(acc1);
#pragma unroll
      for (int i = 0; i < 64; ++i) prom[i] += sc * (acc[i] + acc1[i]);
    }
    if (kOrd && wg == 0) ptx::named_barrier_sync(2, 256);
    copy_drain(kSteps);
  } else if constexpr (kMode == 9) {
    float prom2[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) prom2[i] = 0.0f;
    for (int s = 0; s < kSteps; ++s) {
      copy(s);
#pragma unroll
      for (u32 half = 0; half < 2; ++half) {
#pragma unroll
        for (u32 part = 0; part < 2; ++part) {
          fence_all(acc);
          ptx::wgmma_fence();
          Mma::mma(da + 4 * part, db + 1024 * half + 4 * part, acc, 0);
          Mma::mma(da + 4 * part + 2, db + 1024 * half + 4 * part + 2, acc, 1);
          ptx::wgmma_commit();
          ptx::wgmma_wait<0>();
          fence_all(acc);
#pragma unroll
          for (int i = 0; i < 64; ++i) prom2[64 * half + i] += sc * acc[i];
        }
      }
    }
    copy_drain(kSteps);
#pragma unroll
    for (int i = 0; i < 64; ++i) prom[i] = prom2[i] + prom2[64 + i];
  } else if constexpr (kMode == 11) {
    using Mma64 = ptx::WgmmaE4M3<64>;
    float prom4[128], q0[32], q1[32];
#pragma unroll
    for (int i = 0; i < 128; ++i) prom4[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) q0[i] = q1[i] = 0.0f;
    auto fence32 = [&](float (&x)[32]) {
#pragma unroll
      for (int i = 0; i < 32; ++i) ptx::fence_operand(x[i]);
    };
    // chain c of a step: quarter c / 2 (64 columns of B), K half c % 2
    auto issue_q = [&](float (&x)[32], u32 c) {
      fence32(x);
      ptx::wgmma_fence();
      const u32 q = c / 2, part = c % 2;
      Mma64::mma(da + 4 * part, db + 512 * q + 4 * part, x, 0);
      Mma64::mma(da + 4 * part + 2, db + 512 * q + 4 * part + 2, x, 1);
      ptx::wgmma_commit();
    };
    auto promote_q = [&](float (&x)[32], u32 q) {
      fence32(x);
#pragma unroll
      for (int i = 0; i < 32; ++i) prom4[32 * q + i] += sc * x[i];
    };
    for (int s = 0; s < kSteps; ++s) {
      copy(s);
      issue_q(q0, 0);
#pragma unroll
      for (u32 c = 0; c < 8; c += 2) {
        issue_q(q1, c + 1);
        ptx::wgmma_wait<1>();
        promote_q(q0, c / 2);
        if (c + 2 < 8) {
          issue_q(q0, c + 2);
          ptx::wgmma_wait<1>();
        } else {
          ptx::wgmma_wait<0>();
        }
        promote_q(q1, c / 2);
      }
    }
    copy_drain(kSteps);
#pragma unroll
    for (int i = 0; i < 64; ++i) prom[i] = prom4[i] + prom4[64 + i];
  } else if constexpr (kMode == 8) {
    auto issue_part = [&](float (&x)[64], u32 part) {
      fence_all(x);
      ptx::wgmma_fence();
      Mma::mma(da + 4 * part, db + 4 * part, x, 0);
      Mma::mma(da + 4 * part + 2, db + 4 * part + 2, x, 1);
      ptx::wgmma_commit();
    };
    auto drain = [&](float (&x)[64]) {  // the last chain in flight: wait for it and promote it
      ptx::wgmma_wait<0>();
      promote(x);
    };
    issue_part(acc, 0);
    const int last = steps - 1;
    for (int s = 0;; ++s) {
      if (s == last && steps < 0) {  // the part-0 exit ptxas needs (never taken here)
        drain(acc);
        break;
      }
      issue_part(acc1, 1);
      ptx::wgmma_wait<1>();
      promote(acc);
      if (s == last) {
        drain(acc1);
        break;
      }
      issue_part(acc, 0);
      ptx::wgmma_wait<1>();
      promote(acc1);
    }
  } else if constexpr (kMode == 5) {
    auto issue = [&](float (&x)[64]) {
      fence_all(x);
      ptx::wgmma_fence();
#pragma unroll
      for (u32 k = 0; k < 4; ++k) Mma::mma(da + 2 * k, db + 2 * k, x, k);
      ptx::wgmma_commit();
    };
    copy(0);
    issue(acc);
    const int last = steps - 1;
    for (int s = 0;; s += 2) {
      if (s == last) {
        ptx::wgmma_wait<0>();
        promote(acc);
        break;
      }
      copy(s + 1);
      issue(acc1);
      ptx::wgmma_wait<1>();
      promote(acc);
      if (s + 1 == last) {
        ptx::wgmma_wait<0>();
        promote(acc1);
        break;
      }
      copy(s + 2);
      issue(acc);
      ptx::wgmma_wait<1>();
      promote(acc1);
    }
    copy_drain(steps);
  } else {  // modes 0-3 and 10 (serial; mode 10 promotes)
    for (int s = 0; s < kSteps; ++s) {
      copy(s);
      fence_all(acc);
      ptx::wgmma_fence();
#pragma unroll
      for (u32 k = 0; k < 4; ++k) Mma::mma(da + 2 * k, db + 2 * k, acc, k);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      if constexpr (kMode == 10) {
        promote(acc);
      } else {
        fence_all(acc);
        sum += acc[0] * acc[63];
      }
    }
    copy_drain(kSteps);
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) sum += prom[i];
  const unsigned long long t1 = clock64();
  out[blockIdx.x * 256 + threadIdx.x] = sum;
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
}

template <int kMode, u32 kCopyBytes = 0>
void run(const char* name, int sms, const unsigned char* copy_src) {
  constexpr int kSteps = 20000;
  float* out;
  unsigned long long* cyc;
  cudaMalloc(&out, size_t(sms) * 256 * 4);
  cudaMalloc(&cyc, size_t(sms) * 2 * 8);
  cudaMemset(cyc, 0, size_t(sms) * 2 * 8);
  const int smem = int(kOperandBytes + 2 * kCopyBytes + 1024);
  auto* kernel = probe<kMode, kSteps, kCopyBytes>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kernel<<<sms, 256, smem>>>(out, cyc, kSteps, copy_src);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  kernel<<<sms, 256, smem>>>(out, cyc, kSteps, copy_src);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  unsigned long long h[2 * 132] = {};
  cudaMemcpy(h, cyc, size_t(sms) * 2 * 8, cudaMemcpyDeviceToHost);
  unsigned long long mx = 0;
  for (int i = 0; i < 2 * sms; ++i) mx = h[i] > mx ? h[i] : mx;
  const double wgs = kMode == 3 ? 1.0 : 2.0;
  const double fma = wgs * kSteps * (kMode == 9 || kMode == 11 ? 8.0 : 4.0) * 64 * 128 * 32;
  std::printf("%-16s %8.1f us  %7.1f FMA/clk/SM (of 4096)  %6.1f TFLOPS  %s\n", name, ms * 1e3, fma / double(mx),
              2.0 * fma * sms / (ms * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
  cudaFree(out);
  cudaFree(cyc);
}

int main() {
  const int sms = probe_device_sms("moekit_wgmma_probe", 132);
  if (sms == 0) return 1;
  unsigned char* copy_src = nullptr;
  const size_t copy_bytes = size_t(sms) * 2 * kOperandBytes;
  cudaMalloc(&copy_src, copy_bytes);
  cudaMemset(copy_src, 0x3c, copy_bytes);
  for (int r = 0; r < 2; ++r) {
    run<0>("stacked", sms, copy_src);
    run<1>("side", sms, copy_src);
    run<2>("indep", sms, copy_src);
    run<3>("single", sms, copy_src);
    run<4>("chained", sms, copy_src);
    run<5>("piped", sms, copy_src);
    run<6>("chain-o2", sms, copy_src);
    run<7>("chain-o3", sms, copy_src);
    run<8>("chain-pipe", sms, copy_src);
    run<9>("halves", sms, copy_src);
    run<10>("serial-prom", sms, copy_src);
    // With each tile's stage bytes copied in per step: 64 x 256 GEMM1 tile 40 KB, 128 x 256 48 KB,
    // 128 x 128 32 KB.
    run<4, 40 * 1024>("chained+copy", sms, copy_src);
    run<9, 48 * 1024>("halves+copy", sms, copy_src);
    run<11>("quarters-pipe", sms, copy_src);
    run<11, 48 * 1024>("quarters-pipe+copy", sms, copy_src);
    run<9, 24 * 1024>("halves+copy24", sms, copy_src);
    run<4, 24 * 1024>("chained+copy24", sms, copy_src);
    run<10, 32 * 1024>("serial-prom+copy", sms, copy_src);
    run<5, 32 * 1024>("piped+copy", sms, copy_src);
  }
  cudaFree(copy_src);
}
