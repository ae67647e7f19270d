// Analytic features in closed form, the roofline model, and the cached per-space evaluator.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "carb/engine_plan.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"

namespace carb {

int LayerCounts::total() const {
  int sum = 0;
  for (int count : by_kind) sum += count;
  return sum;
}

std::string_view to_string(LayerClass layer_class) {
  static constexpr std::array<std::string_view, kLayerClassCount> kNames = {
      "conv_stem",
      "conv1x1_s1_small",
      "conv1x1_s1_medium",
      "conv1x1_s1_large",
      "conv1x1_s2_small",
      "conv1x1_s2_medium",
      "conv1x1_s2_large",
      "conv3x3_s1_small",
      "conv3x3_s1_medium",
      "conv3x3_s1_large",
      "conv3x3_s2_small",
      "conv3x3_s2_medium",
      "conv3x3_s2_large",
      "fc",
      "pool",
      "elementwise",
      "conv_depthwise",
      "conv_grouped",
      "conv_other",
      "data_movement",
  };
  return kNames[static_cast<std::size_t>(layer_class)];
}

LayerClass layer_class_of(const Network& network, const Layer& layer) {
  switch (layer.kind) {
    case LayerKind::kFullyConnected:
      return LayerClass::kFullyConnected;
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
    case LayerKind::kGlobalAvgPool:
      return LayerClass::kPool;
    case LayerKind::kConcat:
    case LayerKind::kChannelShuffle:
    case LayerKind::kSlice:
      return LayerClass::kDataMovement;
    case LayerKind::kConv:
      break;
    default:
      return LayerClass::kElementwise;
  }
  if (layer.inputs[0] == network.input) return LayerClass::kConvStem;
  if (layer.groups > 1) {
    const int in_channels = network.tensors[static_cast<std::size_t>(layer.inputs[0])].c;
    return layer.groups == in_channels ? LayerClass::kConvDepthwise : LayerClass::kConvGrouped;
  }
  if ((layer.kernel != 1 && layer.kernel != 3) || (layer.stride != 1 && layer.stride != 2)) {
    return LayerClass::kConvOther;
  }
  const Shape& out = network.tensors[static_cast<std::size_t>(layer.output)];
  const std::int64_t pixels = static_cast<std::int64_t>(out.h) * out.w;
  const int size = pixels <= 16 ? 0 : (pixels <= 256 ? 1 : 2);
  const int first = layer.kernel == 1 ? (layer.stride == 1 ? 1 : 4) : (layer.stride == 1 ? 7 : 10);
  return static_cast<LayerClass>(first + size);
}

namespace {

// A layer's work as element counts for the network's own batch: MACs and activation elements
// (its inputs and output) scale with the batch, weights do not.
struct LayerWork {
  std::int64_t macs = 0;
  std::int64_t activation_elements = 0;
  std::int64_t weight_elements = 0;
  bool operator==(const LayerWork& other) const = default;
};

// Everything about a network that does not depend on the element size, as element counts for
// the network's own batch.
struct Profile {
  std::int64_t params = 0;
  std::int64_t macs = 0;
  std::int64_t activation_elements = 0;
  std::int64_t peak_activation_elements = 0;
  std::int64_t arena_elements = 0;  ///< the engine plan's arena, plain layouts (engine_arena_bytes)
  std::int64_t input_elements = 0;
  std::int64_t torch_native_macs = 0;  ///< at batch 1 (torch_native_macs), else 0
  /// Prepare's weight high-water mark (prepare_peak_bytes) for 2- and 4-byte elements.
  std::array<std::int64_t, 2> staged_peak_bytes{};
  LayerCounts layer_counts;
  int widest_channels = 0;
  int output_channels = 0;
  std::array<LayerWork, kLayerClassCount> classes{};  // summed per class
  std::array<int, kLayerClassCount> class_counts{};
  // Distinct layer works with how many layers have each (repeated blocks share them), for the
  // per-layer roofline sums, which are not linear in the batch.
  std::vector<std::pair<LayerWork, int>> distinct;
};

LayerWork work_of(const Network& network, const Layer& layer) {
  LayerWork work;
  work.macs = layer.macs;
  work.weight_elements = layer.params;
  work.activation_elements = network.tensors[static_cast<std::size_t>(layer.output)].elements();
  for (int k = 0; k < layer.input_count(); ++k) {
    work.activation_elements +=
        network.tensors[static_cast<std::size_t>(layer.inputs[static_cast<std::size_t>(k)])]
            .elements();
  }
  return work;
}

std::int64_t peak_live_elements(const Network& network) {
  const std::size_t tensor_count = network.tensors.size();
  // Each tensor lives in a buffer; in-place layers write into their first input's buffer.
  std::vector<int> buffer_of(tensor_count);
  for (std::size_t t = 0; t < tensor_count; ++t) buffer_of[t] = static_cast<int>(t);
  for (const Layer& layer : network.layers) {
    if (layer.in_place) {
      buffer_of[static_cast<std::size_t>(layer.output)] =
          buffer_of[static_cast<std::size_t>(layer.inputs[0])];
    }
  }
  const int never = static_cast<int>(network.layers.size());
  std::vector<int> last_use(tensor_count, -1);
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    const Layer& layer = network.layers[i];
    for (int k = 0; k < layer.input_count(); ++k) {
      last_use[static_cast<std::size_t>(
          buffer_of[static_cast<std::size_t>(layer.inputs[static_cast<std::size_t>(k)])])] =
          static_cast<int>(i);
    }
  }
  last_use[static_cast<std::size_t>(buffer_of[static_cast<std::size_t>(network.output)])] = never;

