// Device-side random fills for tests and benchmarks (counter-based hash; deterministic per seed).
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit::detail {

/// Fills n bf16 values with uniform values in [-scale, scale).
void fill_random_bf16(void* dst, int64_t n, float scale, uint64_t seed, cudaStream_t stream);
/// Fills n bytes with random finite E4M3 values (never NaN: 0x7F/0xFF are avoided).
void fill_random_e4m3(void* dst, int64_t n, uint64_t seed, cudaStream_t stream);
/// Fills n bytes with the E4M3 codes of normal values N(0, sigma^2), rounded to nearest and
/// saturated to ±448: the codes that amax-scaled block quantization of normally distributed data
/// produces when sigma = 448 / (the expected block maximum of |z|).
void fill_random_e4m3_normal(void* dst, int64_t n, float sigma, uint64_t seed, cudaStream_t stream);
/// Fills n bf16 values with normal values N(0, sigma^2).
void fill_random_bf16_normal(void* dst, int64_t n, float sigma, uint64_t seed, cudaStream_t stream);
/// Checkpoint-like expert weights, made as a model's are: `experts` matrices [n, k] of bf16
/// N(0, sigma^2), each quantized by the 128x128 weight quantizer (SPEC §1) into q [experts, n, k]
/// (FP8 E4M3) and scales [experts, ceil(n/128), ceil(k/128)]. Needs k % 16 == 0; allocates one
/// bf16 [n, k] scratch matrix on `stream` (stream-ordered).
void fill_checkpoint_weights(void* q, float* scales, int64_t experts, int64_t n, int64_t k, float sigma, uint64_t seed,
                             cudaStream_t stream);
/// OCP MX quantization of a bf16 [rows, k] matrix (k % 32 == 0) into codes [rows, k/2] and UE8M0
/// scales [rows, k/32]: moekit::quantize_mxfp4 on the device, bit for bit.
void quantize_mxfp4_bf16(const void* w, int64_t rows, int64_t k, uint8_t* codes, uint8_t* scales, cudaStream_t stream);
/// Checkpoint-like MXFP4 expert weights: `experts` matrices [n, k] of bf16 N(0, sigma^2), each
/// quantized by quantize_mxfp4_bf16 into codes [experts, n, k/2] and scales [experts, n, k/32]. The
/// bf16 values are fill_checkpoint_weights' for the same seed. Allocates one bf16 [n, k] scratch.
void fill_checkpoint_mxfp4(uint8_t* codes, uint8_t* scales, int64_t experts, int64_t n, int64_t k, float sigma,
                           uint64_t seed, cudaStream_t stream);
/// Fills n floats with uniform values in [lo, hi).
void fill_random_f32(float* dst, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream);

/// Keeps the stream busy for about `us` microseconds (one thread spinning on the global timer).
/// Benchmarks enqueue it before a timed sequence so that every timed launch is already queued
/// when the GPU reaches it: the events then measure device time, not host enqueue speed.
void gpu_spin(cudaStream_t stream, double us);

/// Reads `bytes` (a multiple of 16, 16-byte aligned) of `src` once with 16-byte loads spread over
/// every SM, and writes one word derived from them to *sink (so the loads cannot be removed):
/// the device's streaming-read bandwidth, for benchmark rooflines.
void read_sweep(const void* src, size_t bytes, unsigned* sink, cudaStream_t stream);

/// The same hash on the host: uniform float in [0, 1) for (seed, index). Lets tests regenerate
/// on the CPU exactly what the device filled.
float hash_uniform(uint64_t seed, uint64_t index);

}  // namespace moekit::detail
