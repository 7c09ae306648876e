#include "moe/moe_unfused.h"

#include "common/check.h"
#include "moe/workspace_carver.h"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_ops.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"

namespace moekit::detail {
namespace {


struct Plan : MoeSortRegions {  // sort, ws, ws_bytes, rows
  uint8_t* xq;
  float* sx;
  uint8_t* a_perm;
  float* sa_perm;
  uint16_t* d1;
  uint8_t* hq;
  float* sa2;
  uint16_t* d2;
  size_t bytes;  ///< workspace bytes the plan uses
};

/// Lays the scratch buffers out in `base` (nullptr: only measure).
Plan carve(char* base, int64_t t, int k, int64_t h, int64_t inter, int local_count) {
  WorkspaceCarver c{base};
  Plan p{};
  static_cast<MoeSortRegions&>(p) = take_sort_regions(c, t, k, local_count);
  p.xq = c.take<uint8_t>(std::max<int64_t>(t, 1) * h);
  p.sx = c.take<float>(std::max<int64_t>(t, 1) * ceil_div(h, kQuantBlock));
  p.a_perm = c.take<uint8_t>(p.rows * h);
  p.sa_perm = c.take<float>(sfa_physical_size(p.rows, h));
  p.d1 = c.take<uint16_t>(p.rows * 2 * inter);
  p.hq = c.take<uint8_t>(p.rows * inter);
  p.sa2 = c.take<float>(sfa_physical_size(p.rows, inter));
  p.d2 = c.take<uint16_t>(p.rows * h);
  p.bytes = c.used;
  return p;
}

}  // namespace

size_t moe_unfused_workspace_size(int64_t num_tokens, int top_k, int64_t hidden, int64_t inter, int local_count) {
  return carve(nullptr, num_tokens, top_k, hidden, inter, local_count).bytes;
}

void moe_forward_unfused(const MoeUnfusedArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  constexpr const char* fn = "moekit::detail::moe_forward_unfused";
  MOEKIT_REQUIRE(workspace_bytes >= moe_unfused_workspace_size(a.num_tokens, a.top_k, a.hidden, a.inter, a.local_count),
                 ErrorCode::kInvalidArgument, fn, ": workspace too small");
  MOEKIT_REQUIRE((reinterpret_cast<uintptr_t>(workspace) & 255u) == 0, ErrorCode::kMisaligned, fn,
                 ": workspace must be 256-byte aligned");
  const Plan p = carve(static_cast<char*>(workspace), a.num_tokens, a.top_k, a.hidden, a.inter, a.local_count);
  MoeSortBuffers sort = p.sort;
  sort.invalid_count = a.invalid_count;
  moe_sort(a.topk_ids, a.num_tokens, a.top_k, a.num_experts, a.local_offset, a.local_count, sort, p.ws,
           p.ws_bytes, stream);
  // y rows of tokens without kept slots must still be written: combine handles that.
  if (a.num_tokens == 0) return;
  permute_quantize(a.x, a.num_tokens, a.hidden, a.top_k, sort.permuted_to_expanded, p.rows, p.xq, p.sx, p.a_perm,
                   p.sa_perm, false, stream);

  GroupedGemmFp8Args g1;
  g1.num_groups = a.local_count;
  g1.n = 2 * a.inter;
  g1.k = a.hidden;
  g1.a = p.a_perm;
  g1.lda = a.hidden;
  g1.sa = p.sa_perm;
  g1.b = a.w1;
  g1.ldb = a.hidden;
  g1.sb = a.sw1;
  g1.d = p.d1;
  g1.ldd = 2 * a.inter;
  grouped_gemm_fp8_contiguous(g1, p.rows, sort.expert_offsets, sort.expert_counts, stream);

  swiglu_quantize(p.d1, 2 * a.inter, p.rows, a.inter, a.limit, p.hq, a.inter, p.sa2, false, stream,
                  sort.expert_offsets + a.local_count);

  GroupedGemmFp8Args g2;
  g2.num_groups = a.local_count;
  g2.n = a.hidden;
  g2.k = a.inter;
  g2.a = p.hq;
  g2.lda = a.inter;
  g2.sa = p.sa2;
  g2.b = a.w2;
  g2.ldb = a.inter;
  g2.sb = a.sw2;
  g2.d = p.d2;
  g2.ldd = a.hidden;
  grouped_gemm_fp8_contiguous(g2, p.rows, sort.expert_offsets, sort.expert_counts, stream);

  moe_combine(p.d2, a.hidden, sort.expanded_to_permuted, a.topk_weights, a.num_tokens, a.top_k, a.hidden, a.y,
              a.hidden, stream);
}

}  // namespace moekit::detail
