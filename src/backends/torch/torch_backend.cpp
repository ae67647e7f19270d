// The PyTorch backend: carb's IR run by ATen's eager operators, one operator per IR layer, as
// torchvision's forward() methods call them (conv2d with groups and dilation, batch_norm in eval,
// relu_/hardtanh_/hardswish_/silu_ in place, add_ in place for a residual sum, max_pool2d,
// avg_pool2d, adaptive_avg_pool2d, sigmoid, hardsigmoid, mul, cat, a ShuffleNet's
// view-transpose-view channel shuffle and its chunk as a narrowed view, flatten and linear), under
// c10::InferenceMode with autograd off: carb's ResNets and imported architectures (docs/onnx.md)
// alike. Parameters come from generate_layer_parameters, so the output matches the float64
// reference (tests/backends/conformance_test.cpp) and carb's engines.
#include "torch/torch_backend.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <malloc.h>
#include <omp.h>
#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "carb/error.hpp"
#include "cpu/cpu_backend.hpp"

namespace carb::torch_backend {

namespace {

std::string framework_version() {
  return "PyTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
         std::to_string(TORCH_VERSION_MINOR) + "." + std::to_string(TORCH_VERSION_PATCH);
}

// A setting of libtorch's build from at::show_config() ("BLAS_INFO" -> "generic"), "unknown"
// where it does not say.
std::string build_setting(const std::string& name) {
  static const std::string config = at::show_config();
  const std::size_t where = config.find(name + "=");
  if (where == std::string::npos) return "unknown";
  const std::size_t start = where + name.size() + 1;
  return config.substr(start, config.find_first_of(",\n", start) - start);
}

// glibc's malloc thresholds, pinned for the process where a torch device is made. Eager ATen
// allocates every layer's output and frees it within the pass: a block above malloc's mmap
// threshold is mapped and unmapped each time, and a heap whose free top passes the trim threshold
// is handed back, so the next pass faults its pages in again and zeroes them. glibc moves both
// thresholds with what the process has freed (the mmap threshold up to the largest freed mapped
// block, at most 32 MiB; trim at twice that), so the same network ran up to twice as fast in one
// process as in another (efficientnet_b0 at batch 8: 140-164 ms pinned against 236-306 ms in a
// fresh process, the same from Python: docs/benchmarks.md). Pinned at the values a long-running
// process converges to, every configuration is measured in that state, whatever ran before.
constexpr int kMmapThresholdBytes = 32 << 20;
constexpr int kTrimThresholdBytes = 64 << 20;

// Pins them (the device on its creation, each session again as it is prepared, in case anything
// else in the process moved them) and says whether glibc took them: "malloc 32/64 MiB", or
// "malloc unpinned" (another C library, or glibc refused).
std::string pin_malloc() {
#ifdef __GLIBC__
  if (::mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1 &&
      ::mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1) {
    return "malloc " + std::to_string(kMmapThresholdBytes >> 20) + "/" +
           std::to_string(kTrimThresholdBytes >> 20) + " MiB";
  }
#endif
  return "malloc unpinned";
}

// A float tensor of `shape` holding a copy of `values`.
at::Tensor tensor_of(const std::vector<float>& values, const std::vector<std::int64_t>& shape) {
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  CARB_CHECK(static_cast<std::size_t>(out.numel()) == values.size(),
             "parameter size matches its tensor");
  std::memcpy(out.data_ptr<float>(), values.data(), values.size() * sizeof(float));
  return out;
}

// ATen's errors as carb's: its allocator's failure as std::bad_alloc (a measurement's "oom"
// status), anything else a runtime error of one line (ATen appends a C++ backtrace).
[[noreturn]] void rethrow(const c10::Error& error) {
  const std::string message = error.what_without_backtrace();
  if (message.find("can't allocate memory") != std::string::npos) throw std::bad_alloc();
  throw Error(ErrorCategory::kRuntime, "libtorch: " + message.substr(0, message.find('\n')));
}

// The ATen operator run() calls for each LayerKind, in the enum's order.
constexpr std::array<const char*, kLayerKindCount> kOperators = {
    "conv2d",      "batch_norm",
    "relu",        "add",
    "max_pool2d",  "adaptive_avg_pool2d",
    "linear",      "avg_pool2d",
    "hardtanh",    "sigmoid",
    "hardsigmoid", "hardswish",
    "silu",        "mul",
    "cat",         "channel_shuffle",
    "narrow"};

// A conv or pool layer's padding as at::constant_pad_nd takes it (width, then height; before and
// after each).
std::vector<std::int64_t> explicit_padding(const Layer& layer) {
  return {layer.padding, layer.padding_after, layer.padding, layer.padding_after};
}

// A max or average pool as torch.nn's MaxPool2d and AvgPool2d run it. ATen pads both sides
// alike; an imported pool padded unevenly (ONNX's pads, TensorFlow's "same") pads explicitly
// instead (-infinity for max, which never wins; zeros for an average, divided by the pooled
// count of real values where the padding does not count) and keeps the IR's output size, whose
// ceil-mode rule (the last window starts inside the input or its leading padding) is PyTorch's.
at::Tensor pool(const at::Tensor& x, const Layer& layer, const Shape& out) {
  const bool max = layer.kind == LayerKind::kMaxPool;
  if (layer.padding == layer.padding_after) {
    if (max) {
      return at::max_pool2d(x, {layer.kernel, layer.kernel}, {layer.stride, layer.stride},
                            {layer.padding, layer.padding}, {1, 1}, layer.ceil_mode);
    }
    return at::avg_pool2d(x, {layer.kernel, layer.kernel}, {layer.stride, layer.stride},
                          {layer.padding, layer.padding}, layer.ceil_mode, layer.count_include_pad);
  }
  const auto window = [&](const at::Tensor& padded) {
    const at::Tensor y =
        max ? at::max_pool2d(padded, {layer.kernel, layer.kernel}, {layer.stride, layer.stride},
                             {0, 0}, {1, 1}, layer.ceil_mode)
            : at::avg_pool2d(padded, {layer.kernel, layer.kernel}, {layer.stride, layer.stride},
                             {0, 0}, layer.ceil_mode, true);
    return y.narrow(2, 0, out.h).narrow(3, 0, out.w);
  };
  const std::vector<std::int64_t> padding = explicit_padding(layer);
  if (max) {
    return window(at::constant_pad_nd(x, padding, -std::numeric_limits<double>::infinity()));
  }
  at::Tensor sum = window(at::constant_pad_nd(x, padding, 0));
  if (layer.count_include_pad) return sum.contiguous();
  // Both averages divide by one window area: their quotient is the sum over the real values.
  const at::Tensor real = at::ones({1, 1, x.size(2), x.size(3)}, x.options());
  return (sum / window(at::constant_pad_nd(real, padding, 0))).contiguous();
}

// One IR layer's parameters as ATen tensors (undefined where the layer has none).
struct LayerTensors {
  at::Tensor weight, bias, running_mean, running_var;
};

// What a session of `network` holds, without building it: its parameter tensors (the batch
// norms' running statistics included; two bytes a value in bf16, else four) and the eager peak of
// live activations, input included (compute_features' peak_activation_bytes: the release order
// the session follows). ATen's operator-internal buffers are not tensors a session holds.
MemoryUsage tensor_memory(const Network& network) {
  const std::int64_t value_bytes = network.config.precision == Precision::kBf16 ? 2 : 4;
  std::int64_t values = 0;
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    const LayerParameterSizes sizes = layer_parameter_sizes(network, static_cast<int>(i));
    values += static_cast<std::int64_t>(sizes.weight + sizes.bias + sizes.running_mean +
                                        sizes.running_var);
  }
  MemoryUsage usage;
  usage.weight_bytes = value_bytes * values;
  usage.activation_bytes = compute_features(network).peak_activation_bytes;
  usage.peak_bytes = usage.steady_bytes();
  return usage;
}

class TorchSession final : public Session {
 public:
  TorchSession(Network network, std::uint64_t seed)
      : network_(std::move(network)), malloc_(pin_malloc()) {
    c10::InferenceMode guard;
    // bf16 as `model.to(torch.bfloat16)` makes it: every parameter and the input in bf16.
    const at::ScalarType dtype =
        network_.config.precision == Precision::kBf16 ? at::kBFloat16 : at::kFloat;
    const std::size_t layers = network_.layers.size();
    parameters_.resize(layers);
    for (std::size_t i = 0; i < layers; ++i) {
      const Layer& layer = network_.layers[i];
      if (layer.kind != LayerKind::kConv && layer.kind != LayerKind::kBatchNorm &&
          layer.kind != LayerKind::kFullyConnected) {
        continue;
      }
      const LayerParameters p = generate_layer_parameters(network_, static_cast<int>(i), seed);
      const Shape& in = network_.tensors[static_cast<std::size_t>(layer.inputs[0])];
      const Shape& out = network_.tensors[static_cast<std::size_t>(layer.output)];
      LayerTensors& t = parameters_[i];
      if (layer.kind == LayerKind::kConv) {
        t.weight = tensor_of(p.weight, {out.c, in.c / layer.groups, layer.kernel, layer.kernel});
        if (layer.bias) t.bias = tensor_of(p.bias, {out.c});
      } else if (layer.kind == LayerKind::kBatchNorm) {
        t.weight = tensor_of(p.weight, {out.c});
        t.bias = tensor_of(p.bias, {out.c});
        t.running_mean = tensor_of(p.running_mean, {out.c});
        t.running_var = tensor_of(p.running_var, {out.c});
      } else {
        // Over its input's C x H x W values per image (a flatten before it).
        t.weight = tensor_of(p.weight, {out.c, in.elements() / in.n});
        if (layer.bias) t.bias = tensor_of(p.bias, {out.c});
      }
      for (at::Tensor* tensor : {&t.weight, &t.bias, &t.running_mean, &t.running_var}) {
        if (!tensor->defined()) continue;
        if (dtype != at::kFloat) *tensor = tensor->to(dtype);
        weight_bytes_ += static_cast<std::int64_t>(tensor->nbytes());
      }
    }
    // Each tensor is released after the last layer that reads it, as eager Python frees it.
    last_use_.assign(network_.tensors.size(), -1);
    for (std::size_t i = 0; i < layers; ++i) {
      const Layer& layer = network_.layers[i];
      for (int k = 0; k < layer.input_count(); ++k) {
        last_use_[static_cast<std::size_t>(layer.inputs[static_cast<std::size_t>(k)])] =
            static_cast<int>(i);
      }
    }
    const Shape& shape = network_.tensors[static_cast<std::size_t>(network_.input)];
    input_ = tensor_of(generate_input(network_, seed), {shape.n, shape.c, shape.h, shape.w});
    if (dtype != at::kFloat) input_ = input_.to(dtype);
    values_.resize(network_.tensors.size());
    // A slice runs as a view (narrow): it and the tensor it was cut from share their storage.
    shared_.assign(network_.tensors.size(), false);
    for (const Layer& layer : network_.layers) {
      if (layer.kind != LayerKind::kSlice) continue;
      shared_[static_cast<std::size_t>(layer.output)] = true;
      shared_[static_cast<std::size_t>(layer.inputs[0])] = true;
    }
    activation_bytes_ = compute_features(network_).peak_activation_bytes;
  }

