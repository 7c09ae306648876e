// GPU tests of swiglu_quantize (include/moekit/moe_ops.h, SPEC §3) against the host reference
// swiglu_quantize_reference.
//
// Comparison rule. Both sides compute h with the same float operations; only the exponential may
// round differently (CUDA expf has up to 2 ulp of error, glibc expf is nearly correctly rounded), so
// a few h differ by an ulp. Hence, per (row, 128-column block):
//  * equal scale bits (the vast majority): every FP8 code equal, or at most one code step apart
//    (same sign, magnitudes differing by 1), NaN codes equal;
//  * different scales (an ulp-different amax; allowed in at most 1 + 0.1% of the blocks): the
//    scales within 1e-6 relative (ue8m0: a factor 2), and the dequantized values within one E4M3
//    step of each other;
//  * at least 99.9% of all codes bit-identical (at most 1 differing code for tiny inputs).
// Padding bytes of hq (columns [I, ld_hq) and a tail) and of the physical scale buffer (rows
// [rows, sfa_ld(rows)) and a tail) are poisoned and must stay untouched.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"
#include "moekit/error.h"
#include "moekit/moe_ops.h"
#include "moekit/numerics.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace {

using moekit::ErrorCode;
using moekit::detail::DeviceBuffer;

constexpr uint8_t kPoison = 0xA5;
constexpr uint32_t kPoison32 = 0xA5A5A5A5u;
constexpr uint16_t kBf16NaN = 0x7FC0;
constexpr int64_t kTail = 64;  // poisoned bytes past the end of each output

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

bool is_nan_code(uint8_t c) { return (c & 0x7F) == 0x7F; }

// DeviceBuffer::upload / fill_bytes run on the legacy default stream, which does not order with the
// non-blocking test streams: wait for them before a kernel reads what they wrote.
void sync_device() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

struct Result {
  std::vector<uint8_t> q_gpu, q_ref;  // [rows, I] (compacted)
  std::vector<float> s_gpu, s_ref;    // logical [rows, groups]
  int64_t rows = 0, inter = 0, groups = 0;
};

