// Which configurations a verb works on: a spec (whole, or a sample of it) or a list of keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "carb/space.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace carb::cli {

/// A whole file as text; throws carb::Error (input) naming `what` when it cannot be read.
std::string read_file(const std::string& path, const std::string& what);

/// The configurations of a key list (one key per line; blank lines and '#' comments skipped).
/// Throws carb::Error (input) with file:line:column on a bad key.
std::vector<Config> read_keys(const std::string& path);

struct Selection {
  std::string spec;          ///< design-space spec (YAML)
  std::string keys_file;     ///< or a key list
  std::uint64_t sample = 0;  ///< 0: the whole spec (constraints applied)
  std::uint64_t seed = 0;
  std::string sampling = "random";  ///< or "stratified"
};

/// The configurations a selection names, in order.
std::vector<Config> select_configs(const Selection& selection);

/// An ONNX model file as one configuration (`--onnx FILE [--resolution R] [--batch B]
/// [--precision P]`).
struct OnnxModel {
  std::string path;    ///< empty: not given
  int resolution = 0;  ///< 0: the file's own
  int batch = 1;
  std::string precision = "fp32";
};

/// Adds --onnx, --resolution, --batch and --precision to `command`, `what` saying what the file
/// stands instead of (e.g. "a key").
void add_onnx_options(CLI::App& command, OnnxModel& model, const std::string& what);

/// The configuration of `model` (its architecture registered, so that its key resolves). Throws
/// carb::Error: input for a file it cannot import, usage for a bad precision.
Config onnx_config(const OnnxModel& model);

}  // namespace carb::cli
