// Configurations, depth rules and canonical keys.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <numeric>

#include "carb/error.hpp"
#include "carb/space.hpp"

namespace carb {

std::string_view to_string(BlockType block) {
  return block == BlockType::kBasic ? "basic" : "bottleneck";
}

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
  }
  return "?";
}

std::optional<BlockType> parse_block_type(std::string_view text) {
  if (text == "basic") return BlockType::kBasic;
  if (text == "bottleneck") return BlockType::kBottleneck;
  return std::nullopt;
}

std::optional<Precision> parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "fp16") return Precision::kFp16;
  if (text == "bf16") return Precision::kBf16;
  return std::nullopt;
}

int element_bytes(Precision precision) { return precision == Precision::kFp32 ? 4 : 2; }

int convs_per_block(BlockType block) { return block == BlockType::kBasic ? 2 : 3; }

int block_expansion(BlockType block) { return block == BlockType::kBasic ? 1 : 4; }

const std::vector<int>& default_stage_widths() {
  static const std::vector<int> widths = {64, 128, 256, 512};
  return widths;
}

int Config::depth() const { return imported() ? 0 : depth_of(block, stage_blocks); }

int Config::stage_channels(int stage) const {
  const double scaled = stage_widths.at(static_cast<std::size_t>(stage)) * width_multiplier;
  return std::max(1, static_cast<int>(std::lround(scaled)));
}

int depth_of(BlockType block, const std::vector<int>& stage_blocks) {
  const int blocks = std::accumulate(stage_blocks.begin(), stage_blocks.end(), 0);
  return convs_per_block(block) * blocks + 2;
}

namespace {

// torchvision's and timm's block counts for their named depths.
const std::map<std::pair<BlockType, int>, std::vector<int>>& standard_depths() {
  static const std::map<std::pair<BlockType, int>, std::vector<int>> table = {
      {{BlockType::kBasic, 10}, {1, 1, 1, 1}},
      {{BlockType::kBasic, 18}, {2, 2, 2, 2}},
      {{BlockType::kBasic, 34}, {3, 4, 6, 3}},
      {{BlockType::kBottleneck, 14}, {1, 1, 1, 1}},
      {{BlockType::kBottleneck, 26}, {2, 2, 2, 2}},
      {{BlockType::kBottleneck, 50}, {3, 4, 6, 3}},
      {{BlockType::kBottleneck, 101}, {3, 4, 23, 3}},
      {{BlockType::kBottleneck, 152}, {3, 8, 36, 3}},
      {{BlockType::kBottleneck, 200}, {3, 24, 36, 3}},
  };
  return table;
}

}  // namespace

std::optional<std::vector<int>> stage_blocks_for_depth(BlockType block, int depth,
                                                       std::string* why) {
  const auto& table = standard_depths();
  if (auto found = table.find({block, depth}); found != table.end()) return found->second;
  const int per_block = convs_per_block(block);
  constexpr int kStages = 4;
  const int min_depth = per_block * kStages + 2;
  if (depth < min_depth || (depth - 2) % per_block != 0) {
    if (why != nullptr) {
      *why = "depth " + std::to_string(depth) + " cannot be built from " +
             std::string(to_string(block)) + " blocks: it must be " + std::to_string(per_block) +
             " x blocks + 2 with at least one block in each of 4 stages (>= " +
             std::to_string(min_depth) + ")";
    }
    return std::nullopt;
  }
  const int blocks = (depth - 2) / per_block;
  constexpr std::array<int, kStages> kWeights = {3, 4, 6, 3};
  constexpr int kWeightSum = 16;
  std::vector<int> counts(kStages);
  std::array<double, kStages> quota{};
  int assigned = 0;
  for (int stage = 0; stage < kStages; ++stage) {
    quota[stage] = static_cast<double>(blocks) * kWeights[stage] / kWeightSum;
    counts[stage] = std::max(1, static_cast<int>(std::floor(quota[stage])));
    assigned += counts[stage];
  }
  // Largest remainder first; ties go to the earlier stage.
  while (assigned < blocks) {
    int best = 0;
    for (int stage = 1; stage < kStages; ++stage) {
      if (quota[stage] - counts[stage] > quota[best] - counts[best]) best = stage;
    }
    ++counts[best];
    ++assigned;
  }
  while (assigned > blocks) {
    int best = -1;
    for (int stage = 0; stage < kStages; ++stage) {
      if (counts[stage] > 1 &&
          (best < 0 || counts[stage] - quota[stage] > counts[best] - quota[best])) {
        best = stage;
      }
    }
    --counts[best];
    --assigned;
  }
  return counts;
}

