#include "domain.hpp"

#include "output.hpp"

namespace carb::cli {

void DomainCheck::add(const float* row, const std::string& id) {
  const std::size_t f = model_.outside_domain(row);
  if (f == std::string::npos) return;
  if (outside_++ > 0) return;
  const Predictor::FeatureRange& range = model_.training_domain()[f];
  first_ = id + ", whose " + model_.feature_names()[f] + " is " +
           cell_text(static_cast<double>(row[f])) + ", fitted on " +
           cell_text(static_cast<double>(range.min)) + " to " +
           cell_text(static_cast<double>(range.max));
}

std::string DomainCheck::warning(std::uint64_t of, const std::string& what,
                                 const std::string& model_path) const {
  if (outside_ == 0) return "";
  return "warning: " + std::to_string(outside_) + " of " + std::to_string(of) + " " + what +
         " lie outside the data " + model_path + " was fitted on (first: " + first_ +
         "): their predictions extrapolate";
}

}  // namespace carb::cli
