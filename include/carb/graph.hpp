// The network IR of a configuration (layers with shapes, torchvision's ResNet structure) and its
// analytic features in closed form.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "carb/space.hpp"

namespace carb {

/// Layer types of the IR; one IR layer is one eager kernel (a torchvision module; for an imported
/// network, one operator after the import's fusions: docs/onnx.md).
enum class LayerKind {
  kConv,       ///< convolution, grouped (depthwise) and dilated included
  kBatchNorm,  ///< inference batch norm: a per-channel scale and shift
  kRelu,
  kAdd,  ///< elementwise sum of two tensors of one shape
  kMaxPool,
  kGlobalAvgPool,   ///< average over all of H x W
  kFullyConnected,  ///< reads its input's C x H x W values as one vector (a flatten before it)
  kAvgPool,         ///< average over a window
  kClip,            ///< min(max(x, lower), upper): ReLU6 is a clip to [0, 6]
  kSigmoid,
  kHardSigmoid,     ///< max(0, min(1, alpha x + beta))
  kHardSwish,       ///< x hardsigmoid(x) with alpha 1/6 and beta 1/2 (torch.nn.Hardswish)
  kSwish,           ///< x sigmoid(x) (torch.nn.SiLU)
  kMul,             ///< elementwise product; the second input may be N x C x 1 x 1 (broadcast)
  kConcat,          ///< concatenation of its inputs along channels
  kChannelShuffle,  ///< channels seen as groups x (C / groups), transposed (ShuffleNet)
  kSlice,           ///< the output's channels starting at channel `begin` of its input
};
inline constexpr int kLayerKindCount = 17;
std::string_view to_string(LayerKind kind);
/// Whether a layer of this kind maps each value of its first input to one output value (ReLU,
/// clip, sigmoid, hard sigmoid, hard swish, swish).
bool is_activation(LayerKind kind);

/// An NCHW tensor shape.
struct Shape {
  int n = 0, c = 0, h = 0, w = 0;
  std::int64_t elements() const { return static_cast<std::int64_t>(n) * c * h * w; }
  bool operator==(const Shape& other) const = default;
};

/// One layer. Tensors are numbered; tensor 0 is the network input.
struct Layer {
  LayerKind kind = LayerKind::kConv;
  int stage = -1;           ///< 0-based stage, or -1 for the stem and the head (ResNet)
  int block = -1;           ///< 0-based block within the stage, or -1 (ResNet)
  const char* role = "";    ///< torchvision's module name within its parent, e.g. "conv2" (ResNet)
  std::string name;         ///< an imported layer's name (its ONNX node's); empty for a ResNet's
  std::vector<int> inputs;  ///< input tensor ids, in the operator's order
  int output = -1;          ///< output tensor id
  int channels = 0;         ///< output channels of a conv or fc (their weights fix them)
  int kernel = 0;           ///< conv/pool window (square)
  int stride = 1;
  int padding = 0;                 ///< conv/pool padding before the input (top and left)
  int padding_after = 0;           ///< conv/pool padding after the input (bottom and right)
  int dilation = 1;                ///< conv
  int groups = 1;                  ///< conv: input and output channels split into this many groups;
                                   ///< channel shuffle: its groups
  bool ceil_mode = false;          ///< pool: output size rounded up (the last window may overhang)
  bool count_include_pad = false;  ///< avg pool: padded values count in the average
  float lower = 0, upper = 0;      ///< clip bounds
  float alpha = 0, beta = 0;       ///< hard sigmoid's slope and offset
  int begin = 0;                   ///< slice: the first input channel it takes
  std::int64_t fc_inputs = 0;      ///< fc: the input values its weights expect (imported; 0: any)
  bool bias = false;               ///< conv/fc bias (only fc has one in a ResNet)
  /// Whether an inference engine writes the output over input 0 (folded batch-norm, ReLU, add).
  bool in_place = false;
  std::int64_t params = 0;  ///< learnable parameters
  std::int64_t macs = 0;    ///< multiply-accumulates of the whole batch

