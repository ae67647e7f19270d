// Spaces: load, count, sample, list, and features as numpy arrays, chunk by chunk.
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>

#include "binding.hpp"
#include "carb/error.hpp"

namespace carb::python {

namespace {

Sampling sampling_of(const std::string& text) {
  const auto sampling = parse_sampling(text);
  if (!sampling) {
    throw Error(ErrorCategory::kUsage, "sampling '" + text + "': expected random or stratified",
                "sampling");
  }
  return *sampling;
}

// Indices as a vector: from a numpy array of integers (each checked against the space's size).
std::vector<std::uint64_t> indices_of(
    const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>& array,
    const Space& space) {
  std::vector<std::uint64_t> indices(static_cast<std::size_t>(array.size()));
  if (!indices.empty()) {
    std::memcpy(indices.data(), array.data(), indices.size() * sizeof(std::uint64_t));
  }
  for (std::uint64_t index : indices) {
    if (index >= space.size()) {
      throw Error(ErrorCategory::kUsage,
                  "indices: " + std::to_string(index) + " is not a point of " + space.name() +
                      " (" + std::to_string(space.size()) + " grid points)",
                  "indices");
    }
  }
  return indices;
}

// The points in [start, stop) that meet the space's constraints.
std::vector<std::uint64_t> accepted_in(SpaceHandle& handle, std::uint64_t start,
                                       std::uint64_t stop) {
  return handle.with_features([&](const Space& space, SpaceFeatures& features) {
    stop = std::min(stop, space.size());
    std::vector<std::uint64_t> indices;
    indices.reserve(stop > start ? stop - start : 0);
    const IndexFilter accept = constraint_filter(space, features);
    for (std::uint64_t index = start; index < stop; ++index) {
      if (!accept || accept(index)) indices.push_back(index);
    }
    return indices;
  });
}

// What a numpy column holds for a feature row's value of type T: block and precision as codes
// into BLOCKS and PRECISIONS; a ResNet knob an imported architecture lacks (std::optional) as
// code -1 (block), NaN (width) or -1 beside 0 and 1 (early_downsample, int8).
template <typename T>
struct StoredOf {
  using type = std::conditional_t<std::is_enum_v<T>, std::uint8_t, T>;
  static type of(const T& value) { return static_cast<type>(value); }
};
template <typename T>
struct StoredOf<std::optional<T>> {
  using type = std::conditional_t<std::is_floating_point_v<T>, T, std::int8_t>;
  static type of(const std::optional<T>& value) {
    if constexpr (std::is_floating_point_v<T>) {
      return value ? *value : std::numeric_limits<T>::quiet_NaN();
    } else {
      return value ? static_cast<type>(*value) : type{-1};
    }
  }
};
template <typename T>
using Stored = typename StoredOf<T>::type;

template <typename T>
constexpr bool kIsText =
    std::is_same_v<T, std::string> || std::is_same_v<T, std::optional<std::string>>;

// Feature rows of configurations, column by column (for_each_feature_column's columns): numbers
// into numpy arrays (allocated with the GIL, filled without it), text columns (the key and the
// stage lists) only when asked.
class FeatureColumns {
 public:
  FeatureColumns(std::size_t n, const std::optional<RooflineDevice>& roofline, bool text)
      : roofline_(roofline), options_{.text = text, .roofline = roofline_ ? &*roofline_ : nullptr} {
    for_each_feature_column(Config{}, Features{}, options_,
                            [&](std::string_view name, const auto& value) {
                              using T = decltype(value());
                              names_.emplace_back(name);
                              texts_.emplace_back();
                              if constexpr (kIsText<T>) {
                                texts_.back().reserve(n);
                                arrays_.emplace_back(py::none());
                                data_.push_back(nullptr);
                              } else {
                                auto array = new_array<Stored<T>>(n);
                                data_.push_back(array.mutable_data());
                                arrays_.emplace_back(std::move(array));
                              }
                            });
  }

