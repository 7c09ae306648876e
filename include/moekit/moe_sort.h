// moekit — device-side sort of routed tokens into the contiguous expert layout (SPEC §3–4). The
// activation permutation with per-token quantization that follows it is in moekit/moe_permute.h
// (included here too).
//
// Everything runs on the device with no host synchronization (graph-capturable). Expanded index
// i = t * k + j names slot j of token t. Only experts in the expert-parallel slice
// [local_offset, local_offset + local_count) are kept; local expert e' = id - local_offset.
// Requirements: local_count ≥ 1 and the slice inside [0, num_experts_total); T * k < 2^31 and the
// rows bound < 2^31 (the maps are int32). Violations throw moekit::Error(kInvalidArgument).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "moekit/moe_permute.h"

namespace moekit {

/// Device buffers moe_sort fills (sizes in elements; rows_bound = moe_sort_rows_bound(T, k, E_local)).
struct MoeSortBuffers {
  int32_t* expert_counts = nullptr;         ///< [local_count] valid rows per local expert
  int32_t* expert_offsets = nullptr;        ///< [local_count + 1] 128-aligned segment starts (contiguous_offsets)
  int32_t* permuted_to_expanded = nullptr;  ///< [rows_bound] expanded index of each permuted row, -1 for padding
  int32_t* expanded_to_permuted = nullptr;  ///< [T * k] permuted row of each slot, -1 if the slot is dropped
  /// [1] number of slots, over the whole batch (not only this slice: every EP rank sees the same
  /// value), with an id outside [-1, E_total). Written, not accumulated.
  int32_t* invalid_count = nullptr;
};

/// Upper bound on the permuted rows: contiguous_rows_upper_bound(T * k, local_count).
int64_t moe_sort_rows_bound(int64_t num_tokens, int top_k, int local_count);

/// Bytes of scratch memory moe_sort needs for these sizes (depends only on them; queries cub's
/// tuning for the current device, so it needs a CUDA device).
size_t moe_sort_workspace_size(int64_t num_tokens, int top_k, int local_count);

/// Sorts the slots of topk_ids [T, k] by local expert, stably (within an expert, rows are in
/// increasing expanded index), into the contiguous layout. Slots with id -1, ids outside the local
/// slice, and invalid ids (< -1 or ≥ num_experts_total; counted in invalid_count) are dropped.
/// The same expert twice in one token gives two rows. Padding rows get permuted_to_expanded = -1.
/// Every entry of every output is written. For T * k <= 4096 and local_count <= 1024 (decode batch
/// sizes) it is a single kernel launch that does not touch the workspace; otherwise a memset, a
/// classify kernel, cub's radix sort, a scan and a fill. Both give bit-identical outputs.
void moe_sort(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts_total, int local_offset,
              int local_count, const MoeSortBuffers& out, void* workspace, size_t workspace_bytes,
              cudaStream_t stream);

}  // namespace moekit