  int input_count() const { return static_cast<int>(inputs.size()); }
};

/// "NxCxHxW", e.g. "1x64x56x56".
std::string to_string(const Shape& shape);

/// A layer's name: torchvision's module path of a ResNet layer (e.g. "layer2.0.downsample.0",
/// "fc"), an imported layer's own name.
std::string layer_name(const Layer& layer);

/// A configuration's network: tensors and layers in execution order (torchvision's forward(),
/// or the imported graph's topological order).
struct Network {
  Config config;
  std::vector<Shape> tensors;
  std::vector<Layer> layers;
  int input = 0;
  int output = 0;
};

/// A network imported from a model file, free of batch and resolution (docs/onnx.md): its
/// layers' operations, channel counts and connections, with shapes, params and MACs unset.
/// Tensor 0 is the input; layer i writes tensor i + 1; `output` is the network's output tensor.
struct Architecture {
  std::string hash;    ///< content hash of the graph (16 hex digits), which keys name it by
  std::string name;    ///< a name for people, e.g. the file's stem "mobilenet_v2"
  std::string source;  ///< the file it was imported from
  int input_channels = 3;
  int native_resolution = 0;  ///< the input resolution the file was exported at
  std::vector<Layer> layers;
  int output = 0;
};
/// SHA-256 of `data` as 64 lower-case hex digits (FIPS 180-4; implemented here, no dependency).
std::string sha256_hex(std::string_view data);
/// The architecture's content hash: SHA-256 of its layers' kinds, attributes and connections
/// (names, the source and the native resolution aside), its first 16 hex digits.
std::string architecture_hash(const Architecture& architecture);
/// An architecture as JSON (what stores keep and workers receive), and back; from_json throws
/// carb::Error (input) naming `origin` when the JSON is not one.
nlohmann::json architecture_to_json(const Architecture& architecture);
Architecture architecture_from_json(const nlohmann::json& json, const std::string& origin);

/// Makes an architecture known to this process, so that configurations naming its hash build
/// (build_network). Idempotent; thread-safe. Returns the hash.
std::string register_architecture(Architecture architecture);
/// The registered architecture of a hash, or null.
std::shared_ptr<const Architecture> find_architecture(std::string_view hash);
/// An imported model file as an architecture: ONNX (docs/onnx.md). Throws carb::Error (input)
/// with the file and the node on a file it cannot read or an operator it does not know.
Architecture import_model(const std::string& path);
/// The configuration of a registered architecture at a resolution, batch and precision.
Config imported_config(const Architecture& architecture, int resolution, int batch,
                       Precision precision);

/// Builds the network of a configuration; throws carb::Error (input) when it cannot be built:
/// an invalid ResNet, an imported architecture not registered, or one whose shapes do not fit
/// at the configuration's resolution.
Network build_network(const Config& config);
/// The shapes of a layer's inputs joined by '+': "1x64x56x56+1x64x56x56" for an add.
std::string input_shapes(const Network& network, const Layer& layer);

/// Layer counts by kind.
struct LayerCounts {
  std::array<int, kLayerKindCount> by_kind{};
  int operator[](LayerKind kind) const { return by_kind[static_cast<std::size_t>(kind)]; }
  int total() const;
};

/// Classes of layers for the per-layer-class totals (docs/features.md): convolutions by role and
/// shape (the stem, whose input is the image; else kernel 1x1 or 3x3, stride 1 or 2, and the
/// output's spatial size per image: small <= 16 pixels, medium <= 256, large above), then the
/// fully connected layer, pooling, the elementwise layers (batch-norm, activations, add, mul),
/// and, after those of schema carb-ir-2, depthwise, grouped and other dense convolutions (any
/// other kernel or stride) and the layers that only move data (concat, channel shuffle, slice).
enum class LayerClass {
  kConvStem,
  kConv1x1S1Small,
  kConv1x1S1Medium,
  kConv1x1S1Large,
  kConv1x1S2Small,
  kConv1x1S2Medium,
  kConv1x1S2Large,
  kConv3x3S1Small,
  kConv3x3S1Medium,
  kConv3x3S1Large,
  kConv3x3S2Small,
  kConv3x3S2Medium,
  kConv3x3S2Large,
  kFullyConnected,
  kPool,
  kElementwise,
  kConvDepthwise,  ///< groups = input channels (> 1)
  kConvGrouped,    ///< 1 < groups < input channels
  kConvOther,      ///< ungrouped, not the stem, kernel or stride other than 1x1/3x3 at 1 or 2
  kDataMovement,   ///< concat, channel shuffle, slice
};
inline constexpr int kLayerClassCount = 20;
/// The feature-name stem of a class, e.g. "conv3x3_s1_medium", "fc", "elementwise".
std::string_view to_string(LayerClass layer_class);
/// The class of layer `layer` of `network`.
LayerClass layer_class_of(const Network& network, const Layer& layer);
/// Whether PyTorch 1.13 on the CPU, with more than one thread, runs conv `layer` of `network` on
/// its native path (thnn or slow_conv2d) rather than oneDNN, in float32: ConvParams::use_mkldnn
/// in ATen's Convolution.cpp declines oneDNN for one group, a kernel not wider and taller than 3,
/// batch 1 and at most 20480 input elements, "for some case, native is faster". False for any
/// other layer; the precision is the caller's to check.
bool torch_runs_natively(const Network& network, const Layer& layer);

/// Totals of the layers of one class, for one forward pass of the whole batch.
struct LayerClassTotals {
  double macs = 0;   ///< multiply-accumulates
  double bytes = 0;  ///< bytes moved: every input, the weights and the output, read or written once
  int count = 0;     ///< layers
};

/// Machine balances (FLOP per byte) of the per-layer roofline sums (docs/features.md).
inline constexpr std::array<double, 3> kRooflineBalances = {4.0, 16.0, 64.0};

/// Analytic features of a configuration, for one forward pass of the whole batch.
struct Features {
  std::int64_t params = 0;       ///< learnable parameters (conv weights, batch-norm affine, fc)
  std::int64_t macs = 0;         ///< multiply-accumulates of conv and fc layers, whole batch
  std::int64_t flops = 0;        ///< 2 x macs
  std::int64_t param_bytes = 0;  ///< params x element bytes of the precision
  /// Bytes of every conv and fc output (fvcore's and timm's activation convention), whole batch.
  std::int64_t activation_bytes = 0;
  /// Largest sum of live activation buffers in execution order, input included, for an engine
  /// that folds batch-norm and runs ReLU and add in place (docs/features.md).
  std::int64_t peak_activation_bytes = 0;
  /// Bytes of the activation arena carb's engines plan (engine_plan.hpp: fused kernels, in-place
  /// sums, best-fit placement), in plain layouts: no channel padding, no alignment.
  std::int64_t engine_arena_bytes = 0;
  /// Prepare's high-water mark on carb's CPU engine, in plain layouts: engine_arena_bytes plus
  /// the weights loaded layer by layer with each conv's or fc layer's parameters staged once more
  /// as float32, or plus all the weights and the input as float32 (docs/features.md).
  std::int64_t prepare_peak_bytes = 0;
  /// MACs of the convolutions that PyTorch 1.13's CPU dispatch runs on its native path rather
  /// than oneDNN when it has more than one thread: float32, batch 1, one group, a kernel of at
  /// most 3 and an input of at most 20480 elements (docs/features.md); 0 otherwise.
  std::int64_t torch_native_macs = 0;
  double arithmetic_intensity = 0;  ///< flops / (param_bytes + activation_bytes), FLOP per byte
  LayerCounts layer_counts;
  int widest_channels = 0;  ///< most output channels of any conv layer
  int kernel_launches = 0;  ///< one per IR layer, as PyTorch eager launches them
  int output_channels = 0;  ///< channels of the network's output (a classifier's classes)
  /// Per layer class (LayerClass's order): MACs, bytes moved and layer count.
  std::array<LayerClassTotals, kLayerClassCount> layer_classes{};
  /// Per machine balance B of kRooflineBalances: the sum over layers of max(FLOPs, B x bytes
  /// moved), in FLOP: a roofline time in units of the peak's FLOP, layer by layer.
  std::array<double, kRooflineBalances.size()> roofline_flops{};
};

/// Features of a built network.
Features compute_features(const Network& network);

/// A device for the roofline model.
struct RooflineDevice {
  double peak_flops_per_s = 0;       ///< peak arithmetic throughput, FLOP/s
  double bandwidth_bytes_per_s = 0;  ///< memory bandwidth, B/s
};

/// Parses "TFLOPS:GBPS" (e.g. "67:3350"); throws carb::Error (usage) on bad text.
RooflineDevice parse_roofline_device(std::string_view text);

/// Roofline time of a network, ms: the sum over layers of max(FLOPs / peak, bytes / bandwidth),
/// each layer reading its inputs and weights and writing its output (eager execution).
double roofline_ms(const Network& network, const RooflineDevice& device);

/// Features of a space's points by index, fast: everything that depends only on the
/// architecture and resolution is computed once per (architecture, resolution) pair and scaled
/// by batch and precision. Not thread-safe (it caches).
class SpaceFeatures {
 public:
  explicit SpaceFeatures(const Space& space);
  ~SpaceFeatures();
  SpaceFeatures(const SpaceFeatures&) = delete;
  SpaceFeatures& operator=(const SpaceFeatures&) = delete;

