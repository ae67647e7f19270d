// carb's analytic features against timm's independently computed counts (tests/graph/data).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "carb/graph.hpp"

namespace carb {
namespace {

struct OracleRow {
  std::string model;
  int resolution = 0;
  double params_millions = 0;
  double gmacs = 0;
  double activations_millions = 0;
};

std::vector<OracleRow> read_oracle() {
  std::ifstream file(std::string(CARB_SOURCE_DIR) + "/tests/graph/data/timm-resnet.csv");
  EXPECT_TRUE(file.good());
  std::vector<OracleRow> rows;
  std::string line;
  std::getline(file, line);  // header
  while (std::getline(file, line)) {
    std::stringstream fields(line);
    OracleRow row;
    std::string cell;
    std::getline(fields, row.model, ',');
    std::getline(fields, cell, ',');
    row.resolution = std::stoi(cell);
    std::getline(fields, cell, ',');
    row.params_millions = std::stod(cell);
    std::getline(fields, cell, ',');
    row.gmacs = std::stod(cell);
    std::getline(fields, cell, ',');
    row.activations_millions = std::stod(cell);
    rows.push_back(row);
  }
  return rows;
}

std::string key_of(const std::string& model, int resolution) {
  static const std::map<std::string, std::string> structures = {
      {"resnet18", "basic18"},       {"resnet34", "basic34"},        {"resnet26", "bottleneck26"},
      {"resnet50", "bottleneck50"},  {"resnet101", "bottleneck101"}, {"resnet152", "bottleneck152"},
      {"resnet200", "bottleneck200"}};
  return structures.at(model) + "_w1_ds_r" + std::to_string(resolution) + "_b1_fp32";
}

TEST(Oracle, MatchesTimmParamsMacsAndActivations) {
  const auto rows = read_oracle();
  ASSERT_EQ(rows.size(), 22u);
  for (const OracleRow& row : rows) {
    const std::string key = key_of(row.model, row.resolution);
    const Features features = compute_features(build_network(parse_key(key)));
    // timm prints 2 decimals: allow the rounding plus the tolerances.
    EXPECT_NEAR(features.params / 1e6, row.params_millions, row.params_millions * 0.005 + 0.005)
        << key;
    EXPECT_NEAR(features.macs / 1e9, row.gmacs, row.gmacs * 0.01 + 0.005) << key;
    EXPECT_NEAR(features.activation_bytes / 4 / 1e6, row.activations_millions,
                row.activations_millions * 0.01 + 0.005)
        << key;
  }
}

TEST(Oracle, TorchvisionParameterCountsAreExact) {
  // torchvision.models.resnetNN().parameters() summed.
  const std::map<std::string, std::int64_t> expected = {
      {"basic18_w1_ds_r224_b1_fp32", 11689512},
      {"basic34_w1_ds_r224_b1_fp32", 21797672},
      {"bottleneck50_w1_ds_r224_b1_fp32", 25557032},
      {"bottleneck101_w1_ds_r224_b1_fp32", 44549160},
      {"bottleneck152_w1_ds_r224_b1_fp32", 60192808}};
  for (const auto& [key, params] : expected) {
    EXPECT_EQ(compute_features(build_network(parse_key(key))).params, params) << key;
  }
}

}  // namespace
}  // namespace carb
