// Sparse MQA attention (include/moekit/attention.h) against the float64 references
// (src/attention/attention_reference.h) on random data: normal bf16 queries and keys (the mixed
// cache quantized from them), −1 and out-of-range indices, ragged top-k and window lengths, the
// causal window of prefill, sink on and off, every head dim, heads that are not a multiple of 64,
// split and unsplit key lists, the mixed cache as three arrays or one row per entry (written by
// mixed_kv_cache_write); normalized and per-source partial outputs, the merge op, graph replay. Outputs start poisoned (NaN) so an unwritten row fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "attention/attention_reference.h"
#include "gpu_test_util.h"
#include "moekit/attention.h"
#include "moekit/numerics.h"
#include "runtime/device_buffer.h"

namespace {

using moekit::AttentionOutput;
using moekit::detail::DeviceBuffer;

struct Case {
  int64_t tokens = 1;
  int heads = 128, dim = 512;
  bool mixed = true;
  bool rows = false;      // the mixed cache as one 640-byte row per entry, written by mixed_kv_cache_write
  int topk = 0, window = 0;
  int64_t requests = 0;   // 0: one per token (decode, no token_request)
  bool causal = false;
  bool sink = false;
  bool ragged = true;     // random topk_lens / window_lens
  int64_t entries = 3000;
  int check_every = 1;    // reference for every n-th token (and the last)
};

// Everything one call needs, on the host and the device.
struct Problem {
  Case c;
  std::vector<uint16_t> q;              // bf16 [T, H, D]
  std::vector<double> kv;               // dequantized [N, D]
  std::vector<int32_t> topk_idx, topk_lens, win_idx, win_lens, token_req, win_pos, q_pos;
  std::vector<float> sink;
  DeviceBuffer dq, dkv, dnope, dscales, drope, dtopk, dtopk_lens, dwin, dwin_lens, dreq, dwin_pos, dq_pos, dsink;
  moekit::SparseAttentionArgs args;
  moekit::AttentionKv kvd;

  explicit Problem(const Case& cs, uint32_t seed) : c(cs) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int D = c.dim;
    q.resize(size_t(c.tokens * c.heads * D));
    for (auto& v : q) v = moekit::bf16_from_float(normal(rng));
    kv.resize(size_t(c.entries * D));
    std::vector<float> kf(size_t(c.entries * D));
    for (int64_t e = 0; e < c.entries; ++e) {
      const float row_scale = std::ldexp(1.0f, int(rng() % 5) - 2);  // rows of different magnitude
      for (int d = 0; d < D; ++d) kf[size_t(e * D + d)] = moekit::bf16_to_float(moekit::bf16_from_float(normal(rng) * row_scale));
    }
    if (c.mixed) {
      std::vector<uint8_t> nope(size_t(c.entries * 448));
      std::vector<float> scales(size_t(c.entries * 7));
      std::vector<uint16_t> rope(size_t(c.entries * 64));
      moekit::detail::quantize_mixed_kv(kf.data(), c.entries, nope.data(), scales.data(), rope.data());
      std::vector<float> back(kf.size());
      moekit::detail::dequantize_mixed_kv(nope.data(), scales.data(), rope.data(), c.entries, back.data());
      for (size_t i = 0; i < kv.size(); ++i) kv[i] = back[i];
      kvd.format = moekit::KvFormat::kMixedFp8;
      if (c.rows) {  // [nope 448 B | rope 128 B | scales 28 B | pad] per entry, from the device writer
        constexpr int64_t kRow = 640;
        dnope = DeviceBuffer(size_t(c.entries * kRow));
        uint8_t* base = dnope.as<uint8_t>();
        kvd.mixed = moekit::MixedKvCache{base, reinterpret_cast<float*>(base + 576), base + 448, c.entries, kRow,
                                         kRow, kRow};
        std::vector<uint16_t> kb(kf.size());
        for (size_t i = 0; i < kf.size(); ++i) kb[i] = moekit::bf16_from_float(kf[i]);
        std::vector<int32_t> slots(size_t(c.entries));
        for (int64_t e = 0; e < c.entries; ++e) slots[size_t(e)] = int32_t(e);
        DeviceBuffer dk = DeviceBuffer::from(kb), ds = DeviceBuffer::from(slots);
        moekit::mixed_kv_cache_write(dk.get(), c.entries, 512, ds.as<int32_t>(), kvd.mixed, nullptr);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      } else {
        dnope = DeviceBuffer::from(nope);
        dscales = DeviceBuffer::from(scales);
        drope = DeviceBuffer::from(rope);
        kvd.mixed = moekit::MixedKvCache{dnope.as<uint8_t>(), dscales.as<float>(), drope.get(), c.entries};
      }
    } else {
      std::vector<uint16_t> b(kf.size());
      for (size_t i = 0; i < kf.size(); ++i) {
        b[i] = moekit::bf16_from_float(kf[i]);
        kv[i] = kf[i];
      }
      dkv = DeviceBuffer::from(b);
      kvd.format = moekit::KvFormat::kBf16;
      kvd.bf16 = dkv.get();
      kvd.num_entries = c.entries;
    }
    const auto pick = [&](int n) {
      const uint32_t r = rng() % 100;
      if (r < 4) return int32_t(-1);
      if (r < 6) return int32_t(c.entries + int64_t(rng() % 7));  // out of range: no entry
      (void)n;
      return int32_t(rng() % uint32_t(c.entries));
    };
    topk_idx.resize(size_t(c.tokens * c.topk));
    for (auto& v : topk_idx) v = pick(0);
    topk_lens.resize(size_t(c.tokens));
    for (auto& v : topk_lens) v = c.ragged ? int32_t(rng() % uint32_t(c.topk + 1)) : c.topk;
    if (c.ragged && c.tokens > 1) topk_lens[0] = c.topk;  // one full list
    const int64_t R = c.requests > 0 ? c.requests : c.tokens;
    token_req.resize(size_t(c.tokens));
    q_pos.resize(size_t(c.tokens));
    for (int64_t t = 0; t < c.tokens; ++t) {
      token_req[size_t(t)] = int32_t(t % R);
      q_pos[size_t(t)] = int32_t(1000 + (t / R) * 3);  // later tokens of a request sit later
    }
    win_idx.resize(size_t(R * c.window));
    win_pos.resize(size_t(R * c.window));
    win_lens.resize(size_t(R));
    for (int64_t r = 0; r < R; ++r) {
      win_lens[size_t(r)] = c.ragged ? int32_t(rng() % uint32_t(c.window + 1)) : c.window;
      for (int j = 0; j < c.window; ++j) {
        win_idx[size_t(r * c.window + j)] = pick(0);
        win_pos[size_t(r * c.window + j)] = int32_t(1000 + int(rng() % uint32_t(3 * (c.tokens / R) + 3)) - 2);
      }
    }
    if (c.ragged && R > 0) win_lens[0] = c.window;
    sink.resize(size_t(c.heads));
    for (auto& v : sink) v = 2.0f * normal(rng) + 1.0f;

