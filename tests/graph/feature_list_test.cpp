// kScalarFeatures is the one list of scalar analytic features: every place that names them
// (feature_value, the export, `carb space features`, the docs) follows it; and
// for_each_feature_column and for_each_layer_column are the one definition of a feature row and
// a layer row (the command line's tables and the Python module's frames).
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "carb/graph.hpp"

namespace carb {
namespace {

TEST(FeatureList, NamesAreUniqueAndEachHasOneMember) {
  std::set<std::string_view> names;
  for (const ScalarFeature& feature : kScalarFeatures) {
    EXPECT_FALSE(feature.name.empty());
    EXPECT_TRUE(names.insert(feature.name).second) << feature.name;
    EXPECT_NE(feature.integer == nullptr, feature.real == nullptr) << feature.name;
  }
}

TEST(FeatureList, FeatureValueReadsTheListedMember) {
  // ResNet-18 at 224 (timm: 11,689,512 parameters, 1.814 GMACs).
  const Features features =
      compute_features(build_network(parse_key("basic18_w1_ds_r224_b1_fp32")));
  EXPECT_EQ(feature_value(features, "params"), 11689512.0);
  EXPECT_EQ(feature_value(features, "macs"), 1814073344.0);
  EXPECT_EQ(feature_value(features, "flops"), 2.0 * 1814073344.0);
  EXPECT_EQ(feature_value(features, "arithmetic_intensity"), features.arithmetic_intensity);
  for (const ScalarFeature& feature : kScalarFeatures) {
    const double member = feature.integer != nullptr
                              ? static_cast<double>(features.*feature.integer)
                              : features.*feature.real;
    EXPECT_EQ(feature_value(features, feature.name), member) << feature.name;
    EXPECT_GT(member, 0) << feature.name;
  }
  EXPECT_FALSE(feature_value(features, "depth").has_value());
  EXPECT_FALSE(feature_value(features, "").has_value());
}

TEST(FeatureList, DocsDescribeEveryFeature) {
  std::ifstream in(std::string(CARB_SOURCE_DIR) + "/docs/features.md");
  ASSERT_TRUE(in) << "docs/features.md";
  std::stringstream text;
  text << in.rdbuf();
  for (const ScalarFeature& feature : kScalarFeatures) {
    EXPECT_NE(text.str().find("| `" + std::string(feature.name) + "` |"), std::string::npos)
        << "docs/features.md has no table row for " << feature.name;
  }
}

// A feature or layer row's cells, read through the visitor as a front end reads them.
using Value = std::variant<std::string, BlockType, Precision, int, std::int64_t, double, bool>;
struct Row {
  std::vector<std::string> names;
  std::vector<Value> values;
  void add(std::string_view name, Value value) {
    names.emplace_back(name);
    values.push_back(std::move(value));
  }
  // A ResNet knob: its value, or the string "none" where an imported architecture lacks it.
  template <typename T>
  void add(std::string_view name, std::optional<T> value) {
    add(name, value ? Value(*value) : Value(std::string("none")));
  }
  template <typename T>
  T at(std::string_view name) const {
    for (std::size_t c = 0; c < names.size(); ++c) {
      if (names[c] == name) return std::get<T>(values[c]);
    }
    ADD_FAILURE() << "no column " << name;
    return T{};
  }
};

Row feature_row(const Config& config, const Features& features,
                const FeatureColumnOptions& options) {
  Row row;
  for_each_feature_column(config, features, options, [&](std::string_view name, const auto& value) {
    row.add(name, value());
  });
  return row;
}

TEST(FeatureColumns, AreTheKnobsThenTheFeaturesInOneOrder) {
  const RooflineDevice device = parse_roofline_device("67:3350");
  // Named from a default configuration, which no network is built from: nothing is computed.
  const std::vector<std::string> all = feature_column_names({.roofline = &device});
  std::vector<std::string> expected = {"key",        "architecture", "block",
                                       "depth",      "width",        "early_downsample",
                                       "resolution", "batch",        "precision"};
  for (const ScalarFeature& feature : kScalarFeatures) expected.emplace_back(feature.name);
  expected.insert(expected.end(), {"stage_blocks",
                                   "stage_widths",
                                   "classes",
                                   "widest_channels",
                                   "kernel_launches",
                                   "conv_layers",
                                   "batch_norm_layers",
                                   "relu_layers",
                                   "add_layers",
                                   "max_pool_layers",
                                   "global_avg_pool_layers",
                                   "fc_layers",
                                   "avg_pool_layers",
                                   "clip_layers",
                                   "sigmoid_layers",
                                   "hard_sigmoid_layers",
                                   "hard_swish_layers",
                                   "swish_layers",
                                   "mul_layers",
                                   "concat_layers",
                                   "channel_shuffle_layers",
                                   "slice_layers",
                                   "roofline_ms"});
  EXPECT_EQ(all, expected);
  // Without text or roofline: the same columns less those; knobs only: the first nine.
  std::vector<std::string> numbers;
  for (const std::string& name : expected) {
    if (name != "key" && name != "architecture" && name != "stage_blocks" &&
        name != "stage_widths" && name != "roofline_ms") {
      numbers.push_back(name);
    }
  }
  EXPECT_EQ(feature_column_names({.text = false}), numbers);
  EXPECT_EQ(feature_column_names({.features = false}),
            std::vector<std::string>(expected.begin(), expected.begin() + 9));
}

TEST(FeatureColumns, HoldTheConfigurationsValues) {
  const Config config = parse_key("bottleneck26_w0.5_nods_r96_b8_fp16");
  const Network network = build_network(config);
  const Features features = compute_features(network);
  const RooflineDevice device = parse_roofline_device("67:3350");
  const Row row = feature_row(config, features, {.roofline = &device});
  EXPECT_EQ(row.at<std::string>("key"), "bottleneck26_w0.5_nods_r96_b8_fp16");
  EXPECT_EQ(row.at<std::string>("architecture"), "none");  // a ResNet has no name: nullopt
  EXPECT_EQ(row.at<BlockType>("block"), BlockType::kBottleneck);
  EXPECT_EQ(row.at<int>("depth"), 26);
  EXPECT_EQ(row.at<double>("width"), 0.5);
  EXPECT_FALSE(row.at<bool>("early_downsample"));
  EXPECT_EQ(row.at<int>("resolution"), 96);
  EXPECT_EQ(row.at<int>("batch"), 8);
  EXPECT_EQ(row.at<Precision>("precision"), Precision::kFp16);
  for (const ScalarFeature& feature : kScalarFeatures) {
    if (feature.integer != nullptr) {
      EXPECT_EQ(row.at<std::int64_t>(feature.name), features.*feature.integer);
    } else {
      EXPECT_EQ(row.at<double>(feature.name), features.*feature.real);
    }
  }
  EXPECT_EQ(row.at<std::string>("stage_blocks"), dotted_list(config.stage_blocks));
  EXPECT_EQ(row.at<std::string>("stage_widths"), "64.128.256.512");
  EXPECT_EQ(row.at<int>("classes"), config.classes);
  EXPECT_EQ(row.at<int>("widest_channels"), features.widest_channels);
  EXPECT_EQ(row.at<int>("kernel_launches"), features.kernel_launches);
  EXPECT_EQ(row.at<int>("conv_layers"), features.layer_counts[LayerKind::kConv]);
  EXPECT_EQ(row.at<int>("fc_layers"), 1);
  EXPECT_EQ(row.at<double>("roofline_ms"), roofline_ms(network, device));
}

TEST(FeatureColumns, OfAnImportedArchitectureNameItAndLeaveTheResNetKnobsEmpty) {
  Architecture architecture =
      import_model(std::string(CARB_SOURCE_DIR) + "/tests/graph/data/tiny_cnn.onnx");
  const Config config = imported_config(architecture, 32, 2, Precision::kFp32);
  register_architecture(std::move(architecture));
  const Network network = build_network(config);
  const Features features = compute_features(network);
  const Row row = feature_row(config, features, {});
  EXPECT_EQ(row.at<std::string>("key"), to_key(config));
  EXPECT_EQ(row.at<std::string>("architecture"), "tiny_cnn");
  for (const char* knob : {"block", "width", "early_downsample"}) {
    EXPECT_EQ(row.at<std::string>(knob), "none") << knob;
  }
  // Its depth counts its convs and fcs; its classes are its output's channels.
  int weighted = 0;
  for (const Layer& layer : network.layers) {
    weighted += layer.kind == LayerKind::kConv || layer.kind == LayerKind::kFullyConnected;
  }
  EXPECT_GT(weighted, 0);
  EXPECT_EQ(row.at<int>("depth"), weighted);
  EXPECT_EQ(row.at<int>("classes"), network.tensors[static_cast<std::size_t>(network.output)].c);
  EXPECT_EQ(row.at<std::string>("stage_blocks"), "");
  EXPECT_EQ(row.at<std::int64_t>("macs"), features.macs);
}

TEST(LayerColumns, AreTheLayerTablesRow) {
  const Network network = build_network(parse_key("basic18_w1_ds_r224_b1_fp32"));
  Row first;
  for_each_layer_column(
      network, network.layers.front(),
      [&](std::string_view name, const auto& value) { first.add(name, value()); });
  EXPECT_EQ(first.names,
            (std::vector<std::string>{"layer", "kind", "input_shape", "output_shape", "kernel",
                                      "stride", "padding", "params", "macs", "in_place"}));
  EXPECT_EQ(first.at<std::string>("layer"), "conv1");
  EXPECT_EQ(first.at<std::string>("kind"), "conv");
  EXPECT_EQ(first.at<std::string>("input_shape"), "1x3x224x224");
  EXPECT_EQ(first.at<std::string>("output_shape"), "1x64x112x112");
  EXPECT_EQ(first.at<int>("kernel"), 7);
  EXPECT_EQ(first.at<int>("stride"), 2);
  EXPECT_EQ(first.at<int>("padding"), 3);
  EXPECT_EQ(first.at<std::int64_t>("params"), 3 * 64 * 7 * 7);
  EXPECT_EQ(first.at<std::int64_t>("macs"), network.layers.front().macs);
  EXPECT_FALSE(first.at<bool>("in_place"));
  EXPECT_EQ(layer_count_column(LayerKind::kGlobalAvgPool), "global_avg_pool_layers");
}

}  // namespace
}  // namespace carb