int downsampling_factor(bool early_downsample, int stages) {
  return (early_downsample ? 4 : 1) * (1 << (stages - 1));
}

namespace {

constexpr int kMaxStages = 8;
constexpr int kMaxBlocksPerStage = 256;
constexpr int kMaxChannels = 65536;
constexpr int kMaxResolution = 8192;
constexpr int kMaxBatch = 65536;
constexpr int kMaxClasses = 1000000;
constexpr double kMaxWidthMultiplier = 64.0;

}  // namespace

namespace {

std::string batch_invalid_reason(int batch) {
  if (batch >= 1 && batch <= kMaxBatch) return {};
  return "batch must be 1.." + std::to_string(kMaxBatch) + ", not " + std::to_string(batch);
}

bool is_architecture_hash(std::string_view text) {
  return text.size() == 16 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// What an imported configuration can be checked for without its graph: the rest (whether its
// shapes fit at the resolution) is build_network's.
std::string imported_invalid_reason(const Config& config) {
  if (!is_architecture_hash(config.architecture)) {
    return "architecture hash '" + config.architecture + "' is not 16 hex digits";
  }
  if (config.resolution < 1 || config.resolution > kMaxResolution) {
    return "resolution must be 1.." + std::to_string(kMaxResolution) + ", not " +
           std::to_string(config.resolution);
  }
  return batch_invalid_reason(config.batch);
}

}  // namespace

std::string invalid_reason(const Config& config) {
  if (config.imported()) return imported_invalid_reason(config);
  const int stages = static_cast<int>(config.stage_blocks.size());
  if (stages < 1 || stages > kMaxStages) {
    return "a network has 1 to " + std::to_string(kMaxStages) + " stages, not " +
           std::to_string(stages);
  }
  if (config.stage_widths.size() != config.stage_blocks.size()) {
    return std::to_string(stages) + " stages of blocks but " +
           std::to_string(config.stage_widths.size()) + " stage widths";
  }
  for (int blocks : config.stage_blocks) {
    if (blocks < 1 || blocks > kMaxBlocksPerStage) {
      return "blocks per stage must be 1.." + std::to_string(kMaxBlocksPerStage) + ", not " +
             std::to_string(blocks);
    }
  }
  for (int width : config.stage_widths) {
    if (width < 1 || width > kMaxChannels) {
      return "stage width must be 1.." + std::to_string(kMaxChannels) + ", not " +
             std::to_string(width);
    }
  }
  if (!(config.width_multiplier > 0) || config.width_multiplier > kMaxWidthMultiplier) {
    return "width multiplier must be > 0 and <= 64";
  }
  for (int stage = 0; stage < stages; ++stage) {
    if (config.stage_channels(stage) * block_expansion(config.block) > kMaxChannels) {
      return "stage " + std::to_string(stage + 1) + " would have more than " +
             std::to_string(kMaxChannels) + " channels";
    }
  }
  const int factor = downsampling_factor(config.early_downsample, stages);
  if (config.resolution < factor || config.resolution > kMaxResolution) {
    return "resolution " + std::to_string(config.resolution) + " is too small for " +
           (config.early_downsample ? "early downsampling and " : "") + std::to_string(stages) +
           " stages: needs at least " + std::to_string(factor) + " px" +
           (config.resolution > kMaxResolution ? " and at most 8192" : "");
  }
  if (std::string why = batch_invalid_reason(config.batch); !why.empty()) return why;
  if (config.classes < 1 || config.classes > kMaxClasses) {
    return "classes must be 1.." + std::to_string(kMaxClasses) + ", not " +
           std::to_string(config.classes);
  }
  return {};
}

namespace {

std::string format_number(double value) {
  std::array<char, 32> buffer{};
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  CARB_CHECK(ec == std::errc(), "to_chars failed");
  return std::string(buffer.data(), end);
}

}  // namespace

std::string dotted_list(const std::vector<int>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += '.';
    text += std::to_string(values[i]);
  }
  return text;
}

