// The conformance suite every backend passes: for each device of each compiled backend and each
// tiny network, the device's output equals the float64 reference within the precision's bound,
// and a configuration the device does not support is reported as a status (then skipped).
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "carb/backend.hpp"
#include "reference.hpp"

namespace carb {
namespace {

constexpr std::uint64_t kSeed = 20260101;

// Bounds on testing::relative_error (max |device - reference| / max |reference|). fp32: folded
// weights and the kernels' summation order differ from the reference by a few ulps per layer
// (observed: <= 1e-6 on oneDNN/avx2). bf16: an 8-bit significand at every weight and layer
// output; a float64 simulation of that rounding gives 0.4-0.9% on the bf16 networks below.
constexpr double kFp32Tolerance = 1e-4;
constexpr double kBf16Tolerance = 2e-2;

// Tiny networks covering both block types, with and without early downsampling, batch 1 and 2,
// odd resolutions (uneven padding), odd channel counts (width 0.1), three custom stages.
constexpr const char* kKeys[] = {
    "basic10_w0.25_ds_r32_b1_fp32",
    "basic18_w0.25_ds_r32_b2_fp32",
    "basic18_w0.25_nods_r32_b1_fp32",
    "basic18_w0.25_ds_r33_b1_fp32",
    "basic8s1.1.1_c8.16.32_w1_nods_r16_b2_fp32_k10",
    "bottleneck50_w0.25_ds_r32_b1_fp32",
    "bottleneck26_w0.25_nods_r16_b2_fp32",
    "bottleneck26_w0.25_ds_r33_b2_fp32_k10",
    "bottleneck26_w0.1_ds_r32_b1_fp32",
    "basic18_w0.25_ds_r32_b2_bf16",
    "bottleneck50_w0.25_ds_r33_b1_bf16",
    "basic8s1.1.1_c8.16.32_w1_nods_r16_b2_fp16_k10",
};

const std::vector<std::unique_ptr<Backend>>& backends() {
  static const std::vector<std::unique_ptr<Backend>> instances = make_backends();
  return instances;
}

// One (device, configuration) pair; the device belongs to backends().
struct ConformanceCase {
  const Device* device = nullptr;
  std::string key;
};

// How gtest and ctest show a case; gtest finds it by this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
void PrintTo(const ConformanceCase& c, std::ostream* out) {
  *out << c.device->info().id << " " << c.key;
}

std::vector<ConformanceCase> conformance_cases() {
  std::vector<ConformanceCase> cases;
  for (const auto& backend : backends()) {
    for (const auto& device : backend->devices()) {
      for (const char* key : kKeys) cases.push_back({device.get(), key});
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<ConformanceCase>& info) {
  std::string name = info.param.device->info().id + "_" + info.param.key;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class Conformance : public ::testing::TestWithParam<ConformanceCase> {};

TEST_P(Conformance, OutputMatchesFloat64Reference) {
  const Device& device = *GetParam().device;
  const Config config = parse_key(GetParam().key);
  const Support support = device.supports(config);
  if (!support.supported) {
    EXPECT_FALSE(support.reason.empty());
    GTEST_SKIP() << device.info().id << ": " << support.to_string();
  }

  const auto session = device.prepare(config, kSeed);
  session->run();
  session->sync();
  const std::vector<float> output = session->read_output();

  const Network& network = session->network();
  const std::vector<double> reference =
      testing::reference_forward(network, kSeed, generate_input(network, kSeed));
  ASSERT_EQ(output.size(), reference.size());
  ASSERT_EQ(output.size(), static_cast<std::size_t>(config.batch * config.classes));

  // The generated parameters keep activations O(1), so the comparison is not against zeros.
  double largest = 0;
  for (double logit : reference) largest = std::max(largest, std::abs(logit));
  EXPECT_GT(largest, 1e-2);
  EXPECT_LT(largest, 1e2);

  const double tolerance = config.precision == Precision::kBf16 ? kBf16Tolerance : kFp32Tolerance;
  EXPECT_LE(testing::relative_error(output, reference), tolerance) << GetParam().key;
}

INSTANTIATE_TEST_SUITE_P(AllDevices, Conformance, ::testing::ValuesIn(conformance_cases()),
                         case_name);

}  // namespace
}  // namespace carb
