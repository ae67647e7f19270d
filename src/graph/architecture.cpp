// Imported architectures (docs/onnx.md): their content hash, JSON form and process-wide
// registry, and their networks at a configuration's batch, resolution and precision (shape
// inference, parameters and MACs).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "network_internal.hpp"

namespace carb {

namespace {

using json = nlohmann::json;

// Floats in the hash's text: enough digits to tell any two floats apart.
std::string float_text(float value) {
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.9g", static_cast<double>(value));
  return buffer.data();
}

std::optional<LayerKind> parse_layer_kind(std::string_view text) {
  for (int k = 0; k < kLayerKindCount; ++k) {
    if (to_string(static_cast<LayerKind>(k)) == text) return static_cast<LayerKind>(k);
  }
  return std::nullopt;
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const Architecture>, std::less<>> architectures;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

// Output size of a window of `kernel` (dilated: its reach) sliding over `size` padded values.
std::int64_t window_out(int size, int kernel, int stride, int before, int after, int dilation,
                        bool ceil_mode) {
  const std::int64_t reach = static_cast<std::int64_t>(dilation) * (kernel - 1) + 1;
  const std::int64_t span = static_cast<std::int64_t>(size) + before + after - reach;
  if (span < 0) return 0;
  std::int64_t out = span / stride + 1;
  if (ceil_mode && span % stride != 0) {
    ++out;
    // PyTorch's rule: the last window must start inside the input or its leading padding.
    if ((out - 1) * stride >= static_cast<std::int64_t>(size) + before) --out;
  }
  return out;
}

// Limits that keep every count carb derives from a network (features sum MACs, parameters and
// activation elements and scale them by element bytes) inside 64 bits.
constexpr std::int64_t kMaxCount = std::int64_t{1} << 60;
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 30;

// a * b, or nullopt past kMaxCount (either negative: nullopt too).
std::optional<std::int64_t> bounded_product(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product) || product > kMaxCount) {
    return std::nullopt;
  }
  return product;
}

json layer_to_json(const Layer& layer) {
  json j = {{"kind", to_string(layer.kind)}, {"name", layer.name}, {"inputs", layer.inputs}};
  switch (layer.kind) {
    case LayerKind::kConv:
      j["channels"] = layer.channels;
      j["groups"] = layer.groups;
      j["dilation"] = layer.dilation;
      j["bias"] = layer.bias;
      [[fallthrough]];
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      j["kernel"] = layer.kernel;
      j["stride"] = layer.stride;
      j["padding"] = {layer.padding, layer.padding_after};
      if (layer.kind != LayerKind::kConv) j["ceil_mode"] = layer.ceil_mode;
      if (layer.kind == LayerKind::kAvgPool) j["count_include_pad"] = layer.count_include_pad;
      break;
    case LayerKind::kFullyConnected:
      j["channels"] = layer.channels;
      j["fc_inputs"] = layer.fc_inputs;
      j["bias"] = layer.bias;
      break;
    case LayerKind::kClip:
      j["lower"] = layer.lower;
      j["upper"] = layer.upper;
      break;
    case LayerKind::kHardSigmoid:
      j["alpha"] = layer.alpha;
      j["beta"] = layer.beta;
      break;
    case LayerKind::kChannelShuffle:
      j["groups"] = layer.groups;
      break;
    case LayerKind::kSlice:
      j["begin"] = layer.begin;
      j["channels"] = layer.channels;
      break;
    default:
      break;
  }
  return j;
}

Layer layer_from_json(const json& j, const std::string& origin, std::size_t index) {
  const auto bad = [&](const std::string& what) {
    return Error(ErrorCategory::kInput, origin + ": not a carb architecture: layer " +
                                            std::to_string(index) + ": " + what);
  };
  if (!j.is_object()) throw bad("not an object");
  Layer layer;
  const auto kind = parse_layer_kind(j.value("kind", std::string()));
  if (!kind) throw bad("unknown kind '" + j.value("kind", std::string()) + "'");
  layer.kind = *kind;
  layer.name = j.value("name", std::string());
  const auto integer = [&](const char* key, int fallback) {
    if (!j.contains(key)) return fallback;
    const json& value = j.at(key);
    if (!value.is_number_integer()) throw bad(std::string(key) + " is not an integer");
    const auto number = value.get<std::int64_t>();
    if (number < -1 || number > (1 << 24)) throw bad(std::string(key) + " is out of range");
    return static_cast<int>(number);
  };
  const auto real = [&](const char* key) {
    if (!j.contains(key)) return 0.0f;
    if (!j.at(key).is_number()) throw bad(std::string(key) + " is not a number");
    return j.at(key).get<float>();
  };
  const auto flag = [&](const char* key) {
    if (!j.contains(key)) return false;
    if (!j.at(key).is_boolean()) throw bad(std::string(key) + " is not true or false");
    return j.at(key).get<bool>();
  };
  if (!j.contains("inputs") || !j.at("inputs").is_array()) throw bad("has no inputs list");
  for (const json& input : j.at("inputs")) {
    if (!input.is_number_integer()) throw bad("an input is not an integer");
    layer.inputs.push_back(static_cast<int>(input.get<std::int64_t>()));
  }
  layer.channels = integer("channels", 0);
  layer.groups = integer("groups", 1);
  layer.dilation = integer("dilation", 1);
  layer.kernel = integer("kernel", 0);
  layer.stride = integer("stride", 1);
  layer.begin = integer("begin", 0);
  if (j.contains("padding")) {
    const json& padding = j.at("padding");
    if (!padding.is_array() || padding.size() != 2 || !padding[0].is_number_integer() ||
        !padding[1].is_number_integer()) {
      throw bad("padding is not [before, after]");
    }
    layer.padding = padding[0].get<int>();
    layer.padding_after = padding[1].get<int>();
  }
  if (j.contains("fc_inputs")) {
    if (!j.at("fc_inputs").is_number_integer()) throw bad("fc_inputs is not an integer");
    layer.fc_inputs = j.at("fc_inputs").get<std::int64_t>();
  }
  layer.bias = flag("bias");
  layer.ceil_mode = flag("ceil_mode");
  layer.count_include_pad = flag("count_include_pad");
  layer.lower = real("lower");
  layer.upper = real("upper");
  layer.alpha = real("alpha");
  layer.beta = real("beta");
  return layer;
}

}  // namespace