  std::int64_t live = network.tensors[static_cast<std::size_t>(network.input)].elements();
  std::int64_t peak = live;
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    const Layer& layer = network.layers[i];
    if (!layer.in_place) live += network.tensors[static_cast<std::size_t>(layer.output)].elements();
    peak = std::max(peak, live);
    for (int k = 0; k < layer.input_count(); ++k) {
      const int buffer =
          buffer_of[static_cast<std::size_t>(layer.inputs[static_cast<std::size_t>(k)])];
      const bool written_here = layer.in_place && k == 0;
      if (!written_here && last_use[static_cast<std::size_t>(buffer)] == static_cast<int>(i)) {
        live -= network.tensors[static_cast<std::size_t>(buffer)].elements();
        last_use[static_cast<std::size_t>(buffer)] = -1;  // freed once
      }
    }
  }
  return peak;
}

// The engine plan's buffers (engine_plan.hpp), each as the IR tensor that sizes it and its
// lifetime, for the last topology planned. A plan depends on the topology alone, so the points
// of a space that differ only in resolution share one (SpaceFeatures visits them in a row).
struct ArenaMemo {
  std::vector<int> topology;           ///< topology_of the network planned
  std::vector<engine::Value> buffers;  ///< the plan's values (their shapes unused)
  // Scratch space, kept to spare an allocation a network.
  std::vector<int> next_topology;
  std::vector<engine::BufferRequest> requests;
};

// What plan_execution reads of a network, into `topology`: each layer's kind, in-place flag,
// output and inputs, and the network's input and output.
void topology_of(const Network& network, std::vector<int>& topology) {
  topology.assign({network.input, network.output});
  for (const Layer& layer : network.layers) {
    topology.push_back(static_cast<int>(layer.kind) * 2 + (layer.in_place ? 1 : 0));
    topology.push_back(layer.output);
    topology.push_back(layer.input_count());
    topology.insert(topology.end(), layer.inputs.begin(), layer.inputs.end());
  }
}

// The activation arena carb's engines plan (engine_plan.hpp: fused kernels, in-place sums and
// elementwise ops, best-fit placement), in elements of plain layouts: no channel padding, no
// alignment, so it scales with the batch as the other activation features do.
std::int64_t arena_elements(const Network& network, ArenaMemo& memo) {
  topology_of(network, memo.next_topology);
  if (memo.next_topology != memo.topology) {
    memo.buffers = engine::plan_execution(network, engine::ResidualMode::kAccumulateInPlace,
                                          engine::OpNames::kUnnamed)
                       .values;
    std::swap(memo.topology, memo.next_topology);
  }
  memo.requests.clear();
  for (const engine::Value& value : memo.buffers) {
    memo.requests.push_back({network.tensors[static_cast<std::size_t>(value.tensor)].elements(),
                             value.first_op, value.last_op});
  }
  return engine::plan_arena(memo.requests, 1).arena_bytes;
}