    dq = DeviceBuffer::from(q);
    if (c.topk > 0) {
      dtopk = DeviceBuffer::from(topk_idx);
      dtopk_lens = DeviceBuffer::from(topk_lens);
    }
    if (c.window > 0) {
      dwin = DeviceBuffer::from(win_idx);
      dwin_lens = DeviceBuffer::from(win_lens);
      dreq = DeviceBuffer::from(token_req);
      dwin_pos = DeviceBuffer::from(win_pos);
    }
    dq_pos = DeviceBuffer::from(q_pos);
    dsink = DeviceBuffer::from(sink);
    args.q = dq.get();
    args.num_tokens = c.tokens;
    args.heads = c.heads;
    args.dim = D;
    args.softmax_scale = float(1.0 / std::sqrt(double(D)));
    args.sink = c.sink ? dsink.as<float>() : nullptr;
    args.topk_indices = c.topk > 0 ? dtopk.as<int32_t>() : nullptr;
    args.topk = c.topk;
    args.topk_lens = c.topk > 0 && c.ragged ? dtopk_lens.as<int32_t>() : nullptr;
    args.window_indices = c.window > 0 ? dwin.as<int32_t>() : nullptr;
    args.window = c.window;
    args.window_lens = c.window > 0 && c.ragged ? dwin_lens.as<int32_t>() : nullptr;
    args.token_request = c.window > 0 && c.requests > 0 ? dreq.as<int32_t>() : nullptr;
    args.num_requests = c.window > 0 ? R : 0;
    args.window_positions = c.window > 0 && c.causal ? dwin_pos.as<int32_t>() : nullptr;
    args.query_positions = c.causal ? dq_pos.as<int32_t>() : nullptr;
  }

