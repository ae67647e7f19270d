// The conformance suite every backend passes: for each device of each compiled backend and each
// tiny network (ResNets from keys, imported architectures built by hand), the device's output
// equals the float64 reference within the precision's bound, and a configuration the device does
// not support (an imported one where the device runs none, DeviceInfo::imported_reason) is
// reported as a status with its reason, then skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "architectures.hpp"
#include "carb/backend.hpp"
#include "reference.hpp"

namespace carb {
namespace {

constexpr std::uint64_t kSeed = 20260101;

// Bounds on testing::relative_error (max |device - reference| / max |reference|), the same for
// every backend. fp32: folded weights and the kernels' summation order differ from the reference
// by a few ulps per layer (observed: <= 1e-6 on oneDNN/avx2); the CUDA engine's fp32 is IEEE
// single precision too (FMA math, never TF32), but cuDNN may pick Winograd or FFT algorithms,
// whose error is larger than a direct convolution's and still far inside 1e-4. fp16 and bf16:
// an 11-bit and an 8-bit significand at every weight and layer output, with fp32 accumulation;
// RoundingSimulation below rounds the float64 reference that way and checks these bounds stay
// at least twice what the rounding alone costs on these networks (measured: fp16 0.14%, bf16
// 0.90%).
constexpr double kFp32Tolerance = 1e-4;
constexpr double kFp16Tolerance = 5e-3;
constexpr double kBf16Tolerance = 2e-2;

double tolerance(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return kFp32Tolerance;
    case Precision::kFp16:
      return kFp16Tolerance;
    case Precision::kBf16:
      return kBf16Tolerance;
  }
  return 0;
}

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
    "basic18_w0.25_ds_r32_b2_fp16",
    "bottleneck50_w0.25_ds_r33_b1_fp16",
    "bottleneck26_w0.1_ds_r32_b1_fp16",
};

// Hand-built imported architectures (architectures.hpp), one per CNN family: batch 1 and 2,
// fp32 and bf16, odd resolutions where their shapes allow.
struct ImportedCase {
  const char* architecture;
  int resolution;
  int batch;
  Precision precision;
};
constexpr ImportedCase kImported[] = {
    {"mobilenet_v2_block", 32, 1, Precision::kFp32},
    {"mobilenet_v2_block", 33, 2, Precision::kFp32},
    {"mobilenet_v2_block", 32, 2, Precision::kBf16},
    {"mobilenet_v3_se", 32, 1, Precision::kFp32},
    {"mobilenet_v3_se", 32, 2, Precision::kFp32},
    {"mobilenet_v3_se", 32, 2, Precision::kBf16},
    {"efficientnet_se", 32, 2, Precision::kFp32},
    {"efficientnet_se", 33, 1, Precision::kBf16},
    {"shufflenet_v2_58", 32, 1, Precision::kFp32},
    {"shufflenet_v2_58", 32, 2, Precision::kFp32},
    {"shufflenet_v2_58", 32, 2, Precision::kBf16},
    {"shufflenet_v2_32", 32, 2, Precision::kFp32},
    {"shufflenet_v2_32", 32, 1, Precision::kBf16},
    {"densenet_transition", 32, 1, Precision::kFp32},
    {"densenet_transition", 32, 2, Precision::kFp32},
    {"densenet_transition", 32, 2, Precision::kBf16},
    {"squeezenet_fire", 33, 1, Precision::kFp32},
    {"squeezenet_fire", 33, 2, Precision::kFp32},
    {"squeezenet_fire", 33, 2, Precision::kBf16},
    {"resnext_block", 16, 1, Precision::kFp32},
    {"resnext_block", 16, 2, Precision::kFp32},
    {"resnext_block", 16, 2, Precision::kBf16},
    {"dilated_convs", 32, 2, Precision::kFp32},
    {"dilated_convs", 33, 1, Precision::kFp32},
    {"pools_and_activations", 32, 1, Precision::kFp32},
    {"pools_and_activations", 32, 2, Precision::kFp32},
    {"pools_and_activations", 32, 2, Precision::kBf16},
    {"batch_norm_folded", 32, 2, Precision::kFp32},
    {"batch_norm_folded", 32, 1, Precision::kBf16},
    {"crossing_residuals", 32, 2, Precision::kFp32},
};

// Every conformance configuration with its label: a ResNet's key, an imported one's
// architecture name, resolution, batch and precision (its key only names a hash).
std::vector<std::pair<std::string, Config>> labelled_configs() {
  std::vector<std::pair<std::string, Config>> configs;
  for (const char* key : kKeys) configs.emplace_back(key, parse_key(key));
  for (const ImportedCase& c : kImported) {
    configs.emplace_back(std::string(c.architecture) + "_r" + std::to_string(c.resolution) + "_b" +
                             std::to_string(c.batch) + "_" + std::string(to_string(c.precision)),
                         testing::test_config(c.architecture, c.resolution, c.batch, c.precision));
  }
  return configs;
}