  FeatureColumns(const FeatureColumns&) = delete;
  FeatureColumns& operator=(const FeatureColumns&) = delete;

  /// Row i (needs no GIL).
  void set(std::size_t i, const Config& config, const Features& features) {
    std::size_t c = 0;
    for_each_feature_column(config, features, options_, [&](std::string_view, const auto& value) {
      using T = decltype(value());
      if constexpr (kIsText<T>) {
        texts_[c].push_back(value());  // a ResNet's architecture: nullopt, None
      } else {
        static_cast<Stored<T>*>(data_[c])[i] = StoredOf<T>::of(value());
      }
      ++c;
    });
  }

  /// The columns in `carb space features`' order (block and precision as codes).
  py::dict to_dict() const {
    py::dict columns;
    for (std::size_t c = 0; c < names_.size(); ++c) {
      columns[py::str(names_[c])] = arrays_[c].is_none() ? py::cast(texts_[c]) : arrays_[c];
    }
    return columns;
  }

 private:
  std::optional<RooflineDevice> roofline_;
  FeatureColumnOptions options_;  // its roofline points into roofline_
  std::vector<std::string> names_;
  std::vector<py::object> arrays_;  // a numeric column's array, None for text
  std::vector<void*> data_;         // its data
  std::vector<std::vector<std::optional<std::string>>> texts_;  // a text column's cells
};

// Features of points by index (through the space's cache), with their indices last.
py::dict feature_columns(SpaceHandle& handle, const std::vector<std::uint64_t>& indices,
                         const std::optional<RooflineDevice>& roofline, bool text) {
  FeatureColumns columns(indices.size(), roofline, text);
  without_gil([&] {
    return handle.with_features([&](const Space&, SpaceFeatures& cache) {
      for (std::size_t i = 0; i < indices.size(); ++i) {
        const Features features = cache.at(indices[i]);
        columns.set(i, cache.config_at(indices[i]), features);
      }
      return 0;
    });
  });
  py::dict out = columns.to_dict();
  out["index"] =
      py::array_t<std::uint64_t>(static_cast<py::ssize_t>(indices.size()), indices.data());
  return out;
}

std::optional<RooflineDevice> roofline_of(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  return parse_roofline_device(*text);
}

}  // namespace

void bind_space(py::module_& m) {
  m.attr("BLOCKS") = py::make_tuple(std::string(to_string(BlockType::kBasic)),
                                    std::string(to_string(BlockType::kBottleneck)));
  m.attr("PRECISIONS") = py::make_tuple(std::string(to_string(Precision::kFp32)),
                                        std::string(to_string(Precision::kFp16)),
                                        std::string(to_string(Precision::kBf16)));
  std::vector<std::string> layer_kinds;
  for (int kind = 0; kind < kLayerKindCount; ++kind) {
    layer_kinds.emplace_back(to_string(static_cast<LayerKind>(kind)));
  }
  m.attr("LAYER_KINDS") = py::cast(layer_kinds);
  std::vector<std::string> scalar_features;
  for (const ScalarFeature& feature : kScalarFeatures) scalar_features.emplace_back(feature.name);
  m.attr("SCALAR_FEATURES") = py::cast(scalar_features);

  py::class_<SpaceHandle, std::shared_ptr<SpaceHandle>>(m, "Space")
      .def_static(
          "from_file",
          [](const std::string& path) {
            return std::make_shared<SpaceHandle>(
                without_gil([&] { return Space::from_file(path); }));
          },
          py::arg("path"))
      .def_static(
          "from_yaml",
          [](const std::string& text, const std::string& source_name) {
            return std::make_shared<SpaceHandle>(Space::from_yaml(text, source_name));
          },
          py::arg("text"), py::arg("source_name"))
      .def_property_readonly("name", [](const SpaceHandle& h) { return h.space().name(); })
      .def_property_readonly("size", [](const SpaceHandle& h) { return h.space().size(); })
      .def_property_readonly("classes", [](const SpaceHandle& h) { return h.space().classes(); })
      .def_property_readonly(
          "axes",
          [](const SpaceHandle& h) {
            py::list axes;
            for (const Axis& axis : h.space().axes()) {
              axes.append(py::dict(py::arg("name") = axis.name, py::arg("values") = axis.values,
                                   py::arg("labels") = axis.labels));
            }
            return axes;
          })
      .def_property_readonly("constraints",
                             [](const SpaceHandle& h) {
                               py::dict constraints;
                               for (const Constraint& c : h.space().constraints()) {
                                 constraints[py::str("max_" + c.feature)] = c.max_value;
                               }
                               return constraints;
                             })
      .def("count",
           [](SpaceHandle& h) {
             return without_gil([&] {
               return h.with_features([](const Space& space, SpaceFeatures& features) {
                 return count_points(space, features, kCountWalkLimit);
               });
             });
           })
      .def(
          "sample",
          [](SpaceHandle& h, std::uint64_t count, std::uint64_t seed, const std::string& sampling) {
            const Sampling how = sampling_of(sampling);
            const std::vector<std::uint64_t> indices = without_gil([&] {
              return h.with_features([&](const Space& space, SpaceFeatures& features) {
                return sample_points(space, features, count, seed, how);
              });
            });
            return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(indices.size()),
                                              indices.data());
          },
          py::arg("count"), py::arg("seed"), py::arg("sampling"))
      .def(
          "accepted",
          [](SpaceHandle& h, std::uint64_t start, std::uint64_t stop) {
            const std::vector<std::uint64_t> indices =
                without_gil([&] { return accepted_in(h, start, stop); });
            return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(indices.size()),
                                              indices.data());
          },
          py::arg("start"), py::arg("stop"))
      .def(
          "keys",
          [](const SpaceHandle& h,
             const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>& array) {
            const std::vector<std::uint64_t> indices = indices_of(array, h.space());
            return without_gil([&] {
              std::vector<std::string> keys;
              keys.reserve(indices.size());
              for (std::uint64_t index : indices) keys.push_back(to_key(h.space().at(index)));
              return keys;
            });
          },
          py::arg("indices"))
      .def(
          "features",
          [](SpaceHandle& h,
             const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>& array,
             const std::optional<std::string>& roofline, bool text) {
            return feature_columns(h, indices_of(array, h.space()), roofline_of(roofline), text);
          },
          py::arg("indices"), py::arg("roofline") = py::none(), py::arg("text") = false)
      .def(
          "features_range",
          [](SpaceHandle& h, std::uint64_t start, std::uint64_t stop,
             const std::optional<std::string>& roofline, bool text) {
            const auto device = roofline_of(roofline);
            const std::vector<std::uint64_t> indices =
                without_gil([&] { return accepted_in(h, start, stop); });
            return feature_columns(h, indices, device, text);
          },
          py::arg("start"), py::arg("stop"), py::arg("roofline") = py::none(),
          py::arg("text") = false);

  m.def(
      "key_features",
      [](const std::vector<std::string>& keys, const std::optional<std::string>& roofline) {
        // Configurations of no space: each network is built and walked.
        const auto device = roofline_of(roofline);
        const std::vector<Config> configs = configs_of_keys(keys);
        FeatureColumns columns(configs.size(), device, true);
        without_gil([&] {
          for (std::size_t i = 0; i < configs.size(); ++i) {
            columns.set(i, configs[i], compute_features(build_network(configs[i])));
          }
          return 0;
        });
        return columns.to_dict();
      },
      py::arg("keys"), py::arg("roofline") = py::none());

  m.def(
      "layers",
      [](const std::string& key) {
        const Network network = build_network(parse_key(key));
        py::dict columns;
        for (const Layer& layer : network.layers) {
          for_each_layer_column(network, layer, [&](std::string_view name, const auto& value) {
            const py::str column(std::string{name});
            if (!columns.contains(column)) columns[column] = py::list();
            columns[column].cast<py::list>().append(value());
          });
        }
        return columns;
      },
      py::arg("key"));
}

}  // namespace carb::python
