// NCCL for expert parallelism (issue 39; built only with NCCL, cmake/nccl.cmake): the
// communicators of one process driving several GPUs (tests, `moekit bench ep` in one process) and
// the all-to-all of equal blocks, NCCL's own exchange that the EP dispatch and combine are
// measured against.
#pragma once
#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace moekit::detail {

/// Throws moekit::Error (kCudaError) with NCCL's message unless `result` is ncclSuccess.
void check_nccl(ncclResult_t result, const char* what);

/// One communicator per device of this process (ncclCommInitAll): rank r runs on devices[r].
class NcclGroup {
 public:
  /// Requires 1 <= devices.size() and distinct, visible devices.
  explicit NcclGroup(std::vector<int> devices);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  int device(int rank) const { return devices_[static_cast<size_t>(rank)]; }
  ncclComm_t comm(int rank) const { return comms_[static_cast<size_t>(rank)]; }

 private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};

/// All-to-all of equal blocks: rank r sends block p of send[r] (bytes_per_peer bytes at
/// p * bytes_per_peer) to rank p and receives rank p's block r into block p of recv[r], on
/// streams[r] (stream-ordered, no host synchronization). One pointer and stream per rank, each on
/// its rank's device.
void nccl_all_to_all(const NcclGroup& group, const std::vector<const void*>& send, const std::vector<void*>& recv,
                     size_t bytes_per_peer, const std::vector<cudaStream_t>& streams);

}  // namespace moekit::detail
