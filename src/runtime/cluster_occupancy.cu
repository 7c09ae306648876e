// How many thread-block clusters of each size the current device runs at once with one CTA per SM
// (clusters must fit inside one GPC, so e.g. clusters of 3 or 4 leave SMs of some GPCs idle).
#include <cuda_runtime.h>

#include "common/check.h"
#include "runtime/device.h"

namespace moekit::detail {
namespace {
__global__ void cluster_occupancy_probe_kernel() {}
}  // namespace

int max_active_clusters(int cluster_size, size_t smem_per_cta) {
  const void* fn = reinterpret_cast<const void*>(&cluster_occupancy_probe_kernel);
  MOEKIT_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_per_cta)));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(cluster_size) * 1024u, 1, 1);
  cfg.blockDim = dim3(128, 1, 1);
  cfg.dynamicSmemBytes = smem_per_cta;
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = unsigned(cluster_size);
  attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  MOEKIT_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg));
  return clusters;
}

}  // namespace moekit::detail
