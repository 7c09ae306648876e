// Configuration selection for the FP8 GEMM family — the one place that decides tile shapes,
// stage counts, rasterization and grid size. Pure host code, unit-tested on the CPU.
#pragma once
#include <cstdint>
#include <string>

#include "moekit/gemm.h"

namespace moekit::detail {

/// What the heuristic needs to know about the device.
struct GemmDeviceLimits {
  int num_sms = 132;                  ///< H100 SXM / H200
  unsigned smem_bytes = 232448;       ///< opt-in dynamic shared memory per block (227 KiB)
};

/// Most pipeline stages that fit in shared memory for this tile (capped), 0 if none.
int gemm_max_stages(int block_m, int block_n, const GemmDeviceLimits& lim);

/// Picks the configuration with the lowest modeled time (see heuristic.cpp for the model) for
/// `groups` independent problems of m x n x k each (1 for the dense GEMM; grouped GEMMs pass the
/// expected rows per group).
GemmConfig select_gemm_config(int64_t m, int64_t n, int64_t k, const GemmDeviceLimits& lim, int64_t groups = 1);

/// Empty if `c` can run this shape on this device, else the reason.
std::string gemm_config_problem(const GemmConfig& c, const GemmDeviceLimits& lim);

}  // namespace moekit::detail
