// Design spaces of ResNet-style CNNs: configurations, canonical keys, YAML specs, enumeration by
// index (mixed radix) and sampling. Nothing here materialises a space.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace carb {

/// Residual block type of a ResNet (torchvision's BasicBlock and Bottleneck v1.5).
enum class BlockType { kBasic, kBottleneck };
/// Numeric precision of weights and activations.
enum class Precision { kFp32, kFp16, kBf16 };

std::string_view to_string(BlockType block);
std::string_view to_string(Precision precision);
std::optional<BlockType> parse_block_type(std::string_view text);
std::optional<Precision> parse_precision(std::string_view text);
/// Bytes per element: 4 for fp32, 2 for fp16 and bf16.
int element_bytes(Precision precision);
/// Convolutions per residual block: 2 for basic, 3 for bottleneck.
int convs_per_block(BlockType block);
/// Output channels of a block relative to its planes: 1 for basic, 4 for bottleneck.
int block_expansion(BlockType block);

/// Classifier outputs unless a spec says otherwise (ImageNet).
inline constexpr int kDefaultClasses = 1000;
/// Base stage widths (channels before the width multiplier) of torchvision's ResNets.
const std::vector<int>& default_stage_widths();

/// Prefix of an imported architecture's part of a key: `graph-<hash>_r224_b1_fp32` (docs/keys.md).
inline constexpr std::string_view kImportedKeyPrefix = "graph-";

/// One CNN configuration: the architecture plus how it is run (resolution, batch, precision).
/// The architecture is a ResNet of the fields below, or, when `architecture` is set, a network
/// imported from a model file (docs/onnx.md), whose ResNet fields are then unused.
struct Config {
  BlockType block = BlockType::kBasic;
  std::vector<int> stage_blocks;  ///< residual blocks per stage; its size is the stage count
  std::vector<int> stage_widths;  ///< base channels per stage, before the width multiplier
  double width_multiplier = 1.0;
  bool early_downsample =
      true;              ///< stem 7x7 stride-2 conv + 3x3 stride-2 max-pool, else 3x3 stride-1
  int resolution = 224;  ///< square input, pixels
  int batch = 1;
  Precision precision = Precision::kFp32;
  int classes = kDefaultClasses;
  /// An imported architecture's content hash (16 hex digits), or empty for a ResNet.
  std::string architecture;

  bool imported() const { return !architecture.empty(); }
  /// Weighted layers: convs_per_block x blocks + stem conv + fc (torchvision's naming); 0 for an
  /// imported architecture.
  int depth() const;
  /// Channels of stage `stage`'s planes after the width multiplier: max(1, round(base x
  /// multiplier)).
  int stage_channels(int stage) const;
  bool operator==(const Config& other) const = default;
};

/// Depth of a network with these per-stage block counts.
int depth_of(BlockType block, const std::vector<int>& stage_blocks);
/// The four per-stage block counts carb uses for `depth`: torchvision's/timm's table for standard
/// depths, otherwise the largest-remainder split of the blocks in the ratio 3:4:6:3 (each stage
/// >= 1). Returns nullopt and sets `why` when the block type cannot build that depth.
std::optional<std::vector<int>> stage_blocks_for_depth(BlockType block, int depth,
                                                       std::string* why = nullptr);
/// Total downsampling factor of the network: (early downsampling ? 4 : 1) x 2^(stages - 1).
int downsampling_factor(bool early_downsample, int stages);
/// Empty when the configuration can be built, else the reason it cannot.
std::string invalid_reason(const Config& config);

/// Integers joined by '.', as keys spell per-stage lists: "2.2.2.2".
std::string dotted_list(const std::vector<int>& values);

/// The canonical key of a configuration, e.g. `basic18_w1_ds_r224_b1_fp32`. Grammar (docs/keys.md):
/// `<block><depth>[s<b>.<b>...][_c<w>.<w>...]_w<mult>_<ds|nods>_r<res>_b<batch>_<prec>[_k<classes>]`,
/// or for an imported architecture `graph-<hash>_r<res>_b<batch>_<prec>`.
std::string to_key(const Config& config);
/// Parses any spelling of a key (e.g. `w1.0`) into its configuration; throws carb::Error (input)
/// naming the key and what is wrong.
Config parse_key(std::string_view key);

/// A knob of a space: one axis of the mixed-radix index.
enum class Knob {
  kStructure,    ///< (block type, depth) pairs, when the spec lists depths
  kBlock,        ///< block type, when the spec lists per-stage block counts
  kStageBlocks,  ///< block count of one stage
  kWidth,        ///< width multiplier
  kStageWidth,   ///< base width of one stage
  kEarlyDownsample,
  kResolution,
  kBatch,
  kPrecision,
  kModel,  ///< an imported architecture, when the spec lists model files (Space::models())
};

