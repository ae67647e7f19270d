// The warning that predictions extrapolate: rows outside a model's training domain.
#pragma once

#include <cstdint>
#include <string>

#include "carb/model.hpp"

namespace carb::cli {

/// Counts rows outside a model's training domain, keeping the first for the warning.
class DomainCheck {
 public:
  explicit DomainCheck(const Predictor& model) : model_(model) {}
  /// Checks one row (the model's feature order) named `id`.
  void add(const float* row, const std::string& id);
  std::uint64_t outside() const { return outside_; }
  /// "warning: N of M <what> lie outside the data MODEL was fitted on (first: ID, whose F is V,
  /// fitted on A to B): their predictions extrapolate", or "" when none does.
  std::string warning(std::uint64_t of, const std::string& what,
                      const std::string& model_path) const;

 private:
  const Predictor& model_;
  std::uint64_t outside_ = 0;
  std::string first_;
};

}  // namespace carb::cli
