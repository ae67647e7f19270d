// Spaces: load, count, sample, list, and features as numpy arrays, chunk by chunk.
#include <cstring>
#include <optional>

#include "binding.hpp"
#include "carb/error.hpp"

namespace carb::python {

namespace {

// Past this many grid points a space with constraints is not walked to count it (the command
// line's limit too).
constexpr std::uint64_t kMaxCountWalk = 1'000'000'000;

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

// A numpy array being filled, with its data pointer at hand (mutable_data() checks each call).
template <typename T>
struct Column {
  explicit Column(std::size_t n) : array(new_array<T>(n)), data(array.mutable_data()) {}
  py::array_t<T> array;
  T* data;
};

// Knobs and features of configurations, column by column: numbers into numpy arrays (allocated
// with the GIL, filled without it), text columns (the key and the stage lists) only when asked.
class FeatureColumns {
 public:
  FeatureColumns(std::size_t n, bool roofline, bool text)
      : has_roofline_(roofline),
        text_(text),
        block_(n),
        depth_(n),
        width_(n),
        early_(n),
        resolution_(n),
        batch_(n),
        precision_(n),
        classes_(n),
        widest_(n),
        launches_(n),
        roofline_(roofline ? n : 0) {
    for (const ScalarFeature& feature : kScalarFeatures) {
      scalar_.push_back(feature.integer != nullptr ? py::array(new_array<std::int64_t>(n))
                                                   : py::array(new_array<double>(n)));
      scalar_data_.push_back(scalar_.back().mutable_data());
    }
    layers_.reserve(kLayerKindCount);
    for (int kind = 0; kind < kLayerKindCount; ++kind) layers_.emplace_back(n);
    if (text_) {
      keys_.reserve(n);
      stage_blocks_.reserve(n);
      stage_widths_.reserve(n);
    }
  }

  /// Row i (needs no GIL); `roofline` when the columns have a roofline time.
  void set(std::size_t i, const Config& config, const Features& features,
           const std::optional<RooflineDevice>& roofline) {
    block_.data[i] = static_cast<std::uint8_t>(config.block);
    depth_.data[i] = config.depth();
    width_.data[i] = config.width_multiplier;
    early_.data[i] = config.early_downsample;
    resolution_.data[i] = config.resolution;
    batch_.data[i] = config.batch;
    precision_.data[i] = static_cast<std::uint8_t>(config.precision);
    for (std::size_t f = 0; f < kScalarFeatures.size(); ++f) {
      const ScalarFeature& feature = kScalarFeatures[f];
      if (feature.integer != nullptr) {
        static_cast<std::int64_t*>(scalar_data_[f])[i] = features.*feature.integer;
      } else {
        static_cast<double*>(scalar_data_[f])[i] = features.*feature.real;
      }
    }
    classes_.data[i] = config.classes;
    widest_.data[i] = features.widest_channels;
    launches_.data[i] = features.kernel_launches;
    for (std::size_t kind = 0; kind < layers_.size(); ++kind) {
      layers_[kind].data[i] = features.layer_counts.by_kind[kind];
    }
    if (roofline) roofline_.data[i] = roofline_ms(build_network(config), *roofline);
    if (text_) {
      keys_.push_back(to_key(config));
      stage_blocks_.push_back(dotted_list(config.stage_blocks));
      stage_widths_.push_back(dotted_list(config.stage_widths));
    }
  }

  /// The columns in `carb space features`' order (block and precision as codes).
  py::dict to_dict() const {
    py::dict columns;
    if (text_) columns["key"] = py::cast(keys_);
    columns["block"] = block_.array;
    columns["depth"] = depth_.array;
    columns["width"] = width_.array;
    columns["early_downsample"] = early_.array;
    columns["resolution"] = resolution_.array;
    columns["batch"] = batch_.array;
    columns["precision"] = precision_.array;
    for (std::size_t f = 0; f < kScalarFeatures.size(); ++f) {
      columns[py::str(std::string(kScalarFeatures[f].name))] = scalar_[f];
    }
    if (text_) {
      columns["stage_blocks"] = py::cast(stage_blocks_);
      columns["stage_widths"] = py::cast(stage_widths_);
    }
    columns["classes"] = classes_.array;
    columns["widest_channels"] = widest_.array;
    columns["kernel_launches"] = launches_.array;
    for (int kind = 0; kind < kLayerKindCount; ++kind) {
      columns[py::str(std::string(to_string(static_cast<LayerKind>(kind))) + "_layers")] =
          layers_[static_cast<std::size_t>(kind)].array;
    }
    if (has_roofline_) columns["roofline_ms"] = roofline_.array;
    return columns;
  }

 private:
  bool has_roofline_;
  bool text_;
  Column<std::uint8_t> block_;
  Column<std::int32_t> depth_;
  Column<double> width_;
  Column<bool> early_;
  Column<std::int32_t> resolution_, batch_;
  Column<std::uint8_t> precision_;
  Column<std::int32_t> classes_, widest_, launches_;
  Column<double> roofline_;
  std::vector<py::array> scalar_;
  std::vector<void*> scalar_data_;
  std::vector<Column<std::int32_t>> layers_;
  std::vector<std::string> keys_, stage_blocks_, stage_widths_;
};

// Features of points by index (through the space's cache), with their indices last.
py::dict feature_columns(SpaceHandle& handle, const std::vector<std::uint64_t>& indices,
                         const std::optional<RooflineDevice>& roofline, bool text) {
  FeatureColumns columns(indices.size(), roofline.has_value(), text);
  without_gil([&] {
    return handle.with_features([&](const Space&, SpaceFeatures& cache) {
      for (std::size_t i = 0; i < indices.size(); ++i) {
        const Features features = cache.at(indices[i]);
        columns.set(i, cache.config_at(indices[i]), features, roofline);
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
                 return count_points(space, features, kMaxCountWalk);
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
        FeatureColumns columns(configs.size(), device.has_value(), true);
        without_gil([&] {
          for (std::size_t i = 0; i < configs.size(); ++i) {
            columns.set(i, configs[i], compute_features(build_network(configs[i])), device);
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
        std::vector<std::string> names, kinds, inputs, outputs;
        std::vector<std::int64_t> kernel, stride, padding, params, macs;
        std::vector<bool> in_place;
        for (const Layer& layer : network.layers) {
          names.push_back(layer_name(layer));
          kinds.emplace_back(to_string(layer.kind));
          inputs.push_back(input_shapes(network, layer));
          outputs.push_back(to_string(network.tensors[static_cast<std::size_t>(layer.output)]));
          kernel.push_back(layer.kernel);
          stride.push_back(layer.stride);
          padding.push_back(layer.padding);
          params.push_back(layer.params);
          macs.push_back(layer.macs);
          in_place.push_back(layer.in_place);
        }
        py::dict columns;
        columns["layer"] = names;
        columns["kind"] = kinds;
        columns["input_shape"] = inputs;
        columns["output_shape"] = outputs;
        columns["kernel"] = kernel;
        columns["stride"] = stride;
        columns["padding"] = padding;
        columns["params"] = params;
        columns["macs"] = macs;
        columns["in_place"] = in_place;
        return columns;
      },
      py::arg("key"));
}

}  // namespace carb::python