  void run() override {
    try {
      c10::InferenceMode guard;
      for (std::size_t i = 0; i < network_.layers.size(); ++i) forward(i);
    } catch (const c10::Error& error) {
      rethrow(error);
    }
  }

  // ATen's CPU operators return when their work is done.
  void sync() override {}

  // A kernel is an IR layer: one ATen operator (or a few: a padded conv, the shuffle's view).
  bool run_kernel(std::size_t index) override {
    CARB_CHECK(index < network_.layers.size(), "a kernel of the session");
    try {
      c10::InferenceMode guard;
      forward(index);
    } catch (const c10::Error& error) {
      rethrow(error);
    }
    return true;
  }

 private:
  // Layer `i` of a forward pass, in order from 0: layer 0 takes the input, the last leaves the
  // output.
  void forward(std::size_t i) {
    if (i == 0) values_[static_cast<std::size_t>(network_.input)] = input_;
    const Layer& layer = network_.layers[i];
    const LayerTensors& p = parameters_[i];
    at::Tensor& x = values_[static_cast<std::size_t>(layer.inputs[0])];
    const auto other = [&](int k) -> const at::Tensor& {
      return values_[static_cast<std::size_t>(layer.inputs[static_cast<std::size_t>(k)])];
    };
    const Shape& out = network_.tensors[static_cast<std::size_t>(layer.output)];
    // In place only where nothing reads the input later (torchvision's inplace=True
    // activations and `out += identity` never overwrite a tensor still needed), and never over
    // a tensor that shares its storage (a ShuffleNet's chunk and what it was cut from), which
    // others may still read.
    const bool in_place =
        layer.in_place &&
        last_use_[static_cast<std::size_t>(layer.inputs[0])] == static_cast<int>(i) &&
        layer.inputs[0] != network_.input && !shared_[static_cast<std::size_t>(layer.inputs[0])];
    at::Tensor y;
    switch (layer.kind) {
      case LayerKind::kConv: {
        // ATen pads both sides alike; uneven padding (ONNX's pads) is padded explicitly.
        const bool even = layer.padding == layer.padding_after;
        const int padding = even ? layer.padding : 0;
        y = at::conv2d(even ? x : at::constant_pad_nd(x, explicit_padding(layer), 0), p.weight,
                       p.bias, {layer.stride, layer.stride}, {padding, padding},
                       {layer.dilation, layer.dilation}, layer.groups);
        break;
      }
      case LayerKind::kBatchNorm:
        y = at::batch_norm(x, p.weight, p.bias, p.running_mean, p.running_var, false, 0.1,
                           kBatchNormEpsilon, true);
        break;
      case LayerKind::kRelu:
        y = in_place ? at::relu_(x) : at::relu(x);
        break;
      case LayerKind::kClip:  // torch.nn.ReLU6 is a hardtanh to [0, 6]
        y = in_place ? at::hardtanh_(x, layer.lower, layer.upper)
                     : at::hardtanh(x, layer.lower, layer.upper);
        break;
      case LayerKind::kSigmoid:
        y = in_place ? at::sigmoid_(x) : at::sigmoid(x);
        break;
      case LayerKind::kHardSigmoid:
        // torch.nn.Hardsigmoid's slope and offset (ONNX's HardSigmoid as torch exports it);
        // any other as the formula.
        y = std::abs(layer.alpha - 1.0F / 6) < 1e-7F && layer.beta == 0.5F
                ? at::hardsigmoid(x)
                : at::clamp(x * layer.alpha + layer.beta, 0, 1);
        break;
      case LayerKind::kHardSwish:
        y = in_place ? at::hardswish_(x) : at::hardswish(x);
        break;
      case LayerKind::kSwish:
        y = in_place ? at::silu_(x) : at::silu(x);
        break;
      case LayerKind::kAdd:
        y = in_place ? x.add_(other(1)) : at::add(x, other(1));
        break;
      case LayerKind::kMul:  // the second input may be N x C x 1 x 1 (squeeze-excite's scale)
        y = in_place ? x.mul_(other(1)) : at::mul(x, other(1));
        break;
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool:
        y = pool(x, layer, out);
        break;
      case LayerKind::kGlobalAvgPool:
        y = at::adaptive_avg_pool2d(x, {1, 1});
        break;
      case LayerKind::kFullyConnected:
        y = at::linear(at::flatten(x, 1), p.weight, p.bias);
        break;
      case LayerKind::kConcat: {
        std::vector<at::Tensor> parts;
        for (int k = 0; k < layer.input_count(); ++k) parts.push_back(other(k));
        y = at::cat(parts, 1);
        break;
      }
      case LayerKind::kChannelShuffle:  // torchvision's channel_shuffle()
        y = x.reshape({out.n, layer.groups, out.c / layer.groups, out.h, out.w})
                .transpose(1, 2)
                .contiguous()
                .view({out.n, out.c, out.h, out.w});
        break;
      case LayerKind::kSlice:  // x.chunk(2, dim=1)'s halves: views, no copy
        y = x.narrow(1, layer.begin, out.c);
        break;
    }
    values_[static_cast<std::size_t>(layer.output)] = std::move(y);
    for (int k = 0; k < layer.input_count(); ++k) {
      const auto id = static_cast<std::size_t>(layer.inputs[static_cast<std::size_t>(k)]);
      if (last_use_[id] == static_cast<int>(i) && static_cast<int>(id) != network_.output) {
        values_[id] = at::Tensor();
      }
    }
    if (i + 1 < network_.layers.size()) return;
    output_ = values_[static_cast<std::size_t>(network_.output)];
    values_[static_cast<std::size_t>(network_.output)] = at::Tensor();
    values_[static_cast<std::size_t>(network_.input)] = at::Tensor();
  }

