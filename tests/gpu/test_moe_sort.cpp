// GPU tests of moe_sort and permute_quantize (include/moekit/moe_sort.h, SPEC §3–4) against the
// host reference (src/moe/moe_sort_reference.h), with exact equality of every output buffer:
//
//  * every output (and the workspace) poisoned with 0xA5 bytes before each run, and followed by a
//    guard zone that must keep the poison (catches writes past the documented sizes);
//  * T ∈ {0, 1, 7, 1000, 4096} × k ∈ {1, 2, 8} × E ∈ {8, 64, 256, 384}, random ids with -1 slots,
//    invalid ids and experts repeated inside a token; the full slice, its two halves (which must
//    partition the kept slots of the full run) and an odd slice; all tokens on one expert, all
//    dropped, all invalid, a large run (multi-tile radix sort);
//  * invalid_count is set, not accumulated, across calls on the same buffers;
//  * a CUDA graph of moe_sort + permute_quantize captured once and replayed with different ids
//    and activations;
//  * both moe_sort paths (single-CTA for T * k <= 4096 and L <= 1024, radix otherwise) run on every
//    case where eligible, through the test hook moekit::detail::moe_sort_with_path; they must each
//    equal the reference (hence each other), the single-CTA path must not touch the workspace,
//    and edge cases (T = 0, T = 1, k = 1, E = 1, INT32_MIN/MAX, n = 4096 / 4097, L = 1024 / 1025,
//    maps only 4-byte aligned) are covered explicitly;
//  * permute_quantize_by_token: every byte of a_perm / sa_perm equal to the old two-kernel
//    permute_quantize and to its host reference (H ∈ {16, 144, 2048, 2880, 7168}, NaN / Inf, k up
//    to 40, ue8m0), also in the MoE forward's form (scales once per token, then gathered by row:
//    detail::TokenScales), dropped / out-of-range slots skipped; a graph of the single-CTA moe_sort +
//    permute_quantize_by_token has two kernel nodes and follows new ids on replay;
//  * MoeSortTiming.DISABLED_PrintLatencies prints µs per call of both paths of each stage;
//  * permute_quantize: xq / sx bit for bit the host quantize_1x128 and the device
//    quantize_act_1x128; a_perm / sa_perm bit for bit permute_quantize_reference on the GPU's
//    permuted_to_expanded, padding rows (and the scale padding) untouched, for
//    H ∈ {2048, 2880, 7168} with NaN / Inf in some tokens; rows whose index is -1 or out of range
//    are skipped.

#include "gpu/moe_sort_test_util.h"

