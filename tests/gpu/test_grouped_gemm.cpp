// GPU correctness of the grouped FP8 block-scaled GEMMs (include/moekit/grouped_gemm.h, SPEC §4)
// against the float64 host reference, in the style of test_gemm.cpp:
//
//  * random FP8 operands (every row of A, padding rows included) and scales in [0.25, 2);
//  * D poisoned with 0xFF bytes (bf16 NaN) before every run;
//  * a random sample of each expert's valid rows (always its first and last) checked against
//    moekit::gemm_reference with that expert's B and scales: relative L2 ≤ 2e-3 overall, and a
//    looser per-expert bound that catches a tile computed with the wrong expert;
//  * EVERY valid row fully written (no NaN in [0, n)), EVERY other row (contiguous padding, rows
//    past offsets[E], masked rows at or past counts[e]) and every column in [n, ldd) still poison.
//
// Also: contiguous_offsets_device against the host contiguous_offsets, CUDA-graph capture with
// replays that follow new device counts, and argument validation.

#include "grouped_gemm_test_util.h"

using namespace moekit::grouped_test;


// ----------------------------------------------------------------------------------------------
// contiguous_offsets_device
// ----------------------------------------------------------------------------------------------

TEST(GroupedGemmContiguous, DeviceOffsetsMatchHost) {
  Stream s;
  std::mt19937_64 rng(3);
  for (int64_t e : {1, 7, 256, 384, 1000}) {
    std::vector<Counts> cases = {Counts(size_t(e), 0), Counts(size_t(e), 128), Counts(size_t(e), 129),
                                 uniform_counts(e, 0, 300, rng()), uniform_counts(e, 0, 3, rng()),
                                 skewed_counts(e, 20000, 0.1, rng())};
    {
      Counts c(size_t(e), 0);
      c[size_t(rng() % uint64_t(e))] = 32768;
      cases.push_back(c);
    }
    for (const Counts& c : cases) {
      SCOPED_TRACE(counts_summary(c));
      DeviceBuffer counts(size_t(e) * 4), offsets(size_t(e + 2) * 4);
      counts.upload(c);
      offsets.fill_bytes(0x5A);  // a sentinel past entry E must survive
      moekit::contiguous_offsets_device(counts.as<int32_t>(), e, offsets.as<int32_t>(), s);
      finish(s, "contiguous_offsets_device");
      auto got = offsets.download<int32_t>(size_t(e + 2));
      EXPECT_EQ(got[size_t(e + 1)], 0x5A5A5A5A) << "wrote past offsets[E]";
      got.pop_back();
      EXPECT_EQ(got, moekit::contiguous_offsets(c));
    }
  }
}

// ----------------------------------------------------------------------------------------------
// Contiguous grouped GEMM
// ----------------------------------------------------------------------------------------------

TEST(GroupedGemmContiguous, LayoutsAndShapes) {
  uint64_t seed = 100;
  int runs = 0;
  for (const Layout& l : contiguous_layouts())
    for (const Shape& s : kShapes) {
      if (!shape_fits(s, l.counts)) continue;
      run_problem(make_problem(l.name, false, l.counts, s), ++seed);
      ++runs;
      if (HasFatalFailure()) return;
    }
  EXPECT_GE(runs, 30);
}

// A grouped configuration forced (knobs().grouped_config, as MOEKIT_GROUPED_CONFIG) for one test's scope.
moekit::detail::Knobs with_grouped_config(const char* config) {
  moekit::detail::Knobs k = moekit::detail::knobs();
  k.grouped_config = config;
  return k;
}
struct ForcedGroupedConfig {
  explicit ForcedGroupedConfig(const char* config) : scope(with_grouped_config(config)) {}
  moekit::detail::ScopedKnobs scope;
};

