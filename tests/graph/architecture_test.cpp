// Imported architectures built by hand (no model file): keys, content hashes, JSON, the
// registry, and their networks' shapes, parameters, MACs and layer classes at any resolution.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "carb/graph.hpp"

namespace carb {
namespace {

Layer layer_of(LayerKind kind, std::vector<int> inputs) {
  Layer layer;
  layer.kind = kind;
  layer.inputs = std::move(inputs);
  return layer;
}

Layer conv(int input, int channels, int kernel, int stride, int padding, int groups = 1,
           bool bias = false) {
  Layer layer = layer_of(LayerKind::kConv, {input});
  layer.channels = channels;
  layer.kernel = kernel;
  layer.stride = stride;
  layer.padding = padding;
  layer.padding_after = padding;
  layer.groups = groups;
  layer.bias = bias;
  return layer;
}

// A small network with one of every kind of layer, MobileNet- and ShuffleNet-like:
//  t1 conv 3->16 3x3/2 p1     t2 bn        t3 clip(0, 6)
//  t4 depthwise 3x3/1 p1 (16 groups)       t5 hard swish
//  t6 gap   t7 conv 1x1 16->4 +bias  t8 relu  t9 conv 1x1 4->16 +bias  t10 hard sigmoid
//  t11 mul(t5, t10)   t12 conv 1x1 16->16   t13 add(t12, t3)   t14 swish
//  t15 concat(t14, t13)   t16 channel shuffle (2 groups)   t17 slice 8..24 of 32
//  t18 max pool 3x3/2 p0 ceil   t19 avg pool 2x2/2   t20 sigmoid   t21 fc 16 x H x W -> 10
Architecture tiny_architecture() {
  Architecture a;
  a.name = "tiny";
  a.source = "by hand";
  a.input_channels = 3;
  a.native_resolution = 32;
  a.layers.push_back(conv(0, 16, 3, 2, 1));
  a.layers.push_back(layer_of(LayerKind::kBatchNorm, {1}));
  Layer clip = layer_of(LayerKind::kClip, {2});
  clip.lower = 0;
  clip.upper = 6;
  a.layers.push_back(clip);
  a.layers.push_back(conv(3, 16, 3, 1, 1, 16));
  a.layers.push_back(layer_of(LayerKind::kHardSwish, {4}));
  a.layers.push_back(layer_of(LayerKind::kGlobalAvgPool, {5}));
  a.layers.push_back(conv(6, 4, 1, 1, 0, 1, true));
  a.layers.push_back(layer_of(LayerKind::kRelu, {7}));
  a.layers.push_back(conv(8, 16, 1, 1, 0, 1, true));
  Layer hard_sigmoid = layer_of(LayerKind::kHardSigmoid, {9});
  hard_sigmoid.alpha = 1.0f / 6;
  hard_sigmoid.beta = 0.5f;
  a.layers.push_back(hard_sigmoid);
  a.layers.push_back(layer_of(LayerKind::kMul, {5, 10}));
  a.layers.push_back(conv(11, 16, 1, 1, 0));
  a.layers.push_back(layer_of(LayerKind::kAdd, {12, 3}));
  a.layers.push_back(layer_of(LayerKind::kSwish, {13}));
  a.layers.push_back(layer_of(LayerKind::kConcat, {14, 13}));
  Layer shuffle = layer_of(LayerKind::kChannelShuffle, {15});
  shuffle.groups = 2;
  a.layers.push_back(shuffle);
  Layer slice = layer_of(LayerKind::kSlice, {16});
  slice.begin = 8;
  slice.channels = 16;
  a.layers.push_back(slice);
  Layer max_pool = layer_of(LayerKind::kMaxPool, {17});
  max_pool.kernel = 3;
  max_pool.stride = 2;
  max_pool.ceil_mode = true;
  a.layers.push_back(max_pool);
  Layer avg_pool = layer_of(LayerKind::kAvgPool, {18});
  avg_pool.kernel = 2;
  avg_pool.stride = 2;
  a.layers.push_back(avg_pool);
  a.layers.push_back(layer_of(LayerKind::kSigmoid, {19}));
  Layer fc = layer_of(LayerKind::kFullyConnected, {20});
  fc.channels = 10;
  fc.bias = true;
  fc.fc_inputs = 16 * 4 * 4;  // at resolution 32: 16 -> max pool (ceil) 8 -> avg pool 4
  a.layers.push_back(fc);
  a.output = 21;
  return a;
}

TEST(ImportedKey, PrintsAndParsesBack) {
  const Config config = parse_key("graph-0123456789abcdef_r96_b4_bf16");
  EXPECT_TRUE(config.imported());
  EXPECT_EQ(config.architecture, "0123456789abcdef");
  EXPECT_EQ(config.resolution, 96);
  EXPECT_EQ(config.batch, 4);
  EXPECT_EQ(config.precision, Precision::kBf16);
  EXPECT_EQ(config.depth(), 0);
  EXPECT_EQ(to_key(config), "graph-0123456789abcdef_r96_b4_bf16");
  EXPECT_EQ(parse_key(to_key(config)), config);
  EXPECT_NE(parse_key("graph-0123456789abcdef_r96_b4_fp32"), config);
}

TEST(ImportedKey, BadKeysAreInputErrors) {
  for (const std::string key :
       {"graph-0123_r96_b4_fp32", "graph-0123456789ABCDEF_r96_b4_fp32",
        "graph-0123456789abcdef_r0_b4_fp32", "graph-0123456789abcdef_r96_b0_fp32",
        "graph-0123456789abcdef_r96_b4", "graph-0123456789abcdef_r96_b4_fp32_k10",
        "graph-0123456789abcdeg_r96_b4_fp32"}) {
    try {
      (void)parse_key(key);
      ADD_FAILURE() << key << " parsed";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput) << key;
      EXPECT_NE(std::string(error.what()).find(key), std::string::npos) << error.what();
    }
  }
}

TEST(Architecture, HashIsOfTheGraphNotItsNames) {
  const Architecture a = tiny_architecture();
  const std::string hash = architecture_hash(a);
  EXPECT_EQ(hash.size(), 16u);
  Architecture renamed = a;
  renamed.name = "other";
  renamed.source = "elsewhere";
  renamed.native_resolution = 64;
  renamed.layers[3].name = "/features/0/Conv";
  EXPECT_EQ(architecture_hash(renamed), hash);
  Architecture changed = a;
  changed.layers[3].kernel = 5;
  changed.layers[3].padding = changed.layers[3].padding_after = 2;
  EXPECT_NE(architecture_hash(changed), hash);
  Architecture clipped = a;
  clipped.layers[2].upper = 6.5f;
  EXPECT_NE(architecture_hash(clipped), hash);
}

TEST(Architecture, JsonRoundTripsAndBadJsonIsAnInputError) {
  Architecture a = tiny_architecture();
  a.hash = architecture_hash(a);
  const nlohmann::json j = architecture_to_json(a);
  const Architecture back = architecture_from_json(j, "arch.json");
  EXPECT_EQ(back.hash, a.hash);
  EXPECT_EQ(back.name, "tiny");
  EXPECT_EQ(back.native_resolution, 32);
  ASSERT_EQ(back.layers.size(), a.layers.size());
  EXPECT_EQ(architecture_to_json(back), j);

  nlohmann::json wrong_hash = j;
  wrong_hash["hash"] = "0000000000000000";
  nlohmann::json bad_kind = j;
  bad_kind["layers"][0]["kind"] = "softmax";
  nlohmann::json bad_padding = j;
  bad_padding["layers"][0]["padding"] = 3;
  for (const nlohmann::json& bad : {wrong_hash, bad_kind, bad_padding, nlohmann::json::array(),
                                    nlohmann::json{{"format", "carb-architecture"}}}) {
    try {
      (void)architecture_from_json(bad, "arch.json");
      ADD_FAILURE() << bad.dump().substr(0, 80) << " was read";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput);
      EXPECT_EQ(std::string(error.what()).rfind("arch.json: not a carb architecture", 0), 0u)
          << error.what();
    }
  }
}

