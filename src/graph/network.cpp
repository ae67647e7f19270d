// Builds torchvision's ResNet structure (v1.5: stride on the 3x3 conv of a bottleneck) from a
// configuration.
#include <array>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "network_internal.hpp"

namespace carb {

std::string_view to_string(LayerKind kind) {
  static constexpr std::array<std::string_view, kLayerKindCount> kNames = {
      "conv",         "batch_norm",
      "relu",         "add",
      "max_pool",     "global_avg_pool",
      "fc",           "avg_pool",
      "clip",         "sigmoid",
      "hard_sigmoid", "hard_swish",
      "swish",        "mul",
      "concat",       "channel_shuffle",
      "slice"};
  const auto index = static_cast<std::size_t>(kind);
  return index < kNames.size() ? kNames[index] : "?";
}

bool is_activation(LayerKind kind) {
  switch (kind) {
    case LayerKind::kRelu:
    case LayerKind::kClip:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSwish:
      return true;
    default:
      return false;
  }
}

std::string layer_name(const Layer& layer) {
  if (!layer.name.empty()) return layer.name;
  if (layer.stage < 0) return layer.role;
  return "layer" + std::to_string(layer.stage + 1) + "." + std::to_string(layer.block) + "." +
         layer.role;
}

std::string to_string(const Shape& shape) {
  return std::to_string(shape.n) + "x" + std::to_string(shape.c) + "x" + std::to_string(shape.h) +
         "x" + std::to_string(shape.w);
}

std::string input_shapes(const Network& network, const Layer& layer) {
  std::string text;
  for (int k = 0; k < layer.input_count(); ++k) {
    text +=
        (k > 0 ? "+" : "") + to_string(network.tensors[static_cast<std::size_t>(layer.inputs[k])]);
  }
  return text;
}

namespace {

int conv_out(int size, int kernel, int stride, int padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

class Builder {
 public:
  explicit Builder(Network& network) : network_(network) {}

  void position(int stage, int block) {
    stage_ = stage;
    block_ = block;
  }

  int conv(const char* role, int input, int channels, int kernel, int stride, int padding) {
    const Shape in = network_.tensors[static_cast<std::size_t>(input)];
    const Shape out{in.n, channels, conv_out(in.h, kernel, stride, padding),
                    conv_out(in.w, kernel, stride, padding)};
    Layer& layer = add(LayerKind::kConv, role, input, -1, out, false);
    layer.channels = channels;
    layer.kernel = kernel;
    layer.stride = stride;
    layer.padding = padding;
    layer.padding_after = padding;
    layer.params = static_cast<std::int64_t>(channels) * in.c * kernel * kernel;
    layer.macs = out.elements() * in.c * kernel * kernel;
    return layer.output;
  }

  int batch_norm(const char* role, int input) {
    const Shape shape = network_.tensors[static_cast<std::size_t>(input)];
    Layer& layer = add(LayerKind::kBatchNorm, role, input, -1, shape, true);
    layer.params = 2 * static_cast<std::int64_t>(shape.c);
    return layer.output;
  }

  int relu(const char* role, int input) {
    return add(LayerKind::kRelu, role, input, -1, network_.tensors[static_cast<std::size_t>(input)],
               true)
        .output;
  }

  int residual_add(int branch, int identity) {
    return add(LayerKind::kAdd, "add", branch, identity,
               network_.tensors[static_cast<std::size_t>(branch)], true)
        .output;
  }

  int max_pool(int input) {
    const Shape in = network_.tensors[static_cast<std::size_t>(input)];
    const Shape out{in.n, in.c, conv_out(in.h, 3, 2, 1), conv_out(in.w, 3, 2, 1)};
    Layer& layer = add(LayerKind::kMaxPool, "maxpool", input, -1, out, false);
    layer.kernel = 3;
    layer.stride = 2;
    layer.padding = 1;
    layer.padding_after = 1;
    return layer.output;
  }

  int global_avg_pool(int input) {
    const Shape in = network_.tensors[static_cast<std::size_t>(input)];
    Layer& layer = add(LayerKind::kGlobalAvgPool, "avgpool", input, -1, {in.n, in.c, 1, 1}, false);
    layer.kernel = in.h;
    return layer.output;
  }

  int fully_connected(int input, int classes) {
    const Shape in = network_.tensors[static_cast<std::size_t>(input)];
    Layer& layer = add(LayerKind::kFullyConnected, "fc", input, -1, {in.n, classes, 1, 1}, false);
    layer.channels = classes;
    layer.bias = true;
    layer.params = static_cast<std::int64_t>(in.c) * classes + classes;
    layer.macs = static_cast<std::int64_t>(in.n) * in.c * classes;
    return layer.output;
  }

 private:
  Layer& add(LayerKind kind, const char* role, int input, int second, const Shape& out,
             bool in_place) {
    Layer layer;
    layer.kind = kind;
    layer.stage = stage_;
    layer.block = block_;
    layer.role = role;
    layer.inputs = {input};
    if (second >= 0) layer.inputs.push_back(second);
    layer.in_place = in_place;
    layer.output = static_cast<int>(network_.tensors.size());
    network_.tensors.push_back(out);
    network_.layers.push_back(layer);
    return network_.layers.back();
  }

  Network& network_;
  int stage_ = -1;
  int block_ = -1;
};

// One residual block, in the order of torchvision's BasicBlock/Bottleneck forward().
int residual_block(Builder& builder, const Config& config, int input, int in_channels, int planes,
                   int stride) {
  int x = input;
  int out_channels = planes;
  if (config.block == BlockType::kBasic) {
    x = builder.relu("relu",
                     builder.batch_norm("bn1", builder.conv("conv1", x, planes, 3, stride, 1)));
    x = builder.batch_norm("bn2", builder.conv("conv2", x, planes, 3, 1, 1));
  } else {
    out_channels = planes * 4;
    x = builder.relu("relu", builder.batch_norm("bn1", builder.conv("conv1", x, planes, 1, 1, 0)));
    x = builder.relu("relu",
                     builder.batch_norm("bn2", builder.conv("conv2", x, planes, 3, stride, 1)));
    x = builder.batch_norm("bn3", builder.conv("conv3", x, out_channels, 1, 1, 0));
  }
  int identity = input;
  if (stride != 1 || in_channels != out_channels) {
    identity = builder.batch_norm("downsample.1",
                                  builder.conv("downsample.0", input, out_channels, 1, stride, 0));
  }
  return builder.relu("relu", builder.residual_add(x, identity));
}

}  // namespace

Network build_network(const Config& config) {
  if (config.imported()) {
    if (const std::string why = invalid_reason(config); !why.empty()) {
      throw Error(ErrorCategory::kInput, "configuration " + to_key(config) + ": " + why);
    }
    return build_imported_network(config);
  }
  if (const std::string why = invalid_reason(config); !why.empty()) {
    throw Error(ErrorCategory::kInput, "configuration " + to_key(config) + ": " + why);
  }
  Network network;
  network.config = config;
  network.tensors.push_back({config.batch, 3, config.resolution, config.resolution});
  network.input = 0;
  Builder builder(network);

  const int stem_channels = config.stage_channels(0);
  int x = network.input;
  if (config.early_downsample) {
    x = builder.conv("conv1", x, stem_channels, 7, 2, 3);
  } else {
    x = builder.conv("conv1", x, stem_channels, 3, 1, 1);
  }
  x = builder.relu("relu", builder.batch_norm("bn1", x));
  if (config.early_downsample) x = builder.max_pool(x);

  int channels = stem_channels;
  const int expansion = block_expansion(config.block);
  for (int stage = 0; stage < static_cast<int>(config.stage_blocks.size()); ++stage) {
    const int planes = config.stage_channels(stage);
    for (int block = 0; block < config.stage_blocks[static_cast<std::size_t>(stage)]; ++block) {
      builder.position(stage, block);
      const int stride = (stage > 0 && block == 0) ? 2 : 1;
      x = residual_block(builder, config, x, channels, planes, stride);
      channels = planes * expansion;
    }
  }
  builder.position(-1, -1);
  x = builder.global_avg_pool(x);
  network.output = builder.fully_connected(x, config.classes);
  return network;
}

}  // namespace carb