  // The sources of token t as the reference reads them.
  std::vector<moekit::detail::AttentionSource> sources(int64_t t) const {
    std::vector<moekit::detail::AttentionSource> s(2);
    const auto entry = [&](int32_t e) { return e >= 0 && e < c.entries ? e : int32_t(-1); };
    // Lengths outside [0, capacity] are clamped, a request outside [0, R) has no window.
    const int topk_len = std::clamp(topk_lens[size_t(t)], 0, c.topk);
    for (int j = 0; j < topk_len; ++j) s[0].entries.push_back(entry(topk_idx[size_t(t * c.topk + j)]));
    const int64_t r = token_req[size_t(t)];
    const int64_t R = int64_t(win_lens.size());
    const int win_len = c.window > 0 && r >= 0 && r < R ? std::clamp(win_lens[size_t(r)], 0, c.window) : 0;
    for (int j = 0; j < win_len; ++j) {
      s[1].entries.push_back(entry(win_idx[size_t(r * c.window + j)]));
      if (c.causal) s[1].positions.push_back(win_pos[size_t(r * c.window + j)]);
    }
    return s;
  }
  std::vector<double> q_row(int64_t t) const {
    std::vector<double> v(size_t(c.heads * c.dim));
    for (size_t i = 0; i < v.size(); ++i) v[i] = moekit::bf16_to_float(q[size_t(t * c.heads * c.dim) + i]);
    return v;
  }
  std::vector<int64_t> checked_tokens() const {
    std::vector<int64_t> ts;
    for (int64_t t = 0; t < c.tokens; t += c.check_every) ts.push_back(t);
    if (ts.back() != c.tokens - 1) ts.push_back(c.tokens - 1);
    return ts;
  }
};

// Accumulates rel L2 of o and the largest lse error over rows.
struct Compare {
  double err2 = 0, ref2 = 0, lse_err = 0;
  int bad_lse = 0, nonzero_empty = 0;
  void row(const double* ref_o, const double ref_lse, const float* got_o, float got_lse, int dim) {
    for (int d = 0; d < dim; ++d) {
      err2 += (got_o[d] - ref_o[d]) * (got_o[d] - ref_o[d]);
      ref2 += ref_o[d] * ref_o[d];
    }
    if (std::isinf(ref_lse)) {
      if (!(std::isinf(got_lse) && got_lse < 0)) ++bad_lse;
      for (int d = 0; d < dim; ++d) nonzero_empty += got_o[d] != 0.0f;
    } else {
      lse_err = std::max(lse_err, std::fabs(double(got_lse) - ref_lse));
      if (!std::isfinite(got_lse)) ++bad_lse;
    }
  }
  double rel() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2); }
  void expect_ok(const char* what) const {
    EXPECT_LE(rel(), 1e-2) << what;
    EXPECT_LE(lse_err, 1e-3) << what;
    EXPECT_EQ(bad_lse, 0) << what;
    EXPECT_EQ(nonzero_empty, 0) << what;
    std::printf("  %-44s rel L2 %.2e, lse err %.2e\n", what, rel(), lse_err);
  }
};

