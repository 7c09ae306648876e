// sparse_attention (include/moekit/attention.h): checks, the plan (src/planning/attention_plan.h),
// the kernel launch (sparse_mqa_kernel.cuh) and, for split keys, the merge.
#include <cmath>

#include "attention/attention_merge.h"
#include "attention/sparse_mqa_kernel.cuh"
#include "common/check.h"
#include "moekit/attention.h"
#include "planning/attention_plan.h"
#include "runtime/device.h"
#include "runtime/pdl.h"

namespace moekit {
namespace {

template <int D, bool kMixed>
void launch(const attn::SparseMqaParams& p, int64_t ctas, cudaStream_t stream) {
  constexpr int kSmem = attn::SparseMqaTraits<D>::kSmemBytes;
  using Tr = attn::SparseMqaTraits<D>;
  auto* kernel = &attn::sparse_mqa_kernel<D, kMixed>;
  MOEKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  if constexpr (Tr::kConsumers == 2) {
    // setmaxnreg.inc waits for registers the CTA's other warps released: with fewer registers at
    // launch than the split assumes, the consumers would wait forever. Fail loudly instead.
    cudaFuncAttributes attr{};
    MOEKIT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    MOEKIT_REQUIRE(attr.numRegs * Tr::kThreads >= 128 * (Tr::kProducerRegs + Tr::kScoreRegs + Tr::kAccumulateRegs),
                   ErrorCode::kInternal, "moekit::sparse_attention: the kernel was built with ", attr.numRegs,
                   " registers per thread, fewer than its setmaxnreg split needs");
  }
  kernel<<<static_cast<unsigned>(ctas), attn::SparseMqaTraits<D>::kThreads, kSmem, stream>>>(p);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void launch_for_dim(const attn::SparseMqaParams& p, int dim, bool mixed, int64_t ctas, cudaStream_t stream) {
  if (mixed) return launch<512, true>(p, ctas, stream);
  switch (dim) {
    case 64: return launch<64, false>(p, ctas, stream);
    case 128: return launch<128, false>(p, ctas, stream);
    case 256: return launch<256, false>(p, ctas, stream);
    default: return launch<512, false>(p, ctas, stream);
  }
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

size_t sparse_attention_workspace_bytes(const SparseAttentionArgs& args, AttentionOutput mode) {
  detail::validate_sparse_attention_shape(args, "moekit::sparse_attention_workspace_bytes");
  if (args.num_tokens == 0) return 0;
  const char* fn = "moekit::sparse_attention_workspace_bytes";
  const detail::DeviceInfo& dev = detail::require_sm90(fn);
  return detail::checked_plan(args, mode, dev.num_sms, fn).workspace_bytes;
}

void sparse_attention(const SparseAttentionArgs& a, const AttentionKv& kv, AttentionOutput mode,
                      const SparseAttentionOut& out, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const char* fn = "moekit::sparse_attention";
  detail::validate_sparse_attention(a, kv, fn);
  MOEKIT_REQUIRE(mode == AttentionOutput::kNormalized || mode == AttentionOutput::kPerSourcePartials,
                 ErrorCode::kInvalidArgument, fn, ": unknown AttentionOutput");  // before out.* is read
  if (a.num_tokens == 0) return;
  const bool normalized = mode == AttentionOutput::kNormalized;
  if (normalized) {
    MOEKIT_REQUIRE(out.o != nullptr, ErrorCode::kInvalidArgument, fn, ": out.o is required (kNormalized)");
    MOEKIT_REQUIRE(aligned(out.o, 16) && aligned(out.lse, 4), ErrorCode::kMisaligned, fn,
                   ": out.o must be 16-byte aligned, out.lse 4-byte");
  } else {
    MOEKIT_REQUIRE(out.o_partial && out.lse_partial, ErrorCode::kInvalidArgument, fn,
                   ": out.o_partial and out.lse_partial are required (kPerSourcePartials)");
    MOEKIT_REQUIRE(aligned(out.o_partial, 16) && aligned(out.lse_partial, 4), ErrorCode::kMisaligned, fn,
                   ": out.o_partial must be 16-byte aligned, out.lse_partial 4-byte");
  }
  const detail::DeviceInfo& dev = detail::require_sm90(fn);
  const detail::SparseAttentionPlan plan = detail::checked_plan(a, mode, dev.num_sms, fn);
  const int64_t ctas = a.num_tokens * plan.splits * plan.head_blocks;
  MOEKIT_REQUIRE(plan.direct || (workspace != nullptr && workspace_bytes >= plan.workspace_bytes &&
                                 aligned(workspace, 16)),
                 ErrorCode::kInvalidArgument, fn, ": needs a 16-byte aligned workspace of ", plan.workspace_bytes,
                 " bytes (sparse_attention_workspace_bytes), got ", workspace_bytes);

  const bool mixed = kv.format == KvFormat::kMixedFp8;
  attn::SparseMqaParams p{};
  p.q = static_cast<const __nv_bfloat16*>(a.q);
  p.num_tokens = a.num_tokens;
  p.heads = a.heads;
  p.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  p.sink = a.sink;
  p.kv = static_cast<const __nv_bfloat16*>(kv.bf16);
  p.nope = kv.mixed.nope;
  p.scales = kv.mixed.scales;
  p.rope = static_cast<const __nv_bfloat16*>(kv.mixed.rope);
  p.nope_stride = kv.mixed.nope_stride;
  p.scales_stride = kv.mixed.scales_stride;
  p.rope_stride = kv.mixed.rope_stride;
  p.num_entries = mixed ? kv.mixed.num_entries : kv.num_entries;
  p.topk_indices = a.topk_indices;
  p.topk = a.topk;
  p.topk_lens = a.topk_lens;
  p.window_indices = a.window_indices;
  p.window = a.window_indices != nullptr ? a.window : 0;
  p.window_lens = a.window_lens;
  p.token_request = a.token_request;
  p.num_requests = a.token_request != nullptr ? a.num_requests : a.num_tokens;
  p.window_positions = a.window_positions;
  p.query_positions = a.query_positions;
  p.head_blocks = plan.head_blocks;
  p.splits = plan.splits;
  p.topk_splits = plan.topk_splits;
  p.chunk = plan.chunk;
  p.window_offset = plan.window_offset;
  p.final_out = normalized && plan.direct;
  p.merge_follows = !plan.direct;
  p.o = static_cast<__nv_bfloat16*>(out.o);
  p.lse = out.lse;
  const int64_t rows = a.num_tokens * a.heads;
  if (plan.direct && !normalized) {  // one split per source, straight into the caller's partials
    p.part_o = out.o_partial;
    p.part_lse = out.lse_partial;
    p.window_dest_shift = 1 - plan.topk_splits;
  } else if (!plan.direct) {
    p.part_o = static_cast<float*>(workspace);
    p.part_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + plan.workspace_lse_offset);
    p.window_dest_shift = 0;
  }
  launch_for_dim(p, a.dim, mixed, ctas, stream);
  if (plan.direct) return;
  const detail::PdlScope pdl(true);  // the (first) merge launches under the kernel's tail
  if (normalized) {
    detail::launch_attention_merge(p.part_o, p.part_lse, plan.splits, rows, rows, a.heads, a.dim, nullptr, a.sink,
                                   out.o, nullptr, out.lse, stream);
  } else {
    const int wsplits = plan.splits - plan.topk_splits;
    detail::launch_attention_merge(p.part_o, p.part_lse, plan.topk_splits, rows, rows, a.heads, a.dim, nullptr,
                                   nullptr, nullptr, out.o_partial, out.lse_partial, stream);
    detail::launch_attention_merge(p.part_o + int64_t(plan.topk_splits) * rows * a.dim,
                                   p.part_lse + int64_t(plan.topk_splits) * rows, wsplits, rows, rows, a.heads,
                                   a.dim, nullptr, nullptr, nullptr, out.o_partial + rows * a.dim,
                                   out.lse_partial + rows, stream);
  }
}

}  // namespace moekit
