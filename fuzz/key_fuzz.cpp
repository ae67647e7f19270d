// Fuzzes the configuration key parser: any text either parses or throws carb::Error; a parsed
// key prints canonically, and the canonical key parses back to the same configuration.
#include "carb/error.hpp"
#include "carb/space.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const carb::Config config = carb::parse_key(carb_fuzz::text_of(data, size));
    const std::string key = carb::to_key(config);
    carb_fuzz::require(carb::parse_key(key) == config, "parse_key(to_key(c)) != c for " + key);
    carb_fuzz::require(carb::invalid_reason(config).empty(), "parse_key accepted " + key +
                                                                 ", which cannot be built: " +
                                                                 carb::invalid_reason(config));
  } catch (const carb::Error&) {
  }
  return 0;
}
