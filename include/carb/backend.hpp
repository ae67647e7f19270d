// Inference backends: a Backend lists Devices; a Device says whether it supports a configuration
// and prepares a Session that runs one forward pass. Timing, repetition and statistics are never
// in here (the measure module times Session::run()/sync(), and reads a device clock where the
// device has one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "carb/engine_plan.hpp"
#include "carb/graph.hpp"
#include "carb/space.hpp"

namespace carb {

/// Whether a device can run a configuration; `reason` says why not (empty when supported).
struct Support {
  bool supported = false;
  std::string reason;

  static Support yes() { return {true, {}}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  /// "supported", or "unsupported: <reason>" (the status and detail a measurement row stores).
  std::string to_string() const { return supported ? "supported" : "unsupported: " + reason; }
};

/// Whether a device runs one precision, and why not when it does not.
struct PrecisionSupport {
  Precision precision = Precision::kFp32;
  bool supported = false;
  std::string reason;  ///< empty when supported
};

/// What a device is and what it can do, for supports() and for provenance.
struct DeviceInfo {
  std::string id;  ///< unique among all backends' devices, e.g. "cpu:0"
  /// "cpu" or "cuda"; the PyTorch backend's device is a "cpu" (host memory, clock and meter)
  std::string kind;
  std::string name;     ///< the hardware model, e.g. "AMD EPYC 7B13"
  std::string library;  ///< the inference library and its version, e.g. "oneDNN 2.6.3"
  std::string isa;      ///< instruction set the library's kernels use, e.g. "avx2"
  int threads = 0;      ///< compute threads a session uses (CPU), 0 where not applicable
  std::vector<PrecisionSupport> precisions;  ///< one entry per Precision
  std::int64_t memory_bytes = 0;  ///< device memory (GPU); 0 where the device uses host memory
  std::string uuid;               ///< GPU UUID as NVML spells it ("GPU-..."); empty for CPUs
  std::string driver;             ///< GPU driver version (NVML); empty for CPUs or without NVML
  /// Why the device cannot run imported architectures (docs/onnx.md); empty where it can.
  std::string imported_reason;
};

/// What decides a device's engine, as the device fingerprint's part after the host's:
/// "KIND|LIBRARY|isa=ISA|threads=N", and for GPUs "|gpu=NAME|memory=BYTES|driver=VERSION".
/// Two devices with the same engine fingerprint lay out, plan and run a network the same way.
std::string engine_fingerprint(const DeviceInfo& info);

/// The engine part of a device fingerprint (everything after the host's part, without its
/// leading '|'); the whole text when it has no '|'.
std::string engine_part(const std::string& device_fingerprint);

/// The backend that runs a device fingerprint's engine: "torch" where the engine's library is
/// PyTorch (a cpu device whose library is "PyTorch ..."), else the engine's kind ("cpu", "cuda");
/// empty for an empty fingerprint.
std::string engine_backend(const std::string& device_fingerprint);

/// The kernels a device fingerprint's engine runs: PyTorch's where engine_backend says "torch",
/// else carb's engine's (timings without a device were all of carb's engine).
engine::KernelEngine kernel_engine_of(const std::string& device_fingerprint);

/// How a session runs where a device offers a choice; a device ignores what it does not offer
/// (the CPU engine offers none of these).
struct SessionOptions {
  /// Capture the whole forward pass once as a CUDA Graph and replay it in run().
  bool cuda_graph = false;
  /// Choose cuDNN's convolution algorithms by timing them (cudnnFind), cached per convolution,
  /// GPU and cuDNN version in `algorithm_cache`, instead of by cuDNN's heuristics (the default,
  /// which is deterministic).
  bool cudnn_find = false;
  /// The find cache file; empty: $XDG_CACHE_HOME/carb/cudnn-find.tsv (~/.cache/carb/...).
  std::string algorithm_cache;
};

/// Bytes of the buffers a session holds (host memory on a CPU, device memory on a GPU).
/// Everything is allocated in prepare() and held until the session dies, so the steady-state
/// total is weight + activation + scratchpad bytes. The library's own small objects (generated
/// kernel code, primitive cache, a GPU's CUDA context) are not buffers and are not counted.
struct MemoryUsage {
  /// Folded weights and biases in the kernels' layouts, any channel padding included.
  std::int64_t weight_bytes = 0;
  std::int64_t activation_bytes = 0;  ///< the activation arena (planned offsets, buffers reused)
  /// The one scratchpad shared by every kernel (GPU: cuDNN's and cuBLAS's workspaces).
  std::int64_t scratchpad_bytes = 0;
  /// High-water mark over the session's life: the steady state plus the largest transient
  /// staging during prepare() (one layer's generated and folded parameters, or the input).
  std::int64_t peak_bytes = 0;