 public:
  const Network& network() const override { return network_; }

  // Weights: the parameter tensors as allocated; activations: the tensors a forward pass holds
  // at once at its peak, input included (compute_features' peak_activation_bytes: the same
  // release order). ATen's operator-internal buffers (oneDNN reorders, im2col) are not tensors
  // the session holds and are not counted; the measured process RSS is. tensor_memory() plans
  // the same figures without a session (tests/backends/torch_device_test.cpp holds them equal).
  MemoryUsage memory() const override {
    MemoryUsage usage;
    usage.weight_bytes = weight_bytes_;
    usage.activation_bytes = activation_bytes_;
    usage.peak_bytes = usage.steady_bytes();
    return usage;
  }

  std::vector<KernelInfo> kernels() const override {
    std::vector<KernelInfo> out;
    out.reserve(network_.layers.size());
    for (const Layer& layer : network_.layers) {
      out.push_back({layer_name(layer),
                     std::string("aten::") + kOperators[static_cast<std::size_t>(layer.kind)],
                     {static_cast<int>(out.size())}});
    }
    return out;
  }

  nlohmann::json details() const override {
    return {{"framework", framework_version()},
            {"api", "ATen eager operators (libtorch C++), one per IR layer"},
            {"inference_mode", true},
            {"threads", at::get_num_threads()},
            {"interop_threads", at::get_num_interop_threads()},
            {"mkldnn", at::globalContext().userEnabledMkldnn()},
            {"blas", build_setting("BLAS_INFO")},
            {"parallel", at::get_parallel_info()},
            {"malloc", malloc_}};
  }

