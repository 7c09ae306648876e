// GPU quantization kernels (quantize_act_1x128, quantize_weight_128x128) against the host
// quantizers of numerics.h, bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "moekit/error.h"
#include "moekit/numerics.h"
#include "moekit/quantize.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

namespace {

using moekit::ErrorCode;
using moekit::detail::DeviceBuffer;

constexpr uint16_t kBf16QNaN = 0x7FC0;
constexpr uint16_t kBf16NegQNaN = 0xFFC0;
constexpr uint16_t kBf16Inf = 0x7F80;
constexpr uint16_t kBf16NegInf = 0xFF80;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

bool is_e4m3_nan(uint8_t b) { return (b & 0x7F) == 0x7F; }

// Deterministic bf16 test data. Every 128-column group of a row gets its own magnitude so that
// scales cover tiny (amax < 1e-4, clamped), ordinary and huge blocks; a few exact zeros, negative
// zeros and bf16 subnormals are sprinkled in.
std::vector<uint16_t> make_bf16(int64_t rows, int64_t cols, int64_t ld, uint64_t seed) {
  std::vector<uint16_t> v(static_cast<size_t>(rows * ld), 0x4000 /* 2.0: padding, never read */);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t idx = static_cast<uint64_t>(r * cols + c);
      const int64_t g = c / 128;
      // magnitude exponent in [-30, 30), varying by row and group
      const int e = static_cast<int>((r * 7 + g * 13 + static_cast<int64_t>(seed)) % 60) - 30;
      const float u = moekit::detail::hash_uniform(seed, idx) * 2.0f - 1.0f;
      float f = std::ldexp(u, e);
      const float sel = moekit::detail::hash_uniform(seed ^ 0x5bd1e995ull, idx);
      uint16_t b = moekit::bf16_from_float(f);
      if (sel < 0.01f) b = 0x0000;                   // +0
      else if (sel < 0.02f) b = 0x8000;              // -0
      else if (sel < 0.025f) b = static_cast<uint16_t>(0x0001 + (idx % 0x7F));  // subnormal
      else if (sel < 0.03f) b = static_cast<uint16_t>(0x8001 + (idx % 0x7F));   // -subnormal
      v[static_cast<size_t>(r * ld + c)] = b;
    }
  }
  return v;
}

std::vector<float> to_float(const std::vector<uint16_t>& b) {
  std::vector<float> f(b.size());
  for (size_t i = 0; i < b.size(); ++i) f[i] = moekit::bf16_to_float(b[i]);
  return f;
}

