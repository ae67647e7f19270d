// SHA-256 against FIPS 180-4's test vectors, and the measurement key's sensitivity to each of
// its inputs and insensitivity to JSON spelling.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/store.hpp"

namespace carb {
namespace {

TEST(Sha256, MatchesStandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding spills into a second block.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PadsCorrectlyAroundBlockBoundaries) {
  // Expected digests from Python's hashlib. 55 bytes leave room for the length in the last
  // block; 56..63 push it into an extra block; 64 and 128 are whole blocks.
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"},
      {119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
      {120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98"},
      {128, "24da1b81d0b16df6428eee73c69fcb2a93c76bc6df706f0c6670fe6bfe800464"},
  };
  for (const auto& [length, digest] : cases) {
    EXPECT_EQ(sha256_hex(std::string(length, 'x')), digest) << length << " bytes";
  }
}

constexpr const char* kConfig = "basic18_w1_ds_r224_b1_fp32";
constexpr const char* kDevice = "cuda:GPU-0f3c:driver=550.54";
constexpr const char* kVersions = "carb 0.1.0; cuDNN 9.1";
constexpr const char* kProtocol = R"({"warmup":10,"min_samples":10})";

TEST(MeasurementKey, IsStableHexOfAllFourInputs) {
  const std::string key = measurement_key(kConfig, kDevice, kVersions, kProtocol);
  ASSERT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  // The documented encoding: each field as <length>:<bytes>, protocol in canonical form.
  EXPECT_EQ(key, sha256_hex("26:basic18_w1_ds_r224_b1_fp32"
                            "27:cuda:GPU-0f3c:driver=550.54"
                            "21:carb 0.1.0; cuDNN 9.1"
                            "30:{\"min_samples\":10,\"warmup\":10}"));
  EXPECT_NE(key, measurement_key("basic18_w1_ds_r224_b2_fp32", kDevice, kVersions, kProtocol));
  EXPECT_NE(key, measurement_key(kConfig, "cuda:GPU-other", kVersions, kProtocol));
  EXPECT_NE(key, measurement_key(kConfig, kDevice, "carb 0.1.1; cuDNN 9.1", kProtocol));
  EXPECT_NE(key, measurement_key(kConfig, kDevice, kVersions, R"({"warmup":20,"min_samples":10})"));
}

TEST(MeasurementKey, IgnoresJsonSpellingButNotFieldBoundaries) {
  EXPECT_EQ(
      measurement_key(kConfig, kDevice, kVersions, kProtocol),
      measurement_key(kConfig, kDevice, kVersions, "{ \"min_samples\" : 10,\n  \"warmup\": 10 }"));
  // Without length prefixes these two would hash the same bytes.
  EXPECT_NE(measurement_key("ab", "c", kVersions, kProtocol),
            measurement_key("a", "bc", kVersions, kProtocol));
}

TEST(MeasurementKey, RejectsProtocolThatIsNotJson) {
  try {
    measurement_key(kConfig, kDevice, kVersions, "{warmup: 10");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(error.what()).find("protocol is not valid JSON"), std::string::npos);
  }
}

TEST(MeasurementStatus, NamesRoundTripAndFinalityFollowsTheDesign) {
  for (auto status :
       {MeasurementStatus::kOk, MeasurementStatus::kUnsupported, MeasurementStatus::kOom,
        MeasurementStatus::kTimeout, MeasurementStatus::kCrashed, MeasurementStatus::kError}) {
    EXPECT_EQ(parse_measurement_status(to_string(status)), status);
  }
  EXPECT_EQ(to_string(MeasurementStatus::kOom), "oom");
  EXPECT_FALSE(parse_measurement_status("OK").has_value());
  EXPECT_TRUE(is_final(MeasurementStatus::kOk));
  EXPECT_TRUE(is_final(MeasurementStatus::kUnsupported));
  EXPECT_FALSE(is_final(MeasurementStatus::kTimeout));
  EXPECT_FALSE(is_final(MeasurementStatus::kCrashed));
}

}  // namespace
}  // namespace carb
