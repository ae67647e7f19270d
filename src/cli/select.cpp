#include "select.hpp"

#include <CLI/CLI.hpp>

#include <fstream>
#include <sstream>

#include "carb/error.hpp"
#include "carb/graph.hpp"

namespace carb::cli {

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream file(path);
  if (!file) throw Error(ErrorCategory::kInput, path + ": cannot open " + what);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<Config> read_keys(const std::string& path) {
  std::istringstream text(read_file(path, "key list"));
  std::vector<Config> configs;
  std::string line;
  int line_number = 0;
  while (std::getline(text, line)) {
    ++line_number;
    const std::size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] == '#') continue;
    const std::size_t end = line.find_last_not_of(" \t\r");
    try {
      configs.push_back(parse_key(line.substr(begin, end - begin + 1)));
    } catch (const Error& error) {
      throw input_error_at(path, line_number, static_cast<int>(begin) + 1, error.what());
    }
  }
  if (configs.empty()) throw input_error_at(path, 0, 0, "the key list is empty");
  return configs;
}

std::vector<Config> select_configs(const Selection& selection) {
  if (!selection.keys_file.empty()) return read_keys(selection.keys_file);
  const Space space = Space::from_file(selection.spec);
  SpaceFeatures features(space);
  std::vector<std::uint64_t> indices;
  if (selection.sample > 0) {
    const auto sampling = parse_sampling(selection.sampling);
    if (!sampling) {
      throw Error(ErrorCategory::kUsage,
                  "--sampling '" + selection.sampling + "': expected random or stratified");
    }
    indices = sample_points(space, features, selection.sample, selection.seed, *sampling);
  } else {
    constexpr std::uint64_t kMaxWholeSpace = 10'000'000;
    if (space.size() > kMaxWholeSpace) {
      throw Error(ErrorCategory::kUsage, "the space has " + std::to_string(space.size()) +
                                             " points: take a --sample of it");
    }
    const IndexFilter accept = constraint_filter(space, features);
    for (std::uint64_t index = 0; index < space.size(); ++index) {
      if (!accept || accept(index)) indices.push_back(index);
    }
  }
  std::vector<Config> configs;
  configs.reserve(indices.size());
  for (std::uint64_t index : indices) configs.push_back(space.at(index));
  return configs;
}

void add_onnx_options(CLI::App& command, OnnxModel& model, const std::string& what) {
  command.add_option("--onnx", model.path,
                     "an ONNX model file instead of " + what + " (docs/onnx.md)");
  command
      .add_option("--resolution", model.resolution,
                  "with --onnx: input resolution (default: the file's own)")
      ->check(CLI::Range(1, 8192));
  command.add_option("--batch", model.batch, "with --onnx: batch size (default 1)")
      ->check(CLI::Range(1, 65536));
  command.add_option("--precision", model.precision, "with --onnx: fp32 (default), fp16 or bf16");
}

Config onnx_config(const OnnxModel& model) {
  Architecture architecture = import_model(model.path);
  const int resolution = model.resolution > 0 ? model.resolution : architecture.native_resolution;
  const auto precision = parse_precision(model.precision);
  if (!precision) {
    throw Error(ErrorCategory::kUsage, "--precision '" + model.precision + "': fp32, fp16 or bf16",
                "precision");
  }
  register_architecture(architecture);
  return imported_config(architecture, resolution, model.batch, *precision);
}

}  // namespace carb::cli
