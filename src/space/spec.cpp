// The YAML design-space spec: parsing with file:line:column errors, and the mixed-radix index.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "carb/error.hpp"
#include "carb/space.hpp"

namespace carb {

namespace {

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> keys = {
      "name",         "description", "classes",          "block",      "depth", "stage_blocks",
      "stage_widths", "width",       "early_downsample", "resolution", "batch", "precision",
      "constraints",  "models"};
  return keys;
}

const std::vector<std::string>& known_constraints() {
  static const std::vector<std::string> keys = {"max_params",
                                                "max_macs",
                                                "max_flops",
                                                "max_param_bytes",
                                                "max_activation_bytes",
                                                "max_peak_activation_bytes"};
  return keys;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : ", ") + word;
  return text;
}

ModelImporter& installed_importer() {
  static ModelImporter importer = nullptr;
  return importer;
}

}  // namespace

void set_model_importer(ModelImporter importer) { installed_importer() = importer; }

class SpecParser {
 public:
  explicit SpecParser(std::string source) : source_(std::move(source)) {}

  Space parse(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& error) {
      throw input_error_at(source_, error.mark.line + 1, error.mark.column + 1,
                           "YAML syntax error: " + error.msg);
    }
    if (!root.IsMap()) {
      fail(root, "a spec is a YAML mapping of knobs (block, depth, width, ...)");
    }
    std::set<std::string> seen;
    for (const auto& entry : root) {
      const std::string key = entry.first.Scalar();
      if (std::find(known_keys().begin(), known_keys().end(), key) == known_keys().end()) {
        fail(entry.first, "unknown knob '" + key + "'" + suggestion(key, known_keys()) +
                              "; known: " + join(known_keys()));
      }
      if (!seen.insert(key).second) fail(entry.first, "'" + key + "' is given twice");
    }

    Space space;
    space.name_ = root["name"] ? scalar_string(root["name"], "name") : source_;
    if (root["description"]) scalar_string(root["description"], "description");
    if (root["models"]) return parse_models(root, space);
    if (root["classes"]) {
      space.classes_ = static_cast<int>(scalar_int(root["classes"], "classes", 1, 1000000));
    }
    if (root["depth"] && root["stage_blocks"]) {
      fail(root["stage_blocks"], "give either depth or stage_blocks, not both");
    }
    if (!root["depth"] && !root["stage_blocks"]) {
      fail_file("missing knob 'depth' (or 'stage_blocks'): which networks does the space hold?");
    }
    if (!root["resolution"]) fail_file("missing knob 'resolution'");