// The 256-row tile cases under a forced configuration: every contiguous layout with `shapes` (N 2880
// only up to 3000 rows), straddling segments at N = `n`, tail halves at N = `n_halves`, masked groups
// with counts around 128 and 256 at N = `n`. With `tile_counter`: the contiguous cases only, units
// claimed dynamically.
void run_wide_cases(uint64_t seed, std::initializer_list<Shape> shapes, int min_runs, int64_t n, int64_t n_halves,
                    unsigned* tile_counter = nullptr) {
  int runs = 0;
  for (const Layout& l : contiguous_layouts())
    for (const Shape& s : shapes) {
      if (!shape_fits(s, l.counts) || (s.n == 2880 && total_of(l.counts) > 3000)) continue;
      run_problem(make_problem(l.name, false, l.counts, s), ++seed, tile_counter);
      ++runs;
      if (::testing::Test::HasFatalFailure()) return;
    }
  EXPECT_GE(runs, min_runs);
  run_problem(make_problem("straddles", false, {128, 300, 129, 0, 128, 1, 700, 256, 255}, {n, 512, false}), ++seed,
              tile_counter);
  if (tile_counter != nullptr) return;
  run_problem(make_problem("halves", false, {3000, 0, 17}, {n_halves, 512, false}), ++seed);
  for (int64_t max_m : {100, 256, 300})
    run_problem(make_problem("masked", true, uniform_counts(6, 0, int32_t(max_m), seed), {n, 512, false}, max_m),
                ++seed);
  run_problem(make_problem("masked_full", true, Counts(3, 256), {200, 384, true}, 256), ++seed);
}

// 256-row tiles (two waves of 128 rows), single CTAs: units that meet two groups (128-row segments,
// segments ending at an odd 128-row block) become two one-wave tiles; tail halves (13 units x 2 N
// blocks on 20 CTAs: the last 6 units go out as 12 halves); skewed, empty, single-row, all-to-one and
// random layouts; masked groups with counts around 128 and 256 (and tail halves of 128 rows).
TEST(GroupedGemmWideTiles, ContiguousAndMasked) {
  ForcedGroupedConfig env("m256n128s3g4x20c1");
  run_wide_cases(9100, {Shape{256, 512, false}, Shape{200, 384, true}, Shape{2880, 2880, false}}, 25, 256, 256);
}

// 256-row tiles with dynamic units (a tile counter, as the MoE layer's prefill GEMM2 runs them): the
// first unit static, the rest claimed, units meeting two groups.
TEST(GroupedGemmWideTiles, DynamicUnits) {
  ForcedGroupedConfig env("m256n128s3g4x20c1");
  moekit::detail::DeviceBuffer counter(sizeof(unsigned));
  run_wide_cases(9500, {Shape{256, 512, false}}, 10, 256, 256, counter.as<unsigned>());
}

// 256-row tiles in pairs sharing A (clusters of two along N), 10 clusters, BLOCK_N 112: 512 columns
// are 5 N blocks, so every unit's second tile of the last pair is a ghost (rank 1 past N only loads
// its half of A for rank 0); units that meet two groups (one-wave tiles, whose one A box rank 0
// loads for both); tail halves (13 units of 224 columns on 10 clusters); masked counts.
TEST(GroupedGemmWideTiles, PairsSharingA) {
  ForcedGroupedConfig env("m256n112s3g4x20c2");
  run_wide_cases(9300, {Shape{512, 512, false}, Shape{200, 384, true}}, 16, 512, 224);
}

// Direct stores (GemmConfig::direct_store, D from registers masked by row and column): the wide
// cases with 256-row tiles at 4 stages (single CTAs, dynamic units, pairs sharing A with ghost
// tiles), and 128- / 64-row tiles at the most stages that fit on the masked cases (random counts,
// counts 0 and past max_m, strided D) and contiguous layouts, partial quad groups of chunks (n120).
TEST(GroupedGemmDirectStore, WideTiles) {
  {
    ForcedGroupedConfig env("m256n128s4g4x20c1r");
    run_wide_cases(9700, {Shape{256, 512, false}, Shape{200, 384, true}}, 16, 256, 256);
    moekit::detail::DeviceBuffer counter(sizeof(unsigned));
    run_wide_cases(9750, {Shape{256, 512, false}}, 8, 256, 256, counter.as<unsigned>());
  }
  ForcedGroupedConfig env("m256n120s4g4x20c2r");
  run_wide_cases(9800, {Shape{480, 512, false}}, 8, 480, 240);
}

