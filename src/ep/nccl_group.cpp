#include "ep/nccl_group.h"

#include <algorithm>

#include "common/check.h"

namespace moekit::detail {

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw_error(ErrorCode::kCudaError, concat("moekit: NCCL error in ", what, ": ", ncclGetErrorString(result)));
}

NcclGroup::NcclGroup(std::vector<int> devices) : devices_(std::move(devices)) {
  int visible = 0;
  MOEKIT_CUDA_CHECK(cudaGetDeviceCount(&visible));
  std::vector<int> sorted = devices_;
  std::sort(sorted.begin(), sorted.end());
  MOEKIT_REQUIRE(!devices_.empty() && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() &&
                     sorted.front() >= 0 && sorted.back() < visible,
                 ErrorCode::kInvalidArgument, "NcclGroup: ", devices_.size(),
                 " devices must be distinct, at least one, each below the visible count ", visible);
  comms_.resize(devices_.size());
  check_nccl(ncclCommInitAll(comms_.data(), size(), devices_.data()), "ncclCommInitAll");
}

NcclGroup::~NcclGroup() {
  for (ncclComm_t c : comms_)
    if (c != nullptr) ncclCommDestroy(c);
}

void nccl_all_to_all(const NcclGroup& group, const std::vector<const void*>& send, const std::vector<void*>& recv,
                     size_t bytes_per_peer, const std::vector<cudaStream_t>& streams) {
  const int g = group.size();
  MOEKIT_REQUIRE(send.size() == size_t(g) && recv.size() == size_t(g) && streams.size() == size_t(g),
                 ErrorCode::kInvalidArgument, "nccl_all_to_all: one send buffer, receive buffer and stream per rank (",
                 g, "), got ", send.size(), ", ", recv.size(), ", ", streams.size());
  // One group over all ranks and peers: NCCL pairs the sends and receives without deadlock.
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < g; ++r) {
    const char* s = static_cast<const char*>(send[size_t(r)]);
    char* d = static_cast<char*>(recv[size_t(r)]);
    for (int p = 0; p < g; ++p) {
      check_nccl(ncclSend(s + size_t(p) * bytes_per_peer, bytes_per_peer, ncclUint8, p, group.comm(r),
                          streams[size_t(r)]),
                 "ncclSend");
      check_nccl(ncclRecv(d + size_t(p) * bytes_per_peer, bytes_per_peer, ncclUint8, p, group.comm(r),
                          streams[size_t(r)]),
                 "ncclRecv");
    }
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
}

}  // namespace moekit::detail
