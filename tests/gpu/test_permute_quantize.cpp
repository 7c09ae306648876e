// GPU tests of permute_quantize and permute_quantize_by_token (include/moekit/moe_sort.h, SPEC §4)
// against the host quantizers and permute_quantize_reference; the cases are listed with the
// moe_sort tests' (test_moe_sort.cpp).

#include "gpu/moe_sort_test_util.h"

namespace {

using namespace moekit::sort_test;

TEST(PermuteQuantize, MatchesHostQuantization) {
  Stream s;
  struct Case {
    int64_t t, h;
    int k, e;
  };
  std::vector<Case> cases;
  for (int64_t h : {2048, 2880, 7168}) {
    for (int64_t t : {1, 7, 1000}) cases.push_back({t, h, 8, 64});
  }
  cases.push_back({4096, 2880, 8, 256});
  cases.push_back({300, 2880, 1, 8});
  uint64_t seed = 11;
  for (const Case& c : cases) {
    for (bool ue8m0 : {false, true}) {
      const std::string what = case_name(c.t, c.k, c.e) + " H=" + std::to_string(c.h) + (ue8m0 ? " ue8m0" : " fp32");
      const Ids ids = random_ids(seed++, c.t, c.k, c.e);
      SortBuffers sb(c.t, c.k, c.e);
      PermuteBuffers pb(c.t, c.h, sb.rows());
      const std::vector<uint16_t> xb = make_x(c.t, c.h, seed++);
      pb.x.upload(xb);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the upload ran on the legacy stream
      sb.poison(s);
      pb.poison(s);
      sb.upload_ids(ids, s);
      sb.run(c.e, 0, s);
      pb.run(c.k, sb.p2e(), ue8m0, s);
      finish(s, what);
      const MoeSortResult got = sb.download();
      expect_same_result(moekit::detail::moe_sort_reference(ids.data(), c.t, c.k, c.e, 0, c.e), got, what);
      check_permute(pb, to_float(xb), c.k, got.permuted_to_expanded, ue8m0, what);

      // The scratch quantization is bit for bit the public quantize_act_1x128.
      DeviceBuffer q2(size_t(c.t * c.h)), s2(size_t(moekit::sfa_physical_size(c.t, c.h)) * 4);
      moekit::quantize_act_1x128(pb.x.get(), c.h, c.t, c.h, q2.get(), c.h, s2.as<float>(), ue8m0, s);
      finish(s, what + " quantize_act_1x128");
      expect_equal(q2.download<uint8_t>(size_t(c.t * c.h)), pb.xq.download<uint8_t>(size_t(c.t * c.h)),
                   what + " xq vs quantize_act_1x128");
      const auto s2_phys = s2.download<float>(size_t(moekit::sfa_physical_size(c.t, c.h)));
      std::vector<float> s2_log(size_t(c.t * pb.kb));
      moekit::sfa_physical_to_logical(s2_phys.data(), c.t, c.h, s2_log.data());
      expect_equal(float_bits(s2_log), pb.sx.download<uint32_t>(size_t(c.t * pb.kb)),
                   what + " sx vs quantize_act_1x128");
      if (HasFailure()) return;
    }
  }
}

TEST(PermuteQuantize, SkipsPaddingAndOutOfRangeRows) {
  // A hand-made permuted_to_expanded over 37 rows (sfa_ld = 40: three scale padding entries per
  // K block): -1, indices >= T * k and other negatives are all skipped, and a token may appear in
  // any number of rows.
  Stream s;
  const int64_t t = 5, h = 2880;
  const int k = 3;
  std::vector<int32_t> p2e(37, -1);
  p2e[0] = 14;  // token 4
  p2e[1] = 0;   // token 0
  p2e[2] = 15;  // == T * k: out of range
  p2e[3] = 2;   // token 0 again
  p2e[7] = INT32_MAX;
  p2e[8] = -7;
  p2e[20] = 9;  // token 3 (NaN / Inf)
  p2e[36] = 7;  // token 2, last row
  DeviceBuffer dp2e(p2e.size() * 4);
  dp2e.upload(p2e);
  PermuteBuffers pb(t, h, int64_t(p2e.size()));
  const std::vector<uint16_t> xb = make_x(t, h, 5);
  pb.x.upload(xb);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (bool ue8m0 : {false, true}) {
    pb.poison(s);
    pb.run(k, dp2e.as<int32_t>(), ue8m0, s);
    finish(s, "hand rows");
    check_permute(pb, to_float(xb), k, p2e, ue8m0, ue8m0 ? "hand rows ue8m0" : "hand rows fp32");
  }
}

TEST(PermuteQuantize, ZeroTokensWritesNothing) {
  Stream s;
  SortBuffers sb(0, 8, 16);
  PermuteBuffers pb(0, 2048, sb.rows());
  sb.poison(s);
  pb.poison(s);
  sb.run(64, 0, s);
  pb.run(8, sb.p2e(), false, s);
  finish(s, "T = 0");
  expect_same_result(moekit::detail::moe_sort_reference(nullptr, 0, 8, 64, 0, 16), sb.download(), "T = 0");
  const auto a = pb.a.download<uint8_t>(pb.a.bytes());
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](uint8_t v) { return v == kPoisonByte; }));
  sb.expect_guards("T = 0");
}

