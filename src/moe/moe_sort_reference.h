// Host reference of moe_sort and permute_quantize (include/moekit/moe_sort.h): the same outputs
// computed sequentially on the CPU, for tests and for the end-to-end MoE reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "moekit/moe_sort.h"

namespace moekit::detail {

/// Everything moe_sort writes, as host vectors.
struct MoeSortResult {
  std::vector<int32_t> expert_counts;         ///< [local_count]
  std::vector<int32_t> expert_offsets;        ///< [local_count + 1], contiguous_offsets(expert_counts)
  std::vector<int32_t> permuted_to_expanded;  ///< [moe_sort_rows_bound(T, k, local_count)], -1 for padding
  std::vector<int32_t> expanded_to_permuted;  ///< [T * k], -1 for dropped slots
  int32_t invalid_count = 0;                  ///< slots with an id < -1 or >= num_experts_total
};

/// moe_sort on the host from topk_ids [T, k] (row-major, T * k entries; may be null for T = 0).
/// Slots are visited in increasing expanded index and appended to their expert's segment, which
/// makes the order stable by construction. Throws kInvalidArgument on the arguments moe_sort
/// rejects (num_tokens < 0, top_k < 1, local_count < 1, a slice outside [0, num_experts_total), a
/// layout of 2^31 rows or more).
MoeSortResult moe_sort_reference(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts_total,
                                 int local_offset, int local_count);

/// permute_quantize on the host. x: [T, H] floats holding bf16 values (row stride H);
/// permuted_to_expanded: rows_bound entries. For every row r with 0 <= permuted_to_expanded[r] <
/// T * k, writes a_perm[r, 0:H] (row stride H bytes) = quantize_1x128(x[token]) and
/// sa_perm[kb * sfa_ld(rows_bound) + r] = its scales; other rows and entries are left as they are
/// (pre-fill them as needed). a_perm: rows_bound * H bytes, sa_perm: sfa_physical_size(rows_bound, H).
void permute_quantize_reference(const float* x, int64_t num_tokens, int64_t hidden, int top_k,
                                const std::vector<int32_t>& permuted_to_expanded, bool ue8m0, uint8_t* a_perm,
                                float* sa_perm);

/// permute_quantize_by_token on the host, driven by expanded_to_permuted [T * k]: for every slot
/// i with 0 <= r = expanded_to_permuted[i] < rows_bound, a_perm[r, 0:H] = quantize_1x128(x[i / k])
/// and sa_perm[kb * sfa_ld(rows_bound) + r] = its scales; nothing else is written.
/// a_perm: rows_bound * H bytes, sa_perm: sfa_physical_size(rows_bound, H).
void permute_quantize_by_token_reference(const float* x, int64_t num_tokens, int64_t hidden, int top_k,
                                         const std::vector<int32_t>& expanded_to_permuted, int64_t rows_bound,
                                         bool ue8m0, uint8_t* a_perm, float* sa_perm);

}  // namespace moekit::detail
