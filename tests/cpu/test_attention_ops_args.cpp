// DeepSeek-V4 attention's cache writer and RoPE (include/moekit/attention.h) reject bad arguments
// before launching anything (no GPU needed), and do nothing for no tokens.
#include <gtest/gtest.h>

#include <cstdint>

#include "moekit/attention.h"
#include "moekit/error.h"

namespace {

using moekit::ErrorCode;
using moekit::MixedKvCache;

// Fake device addresses: never dereferenced, every call below throws (or returns) first.
void* fake(uintptr_t a) { return reinterpret_cast<void*>(a); }

ErrorCode code_of(void (*call)()) {
  try {
    call();
  } catch (const moekit::Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;  // "did not throw"
}

TEST(AttentionOpsArgs, CacheWriterRejectsBadArguments) {
  static const MixedKvCache cache{static_cast<uint8_t*>(fake(0x10000)), static_cast<float*>(fake(0x20000)),
                                  fake(0x30000), 100};
  static const int32_t* slots = static_cast<const int32_t*>(fake(0x40000));
  EXPECT_EQ(code_of([] { moekit::mixed_kv_cache_write(fake(0x50000), -1, 512, slots, cache, nullptr); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { moekit::mixed_kv_cache_write(nullptr, 4, 512, slots, cache, nullptr); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { moekit::mixed_kv_cache_write(fake(0x50000), 4, 504, slots, cache, nullptr); }),
            ErrorCode::kInvalidArgument);  // ldk < 512
  EXPECT_EQ(code_of([] { moekit::mixed_kv_cache_write(fake(0x50008), 4, 512, slots, cache, nullptr); }),
            ErrorCode::kMisaligned);
  EXPECT_EQ(code_of([] {
              MixedKvCache bad = cache;
              bad.rope = fake(0x30008);
              moekit::mixed_kv_cache_write(fake(0x50000), 4, 512, slots, bad, nullptr);
            }),
            ErrorCode::kMisaligned);
  EXPECT_EQ(code_of([] {
              MixedKvCache bad = cache;
              bad.nope_stride = 440;  // shorter than an entry's codes
              moekit::mixed_kv_cache_write(fake(0x50000), 4, 512, slots, bad, nullptr);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] {
              MixedKvCache bad = cache;
              bad.scales_stride = 30;  // not a multiple of 4
              moekit::mixed_kv_cache_write(fake(0x50000), 4, 512, slots, bad, nullptr);
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_NO_THROW(moekit::mixed_kv_cache_write(nullptr, 0, 512, nullptr, cache, nullptr));  // no tokens: nothing
}

TEST(AttentionOpsArgs, RopeRejectsBadArguments) {
  static const int32_t* pos = static_cast<const int32_t*>(fake(0x40000));
  static const float* tab = static_cast<const float*>(fake(0x60000));
  EXPECT_EQ(code_of([] { moekit::rope_inplace(fake(0x50000), 3, 0, 512, pos, tab, tab, 10, false, nullptr); }),
            ErrorCode::kInvalidArgument);  // heads
  EXPECT_EQ(code_of([] { moekit::rope_inplace(fake(0x50000), 3, 4, 32, pos, tab, tab, 10, false, nullptr); }),
            ErrorCode::kInvalidArgument);  // dim < 64
  EXPECT_EQ(code_of([] { moekit::rope_inplace(fake(0x50000), 3, 4, 516, pos, tab, tab, 10, false, nullptr); }),
            ErrorCode::kInvalidArgument);  // dim % 8
  EXPECT_EQ(code_of([] { moekit::rope_inplace(fake(0x50000), 3, 4, 512, nullptr, tab, tab, 10, false, nullptr); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { moekit::rope_inplace(fake(0x50004), 3, 4, 512, pos, tab, tab, 10, true, nullptr); }),
            ErrorCode::kMisaligned);
  EXPECT_NO_THROW(moekit::rope_inplace(nullptr, 0, 4, 512, nullptr, nullptr, nullptr, 0, false, nullptr));
}

}  // namespace