// Runs the GPU kernel and the reference on random bf16 gate/up in [-8, 8) (strided buffers),
// checking the poisoned padding. `edit` may change the host copy of gu (row stride ld_gu) before
// it is uploaded again (e.g. to plant NaNs).
Result run_case(int64_t rows, int64_t inter, float limit, bool ue8m0, uint64_t seed,
                const std::function<void(std::vector<uint16_t>&, int64_t ld_gu)>& edit = {}) {
  moekit::test::Stream stream;
  const std::string what = "swiglu rows=" + std::to_string(rows) + " I=" + std::to_string(inter) +
                           " limit=" + std::to_string(limit) + " ue8m0=" + std::to_string(ue8m0);
  const int64_t ld_gu = 2 * inter + 24;  // strided: 48 bytes of padding per row
  const int64_t ld_hq = inter + 48;
  const int64_t groups = moekit::ceil_div(inter, moekit::kQuantBlock);
  const int64_t sa_floats = moekit::sfa_physical_size(rows, inter);

  DeviceBuffer gu(static_cast<size_t>(rows * ld_gu) * 2);
  moekit::detail::fill_random_bf16(gu.get(), rows * ld_gu, 8.0f, seed, stream);
  moekit::test::finish(stream, what + " fill");
  std::vector<uint16_t> gu_h = gu.download<uint16_t>(static_cast<size_t>(rows * ld_gu));
  if (edit) {
    edit(gu_h, ld_gu);
    gu.upload(gu_h);
  }

  DeviceBuffer hq(static_cast<size_t>(rows * ld_hq + kTail));
  DeviceBuffer sa(static_cast<size_t>(sa_floats) * 4 + kTail);
  hq.fill_bytes(kPoison);
  sa.fill_bytes(kPoison);
  sync_device();
  moekit::swiglu_quantize(gu.get(), ld_gu, rows, inter, limit, hq.get(), ld_hq, sa.as<float>(), ue8m0, stream);
  moekit::test::finish(stream, what);

  Result res;
  res.rows = rows;
  res.inter = inter;
  res.groups = groups;
  const auto q_raw = hq.download<uint8_t>(hq.bytes());
  const auto sa_raw = sa.download<uint8_t>(sa.bytes());

  // Padding untouched.
  int64_t pad_bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = inter; c < ld_hq; ++c)
      if (q_raw[static_cast<size_t>(r * ld_hq + c)] != kPoison) ++pad_bad;
  for (int64_t i = rows * ld_hq; i < rows * ld_hq + kTail; ++i)
    if (q_raw[static_cast<size_t>(i)] != kPoison) ++pad_bad;
  EXPECT_EQ(pad_bad, 0) << what << ": hq padding bytes overwritten";
  std::vector<float> sa_phys(static_cast<size_t>(sa_floats));
  std::memcpy(sa_phys.data(), sa_raw.data(), sa_phys.size() * 4);
  int64_t sa_pad_bad = 0;
  const int64_t ld = moekit::sfa_ld(rows);
  for (int64_t kb = 0; kb < groups; ++kb)
    for (int64_t r = rows; r < ld; ++r)
      if (bits_of(sa_phys[static_cast<size_t>(kb * ld + r)]) != kPoison32) ++sa_pad_bad;
  for (int64_t i = sa_floats * 4; i < sa_floats * 4 + kTail; ++i)
    if (sa_raw[static_cast<size_t>(i)] != kPoison) ++sa_pad_bad;
  EXPECT_EQ(sa_pad_bad, 0) << what << ": scale padding overwritten";

  res.q_gpu.resize(static_cast<size_t>(rows * inter));
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(res.q_gpu.data() + r * inter, q_raw.data() + r * ld_hq, static_cast<size_t>(inter));
  res.s_gpu.resize(static_cast<size_t>(rows * groups));
  moekit::sfa_physical_to_logical(sa_phys.data(), rows, inter, res.s_gpu.data());

  // Reference on the same bf16 values, compacted to [rows, 2I].
  std::vector<float> gu_f(static_cast<size_t>(rows * 2 * inter));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 2 * inter; ++c)
      gu_f[static_cast<size_t>(r * 2 * inter + c)] = moekit::bf16_to_float(gu_h[static_cast<size_t>(r * ld_gu + c)]);
  res.q_ref.resize(res.q_gpu.size());
  res.s_ref.resize(res.s_gpu.size());
  moekit::swiglu_quantize_reference(gu_f.data(), rows, inter, limit, res.q_ref.data(), res.s_ref.data(), ue8m0);
  return res;
}

