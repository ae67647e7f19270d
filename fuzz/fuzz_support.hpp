// What every fuzz target shares: the input as text, and a property violation that libFuzzer
// records as a crash (with the input that caused it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace carb_fuzz {

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Aborts (a finding) when a property of accepted input does not hold.
inline void require(bool holds, const std::string& what) {
  if (!holds) {
    std::fprintf(stderr, "property violated: %s\n", what.c_str());
    std::abort();
  }
}

}  // namespace carb_fuzz