// ----------------------------------------------------------------------------------------------
// permute_quantize_by_token (one launch, driven by expanded_to_permuted)
// ----------------------------------------------------------------------------------------------

TEST(PermuteQuantizeByToken, MatchesTwoKernelPath) {
  // moe_sort, then the old two-kernel permute_quantize and the new one into separately poisoned
  // buffers: every byte of a_perm and sa_perm (codes and scales of every valid row, the untouched
  // padding rows and scale padding, the guards) must be equal, and equal to the host reference.
  // x has NaN / +Inf in token 3 and -Inf in token 5's last (partial) block.
  Stream s;
  struct Case {
    int64_t t, h;
    int k, e;
  };
  std::vector<Case> cases;
  for (int64_t h : {144, 2048, 2880, 7168}) {
    for (int64_t t : {1, 7, 1000}) cases.push_back({t, h, 8, 64});
  }
  cases.push_back({1, 7168, 8, 256});   // DeepSeek-V3 decode
  cases.push_back({64, 7168, 8, 256});
  cases.push_back({4096, 2880, 8, 256});
  cases.push_back({300, 2880, 1, 8});
  cases.push_back({5, 2880, 40, 64});   // k > 32: two rounds of destination rows
  cases.push_back({3, 144, 33, 16});
  cases.push_back({2, 16, 2, 4});       // H = 16: one partial block of 16 columns
  uint64_t seed = 31;
  for (const Case& c : cases) {
    for (bool ue8m0 : {false, true}) {
      const std::string what = case_name(c.t, c.k, c.e) + " H=" + std::to_string(c.h) + (ue8m0 ? " ue8m0" : " fp32");
      const Ids ids = random_ids(seed++, c.t, c.k, c.e);
      SortBuffers sb(c.t, c.k, c.e);
      PermuteBuffers old_pb(c.t, c.h, sb.rows()), new_pb(c.t, c.h, sb.rows()), tok_pb(c.t, c.h, sb.rows());
      const std::vector<uint16_t> xb = make_x(c.t, c.h, seed++);
      old_pb.x.upload(xb);
      new_pb.x.upload(xb);
      tok_pb.x.upload(xb);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads ran on the legacy stream
      sb.poison(s);
      old_pb.poison(s);
      new_pb.poison(s);
      tok_pb.poison(s);
      sb.upload_ids(ids, s);
      sb.run(c.e, 0, s);
      old_pb.run(c.k, sb.p2e(), ue8m0, s);
      new_pb.run_by_token(c.k, sb.e2p(), ue8m0, s);
      // The MoE forward's form: scales once per token into tok_pb.sx (poisoned), then row by row.
      moekit::detail::permute_quantize_by_token_zeroing(
          tok_pb.x.get(), c.t, c.h, c.k, sb.e2p(), sb.rows(), tok_pb.a.get(), tok_pb.sa.as<float>(), ue8m0, nullptr,
          s, nullptr, 0, moekit::detail::TokenScales{tok_pb.sx.as<float>(), sb.p2e()});
      finish(s, what);
      const MoeSortResult got = sb.download();
      expect_same_result(moekit::detail::moe_sort_reference(ids.data(), c.t, c.k, c.e, 0, c.e), got, what);
      expect_equal(old_pb.a.download<uint8_t>(old_pb.a.bytes()), new_pb.a.download<uint8_t>(new_pb.a.bytes()),
                   what + " a_perm new vs old");
      expect_equal(old_pb.sa.download<uint32_t>(old_pb.sa.bytes() / 4),
                   new_pb.sa.download<uint32_t>(new_pb.sa.bytes() / 4), what + " sa_perm new vs old");
      expect_equal(old_pb.a.download<uint8_t>(old_pb.a.bytes()), tok_pb.a.download<uint8_t>(tok_pb.a.bytes()),
                   what + " a_perm token scales vs old");
      expect_equal(old_pb.sa.download<uint32_t>(old_pb.sa.bytes() / 4),
                   tok_pb.sa.download<uint32_t>(tok_pb.sa.bytes() / 4), what + " sa_perm token scales vs old");
      check_by_token(new_pb, to_float(xb), c.k, got.expanded_to_permuted, ue8m0, what + " vs reference");
      if (HasFailure()) return;
    }
  }
}