NetworkBuilder::NetworkBuilder(std::string where, const Config& config, int input_channels,
                               bool name_layers)
    : where_(std::move(where)), name_layers_(name_layers) {
  network_.config = config;
  network_.input = 0;
  const Shape in{config.batch, input_channels, config.resolution, config.resolution};
  if (in.n < 1 || in.c < 1 || in.h < 1) {
    throw Error(ErrorCategory::kInput, where_ + "its input " + std::to_string(in.n) + "x" +
                                           std::to_string(in.c) + "x" + std::to_string(in.h) + "x" +
                                           std::to_string(in.w) + " is empty");
  }
  total_elements_ = checked_elements(nullptr, in);
  network_.tensors.push_back(in);
}

void NetworkBuilder::fail(const Layer& layer, const std::string& message) const {
  if (!name_layers_) throw Error(ErrorCategory::kInput, where_ + message);
  throw Error(ErrorCategory::kInput, where_ + "layer " + layer_name(layer) + " (" +
                                         std::string(to_string(layer.kind)) + ") " + message);
}

const Shape& NetworkBuilder::input(const Layer& layer, std::size_t k) const {
  if (k >= layer.inputs.size()) fail(layer, "lacks input " + std::to_string(k + 1));
  return network_.tensors[static_cast<std::size_t>(layer.inputs[k])];
}

void NetworkBuilder::expect_inputs(const Layer& layer, int count) const {
  if (layer.input_count() != count) {
    fail(layer,
         "has " + std::to_string(layer.input_count()) + " inputs, needs " + std::to_string(count));
  }
}

namespace {

std::string text(const Shape& shape) {
  return std::to_string(shape.n) + "x" + std::to_string(shape.c) + "x" + std::to_string(shape.h) +
         "x" + std::to_string(shape.w);
}

}  // namespace

// A tensor's elements, checked against kMaxCount (layer: the layer writing it; null: the input).
std::int64_t NetworkBuilder::checked_elements(const Layer* layer, const Shape& shape) const {
  std::optional<std::int64_t> elements = 1;
  for (const int dim : {shape.n, shape.c, shape.h, shape.w}) {
    if (elements) elements = bounded_product(*elements, dim);
  }
  if (!elements) {
    const std::string message = "has " + text(shape) + " values, too many to count";
    if (layer != nullptr) fail(*layer, message);
    throw Error(ErrorCategory::kInput, where_ + "its input " + message);
  }
  return *elements;
}

void NetworkBuilder::add_to_totals(const Layer& layer, const Shape& out) {
  std::int64_t elements = checked_elements(&layer, out);
  for (const int tensor : layer.inputs) {
    elements += network_.tensors[static_cast<std::size_t>(tensor)].elements();
    if (elements > kMaxCount) break;
  }
  total_macs_ += layer.macs;
  total_params_ += layer.params;
  total_elements_ += std::min(elements, kMaxCount + 1);
  if (total_macs_ > kMaxCount || total_params_ > kMaxCount || total_elements_ > kMaxCount) {
    fail(layer, "makes the network too large to count (MACs, parameters or values past 2^60)");
  }
}

