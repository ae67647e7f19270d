// Which configurations a verb works on: a spec (whole, or a sample of it) or a list of keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "carb/space.hpp"

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

}  // namespace carb::cli
