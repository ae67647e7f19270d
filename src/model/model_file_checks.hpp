// Checks of the fields of a carb model file before they are trusted: integers that are integers
// of their type, and XGBoost models whose trees XGBoost 1.7 can load and predict with safely.
// Private to the model module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "xgb.hpp"

namespace carb::model_detail {

// An integer field of a model file. nlohmann's get<int>() converts a real such as 2e107 with a
// cast whose result is undefined (UBSan, fuzz/model_fuzz.cpp); this refuses what is no integer
// of the type instead. Throws std::invalid_argument.
template <typename Integer>
Integer integer_of(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto number = value.get<std::uint64_t>();
    if (number <= static_cast<std::uint64_t>(std::numeric_limits<Integer>::max())) {
      return static_cast<Integer>(number);
    }
  } else if (value.is_number_integer()) {
    const auto number = value.get<std::int64_t>();
    if (number >= static_cast<std::int64_t>(std::numeric_limits<Integer>::min()) &&
        (number < 0 || static_cast<std::uint64_t>(number) <=
                           static_cast<std::uint64_t>(std::numeric_limits<Integer>::max()))) {
      return static_cast<Integer>(number);
    }
  }
  throw std::invalid_argument(value.dump().substr(0, 40) + " is not an integer in range");
}

// Every tree in an XGBoost model (gbtree, or dart's inner gbtree), checked, then loaded. The
// model and its trees must have `cols` features: XGBoost sizes its feature vector by the model's
// count and reads it at each split's index unchecked.
xgb::Booster load_booster(const nlohmann::json& model, std::size_t cols);

}  // namespace carb::model_detail