namespace {

using namespace moekit::sort_test;

TEST(MoeSortGpu, MatchesReferenceWithSlices) {
  Stream s;
  uint64_t seed = 1;
  for (int64_t t : {0, 1, 7, 1000, 4096}) {
    for (int k : {1, 2, 8}) {
      for (int e : {8, 64, 256, 384}) {
        const std::string what = case_name(t, k, e);
        const Ids ids = random_ids(seed++, t, k, e);
        const auto full = sort_and_check(ids, t, k, e, 0, e, s, what + " full");
        const int h = e / 2;
        const auto lo = sort_and_check(ids, t, k, e, 0, h, s, what + " low half");
        const auto hi = sort_and_check(ids, t, k, e, h, e - h, s, what + " high half");
        sort_and_check(ids, t, k, e, 3, e / 4 + 1, s, what + " odd slice");
        if (HasFailure()) return;
        // The halves partition the kept slots of the full run, and their counts join into its.
        for (int64_t i = 0; i < t * k; ++i) {
          const int in_halves =
              (lo.expanded_to_permuted[size_t(i)] >= 0) + (hi.expanded_to_permuted[size_t(i)] >= 0);
          ASSERT_EQ(in_halves, full.expanded_to_permuted[size_t(i)] >= 0 ? 1 : 0) << what << " slot " << i;
        }
        std::vector<int32_t> joined(lo.expert_counts);
        joined.insert(joined.end(), hi.expert_counts.begin(), hi.expert_counts.end());
        EXPECT_EQ(joined, full.expert_counts) << what;
      }
    }
  }
}

TEST(MoeSortGpu, DegenerateRoutings) {
  Stream s;
  const int64_t t = 4096;
  const int k = 8, e = 256;
  const int64_t n = t * k;
  sort_and_check(Ids(size_t(n), e - 1), t, k, e, 0, e, s, "all on the last expert");
  sort_and_check(Ids(size_t(n), 0), t, k, e, 0, e, s, "all on expert 0");
  sort_and_check(Ids(size_t(n), 17), t, k, e, 16, 8, s, "all on one expert of a slice");
  sort_and_check(Ids(size_t(n), 17), t, k, e, 128, 128, s, "all outside the slice");
  sort_and_check(Ids(size_t(n), -1), t, k, e, 0, e, s, "all -1");
  sort_and_check(Ids(size_t(n), e), t, k, e, 0, e, s, "all invalid");
  sort_and_check(Ids{5}, 1, 1, 8, 0, 8, s, "one slot");
  sort_and_check(Ids{5}, 1, 1, 8, 5, 1, s, "one slot, one local expert");
  // One expert per slot, every expert used: E = k.
  Ids per_slot(size_t(64 * 8));
  for (size_t i = 0; i < per_slot.size(); ++i) per_slot[i] = int32_t(i % 8);
  sort_and_check(per_slot, 64, 8, 8, 0, 8, s, "slot j on expert j");
}

TEST(MoeSortGpu, LargeRuns) {
  // Several tiles and passes of the radix sort (1 pass for 8 experts, 2 for 384).
  Stream s;
  const int64_t t = 65536;
  for (int e : {8, 384}) {
    const Ids ids = random_ids(1000 + uint64_t(e), t, 8, e);
    sort_and_check(ids, t, 8, e, 0, e, s, case_name(t, 8, e));
    sort_and_check(ids, t, 8, e, e / 2, e - e / 2, s, case_name(t, 8, e) + " high half");
  }
}

TEST(MoeSortGpu, RepeatedCallsSetNotAccumulate) {
  // Same buffers, no re-poisoning: the second call must overwrite everything of the first,
  // invalid_count and the counts included (not add to them). Once per path (T = 500, k = 8 is
  // n = 4000: single-CTA by default).
  Stream s;
  const int k = 8, e = 64;
  for (int64_t t : {1000, 500}) {
    for (SortPath path : {SortPath::kAuto, SortPath::kRadix, SortPath::kSingleCta}) {
      if (path == SortPath::kSingleCta && !moekit::detail::moe_sort_single_cta(t, k, e)) continue;
      const std::string what = "T=" + std::to_string(t) + " " + path_name(path);
      SortBuffers b(t, k, e);
      b.poison(s);
      Ids first = random_ids(77, t, k, e);
      for (size_t i = 0; i < first.size(); i += 3) first[i] = e + 1;  // many invalid ids
      const Ids second = random_ids(78, t, k, e);
      b.upload_ids(first, s);
      b.run(e, 0, s, path);
      finish(s, what + " first call");
      expect_same_result(moekit::detail::moe_sort_reference(first.data(), t, k, e, 0, e), b.download(),
                         what + " first call");
      b.upload_ids(second, s);
      b.run(e, 0, s, path);
      finish(s, what + " second call");
      expect_same_result(moekit::detail::moe_sort_reference(second.data(), t, k, e, 0, e), b.download(),
                         what + " second call");
      b.expect_guards(what + " second call");
    }
  }
}

TEST(MoeSortGpu, SingleCtaPathChoice) {
  // The rule: T * k <= 4096 and local_count <= 1024, from the sizes only.
  using moekit::detail::moe_sort_single_cta;
  EXPECT_TRUE(moe_sort_single_cta(0, 8, 256));
  EXPECT_TRUE(moe_sort_single_cta(1, 8, 256));
  EXPECT_TRUE(moe_sort_single_cta(512, 8, 256));
  EXPECT_TRUE(moe_sort_single_cta(4096, 1, 1024));
  EXPECT_FALSE(moe_sort_single_cta(4097, 1, 8));
  EXPECT_FALSE(moe_sort_single_cta(513, 8, 256));
  EXPECT_FALSE(moe_sort_single_cta(1, 8, 1025));
  // Forcing it where it is not eligible is an argument error, raised before any launch.
  Stream s;
  for (auto [t, k, l] : {std::tuple<int64_t, int, int>{4097, 1, 8}, {1, 1, 1025}}) {
    SortBuffers b(t, k, l);
    try {
      b.run(l, 0, s, SortPath::kSingleCta);
      ADD_FAILURE() << "single-CTA path forced for T=" << t << " k=" << k << " L=" << l;
    } catch (const moekit::Error& err) {
      EXPECT_EQ(err.code(), moekit::ErrorCode::kInvalidArgument) << err.what();
    }
  }
}

TEST(MoeSortGpu, SingleCtaMatchesRadixEdgeCases) {
  // Every case runs the default path, the radix path and (where eligible) the single-CTA path on
  // poisoned buffers; all must equal the reference, hence each other. Shifts 1-3 misalign the
  // maps so the -1 fill's scalar head and tail run.
  Stream s;
  const int32_t kMin = INT32_MIN, kMax = INT32_MAX;
  // T = 0: counts / offsets zero, every row -1 (helper CTAs only), for L = 1, 256, 1024.
  for (int l : {1, 256, 1024}) {
    for (int shift : {0, 3}) sort_and_check(Ids{}, 0, 8, 1024, 0, l, s, "T=0 L=" + std::to_string(l), shift);
  }
  // T = 1, DeepSeek-V3 routing (k = 8 of 256), full and expert-parallel slices.
  for (int shift : {0, 1, 2, 3}) {
    const Ids one = {3, 200, 17, 255, 0, 128, 64, 65};
    sort_and_check(one, 1, 8, 256, 0, 256, s, "T=1 DSv3 full", shift);
    sort_and_check(one, 1, 8, 256, 0, 128, s, "T=1 DSv3 low half", shift);
    sort_and_check(one, 1, 8, 256, 128, 128, s, "T=1 DSv3 high half", shift);
    sort_and_check(one, 1, 8, 256, 3, 65, s, "T=1 DSv3 odd slice", shift);
    sort_and_check(Ids{7, 7, 7, -1, 7, kMin, 7, kMax}, 1, 8, 256, 0, 256, s, "T=1 duplicates, -1, invalid", shift);
  }
  // k = 1 and E = 1.
  for (int32_t id : {0, -1, 1, -2, kMin, kMax}) {
    sort_and_check(Ids{id}, 1, 1, 1, 0, 1, s, "E=1 T=1 id " + std::to_string(id));
  }
  sort_and_check(random_ids(3, 1000, 1, 1), 1000, 1, 1, 0, 1, s, "E=1 T=1000 k=1");
  sort_and_check(random_ids(4, 4096, 1, 8), 4096, 1, 8, 0, 8, s, "E=8 T=4096 k=1");
  sort_and_check(random_ids(5, 4096, 1, 8), 4096, 1, 8, 2, 3, s, "E=8 T=4096 k=1 slice", 1);
  // Invalid ids of every kind, -1, duplicates; counted over the whole batch by every slice.
  {
    const Ids ids = {-2, 4, 2, kMax, kMin, 2, -1, 3, 3, 0, -1000, 1, 1, 1, 5, -1, 0, 3, 2, 2, 2};
    for (auto [off, l] : {std::pair{0, 4}, {0, 2}, {2, 2}, {1, 1}, {3, 1}}) {
      sort_and_check(ids, 7, 3, 4, off, l, s, "hand ids slice " + std::to_string(off) + "+" + std::to_string(l));
    }
  }
  // n = 4096 exactly (single-CTA) and 4097 / 4104 (radix): random, all on one expert, all dropped.
  for (int64_t t : {512, 513}) {
    const int k = 8, e = 256;
    const int64_t n = t * k;
    const std::string tn = "T=" + std::to_string(t) + " ";
    sort_and_check(random_ids(6 + uint64_t(t), t, k, e), t, k, e, 0, e, s, tn + "random");
    sort_and_check(random_ids(8 + uint64_t(t), t, k, e), t, k, e, 100, 37, s, tn + "random slice", 2);
    sort_and_check(Ids(size_t(n), e - 1), t, k, e, 0, e, s, tn + "all on the last expert");
    sort_and_check(Ids(size_t(n), 0), t, k, e, 0, e, s, tn + "all on expert 0", 1);
    sort_and_check(Ids(size_t(n), 17), t, k, e, 16, 8, s, tn + "all on one expert of a slice");
    sort_and_check(Ids(size_t(n), 17), t, k, e, 128, 128, s, tn + "all outside the slice");
    sort_and_check(Ids(size_t(n), -1), t, k, e, 0, e, s, tn + "all -1");
    sort_and_check(Ids(size_t(n), kMin), t, k, e, 0, e, s, tn + "all INT32_MIN");
    // Every token's k slots on one expert (duplicates), tokens cycling over the experts.
    Ids dup(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) dup[size_t(i)] = int32_t((i / k) % e);
    sort_and_check(dup, t, k, e, 0, e, s, tn + "k duplicates per token");
  }
  // L = 1024 (the largest single-CTA slice) and 1025 (radix only), including k > 32.
  sort_and_check(random_ids(9, 4, 1024, 1024), 4, 1024, 1024, 0, 1024, s, "T=4 k=1024 E=1024");
  sort_and_check(random_ids(10, 4096, 1, 1024), 4096, 1, 1024, 0, 1024, s, "T=4096 k=1 E=1024", 3);
  sort_and_check(random_ids(11, 64, 8, 2048), 64, 8, 2048, 1000, 1024, s, "E=2048 slice of 1024");
  sort_and_check(random_ids(12, 64, 8, 1025), 64, 8, 1025, 0, 1025, s, "E=1025 (radix)");
  // Decode-typical sizes over the presets' expert counts, each slice kind.
  uint64_t seed = 100;
  for (int64_t t : {1, 2, 7, 64, 256}) {
    for (int k : {1, 4, 8}) {
      for (int e : {32, 128, 256, 384}) {
        const Ids ids = random_ids(seed++, t, k, e);
        const std::string what = case_name(t, k, e);
        sort_and_check(ids, t, k, e, 0, e, s, what + " full");
        sort_and_check(ids, t, k, e, e / 2, e - e / 2, s, what + " high half", int(seed % 4));
        if (HasFailure()) return;
      }
    }
  }
}

TEST(MoeSortGpu, WorkspaceSizeAndValidation) {
  // The workspace size depends only on (T, k, L).
  EXPECT_EQ(moekit::moe_sort_workspace_size(1000, 8, 64), moekit::moe_sort_workspace_size(1000, 8, 64));
  EXPECT_GT(moekit::moe_sort_workspace_size(0, 8, 64), size_t(0));
  Stream s;
  SortBuffers b(7, 2, 8);
  moekit::MoeSortBuffers o = b.outputs();
  try {
    moekit::moe_sort(b.ids(), 7, 2, 8, 0, 8, o, b.workspace(), b.workspace_bytes() - 1, s);
    ADD_FAILURE() << "a workspace one byte too small was accepted";
  } catch (const moekit::Error& err) {
    EXPECT_EQ(err.code(), moekit::ErrorCode::kInvalidArgument) << err.what();
  }
}

// ----------------------------------------------------------------------------------------------
// permute_quantize
// ----------------------------------------------------------------------------------------------

// bf16 activations: each (token, 128-column block) gets its own magnitude (2^-20 … 2^19), with a
// few zeros; token 3 carries a NaN and an Inf, token 5 a -Inf (they must stay in their own rows).
TEST(MoeSortGpu, CudaGraphReplayFollowsNewIds) {
  Stream s;
  const int64_t t = 1000, h = 2880;
  const int k = 8, e = 256, off = 64, l = 128;
  SortBuffers sb(t, k, l);
  PermuteBuffers pb(t, h, sb.rows());
  // Warm-up outside the capture (first-use initialization of cub and the kernels).
  const Ids warm = random_ids(1, t, k, e);
  sb.poison(s);
  sb.upload_ids(warm, s);
  sb.run(e, off, s);
  finish(s, "warm-up");

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  try {
    sb.run(e, off, s);
    pb.run(k, sb.p2e(), false, s);
  } catch (const moekit::Error& err) {
    cudaStreamEndCapture(s, &graph);
    FAIL() << "capture: " << err.what();
  }
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  std::vector<int32_t> previous;
  for (int replay = 0; replay < 3; ++replay) {
    const std::string what = "replay " + std::to_string(replay);
    Ids ids = random_ids(500 + uint64_t(replay), t, k, e);
    if (replay == 2) std::fill(ids.begin(), ids.begin() + 4000, off + 5);  // a heavy expert
    const std::vector<uint16_t> xb = make_x(t, h, 900 + uint64_t(replay));
    sb.poison(s);
    pb.poison(s);
    sb.upload_ids(ids, s);
    ASSERT_EQ(cudaMemcpyAsync(pb.x.get(), xb.data(), xb.size() * 2, cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    finish(s, what);
    const MoeSortResult got = sb.download();
    expect_same_result(moekit::detail::moe_sort_reference(ids.data(), t, k, e, off, l), got, what);
    sb.expect_guards(what);
    check_permute(pb, to_float(xb), k, got.permuted_to_expanded, false, what);
    EXPECT_NE(got.permuted_to_expanded, previous) << what << ": the replay did not follow the new ids";
    previous = got.permuted_to_expanded;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(MoeSortGpu, CudaGraphSingleCtaPathAndByToken) {
  // The decode pipeline head: moe_sort (single-CTA path: one kernel node) + permute_quantize_by_token
  // (one kernel node), captured once per size and replayed with new ids and activations, every
  // output poisoned before each replay and compared with the references.
  Stream s;
  struct Case {
    int64_t t;
    int e, off, l;
  };
  for (const Case& c : {Case{1, 256, 0, 256}, Case{64, 256, 64, 128}, Case{512, 256, 0, 256}}) {
    const int k = 8;
    const int64_t h = 7168;
    const std::string base = "T=" + std::to_string(c.t) + " slice " + std::to_string(c.off) + "+" + std::to_string(c.l);
    ASSERT_TRUE(moekit::detail::moe_sort_single_cta(c.t, k, c.l)) << base;
    SortBuffers sb(c.t, k, c.l, 1);  // misaligned maps on purpose
    PermuteBuffers pb(c.t, h, sb.rows());

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    try {
      sb.run(c.e, c.off, s);
      pb.run_by_token(k, sb.e2p(), false, s);
    } catch (const moekit::Error& err) {
      cudaStreamEndCapture(s, &graph);
      FAIL() << base << " capture: " << err.what();
    }
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    size_t nodes = 0;
    ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
    EXPECT_EQ(nodes, size_t(2)) << base << ": moe_sort + permute_quantize_by_token should be two kernel nodes";
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

    std::vector<int32_t> previous;
    for (int replay = 0; replay < 3; ++replay) {
      const std::string what = base + " replay " + std::to_string(replay);
      Ids ids = random_ids(700 + uint64_t(replay) + uint64_t(c.t), c.t, k, c.e);
      if (replay == 2)
        std::fill(ids.begin(), ids.begin() + std::min<int64_t>(c.t * k, 2000), c.off + 5);  // heavy expert
      const std::vector<uint16_t> xb = make_x(c.t, h, 900 + uint64_t(replay));
      sb.poison(s);
      pb.poison(s);
      sb.upload_ids(ids, s);
      ASSERT_EQ(cudaMemcpyAsync(pb.x.get(), xb.data(), xb.size() * 2, cudaMemcpyHostToDevice, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      finish(s, what);
      const MoeSortResult got = sb.download();
      expect_same_result(moekit::detail::moe_sort_reference(ids.data(), c.t, k, c.e, c.off, c.l), got, what);
      sb.expect_guards(what, /*workspace_untouched=*/true);
      check_by_token(pb, to_float(xb), k, got.expanded_to_permuted, false, what);
      EXPECT_NE(got.permuted_to_expanded, previous) << what << ": the replay did not follow the new ids";
      previous = got.permuted_to_expanded;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    if (HasFailure()) return;
  }
}

// ----------------------------------------------------------------------------------------------
// Timing (not a correctness test; run with --gtest_also_run_disabled_tests)
// ----------------------------------------------------------------------------------------------

// Mean µs per call of `body` (which enqueues `calls` calls on s): captured into one graph, replayed.
template <typename F>
double graph_us_per_call(cudaStream_t s, int calls, F&& body) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  body();
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);  // warm-up
  finish(s, "timing warm-up");
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  constexpr int kReps = 10;
  cudaEventRecord(e0, s);
  for (int i = 0; i < kReps; ++i) cudaGraphLaunch(exec, s);
  cudaEventRecord(e1, s);
  finish(s, "timing");
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return double(ms) * 1000.0 / (double(kReps) * calls);
}

TEST(MoeSortTiming, DISABLED_PrintLatencies) {
  // DeepSeek-V3 shapes (E = 256, k = 8, H = 7168). Back-to-back calls in one graph: the numbers
  // include each kernel's launch and drain, not the host.
  Stream s;
  const int k = 8, e = 256;
  const int64_t h = 7168;
  std::printf("moe_sort (E=256, k=8), us per call:\n%8s %12s %12s\n", "T", "single-CTA", "radix");
  for (int64_t t : {1, 8, 64, 256, 512}) {
    SortBuffers sb(t, k, e);
    const Ids ids = random_ids(5, t, k, e);
    sb.upload_ids(ids, s);
    finish(s, "upload");
    double us[2] = {0, 0};
    int i = 0;
    for (SortPath path : {SortPath::kSingleCta, SortPath::kRadix}) {
      us[i++] = graph_us_per_call(s, 20, [&] {
        for (int c = 0; c < 20; ++c) sb.run(e, 0, s, path);
      });
    }
    std::printf("%8lld %12.2f %12.2f\n", static_cast<long long>(t), us[0], us[1]);
  }
  std::printf("permute + quantize (H=7168, k=8, E=256), us per call:\n%8s %12s %12s %10s\n", "T", "by_token",
              "two-kernel", "by_token GB/s");
  for (int64_t t : {1, 8, 64, 256, 4096, 16384}) {
    SortBuffers sb(t, k, e);
    PermuteBuffers pb(t, h, sb.rows());
    const Ids ids = random_ids(6, t, k, e);
    sb.upload_ids(ids, s);
    ASSERT_EQ(cudaMemsetAsync(pb.x.get(), 0x3C, pb.x.bytes(), s), cudaSuccess);  // bf16 ~0.0116
    sb.run(e, 0, s);
    finish(s, "sort");
    const int calls = t >= 4096 ? 2 : 20;
    const double by_token = graph_us_per_call(s, calls, [&] {
      for (int c = 0; c < calls; ++c) pb.run_by_token(k, sb.e2p(), false, s);
    });
    const double two = graph_us_per_call(s, calls, [&] {
      for (int c = 0; c < calls; ++c) pb.run(k, sb.p2e(), false, s);
    });
    // Bytes of the new kernel: x once, k FP8 rows + k scale rows per token (dropped slots ~5%).
    const double bytes = double(t) * h * 2 + double(t) * k * (h + 4.0 * double(moekit::ceil_div(h, 128)));
    std::printf("%8lld %12.2f %12.2f %10.0f\n", static_cast<long long>(t), by_token, two, bytes / (by_token * 1e3));
  }
}

}  // namespace