  void set_input(std::span<const float> values) override {
    if (static_cast<std::int64_t>(values.size()) != input_.numel()) {
      throw Error(ErrorCategory::kInput, "input has " + std::to_string(values.size()) +
                                             " values; the network takes " +
                                             std::to_string(input_.numel()));
    }
    c10::InferenceMode guard;  // the input is an inference tensor: updated only in that mode
    const at::Tensor copy = at::from_blob(const_cast<float*>(values.data()), input_.sizes(),
                                          at::TensorOptions().dtype(at::kFloat));
    input_.copy_(copy);  // converts to the session's precision
  }

  std::vector<float> read_output() override {
    if (!output_.defined()) throw Error(ErrorCategory::kRuntime, "no forward pass has run yet");
    const at::Tensor flat = output_.to(at::kFloat).contiguous().reshape({-1});
    const float* data = flat.data_ptr<float>();
    return {data, data + flat.numel()};
  }

 private:
  Network network_;
  std::string malloc_;  ///< pin_malloc()'s word on glibc's thresholds
  std::vector<LayerTensors> parameters_;
  std::vector<int> last_use_;
  std::vector<at::Tensor> values_;
  std::vector<bool> shared_;  ///< whether a tensor shares storage with another (a slice's view)
  at::Tensor input_, output_;
  std::int64_t weight_bytes_ = 0;
  std::int64_t activation_bytes_ = 0;  ///< the eager peak of live activations, input included
};

// bf16 where carb's CPU engine runs it (the same oneDNN kernels underneath), for its reason.
PrecisionSupport cpu_bf16_support() {
  const auto cpu = cpu::make_cpu_backend();
  for (const PrecisionSupport& p : cpu->devices().at(0)->info().precisions) {
    if (p.precision == Precision::kBf16) return p;
  }
  return {Precision::kBf16, false, "bf16 support unknown"};
}

class TorchDevice final : public Device {
 public:
  TorchDevice() {
    at::set_num_threads(omp_get_max_threads());
    info_.id = "torch:0";
    info_.kind = "cpu";  // host memory, the host's clock and its energy meter
    info_.name = cpu::cpu_model_name();
    // Which kernels ATen picks depends on these: with mkldnn on it runs most convolutions
    // through oneDNN; the rest (Debian's: batch 1 with 3x3 kernels on small inputs) through
    // im2col and the BLAS it was built with.
    info_.library = framework_version() + " (ATen eager, mkldnn " +
                    (at::globalContext().userEnabledMkldnn() ? "on" : "off") + ", BLAS " +
                    build_setting("BLAS_INFO") + ", " + pin_malloc() + ")";
    info_.isa = cpu::effective_isa_name();
    info_.threads = at::get_num_threads();
    info_.precisions = {
        {Precision::kFp32, true, {}},
        {Precision::kFp16, false, "fp16 is not supported by the PyTorch backend on CPU"},
        cpu_bf16_support(),
    };
  }

