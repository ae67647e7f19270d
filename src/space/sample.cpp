// Seeded random and stratified (Latin-hypercube) sampling of a space's indices.
#include <algorithm>
#include <map>
#include <random>
#include <unordered_set>

#include "carb/error.hpp"
#include "carb/space.hpp"

namespace carb {

namespace {

__extension__ using Uint128 = unsigned __int128;

// mt19937_64's output is fixed by the standard; the bounded draw below is ours, so a seed gives
// the same sample with every standard library.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  /// Uniform in [0, bound), bound >= 1 (Lemire's multiply-and-reject).
  std::uint64_t below(std::uint64_t bound) {
    CARB_CHECK(bound > 0, "empty range");
    Uint128 product = static_cast<Uint128>(engine_()) * bound;
    auto low = static_cast<std::uint64_t>(product);
    if (low < bound) {
      const std::uint64_t threshold = -bound % bound;
      while (low < threshold) {
        product = static_cast<Uint128>(engine_()) * bound;
        low = static_cast<std::uint64_t>(product);
      }
    }
    return static_cast<std::uint64_t>(product >> 64);
  }

  template <typename T>
  void shuffle(std::vector<T>& values) {
    for (std::size_t i = values.size(); i > 1; --i) {
      std::swap(values[i - 1], values[below(i)]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

// Past this many grid points an exhaustive fallback scan is refused.
constexpr std::uint64_t kMaxScan = 100'000'000;
// A sample is held in memory (with a set of seen indices): cap it well below the machine's RAM.
constexpr std::uint64_t kMaxSample = 50'000'000;

std::uint64_t sample_size(const Space& space, std::uint64_t count) {
  if (count > kMaxSample && space.size() > kMaxSample) {
    throw Error(ErrorCategory::kInput,
                "a sample of " + std::to_string(count) + " is too large: at most " +
                    std::to_string(kMaxSample) + " (walk the space without a sample instead)");
  }
  return std::min(count, space.size());
}

class Collector {
 public:
  Collector(std::uint64_t wanted, const IndexFilter& accept) : wanted_(wanted), accept_(accept) {}

  bool full() const { return chosen_.size() >= wanted_; }
  const std::vector<std::uint64_t>& chosen() const { return chosen_; }
  std::size_t seen() const { return seen_.size(); }

  /// Whether offer(index) would add the index (not seen yet and accepted); does not record it.
  bool would_take(std::uint64_t index) const {
    return seen_.count(index) == 0 && (!accept_ || accept_(index));
  }

  void offer(std::uint64_t index) {
    if (full() || !seen_.insert(index).second) return;
    if (!accept_ || accept_(index)) chosen_.push_back(index);
  }

  // Scans the whole space for accepted indices not chosen yet, in a seeded random order.
  void fill_by_scan(const Space& space, Rng& rng) {
    if (full()) return;
    if (space.size() > kMaxScan) {
      throw Error(ErrorCategory::kInput,
                  "found only " + std::to_string(chosen_.size()) + " of " +
                      std::to_string(wanted_) +
                      " configurations that meet the constraints by sampling, and the space is "
                      "too large to scan; loosen the constraints or sample fewer");
    }
    std::vector<std::uint64_t> rest;
    for (std::uint64_t index = 0; index < space.size(); ++index) {
      if (seen_.count(index) == 0 && (!accept_ || accept_(index))) rest.push_back(index);
    }
    rng.shuffle(rest);
    for (std::uint64_t index : rest) {
      if (full()) break;
      chosen_.push_back(index);
    }
  }

 private:
  std::uint64_t wanted_;
  const IndexFilter& accept_;
  std::vector<std::uint64_t> chosen_;
  std::unordered_set<std::uint64_t> seen_;
};

void fill_randomly(const Space& space, Collector& collector, std::uint64_t wanted, Rng& rng) {
  const std::uint64_t attempts = 20 * wanted + 10000;
  for (std::uint64_t attempt = 0;
       attempt < attempts && !collector.full() && collector.seen() < space.size(); ++attempt) {
    collector.offer(rng.below(space.size()));
  }
  collector.fill_by_scan(space, rng);
}

// `count` values 0..radix-1, each occurring count/radix or count/radix + 1 times, shuffled.
std::vector<int> balanced(std::size_t count, int radix, Rng& rng) {
  std::vector<int> order(static_cast<std::size_t>(radix));
  for (int i = 0; i < radix; ++i) order[static_cast<std::size_t>(i)] = i;
  rng.shuffle(order);
  std::vector<int> sequence(count);
  for (std::size_t i = 0; i < count; ++i) sequence[i] = order[i % order.size()];
  rng.shuffle(sequence);
  return sequence;
}

// Structures balanced by block type first, then by depth within each block type.
std::vector<int> balanced_structures(std::size_t count, const Space& space, Rng& rng) {
  std::map<BlockType, std::vector<int>> by_block;
  for (std::size_t i = 0; i < space.structures().size(); ++i) {
    by_block[space.structures()[i].block].push_back(static_cast<int>(i));
  }
  std::vector<BlockType> blocks;
  for (const auto& entry : by_block) blocks.push_back(entry.first);
  const std::vector<int> block_of = balanced(count, static_cast<int>(blocks.size()), rng);
  std::vector<int> result(count);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    std::vector<std::size_t> positions;
    for (std::size_t i = 0; i < count; ++i) {
      if (block_of[i] == static_cast<int>(b)) positions.push_back(i);
    }
    const auto& members = by_block[blocks[b]];
    const std::vector<int> pick = balanced(positions.size(), static_cast<int>(members.size()), rng);
    for (std::size_t j = 0; j < positions.size(); ++j) {
      result[positions[j]] = members[static_cast<std::size_t>(pick[j])];
    }
  }
  return result;
}

}  // namespace

std::vector<std::uint64_t> sample_random(const Space& space, std::uint64_t count,
                                         std::uint64_t seed, const IndexFilter& accept) {
  Rng rng(seed);
  const std::uint64_t wanted = sample_size(space, count);
  Collector collector(wanted, accept);
  if (!accept && wanted * 2 > space.size() && space.size() <= kMaxScan) {
    std::vector<std::uint64_t> all(space.size());
    for (std::uint64_t i = 0; i < space.size(); ++i) all[i] = i;
    rng.shuffle(all);
    all.resize(wanted);
    return all;
  }
  fill_randomly(space, collector, wanted, rng);
  return collector.chosen();
}

std::vector<std::uint64_t> sample_stratified(const Space& space, std::uint64_t count,
                                             std::uint64_t seed, const IndexFilter& accept) {
  Rng rng(seed);
  const std::uint64_t wanted = sample_size(space, count);
  Collector collector(wanted, accept);
  constexpr int kRounds = 8;
  for (int round = 0; round < kRounds && !collector.full(); ++round) {
    const std::size_t missing = wanted - collector.chosen().size();
    std::vector<std::vector<int>> digits;
    for (const Axis& axis : space.axes()) {
      digits.push_back(axis.knob == Knob::kStructure
                           ? balanced_structures(missing, space, rng)
                           : balanced(missing, static_cast<int>(axis.values.size()), rng));
    }
    auto index_of = [&](std::size_t i) {
      std::uint64_t index = 0;
      for (std::size_t a = 0; a < space.axes().size(); ++a) {
        index = index * space.axes()[a].values.size() + static_cast<std::uint64_t>(digits[a][i]);
      }
      return index;
    };
    // A point already taken (or rejected by the filter) swaps one knob's value with a later
    // point of this round: the knobs' value counts, and so the balance, stay exact.
    constexpr int kSwaps = 64;
    for (std::size_t i = 0; i < missing; ++i) {
      std::uint64_t index = index_of(i);
      for (int swap = 0; swap < kSwaps && i + 1 < missing && !collector.would_take(index); ++swap) {
        const std::size_t axis = rng.below(space.axes().size());
        const std::size_t other = i + 1 + rng.below(missing - i - 1);
        std::swap(digits[axis][i], digits[axis][other]);
        index = index_of(i);
      }
      collector.offer(index);
    }
  }
  fill_randomly(space, collector, wanted, rng);
  return collector.chosen();
}

}  // namespace carb