    int stages = 4;
    if (root["depth"]) {
      parse_structures(root, space);
    } else {
      stages = parse_stage_blocks(root, space);
    }
    const int first_width_axis = static_cast<int>(space.axes_.size());
    space.axes_.push_back(parse_number_axis(root["width"], Knob::kWidth, "width", {1.0}));
    for (double multiplier : space.axes_.back().values) {
      if (!(multiplier > 0) || multiplier > 64) {
        fail(root["width"],
             "width multiplier must be > 0 and <= 64, not " + space.axes_.back().labels.front());
      }
    }
    parse_stage_widths(root, stages, space);
    space.axes_.push_back(parse_bool_axis(root["early_downsample"], "early_downsample"));
    space.axes_.push_back(
        parse_int_axis(root["resolution"], Knob::kResolution, "resolution", 1, 8192, {}));
    space.axes_.push_back(parse_int_axis(root["batch"], Knob::kBatch, "batch", 1, 65536, {1}));
    space.axes_.push_back(parse_precision_axis(root["precision"]));
    check_resolutions(root["resolution"], space, stages);
    check_channels(root, space, first_width_axis);
    if (root["constraints"]) parse_constraints(root["constraints"], space);
    finish(space);
    return space;
  }

 private:
  // A spec of imported networks: model files as the architectures, with resolution, batch and
  // precision as knobs over them (docs/spaces.md).
  Space parse_models(const YAML::Node& root, Space& space) const {
    for (const char* knob : {"block", "depth", "stage_blocks", "stage_widths", "width",
                             "early_downsample", "classes"}) {
      if (root[knob]) {
        fail(root[knob], std::string("'") + knob +
                             "' is a ResNet knob; a spec of models has only resolution, batch, "
                             "precision and constraints");
      }
    }
    if (!root["resolution"]) fail_file("missing knob 'resolution'");
    const ModelImporter importer = installed_importer();
    if (importer == nullptr) fail(root["models"], "this program cannot import model files");
    Axis resolution_axis =
        parse_int_axis(root["resolution"], Knob::kResolution, "resolution", 1, 8192, {});
    std::vector<int> resolutions;
    for (double value : resolution_axis.values) resolutions.push_back(static_cast<int>(value));
    Axis axis{Knob::kModel, -1, "model", {}, {}};
    const std::filesystem::path directory = std::filesystem::path(source_).parent_path();
    for (const auto& value : values_of(root["models"], "models")) {
      const std::filesystem::path listed = scalar_string(value, "models");
      const std::string path =
          listed.is_absolute() || directory.empty() ? listed.string() : (directory / listed).string();
      ImportedModel model;
      try {
        model = importer(path, resolutions);
      } catch (const Error& error) {
        fail(value, error.what());
      }
      for (const ImportedModel& other : space.models_) {
        if (other.hash == model.hash) {
          fail(value, "models lists " + other.path + " and " + path +
                          ", one architecture (" + model.hash + ") twice");
        }
      }
      axis.values.push_back(static_cast<double>(space.models_.size()));
      axis.labels.push_back(model.name);
      space.models_.push_back(std::move(model));
    }
    space.axes_.push_back(std::move(axis));
    space.axes_.push_back(std::move(resolution_axis));
    space.axes_.push_back(parse_int_axis(root["batch"], Knob::kBatch, "batch", 1, 65536, {1}));
    space.axes_.push_back(parse_precision_axis(root["precision"]));
    if (root["constraints"]) parse_constraints(root["constraints"], space);
    finish(space);
    return space;
  }

  void finish(Space& space) const {
    space.size_ = 1;
    for (const auto& axis : space.axes_) {
      if (space.size_ > std::numeric_limits<std::uint64_t>::max() / axis.values.size()) {
        fail_file("the space has more than 2^64 points");
      }
      space.size_ *= axis.values.size();
    }
    const std::size_t count = space.axes_.size();
    space.points_per_arch_res_ =
        space.axes_[count - 1].values.size() * space.axes_[count - 2].values.size();
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    const YAML::Mark mark = node.Mark();
    if (mark.line < 0) fail_file(message);
    throw input_error_at(source_, mark.line + 1, mark.column + 1, message);
  }

  [[noreturn]] void fail_file(const std::string& message) const {
    throw input_error_at(source_, 0, 0, message);
  }

  std::string scalar_string(const YAML::Node& node, const std::string& what) const {
    if (!node.IsScalar()) fail(node, what + " must be a single value");
    return node.Scalar();
  }

  long long scalar_int(const YAML::Node& node, const std::string& what, long long min,
                       long long max) const {
    const std::string text = scalar_string(node, what);
    long long value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      fail(node, what + " must be an integer, not '" + text + "'");
    }
    if (value < min || value > max) {
      fail(node,
           what + " must be " + std::to_string(min) + ".." + std::to_string(max) + ", not " + text);
    }
    return value;
  }

  double scalar_double(const YAML::Node& node, const std::string& what) const {
    const std::string text = scalar_string(node, what);
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
        !std::isfinite(value)) {
      fail(node, what + " must be a number, not '" + text + "'");
    }
    return value;
  }

  // A knob's values: a scalar is a one-value list; a list must be non-empty and flat.
  std::vector<YAML::Node> values_of(const YAML::Node& node, const std::string& what) const {
    if (node.IsNull()) fail(node, what + " has no values");
    if (node.IsScalar()) return {node};
    if (!node.IsSequence()) fail(node, what + " must be a value or a list of values");
    if (node.size() == 0) fail(node, what + " is an empty list");
    std::vector<YAML::Node> values;
    for (const auto& value : node) {
      if (!value.IsScalar()) fail(value, what + " values must be single values, not lists");
      values.push_back(value);
    }
    return values;
  }

  template <typename T>
  void add_unique(Axis& axis, std::vector<T>& seen, T value, const YAML::Node& node,
                  const std::string& label) const {
    if (std::find(seen.begin(), seen.end(), value) != seen.end()) {
      fail(node, axis.name + " lists " + label + " twice");
    }
    seen.push_back(value);
    axis.values.push_back(static_cast<double>(value));
    axis.labels.push_back(label);
  }

  Axis parse_int_axis(const YAML::Node& node, Knob knob, const std::string& name, long long min,
                      long long max, const std::vector<int>& defaults, int stage = -1) const {
    Axis axis{knob, stage, name, {}, {}};
    std::vector<long long> seen;
    if (!node) {
      for (int value : defaults)
        add_unique(axis, seen, static_cast<long long>(value), node, std::to_string(value));
      return axis;
    }
    for (const auto& value : values_of(node, name)) {
      add_unique(axis, seen, scalar_int(value, name, min, max), value, value.Scalar());
    }
    return axis;
  }

  Axis parse_number_axis(const YAML::Node& node, Knob knob, const std::string& name,
                         const std::vector<double>& defaults) const {
    Axis axis{knob, -1, name, {}, {}};
    std::vector<double> seen;
    if (!node) {
      for (double value : defaults) {
        std::ostringstream label;
        label << value;
        add_unique(axis, seen, value, node, label.str());
      }
      return axis;
    }
    for (const auto& value : values_of(node, name)) {
      add_unique(axis, seen, scalar_double(value, name), value, value.Scalar());
    }
    return axis;
  }

  Axis parse_bool_axis(const YAML::Node& node, const std::string& name) const {
    Axis axis{Knob::kEarlyDownsample, -1, name, {}, {}};
    std::vector<int> seen;
    if (!node) {
      add_unique(axis, seen, 1, node, "true");
      return axis;
    }
    for (const auto& value : values_of(node, name)) {
      const std::string text = value.Scalar();
      if (text != "true" && text != "false") {
        std::string message = name;
        message += " values are true or false, not '";
        message += text;
        message += "'";
        fail(value, message);
      }
      add_unique(axis, seen, text == "true" ? 1 : 0, value, text);
    }
    return axis;
  }

  Axis parse_precision_axis(const YAML::Node& node) const {
    Axis axis{Knob::kPrecision, -1, "precision", {}, {}};
    std::vector<int> seen;
    if (!node) {
      add_unique(axis, seen, static_cast<int>(Precision::kFp32), node, "fp32");
      return axis;
    }
    for (const auto& value : values_of(node, "precision")) {
      const auto precision = parse_precision(value.Scalar());
      if (!precision) {
        fail(value, "precision '" + value.Scalar() + "' is not fp32, fp16 or bf16");
      }
      add_unique(axis, seen, static_cast<int>(*precision), value, value.Scalar());
    }
    return axis;
  }

  BlockType block_of(const YAML::Node& node) const {
    const auto block = parse_block_type(scalar_string(node, "block"));
    if (!block) {
      fail(node, "block type '" + node.Scalar() + "' is not basic or bottleneck");
    }
    return *block;
  }

  std::vector<BlockType> parse_blocks(const YAML::Node& node) const {
    std::vector<BlockType> blocks;
    for (const auto& value : values_of(node, "block")) {
      const BlockType block = block_of(value);
      if (std::find(blocks.begin(), blocks.end(), block) != blocks.end()) {
        fail(value, "block lists " + value.Scalar() + " twice");
      }
      blocks.push_back(block);
    }
    return blocks;
  }

  void add_structures(const YAML::Node& depths, BlockType block, Space& space) const {
    std::vector<int> seen;
    for (const auto& value : values_of(depths, "depth")) {
      const int depth = static_cast<int>(scalar_int(value, "depth", 1, 100000));
      std::string why;
      auto stage_blocks = stage_blocks_for_depth(block, depth, &why);
      if (!stage_blocks) fail(value, why);
      if (std::find(seen.begin(), seen.end(), depth) != seen.end()) {
        fail(value, "depth lists " + value.Scalar() + " twice");
      }
      seen.push_back(depth);
      space.structures_.push_back({block, depth, *stage_blocks});
    }
  }

  void parse_structures(const YAML::Node& root, Space& space) const {
    const YAML::Node depth = root["depth"];
    Axis axis{Knob::kStructure, -1, "depth", {}, {}};
    if (depth.IsMap()) {
      std::vector<BlockType> listed;
      for (const auto& entry : depth) {
        const BlockType block = block_of(entry.first);
        if (std::find(listed.begin(), listed.end(), block) != listed.end()) {
          fail(entry.first, "depth lists block type " + entry.first.Scalar() + " twice");
        }
        listed.push_back(block);
        add_structures(entry.second, block, space);
      }
      if (root["block"]) {
        std::vector<BlockType> blocks = parse_blocks(root["block"]);
        std::vector<BlockType> sorted_listed = listed;
        std::sort(blocks.begin(), blocks.end());
        std::sort(sorted_listed.begin(), sorted_listed.end());
        if (blocks != sorted_listed) {
          fail(root["block"], "block lists other block types than the keys of depth");
        }
      }
    } else {
      if (!root["block"]) {
        fail(depth, "a plain depth list needs 'block' (or write depth as a map: basic: [...])");
      }
      for (BlockType block : parse_blocks(root["block"])) add_structures(depth, block, space);
    }
    for (std::size_t i = 0; i < space.structures_.size(); ++i) {
      axis.values.push_back(static_cast<double>(i));
      const auto& structure = space.structures_[i];
      axis.labels.push_back(std::string(to_string(structure.block)) +
                            std::to_string(structure.depth));
    }
    space.axes_.push_back(std::move(axis));
  }

  // One entry per stage: a value or a list of values. Returns the stage count.
  std::vector<YAML::Node> stage_entries(const YAML::Node& node, const std::string& what) const {
    if (!node.IsSequence() || node.size() == 0) {
      fail(node, what + " is a list with one entry per stage (a count or a list of counts)");
    }
    if (node.size() > 8) fail(node, what + ": a network has at most 8 stages");
    std::vector<YAML::Node> entries;
    for (const auto& entry : node) entries.push_back(entry);
    return entries;
  }

  int parse_stage_blocks(const YAML::Node& root, Space& space) const {
    if (!root["block"]) fail(root["stage_blocks"], "stage_blocks needs 'block'");
    Axis block_axis{Knob::kBlock, -1, "block", {}, {}};
    for (BlockType block : parse_blocks(root["block"])) {
      block_axis.values.push_back(static_cast<double>(block));
      block_axis.labels.emplace_back(to_string(block));
    }
    space.axes_.push_back(std::move(block_axis));
    const auto entries = stage_entries(root["stage_blocks"], "stage_blocks");
    for (std::size_t stage = 0; stage < entries.size(); ++stage) {
      space.axes_.push_back(parse_int_axis(entries[stage], Knob::kStageBlocks,
                                           "stage" + std::to_string(stage + 1) + "_blocks", 1, 256,
                                           {}, static_cast<int>(stage)));
    }
    return static_cast<int>(entries.size());
  }

  void parse_stage_widths(const YAML::Node& root, int stages, Space& space) const {
    const YAML::Node node = root["stage_widths"];
    if (!node) {
      if (stages != 4) {
        fail(root["stage_blocks"], "with " + std::to_string(stages) +
                                       " stages, give stage_widths (the defaults 64, 128, "
                                       "256, 512 are for 4 stages)");
      }
      space.fixed_stage_widths_ = default_stage_widths();
      return;
    }
    const auto entries = stage_entries(node, "stage_widths");
    if (static_cast<int>(entries.size()) != stages) {
      fail(node, "stage_widths has " + std::to_string(entries.size()) + " entries but the " +
                     "networks have " + std::to_string(stages) + " stages");
    }
    space.fixed_stage_widths_.assign(static_cast<std::size_t>(stages), 0);
    for (int stage = 0; stage < stages; ++stage) {
      Axis axis =
          parse_int_axis(entries[static_cast<std::size_t>(stage)], Knob::kStageWidth,
                         "stage" + std::to_string(stage + 1) + "_width", 1, 65536, {}, stage);
      if (axis.values.size() == 1) {
        space.fixed_stage_widths_[static_cast<std::size_t>(stage)] =
            static_cast<int>(axis.values.front());
      } else {
        space.axes_.push_back(std::move(axis));
      }
    }
  }

  void check_resolutions(const YAML::Node& node, const Space& space, int stages) const {
    bool any_downsample = false;
    for (const auto& axis : space.axes_) {
      if (axis.knob == Knob::kEarlyDownsample) {
        any_downsample =
            std::find(axis.values.begin(), axis.values.end(), 1.0) != axis.values.end();
      }
    }
    const int factor = downsampling_factor(any_downsample, stages);
    const auto values = values_of(node, "resolution");
    for (const auto& value : values) {
      if (std::stoll(value.Scalar()) < factor) {
        fail(value, "resolution " + value.Scalar() + " is too small for " +
                        (any_downsample ? "early downsampling and " : "") + std::to_string(stages) +
                        " stages: needs at least " + std::to_string(factor) + " px");
      }
    }
  }

  void check_channels(const YAML::Node& root, const Space& space, int width_axis) const {
    double widest_base = 0;
    for (int width : space.fixed_stage_widths_) widest_base = std::max<double>(widest_base, width);
    for (const auto& axis : space.axes_) {
      if (axis.knob == Knob::kStageWidth) {
        widest_base =
            std::max(widest_base, *std::max_element(axis.values.begin(), axis.values.end()));
      }
    }
    const auto& multipliers = space.axes_[static_cast<std::size_t>(width_axis)].values;
    const double widest =
        widest_base * *std::max_element(multipliers.begin(), multipliers.end()) * 4;
    if (widest > 65536) {
      fail(root["width"] ? root["width"] : root["stage_widths"],
           "width x stage width gives layers of more than 65536 channels");
    }
  }

  void parse_constraints(const YAML::Node& node, Space& space) const {
    if (!node.IsMap()) fail(node, "constraints is a mapping such as max_params: 30e6");
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      if (std::find(known_constraints().begin(), known_constraints().end(), key) ==
          known_constraints().end()) {
        fail(entry.first, "unknown constraint '" + key + "'" +
                              suggestion(key, known_constraints()) +
                              "; known: " + join(known_constraints()));
      }
      const double bound = scalar_double(entry.second, key);
      if (!(bound > 0)) fail(entry.second, key + " must be > 0");
      space.constraints_.push_back({key.substr(4), bound});
    }
  }

  std::string source_;
};