TEST(GroupedGemmDirectStore, NarrowTiles) {
  uint64_t seed = 9900;
  for (const char* config : {"m128n128s6g8x20c1r", "m128n120s6g8x20c1r", "m64n56s10g1x20c1r"}) {
    ForcedGroupedConfig env(config);
    for (int64_t max_m : {1, 100, 256}) {
      run_problem(make_problem("masked", true, uniform_counts(5, 0, int32_t(max_m), seed), {256, 512, false}, max_m),
                  ++seed);
      run_problem(make_problem("masked_strided", true, {int32_t(max_m), 0, 100000}, {200, 384, true}, max_m), ++seed);
    }
    for (const Layout& l : contiguous_layouts())
      if (l.name == "skewed" || l.name == "some_empty" || l.name == "single_row")
        run_problem(make_problem(l.name, false, l.counts, {256, 512, false}), ++seed);
    if (HasFatalFailure()) return;
  }
}

// The allocation may be larger than the upper bound: rows past offsets[E] are ignored.
TEST(GroupedGemmContiguous, ExtraAllocatedRowsAreIgnored) {
  Problem p = make_problem("extra_rows", false, {5, 0, 300}, {256, 512, false});
  p.rows = moekit::contiguous_rows_upper_bound(305, 3) + 4 * moekit::kGroupAlign;
  run_problem(p, 7);
}