// Prepare's weight high-water mark as carb's CPU engine reaches it, for 2- and 4-byte elements:
// the weights load layer by layer, and while a conv's or fc layer's weights are reordered into
// the kernel's layout, its parameters are also staged as float32. The most, over those layers,
// of the parameter bytes loaded so far (its own included) plus its float32 copy.
std::array<std::int64_t, 2> staged_peak_bytes(const Network& network) {
  constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
  std::int64_t loaded = 0;  // parameters
  std::array<std::int64_t, 2> peak{};
  for (const Layer& layer : network.layers) {
    loaded += layer.params;
    if (layer.kind == LayerKind::kConv || layer.kind == LayerKind::kFullyConnected) {
      peak[0] = std::max(peak[0], 2 * loaded + kFloat * layer.params);
      peak[1] = std::max(peak[1], 4 * loaded + kFloat * layer.params);
    }
  }
  return peak;
}

Profile profile_of(const Network& network, ArenaMemo& memo) {
  Profile profile;
  for (const Layer& layer : network.layers) {
    profile.params += layer.params;
    profile.macs += layer.macs;
    ++profile.layer_counts.by_kind[static_cast<std::size_t>(layer.kind)];
    const Shape& out = network.tensors[static_cast<std::size_t>(layer.output)];
    if (layer.kind == LayerKind::kConv) {
      profile.widest_channels = std::max(profile.widest_channels, out.c);
      if (torch_runs_natively(network, layer)) profile.torch_native_macs += layer.macs;
    }
    if (layer.kind == LayerKind::kConv || layer.kind == LayerKind::kFullyConnected) {
      profile.activation_elements += out.elements();
    }
    const LayerWork work = work_of(network, layer);
    const auto c = static_cast<std::size_t>(layer_class_of(network, layer));
    profile.classes[c].macs += work.macs;
    profile.classes[c].activation_elements += work.activation_elements;
    profile.classes[c].weight_elements += work.weight_elements;
    ++profile.class_counts[c];
    const auto same = std::find_if(profile.distinct.begin(), profile.distinct.end(),
                                   [&](const auto& entry) { return entry.first == work; });
    if (same == profile.distinct.end()) {
      profile.distinct.emplace_back(work, 1);
    } else {
      ++same->second;
    }
  }
  profile.peak_activation_elements = peak_live_elements(network);
  profile.arena_elements = arena_elements(network, memo);
  profile.input_elements = network.tensors[static_cast<std::size_t>(network.input)].elements();
  profile.staged_peak_bytes = staged_peak_bytes(network);
  profile.output_channels = network.tensors[static_cast<std::size_t>(network.output)].c;
  return profile;
}

// Features of `batch_scale` copies of a profiled network at `precision`.
Features scale(const Profile& profile, std::int64_t batch_scale, Precision precision) {
  const std::int64_t bytes = element_bytes(precision);
  Features features;
  features.params = profile.params;
  features.macs = profile.macs * batch_scale;
  features.flops = 2 * features.macs;
  features.param_bytes = profile.params * bytes;
  features.activation_bytes = profile.activation_elements * batch_scale * bytes;
  features.peak_activation_bytes = profile.peak_activation_elements * batch_scale * bytes;
  features.engine_arena_bytes = profile.arena_elements * batch_scale * bytes;
  CARB_CHECK(bytes == 2 || bytes == 4, "elements of 2 or 4 bytes");
  const std::int64_t float_input =
      profile.input_elements * batch_scale * static_cast<std::int64_t>(sizeof(float));
  features.prepare_peak_bytes =
      features.engine_arena_bytes +
      std::max(features.param_bytes + float_input, profile.staged_peak_bytes[bytes == 4 ? 1 : 0]);
  // Batch 1 only (the profile counted a network of batch 1), and oneDNN takes every bf16 conv.
  features.torch_native_macs =
      batch_scale == 1 && precision == Precision::kFp32 ? profile.torch_native_macs : 0;
  features.arithmetic_intensity =
      static_cast<double>(features.flops) /
      static_cast<double>(features.param_bytes + features.activation_bytes);
  features.layer_counts = profile.layer_counts;
  features.widest_channels = profile.widest_channels;
  features.kernel_launches = profile.layer_counts.total();
  features.output_channels = profile.output_channels;
  const auto batch = static_cast<double>(batch_scale);
  const auto moved = [&](const LayerWork& work) {
    return (static_cast<double>(work.activation_elements) * batch +
            static_cast<double>(work.weight_elements)) *
           static_cast<double>(bytes);
  };
  for (std::size_t c = 0; c < features.layer_classes.size(); ++c) {
    features.layer_classes[c].macs = static_cast<double>(profile.classes[c].macs) * batch;
    features.layer_classes[c].bytes = moved(profile.classes[c]);
    features.layer_classes[c].count = profile.class_counts[c];
  }
  for (const auto& [work, layers] : profile.distinct) {
    const double flops = 2.0 * static_cast<double>(work.macs) * batch;
    const double layer_bytes = moved(work);
    for (std::size_t b = 0; b < kRooflineBalances.size(); ++b) {
      features.roofline_flops[b] += layers * std::max(flops, kRooflineBalances[b] * layer_bytes);
    }
  }
  return features;
}

}  // namespace