Shape NetworkBuilder::window(Layer& layer, const Shape& in, int channels) const {
  if (layer.kernel < 1 || layer.stride < 1 || layer.dilation < 1 || layer.padding < 0 ||
      layer.padding_after < 0) {
    fail(layer, "has a window of kernel " + std::to_string(layer.kernel) + ", stride " +
                    std::to_string(layer.stride) + ", dilation " + std::to_string(layer.dilation) +
                    " and padding " + std::to_string(layer.padding) + "/" +
                    std::to_string(layer.padding_after));
  }
  const auto out_size = [&](int size) {
    return window_out(size, layer.kernel, layer.stride, layer.padding, layer.padding_after,
                      layer.dilation, layer.ceil_mode);
  };
  const std::int64_t h = out_size(in.h);
  const std::int64_t w = out_size(in.w);
  if (h < 1 || w < 1) {
    fail(layer, "gets an input of " + text(in) + ", too small for its " +
                    std::to_string(layer.kernel) + "x" + std::to_string(layer.kernel) + " window");
  }
  if (h > kMaxDimension || w > kMaxDimension) {
    fail(layer, "pads its input of " + text(in) + " past 2^30 values a side");
  }
  return {in.n, channels, static_cast<int>(h), static_cast<int>(w)};
}

Shape NetworkBuilder::output_shape(Layer& layer) const {
  layer.params = 0;
  layer.macs = 0;
  if (is_activation(layer.kind)) {
    expect_inputs(layer, 1);
    return input(layer, 0);
  }
  switch (layer.kind) {
    case LayerKind::kConv: {
      expect_inputs(layer, 1);
      const Shape& in = input(layer, 0);
      if (layer.groups < 1 || in.c % layer.groups != 0 || layer.channels < 1 ||
          layer.channels % layer.groups != 0) {
        fail(layer, "splits " + std::to_string(in.c) + " input and " +
                        std::to_string(layer.channels) + " output channels into " +
                        std::to_string(layer.groups) + " groups");
      }
      const Shape out = window(layer, in, layer.channels);
      std::optional<std::int64_t> per_output =
          bounded_product(in.c / layer.groups, std::int64_t{layer.kernel} * layer.kernel);
      std::optional<std::int64_t> params =
          per_output ? bounded_product(layer.channels, *per_output) : std::nullopt;
      std::optional<std::int64_t> macs =
          per_output ? bounded_product(checked_elements(&layer, out), *per_output) : std::nullopt;
      if (!params || !macs) fail(layer, "has too many parameters or MACs to count");
      layer.params = *params + (layer.bias ? layer.channels : 0);
      layer.macs = *macs;
      return out;
    }
    case LayerKind::kBatchNorm: {
      expect_inputs(layer, 1);
      const Shape& in = input(layer, 0);
      layer.params = 2 * static_cast<std::int64_t>(in.c);
      return in;
    }
    case LayerKind::kRelu:
    case LayerKind::kClip:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSwish:
      break;  // activations, above
    case LayerKind::kAdd:
    case LayerKind::kMul: {
      expect_inputs(layer, 2);
      const Shape& a = input(layer, 0);
      const Shape& b = input(layer, 1);
      const bool broadcast =
          layer.kind == LayerKind::kMul && b.n == a.n && b.c == a.c && b.h == 1 && b.w == 1;
      if (!(a == b) && !broadcast) {
        fail(layer, "gets inputs of " + text(a) + " and " + text(b) +
                        (layer.kind == LayerKind::kMul ? ", neither equal nor N x C x 1 x 1"
                                                       : ", which differ"));
      }
      return a;
    }
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: {
      expect_inputs(layer, 1);
      const Shape& in = input(layer, 0);
      return window(layer, in, in.c);
    }
    case LayerKind::kGlobalAvgPool: {
      expect_inputs(layer, 1);
      const Shape& in = input(layer, 0);
      return {in.n, in.c, 1, 1};
    }
    case LayerKind::kFullyConnected: {
      expect_inputs(layer, 1);
      const Shape& in = input(layer, 0);
      const std::int64_t values = static_cast<std::int64_t>(in.c) * in.h * in.w;
      if (layer.fc_inputs > 0 && layer.fc_inputs != values) {
        fail(layer, "has weights for " + std::to_string(layer.fc_inputs) + " inputs but gets " +
                        text(in) + " (" + std::to_string(values) + " values per image)");
      }
      if (layer.channels < 1) fail(layer, "has no output features");
      const std::optional<std::int64_t> weights = bounded_product(values, layer.channels);
      const std::optional<std::int64_t> macs =
          weights ? bounded_product(in.n, *weights) : std::nullopt;
      if (!macs) fail(layer, "has too many parameters or MACs to count");
      layer.params = *weights + (layer.bias ? layer.channels : 0);
      layer.macs = *macs;
      return {in.n, layer.channels, 1, 1};
    }
    case LayerKind::kConcat: {
      if (layer.inputs.empty()) fail(layer, "has no inputs");
      const Shape& first = input(layer, 0);
      std::int64_t channels = first.c;
      for (std::size_t k = 1; k < layer.inputs.size(); ++k) {
        const Shape& next = input(layer, k);
        if (next.n != first.n || next.h != first.h || next.w != first.w) {
          fail(layer, "concatenates " + text(first) + " with " + text(next));
        }
        channels += next.c;
        if (channels > kMaxDimension) fail(layer, "makes more than 2^30 channels");
      }
      return {first.n, static_cast<int>(channels), first.h, first.w};
    }
    case LayerKind::kChannelShuffle: {
      expect_inputs(layer, 1);
      const Shape& in = input(layer, 0);
      if (layer.groups < 1 || in.c % layer.groups != 0) {
        fail(layer, "shuffles " + std::to_string(in.c) + " channels in " +
                        std::to_string(layer.groups) + " groups");
      }
      return in;
    }
    case LayerKind::kSlice: {
      expect_inputs(layer, 1);
      const Shape& in = input(layer, 0);
      if (layer.begin < 0 || layer.channels < 1 ||
          std::int64_t{layer.begin} + layer.channels > in.c) {
        fail(layer, "takes channels " + std::to_string(layer.begin) + " to " +
                        std::to_string(std::int64_t{layer.begin} + layer.channels) + " of " +
                        std::to_string(in.c));
      }
      return {in.n, layer.channels, in.h, in.w};
    }
  }
  fail(layer, "is of an unknown kind");
}