  const DeviceInfo& info() const override { return info_; }

  Support supports(const Config& config) const override { return support_for(config, info_); }

  // Exact: a session's tensors follow from the network alone (eager ATen allocates nothing else
  // that a session holds).
  std::optional<MemoryUsage> plan_memory(const Config& config) const override {
    require_support(config, info_);
    return tensor_memory(build_network(config));
  }

  std::unique_ptr<Session> prepare(const Config& config, std::uint64_t seed,
                                   const SessionOptions&) const override {
    require_support(config, info_);
    try {
      return std::make_unique<TorchSession>(build_network(config), seed);
    } catch (const c10::Error& error) {
      rethrow(error);
    }
  }

 private:
  DeviceInfo info_;
};

class TorchBackend final : public Backend {
 public:
  TorchBackend() { devices_.push_back(std::make_unique<TorchDevice>()); }
  std::string_view name() const override { return "torch"; }
  const std::vector<std::unique_ptr<Device>>& devices() const override { return devices_; }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace

}  // namespace carb::torch_backend

extern "C" carb::Backend* carb_torch_make_backend(char* why, std::size_t why_size) {
  try {
    return new carb::torch_backend::TorchBackend();
  } catch (const std::exception& error) {
    if (why != nullptr && why_size > 0) std::snprintf(why, why_size, "%s", error.what());
    return nullptr;
  }
}
