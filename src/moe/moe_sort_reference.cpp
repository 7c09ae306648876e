// Host reference of moe_sort and permute_quantize (see moe_sort_reference.h).
#include "moe/moe_sort_reference.h"

#include <cstddef>

#include "common/check.h"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"

namespace moekit::detail {

MoeSortResult moe_sort_reference(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts_total,
                                 int local_offset, int local_count) {
  constexpr const char* fn = "moekit::detail::moe_sort_reference";
  // Validates num_tokens, top_k, local_count and the 2^31-row limit.
  const int64_t rows = moe_sort_rows_bound(num_tokens, top_k, local_count);
  MOEKIT_REQUIRE(num_experts_total >= 1, ErrorCode::kInvalidArgument, fn, ": num_experts_total = ",
                 num_experts_total, " must be >= 1");
  MOEKIT_REQUIRE(local_offset >= 0 && int64_t(local_offset) + local_count <= num_experts_total,
                 ErrorCode::kInvalidArgument, fn, ": the local slice [", local_offset, ", ",
                 int64_t(local_offset) + local_count, ") must lie inside [0, ", num_experts_total, ")");
  const int64_t n = num_tokens * top_k;
  MOEKIT_REQUIRE(n == 0 || topk_ids != nullptr, ErrorCode::kInvalidArgument, fn, ": topk_ids is null");

  MoeSortResult r;
  r.expert_counts.assign(size_t(local_count), 0);
  r.expanded_to_permuted.assign(size_t(n), -1);
  r.permuted_to_expanded.assign(size_t(rows), -1);

  // Local expert of each slot, or -1 if the slot is dropped.
  std::vector<int32_t> local(size_t(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = topk_ids[i];
    if (id == -1) continue;
    if (id < -1 || id >= num_experts_total) {
      ++r.invalid_count;
      continue;
    }
    if (id < local_offset || id >= local_offset + local_count) continue;
    local[size_t(i)] = id - local_offset;
    ++r.expert_counts[size_t(id - local_offset)];
  }
  r.expert_offsets = contiguous_offsets(r.expert_counts);

  std::vector<int32_t> cursor(r.expert_offsets.begin(), r.expert_offsets.end() - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t e = local[size_t(i)];
    if (e < 0) continue;
    const int32_t row = cursor[size_t(e)]++;
    r.permuted_to_expanded[size_t(row)] = static_cast<int32_t>(i);
    r.expanded_to_permuted[size_t(i)] = row;
  }
  return r;
}

void permute_quantize_reference(const float* x, int64_t num_tokens, int64_t hidden, int top_k,
                                const std::vector<int32_t>& permuted_to_expanded, bool ue8m0, uint8_t* a_perm,
                                float* sa_perm) {
  constexpr const char* fn = "moekit::detail::permute_quantize_reference";
  MOEKIT_REQUIRE(num_tokens >= 0 && hidden >= 1 && top_k >= 1, ErrorCode::kInvalidArgument, fn,
                 ": need num_tokens >= 0, hidden >= 1 and top_k >= 1");
  const int64_t rows = static_cast<int64_t>(permuted_to_expanded.size());
  const int64_t kb = ceil_div(hidden, kQuantBlock);
  const int64_t ld = sfa_ld(rows);
  const int64_t slots = num_tokens * top_k;

  // Each token quantized once, as the GPU does.
  std::vector<uint8_t> q(size_t(num_tokens * hidden));
  std::vector<float> s(size_t(num_tokens * kb));
  if (num_tokens > 0) quantize_1x128(x, num_tokens, hidden, hidden, q.data(), hidden, s.data(), ue8m0);

  for (int64_t r = 0; r < rows; ++r) {
    const int32_t idx = permuted_to_expanded[size_t(r)];
    if (idx < 0 || idx >= slots) continue;
    const int64_t t = idx / top_k;
    for (int64_t c = 0; c < hidden; ++c) a_perm[r * hidden + c] = q[size_t(t * hidden + c)];
    for (int64_t b = 0; b < kb; ++b) sa_perm[b * ld + r] = s[size_t(t * kb + b)];
  }
}

void permute_quantize_by_token_reference(const float* x, int64_t num_tokens, int64_t hidden, int top_k,
                                         const std::vector<int32_t>& expanded_to_permuted, int64_t rows_bound,
                                         bool ue8m0, uint8_t* a_perm, float* sa_perm) {
  constexpr const char* fn = "moekit::detail::permute_quantize_by_token_reference";
  MOEKIT_REQUIRE(num_tokens >= 0 && hidden >= 1 && top_k >= 1 && rows_bound >= 0, ErrorCode::kInvalidArgument, fn,
                 ": need num_tokens >= 0, hidden >= 1, top_k >= 1 and rows_bound >= 0");
  MOEKIT_REQUIRE(int64_t(expanded_to_permuted.size()) == num_tokens * top_k, ErrorCode::kInvalidArgument, fn,
                 ": expanded_to_permuted has ", expanded_to_permuted.size(), " entries, not T * k = ",
                 num_tokens * top_k);
  const int64_t kb = ceil_div(hidden, kQuantBlock);
  const int64_t ld = sfa_ld(rows_bound);
  std::vector<uint8_t> q(size_t(num_tokens * hidden));
  std::vector<float> s(size_t(num_tokens * kb));
  if (num_tokens > 0) quantize_1x128(x, num_tokens, hidden, hidden, q.data(), hidden, s.data(), ue8m0);
  for (int64_t i = 0; i < num_tokens * top_k; ++i) {
    const int32_t r = expanded_to_permuted[size_t(i)];
    if (r < 0 || r >= rows_bound) continue;
    const int64_t t = i / top_k;
    for (int64_t c = 0; c < hidden; ++c) a_perm[r * hidden + c] = q[size_t(t * hidden + c)];
    for (int64_t b = 0; b < kb; ++b) sa_perm[b * ld + r] = s[size_t(t * kb + b)];
  }
}

}  // namespace moekit::detail