Space Space::from_yaml(const std::string& text, const std::string& source_name) {
  return SpecParser(source_name).parse(text);
}

Space Space::from_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw Error(ErrorCategory::kInput, path + ": cannot open spec file");
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) throw Error(ErrorCategory::kInput, path + ": cannot read spec file");
  return from_yaml(text.str(), path);
}

std::vector<int> Space::digits(std::uint64_t index) const {
  CARB_CHECK(index < size_, "index out of range");
  std::vector<int> result(axes_.size());
  for (std::size_t i = axes_.size(); i-- > 0;) {
    const std::uint64_t radix = axes_[i].values.size();
    result[i] = static_cast<int>(index % radix);
    index /= radix;
  }
  return result;
}

Config Space::at(std::uint64_t index) const {
  const std::vector<int> digit = digits(index);
  Config config;
  config.classes = classes_;
  config.stage_widths = fixed_stage_widths_;
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    const Axis& axis = axes_[i];
    const double value = axis.values[static_cast<std::size_t>(digit[i])];
    const auto stage = static_cast<std::size_t>(axis.stage);
    switch (axis.knob) {
      case Knob::kStructure: {
        const Structure& structure = structures_[static_cast<std::size_t>(value)];
        config.block = structure.block;
        config.stage_blocks = structure.stage_blocks;
        break;
      }
      case Knob::kBlock:
        config.block = static_cast<BlockType>(static_cast<int>(value));
        break;
      case Knob::kStageBlocks:
        if (config.stage_blocks.size() <= stage) config.stage_blocks.resize(stage + 1);
        config.stage_blocks[stage] = static_cast<int>(value);
        break;
      case Knob::kWidth:
        config.width_multiplier = value;
        break;
      case Knob::kStageWidth:
        config.stage_widths[stage] = static_cast<int>(value);
        break;
      case Knob::kEarlyDownsample:
        config.early_downsample = value != 0;
        break;
      case Knob::kResolution:
        config.resolution = static_cast<int>(value);
        break;
      case Knob::kBatch:
        config.batch = static_cast<int>(value);
        break;
      case Knob::kPrecision:
        config.precision = static_cast<Precision>(static_cast<int>(value));
        break;
      case Knob::kModel:
        config = Config{};
        config.architecture = models_[static_cast<std::size_t>(value)].hash;
        break;
    }
  }
  return config;
}

