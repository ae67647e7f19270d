// Budgets and objectives as people write them, and a candidate's feasibility against budgets.
#include <charconv>
#include <cmath>
#include <string>

#include "carb/error.hpp"
#include "carb/screen.hpp"

namespace carb {

namespace {

struct Unit {
  std::string_view name;
  double to_canonical;
};

constexpr std::array kEnergyUnits = {Unit{"J", 1.0}, Unit{"mJ", 1e-3}, Unit{"uJ", 1e-6}};
constexpr std::array kLatencyUnits = {Unit{"s", 1e3}, Unit{"ms", 1.0}, Unit{"us", 1e-3}};
constexpr std::array kMemoryUnits = {
    Unit{"B", 1.0},         Unit{"KB", 1e3}, Unit{"KiB", 1024.0},      Unit{"MB", 1e6},
    Unit{"MiB", 1048576.0}, Unit{"GB", 1e9}, Unit{"GiB", 1073741824.0}};

std::span<const Unit> units_of(Target target) {
  switch (target) {
    case Target::kEnergy:
      return kEnergyUnits;
    case Target::kLatency:
      return kLatencyUnits;
    case Target::kMemory:
      return kMemoryUnits;
  }
  CARB_CHECK(false, "unknown target");
  return {};
}

// "J, mJ or uJ": the hint every unit error ends with, so the user sees what is accepted.
std::string unit_list(Target target) {
  const std::span<const Unit> units = units_of(target);
  std::string list;
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (i > 0) list += i + 1 == units.size() ? " or " : ", ";
    list += units[i].name;
  }
  return list;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A cursor over one line of text that reports errors at its column.
class Cursor {
 public:
  Cursor(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  std::size_t position() const { return position_; }
  bool at_end() const { return position_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[position_]; }
  void advance(std::size_t count) { position_ += count; }
  std::string_view rest() const { return text_.substr(position_); }

  void skip_space() {
    while (!at_end() && is_space(text_[position_])) ++position_;
  }
  /// The longest run from here of characters for which `stop` is false; consumes it.
  template <typename Stop>
  std::string_view take_until(Stop stop) {
    const std::size_t begin = position_;
    while (!at_end() && !stop(text_[position_])) ++position_;
    return text_.substr(begin, position_ - begin);
  }

  // Cold: errors are rare, and at -O3 GCC 12 inlines the location arithmetic into a false
  // -Wrestrict warning (GCC bug 105651).
  [[gnu::cold]] Error error_at(std::size_t position, const std::string& message) const {
    return input_error_at(std::string(origin_), 1, static_cast<int>(position) + 1, message);
  }

 private:
  std::string_view text_;
  std::string_view origin_;
  std::size_t position_ = 0;
};

bool ends_token(char c) { return is_space(c) || c == ','; }

Budget parse_one_budget(Cursor& cursor) {
  Budget budget;
  cursor.skip_space();
  const std::size_t name_at = cursor.position();
  budget.column = static_cast<int>(name_at) + 1;
  if (cursor.at_end() || cursor.peek() == ',') {
    throw cursor.error_at(name_at, "empty budget (remove the extra comma)");
  }
  const std::string_view name = cursor.take_until(
      [](char c) { return ends_token(c) || c == '<' || c == '>' || c == '=' || c == '!'; });
  if (name.empty()) {
    throw cursor.error_at(name_at, "expected a target (energy, latency or memory)");
  }
  const std::optional<Target> target = parse_target(name);
  if (!target) {
    throw cursor.error_at(
        name_at, "unknown target '" + std::string(name) + "' (use energy, latency or memory)");
  }
  budget.target = *target;

  cursor.skip_space();
  const std::size_t operator_at = cursor.position();
  const std::string_view op =
      cursor.take_until([](char c) { return c != '<' && c != '>' && c != '=' && c != '!'; });
  if (op.empty()) {
    throw cursor.error_at(operator_at, "expected <= or < after '" + std::string(name) + "'");
  }
  if (op != "<=" && op != "<") {
    throw cursor.error_at(operator_at, "unsupported operator '" + std::string(op) +
                                           "' (budgets are upper limits: use <= or <)");
  }
  budget.strict = op == "<";

  cursor.skip_space();
  const std::size_t number_at = cursor.position();
  const std::string_view rest = cursor.rest();
  double number = 0;
  const auto [end, status] = std::from_chars(rest.data(), rest.data() + rest.size(), number);
  if (status != std::errc() && status != std::errc::result_out_of_range) {
    const std::string_view found = cursor.take_until(ends_token);
    throw cursor.error_at(number_at,
                          "expected a number after '" + std::string(op) + "'" +
                              (found.empty() ? "" : ", found '" + std::string(found) + "'"));
  }
  const std::string_view number_text = rest.substr(0, static_cast<std::size_t>(end - rest.data()));
  cursor.advance(number_text.size());
  // Out of range parses to 0 or infinity: both are refused here, with the text as written.
  if (status != std::errc() || !std::isfinite(number) || number <= 0) {
    throw cursor.error_at(number_at, std::string(to_string(budget.target)) +
                                         " budget must be a positive finite number, found '" +
                                         std::string(number_text) + "'");
  }

  const std::size_t number_end = cursor.position();
  cursor.skip_space();
  const std::size_t unit_at = cursor.position();
  const std::string_view unit = cursor.take_until(ends_token);
  if (unit.empty()) {
    throw cursor.error_at(number_end, "missing unit after '" + std::string(number_text) + "' for " +
                                          std::string(name) + " (use " + unit_list(budget.target) +
                                          ")");
  }
  bool known = false;
  for (const Unit& candidate : units_of(budget.target)) {
    if (candidate.name == unit) {
      budget.limit = number * candidate.to_canonical;
      known = true;
    }
  }
  if (!known) {
    throw cursor.error_at(unit_at, "unknown unit '" + std::string(unit) + "' for " +
                                       std::string(name) + " (use " + unit_list(budget.target) +
                                       ")");
  }
  // A tiny number times a tiny unit can underflow; a zero limit would make every log undefined.
  if (!(budget.limit > 0) || !std::isfinite(budget.limit)) {
    throw cursor.error_at(number_at, std::string(name) + " budget " + std::string(number_text) +
                                         std::string(unit) + " is out of range");
  }

  cursor.skip_space();
  if (!cursor.at_end() && cursor.peek() != ',') {
    const std::size_t junk_at = cursor.position();
    const std::string_view junk = cursor.take_until([](char c) { return c == ','; });
    std::string_view trimmed = junk;
    while (!trimmed.empty() && is_space(trimmed.back())) trimmed.remove_suffix(1);
    throw cursor.error_at(junk_at, "unexpected '" + std::string(trimmed) + "' after the " +
                                       std::string(name) +
                                       " budget (separate budgets with commas)");
  }
  return budget;
}

bool is_blank(std::string_view text) {
  for (char c : text) {
    if (!is_space(c)) return false;
  }
  return true;
}

}  // namespace

std::string_view to_string(Target target) {
  switch (target) {
    case Target::kMemory:
      return "memory";
    case Target::kEnergy:
      return "energy";
    case Target::kLatency:
      return "latency";
  }
  CARB_CHECK(false, "unknown target");
  return {};
}

std::optional<Target> parse_target(std::string_view name) {
  for (Target target : {Target::kMemory, Target::kEnergy, Target::kLatency}) {
    if (name == to_string(target)) return target;
  }
  return std::nullopt;
}

std::string_view canonical_unit(Target target) {
  switch (target) {
    case Target::kMemory:
      return "B";
    case Target::kEnergy:
      return "J";
    case Target::kLatency:
      return "ms";
  }
  CARB_CHECK(false, "unknown target");
  return {};
}

std::vector<Budget> parse_budgets(std::string_view text, std::string_view origin) {
  Cursor cursor(text, origin);
  if (is_blank(text)) {
    throw cursor.error_at(0,
                          "no budgets given (write e.g. energy<=75J,latency<=20ms,memory<=2GiB)");
  }
  std::vector<Budget> budgets;
  while (true) {
    const Budget budget = parse_one_budget(cursor);
    for (const Budget& earlier : budgets) {
      if (earlier.target == budget.target) {
        throw cursor.error_at(static_cast<std::size_t>(budget.column - 1),
                              "duplicate budget for " + std::string(to_string(budget.target)) +
                                  " (already given at column " + std::to_string(earlier.column) +
                                  ")");
      }
    }
    budgets.push_back(budget);
    if (cursor.at_end()) break;
    cursor.advance(1);  // the comma
  }
  return budgets;
}

std::vector<Target> parse_objectives(std::string_view text, std::string_view origin) {
  Cursor cursor(text, origin);
  if (is_blank(text)) {
    throw cursor.error_at(0, "no objectives given (write e.g. energy,latency)");
  }
  std::vector<Target> objectives;
  while (true) {
    cursor.skip_space();
    const std::size_t name_at = cursor.position();
    std::string_view name = cursor.take_until([](char c) { return c == ','; });
    while (!name.empty() && is_space(name.back())) name.remove_suffix(1);
    if (name.empty()) throw cursor.error_at(name_at, "empty objective (remove the extra comma)");
    const std::optional<Target> target = parse_target(name);
    if (!target) {
      throw cursor.error_at(
          name_at, "unknown objective '" + std::string(name) + "' (use memory, energy or latency)");
    }
    for (Target earlier : objectives) {
      if (earlier == *target) {
        throw cursor.error_at(name_at, "duplicate objective '" + std::string(name) + "'");
      }
    }
    objectives.push_back(*target);
    if (cursor.at_end()) break;
    cursor.advance(1);  // the comma
  }
  return objectives;
}

TargetPredictions gather_predictions(const std::vector<TargetInfo>& targets,
                                     const std::vector<std::vector<TargetPrediction>>& predictions,
                                     std::size_t row) {
  CARB_CHECK(predictions.size() == targets.size(), "one prediction column per target");
  TargetPredictions gathered;
  for (std::size_t t = 0; t < kTargetCount; ++t) {
    gathered[t].reason =
        "the model has no " + std::string(to_string(static_cast<Target>(t))) + " target";
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const std::optional<Target> target = parse_target(targets[i].name);
    if (!target) continue;  // a table's own target: not something a budget can name
    CARB_CHECK(row < predictions[i].size(), "row out of range");
    gathered[static_cast<std::size_t>(*target)] = predictions[i][row];
  }
  return gathered;
}

Feasibility assess_budgets(const std::vector<Budget>& budgets, const TargetPredictions& prediction,
                           const FeasibilityOptions& options) {
  CARB_CHECK(options.coverage > 0 && options.coverage < 1, "coverage in (0, 1)");
  Feasibility result{true, 1.0};
  if (budgets.empty()) return result;
  const double z = normal_quantile((1 + options.coverage) / 2);
  for (const Budget& budget : budgets) {
    const TargetPrediction& predicted = prediction[static_cast<std::size_t>(budget.target)];
    if (!predicted.available) {
      throw Error(ErrorCategory::kInput,
                  "a budget on " + std::string(to_string(budget.target)) +
                      ", which the model cannot predict: " + predicted.reason);
    }
    CARB_CHECK(!std::isnan(predicted.value) && !std::isnan(predicted.high),
               "a prediction that is a number");
    const auto meets = [&](double cost) {
      return budget.strict ? cost < budget.limit : cost <= budget.limit;
    };
    if (!meets(options.safe ? predicted.high : predicted.value)) result.feasible = false;

    // Conformal intervals are built around the value; a rounding hair below it means width 0.
    const double sigma = predicted.value > 0 && predicted.high > predicted.value
                             ? (std::log(predicted.high) - std::log(predicted.value)) / z
                             : 0.0;
    if (sigma > 0) {
      result.probability *=
          normal_cdf((std::log(budget.limit) - std::log(predicted.value)) / sigma);
    } else if (!meets(predicted.value)) {
      result.probability = 0;
    }
  }
  return result;
}

}  // namespace carb