std::string to_key(const Config& config) {
  if (config.imported()) {
    std::string key(kImportedKeyPrefix);
    key += config.architecture;
    key += "_r" + std::to_string(config.resolution) + "_b" + std::to_string(config.batch) + "_";
    key += to_string(config.precision);
    return key;
  }
  std::string key(to_string(config.block));
  const int depth = config.depth();
  key += std::to_string(depth);
  const auto rule = stage_blocks_for_depth(config.block, depth);
  if (!rule || *rule != config.stage_blocks) key += "s" + dotted_list(config.stage_blocks);
  if (config.stage_widths != default_stage_widths()) key += "_c" + dotted_list(config.stage_widths);
  key += "_w" + format_number(config.width_multiplier);
  key += config.early_downsample ? "_ds" : "_nods";
  key += "_r" + std::to_string(config.resolution);
  key += "_b" + std::to_string(config.batch);
  key += "_";
  key += to_string(config.precision);
  if (config.classes != kDefaultClasses) key += "_k" + std::to_string(config.classes);
  return key;
}

namespace {

class KeyParser {
 public:
  explicit KeyParser(std::string_view key) : key_(key) {}

  Config parse() {
    if (key_.empty()) fail("empty key");
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    while (true) {
      const std::size_t end = key_.find('_', start);
      fields.push_back(key_.substr(start, end == std::string_view::npos ? end : end - start));
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
    Config config;
    if (fields[0].starts_with(kImportedKeyPrefix)) return parse_imported(fields);
    parse_structure(fields[0], config);
    std::size_t next = 1;
    config.stage_widths = default_stage_widths();
    if (next < fields.size() && fields[next].starts_with("c")) {
      config.stage_widths = parse_int_list(fields[next].substr(1), "stage widths");
      ++next;
    }
    config.width_multiplier = parse_double(expect(fields, next++, 'w', "width (w<mult>)"), "width");
    const std::string_view downsample = field(fields, next++, "ds or nods");
    if (downsample == "ds") {
      config.early_downsample = true;
    } else if (downsample == "nods") {
      config.early_downsample = false;
    } else {
      fail("expected ds or nods, got '" + std::string(downsample) + "'");
    }
    next = parse_run(fields, next, config);
    if (next < fields.size() && fields[next].starts_with("k")) {
      config.classes = parse_int(fields[next].substr(1), "classes");
      ++next;
    }
    if (next < fields.size()) fail("unexpected field '" + std::string(fields[next]) + "'");
    if (config.stage_widths.size() != config.stage_blocks.size()) {
      fail(std::to_string(config.stage_blocks.size()) + " stages of blocks but " +
           std::to_string(config.stage_widths.size()) + " stage widths (give _c<w>.<w>...)");
    }
    if (const std::string why = invalid_reason(config); !why.empty()) fail(why);
    return config;
  }

 private:
  // `graph-<hash>_r<res>_b<batch>_<precision>`.
  Config parse_imported(const std::vector<std::string_view>& fields) const {
    Config config;
    config.architecture = std::string(fields[0].substr(kImportedKeyPrefix.size()));
    if (!is_architecture_hash(config.architecture)) {
      fail("architecture hash '" + config.architecture + "' is not 16 lower-case hex digits");
    }
    const std::size_t next = parse_run(fields, 1, config);
    if (next < fields.size()) fail("unexpected field '" + std::string(fields[next]) + "'");
    if (const std::string why = invalid_reason(config); !why.empty()) fail(why);
    return config;
  }

  // Resolution, batch and precision from fields[next]; returns the field after them.
  std::size_t parse_run(const std::vector<std::string_view>& fields, std::size_t next,
                        Config& config) const {
    config.resolution = parse_int(expect(fields, next++, 'r', "resolution (r<px>)"), "resolution");
    config.batch = parse_int(expect(fields, next++, 'b', "batch (b<n>)"), "batch");
    const std::string_view precision = field(fields, next++, "precision (fp32, fp16 or bf16)");
    const auto parsed_precision = parse_precision(precision);
    if (!parsed_precision) {
      fail("unknown precision '" + std::string(precision) + "' (fp32, fp16 or bf16)");
    }
    config.precision = *parsed_precision;
    return next;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw Error(ErrorCategory::kInput, "key '" + std::string(key_) + "': " + message);
  }

  std::string_view field(const std::vector<std::string_view>& fields, std::size_t index,
                         const std::string& what) const {
    if (index >= fields.size()) fail("missing " + what);
    return fields[index];
  }

  std::string_view expect(const std::vector<std::string_view>& fields, std::size_t index,
                          char prefix, const std::string& what) const {
    const std::string_view text = field(fields, index, what);
    if (text.empty() || text[0] != prefix) {
      fail("expected " + what + ", got '" + std::string(text) + "'");
    }
    return text.substr(1);
  }

  int parse_int(std::string_view text, const std::string& what) const {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      fail(what + " '" + std::string(text) + "' is not an integer");
    }
    return value;
  }