const std::vector<std::unique_ptr<Backend>>& backends() {
  static const std::vector<std::unique_ptr<Backend>> instances = make_backends();
  return instances;
}

// One (device, configuration) pair; the device belongs to backends().
struct ConformanceCase {
  const Device* device = nullptr;
  std::string label;
  Config config;
};

// How gtest and ctest show a case; gtest finds it by this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
void PrintTo(const ConformanceCase& c, std::ostream* out) {
  *out << c.device->info().id << " " << c.label << " (" << to_key(c.config) << ")";
}

std::vector<ConformanceCase> conformance_cases() {
  std::vector<ConformanceCase> cases;
  const std::vector<std::pair<std::string, Config>> configs = labelled_configs();
  for (const auto& backend : backends()) {
    for (const auto& device : backend->devices()) {
      for (const auto& [label, config] : configs) cases.push_back({device.get(), label, config});
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<ConformanceCase>& info) {
  std::string name = info.param.device->info().id + "_" + info.param.label;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class Conformance : public ::testing::TestWithParam<ConformanceCase> {};

TEST_P(Conformance, OutputMatchesFloat64Reference) {
  const Device& device = *GetParam().device;
  const Config& config = GetParam().config;
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
  ASSERT_EQ(output.size(),
            static_cast<std::size_t>(
                network.tensors[static_cast<std::size_t>(network.output)].elements()));

  // The generated parameters keep activations O(1), so the comparison is not against zeros.
  double largest = 0;
  for (double logit : reference) largest = std::max(largest, std::abs(logit));
  EXPECT_GT(largest, 1e-2);
  EXPECT_LT(largest, 1e2);

  EXPECT_LE(testing::relative_error(output, reference), tolerance(config.precision))
      << GetParam().label;
}

INSTANTIATE_TEST_SUITE_P(AllDevices, Conformance, ::testing::ValuesIn(conformance_cases()),
                         case_name);

// A backend compiled into this build but without devices here (CUDA on a machine without a GPU)
// runs no conformance case: it must say why, and the skip shows it.
TEST(ConformanceCoverage, EveryBackendRunsTheCasesOrSaysWhyNot) {
  std::string skipped;
  for (const auto& backend : backends()) {
    if (!backend->devices().empty()) {
      EXPECT_TRUE(backend->unavailable_reason().empty()) << backend->name();
      continue;
    }
    EXPECT_FALSE(backend->unavailable_reason().empty()) << backend->name();
    skipped += std::string(skipped.empty() ? "" : "; ") + std::string(backend->name()) +
               " has no device here: " + backend->unavailable_reason();
  }
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

// How much rounding to fp16 or bf16 alone costs on the conformance networks: the float64
// reference with the input, every weight and every layer output rounded to the format (round to
// nearest even, the format's exponent range), against the exact reference. An engine rounds at
// fewer points (batch norm folded before rounding, fused epilogues), so this errs high.
double round_to_significand(double value, int bits, int min_exponent) {
  if (value == 0 || !std::isfinite(value)) return value;
  int exponent = 0;
  std::frexp(value, &exponent);
  const double scale = std::ldexp(1.0, bits - std::max(exponent, min_exponent));
  return std::nearbyint(value * scale) / scale;
}

TEST(RoundingSimulation, ToleranceBoundsAreAtLeastTwiceWhatRoundingAloneCosts) {
  struct Format {
    Precision precision;
    int bits;          // significand bits, the implicit one included
    int min_exponent;  // frexp exponent of the smallest normal number
  };
  for (const Format& format :
       {Format{Precision::kFp16, 11, -13}, Format{Precision::kBf16, 8, -125}}) {
    double worst = 0;
    for (auto [label, config] : labelled_configs()) {
      if (config.precision != format.precision) continue;
      config.precision = Precision::kFp32;  // the same network; the simulation rounds
      const Network network = build_network(config);
      const std::vector<float> input = generate_input(network, kSeed);
      const std::vector<double> exact = testing::reference_forward(network, kSeed, input);
      const auto round = [&format](double value) {
        return round_to_significand(value, format.bits, format.min_exponent);
      };
      const std::vector<double> rounded = testing::reference_forward(network, kSeed, input, round);
      const std::vector<float> as_float(rounded.begin(), rounded.end());
      const double error = testing::relative_error(as_float, exact);
      EXPECT_GT(error, 0) << label;  // the rounding does happen
      worst = std::max(worst, error);
    }
    EXPECT_LE(2 * worst, tolerance(format.precision)) << to_string(format.precision);
    std::cout << to_string(format.precision) << ": rounding alone costs up to " << worst
              << " (bound " << tolerance(format.precision) << ")\n";
  }
}

}  // namespace
}  // namespace carb