std::optional<std::uint64_t> Space::index_of(const Config& config) const {
  if (config.classes != classes_) return std::nullopt;
  std::vector<int> digit(axes_.size());
  auto find = [](const Axis& axis, double value) -> int {
    const auto found = std::find(axis.values.begin(), axis.values.end(), value);
    return found == axis.values.end() ? -1 : static_cast<int>(found - axis.values.begin());
  };
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    const Axis& axis = axes_[i];
    const auto stage = static_cast<std::size_t>(axis.stage);
    double value = 0;
    switch (axis.knob) {
      case Knob::kStructure: {
        value = -1;
        for (std::size_t s = 0; s < structures_.size(); ++s) {
          if (structures_[s].block == config.block &&
              structures_[s].stage_blocks == config.stage_blocks) {
            value = static_cast<double>(s);
          }
        }
        break;
      }
      case Knob::kBlock:
        value = static_cast<double>(config.block);
        break;
      case Knob::kStageBlocks:
        if (stage >= config.stage_blocks.size()) return std::nullopt;
        value = config.stage_blocks[stage];
        break;
      case Knob::kWidth:
        value = config.width_multiplier;
        break;
      case Knob::kStageWidth:
        if (stage >= config.stage_widths.size()) return std::nullopt;
        value = config.stage_widths[stage];
        break;
      case Knob::kEarlyDownsample:
        value = config.early_downsample ? 1 : 0;
        break;
      case Knob::kResolution:
        value = config.resolution;
        break;
      case Knob::kBatch:
        value = config.batch;
        break;
      case Knob::kPrecision:
        value = static_cast<double>(config.precision);
        break;
      case Knob::kModel: {
        value = -1;
        for (std::size_t m = 0; m < models_.size(); ++m) {
          if (models_[m].hash == config.architecture) value = static_cast<double>(m);
        }
        break;
      }
    }
    digit[i] = find(axis, value);
    if (digit[i] < 0) return std::nullopt;
  }
  std::uint64_t index = 0;
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    index = index * axes_[i].values.size() + static_cast<std::uint64_t>(digit[i]);
  }
  // Fixed parts (stage count, fixed stage widths) must agree too.
  if (!(at(index) == config)) return std::nullopt;
  return index;
}

}  // namespace carb
