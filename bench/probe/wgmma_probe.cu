// Probe (v16): FP8 wgmma throughput of two math warpgroups by operand sharing.
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
//                      chain's wgmmas (the v15 schedule, with its part-0 exit)
// Each warpgroup issues 4 m64n128k32 wgmmas per step (one 128-wide K block), commits and waits.
// Built as build/moekit_wgmma_probe (CMake target moekit_wgmma_probe); results: docs/perf-notes.md v16.
#include <cstdio>
#include <cuda_runtime.h>
#include "ptx/ptx.cuh"
#include "ptx/wgmma_fp8.cuh"
using namespace moekit;
using u32 = ptx::u32;
using Mma = ptx::WgmmaE4M3<128>;

template <int kMode, int kSteps>
__global__ void __launch_bounds__(256, 1) probe(float* out, unsigned long long* cycles, int steps) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 raw = ptx::smem_addr(smem_raw);
  const u32 base = (raw + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  for (u32 i = threadIdx.x; i < 48 * 1024; i += blockDim.x) {
    u32 h = i * 2654435761u ^ (blockIdx.x * 40503u);
    h ^= h >> 13;
    smem[i] = static_cast<unsigned char>((h & 0x37u) | ((h >> 8) & 0x80u));  // finite e4m3, |x| < 2
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();
  const u32 wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  if (kMode == 3 && wg == 1) return;
  const u32 a_off = (kMode == 1 || kMode == 4) ? 0u : wg * 8192u;
  const u32 b_off = 16384u + ((kMode == 0 || kMode == 5) ? 0u : wg * 16384u);
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
    issue(acc);
    const int last = steps - 1;
    for (int s = 0;; s += 2) {
      if (s == last) {
        ptx::wgmma_wait<0>();
        promote(acc);
        break;
      }
      issue(acc1);
      ptx::wgmma_wait<1>();
      promote(acc);
      if (s + 1 == last) {
        ptx::wgmma_wait<0>();
        promote(acc1);
        break;
      }
      issue(acc);
      ptx::wgmma_wait<1>();
      promote(acc1);
    }
  } else {
    for (int s = 0; s < kSteps; ++s) {
      fence_all(acc);
      ptx::wgmma_fence();
#pragma unroll
      for (u32 k = 0; k < 4; ++k) Mma::mma(da + 2 * k, db + 2 * k, acc, k);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      fence_all(acc);
      sum += acc[0] * acc[63];
    }
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) sum += prom[i];
  const unsigned long long t1 = clock64();
  out[blockIdx.x * 256 + threadIdx.x] = sum;
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
}

template <int kMode>
void run(const char* name, int sms) {
  constexpr int kSteps = 20000;
  float* out;
  unsigned long long* cyc;
  cudaMalloc(&out, size_t(sms) * 256 * 4);
  cudaMalloc(&cyc, size_t(sms) * 2 * 8);
  cudaMemset(cyc, 0, size_t(sms) * 2 * 8);
  const int smem = 100 * 1024;
  cudaFuncSetAttribute(probe<kMode, kSteps>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  probe<kMode, kSteps><<<sms, 256, smem>>>(out, cyc, kSteps);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  probe<kMode, kSteps><<<sms, 256, smem>>>(out, cyc, kSteps);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  unsigned long long h[2 * 132] = {};
  cudaMemcpy(h, cyc, size_t(sms) * 2 * 8, cudaMemcpyDeviceToHost);
  unsigned long long mx = 0;
  for (int i = 0; i < 2 * sms; ++i) mx = h[i] > mx ? h[i] : mx;
  const double wgs = kMode == 3 ? 1.0 : 2.0;
  const double fma = wgs * kSteps * 4.0 * 64 * 128 * 32;
  std::printf("%-8s %8.1f us  %7.1f FMA/clk/SM (of 4096)  %6.1f TFLOPS  %s\n", name, ms * 1e3, fma / double(mx),
              2.0 * fma * sms / (ms * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
  cudaFree(out);
  cudaFree(cyc);
}

int main() {
  int devices = 0, sms = 0, major = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "moekit_wgmma_probe: no CUDA device visible\n");
    return 1;
  }
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (major != 9 || sms > 132) {
    std::fprintf(stderr, "moekit_wgmma_probe: needs an sm_90 GPU with at most 132 SMs (got sm_%d0, %d SMs)\n", major, sms);
    return 1;
  }
  for (int r = 0; r < 2; ++r) {
    run<0>("stacked", sms);
    run<1>("side", sms);
    run<2>("indep", sms);
    run<3>("single", sms);
    run<4>("chained", sms);
    run<5>("piped", sms);
    run<6>("chain-o2", sms);
    run<7>("chain-o3", sms);
    run<8>("chain-pipe", sms);
  }
}
