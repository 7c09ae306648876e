// Current-device facts, cached per device.
#pragma once
#include <cstddef>

namespace moekit::detail {

struct DeviceInfo {
  int device = 0;
  int cc_major = 0, cc_minor = 0;
  int num_sms = 0;
  size_t smem_optin = 0;   ///< max dynamic shared memory per block (opt-in)
  size_t l2_bytes = 0;
  /// max_clusters[s]: thread-block clusters of s CTAs (s = 1 ... 8) that run at once with one CTA
  /// per SM (cudaOccupancyMaxActiveClusters; fewer than num_sms / s where GPCs have spare SMs).
  int max_clusters[9] = {};
};

/// Clusters of `cluster_size` CTAs with `smem_per_cta` bytes of dynamic shared memory each that the
/// current device runs at once.
int max_active_clusters(int cluster_size, size_t smem_per_cta);

/// Facts of the current device. Throws ErrorCode::kUnsupportedDevice if there is no GPU.
const DeviceInfo& current_device();

/// Throws ErrorCode::kUnsupportedDevice unless the current device is Hopper (sm_90).
/// `what` names the calling function in the message.
const DeviceInfo& require_sm90(const char* what);

/// True when a CUDA device is visible (never throws).
bool gpu_available();

}  // namespace moekit::detail
