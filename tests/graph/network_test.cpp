#include <gtest/gtest.h>

#include "carb/error.hpp"
#include "carb/graph.hpp"

namespace carb {
namespace {

Network network_of(const std::string& key) { return build_network(parse_key(key)); }

TEST(Network, Resnet50HasTorchvisionsModules) {
  const Network network = network_of("bottleneck50_w1_ds_r224_b2_fp32");
  const Features features = compute_features(network);
  EXPECT_EQ(features.layer_counts[LayerKind::kConv], 53);
  EXPECT_EQ(features.layer_counts[LayerKind::kBatchNorm], 53);
  EXPECT_EQ(features.layer_counts[LayerKind::kAdd], 16);
  EXPECT_EQ(features.layer_counts[LayerKind::kRelu], 1 + 16 * 3);
  EXPECT_EQ(features.layer_counts[LayerKind::kMaxPool], 1);
  EXPECT_EQ(features.layer_counts[LayerKind::kGlobalAvgPool], 1);
  EXPECT_EQ(features.layer_counts[LayerKind::kFullyConnected], 1);
  EXPECT_EQ(features.kernel_launches, features.layer_counts.total());
  EXPECT_EQ(features.widest_channels, 2048);

  EXPECT_EQ(layer_name(network.layers.front()), "conv1");
  EXPECT_EQ(layer_name(network.layers.back()), "fc");
  // layer2.0: v1.5 puts the stride on the 3x3 conv, and the block has a projection shortcut.
  std::vector<std::string> layer2_block0;
  for (const Layer& layer : network.layers) {
    if (layer.stage == 1 && layer.block == 0) {
      layer2_block0.push_back(layer_name(layer));
      if (std::string(layer.role) == "conv2") {
        EXPECT_EQ(layer.stride, 2);
      }
      if (std::string(layer.role) == "conv1") {
        EXPECT_EQ(layer.stride, 1);
      }
    }
  }
  EXPECT_EQ(layer2_block0,
            (std::vector<std::string>{"layer2.0.conv1", "layer2.0.bn1", "layer2.0.relu",
                                      "layer2.0.conv2", "layer2.0.bn2", "layer2.0.relu",
                                      "layer2.0.conv3", "layer2.0.bn3", "layer2.0.downsample.0",
                                      "layer2.0.downsample.1", "layer2.0.add", "layer2.0.relu"}));
  EXPECT_EQ(network.tensors[static_cast<std::size_t>(network.output)], (Shape{2, 1000, 1, 1}));
}

TEST(Network, ShapesFollowTheConvolutionFormula) {
  const Network network = network_of("basic18_w1_ds_r33_b1_fp32");
  // 33 -> conv 7x7/2 pad 3 -> 17 -> maxpool 3x3/2 pad 1 -> 9 -> 9, 5, 3, 2.
  EXPECT_EQ(network.tensors[1], (Shape{1, 64, 17, 17}));
  int last_conv = -1;
  for (const Layer& layer : network.layers) {
    if (layer.kind == LayerKind::kMaxPool) {
      EXPECT_EQ(network.tensors[static_cast<std::size_t>(layer.output)], (Shape{1, 64, 9, 9}));
    }
    if (layer.kind == LayerKind::kConv) last_conv = layer.output;
  }
  EXPECT_EQ(network.tensors[static_cast<std::size_t>(last_conv)], (Shape{1, 512, 2, 2}));
}

TEST(Network, WidthMultiplierRoundsChannels) {
  const Network network = network_of("basic10_w0.1_nods_r32_b1_fp32");
  // round(64 x 0.1) = 6, round(128 x 0.1) = 13, round(256 x 0.1) = 26, round(512 x 0.1) = 51.
  EXPECT_EQ(network.tensors[1].c, 6);
  EXPECT_EQ(compute_features(network).widest_channels, 51);
  EXPECT_EQ(network.layers.front().kernel, 3);  // no early downsampling: CIFAR-style 3x3 stem
  EXPECT_EQ(network.layers.front().stride, 1);
}

TEST(Network, RejectsConfigurationsItCannotBuild) {
  Config config = parse_key("basic18_w1_ds_r224_b1_fp32");
  config.resolution = 16;
  EXPECT_THROW(build_network(config), Error);
}

TEST(Features, TinyNetworkByHand) {
  // One stage of one basic block, 8 channels, 8x8 input, no early downsampling, 10 classes.
  const Network network = network_of("basic4s1_c8_w1_nods_r8_b1_fp32_k10");
  const Features features = compute_features(network);
  const std::int64_t conv3x3_8 = 8 * 8 * 9;  // weights of a 3x3 conv 8 -> 8
  EXPECT_EQ(features.params, 8 * 3 * 9 + 2 * 8 + 2 * (conv3x3_8 + 2 * 8) + 8 * 10 + 10);
  EXPECT_EQ(features.macs, 64 * (8 * 3 * 9) + 2 * 64 * (8 * 8 * 9) + 8 * 10);
  EXPECT_EQ(features.flops, 2 * features.macs);
  EXPECT_EQ(features.param_bytes, 4 * features.params);
  EXPECT_EQ(features.activation_bytes, 4 * (3 * 512 + 10));
  // Live: input 192 + stem 512, then stem + conv1 + conv2 = 1536 elements at the block's end.
  EXPECT_EQ(features.peak_activation_bytes, 4 * 1536);
  // The engine plan fuses conv2's batch norm, the add and the ReLU into conv2, which sums into
  // the stem's buffer: the input (kept for the whole pass), the stem's and conv1's outputs.
  EXPECT_EQ(features.engine_arena_bytes, 4 * (192 + 512 + 512));
  // Prepare peaks staging conv2: every parameter up to it (stem 216 + 16, conv1 576 + 16,
  // conv2 576) plus conv2's 576 once more as float32, above all 1,506 parameters with the input
  // as float32 (4 x (1,506 + 192)).
  EXPECT_EQ(features.prepare_peak_bytes,
            features.engine_arena_bytes + 4 * (216 + 16 + 576 + 16 + 576) + 4 * 576);
  EXPECT_DOUBLE_EQ(features.arithmetic_intensity,
                   static_cast<double>(features.flops) /
                       static_cast<double>(features.param_bytes + features.activation_bytes));
  // Batch 1, float32, 3x3 kernels on at most 512 input elements: PyTorch runs all three convs
  // natively (ATen's use_mkldnn declines them); the fc layer is not a conv.
  EXPECT_EQ(features.torch_native_macs, features.macs - 8 * 10);
}

TEST(Features, TorchNativeMacsFollowPyTorchsConvDispatch) {
  // Batch 2, or bf16: oneDNN takes every conv.
  EXPECT_EQ(compute_features(network_of("basic4s1_c8_w1_nods_r8_b2_fp32_k10")).torch_native_macs,
            0);
  EXPECT_EQ(compute_features(network_of("basic4s1_c8_w1_nods_r8_b1_bf16_k10")).torch_native_macs,
            0);
  // resnet18 at 224: the 7x7 stem goes to oneDNN (a kernel wider and taller than 3), and every
  // other conv's input has more than 20480 elements (the smallest, stage 4's, 512 x 7 x 7).
  EXPECT_EQ(compute_features(network_of("basic18_w1_ds_r224_b1_fp32")).torch_native_macs, 0);
  // At 32 without early downsampling, width 0.25 (16, 32, 64, 128 channels): the stem's input is
  // 3 x 32 x 32 = 3072 (native) and every later input at most 16 x 32 x 32 = 16384 (native).
  const Features small = compute_features(network_of("basic18_w0.25_nods_r32_b1_fp32"));
  EXPECT_EQ(small.torch_native_macs, small.macs - 128 * 1000);
}

TEST(Features, LayerClassTotalsOfATinyNetworkByHand) {
  // The network of TinyNetworkByHand at batch 2: stem 3 -> 8 (3x3, 8x8), one basic block of two
  // 3x3 convs 8 -> 8 on 8x8 (64 pixels: medium), 3 batch-norms, 3 ReLUs, 1 add, avgpool, fc 8
  // -> 10.
  const Features features = compute_features(network_of("basic4s1_c8_w1_nods_r8_b2_fp32_k10"));
  const auto totals = [&](LayerClass c) { return features.layer_classes[static_cast<int>(c)]; };
  // Bytes: (batch x (input + output elements) + weights) x 4.
  EXPECT_EQ(totals(LayerClass::kConvStem).macs, 2 * 64 * 8 * 3 * 9);
  EXPECT_EQ(totals(LayerClass::kConvStem).bytes, (2 * (192 + 512) + 216) * 4);
  EXPECT_EQ(totals(LayerClass::kConvStem).count, 1);
  EXPECT_EQ(totals(LayerClass::kConv3x3S1Medium).macs, 2 * 2 * 64 * 8 * 8 * 9);
  EXPECT_EQ(totals(LayerClass::kConv3x3S1Medium).bytes, 2 * (2 * (512 + 512) + 576) * 4);
  EXPECT_EQ(totals(LayerClass::kConv3x3S1Medium).count, 2);
  // batch-norm: 512 in, 512 out, 16 parameters; ReLU 512 in and out; add 2 x 512 in, 512 out.
  EXPECT_EQ(totals(LayerClass::kElementwise).macs, 0);
  EXPECT_EQ(totals(LayerClass::kElementwise).bytes,
            (3 * (2 * 1024 + 16) + 3 * 2 * 1024 + 2 * 1536) * 4);
  EXPECT_EQ(totals(LayerClass::kElementwise).count, 7);
  EXPECT_EQ(totals(LayerClass::kPool).bytes, 2 * (512 + 8) * 4);
  EXPECT_EQ(totals(LayerClass::kFullyConnected).macs, 2 * 80);
  EXPECT_EQ(totals(LayerClass::kFullyConnected).bytes, (2 * (8 + 10) + 90) * 4);
  for (LayerClass c : {LayerClass::kConv1x1S1Small, LayerClass::kConv3x3S1Small,
                       LayerClass::kConv3x3S2Medium, LayerClass::kConv1x1S2Large}) {
    EXPECT_EQ(totals(c).count, 0) << to_string(c);
    EXPECT_EQ(totals(c).bytes, 0) << to_string(c);
  }
  double macs = 0;
  for (const LayerClassTotals& t : features.layer_classes) macs += t.macs;
  EXPECT_EQ(macs, features.macs);

  // Per layer max(FLOPs, balance x bytes): at balance 4 the convs are compute-bound, the rest
  // memory-bound; at 16 and 64 everything is memory-bound.
  const double stem_flops = 2.0 * 2 * 64 * 8 * 3 * 9, conv_flops = 2.0 * 2 * 64 * 8 * 8 * 9;
  const double stem_bytes = (2 * 704 + 216) * 4, conv_bytes = (2 * 1024 + 576) * 4;
  const double rest_bytes = totals(LayerClass::kElementwise).bytes +
                            totals(LayerClass::kPool).bytes +
                            totals(LayerClass::kFullyConnected).bytes;
  ASSERT_EQ(kRooflineBalances, (std::array<double, 3>{4, 16, 64}));
  EXPECT_GT(stem_flops, 4 * stem_bytes);
  EXPECT_GT(conv_flops, 4 * conv_bytes);
  EXPECT_LT(conv_flops, 16 * conv_bytes);
  EXPECT_DOUBLE_EQ(features.roofline_flops[0], stem_flops + 2 * conv_flops + 4 * rest_bytes);
  EXPECT_DOUBLE_EQ(features.roofline_flops[1], 16 * (stem_bytes + 2 * conv_bytes + rest_bytes));
  EXPECT_DOUBLE_EQ(features.roofline_flops[2], 64 * (stem_bytes + 2 * conv_bytes + rest_bytes));
}

TEST(Features, LayerClassesFollowKernelStrideAndSize) {
  // Two stages of one basic block; the second starts 8 -> 16 with stride 2 on 4x4 (16 pixels,
  // small): its conv1 (3x3/2), its conv2 (3x3/1) and its projection shortcut (1x1/2).
  const Network network = network_of("basic6s1.1_c8.16_w1_nods_r8_b1_fp32_k10");
  std::vector<std::string> classes;
  for (const Layer& layer : network.layers) {
    if (layer.kind == LayerKind::kConv) {
      classes.emplace_back(to_string(layer_class_of(network, layer)));
    }
  }
  EXPECT_EQ(classes,
            (std::vector<std::string>{"conv_stem", "conv3x3_s1_medium", "conv3x3_s1_medium",
                                      "conv3x3_s2_small", "conv3x3_s1_small", "conv1x1_s2_small"}));
  EXPECT_EQ(to_string(layer_class_of(network, network.layers.back())), "fc");
  // A bottleneck on 32x32 (1,024 pixels): 1x1 convs of the first stage are large.
  const Network large = network_of("bottleneck14_w0.25_nods_r32_b1_fp32");
  EXPECT_EQ(layer_class_of(large, large.layers[3]), LayerClass::kConv1x1S1Large);
  EXPECT_EQ(std::string(large.layers[3].role), "conv1");
}

TEST(Features, ScaleWithBatchAndPrecision) {
  const Features one = compute_features(network_of("bottleneck50_w0.5_ds_r64_b1_fp32"));
  const Features many = compute_features(network_of("bottleneck50_w0.5_ds_r64_b16_fp16"));
  EXPECT_EQ(many.params, one.params);
  EXPECT_EQ(many.macs, 16 * one.macs);
  EXPECT_EQ(many.param_bytes * 2, one.param_bytes);
  EXPECT_EQ(many.activation_bytes * 2, one.activation_bytes * 16);
  EXPECT_EQ(many.peak_activation_bytes * 2, one.peak_activation_bytes * 16);
  EXPECT_EQ(many.engine_arena_bytes * 2, one.engine_arena_bytes * 16);
  // Staging is float32 at any precision; the weights loaded before it are not.
  EXPECT_GT(many.prepare_peak_bytes - many.engine_arena_bytes,
            (one.prepare_peak_bytes - one.engine_arena_bytes) / 2);
  EXPECT_LT(many.prepare_peak_bytes - many.engine_arena_bytes,
            one.prepare_peak_bytes - one.engine_arena_bytes + 16 * 64 * 64 * 3 * 4);
}

TEST(Roofline, IsComputeOrMemoryBound) {
  const Network network = network_of("basic18_w1_ds_r224_b8_fp32");
  const Features features = compute_features(network);
  const double compute_only = roofline_ms(network, {1e12, 1e30});
  EXPECT_NEAR(compute_only, features.flops / 1e12 * 1e3, 1e-9);
  const double bandwidth_only = roofline_ms(network, {1e30, 1e9});
  EXPECT_GT(bandwidth_only, (features.param_bytes + features.activation_bytes) / 1e9 * 1e3);
  const double both = roofline_ms(network, {1e12, 1e9});
  EXPECT_GE(both, std::max(compute_only, bandwidth_only) - 1e-9);
  EXPECT_LE(both, compute_only + bandwidth_only + 1e-9);
}

TEST(Roofline, ParsesDeviceText) {
  const RooflineDevice device = parse_roofline_device("67:3350");
  EXPECT_DOUBLE_EQ(device.peak_flops_per_s, 67e12);
  EXPECT_DOUBLE_EQ(device.bandwidth_bytes_per_s, 3350e9);
  for (const char* bad : {"", "67", "67:", ":3", "a:b", "0:5", "5:-1", "1:2:3"}) {
    EXPECT_THROW(parse_roofline_device(bad), Error) << bad;
  }
}

TEST(Network, ShapesAndInputShapesAsLayerTablesPrintThem) {
  EXPECT_EQ(to_string(Shape{1, 64, 56, 56}), "1x64x56x56");
  const Network network = build_network(parse_key("basic18_w1_ds_r224_b2_fp32"));
  EXPECT_EQ(input_shapes(network, network.layers.front()), "2x3x224x224");  // conv1
  int adds = 0;
  for (const Layer& layer : network.layers) {
    if (layer.kind != LayerKind::kAdd) continue;
    const std::string first = to_string(network.tensors[static_cast<std::size_t>(layer.inputs[0])]);
    const std::string second =
        to_string(network.tensors[static_cast<std::size_t>(layer.inputs[1])]);
    EXPECT_EQ(input_shapes(network, layer), first + "+" + second);
    ++adds;
  }
  EXPECT_EQ(adds, 8);
}

}  // namespace
}  // namespace carb