  /// Features of the point at `index`.
  Features at(std::uint64_t index);
  /// The configuration of the point at `index` (Space::at's), valid until the next call:
  /// consecutive points of one architecture and resolution build no new configuration.
  const Config& config_at(std::uint64_t index);
  /// Empty when the point meets every constraint of the space, else the first one it breaks.
  std::string violated_constraint(std::uint64_t index);

 private:
  struct Cache;
  const Space& space_;
  std::unique_ptr<Cache> cache_;
};

/// How a sample of a space is drawn: uniformly at random (sample_random) or balanced over every
/// knob (sample_stratified).
enum class Sampling { kRandom, kStratified };
std::string_view to_string(Sampling sampling);
/// "random" or "stratified"; nullopt for any other text.
std::optional<Sampling> parse_sampling(std::string_view text);

/// The filter that accepts the points of `space` meeting its constraints (features's
/// violated_constraint), or an empty filter (accept all) when it has none. It refers to both.
IndexFilter constraint_filter(const Space& space, SpaceFeatures& features);

/// `count` distinct points of `space` that meet its constraints, drawn as `sampling` says, in
/// draw order; every such point when it has no more.
std::vector<std::uint64_t> sample_points(const Space& space, SpaceFeatures& features,
                                         std::uint64_t count, std::uint64_t seed,
                                         Sampling sampling);

/// The points of `space` that meet its constraints: its size when it has none, else counted by
/// walking it; nullopt when that walk would check more than `max_walk` grid points.
std::optional<std::uint64_t> count_points(const Space& space, SpaceFeatures& features,
                                          std::uint64_t max_walk);

/// A scalar analytic feature: its name, as specs' constraints, `carb export`, `carb space
/// features` and `carb screen --maximize` spell it, and the member of Features that holds it.
/// kScalarFeatures is the one list of them: a feature added there (after its member of Features
/// and its computation) reaches all of those places; tests/graph/feature_list_test.cpp checks
/// that they agree.
struct ScalarFeature {
  std::string_view name;
  std::int64_t Features::*integer = nullptr;  ///< an integer-valued feature, or
  double Features::*real = nullptr;           ///< a real-valued one
  double value(const Features& features) const {
    return integer != nullptr ? static_cast<double>(features.*integer) : features.*real;
  }
};
inline constexpr std::array<ScalarFeature, 7> kScalarFeatures = {{
    {"params", &Features::params, nullptr},
    {"macs", &Features::macs, nullptr},
    {"flops", &Features::flops, nullptr},
    {"param_bytes", &Features::param_bytes, nullptr},
    {"activation_bytes", &Features::activation_bytes, nullptr},
    {"peak_activation_bytes", &Features::peak_activation_bytes, nullptr},
    {"arithmetic_intensity", nullptr, &Features::arithmetic_intensity},
}};

/// The value of a scalar feature by its name ("params", "macs", ...); nullopt if unknown.
std::optional<double> feature_value(const Features& features, std::string_view name);

/// Past this many grid points, a space with constraints is not walked to count its points
/// (count_points' `max_walk` where carb counts a space: `carb space count`, the Python module).
inline constexpr std::uint64_t kCountWalkLimit = 1'000'000'000;

/// The column of a feature row holding the count of layers of `kind`: "conv_layers", ...
std::string_view layer_count_column(LayerKind kind);

/// Which columns for_each_feature_column visits.
struct FeatureColumnOptions {
  bool text = true;      ///< the text columns: key, stage_blocks, stage_widths
  bool features = true;  ///< the analytic features; false: the key and the knobs only
  const RooflineDevice* roofline = nullptr;  ///< adds roofline_ms on this device
};

/// The name of a configuration's imported architecture (its file's stem); a ResNet has none.
std::optional<std::string> architecture_name(const Config& config);

/// The one definition of a configuration's feature row: the columns `carb space features`,
/// `space list` (knobs only) and `space show` print and the Python module's frames and arrays
/// hold, in order: key, architecture, block, depth, width, early_downsample, resolution, batch,
/// precision, the kScalarFeatures, stage_blocks, stage_widths, classes, widest_channels,
/// kernel_launches, a count per layer kind (layer_count_column) and roofline_ms. Calls
/// `column(name, value)` for each, where `value()` computes the cell: std::string (text),
/// BlockType, Precision, int, std::int64_t, double or bool, or std::optional of BlockType, double
/// or bool for the ResNet knobs an imported architecture does not have (nullopt for it), and
/// std::optional<std::string> for the architecture's name, which a ResNet does not have. An
/// imported architecture's depth is its weighted layers (convs and fc) and its classes its output
/// channels, as the model's features count them (docs/features.md). Nothing is computed unless
/// `value` is called, so a visitor learns the names and types from any configuration (a default
/// one) without one at hand.
template <typename Column>
void for_each_feature_column(const Config& config, const Features& features,
                             const FeatureColumnOptions& options, Column&& column) {
  const bool resnet = !config.imported();
  if (options.text) {
    column(std::string_view("key"), [&] { return to_key(config); });
    column(std::string_view("architecture"), [&] { return architecture_name(config); });
  }
  column(std::string_view("block"),
         [&] { return resnet ? std::optional<BlockType>(config.block) : std::nullopt; });
  column(std::string_view("depth"), [&] {
    return resnet ? config.depth()
                  : static_cast<int>(features.layer_counts[LayerKind::kConv] +
                                     features.layer_counts[LayerKind::kFullyConnected]);
  });
  column(std::string_view("width"),
         [&] { return resnet ? std::optional<double>(config.width_multiplier) : std::nullopt; });
  column(std::string_view("early_downsample"),
         [&] { return resnet ? std::optional<bool>(config.early_downsample) : std::nullopt; });
  column(std::string_view("resolution"), [&] { return config.resolution; });
  column(std::string_view("batch"), [&] { return config.batch; });
  column(std::string_view("precision"), [&] { return config.precision; });
  if (!options.features) return;
  for (const ScalarFeature& feature : kScalarFeatures) {
    if (feature.integer != nullptr) {
      column(feature.name, [&] { return features.*feature.integer; });
    } else {
      column(feature.name, [&] { return features.*feature.real; });
    }
  }
  if (options.text) {
    column(std::string_view("stage_blocks"), [&] { return dotted_list(config.stage_blocks); });
    column(std::string_view("stage_widths"), [&] { return dotted_list(config.stage_widths); });
  }
  column(std::string_view("classes"),
         [&] { return resnet ? config.classes : static_cast<int>(features.output_channels); });
  column(std::string_view("widest_channels"), [&] { return features.widest_channels; });
  column(std::string_view("kernel_launches"), [&] { return features.kernel_launches; });
  for (std::size_t kind = 0; kind < features.layer_counts.by_kind.size(); ++kind) {
    column(layer_count_column(static_cast<LayerKind>(kind)),
           [&] { return features.layer_counts.by_kind[kind]; });
  }
  if (options.roofline != nullptr) {
    column(std::string_view("roofline_ms"),
           [&] { return roofline_ms(build_network(config), *options.roofline); });
  }
}

/// The names of for_each_feature_column's columns with `options`, in order.
std::vector<std::string> feature_column_names(const FeatureColumnOptions& options);

/// The one definition of a layer's row in `carb space show --layers` and the Python module's
/// `layers()`: layer (torchvision's name), kind, input_shape, output_shape, kernel, stride,
/// padding, params, macs, in_place. Calls `column(name, value)` as for_each_feature_column
/// does: `value()` gives std::string, int, std::int64_t or bool.
template <typename Column>
void for_each_layer_column(const Network& network, const Layer& layer, Column&& column) {
  column(std::string_view("layer"), [&] { return layer_name(layer); });
  column(std::string_view("kind"), [&] { return std::string(to_string(layer.kind)); });
  column(std::string_view("input_shape"), [&] { return input_shapes(network, layer); });
  column(std::string_view("output_shape"),
         [&] { return to_string(network.tensors[static_cast<std::size_t>(layer.output)]); });
  column(std::string_view("kernel"), [&] { return layer.kernel; });
  column(std::string_view("stride"), [&] { return layer.stride; });
  column(std::string_view("padding"), [&] { return layer.padding; });
  column(std::string_view("params"), [&] { return layer.params; });
  column(std::string_view("macs"), [&] { return layer.macs; });
  column(std::string_view("in_place"), [&] { return layer.in_place; });
}

}  // namespace carb