// The comparison rule of the file comment.
void expect_matches(const Result& r, bool ue8m0, const std::string& what) {
  int64_t exact = 0, near = 0, bad = 0, scale_diff = 0, scale_bad = 0;
  const int64_t total = r.rows * r.inter;
  for (int64_t row = 0; row < r.rows; ++row) {
    for (int64_t kb = 0; kb < r.groups; ++kb) {
      const size_t si = static_cast<size_t>(row * r.groups + kb);
      const float sg = r.s_gpu[si], sr = r.s_ref[si];
      const bool same_scale = bits_of(sg) == bits_of(sr);
      if (!same_scale) {
        ++scale_diff;
        const bool ok = ue8m0 ? (sg == 2.0f * sr || sr == 2.0f * sg)
                              : std::fabs(double(sg) - double(sr)) <= 1e-6 * std::fabs(double(sr));
        if (!ok && scale_bad++ < 5)
          ADD_FAILURE() << what << ": scale at row " << row << " block " << kb << ": gpu " << sg << " ref " << sr;
      }
      const int64_t c0 = kb * moekit::kQuantBlock;
      const int64_t c1 = std::min(r.inter, c0 + moekit::kQuantBlock);
      for (int64_t c = c0; c < c1; ++c) {
        const size_t i = static_cast<size_t>(row * r.inter + c);
        const uint8_t cg = r.q_gpu[i], cr = r.q_ref[i];
        if (cg == cr) {
          ++exact;
          continue;
        }
        bool ok;
        if (is_nan_code(cg) || is_nan_code(cr)) {
          ok = false;
        } else if (same_scale) {
          const int dm = int(cg & 0x7F) - int(cr & 0x7F);
          const bool same_sign = (cg & 0x80) == (cr & 0x80) || ((cg & 0x7F) == 0 && (cr & 0x7F) == 0);
          ok = same_sign && dm >= -1 && dm <= 1;
        } else {
          const double dg = double(moekit::e4m3_to_float(cg)) * sg;
          const double dr = double(moekit::e4m3_to_float(cr)) * sr;
          const double mag = std::max(std::fabs(dg), std::fabs(dr));
          ok = std::fabs(dg - dr) <= 0.0625 * mag + std::ldexp(double(std::max(sg, sr)), -9);
        }
        if (ok) {
          ++near;
        } else if (bad++ < 5) {
          ADD_FAILURE() << what << ": code at row " << row << " col " << c << ": gpu 0x" << std::hex << int(cg)
                        << " ref 0x" << int(cr) << std::dec << " (scales gpu " << sg << " ref " << sr << ")";
        }
      }
    }
  }
  const int64_t blocks = r.rows * r.groups;
  EXPECT_EQ(bad, 0) << what;
  EXPECT_EQ(scale_bad, 0) << what;
  EXPECT_LE(scale_diff, 1 + blocks / 1000) << what << ": too many blocks with a different scale";
  EXPECT_LE(total - exact, std::max<int64_t>(1, total / 1000)) << what << ": too few identical codes";
  if (near > 0 || scale_diff > 0)
    std::printf("  %s: %lld codes one step apart, %lld blocks with an ulp-different scale\n", what.c_str(),
                static_cast<long long>(near), static_cast<long long>(scale_diff));
}

TEST(SwigluQuantize, MatchesReference) {
  uint64_t seed = 1000;
  for (int64_t rows : {1, 7, 1000}) {
    for (int64_t inter : {768, 1408, 2048, 2880}) {
      for (float limit : {0.0f, 7.0f}) {
        for (bool ue8m0 : {false, true}) {
          const std::string what = "rows=" + std::to_string(rows) + " I=" + std::to_string(inter) +
                                   " limit=" + std::to_string(limit) + " ue8m0=" + std::to_string(ue8m0);
          const Result r = run_case(rows, inter, limit, ue8m0, ++seed);
          expect_matches(r, ue8m0, what);
        }
      }
    }
  }
}

// NaN in a gate or an up value makes only that element's h NaN: it quantizes to 0x7F, the amax
// ignores it, and every other element and row is unaffected. A fully NaN row stays in its row.
TEST(SwigluQuantize, NaNStaysLocal) {
  const int64_t rows = 7, inter = 2880;
  for (float limit : {0.0f, 7.0f}) {
    const auto edit = [&](std::vector<uint16_t>& gu, int64_t ld) {
      gu[static_cast<size_t>(3 * ld + 17)] = kBf16NaN;                  // gate of row 3, col 17
      gu[static_cast<size_t>(5 * ld + inter + 2870)] = kBf16NaN;        // up of row 5, col 2870 (partial group)
      for (int64_t c = 0; c < inter; ++c) gu[static_cast<size_t>(2 * ld + c)] = kBf16NaN;  // row 2: all gates
    };
    const Result r = run_case(rows, inter, limit, false, 77, edit);
    const std::string what = "NaN limit=" + std::to_string(limit);
    expect_matches(r, false, what);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = 0; c < inter; ++c) {
        const bool nan_expected = row == 2 || (row == 3 && c == 17) || (row == 5 && c == 2870);
        const uint8_t code = r.q_gpu[static_cast<size_t>(row * inter + c)];
        if (nan_expected) {
          EXPECT_EQ(code, 0x7F) << what << " row " << row << " col " << c;
        } else {
          EXPECT_FALSE(is_nan_code(code)) << what << " row " << row << " col " << c;
        }
      }
      for (int64_t kb = 0; kb < r.groups; ++kb) {
        const float s = r.s_gpu[static_cast<size_t>(row * r.groups + kb)];
        EXPECT_TRUE(std::isfinite(s) && s > 0.0f) << what << " row " << row << " block " << kb;
        if (row == 2) {
          EXPECT_EQ(s, moekit::quant_scale(0.0f, false)) << "all-NaN block gets the floor scale";
        }
      }
    }
  }
}