/// One axis of a space: its knob, the stage it belongs to (or -1) and its values as numbers
/// (enums and booleans as integers; structures as indices into Space::structures()).
struct Axis {
  Knob knob = Knob::kWidth;
  int stage = -1;
  std::string name;  ///< e.g. "depth", "stage3_blocks", "batch"
  std::vector<double> values;
  std::vector<std::string> labels;  ///< human-readable value names, same order as values
};

/// A (block type, depth) pair and its per-stage block counts.
struct Structure {
  BlockType block = BlockType::kBasic;
  int depth = 0;
  std::vector<int> stage_blocks;
};

/// A model file a spec lists as an architecture (docs/onnx.md): imported and registered when the
/// spec is read.
struct ImportedModel {
  std::string path;  ///< as the spec names it, resolved against the spec's directory
  std::string hash;  ///< the architecture's content hash (Config::architecture)
  std::string name;  ///< for people, e.g. "mobilenet_v2"
};

/// Imports a model file a spec lists, registers its architecture and checks that it builds at
/// each of `resolutions`; throws carb::Error (input) saying why not. The graph module provides
/// it (set_model_importer); a program without it cannot read specs that list models.
using ModelImporter = ImportedModel (*)(const std::string& path, const std::vector<int>& resolutions);
void set_model_importer(ModelImporter importer);

/// An upper bound on an analytic feature, evaluated by the graph module (e.g. max_params).
struct Constraint {
  std::string feature;  ///< "params", "macs", "flops", "param_bytes" or "peak_activation_bytes"
  double max_value = 0;
};

/// A design space: the cartesian product of its axes. Index 0 is the first value of every axis;
/// the last axis (precision) varies fastest, then batch, then resolution, so consecutive indices
/// share an architecture.
class Space {
 public:
  /// Parses a YAML spec file; throws carb::Error with file:line:column on any problem.
  static Space from_file(const std::string& path);
  /// Parses YAML text; `source_name` is used in error messages.
  static Space from_yaml(const std::string& text, const std::string& source_name);

  const std::string& name() const { return name_; }
  /// Number of grid points, constraints not applied.
  std::uint64_t size() const { return size_; }
  const std::vector<Axis>& axes() const { return axes_; }
  const std::vector<Structure>& structures() const { return structures_; }
  /// The model files it lists as architectures (a spec of imported networks), else empty.
  const std::vector<ImportedModel>& models() const { return models_; }
  const std::vector<Constraint>& constraints() const { return constraints_; }
  int classes() const { return classes_; }

  /// Axis digits of an index, most significant (first axis) first.
  std::vector<int> digits(std::uint64_t index) const;
  /// The configuration at `index` (< size()).
  Config at(std::uint64_t index) const;
  /// The index of a configuration in this space, or nullopt when it is not a point of the grid.
  std::optional<std::uint64_t> index_of(const Config& config) const;
  /// Grid points per (architecture, resolution) pair: the product of the batch and precision
  /// axes. `index / points_per_architecture_resolution()` numbers the distinct pairs.
  std::uint64_t points_per_architecture_resolution() const { return points_per_arch_res_; }

 private:
  std::string name_;
  int classes_ = kDefaultClasses;
  std::vector<int> fixed_stage_widths_;
  std::vector<Axis> axes_;
  std::vector<Structure> structures_;
  std::vector<ImportedModel> models_;
  std::vector<Constraint> constraints_;
  std::uint64_t size_ = 0;
  std::uint64_t points_per_arch_res_ = 1;

  friend class SpecParser;
};

/// Accepts or rejects a grid index (e.g. a constraint check); empty means accept all.
using IndexFilter = std::function<bool(std::uint64_t)>;

/// `count` distinct indices drawn uniformly at random (seeded, identical on every platform),
/// or every accepted index when the space has no more. Order is the draw order.
std::vector<std::uint64_t> sample_random(const Space& space, std::uint64_t count,
                                         std::uint64_t seed, const IndexFilter& accept = {});
/// `count` distinct indices whose values are balanced over every knob: each knob's values occur
/// equally often (within one), depths balanced within each block type (a Latin-hypercube design).
std::vector<std::uint64_t> sample_stratified(const Space& space, std::uint64_t count,
                                             std::uint64_t seed, const IndexFilter& accept = {});

}  // namespace carb
