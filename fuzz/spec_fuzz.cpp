// Fuzzes the design-space spec parser: any text either parses or throws carb::Error (with its
// file:line:column); an accepted space enumerates, and its first and last points print keys
// that parse back to them.
#include "carb/error.hpp"
#include "carb/space.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const carb::Space space =
        carb::Space::from_yaml(std::string(carb_fuzz::text_of(data, size)), "fuzz.yaml");
    if (space.size() == 0) return 0;
    for (const std::uint64_t index : {std::uint64_t{0}, space.size() / 2, space.size() - 1}) {
      const carb::Config config = space.at(index);
      const std::string key = carb::to_key(config);
      carb_fuzz::require(carb::parse_key(key) == config, "point " + std::to_string(index) +
                                                             " does not round-trip: " + key);
    }
  } catch (const carb::Error&) {
  }
  return 0;
}