TEST(SwigluQuantize, ZeroRowsIsNoop) {
  moekit::test::Stream stream;
  const int64_t inter = 2880;
  DeviceBuffer gu(2 * inter * 2), hq(inter + kTail), sa(256);
  hq.fill_bytes(kPoison);
  sa.fill_bytes(kPoison);
  sync_device();
  EXPECT_NO_THROW(moekit::swiglu_quantize(gu.get(), 2 * inter, 0, inter, 7.0f, hq.get(), inter, sa.as<float>(),
                                          false, stream));
  EXPECT_NO_THROW(moekit::swiglu_quantize(nullptr, 2 * inter, 0, inter, 0.0f, nullptr, inter, nullptr, true, stream));
  moekit::test::finish(stream, "rows=0");
  for (uint8_t b : hq.download<uint8_t>(hq.bytes())) ASSERT_EQ(b, kPoison);
  for (uint8_t b : sa.download<uint8_t>(sa.bytes())) ASSERT_EQ(b, kPoison);
}

// Captured into a CUDA graph and replayed, the kernel produces the same bits as a direct launch.
TEST(SwigluQuantize, GraphCaptureMatchesDirect) {
  moekit::test::Stream stream;
  const int64_t rows = 33, inter = 1408;
  DeviceBuffer gu(static_cast<size_t>(rows * 2 * inter) * 2);
  moekit::detail::fill_random_bf16(gu.get(), rows * 2 * inter, 8.0f, 4242, stream);
  const size_t sa_bytes = static_cast<size_t>(moekit::sfa_physical_size(rows, inter)) * 4;
  DeviceBuffer hq1(static_cast<size_t>(rows * inter)), hq2(static_cast<size_t>(rows * inter));
  DeviceBuffer sa1(sa_bytes), sa2(sa_bytes);
  sa1.fill_bytes(0);
  sa2.fill_bytes(0);
  sync_device();
  moekit::swiglu_quantize(gu.get(), 2 * inter, rows, inter, 7.0f, hq1.get(), inter, sa1.as<float>(), true, stream);
  moekit::test::finish(stream, "direct");

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  moekit::swiglu_quantize(gu.get(), 2 * inter, rows, inter, 7.0f, hq2.get(), inter, sa2.as<float>(), true, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  moekit::test::finish(stream, "graph");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  EXPECT_EQ(hq1.download<uint8_t>(hq1.bytes()), hq2.download<uint8_t>(hq2.bytes()));
  EXPECT_EQ(sa1.download<uint8_t>(sa1.bytes()), sa2.download<uint8_t>(sa2.bytes()));
}

TEST(SwigluQuantize, ValidationErrors) {
  moekit::test::Stream stream;
  const int64_t rows = 4, inter = 2880, ld_gu = 2 * inter, ld_hq = inter;
  DeviceBuffer gu(static_cast<size_t>(rows * ld_gu) * 2 + 64), hq(static_cast<size_t>(rows * ld_hq) + 64),
      sa(static_cast<size_t>(moekit::sfa_physical_size(rows, inter)) * 4 + 64);
  hq.fill_bytes(kPoison);
  sync_device();
  char* g = gu.as<char>();
  char* q = hq.as<char>();
  float* s = sa.as<float>();
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const moekit::Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;  // "no error" sentinel
  };
  const auto inv = ErrorCode::kInvalidArgument, mis = ErrorCode::kMisaligned;
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, -1, inter, 0.f, q, ld_hq, s, false, stream); }), inv);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, rows, 2872, 0.f, q, 2880, s, false, stream); }), inv);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, rows, 0, 0.f, q, ld_hq, s, false, stream); }), inv);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu - 8, rows, inter, 0.f, q, ld_hq, s, false, stream); }), inv);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, rows, inter, 0.f, q, ld_hq - 16, s, false, stream); }), inv);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, rows, inter, NAN, q, ld_hq, s, false, stream); }), inv);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(nullptr, ld_gu, rows, inter, 0.f, q, ld_hq, s, false, stream); }), inv);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu + 4, rows, inter, 0.f, q, ld_hq, s, false, stream); }), mis);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, rows, inter, 0.f, q, ld_hq + 8, s, false, stream); }), mis);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g + 8, ld_gu, rows, inter, 0.f, q, ld_hq, s, false, stream); }), mis);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, rows, inter, 0.f, q + 8, ld_hq, s, false, stream); }), mis);
  EXPECT_EQ(code_of([&] { moekit::swiglu_quantize(g, ld_gu, rows, inter, 0.f, q, ld_hq, s + 2, false, stream); }), mis);
  moekit::test::finish(stream, "validation");
  for (uint8_t b : hq.download<uint8_t>(hq.bytes())) ASSERT_EQ(b, kPoison) << "a rejected call wrote output";
}

}  // namespace