bool torch_runs_natively(const Network& network, const Layer& layer) {
  constexpr std::int64_t kMaxNativeInputElements = 20480;
  const Shape& in = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
  return layer.kind == LayerKind::kConv && layer.groups == 1 && layer.kernel <= 3 && in.n == 1 &&
         in.elements() <= kMaxNativeInputElements;
}

Features compute_features(const Network& network) {
  ArenaMemo memo;
  return scale(profile_of(network, memo), 1, network.config.precision);
}

RooflineDevice parse_roofline_device(std::string_view text) {
  const std::size_t colon = text.find(':');
  double tflops = 0;
  double gbps = 0;
  bool ok = colon != std::string_view::npos;
  if (ok) {
    auto [end1, ec1] = std::from_chars(text.data(), text.data() + colon, tflops);
    auto [end2, ec2] = std::from_chars(text.data() + colon + 1, text.data() + text.size(), gbps);
    ok = ec1 == std::errc() && end1 == text.data() + colon && ec2 == std::errc() &&
         end2 == text.data() + text.size() && tflops > 0 && gbps > 0 && std::isfinite(tflops) &&
         std::isfinite(gbps);
  }
  if (!ok) {
    throw Error(ErrorCategory::kUsage, "roofline device '" + std::string(text) +
                                           "': expected TFLOPS:GBPS with both > 0, e.g. 67:3350");
  }
  return {tflops * 1e12, gbps * 1e9};
}

double roofline_ms(const Network& network, const RooflineDevice& device) {
  const double bytes_per_element = element_bytes(network.config.precision);
  double seconds = 0;
  for (const Layer& layer : network.layers) {
    double elements = static_cast<double>(
        network.tensors[static_cast<std::size_t>(layer.output)].elements() + layer.params);
    for (int k = 0; k < layer.input_count(); ++k) {
      elements += static_cast<double>(
          network.tensors[static_cast<std::size_t>(layer.inputs[static_cast<std::size_t>(k)])]
              .elements());
    }
    const double compute_s = 2.0 * static_cast<double>(layer.macs) / device.peak_flops_per_s;
    const double memory_s = elements * bytes_per_element / device.bandwidth_bytes_per_s;
    seconds += std::max(compute_s, memory_s);
  }
  return seconds * 1e3;
}

std::optional<double> feature_value(const Features& features, std::string_view name) {
  for (const ScalarFeature& feature : kScalarFeatures) {
    if (feature.name == name) return feature.value(features);
  }
  return std::nullopt;
}

std::string_view layer_count_column(LayerKind kind) {
  static const std::array<std::string, kLayerKindCount> columns = [] {
    std::array<std::string, kLayerKindCount> names;
    for (int k = 0; k < kLayerKindCount; ++k) {
      names[static_cast<std::size_t>(k)] =
          std::string(to_string(static_cast<LayerKind>(k))) + "_layers";
    }
    return names;
  }();
  return columns.at(static_cast<std::size_t>(kind));
}

std::optional<std::string> architecture_name(const Config& config) {
  if (!config.imported()) return std::nullopt;
  const auto architecture = find_architecture(config.architecture);
  return architecture ? architecture->name : config.architecture;
}