  std::int64_t steady_bytes() const { return weight_bytes + activation_bytes + scratchpad_bytes; }
  bool operator==(const MemoryUsage&) const = default;
};

/// One kernel a session runs, for provenance.
struct KernelInfo {
  std::string name;            ///< the IR layers it computes, e.g. "layer1.0.conv2+bn2+add+relu"
  std::string implementation;  ///< the library's name for the chosen kernel, e.g. "brg:avx512_core"
  /// The IR layers it computes (indices into Network::layers), the one that decides its kind
  /// first (a conv before the batch norm and activation fused into it); empty where unknown.
  std::vector<int> layers;
};

/// A network prepared on a device: weights loaded, buffers allocated, kernels chosen. Holds an
/// input (seeded at prepare) and writes an output; not thread-safe.
class Session {
 public:
  virtual ~Session() = default;

  /// Enqueues one forward pass of the whole batch; may return before it finishes.
  virtual void run() = 0;
  /// Waits until every enqueued forward pass has finished.
  virtual void sync() = 0;
  /// The device clock's time of the last run(), ms (GPU: CUDA events around it), once it has
  /// finished; nullopt where the device has no clock of its own (a CPU's is the host's) or
  /// before the first run().
  virtual std::optional<double> last_run_device_ms() { return std::nullopt; }

  /// The network this session runs.
  virtual const Network& network() const = 0;
  /// Bytes this session holds.
  virtual MemoryUsage memory() const = 0;
  /// The kernels run() executes, in order.
  virtual std::vector<KernelInfo> kernels() const = 0;
  /// Runs kernel `index` of kernels() alone and waits until it has finished; a forward pass a
  /// kernel at a time is run_kernel(0), ..., run_kernel(kernels().size() - 1), and computes what
  /// run() does. For the per-kernel breakdown (carb kernels), which the measure module times.
  /// Returns false, running nothing, where the device cannot split its pass (the default).
  virtual bool run_kernel(std::size_t index) {
    (void)index;
    return false;
  }
  /// How the session runs beyond its kernels, a JSON object for provenance (GPU: layout, math,
  /// CUDA Graph, algorithm selection, context memory); empty by default.
  virtual nlohmann::json details() const;

  /// Replaces the input with NCHW float values (network().tensors[input].elements() of them);
  /// throws carb::Error (input) on a size mismatch. Not part of run().
  virtual void set_input(std::span<const float> values) = 0;
  /// The output of the last run() (waiting for it to finish), as float logits in
  /// [batch][classes] order.
  virtual std::vector<float> read_output() = 0;
};

/// Whether a device described by `info` can run `config`: a valid configuration in a precision
/// the device supports (the reason otherwise). What every backend's supports() checks first.
Support support_for(const Config& config, const DeviceInfo& info);

/// Throws carb::Error (input) naming the configuration, the device and the reason when
/// support_for() says no; what every backend's prepare() checks first.
void require_support(const Config& config, const DeviceInfo& info);

/// One device of a backend.
class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  /// Whether prepare() can run the configuration; never throws for any configuration.
  virtual Support supports(const Config& config) const = 0;
  /// Builds a session whose parameters and input come from `seed` (generate_layer_parameters,
  /// generate_input). Throws carb::Error: input when supports() says no, runtime when the
  /// library or the environment fails; std::bad_alloc when memory runs out (host or device).
  /// The session does not refer to this Device.
  virtual std::unique_ptr<Session> prepare(const Config& config, std::uint64_t seed,
                                           const SessionOptions& options) const = 0;
  /// prepare() with the default options.
  std::unique_ptr<Session> prepare(const Config& config, std::uint64_t seed) const {
    return prepare(config, seed, SessionOptions{});
  }

  /// The MemoryUsage prepare() would reach, from the engine's plan alone (its kernels' chosen
  /// layouts, the arena plan, the scratchpad): nothing allocated, generated or run, so it is
  /// cheap next to prepare(). nullopt where the engine cannot plan ahead (the CUDA engine,
  /// whose workspaces depend on cuDNN's algorithm choice on the GPU). Throws as prepare() does
  /// for an unsupported configuration.
  virtual std::optional<MemoryUsage> plan_memory(const Config& config) const {
    (void)config;
    return std::nullopt;
  }