// With a device row count, rows at or past it are left untouched and the rows before it equal a
// call over exactly those rows.
TEST(SwigluQuantize, DeviceRowCountLimitsTheRows) {
  const int64_t rows = 200, used = 70, inter = 1408;
  const int64_t kb = moekit::ceil_div(inter, 128);
  moekit::detail::DeviceBuffer gu(size_t(rows * 2 * inter * 2)), hq_all(size_t(rows * inter)),
      hq_lim(size_t(rows * inter)), sa_all(size_t(kb * moekit::sfa_ld(rows) * 4)),
      sa_lim(size_t(kb * moekit::sfa_ld(rows) * 4)), count(4);
  moekit::detail::fill_random_bf16(gu.get(), rows * 2 * inter, 8.0f, 777, nullptr);
  count.upload(std::vector<int32_t>{int32_t(used)});
  hq_all.fill_bytes(0xA5);
  hq_lim.fill_bytes(0xA5);
  sa_all.fill_bytes(0xA5);
  sa_lim.fill_bytes(0xA5);
  moekit::swiglu_quantize(gu.get(), 2 * inter, rows, inter, 0.0f, hq_all.get(), inter, sa_all.as<float>(), false,
                          nullptr);
  moekit::swiglu_quantize(gu.get(), 2 * inter, rows, inter, 0.0f, hq_lim.get(), inter, sa_lim.as<float>(), false,
                          nullptr, count.as<int32_t>());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto qa = hq_all.download<uint8_t>(size_t(rows * inter));
  const auto ql = hq_lim.download<uint8_t>(size_t(rows * inter));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < inter; ++c) {
      const size_t i = size_t(r * inter + c);
      if (r < used) ASSERT_EQ(ql[i], qa[i]) << r << "," << c;
      else ASSERT_EQ(ql[i], 0xA5) << "row past the device count was written: " << r;
    }
  const auto s_all = sa_all.download<uint32_t>(size_t(kb * moekit::sfa_ld(rows)));
  const auto s_lim = sa_lim.download<uint32_t>(size_t(kb * moekit::sfa_ld(rows)));
  for (int64_t g = 0; g < kb; ++g)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = size_t(g * moekit::sfa_ld(rows) + r);
      if (r < used) ASSERT_EQ(s_lim[i], s_all[i]);
      else ASSERT_EQ(s_lim[i], 0xA5A5A5A5u);
    }
}