void run_normalized(Problem& pb, const char* what) {
  const Case& c = pb.c;
  const size_t n = size_t(c.tokens * c.heads * c.dim);
  DeviceBuffer o(n * 2), lse(size_t(c.tokens * c.heads) * 4);
  ASSERT_EQ(cudaMemset(o.get(), 0xFF, o.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(lse.get(), 0xFF, lse.bytes()), cudaSuccess);
  const size_t ws_bytes = moekit::sparse_attention_workspace_bytes(pb.args, AttentionOutput::kNormalized);
  DeviceBuffer ws(std::max<size_t>(ws_bytes, 16));
  moekit::test::Stream s;
  moekit::SparseAttentionOut out;
  out.o = o.get();
  out.lse = lse.as<float>();
  moekit::sparse_attention(pb.args, pb.kvd, AttentionOutput::kNormalized, out, ws.get(), ws_bytes, s);
  moekit::test::finish(s, what);
  const auto got_o = o.download<uint16_t>(n);
  const auto got_lse = lse.download<float>(size_t(c.tokens * c.heads));
  for (uint16_t v : got_o) ASSERT_FALSE(std::isnan(moekit::bf16_to_float(v))) << what << ": an unwritten output";
  Compare cmp;
  std::vector<float> row(size_t(c.dim));
  for (int64_t t : pb.checked_tokens()) {
    const auto qd = pb.q_row(t);
    std::vector<double> sink_d(pb.sink.begin(), pb.sink.end());
    const auto ref = moekit::detail::attention_reference(qd.data(), c.heads, c.dim, pb.kv.data(), c.entries,
                                                         pb.sources(t), pb.q_pos[size_t(t)], pb.args.softmax_scale,
                                                         c.sink ? sink_d.data() : nullptr);
    for (int h = 0; h < c.heads; ++h) {
      for (int d = 0; d < c.dim; ++d) row[size_t(d)] = moekit::bf16_to_float(got_o[size_t((t * c.heads + h) * c.dim + d)]);
      cmp.row(ref.o.data() + size_t(h) * c.dim, ref.lse[size_t(h)], row.data(), got_lse[size_t(t * c.heads + h)], c.dim);
    }
  }
  cmp.expect_ok(what);

  // The same call captured in a graph gives the same bits.
  DeviceBuffer o2(n * 2), lse2(size_t(c.tokens * c.heads) * 4);
  out.o = o2.get();
  out.lse = lse2.as<float>();
  moekit::test::run_in_graph(s, [&] {
    moekit::sparse_attention(pb.args, pb.kvd, AttentionOutput::kNormalized, out, ws.get(), ws_bytes, s);
  });
  EXPECT_EQ(o2.download<uint16_t>(n), got_o) << what << ": graph replay differs from eager";
}

TEST(SparseAttention, DecodeMixedFp8SplitKeysWithSink) {
  Case c;
  c.tokens = 3, c.topk = 700, c.window = 100, c.sink = true;
  Problem pb(c, 11);
  run_normalized(pb, "decode T=3 h=128 mixed topk 700 + win 100, sink");
}

TEST(SparseAttention, MixedEntriesAsOneRowEach) {
  Case c;
  c.tokens = 70, c.rows = true, c.topk = 300, c.window = 40, c.sink = true, c.check_every = 9;
  Problem pb(c, 16);
  run_normalized(pb, "decode T=70 h=128 mixed 640-byte rows");
}

TEST(SparseAttention, DecodeManyTokensUnsplit) {
  Case c;
  c.tokens = 150, c.topk = 512, c.window = 64, c.sink = true, c.check_every = 13;
  Problem pb(c, 12);
  run_normalized(pb, "decode T=150 h=128 mixed topk 512 + win 64");
}

TEST(SparseAttention, PrefillCausalWindowBf16) {
  Case c;
  c.tokens = 24, c.heads = 64, c.mixed = false, c.topk = 256, c.window = 128, c.requests = 3, c.causal = true;
  Problem pb(c, 13);
  run_normalized(pb, "prefill T=24 R=3 h=64 bf16 causal, no sink");
}

TEST(SparseAttention, EveryHeadDimAndOddHeads) {
  for (int dim : {64, 128, 256, 512}) {
    for (int heads : {64, 80}) {
      Case c;
      c.tokens = 5, c.heads = heads, c.dim = dim, c.mixed = false, c.topk = 200, c.window = 50, c.sink = heads == 80;
      c.entries = 700;
      Problem pb(c, uint32_t(100 + dim + heads));
      const std::string what = "bf16 dim " + std::to_string(dim) + " heads " + std::to_string(heads);
      run_normalized(pb, what.c_str());
    }
    // Enough tokens to fill the GPU: one split, the kernel writes the final o and lse itself.
    Case c;
    c.tokens = 140, c.heads = 64, c.dim = dim, c.mixed = false, c.topk = 150, c.window = 40, c.sink = true;
    c.entries = 700, c.check_every = 23;
    Problem pb(c, uint32_t(200 + dim));
    const std::string what = "bf16 dim " + std::to_string(dim) + " T=140 (unsplit)";
    run_normalized(pb, what.c_str());
  }
}

TEST(SparseAttention, OutOfRangeLengthsAndRequests) {
  Case c;
  c.tokens = 6, c.heads = 64, c.topk = 200, c.window = 60, c.requests = 3, c.sink = true;
  Problem pb(c, 17);
  pb.topk_lens = {-5, 300, 200, 17, 0, 1 << 30};
  pb.win_lens = {-1, 61, 1000};
  pb.token_req = {0, 1, 2, -1, 3, 1 << 30};  // the last three: no window
  pb.dtopk_lens = DeviceBuffer::from(pb.topk_lens);
  pb.dwin_lens = DeviceBuffer::from(pb.win_lens);
  pb.dreq = DeviceBuffer::from(pb.token_req);
  pb.args.topk_lens = pb.dtopk_lens.as<int32_t>();
  pb.args.window_lens = pb.dwin_lens.as<int32_t>();
  pb.args.token_request = pb.dreq.as<int32_t>();
  run_normalized(pb, "lengths and requests out of range");
}

TEST(SparseAttention, NothingToAttendGivesZeroAndMinusInfinity) {
  Case c;
  c.tokens = 4, c.topk = 64, c.window = 0, c.sink = true, c.ragged = false;
  Problem pb(c, 14);
  std::fill(pb.topk_idx.begin(), pb.topk_idx.end(), -1);
  pb.dtopk = DeviceBuffer::from(pb.topk_idx);
  pb.args.topk_indices = pb.dtopk.as<int32_t>();
  run_normalized(pb, "all indices -1");
  Case e;
  e.tokens = 2, e.topk = 0, e.window = 0, e.sink = true;
  Problem none(e, 15);
  run_normalized(none, "no sources at all");
}

// Partials per source against the single-source references, then attention_merge of them with a
// per-head weight logit on the window and the sink against merge_partials_reference.
void run_partials(Problem& pb, const char* what) {
  const Case& c = pb.c;
  const int64_t rows = c.tokens * c.heads;
  const size_t n = size_t(rows * c.dim);
  DeviceBuffer po(2 * n * 4), pl(size_t(2 * rows) * 4);
  ASSERT_EQ(cudaMemset(po.get(), 0xFF, po.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(pl.get(), 0xFF, pl.bytes()), cudaSuccess);
  const size_t ws_bytes = moekit::sparse_attention_workspace_bytes(pb.args, AttentionOutput::kPerSourcePartials);
  DeviceBuffer ws(std::max<size_t>(ws_bytes, 16));
  moekit::test::Stream s;
  moekit::SparseAttentionOut out;
  out.o_partial = po.as<float>();
  out.lse_partial = pl.as<float>();
  moekit::sparse_attention(pb.args, pb.kvd, AttentionOutput::kPerSourcePartials, out, ws.get(), ws_bytes, s);
  // Merge: the window weighted by a per-head logit, the sink in the denominator.
  std::vector<float> weights(size_t(2 * c.heads), 0.0f);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int h = 0; h < c.heads; ++h) weights[size_t(c.heads + h)] = normal(rng);
  DeviceBuffer dw = DeviceBuffer::from(weights), mo(n * 2), ml(size_t(rows) * 4);
  moekit::attention_merge(po.as<float>(), pl.as<float>(), 2, c.tokens, c.heads, c.dim, dw.as<float>(),
                          pb.dsink.as<float>(), mo.get(), ml.as<float>(), s);
  moekit::test::finish(s, what);
  const auto got_o = po.download<float>(2 * n);
  const auto got_l = pl.download<float>(size_t(2 * rows));
  const auto got_mo = mo.download<uint16_t>(n);
  const auto got_ml = ml.download<float>(size_t(rows));
  Compare src[2], merged;
  std::vector<double> sink_d(pb.sink.begin(), pb.sink.end());
  std::vector<double> w1(weights.begin() + c.heads, weights.end());
  std::vector<float> row(size_t(c.dim));
  for (int64_t t : pb.checked_tokens()) {
    const auto qd = pb.q_row(t);
    const auto srcs = pb.sources(t);
    std::vector<moekit::detail::AttentionRefOut> parts;
    for (int i = 0; i < 2; ++i) {
      parts.push_back(moekit::detail::attention_partial_reference(qd.data(), c.heads, c.dim, pb.kv.data(), c.entries,
                                                                  srcs[size_t(i)], pb.q_pos[size_t(t)],
                                                                  pb.args.softmax_scale));
      for (int h = 0; h < c.heads; ++h) {
        const size_t r = size_t(i * rows + t * c.heads + h);
        src[i].row(parts.back().o.data() + size_t(h) * c.dim, parts.back().lse[size_t(h)], got_o.data() + r * c.dim,
                   got_l[r], c.dim);
      }
    }
    const auto m = moekit::detail::merge_partials_reference(parts, {nullptr, w1.data()}, c.heads, c.dim, sink_d.data());
    for (int h = 0; h < c.heads; ++h) {
      for (int d = 0; d < c.dim; ++d) row[size_t(d)] = moekit::bf16_to_float(got_mo[size_t((t * c.heads + h) * c.dim + d)]);
      merged.row(m.o.data() + size_t(h) * c.dim, m.lse[size_t(h)], row.data(), got_ml[size_t(t * c.heads + h)], c.dim);
    }
  }
  src[0].expect_ok((std::string(what) + ": top-k partial").c_str());
  src[1].expect_ok((std::string(what) + ": window partial").c_str());
  merged.expect_ok((std::string(what) + ": merged, weighted, sink").c_str());
}

TEST(SparseAttention, PerSourcePartialsAndMerge) {
  Case a;
  a.tokens = 2, a.topk = 1000, a.window = 128, a.causal = true, a.requests = 1;
  Problem split(a, 21);
  run_partials(split, "partials T=2 (split keys)");
  Case b;
  b.tokens = 140, b.topk = 300, b.window = 90, b.check_every = 17;
  Problem direct(b, 22);
  run_partials(direct, "partials T=140 (one split per source)");
}

}  // namespace