TEST(Architecture, NetworkShapesParamsAndMacsByHand) {
  const Architecture a = tiny_architecture();
  const std::string hash = register_architecture(a);
  EXPECT_EQ(register_architecture(a), hash);  // idempotent
  ASSERT_NE(find_architecture(hash), nullptr);
  const Config config = imported_config(*find_architecture(hash), 32, 2, Precision::kFp32);
  EXPECT_EQ(to_key(config), "graph-" + hash + "_r32_b2_fp32");
  const Network network = build_network(config);
  ASSERT_EQ(network.layers.size(), 21u);
  const auto shape = [&](int tensor) { return network.tensors[static_cast<std::size_t>(tensor)]; };
  EXPECT_EQ(shape(1), (Shape{2, 16, 16, 16}));
  EXPECT_EQ(shape(6), (Shape{2, 16, 1, 1}));
  EXPECT_EQ(shape(11), (Shape{2, 16, 16, 16}));  // the broadcast product
  EXPECT_EQ(shape(15), (Shape{2, 32, 16, 16}));
  EXPECT_EQ(shape(17), (Shape{2, 16, 16, 16}));
  // Max pool 3x3/2 over 16 with ceil: (16 - 3) / 2 = 6.5 -> 7 + 1 = 8.
  EXPECT_EQ(shape(18), (Shape{2, 16, 8, 8}));
  EXPECT_EQ(shape(19), (Shape{2, 16, 4, 4}));
  EXPECT_EQ(shape(21), (Shape{2, 10, 1, 1}));

  const auto layer = [&](int index) { return network.layers[static_cast<std::size_t>(index)]; };
  EXPECT_EQ(layer(0).params, 16 * 3 * 9);
  EXPECT_EQ(layer(0).macs, 2LL * 16 * 16 * 16 * 3 * 9);
  EXPECT_EQ(layer(1).params, 32);          // batch norm: scale and shift
  EXPECT_EQ(layer(3).params, 16 * 1 * 9);  // depthwise: one input channel per group
  EXPECT_EQ(layer(3).macs, 2LL * 16 * 16 * 16 * 9);
  EXPECT_EQ(layer(6).params, 4 * 16 + 4);  // with its bias
  EXPECT_EQ(layer(20).params, 10 * 256 + 10);
  EXPECT_EQ(layer(20).macs, 2LL * 256 * 10);
  const Features features = compute_features(network);
  std::int64_t params = 0;
  for (const Layer& l : network.layers) params += l.params;
  EXPECT_EQ(features.params, params);
  EXPECT_EQ(features.output_channels, 10);
  EXPECT_EQ(features.kernel_launches, 21);

  // Elementwise layers write over their first input when nothing else reads it: the batch norm,
  // the clip, the hard swish, the relu, the hard sigmoid and the add do; the mul does not (the
  // squeeze's pooling reads its first input too), nor does the swish (the concat reads its input).
  for (int index : {1, 2, 4, 7, 9, 12}) EXPECT_TRUE(layer(index).in_place) << index;
  for (int index : {0, 10, 13, 14}) EXPECT_FALSE(layer(index).in_place) << index;

  EXPECT_EQ(layer_class_of(network, layer(0)), LayerClass::kConvStem);
  EXPECT_EQ(layer_class_of(network, layer(3)), LayerClass::kConvDepthwise);
  EXPECT_EQ(layer_class_of(network, layer(11)), LayerClass::kConv1x1S1Medium);
  EXPECT_EQ(layer_class_of(network, layer(10)), LayerClass::kElementwise);
  EXPECT_EQ(layer_class_of(network, layer(14)), LayerClass::kDataMovement);
  EXPECT_EQ(layer_class_of(network, layer(15)), LayerClass::kDataMovement);
  EXPECT_EQ(layer_class_of(network, layer(18)), LayerClass::kPool);
  const auto& depthwise =
      features.layer_classes[static_cast<std::size_t>(LayerClass::kConvDepthwise)];
  EXPECT_EQ(depthwise.count, 1);
  EXPECT_EQ(depthwise.macs, static_cast<double>(layer(3).macs));
}