// Compares q[rows, k] (row stride ldq) bit for bit; bytes in [k, ldq) must keep the 0xFF poison.
// NaN codes too: both sides produce the canonical 0x7F for any NaN (cvt.rn.satfinite.e4m3x2.f32
// drops a NaN's sign, and the host conversion does the same).
void expect_q_equal(const std::vector<uint8_t>& host, const std::vector<uint8_t>& gpu, int64_t rows,
                    int64_t k, int64_t ldq, const std::string& what) {
  int64_t bad = 0, pad_bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < ldq; ++c) {
      const size_t i = static_cast<size_t>(r * ldq + c);
      if (c >= k) {
        if (gpu[i] != 0xFF && pad_bad++ < 5)
          ADD_FAILURE() << what << ": q padding overwritten at row " << r << " col " << c;
        continue;
      }
      if (host[i] != gpu[i] && bad++ < 10) {
        ADD_FAILURE() << what << ": q mismatch at row " << r << " col " << c << ": host 0x" << std::hex
                      << int(host[i]) << " gpu 0x" << int(gpu[i]) << std::dec;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": q mismatches";
  EXPECT_EQ(pad_bad, 0) << what << ": q padding bytes overwritten";
}

struct ActCase {
  int64_t m, k;
  bool ue8m0;
  bool strided;
};

std::string act_name(const ActCase& c) {
  return "m" + std::to_string(c.m) + "_k" + std::to_string(c.k) + (c.ue8m0 ? "_ue8m0" : "_fp32") +
         (c.strided ? "_strided" : "");
}

// Runs the GPU activation quantizer on host bf16 data and checks it against the host quantizer.
void check_act(const std::vector<uint16_t>& xb, int64_t m, int64_t k, int64_t ldx, int64_t ldq,
               bool ue8m0, const std::string& what, cudaStream_t stream = nullptr) {
  const int64_t kb = moekit::ceil_div(k, moekit::kQuantBlock);
  const int64_t sfa_n = moekit::sfa_physical_size(m, k);

  // Host reference.
  const std::vector<float> xf = to_float(xb);
  std::vector<uint8_t> q_ref(static_cast<size_t>(m * ldq), 0xFF);
  std::vector<float> s_log(static_cast<size_t>(m * kb));
  moekit::quantize_1x128(xf.data(), m, k, ldx, q_ref.data(), ldq, s_log.data(), ue8m0);
  std::vector<float> s_ref(static_cast<size_t>(sfa_n));
  moekit::sfa_logical_to_physical(s_log.data(), m, k, s_ref.data());

  // GPU, into poisoned buffers.
  DeviceBuffer dx(xb.size() * sizeof(uint16_t)), dq(static_cast<size_t>(m * ldq)),
      ds(static_cast<size_t>(sfa_n) * sizeof(float));
  dx.upload(xb);
  dq.fill_bytes(0xFF);
  ds.fill_bytes(0xFF);
  // Uploads and memsets run on the legacy stream, which a non-blocking `stream` does not wait for.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  moekit::quantize_act_1x128(dx.get(), ldx, m, k, dq.get(), ldq, ds.as<float>(), ue8m0, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const auto q = dq.download<uint8_t>(static_cast<size_t>(m * ldq));
  const auto s = ds.download<float>(static_cast<size_t>(sfa_n));

  expect_q_equal(q_ref, q, m, k, ldq, what);
  const int64_t ld = moekit::sfa_ld(m);
  int64_t bad = 0;
  for (int64_t b = 0; b < kb; ++b) {
    for (int64_t r = 0; r < ld; ++r) {
      const size_t i = static_cast<size_t>(b * ld + r);
      if (r >= m) {  // padding entries are never written
        EXPECT_EQ(bits_of(s[i]), 0xFFFFFFFFu) << what << ": scale padding written at kb " << b << " row " << r;
        continue;
      }
      if (bits_of(s[i]) != bits_of(s_ref[i]) && bad++ < 10) {
        ADD_FAILURE() << what << ": scale mismatch at row " << r << " kb " << b << ": host " << s_ref[i]
                      << " (0x" << std::hex << bits_of(s_ref[i]) << ") gpu " << s[i] << " (0x"
                      << bits_of(s[i]) << std::dec << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": scale mismatches";
}

class ActQuantTest : public ::testing::TestWithParam<ActCase> {};

TEST_P(ActQuantTest, MatchesHostBitForBit) {
  const ActCase c = GetParam();
  const int64_t ldx = c.strided ? c.k + 24 : c.k;   // multiple of 8, not of 16
  const int64_t ldq = c.strided ? c.k + 48 : c.k;   // multiple of 16
  const auto xb = make_bf16(c.m, c.k, ldx, 1000 + static_cast<uint64_t>(c.m * 31 + c.k));
  check_act(xb, c.m, c.k, ldx, ldq, c.ue8m0, act_name(c));
}

std::vector<ActCase> act_cases() {
  std::vector<ActCase> v;
  for (int64_t m : {1, 3, 64, 129, 1000})
    for (int64_t k : {16, 128, 2880, 7168})
      for (bool ue : {false, true})
        for (bool st : {false, true}) v.push_back({m, k, ue, st});
  // The kernel picks 1, 2 or 4 group pairs per warp from m * groups (see quantize.cu): the shapes
  // above with m <= 129 use 1, m = 1000 with k = 7168 uses 2. These add 2 and 4 with few, partial
  // and many groups per row: 2 for (9000, 144), (3000, 2880); 4 for the others.
  const std::vector<std::pair<int64_t, int64_t>> big = {
      {9000, 144}, {3000, 2880}, {17000, 16}, {17000, 128}, {6000, 2880}, {4100, 7168}};
  for (const auto& [m, k] : big)
    for (bool ue : {false, true}) v.push_back({m, k, ue, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ActQuantTest, ::testing::ValuesIn(act_cases()),
                         [](const ::testing::TestParamInfo<ActCase>& i) { return act_name(i.param); });

// Rows with NaN, ±Inf, an all-zero row, an all-NaN group, and exact ties/saturation candidates.
TEST(ActQuant, SpecialValues) {
  for (int64_t k : {int64_t{128}, int64_t{2880}}) {
    for (bool ue8m0 : {false, true}) {
      const int64_t m = 8, ldx = k, ldq = k;
      auto xb = make_bf16(m, k, ldx, 77);
      // row 0: all zero → every scale is max(0, 1e-4) / 448
      for (int64_t c = 0; c < k; ++c) xb[c] = (c % 2) ? 0x8000 : 0x0000;
      // row 1: NaNs of both signs scattered (ignored by the amax)
      for (int64_t c = 0; c < k; c += 37) xb[ldx + c] = (c % 2) ? kBf16NegQNaN : kBf16QNaN;
      // row 2: +Inf in group 0, -Inf in the last group
      xb[2 * ldx + 5] = kBf16Inf;
      xb[2 * ldx + k - 3] = kBf16NegInf;
      // row 3: group 0 entirely NaN, the rest normal
      for (int64_t c = 0; c < 128; ++c) xb[3 * ldx + c] = kBf16QNaN;
      // row 4: one huge value (bf16 max) per group, the rest tiny
      for (int64_t c = 0; c < k; ++c) xb[4 * ldx + c] = (c % 128 == 17) ? 0x7F7F : 0x0001;
      // row 5: all equal magnitude (x/s hits 448 exactly or rounds next to it)
      for (int64_t c = 0; c < k; ++c) xb[5 * ldx + c] = (c % 3) ? 0x3F9D : 0xBF9D;
      // row 6: amax below the 1e-4 floor
      for (int64_t c = 0; c < k; ++c) xb[6 * ldx + c] = moekit::bf16_from_float((c % 5 - 2) * 1e-6f);

      const std::string what = "special_k" + std::to_string(k) + (ue8m0 ? "_ue8m0" : "_fp32");
      check_act(xb, m, k, ldx, ldq, ue8m0, what);

      // The zero row's scales are the floor, independently of the host implementation.
      DeviceBuffer dx(xb.size() * 2), dq(static_cast<size_t>(m * ldq)),
          ds(static_cast<size_t>(moekit::sfa_physical_size(m, k)) * 4);
      dx.upload(xb);
      moekit::quantize_act_1x128(dx.get(), ldx, m, k, dq.get(), ldq, ds.as<float>(), ue8m0, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto s = ds.download<float>(static_cast<size_t>(moekit::sfa_physical_size(m, k)));
      const float floor_scale = ue8m0 ? std::ldexp(1.0f, -22) : 1e-4f / 448.0f;
      const int64_t ld = moekit::sfa_ld(m);
      for (int64_t b = 0; b < moekit::ceil_div(k, 128); ++b) {
        EXPECT_EQ(bits_of(s[b * ld + 0]), bits_of(floor_scale)) << what << " zero row, kb " << b;
        EXPECT_EQ(bits_of(s[b * ld + 6]), bits_of(floor_scale)) << what << " tiny row, kb " << b;
      }
      EXPECT_EQ(bits_of(s[0 * ld + 3]), bits_of(floor_scale)) << what << " all-NaN group";
      EXPECT_TRUE(std::isinf(s[0 * ld + 2])) << what << " +Inf group scale";
      const auto q = dq.download<uint8_t>(static_cast<size_t>(m * ldq));
      for (int64_t c = 0; c < k; ++c) {
        EXPECT_EQ(q[c] & 0x7F, 0) << what << " zero row col " << c;
        if (xb[ldx + c] == kBf16QNaN || xb[ldx + c] == kBf16NegQNaN) {
          EXPECT_TRUE(is_e4m3_nan(q[ldq + c])) << what << " NaN row col " << c;
        } else {
          EXPECT_FALSE(is_e4m3_nan(q[ldq + c])) << what << " NaN row col " << c;
        }
      }
      EXPECT_TRUE(is_e4m3_nan(q[2 * ldq + 5])) << what << " Inf/Inf";
    }
  }
}

TEST(ActQuant, DeviceRandomInputMatchesHost) {
  // Input produced by the device filler, then checked like the host-generated cases.
  const int64_t m = 777, k = 7168, ldx = 7168 + 64, ldq = 7168 + 128;
  DeviceBuffer dx(static_cast<size_t>(m * ldx) * 2);
  moekit::detail::fill_random_bf16(dx.get(), m * ldx, 3.0f, 42, nullptr);
  const auto xb = dx.download<uint16_t>(static_cast<size_t>(m * ldx));
  check_act(xb, m, k, ldx, ldq, false, "device_random_fp32");
  check_act(xb, m, k, ldx, ldq, true, "device_random_ue8m0");
}

TEST(ActQuant, NonDefaultStream) {
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  const auto xb = make_bf16(300, 2880, 2880, 5);
  check_act(xb, 300, 2880, 2880, 2880, true, "stream", st);
  cudaStreamDestroy(st);
}

TEST(ActQuant, GraphCaptureMatchesDirect) {
  const int64_t m = 500, k = 2880;
  const auto xb = make_bf16(m, k, k, 9);
  DeviceBuffer dx(xb.size() * 2), dq1(static_cast<size_t>(m * k)), dq2(static_cast<size_t>(m * k));
  const size_t sbytes = static_cast<size_t>(moekit::sfa_physical_size(m, k)) * 4;
  DeviceBuffer ds1(sbytes), ds2(sbytes);
  dx.upload(xb);
  dq1.fill_bytes(0xFF);
  dq2.fill_bytes(0xFF);
  ds1.fill_bytes(0xFF);
  ds2.fill_bytes(0xFF);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  moekit::quantize_act_1x128(dx.get(), k, m, k, dq1.get(), k, ds1.as<float>(), false, st);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal), cudaSuccess);
  moekit::quantize_act_1x128(dx.get(), k, m, k, dq2.get(), k, ds2.as<float>(), false, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_EQ(dq1.download<uint8_t>(static_cast<size_t>(m * k)), dq2.download<uint8_t>(static_cast<size_t>(m * k)));
  const auto s1 = ds1.download<uint32_t>(sbytes / 4), s2 = ds2.download<uint32_t>(sbytes / 4);
  EXPECT_EQ(s1, s2);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
}

TEST(ActQuant, EmptyIsNoOp) {
  DeviceBuffer dq(256), ds(256);
  dq.fill_bytes(0xFF);
  ds.fill_bytes(0xFF);
  EXPECT_NO_THROW(moekit::quantize_act_1x128(nullptr, 128, 0, 128, nullptr, 128, nullptr, false, nullptr));
  EXPECT_NO_THROW(moekit::quantize_act_1x128(dq.get(), 128, 0, 128, dq.get(), 128, ds.as<float>(), true, nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (uint8_t b : dq.download<uint8_t>(256)) EXPECT_EQ(b, 0xFF);
  for (uint8_t b : ds.download<uint8_t>(256)) EXPECT_EQ(b, 0xFF);
}

template <typename F>
void expect_code(F&& f, ErrorCode code, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": no exception";
  } catch (const moekit::Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("quantize"), std::string::npos) << what << ": " << e.what();
  }
}

TEST(ActQuant, ArgumentValidation) {
  DeviceBuffer x(1 << 20), q(1 << 20), s(1 << 16);
  const void* X = x.get();
  void* Q = q.get();
  float* S = s.as<float>();
  auto act = [&](const void* xp, int64_t ldx, int64_t m, int64_t k, void* qp, int64_t ldq, float* sp) {
    return [=] { moekit::quantize_act_1x128(xp, ldx, m, k, qp, ldq, sp, false, nullptr); };
  };
  const auto kInv = ErrorCode::kInvalidArgument;
  const auto kMis = ErrorCode::kMisaligned;
  expect_code(act(X, 128, -1, 128, Q, 128, S), kInv, "m < 0");
  expect_code(act(X, 128, 4, 0, Q, 128, S), kInv, "k = 0");
  expect_code(act(X, 128, 4, 8, Q, 128, S), kInv, "k = 8");
  expect_code(act(X, 128, 4, 120, Q, 128, S), kInv, "k = 120 (not % 16)");
  expect_code(act(X, 128, 4, -16, Q, 128, S), kInv, "k < 0");
  expect_code(act(X, 112, 4, 128, Q, 128, S), kInv, "ldx < k");
  expect_code(act(X, 128, 4, 128, Q, 112, S), kInv, "ldq < k");
  expect_code(act(X, 132, 4, 128, Q, 128, S), kMis, "ldx % 8");
  expect_code(act(X, 128, 4, 128, Q, 136, S), kMis, "ldq % 16");
  expect_code(act(nullptr, 128, 4, 128, Q, 128, S), kInv, "x null");
  expect_code(act(X, 128, 4, 128, nullptr, 128, S), kInv, "q null");
  expect_code(act(X, 128, 4, 128, Q, 128, nullptr), kInv, "sa null");
  expect_code(act(static_cast<const char*>(X) + 2, 128, 4, 128, Q, 128, S), kMis, "x + 2 bytes");
  expect_code(act(static_cast<const char*>(X) + 8, 128, 4, 128, Q, 128, S), kMis, "x + 8 bytes");
  expect_code(act(X, 128, 4, 128, static_cast<char*>(Q) + 8, 128, S), kMis, "q + 8 bytes");
  expect_code(act(X, 128, 4, 128, Q, 128, S + 1), kMis, "sa + 4 bytes");
  // The valid neighbours of those calls work.
  EXPECT_NO_THROW(act(X, 136, 4, 128, Q, 144, S)());
  EXPECT_NO_THROW(act(static_cast<const char*>(X) + 16, 128, 4, 16, static_cast<char*>(Q) + 16, 16, S + 4)());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// Weights
// ---------------------------------------------------------------------------------------------

struct WCase {
  int64_t n, k;
  bool ue8m0;
  bool strided;
};

std::string w_name(const WCase& c) {
  return "n" + std::to_string(c.n) + "_k" + std::to_string(c.k) + (c.ue8m0 ? "_ue8m0" : "_fp32") +
         (c.strided ? "_strided" : "");
}

void check_weight(const std::vector<uint16_t>& wb, int64_t n, int64_t k, int64_t ldw, int64_t ldq,
                  bool ue8m0, const std::string& what) {
  const int64_t nb = moekit::ceil_div(n, 128), kb = moekit::ceil_div(k, 128);
  const std::vector<float> wf = to_float(wb);
  std::vector<uint8_t> q_ref(static_cast<size_t>(n * ldq), 0xFF);
  std::vector<float> s_ref(static_cast<size_t>(nb * kb));
  moekit::quantize_128x128(wf.data(), n, k, ldw, q_ref.data(), ldq, s_ref.data(), ue8m0);

  DeviceBuffer dw(wb.size() * 2), dq(static_cast<size_t>(n * ldq)), ds(static_cast<size_t>(nb * kb) * 4);
  dw.upload(wb);
  dq.fill_bytes(0xFF);
  ds.fill_bytes(0xFF);
  moekit::quantize_weight_128x128(dw.get(), ldw, n, k, dq.get(), ldq, ds.as<float>(), ue8m0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_q_equal(q_ref, dq.download<uint8_t>(static_cast<size_t>(n * ldq)), n, k, ldq, what);
  const auto s = ds.download<float>(static_cast<size_t>(nb * kb));
  for (int64_t i = 0; i < nb * kb; ++i) {
    EXPECT_EQ(bits_of(s[i]), bits_of(s_ref[i]))
        << what << ": scale mismatch at block (" << i / kb << ", " << i % kb << "): host " << s_ref[i]
        << " gpu " << s[i];
  }
}

class WeightQuantTest : public ::testing::TestWithParam<WCase> {};

TEST_P(WeightQuantTest, MatchesHostBitForBit) {
  const WCase c = GetParam();
  const int64_t ldw = c.strided ? c.k + 40 : c.k;
  const int64_t ldq = c.strided ? c.k + 16 : c.k;
  const auto wb = make_bf16(c.n, c.k, ldw, 2000 + static_cast<uint64_t>(c.n + c.k));
  check_weight(wb, c.n, c.k, ldw, ldq, c.ue8m0, w_name(c));
}

std::vector<WCase> w_cases() {
  std::vector<WCase> v;
  for (int64_t n : {128, 200, 2880})
    for (int64_t k : {128, 2880})
      for (bool ue : {false, true})
        for (bool st : {false, true}) v.push_back({n, k, ue, st});
  v.push_back({1, 16, false, false});
  v.push_back({129, 144, true, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, WeightQuantTest, ::testing::ValuesIn(w_cases()),
                         [](const ::testing::TestParamInfo<WCase>& i) { return w_name(i.param); });

TEST(WeightQuant, SpecialValues) {
  const int64_t n = 200, k = 2880;
  auto wb = make_bf16(n, k, k, 3);
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t c = 0; c < 128; ++c) wb[r * k + c] = 0;  // block (0, 0) all zero
  wb[130 * k + 200] = kBf16QNaN;                          // NaN in block (1, 1)
  wb[131 * k + 2879] = kBf16NegInf;                       // -Inf in the partial block (1, 22)
  for (int64_t c = 256; c < 384; ++c) wb[5 * k + c] = kBf16NegQNaN;  // a NaN row in block (0, 2)
  for (bool ue8m0 : {false, true}) {
    check_weight(wb, n, k, k, k, ue8m0, ue8m0 ? "w_special_ue8m0" : "w_special_fp32");
    DeviceBuffer dw(wb.size() * 2), dq(static_cast<size_t>(n * k)), ds(2 * 23 * 4);
    dw.upload(wb);
    moekit::quantize_weight_128x128(dw.get(), k, n, k, dq.get(), k, ds.as<float>(), ue8m0, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto s = ds.download<float>(2 * 23);
    const float floor_scale = ue8m0 ? std::ldexp(1.0f, -22) : 1e-4f / 448.0f;
    EXPECT_EQ(bits_of(s[0]), bits_of(floor_scale));
    EXPECT_TRUE(std::isinf(s[23 + 22]));
    EXPECT_TRUE(std::isfinite(s[23 + 1]));
  }
}

TEST(WeightQuant, ArgumentValidation) {
  DeviceBuffer w(1 << 20), q(1 << 20), s(1 << 16);
  const void* W = w.get();
  void* Q = q.get();
  float* S = s.as<float>();
  auto wq = [&](const void* wp, int64_t ldw, int64_t n, int64_t k, void* qp, int64_t ldq, float* sp) {
    return [=] { moekit::quantize_weight_128x128(wp, ldw, n, k, qp, ldq, sp, true, nullptr); };
  };
  const auto kInv = ErrorCode::kInvalidArgument;
  const auto kMis = ErrorCode::kMisaligned;
  expect_code(wq(W, 128, -5, 128, Q, 128, S), kInv, "n < 0");
  expect_code(wq(W, 128, 4, 0, Q, 128, S), kInv, "k = 0");
  expect_code(wq(W, 128, 4, 40, Q, 128, S), kInv, "k = 40");
  expect_code(wq(W, 64, 4, 128, Q, 128, S), kInv, "ldw < k");
  expect_code(wq(W, 128, 4, 128, Q, 127, S), kInv, "ldq < k");
  expect_code(wq(W, 130, 4, 128, Q, 128, S), kMis, "ldw % 8");
  expect_code(wq(W, 128, 4, 128, Q, 130, S), kMis, "ldq % 16");
  expect_code(wq(nullptr, 128, 4, 128, Q, 128, S), kInv, "w null");
  expect_code(wq(W, 128, 4, 128, nullptr, 128, S), kInv, "q null");
  expect_code(wq(W, 128, 4, 128, Q, 128, nullptr), kInv, "sb null");
  expect_code(wq(static_cast<const char*>(W) + 4, 128, 4, 128, Q, 128, S), kMis, "w + 4 bytes");
  expect_code(wq(W, 128, 4, 128, static_cast<char*>(Q) + 1, 128, S), kMis, "q + 1 byte");
  expect_code(wq(W, 128, 4, 128, Q, 128, S + 2), kMis, "sb + 8 bytes");
  EXPECT_NO_THROW(wq(nullptr, 128, 0, 128, nullptr, 128, nullptr)());
  EXPECT_NO_THROW(wq(W, 128, 4, 128, Q, 128, S)());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
