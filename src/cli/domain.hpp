// Where a model's predictions hold: rows outside its training domain, and devices or hosts other
// than the one that measured its data.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "carb/model.hpp"

namespace carb::cli {

/// Counts rows outside a model's training domain, keeping the first for the warning.
class DomainCheck {
 public:
  explicit DomainCheck(const Predictor& model) : model_(model) {}
  /// Checks one row (the model's feature order) named `id`, of network family `family`
  /// (family_of; "" for a table's row).
  void add(const float* row, const std::string& id, const std::string& family = {});
  std::uint64_t outside() const { return outside_; }
  /// "warning: N of M <what> lie outside the data MODEL was fitted on (first: ID, whose F is V,
  /// fitted on A to B): their predictions extrapolate", or "" when none does (domain_text says
  /// how the first lies outside).
  std::string warning(std::uint64_t of, const std::string& what,
                      const std::string& model_path) const;

 private:
  const Predictor& model_;
  std::uint64_t outside_ = 0;
  std::string first_;
};

/// This machine's host instance (carb::host_instance), or "" where it cannot be read.
std::string this_host_instance();

/// "" when `measured` (host instance -> rows) lies within the model's recorded host instances;
/// else a note that says how the model's device and the measured one differ (other host
/// instances although the fingerprint matches, or unknown because rows predate instances).
/// `what` names the measured side, e.g. "the data" or "this machine" (a machine's instance
/// with a count of 0).
std::string host_difference(const Predictor& model, const std::string& model_path,
                            const std::map<std::string, std::size_t>& measured,
                            const std::string& what);

/// The note for a verb that predicts on this machine (predict, screen): "" when this machine
/// measured the model's data; else host_difference's note, or, when the model's fingerprint is
/// another machine's, that its predictions are for that device.
std::string this_machine_note(const Predictor& model, const std::string& model_path);

}  // namespace carb::cli