TEST(Architecture, OtherResolutionsFitOrSayWhichLayerDoesNot) {
  const std::string hash = register_architecture(tiny_architecture());
  const Architecture& a = *find_architecture(hash);
  // Its fc expects 16 x 4 x 4 inputs: at 64 px the pools give 8 x 8.
  try {
    (void)build_network(imported_config(a, 64, 1, Precision::kFp32));
    ADD_FAILURE() << "built at 64 px";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    const std::string what = error.what();
    EXPECT_NE(what.find("at resolution 64"), std::string::npos) << what;
    EXPECT_NE(what.find("(fc) has weights for 256 inputs"), std::string::npos) << what;
  }
  // At 4 px the max pool's window no longer fits its 2 x 2 input.
  try {
    (void)build_network(imported_config(a, 4, 1, Precision::kFp32));
    ADD_FAILURE() << "built at 4 px";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("(max_pool) gets an input of 1x16x2x2, too small"),
              std::string::npos)
        << error.what();
  }
  // A configuration of an architecture nobody registered says what to do.
  try {
    (void)build_network(parse_key("graph-00000000000000ff_r32_b1_fp32"));
    ADD_FAILURE() << "an unregistered architecture built";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("is not loaded"), std::string::npos);
  }
}

TEST(Architecture, InconsistentGraphsAreRefusedWhenRegistered) {
  Architecture wrong_groups = tiny_architecture();
  wrong_groups.layers[3].groups = 5;  // 16 channels do not split in 5
  Architecture forward_reference = tiny_architecture();
  forward_reference.layers[0].inputs = {7};
  Architecture bad_add = tiny_architecture();
  bad_add.layers[12].inputs = {12, 6};  // 16 x 16 x 16 plus 16 x 1 x 1
  for (const Architecture& bad : {wrong_groups, forward_reference, bad_add}) {
    EXPECT_THROW((void)register_architecture(bad), Error);
  }
}

}  // namespace
}  // namespace carb