TEST(PermuteQuantizeByToken, SkipsDroppedAndOutOfRangeSlots) {
  // A hand-made expanded_to_permuted for T = 5, k = 3 over 37 rows (sfa_ld = 40): -1, other
  // negatives, rows_bound and INT32_MAX are skipped; token 3 (NaN / Inf) lands in two rows, the
  // last row is written. The old path, fed the matching permuted_to_expanded, writes the same bytes.
  Stream s;
  const int64_t t = 5, h = 2880, rows = 37;
  const int k = 3;
  const std::vector<int32_t> e2p = {1, 3, -1,  // token 0
                                    -1, INT32_MIN, 37,  // token 1: nothing
                                    36, INT32_MAX, -7,  // token 2: the last row
                                    20, 5, -1,  // token 3: two rows
                                    0, -1, 12};  // token 4
  std::vector<int32_t> p2e(size_t(rows), -1);
  for (size_t i = 0; i < e2p.size(); ++i) {
    if (e2p[i] >= 0 && e2p[i] < rows) p2e[size_t(e2p[i])] = int32_t(i);
  }
  DeviceBuffer de2p(e2p.size() * 4), dp2e(p2e.size() * 4);
  de2p.upload(e2p);
  dp2e.upload(p2e);
  PermuteBuffers old_pb(t, h, rows), new_pb(t, h, rows);
  const std::vector<uint16_t> xb = make_x(t, h, 5);
  old_pb.x.upload(xb);
  new_pb.x.upload(xb);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (bool ue8m0 : {false, true}) {
    const std::string what = ue8m0 ? "hand slots ue8m0" : "hand slots fp32";
    old_pb.poison(s);
    new_pb.poison(s);
    old_pb.run(k, dp2e.as<int32_t>(), ue8m0, s);
    new_pb.run_by_token(k, de2p.as<int32_t>(), ue8m0, s);
    finish(s, what);
    check_by_token(new_pb, to_float(xb), k, e2p, ue8m0, what);
    expect_equal(old_pb.a.download<uint8_t>(old_pb.a.bytes()), new_pb.a.download<uint8_t>(new_pb.a.bytes()),
                 what + " a_perm new vs old");
    expect_equal(old_pb.sa.download<uint32_t>(old_pb.sa.bytes() / 4),
                 new_pb.sa.download<uint32_t>(new_pb.sa.bytes() / 4), what + " sa_perm new vs old");
  }
}

TEST(PermuteQuantizeByToken, NoTokensOrNoRowsWritesNothing) {
  Stream s;
  SortBuffers sb(0, 8, 16);
  PermuteBuffers pb(0, 2048, sb.rows());
  sb.poison(s);
  pb.poison(s);
  sb.run(64, 0, s);
  pb.run_by_token(8, sb.e2p(), false, s);
  EXPECT_NO_THROW(moekit::permute_quantize_by_token(nullptr, 0, 2048, 8, nullptr, 1024, nullptr, nullptr, false, s));
  // T > 0 but rows_bound = 0: nothing to write, nothing dereferenced.
  EXPECT_NO_THROW(moekit::permute_quantize_by_token(nullptr, 4, 2048, 8, nullptr, 0, nullptr, nullptr, false, s));
  finish(s, "T = 0");
  const auto a = pb.a.download<uint8_t>(pb.a.bytes());
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](uint8_t v) { return v == kPoisonByte; }));
  const auto sa = pb.sa.download<uint8_t>(pb.sa.bytes());
  EXPECT_TRUE(std::all_of(sa.begin(), sa.end(), [](uint8_t v) { return v == kPoisonByte; }));
}

// ----------------------------------------------------------------------------------------------
// CUDA graph: capture once, replay with new ids and activations
// ----------------------------------------------------------------------------------------------

}  // namespace
