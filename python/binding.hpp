// What the parts of the compiled module `carb._carb` share: a space with its feature cache, the
// conversions to numpy, and one function per part that registers its names. The module is a thin
// binding: every number comes from carb's libraries; the package around it (python/carb/*.py)
// turns the dictionaries of arrays it returns into pandas DataFrames.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "carb/graph.hpp"
#include "carb/model.hpp"
#include "carb/space.hpp"

namespace carb::python {

namespace py = pybind11;

/// A design space with its feature cache (SpaceFeatures caches and is not thread-safe: every use
/// holds the lock, so Python threads may share a space while the GIL is released).
class SpaceHandle {
 public:
  explicit SpaceHandle(Space space)
      : space_(std::make_unique<Space>(std::move(space))),
        features_(std::make_unique<SpaceFeatures>(*space_)) {}
  const Space& space() const { return *space_; }
  /// Calls f(space, features) under the cache's lock.
  template <typename F>
  auto with_features(F&& f) {
    const std::lock_guard<std::mutex> lock(mutex_);
    return f(*space_, *features_);
  }

 private:
  std::unique_ptr<Space> space_;
  std::unique_ptr<SpaceFeatures> features_;  // refers to *space_, which never moves
  std::mutex mutex_;
};

/// A 1-D numpy array of n elements (allocated with the GIL held; filled through data()).
template <typename T>
py::array_t<T> new_array(std::size_t n) {
  return py::array_t<T>(static_cast<py::ssize_t>(n));
}

/// Keys of a Python sequence of strings as configurations; throws carb::Error (input) naming
/// the first key that does not parse.
std::vector<Config> configs_of_keys(const std::vector<std::string>& keys);

/// A target's predictions as three numpy columns, target.column() and its "_low" and "_high",
/// NaN where the model cannot predict it: of the rows `rows` in that order, or of every row.
void add_interval_columns(py::dict& columns, const TargetInfo& target,
                          const std::vector<TargetPrediction>& predictions,
                          const std::vector<std::size_t>* rows = nullptr);

/// Runs `work` with the GIL released.
template <typename F>
auto without_gil(F&& work) {
  const py::gil_scoped_release release;
  return work();
}

void bind_errors(py::module_& m);
void bind_space(py::module_& m);
void bind_model(py::module_& m);
void bind_screen(py::module_& m);
void bind_store(py::module_& m);
void bind_campaign(py::module_& m);
void bind_report(py::module_& m);

}  // namespace carb::python