std::vector<std::string> feature_column_names(const FeatureColumnOptions& options) {
  std::vector<std::string> names;
  for_each_feature_column(Config{}, Features{}, options,
                          [&](std::string_view name, const auto&) { names.emplace_back(name); });
  return names;
}

// Profiles per (architecture, resolution) pair: a dense table when the space has few enough
// pairs, otherwise a hash map that is cleared when it grows past its cap (bounded memory).
struct SpaceFeatures::Cache {
  static constexpr std::uint64_t kDenseLimit = 1u << 21;
  static constexpr std::size_t kMapCap = 1u << 20;
  std::vector<std::optional<Profile>> dense;
  std::unordered_map<std::uint64_t, Profile> sparse;
  std::uint64_t groups = 0;
  std::size_t batch_axis = 0;
  std::size_t precision_axis = 0;
  /// The configuration config_at() gave last, and its group: consecutive points of one
  /// architecture and resolution differ in batch and precision only.
  std::optional<std::uint64_t> config_group;
  Config group_config;
  ArenaMemo arena_memo;  ///< the last topology's plan, shared by its resolutions
};

SpaceFeatures::SpaceFeatures(const Space& space)
    : space_(space), cache_(std::make_unique<Cache>()) {
  cache_->groups = space.size() / space.points_per_architecture_resolution();
  if (cache_->groups <= Cache::kDenseLimit) cache_->dense.resize(cache_->groups);
  cache_->precision_axis = space.axes().size() - 1;
  cache_->batch_axis = space.axes().size() - 2;
  CARB_CHECK(space.axes()[cache_->precision_axis].knob == Knob::kPrecision &&
                 space.axes()[cache_->batch_axis].knob == Knob::kBatch,
             "batch and precision must be the last axes");
}

SpaceFeatures::~SpaceFeatures() = default;

Features SpaceFeatures::at(std::uint64_t index) {
  const std::uint64_t per_group = space_.points_per_architecture_resolution();
  const std::uint64_t group = index / per_group;
  const std::uint64_t within = index % per_group;
  const Axis& precision_axis = space_.axes()[cache_->precision_axis];
  const Axis& batch_axis = space_.axes()[cache_->batch_axis];
  const std::uint64_t precisions = precision_axis.values.size();
  const auto precision =
      static_cast<Precision>(static_cast<int>(precision_axis.values[within % precisions]));
  const auto batch = static_cast<std::int64_t>(batch_axis.values[within / precisions]);

  const Profile* profile = nullptr;
  auto compute = [&]() {
    Config config = space_.at(group * per_group);
    config.batch = 1;
    return profile_of(build_network(config), cache_->arena_memo);
  };
  if (!cache_->dense.empty()) {
    auto& slot = cache_->dense[group];
    if (!slot) slot = compute();
    profile = &*slot;
  } else {
    auto found = cache_->sparse.find(group);
    if (found == cache_->sparse.end()) {
      if (cache_->sparse.size() >= Cache::kMapCap) cache_->sparse.clear();
      found = cache_->sparse.emplace(group, compute()).first;
    }
    profile = &found->second;
  }
  return scale(*profile, batch, precision);
}

const Config& SpaceFeatures::config_at(std::uint64_t index) {
  const std::uint64_t per_group = space_.points_per_architecture_resolution();
  const std::uint64_t group = index / per_group;
  if (cache_->config_group != group) {
    cache_->group_config = space_.at(group * per_group);
    cache_->config_group = group;
  }
  const std::uint64_t within = index % per_group;
  const std::vector<double>& precisions = space_.axes()[cache_->precision_axis].values;
  const std::vector<double>& batches = space_.axes()[cache_->batch_axis].values;
  Config& config = cache_->group_config;
  config.precision =
      static_cast<Precision>(static_cast<int>(precisions[within % precisions.size()]));
  config.batch = static_cast<int>(batches[within / precisions.size()]);
  return config;
}

std::string SpaceFeatures::violated_constraint(std::uint64_t index) {
  if (space_.constraints().empty()) return {};
  const Features features = at(index);
  for (const Constraint& constraint : space_.constraints()) {
    const auto value = feature_value(features, constraint.feature);
    CARB_CHECK(value.has_value(), "unknown constraint feature " + constraint.feature);
    if (*value > constraint.max_value) return "max_" + constraint.feature;
  }
  return {};
}

}  // namespace carb
