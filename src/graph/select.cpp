// Which points of a space a verb works on: those meeting the space's constraints, sampled or
// counted. The constraints need features, so this lives above the space module.
#include "carb/graph.hpp"

namespace carb {

std::string_view to_string(Sampling sampling) {
  return sampling == Sampling::kStratified ? "stratified" : "random";
}

std::optional<Sampling> parse_sampling(std::string_view text) {
  if (text == "random") return Sampling::kRandom;
  if (text == "stratified") return Sampling::kStratified;
  return std::nullopt;
}

IndexFilter constraint_filter(const Space& space, SpaceFeatures& features) {
  if (space.constraints().empty()) return {};
  return [&features](std::uint64_t index) { return features.violated_constraint(index).empty(); };
}

std::vector<std::uint64_t> sample_points(const Space& space, SpaceFeatures& features,
                                         std::uint64_t count, std::uint64_t seed,
                                         Sampling sampling) {
  const IndexFilter accept = constraint_filter(space, features);
  return sampling == Sampling::kStratified ? sample_stratified(space, count, seed, accept)
                                           : sample_random(space, count, seed, accept);
}

std::optional<std::uint64_t> count_points(const Space& space, SpaceFeatures& features,
                                          std::uint64_t max_walk) {
  if (space.constraints().empty()) return space.size();
  if (space.size() > max_walk) return std::nullopt;
  const IndexFilter accept = constraint_filter(space, features);
  std::uint64_t points = 0;
  for (std::uint64_t index = 0; index < space.size(); ++index) {
    if (accept(index)) ++points;
  }
  return points;
}

}  // namespace carb