  /// For a process that prepares one configuration after another (a reused campaign worker):
  /// when on, memory a finished session's weights were in stays mapped and resident, and the
  /// next session writes its weights there instead of into fresh pages the kernel must zero
  /// first (for the CPU engine most of prepare()'s time where fresh pages are slow;
  /// docs/benchmarks.md, "CPU engine: prepare").
  /// Off by default; off again gives the memory back. A device with nothing to keep ignores it.
  virtual void keep_memory_between_sessions(bool keep) const { (void)keep; }
  /// The bytes kept now, all resident and part of no session; starts the count of
  /// kept_memory_unused_bytes(). A worker takes them out of a configuration's RSS baseline.
  virtual std::int64_t kept_memory_bytes() const { return 0; }
  /// Of the bytes kept at the last kept_memory_bytes(), those no session prepared since has
  /// used: resident and untouched all along. A worker takes them out of the configuration's
  /// peak RSS, so peak and baseline count what they would in a fresh process.
  virtual std::int64_t kept_memory_unused_bytes() const { return 0; }
};

/// An inference library and the devices it can drive on this machine (possibly none).
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu", "cuda" or "torch".
  virtual std::string_view name() const = 0;
  virtual const std::vector<std::unique_ptr<Device>>& devices() const = 0;
  /// Why devices() is empty (no driver, no GPU, ...); empty when it lists devices.
  virtual std::string unavailable_reason() const { return {}; }
};

/// Every backend compiled into this build, in a fixed order (cpu first). Throws carb::Error
/// (runtime) when a library fails to initialise.
std::vector<std::unique_ptr<Backend>> make_backends();

/// The names of the backends in this build, in make_backends() order: "cpu", then "cuda" and
/// "torch" where the build has them.
std::vector<std::string> backend_names();

/// The backend a device id ("cuda:0") or kind ("cuda") belongs to, alone, so that measuring on
/// one backend never initialises another. Throws carb::Error (usage) naming this build's
/// backends when there is no such backend.
std::unique_ptr<Backend> make_backend_for(std::string_view device);

/// Batch-norm epsilon of every generated network (PyTorch's default).
inline constexpr double kBatchNormEpsilon = 1e-5;

/// Seeded parameters of one IR layer, in PyTorch's layouts. Conv: weight OIHW (I: the input
/// channels of one group), its bias where it has one. Batch norm: weight = gamma, bias = beta,
/// running_mean, running_var. Fully connected: weight [outputs][C x H x W of its input], its
/// bias where it has one. Other layers: all empty.
struct LayerParameters {
  std::vector<float> weight;
  std::vector<float> bias;
  std::vector<float> running_mean;
  std::vector<float> running_var;
};

/// Element counts of the tensors of LayerParameters for one layer (0 where empty).
struct LayerParameterSizes {
  std::size_t weight = 0;
  std::size_t bias = 0;
  std::size_t running_mean = 0;
  std::size_t running_var = 0;
};

/// Caller-owned destinations of one layer's parameters (same layouts as LayerParameters). An
/// empty span is not generated; a non-empty one must have exactly the layer's size.
struct LayerParameterSpans {
  std::span<float> weight;
  std::span<float> bias;
  std::span<float> running_mean;
  std::span<float> running_var;
};

/// The sizes of layer `layer_index`'s parameters.
LayerParameterSizes layer_parameter_sizes(const Network& network, int layer_index);

/// Parameters of layer `layer_index` of `network`, a pure function of (network, index, seed)
/// that keeps activations O(1): He-uniform conv weights (PyTorch's default bias), gamma ~1 (the
/// last batch norm of each residual branch scaled by 1/sqrt(blocks) so the residual sum does not
/// grow with depth), beta and mean within 0.1, variance 1 +- 0.1, PyTorch's default fc
/// initialisation. Every backend and the conformance reference use it, so they compute the same
/// function.
LayerParameters generate_layer_parameters(const Network& network, int layer_index,
                                          std::uint64_t seed);
/// The same values written into caller-owned buffers (no allocation, one vectorised pass per
/// tensor), skipping the tensors not asked for.
void generate_layer_parameters(const Network& network, int layer_index, std::uint64_t seed,
                               const LayerParameterSpans& out);
/// The seeded NCHW input of `network`, uniform in [-1, 1).
std::vector<float> generate_input(const Network& network, std::uint64_t seed);

}  // namespace carb
