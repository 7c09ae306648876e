// Device check shared by the probes in bench/probe: an sm_90 GPU with at most `max_sms` SMs.
#pragma once
#include <cstdio>
#include <cuda_runtime.h>

/// Returns the SM count of device 0, or 0 after printing why `probe` cannot run there.
inline int probe_device_sms(const char* probe, int max_sms) {
  int devices = 0, sms = 0, major = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "%s: no CUDA device visible\n", probe);
    return 0;
  }
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (major != 9 || sms > max_sms) {
    std::fprintf(stderr, "%s: needs an sm_90 GPU with at most %d SMs (got sm_%d0, %d SMs)\n", probe, max_sms, major, sms);
    return 0;
  }
  return sms;
}