  double parse_double(std::string_view text, const std::string& what) const {
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
        !std::isfinite(value)) {
      fail(what + " '" + std::string(text) + "' is not a number");
    }
    return value;
  }

  std::vector<int> parse_int_list(std::string_view text, const std::string& what) const {
    std::vector<int> values;
    std::size_t start = 0;
    while (true) {
      const std::size_t end = text.find('.', start);
      values.push_back(
          parse_int(text.substr(start, end == std::string_view::npos ? end : end - start), what));
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
    return values;
  }

  void parse_structure(std::string_view text, Config& config) const {
    std::size_t digits = 0;
    while (digits < text.size() && !std::isdigit(static_cast<unsigned char>(text[digits]))) {
      ++digits;
    }
    const auto block = parse_block_type(text.substr(0, digits));
    if (!block) {
      fail("unknown block type '" + std::string(text.substr(0, digits)) +
           "' (basic or bottleneck)");
    }
    config.block = *block;
    const std::string_view rest = text.substr(digits);
    const std::size_t s = rest.find('s');
    const int depth = parse_int(rest.substr(0, s), "depth");
    if (s != std::string_view::npos) {
      config.stage_blocks = parse_int_list(rest.substr(s + 1), "stage blocks");
      if (config.stage_blocks.size() > static_cast<std::size_t>(kMaxStages)) {
        fail("a network has 1 to " + std::to_string(kMaxStages) + " stages");
      }
      for (int blocks : config.stage_blocks) {
        if (blocks < 1 || blocks > kMaxBlocksPerStage) {
          fail("blocks per stage must be 1.." + std::to_string(kMaxBlocksPerStage) + ", not " +
               std::to_string(blocks));
        }
      }
      if (depth_of(config.block, config.stage_blocks) != depth) {
        fail("depth " + std::to_string(depth) + " does not match stage blocks " +
             dotted_list(config.stage_blocks) + " (which give depth " +
             std::to_string(depth_of(config.block, config.stage_blocks)) + ")");
      }
    } else {
      std::string why;
      auto blocks = stage_blocks_for_depth(config.block, depth, &why);
      if (!blocks) fail(why);
      config.stage_blocks = *blocks;
    }
  }

  std::string_view key_;
};

}  // namespace

Config parse_key(std::string_view key) { return KeyParser(key).parse(); }

}  // namespace carb