const Shape& NetworkBuilder::append(Layer layer) {
  for (const int input : layer.inputs) {
    if (input < 0 || input >= tensor_count()) {
      fail(layer, "reads tensor " + std::to_string(input) + ", which no earlier layer writes");
    }
  }
  layer.output = tensor_count();
  const Shape out = output_shape(layer);
  add_to_totals(layer, out);
  network_.tensors.push_back(out);
  network_.layers.push_back(std::move(layer));
  return network_.tensors.back();
}

Network NetworkBuilder::finish(int output) {
  if (output < 0 || output >= tensor_count()) {
    throw Error(ErrorCategory::kInput, where_ + "its output tensor does not exist");
  }
  network_.output = output;
  set_in_place();
  return std::move(network_);
}

// An elementwise layer (batch norm, activations, add, mul) writes over its first input when
// nothing else reads that input and it is not the network input: as the ResNet builder's layers
// do, so that the analytic peak (peak_activation_bytes) counts what an engine must hold.
void NetworkBuilder::set_in_place() {
  std::vector<int> readers(network_.tensors.size(), 0);
  for (const Layer& layer : network_.layers) {
    for (const int input : layer.inputs) ++readers[static_cast<std::size_t>(input)];
  }
  for (Layer& layer : network_.layers) {
    const bool elementwise = layer.kind == LayerKind::kBatchNorm || is_activation(layer.kind) ||
                             layer.kind == LayerKind::kAdd || layer.kind == LayerKind::kMul;
    const int first = layer.inputs.empty() ? -1 : layer.inputs[0];
    layer.in_place = elementwise && first != network_.input &&
                     readers[static_cast<std::size_t>(first)] == 1 && first != network_.output;
  }
}

std::string architecture_hash(const Architecture& architecture) {
  std::string text = "carb-architecture-1;in:" + std::to_string(architecture.input_channels) + ";";
  for (const Layer& layer : architecture.layers) {
    json j = layer_to_json(layer);
    j.erase("name");
    // Everything but the name, in one fixed order (json objects print their keys sorted);
    // floats through float_text so the text does not depend on the JSON library's printing.
    for (const char* key : {"lower", "upper", "alpha", "beta"}) {
      if (j.contains(key)) j[key] = float_text(j[key].get<float>());
    }
    text += j.dump() + ";";
  }
  text += "out:" + std::to_string(architecture.output);
  return sha256_hex(text).substr(0, 16);
}