// Offsets computed on the device, GEMM and offsets captured in one CUDA graph, replayed with three
// count vectors (same allocation) written into the device counts before each replay.
TEST(GroupedGemmContiguous, CudaGraphReplayWithDeviceOffsets) {
  const int64_t E = 16, total_max = 900, n = 256, k = 512;
  Problem p = make_problem("graph", false, Counts(size_t(E), 0), {n, k, false});
  p.rows = moekit::contiguous_rows_upper_bound(total_max, E);
  Stream s;
  GroupedData g(p, 31, s);
  finish(s, "setup");
  moekit::grouped_gemm_fp8_prepare_contiguous(g.rows(), E, n, k);

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  moekit::contiguous_offsets_device(g.counts_device(), E, g.offsets_device(), s);
  g.run(s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  Counts c1 = skewed_counts(E, total_max, 0.3, 5);
  Counts c2(size_t(E), 0);
  c2[9] = int32_t(total_max);
  Counts c3 = uniform_counts(E, 0, 40, 6);
  for (const Counts& c : {c1, c2, c3}) {
    ASSERT_LE(total_of(c), total_max);
    const std::string what = "replay " + counts_summary(c);
    // Only the counts go in: the offsets must come from the captured device kernel.
    const Counts c_copy = c;
    ASSERT_EQ(cudaMemcpyAsync(g.counts_device(), c_copy.data(), size_t(E) * 4, cudaMemcpyHostToDevice, s),
              cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(g.offsets_device(), 0xFF, size_t(E + 1) * 4, s), cudaSuccess);
    g.poison(s);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    finish(s, what);
    std::vector<int32_t> dev_off(size_t(E + 1));
    ASSERT_EQ(cudaMemcpy(dev_off.data(), g.offsets_device(), dev_off.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(dev_off, moekit::contiguous_offsets(c)) << what;
    expect_good(g.check(c, 77), what);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// ----------------------------------------------------------------------------------------------
// Argument validation
// ----------------------------------------------------------------------------------------------

namespace {

template <typename F>
void expect_invalid(F&& f, const char* what) {
  try {
    f();
    ADD_FAILURE() << "no error for " << what;
  } catch (const moekit::Error& e) {
    EXPECT_EQ(e.code(), moekit::ErrorCode::kInvalidArgument) << what << ": " << e.what();
  }
}

}  // namespace

TEST(GroupedGemmContiguous, ValidatesArguments) {
  Stream s;
  Problem p = make_problem("validate", false, {3, 100}, {64, 128, false});
  GroupedData g(p, 5, s);
  finish(s, "setup");
  const auto good = g.args();
  const int64_t rows = g.rows();
  int32_t* off = g.offsets_device();
  int32_t* cnt = g.counts_device();
  EXPECT_NO_THROW(moekit::grouped_gemm_fp8_contiguous(good, rows, off, cnt, s));
  finish(s, "valid call");
  auto call = [&](const moekit::GroupedGemmFp8Args& a, int64_t r, const int32_t* o, const int32_t* c) {
    moekit::grouped_gemm_fp8_contiguous(a, r, o, c, s);
  };
  auto x = good; x.num_groups = 0;    expect_invalid([&] { call(x, rows, off, cnt); }, "num_groups 0");
  x = good; x.num_groups = -2;        expect_invalid([&] { call(x, rows, off, cnt); }, "num_groups < 0");
  x = good; x.n = 60;                 expect_invalid([&] { call(x, rows, off, cnt); }, "n % 8");
  x = good; x.n = 0;                  expect_invalid([&] { call(x, rows, off, cnt); }, "n 0");
  x = good; x.k = 100;                expect_invalid([&] { call(x, rows, off, cnt); }, "k % 16");
  x = good; x.k = 0;                  expect_invalid([&] { call(x, rows, off, cnt); }, "k 0");
  x = good; x.a = nullptr;            expect_invalid([&] { call(x, rows, off, cnt); }, "null a");
  x = good; x.sa = nullptr;           expect_invalid([&] { call(x, rows, off, cnt); }, "null sa");
  x = good; x.b = nullptr;            expect_invalid([&] { call(x, rows, off, cnt); }, "null b");
  x = good; x.sb = nullptr;           expect_invalid([&] { call(x, rows, off, cnt); }, "null sb");
  x = good; x.d = nullptr;            expect_invalid([&] { call(x, rows, off, cnt); }, "null d");
  expect_invalid([&] { call(good, rows, nullptr, cnt); }, "null offsets");
  expect_invalid([&] { call(good, rows, off, nullptr); }, "null counts");
  expect_invalid([&] { call(good, 200, off, cnt); }, "rows % 128");
  expect_invalid([&] { call(good, 100, off, cnt); }, "rows % 128 (< 128)");
  finish(s, "after validation");
}

TEST(GroupedGemmMasked, ValidatesArguments) {
  Stream s;
  Problem p = make_problem("validate", true, {3, 7}, {64, 128, false}, 16);
  GroupedData g(p, 6, s);
  finish(s, "setup");
  const auto good = g.args();
  int32_t* cnt = g.counts_device();
  EXPECT_NO_THROW(moekit::grouped_gemm_fp8_masked(good, 16, cnt, s));
  finish(s, "valid call");
  auto call = [&](moekit::GroupedGemmFp8Args a, int64_t max_m = 16, bool keep_c = true) {
    moekit::grouped_gemm_fp8_masked(a, max_m, keep_c ? cnt : nullptr, s);
  };
  auto x = good; x.num_groups = 0;    expect_invalid([&] { call(x); }, "num_groups 0");
  x = good; x.num_groups = -1;        expect_invalid([&] { call(x); }, "num_groups < 0");
  x = good; x.n = 60;                 expect_invalid([&] { call(x); }, "n % 8");
  x = good; x.k = 100;                expect_invalid([&] { call(x); }, "k % 16");
  x = good; x.a = nullptr;            expect_invalid([&] { call(x); }, "null a");
  x = good; x.sa = nullptr;           expect_invalid([&] { call(x); }, "null sa");
  x = good; x.b = nullptr;            expect_invalid([&] { call(x); }, "null b");
  x = good; x.sb = nullptr;           expect_invalid([&] { call(x); }, "null sb");
  x = good; x.d = nullptr;            expect_invalid([&] { call(x); }, "null d");
  expect_invalid([&] { call(good, 16, false); }, "null counts");
  expect_invalid([&] { call(good, 0); }, "max_m 0");
  expect_invalid([&] { call(good, -5); }, "max_m < 0");
  finish(s, "after validation");
}
