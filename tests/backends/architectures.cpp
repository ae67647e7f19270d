#include "architectures.hpp"

#include <cstdlib>
#include <functional>
#include <iostream>
#include <utility>

namespace carb::testing {

ArchitectureBuilder::ArchitectureBuilder(std::string name, int input_channels) {
  architecture_.name = std::move(name);
  architecture_.source = "built by hand (tests/backends/architectures.cpp)";
  architecture_.input_channels = input_channels;
  architecture_.native_resolution = 32;
}

int ArchitectureBuilder::append(LayerKind kind, std::vector<int> inputs,
                                const std::function<void(Layer&)>& set) {
  Layer layer;
  layer.kind = kind;
  layer.inputs = std::move(inputs);
  if (set) set(layer);
  const int output = static_cast<int>(architecture_.layers.size()) + 1;
  layer.name = std::string(to_string(kind)) + std::to_string(output);
  architecture_.layers.push_back(std::move(layer));
  return output;
}

int ArchitectureBuilder::conv(int input, int channels, int kernel, int stride, int padding,
                              ConvOptions options) {
  return append(LayerKind::kConv, {input}, [&](Layer& layer) {
    set_window(layer, kernel, stride, padding);
    layer.channels = channels;
    if (options.padding_after >= 0) layer.padding_after = options.padding_after;
    layer.dilation = options.dilation;
    layer.groups = options.groups;
    layer.bias = options.bias;
  });
}

void ArchitectureBuilder::set_window(Layer& layer, int kernel, int stride, int padding) {
  layer.kernel = kernel;
  layer.stride = stride;
  layer.padding = padding;
  layer.padding_after = padding;
}

int ArchitectureBuilder::batch_norm(int input) { return append(LayerKind::kBatchNorm, {input}); }
int ArchitectureBuilder::relu(int input) { return append(LayerKind::kRelu, {input}); }
int ArchitectureBuilder::clip(int input, float lower, float upper) {
  return append(LayerKind::kClip, {input}, [&](Layer& layer) {
    layer.lower = lower;
    layer.upper = upper;
  });
}
int ArchitectureBuilder::sigmoid(int input) { return append(LayerKind::kSigmoid, {input}); }
int ArchitectureBuilder::hard_sigmoid(int input, float alpha, float beta) {
  return append(LayerKind::kHardSigmoid, {input}, [&](Layer& layer) {
    layer.alpha = alpha;
    layer.beta = beta;
  });
}
int ArchitectureBuilder::hard_swish(int input) { return append(LayerKind::kHardSwish, {input}); }
int ArchitectureBuilder::swish(int input) { return append(LayerKind::kSwish, {input}); }
int ArchitectureBuilder::add(int a, int b) { return append(LayerKind::kAdd, {a, b}); }
int ArchitectureBuilder::mul(int a, int b) { return append(LayerKind::kMul, {a, b}); }

int ArchitectureBuilder::max_pool(int input, int kernel, int stride, int padding, bool ceil_mode) {
  return append(LayerKind::kMaxPool, {input}, [&](Layer& layer) {
    set_window(layer, kernel, stride, padding);
    layer.ceil_mode = ceil_mode;
  });
}

int ArchitectureBuilder::avg_pool(int input, int kernel, int stride, int padding, bool ceil_mode,
                                  bool count_include_pad) {
  return append(LayerKind::kAvgPool, {input}, [&](Layer& layer) {
    set_window(layer, kernel, stride, padding);
    layer.ceil_mode = ceil_mode;
    layer.count_include_pad = count_include_pad;
  });
}

int ArchitectureBuilder::global_avg_pool(int input) {
  return append(LayerKind::kGlobalAvgPool, {input});
}

int ArchitectureBuilder::fc(int input, int outputs, bool bias) {
  return append(LayerKind::kFullyConnected, {input}, [&](Layer& layer) {
    layer.channels = outputs;
    layer.bias = bias;
  });
}

int ArchitectureBuilder::concat(const std::vector<int>& inputs) {
  return append(LayerKind::kConcat, inputs);
}

int ArchitectureBuilder::channel_shuffle(int input, int groups) {
  return append(LayerKind::kChannelShuffle, {input}, [&](Layer& layer) { layer.groups = groups; });
}

int ArchitectureBuilder::slice(int input, int begin, int channels) {
  return append(LayerKind::kSlice, {input}, [&](Layer& layer) {
    layer.begin = begin;
    layer.channels = channels;
  });
}

Architecture ArchitectureBuilder::finish(int output) const {
  Architecture architecture = architecture_;
  architecture.output = output >= 0 ? output : static_cast<int>(architecture.layers.size());
  architecture.hash = architecture_hash(architecture);
  return architecture;
}

namespace {

using Conv = ArchitectureBuilder::ConvOptions;

// conv + batch norm, the usual pair.
int conv_bn(ArchitectureBuilder& b, int input, int channels, int kernel, int stride, int padding,
            Conv options = {}) {
  return b.batch_norm(b.conv(input, channels, kernel, stride, padding, options));
}

int depthwise_bn(ArchitectureBuilder& b, int input, int channels, int stride) {
  return conv_bn(b, input, channels, 3, stride, 1, {.groups = channels});
}

Architecture mobilenet_v2_block() {
  ArchitectureBuilder b("mobilenet_v2_block");
  const int stem = b.relu6(conv_bn(b, 0, 16, 3, 2, 1));
  // Inverted residual, stride 2: expand 16 -> 48, depthwise, project to 24 (linear).
  int x = b.relu6(conv_bn(b, stem, 48, 1, 1, 0));
  x = b.relu6(depthwise_bn(b, x, 48, 2));
  const int block = conv_bn(b, x, 24, 1, 1, 0);
  // Inverted residual, stride 1: x + conv(x), the identity first as PyTorch's export writes it.
  x = b.relu6(conv_bn(b, block, 72, 1, 1, 0));
  x = b.relu6(depthwise_bn(b, x, 72, 1));
  x = b.add(block, conv_bn(b, x, 24, 1, 1, 0));
  x = b.relu6(conv_bn(b, x, 40, 1, 1, 0));
  b.fc(b.global_avg_pool(x), 10);
  return b.finish();
}

// MobileNetV3's (hard swish, hard sigmoid) or EfficientNet's (swish, sigmoid) block: expand,
// depthwise, squeeze-excite (global pool, 1x1 convs with biases, gate, broadcast mul), project,
// residual add; then an fc + activation + fc head.
Architecture squeeze_excite_block(const char* name, bool hard) {
  ArchitectureBuilder b(name);
  const auto activation = [&](int input) { return hard ? b.hard_swish(input) : b.swish(input); };
  const int stem = activation(conv_bn(b, 0, 16, 3, 2, 1));
  int x = activation(conv_bn(b, stem, 32, 1, 1, 0));
  x = activation(depthwise_bn(b, x, 32, 1));
  int scale = b.global_avg_pool(x);
  scale = b.relu(b.conv(scale, 8, 1, 1, 0, {.bias = true}));
  scale = b.conv(scale, 32, 1, 1, 0, {.bias = true});
  scale = hard ? b.hard_sigmoid(scale, 1.0f / 6, 0.5f) : b.sigmoid(scale);
  x = b.mul(x, scale);
  x = b.add(stem, conv_bn(b, x, 16, 1, 1, 0));
  x = activation(b.fc(b.global_avg_pool(x), 24));
  b.fc(x, 10);
  return b.finish();
}

// ShuffleNetV2: a downsample unit (both branches read the input) and a basic unit (the input
// split in halves by two slices, one half through the branch), each ending in a concat and a
// channel shuffle of 2 groups.
Architecture shufflenet_units(const char* name, int stem_channels, int half) {
  ArchitectureBuilder b(name);
  int x = b.relu(conv_bn(b, 0, stem_channels, 3, 2, 1));
  x = b.max_pool(x, 3, 2, 1, false);
  int left = depthwise_bn(b, x, stem_channels, 2);
  left = b.relu(conv_bn(b, left, half, 1, 1, 0));
  int right = b.relu(conv_bn(b, x, half, 1, 1, 0));
  right = depthwise_bn(b, right, half, 2);
  right = b.relu(conv_bn(b, right, half, 1, 1, 0));
  x = b.channel_shuffle(b.concat({left, right}), 2);
  const int kept = b.slice(x, 0, half);
  right = b.slice(x, half, half);
  right = b.relu(conv_bn(b, right, half, 1, 1, 0));
  right = depthwise_bn(b, right, half, 1);
  right = b.relu(conv_bn(b, right, half, 1, 1, 0));
  x = b.channel_shuffle(b.concat({kept, right}), 2);
  x = b.relu(conv_bn(b, x, 64, 1, 1, 0));
  b.fc(b.global_avg_pool(x), 10);
  return b.finish();
}

// DenseNet as torchvision writes it: two dense layers (batch norm and ReLU on the concat of every
// earlier feature map, 1x1 conv, batch norm, ReLU, 3x3 conv of growth 16 without batch norm or
// bias), the block's output the concat of all three maps, then a transition (batch norm, ReLU,
// 1x1 conv, 2x2 average pool), norm5, ReLU, pool and fc.
Architecture densenet_transition() {
  ArchitectureBuilder b("densenet_transition");
  std::vector<int> features = {b.relu(conv_bn(b, 0, 32, 3, 2, 1))};
  for (int layer = 0; layer < 2; ++layer) {
    const int input = features.size() == 1 ? features.front() : b.concat(features);
    int x = b.relu(b.batch_norm(input));
    x = b.relu(conv_bn(b, x, 64, 1, 1, 0));
    features.push_back(b.conv(x, 16, 3, 1, 1));
  }
  int x = b.conv(b.relu(b.batch_norm(b.concat(features))), 32, 1, 1, 0);
  x = b.avg_pool(x, 2, 2, 0, false, true);
  x = b.relu(b.batch_norm(x));
  b.fc(b.global_avg_pool(x), 10);
  return b.finish();
}

// SqueezeNet 1.0's shape: convs with biases, ceil-mode max pools, a fire module (squeeze 1x1,
// whose output both expands read; expand 1x1 and 3x3 concatenated), a 1x1 classifier conv and
// a global average pool as the output.
Architecture squeezenet_fire() {
  ArchitectureBuilder b("squeezenet_fire");
  int x = b.relu(b.conv(0, 32, 3, 2, 0, {.bias = true}));
  x = b.max_pool(x, 3, 2, 0, true);
  const int squeeze = b.relu(b.conv(x, 16, 1, 1, 0, {.bias = true}));
  const int expand1 = b.relu(b.conv(squeeze, 32, 1, 1, 0, {.bias = true}));
  const int expand3 = b.relu(b.conv(squeeze, 32, 3, 1, 1, {.bias = true}));
  x = b.max_pool(b.concat({expand1, expand3}), 3, 2, 0, true);
  x = b.relu(b.conv(x, 10, 1, 1, 0, {.bias = true}));
  b.global_avg_pool(x);
  return b.finish();
}

// ResNeXt's bottleneck with a 3x3 conv of 16 groups of 4 channels, and a projection shortcut.
Architecture resnext_block() {
  ArchitectureBuilder b("resnext_block");
  const int stem = b.relu(conv_bn(b, 0, 64, 3, 1, 1));
  int x = b.relu(conv_bn(b, stem, 64, 1, 1, 0));
  x = b.relu(conv_bn(b, x, 64, 3, 1, 1, {.groups = 16}));
  x = conv_bn(b, x, 128, 1, 1, 0);
  const int shortcut = conv_bn(b, stem, 128, 1, 1, 0);
  x = b.relu(b.add(x, shortcut));
  b.fc(b.global_avg_pool(x), 10);
  return b.finish();
}

// Dilated convs (DeepLab's), asymmetric padding (TensorFlow's "same" at stride 2) and a conv of
// 2 groups of 16 channels (whole channel blocks).
Architecture dilated_convs() {
  ArchitectureBuilder b("dilated_convs");
  int x = b.relu(conv_bn(b, 0, 16, 3, 1, 1));
  x = b.relu(conv_bn(b, x, 32, 3, 1, 2, {.dilation = 2}));
  x = b.swish(conv_bn(b, x, 32, 3, 1, 1, {.groups = 2, .dilation = 2, .padding_after = 3}));
  x = b.sigmoid(b.conv(x, 16, 3, 2, 0, {.padding_after = 1, .bias = true}));
  b.fc(b.global_avg_pool(x), 10);
  return b.finish();
}

// Pools and activations that no conv absorbs: average pools counting the padding or not, with
// ceil-mode windows past the padding (the last one without padding), a ceil-mode max pool,
// standalone sigmoid, hard sigmoid (ONNX's default slope 0.2), clip and hard swish, a mul of two
// equal shapes, an add with a ReLU, and an fc over 24 x 3 x 3 values.
Architecture pools_and_activations() {
  ArchitectureBuilder b("pools_and_activations");
  int x = b.relu(b.conv(0, 24, 3, 1, 1, {.bias = true}));
  x = b.sigmoid(b.avg_pool(x, 3, 2, 1, false, true));
  x = b.max_pool(x, 3, 2, 0, true);
  x = b.hard_sigmoid(b.avg_pool(x, 3, 2, 1, true, false), 0.2f, 0.5f);
  const int pooled = b.avg_pool(x, 2, 2, 0, true, true);
  x = b.hard_swish(b.mul(b.clip(pooled, 0.1f, 0.6f), pooled));
  x = b.relu(b.add(x, pooled));
  b.fc(x, 10);
  return b.finish();
}

// A ResNet exported with its batch norms folded into the convs (biases, no batch norm), one conv
// with both a bias and a batch norm, and an add whose operands are both conv outputs (the first
// one, the shortcut, runs as the sum).
Architecture batch_norm_folded() {
  ArchitectureBuilder b("batch_norm_folded");
  const Conv biased{.bias = true};
  const int stem = b.relu(b.conv(0, 16, 3, 1, 1, biased));
  int x = b.relu(b.conv(stem, 16, 3, 1, 1, biased));
  x = b.relu(b.add(b.conv(x, 16, 3, 1, 1, biased), stem));
  const int block = x;
  x = b.relu(conv_bn(b, block, 32, 3, 2, 1, biased));
  const int shortcut = b.conv(block, 32, 1, 2, 0, biased);
  x = b.relu(b.add(shortcut, b.conv(x, 32, 3, 1, 1, biased)));
  b.fc(b.global_avg_pool(x), 10);
  return b.finish();
}

// Residual sums the planner cannot run as a conv writing over its identity: the first add's
// identity is still read by the conv of the second add, which runs at that add, later; the
// third add's identity is its conv's own input.
Architecture crossing_residuals() {
  ArchitectureBuilder b("crossing_residuals");
  const int x = b.relu(conv_bn(b, 0, 16, 3, 2, 1));
  const int y = b.relu(conv_bn(b, x, 16, 3, 1, 1));
  const int later = conv_bn(b, x, 16, 3, 1, 1);
  const int first = b.add(conv_bn(b, y, 16, 3, 1, 1), x);
  const int second = b.relu(b.add(later, first));
  const int third = b.add(conv_bn(b, second, 16, 3, 1, 1), second);
  b.fc(b.global_avg_pool(third), 10);
  return b.finish();
}

// What the CPU engine refuses: an average pool counting its padding whose ceil-mode window
// overhangs that padding.
Architecture overhanging_average() {
  ArchitectureBuilder b("overhanging_average");
  const int x = b.relu(b.conv(0, 16, 3, 1, 1, {.bias = true}));
  b.fc(b.avg_pool(x, 3, 2, 1, true, true), 10);
  return b.finish();
}

}  // namespace

const std::vector<TestArchitecture>& test_architectures() {
  static const std::vector<TestArchitecture> architectures = [] {
    std::vector<TestArchitecture> all = {
        {"mobilenet_v2_block", mobilenet_v2_block()},
        {"mobilenet_v3_se", squeeze_excite_block("mobilenet_v3_se", true)},
        {"efficientnet_se", squeeze_excite_block("efficientnet_se", false)},
        {"shufflenet_v2_58", shufflenet_units("shufflenet_v2_58", 24, 58)},
        {"shufflenet_v2_32", shufflenet_units("shufflenet_v2_32", 32, 32)},
        {"densenet_transition", densenet_transition()},
        {"squeezenet_fire", squeezenet_fire()},
        {"resnext_block", resnext_block()},
        {"dilated_convs", dilated_convs()},
        {"pools_and_activations", pools_and_activations()},
        {"batch_norm_folded", batch_norm_folded()},
        {"crossing_residuals", crossing_residuals()},
        {"overhanging_average", overhanging_average()},
    };
    for (TestArchitecture& test : all) register_architecture(test.architecture);
    return all;
  }();
  return architectures;
}

const Architecture& test_architecture(std::string_view name) {
  for (const TestArchitecture& test : test_architectures()) {
    if (test.name == name) return test.architecture;
  }
  std::cerr << "no test architecture " << name << "\n";
  std::abort();
}

Config test_config(std::string_view name, int resolution, int batch, Precision precision) {
  return imported_config(test_architecture(name), resolution, batch, precision);
}

}  // namespace carb::testing