json architecture_to_json(const Architecture& architecture) {
  json layers = json::array();
  for (const Layer& layer : architecture.layers) layers.push_back(layer_to_json(layer));
  return {{"format", "carb-architecture"},
          {"format_version", 1},
          {"hash", architecture.hash},
          {"name", architecture.name},
          {"source", architecture.source},
          {"input_channels", architecture.input_channels},
          {"native_resolution", architecture.native_resolution},
          {"output", architecture.output},
          {"layers", std::move(layers)}};
}

Architecture architecture_from_json(const json& j, const std::string& origin) {
  const auto bad = [&](const std::string& what) {
    return Error(ErrorCategory::kInput, origin + ": not a carb architecture: " + what);
  };
  if (!j.is_object() || j.value("format", std::string()) != "carb-architecture") {
    throw bad("no \"format\": \"carb-architecture\"");
  }
  if (!j.contains("format_version") || !j.at("format_version").is_number_integer() ||
      j.at("format_version").get<std::int64_t>() != 1) {
    throw bad("format_version is not 1");
  }
  Architecture architecture;
  try {
    architecture.name = j.at("name").get<std::string>();
    architecture.source = j.at("source").get<std::string>();
    architecture.input_channels = j.at("input_channels").get<int>();
    architecture.native_resolution = j.at("native_resolution").get<int>();
    architecture.output = j.at("output").get<int>();
    const json& layers = j.at("layers");
    if (!layers.is_array()) throw bad("layers is not a list");
    for (std::size_t i = 0; i < layers.size(); ++i) {
      architecture.layers.push_back(layer_from_json(layers[i], origin, i));
    }
  } catch (const json::exception& error) {
    throw bad(error.what());
  }
  if (architecture.input_channels < 1) throw bad("input_channels < 1");
  architecture.hash = architecture_hash(architecture);
  if (j.contains("hash") && j.at("hash") != architecture.hash) {
    throw bad("its hash " + j.at("hash").dump() + " is not its layers' (" + architecture.hash +
              ")");
  }
  return architecture;
}

std::string register_architecture(Architecture architecture) {
  architecture.hash = architecture_hash(architecture);
  // Its network at the native resolution must build: a bad architecture fails here, once.
  Config config = imported_config(architecture, std::max(1, architecture.native_resolution), 1,
                                  Precision::kFp32);
  (void)instantiate_architecture(architecture, config);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::string hash = architecture.hash;
  r.architectures.try_emplace(hash, std::make_shared<const Architecture>(std::move(architecture)));
  return hash;
}

std::shared_ptr<const Architecture> find_architecture(std::string_view hash) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const auto found = r.architectures.find(hash);
  return found == r.architectures.end() ? nullptr : found->second;
}

Config imported_config(const Architecture& architecture, int resolution, int batch,
                       Precision precision) {
  Config config;
  config.architecture =
      architecture.hash.empty() ? architecture_hash(architecture) : architecture.hash;
  config.resolution = resolution;
  config.batch = batch;
  config.precision = precision;
  return config;
}

namespace {

// What a spec's `models:` entry needs (space.hpp's ModelImporter): the file imported and
// registered, and its network built at each resolution the spec asks for.
ImportedModel import_for_spec(const std::string& path, const std::vector<int>& resolutions) {
  Architecture architecture = import_model(path);
  ImportedModel model{path, {}, architecture.name};
  model.hash = register_architecture(std::move(architecture));
  const std::shared_ptr<const Architecture> registered = find_architecture(model.hash);
  for (int resolution : resolutions) {
    (void)build_network(imported_config(*registered, resolution, 1, Precision::kFp32));
  }
  return model;
}

// Installed while the program starts: this file is linked wherever build_network is.
[[maybe_unused]] const bool importer_installed = (set_model_importer(&import_for_spec), true);

}  // namespace

Network instantiate_architecture(const Architecture& architecture, const Config& config) {
  NetworkBuilder builder("architecture " + architecture.name + " (" +
                             std::string(kImportedKeyPrefix) + architecture.hash +
                             ") at resolution " + std::to_string(config.resolution) + ": ",
                         config, architecture.input_channels);
  for (const Layer& layer : architecture.layers) builder.append(layer);
  return builder.finish(architecture.output);
}

Network build_imported_network(const Config& config) {
  const std::shared_ptr<const Architecture> architecture = find_architecture(config.architecture);
  if (!architecture) {
    throw Error(ErrorCategory::kInput, "configuration " + to_key(config) + ": architecture " +
                                           config.architecture +
                                           " is not loaded: import its model file (a spec's "
                                           "models, or space show's model file), or "
                                           "read a database that measured it");
  }
  return instantiate_architecture(*architecture, config);
}

}  // namespace carb
