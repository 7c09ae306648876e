#include "moe/moe_gemm.h"

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/numerics.h"

namespace moekit::detail {

int64_t moe_prepared_w1_rows(int64_t inter) { return 2 * align_up(inter, kQuantBlock); }

void moe_gemm1_swiglu(const MoeGemm1Args& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  const int64_t n = moe_prepared_w1_rows(a.inter);
  const GemmConfig c =
      select_moe_gemm1_config(a.rows, n, a.expected_rows_per_expert, sm90::kSwigluEpilogueSmem, device_limits());
  const CUtensorMap tma_h = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.hq, static_cast<uint64_t>(a.inter),
                                        static_cast<uint64_t>(a.rows), static_cast<uint64_t>(a.inter), 128, 64,
                                        CU_TENSOR_MAP_SWIZZLE_128B);
  Fp8GemmFamily family;
  family.header = "kernels/sm90/moe_gemm.cuh";
  family.wg_n = 2;
  family.epilogue_smem = sm90::kSwigluEpilogueSmem;
  family.tma_d = &tma_h;
  family.sb_rows = 64;  // the prepared W1 has one scale per 64 rows (gate or up of 64 h columns)
  sm90::GemmParams p{};
  p.group_offsets = a.offsets;
  p.group_counts = a.counts;
  p.num_groups = static_cast<unsigned>(a.num_experts);
  p.limit = a.limit;
  p.sa_out = a.sh;
  p.sa_out_ld = static_cast<unsigned>(sfa_ld(a.rows));
  const Fp8GemmOperands op{a.a,  a.hidden, a.sa, a.w1p,  a.hidden, a.sw1p, a.hq, a.inter,
                           a.rows, a.num_experts * n, n, a.hidden};
  launch_fp8_gemm(c, "moe_gemm1_swiglu_contiguous", op, p, stream, family);
}

void moe_gemm2_scatter(const MoeGemm2Args& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  const GemmConfig c = select_moe_gemm2_config(std::max<int64_t>(1, a.expected_rows_per_expert), a.num_experts,
                                               a.rows, a.hidden, a.inter, device_limits());
  Fp8GemmFamily family;
  family.header = "kernels/sm90/moe_gemm.cuh";
  family.epilogue_smem = 0;
  // No D tensor: any valid descriptor satisfies the kernel's signature (it is only prefetched).
  const CUtensorMap tma_dummy = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.hq, static_cast<uint64_t>(a.inter),
                                            static_cast<uint64_t>(a.rows), static_cast<uint64_t>(a.inter), 16, 1,
                                            CU_TENSOR_MAP_SWIZZLE_NONE);
  family.tma_d = &tma_dummy;
  sm90::GemmParams p{};
  p.group_offsets = a.offsets;
  p.group_counts = a.counts;
  p.num_groups = static_cast<unsigned>(a.num_experts);
  p.row_map = a.row_map;
  p.row_weight = a.topk_weights;
  p.out_acc = a.y_acc;
  p.top_k = static_cast<unsigned>(a.top_k);
  const Fp8GemmOperands op{a.hq, a.inter, a.sh, a.w2, a.inter, a.sw2, nullptr, a.hidden,
                           a.rows, a.num_experts * a.hidden, a.hidden, a.inter};
  launch_fp8_gemm(c, "moe_gemm2_scatter_contiguous", op, p, stream, family);
}

}  // namespace moekit::detail
