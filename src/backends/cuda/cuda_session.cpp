// The CUDA session: cuDNN convolutions with batch norm folded into their weights and bias, ReLU
// and the residual add fused where cuDNN allows (cudnnConvolutionBiasActivationForward), cuDNN
// pooling, the classifier through cuBLAS, activations in one planned arena, everything on one
// stream timed by CUDA events, optionally replayed as one CUDA Graph. Every device byte goes
// through carb's allocator.
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "algorithm.hpp"
#include "allocator.hpp"
#include "carb/engine_plan.hpp"
#include "carb/error.hpp"
#include "carb/telemetry.hpp"
#include "check.hpp"
#include "cublas.hpp"
#include "cuda_backend.hpp"
#include "engine/fold.hpp"
#include "host_data.hpp"

namespace carb::cuda {

namespace {

// cuDNN's scaling factors are float for float, half and bfloat16 tensors.
constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

// The cuBLAS workspace, set explicitly so cuBLAS never allocates during a graph capture.
constexpr std::int64_t kCublasWorkspaceBytes = std::int64_t{4} << 20;
// The largest workspace a cudnnFind search may use, bytes (a transient, counted in the peak).
constexpr std::int64_t kFindWorkspaceBytes = std::int64_t{512} << 20;

// Owns a handle: `Destroy` is the library's destroy function (its status is ignored: nothing can
// be done about a failed release, and a sticky error has been reported where it happened).
template <auto Destroy>
struct Releaser {
  template <typename Object>
  void operator()(Object* object) const {
    Destroy(object);
  }
};
struct CublasReleaser {
  void operator()(cublasContext* handle) const { cublas().destroy(handle); }
};

using Stream = std::unique_ptr<CUstream_st, Releaser<cudaStreamDestroy>>;
using Event = std::unique_ptr<CUevent_st, Releaser<cudaEventDestroy>>;
using GraphExec = std::unique_ptr<CUgraphExec_st, Releaser<cudaGraphExecDestroy>>;
using CudnnHandle = std::unique_ptr<cudnnContext, Releaser<cudnnDestroy>>;
using CublasHandle = std::unique_ptr<cublasContext, CublasReleaser>;
using TensorDesc = std::unique_ptr<cudnnTensorStruct, Releaser<cudnnDestroyTensorDescriptor>>;
using FilterDesc = std::unique_ptr<cudnnFilterStruct, Releaser<cudnnDestroyFilterDescriptor>>;
using ConvolutionDesc =
    std::unique_ptr<cudnnConvolutionStruct, Releaser<cudnnDestroyConvolutionDescriptor>>;
using PoolingDesc = std::unique_ptr<cudnnPoolingStruct, Releaser<cudnnDestroyPoolingDescriptor>>;
using ActivationDesc =
    std::unique_ptr<cudnnActivationStruct, Releaser<cudnnDestroyActivationDescriptor>>;
using Buffer = DeviceAllocator::Buffer;

cudnnDataType_t cudnn_type(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return CUDNN_DATA_FLOAT;
    case Precision::kFp16:
      return CUDNN_DATA_HALF;
    case Precision::kBf16:
      return CUDNN_DATA_BFLOAT16;
  }
  return CUDNN_DATA_FLOAT;
}

cudaDataType_t blas_type(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return CUDA_R_32F;
    case Precision::kFp16:
      return CUDA_R_16F;
    case Precision::kBf16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

cudnnTensorFormat_t cudnn_format(Layout layout) {
  return layout == Layout::kNchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
}

TensorDesc tensor_desc(const Shape& shape, cudnnDataType_t type, cudnnTensorFormat_t format) {
  cudnnTensorDescriptor_t raw = nullptr;
  CARB_CUDNN(cudnnCreateTensorDescriptor(&raw));
  TensorDesc desc(raw);
  CARB_CUDNN(cudnnSetTensor4dDescriptor(raw, format, type, shape.n, shape.c, shape.h, shape.w));
  return desc;
}

ActivationDesc activation_desc(cudnnActivationMode_t mode) {
  cudnnActivationDescriptor_t raw = nullptr;
  CARB_CUDNN(cudnnCreateActivationDescriptor(&raw));
  ActivationDesc desc(raw);
  CARB_CUDNN(cudnnSetActivationDescriptor(raw, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return desc;
}

std::string mib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// What every step needs when it enqueues work.
struct Context {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  void* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  bool probe = false;  ///< the first run in prepare: a fused call cuDNN refuses falls back
};

// One kernel (or short sequence of library calls) of the forward pass.
class Step {
 public:
  virtual ~Step() = default;
  virtual void enqueue(const Context& context) = 0;
  virtual KernelInfo info() const = 0;
  virtual std::int64_t workspace_bytes() const { return 0; }
};

// A conv with its folded batch norm as bias, the residual (`z`) and the ReLU. Fused into one
// cudnnConvolutionBiasActivationForward where cuDNN allows: always with ReLU, and without it
// only with IMPLICIT_PRECOMP_GEMM (cuDNN's rule for the identity activation). Otherwise, or
// when cuDNN refuses the fused call in prepare's first run, the same result from
// cudnnConvolutionForward, cudnnAddTensor (bias, then residual) and cudnnActivationForward
// (a refusal is CUDNN_STATUS_NOT_SUPPORTED_* or CUDNN_STATUS_BAD_PARAM_*: nothing ran).
class ConvStep final : public Step {
 public:
  struct Setup {
    std::string name;
    TensorDesc x, y, bias;
    FilterDesc w;
    ConvolutionDesc conv;
    const void* x_data = nullptr;
    void* y_data = nullptr;
    const void* z_data = nullptr;  ///< residual, or null
    Buffer weights, bias_values;
    bool relu = false;
    cudnnConvolutionFwdAlgo_t algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    std::int64_t workspace_bytes = 0;
    std::string selection;  ///< how the algorithm was chosen, for provenance
  };

  explicit ConvStep(Setup setup)
      : s_(std::move(setup)),
        relu_desc_(activation_desc(CUDNN_ACTIVATION_RELU)),
        identity_desc_(activation_desc(CUDNN_ACTIVATION_IDENTITY)),
        fused_(s_.relu || s_.algorithm == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
    if (!fused_) {
      unfused_reason_ = "cuDNN fuses a conv without activation only with IMPLICIT_PRECOMP_GEMM";
    }
  }

  void enqueue(const Context& c) override {
    void* workspace = s_.workspace_bytes > 0 ? c.workspace : nullptr;
    const auto workspace_bytes = static_cast<std::size_t>(s_.workspace_bytes);
    if (fused_) {
      const cudnnStatus_t status = cudnnConvolutionBiasActivationForward(
          c.cudnn, &kOne, s_.x.get(), s_.x_data, s_.w.get(), s_.weights.data(), s_.conv.get(),
          s_.algorithm, workspace, workspace_bytes, s_.z_data != nullptr ? &kOne : &kZero,
          s_.y.get(), s_.z_data != nullptr ? s_.z_data : s_.y_data, s_.bias.get(),
          s_.bias_values.data(), s_.relu ? relu_desc_.get() : identity_desc_.get(), s_.y.get(),
          s_.y_data);
      if (status == CUDNN_STATUS_SUCCESS) return;
      if (!c.probe || !is_refusal(status)) {
        throw_cudnn(status, "cudnnConvolutionBiasActivationForward", __FILE__, __LINE__);
      }
      fused_ = false;
      unfused_reason_ = "cuDNN refused the fused call: " + describe_cudnn(status);
    }
    CARB_CUDNN(cudnnConvolutionForward(c.cudnn, &kOne, s_.x.get(), s_.x_data, s_.w.get(),
                                       s_.weights.data(), s_.conv.get(), s_.algorithm, workspace,
                                       workspace_bytes, &kZero, s_.y.get(), s_.y_data));
    CARB_CUDNN(cudnnAddTensor(c.cudnn, &kOne, s_.bias.get(), s_.bias_values.data(), &kOne,
                              s_.y.get(), s_.y_data));
    if (s_.z_data != nullptr) {
      CARB_CUDNN(
          cudnnAddTensor(c.cudnn, &kOne, s_.y.get(), s_.z_data, &kOne, s_.y.get(), s_.y_data));
    }
    if (s_.relu) {
      CARB_CUDNN(cudnnActivationForward(c.cudnn, relu_desc_.get(), &kOne, s_.y.get(), s_.y_data,
                                        &kZero, s_.y.get(), s_.y_data));
    }
  }

  KernelInfo info() const override {
    std::string implementation =
        std::string(fused_ ? "cudnnConvolutionBiasActivationForward"
                           : "cudnnConvolutionForward+cudnnAddTensor" +
                                 std::string(s_.relu ? "+cudnnActivationForward" : "")) +
        " " + std::string(algorithm_name(s_.algorithm)) +
        " math=" + std::string(math_name(s_.math)) +
        " workspace=" + std::to_string(s_.workspace_bytes) + " (" + s_.selection + ")";
    if (!fused_) implementation += "; unfused: " + unfused_reason_;
    return {s_.name, implementation, {}};
  }

  std::int64_t workspace_bytes() const override { return s_.workspace_bytes; }

 private:
  Setup s_;
  ActivationDesc relu_desc_;
  ActivationDesc identity_desc_;
  bool fused_;
  std::string unfused_reason_;
};

// Max pooling and the global average pool.
class PoolStep final : public Step {
 public:
  PoolStep(std::string name, PoolingDesc pool, TensorDesc x, TensorDesc y, const void* x_data,
           void* y_data, std::string mode)
      : name_(std::move(name)),
        pool_(std::move(pool)),
        x_(std::move(x)),
        y_(std::move(y)),
        x_data_(x_data),
        y_data_(y_data),
        mode_(std::move(mode)) {}

  void enqueue(const Context& c) override {
    CARB_CUDNN(cudnnPoolingForward(c.cudnn, pool_.get(), &kOne, x_.get(), x_data_, &kZero, y_.get(),
                                   y_data_));
  }
  KernelInfo info() const override { return {name_, "cudnnPoolingForward " + mode_, {}}; }

 private:
  std::string name_;
  PoolingDesc pool_;
  TensorDesc x_, y_;
  const void* x_data_;
  void* y_data_;
  std::string mode_;
};

// The classifier: Y[batch][classes] = X[batch][features] W^T through cublasGemmEx (fp32
// accumulation), then the bias through cudnnAddTensor. In cuBLAS's column-major terms that is
// Y^T = op_T(W) X^T, with W stored [classes][features].
class FullyConnectedStep final : public Step {
 public:
  struct Setup {
    std::string name;
    int batch = 0, classes = 0, features = 0;
    cudaDataType_t type = CUDA_R_32F;
    const void* x_data = nullptr;
    void* y_data = nullptr;
    Buffer weights, bias_values;
    TensorDesc y, bias;
  };
  explicit FullyConnectedStep(Setup setup) : s_(std::move(setup)) {}

  void enqueue(const Context& c) override {
    CARB_CUBLAS(cublas().gemm_ex(c.cublas, CUBLAS_OP_T, CUBLAS_OP_N, s_.classes, s_.batch,
                                 s_.features, &kOne, s_.weights.data(), s_.type, s_.features,
                                 s_.x_data, s_.type, s_.features, &kZero, s_.y_data, s_.type,
                                 s_.classes, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CARB_CUDNN(cudnnAddTensor(c.cudnn, &kOne, s_.bias.get(), s_.bias_values.data(), &kOne,
                              s_.y.get(), s_.y_data));
  }
  KernelInfo info() const override {
    return {s_.name, "cublasGemmEx CUBLAS_COMPUTE_32F CUBLAS_GEMM_DEFAULT+cudnnAddTensor", {}};
  }

 private:
  Setup s_;
};

class CudaSession final : public Session {
 public:
  CudaSession(const Network& network, std::uint64_t seed, const DeviceInfo& info, int ordinal,
              const SessionOptions& options)
      : network_(network),
        info_(info),
        precision_(network.config.precision),
        layout_(layout_for(precision_)),
        data_type_(cudnn_type(precision_)),
        format_(cudnn_format(layout_)),
        element_bytes_(static_cast<std::int64_t>(device_element_bytes(precision_))),
        options_(options),
        allocator_(make_cuda_allocator()) {
    CARB_CUDA(cudaSetDevice(ordinal));
    CARB_CUDA(cudaFree(nullptr));  // creates the context now, so the baseline below counts it
    create_handles();
    record_context_baseline();

    plan_ = engine::plan_execution(network_, engine::ResidualMode::kSeparateOutput);
    allocate_arena();
    blas_workspace_ = allocator_.allocate(kCublasWorkspaceBytes, MemoryKind::kWorkspace);
    CARB_CUBLAS(cublas().set_workspace(blas_.get(), blas_workspace_.data(),
                                       static_cast<std::size_t>(blas_workspace_.bytes())));
    if (options_.cudnn_find) open_find_cache();

    for (const engine::Op& op : plan_.ops) steps_.push_back(make_step(op, seed));
    find_workspace_.reset();
    std::int64_t workspace_bytes = 0;
    for (const auto& step : steps_) {
      workspace_bytes = std::max(workspace_bytes, step->workspace_bytes());
    }
    workspace_ = allocator_.allocate(workspace_bytes, MemoryKind::kWorkspace);

    set_input(generate_input(network_, seed));
    // The first pass runs eagerly: it finds a fused call cuDNN refuses (and falls back), and it
    // loads every kernel before a graph is captured or anything is timed.
    enqueue_steps(/*probe=*/true);
    CARB_CUDA(cudaStreamSynchronize(stream_.get()));
    if (options_.cuda_graph) {
      capture_graph();
    } else {
      details_["cuda_graph"] = {{"requested", false}, {"used", false}};
    }

    memory_.weight_bytes = allocator_.current_bytes(MemoryKind::kWeights);
    memory_.activation_bytes = allocator_.current_bytes(MemoryKind::kActivations);
    memory_.scratchpad_bytes = allocator_.current_bytes(MemoryKind::kWorkspace);
    memory_.peak_bytes = allocator_.peak_bytes();
    describe();
  }

  void run() override {
    CARB_CUDA(cudaEventRecord(start_.get(), stream_.get()));
    if (graph_) {
      CARB_CUDA(cudaGraphLaunch(graph_.get(), stream_.get()));
    } else {
      enqueue_steps(false);
    }
    CARB_CUDA(cudaEventRecord(stop_.get(), stream_.get()));
    timed_run_ = true;
  }

  void sync() override { CARB_CUDA(cudaStreamSynchronize(stream_.get())); }

  std::optional<double> last_run_device_ms() override {
    if (!timed_run_) return std::nullopt;
    CARB_CUDA(cudaEventSynchronize(stop_.get()));
    float elapsed_ms = 0;
    CARB_CUDA(cudaEventElapsedTime(&elapsed_ms, start_.get(), stop_.get()));
    return elapsed_ms;
  }

  const Network& network() const override { return network_; }
  MemoryUsage memory() const override { return memory_; }

  std::vector<KernelInfo> kernels() const override {
    std::vector<KernelInfo> infos;
    infos.reserve(steps_.size());
    for (const auto& step : steps_) infos.push_back(step->info());
    return infos;
  }

  nlohmann::json details() const override { return details_; }

  void set_input(std::span<const float> values) override {
    const Shape& shape = tensor(network_.input);
    if (static_cast<std::int64_t>(values.size()) != shape.elements()) {
      throw Error(ErrorCategory::kInput, "input of " + to_key(network_.config) + " needs " +
                                             std::to_string(shape.elements()) + " values, got " +
                                             std::to_string(values.size()));
    }
    const std::vector<std::byte> bytes = encode_tensor(values, shape, precision_, layout_);
    CARB_CUDA(cudaMemcpyAsync(value_data(plan_.input_value), bytes.data(), bytes.size(),
                              cudaMemcpyHostToDevice, stream_.get()));
    CARB_CUDA(cudaStreamSynchronize(stream_.get()));
  }

  std::vector<float> read_output() override {
    const Shape& shape = tensor(network_.output);
    std::vector<std::byte> bytes(static_cast<std::size_t>(shape.elements() * element_bytes_));
    CARB_CUDA(cudaMemcpyAsync(bytes.data(), value_data(plan_.output_value), bytes.size(),
                              cudaMemcpyDeviceToHost, stream_.get()));
    CARB_CUDA(cudaStreamSynchronize(stream_.get()));
    return decode_vector(bytes, precision_);
  }

 private:
  const Shape& tensor(int id) const { return network_.tensors[static_cast<std::size_t>(id)]; }
  const Layer& layer(int index) const { return network_.layers[static_cast<std::size_t>(index)]; }
  void* value_data(int value) const {
    return static_cast<std::byte*>(arena_.data()) +
           arena_plan_.offsets_bytes[static_cast<std::size_t>(value)];
  }
  // Copies host bytes into a fresh device buffer of `kind`, on the session's stream, and waits
  // (prepare only; a plain cudaMemcpy from pageable memory may return before its copy lands).
  Buffer upload(std::span<const std::byte> bytes, MemoryKind kind) {
    Buffer buffer = allocator_.allocate(static_cast<std::int64_t>(bytes.size()), kind);
    CARB_CUDA(cudaMemcpyAsync(buffer.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice,
                              stream_.get()));
    CARB_CUDA(cudaStreamSynchronize(stream_.get()));
    return buffer;
  }

  TensorDesc value_desc(int value) const {
    return tensor_desc(plan_.values[static_cast<std::size_t>(value)].shape, data_type_, format_);
  }

  void create_handles() {
    cudaStream_t stream = nullptr;
    CARB_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    stream_.reset(stream);
    cudaEvent_t event = nullptr;
    CARB_CUDA(cudaEventCreate(&event));
    start_.reset(event);
    CARB_CUDA(cudaEventCreate(&event));
    stop_.reset(event);
    cudnnHandle_t cudnn = nullptr;
    CARB_CUDNN(cudnnCreate(&cudnn));
    cudnn_.reset(cudnn);
    CARB_CUDNN(cudnnSetStream(cudnn, stream));
    cublasHandle_t blas = nullptr;
    CARB_CUBLAS(cublas().create(&blas));
    blas_.reset(blas);
    CARB_CUBLAS(cublas().set_stream(blas, stream));
    // Tensor cores for fp16 and bf16; for fp32, cuBLAS's default math with CUBLAS_COMPUTE_32F
    // uses no TF32.
    CARB_CUBLAS(cublas().set_math_mode(blas, CUBLAS_DEFAULT_MATH));
  }

  // What the GPU holds for this process before carb allocates anything: the CUDA context, cuDNN
  // and cuBLAS handles, as the driver counts them (NVML), and the device's free memory then.
  void record_context_baseline() {
    nlohmann::json memory = nlohmann::json::object();
    const auto monitor = open_gpu_monitor(info_.uuid);
    std::string why;
    if (const auto bytes = monitor->process_memory_bytes(&why)) {
      memory["context_baseline_bytes"] = *bytes;
    } else {
      memory["context_baseline_bytes"] = nullptr;
      memory["context_baseline_null_reason"] = why;
    }
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    CARB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    memory["device_free_bytes_after_context"] = free_bytes;
    memory["device_total_bytes"] = total_bytes;
    details_["memory"] = memory;
  }

  void allocate_arena() {
    std::vector<engine::BufferRequest> requests;
    requests.reserve(plan_.values.size());
    for (const engine::Value& value : plan_.values) {
      requests.push_back({value.shape.elements() * element_bytes_, value.first_op, value.last_op});
    }
    arena_plan_ = engine::plan_arena(requests, DeviceAllocator::kGranuleBytes);
    arena_ = allocator_.allocate(arena_plan_.arena_bytes, MemoryKind::kActivations);
    // Zeroed once: a fused conv without a residual passes its output as the residual with a
    // scale of 0, which must never meet a NaN pattern in memory nothing has written yet.
    CARB_CUDA(
        cudaMemsetAsync(arena_.data(), 0, static_cast<std::size_t>(arena_.bytes()), stream_.get()));
  }

  void open_find_cache() {
    const std::filesystem::path file = options_.algorithm_cache.empty()
                                           ? default_algorithm_cache_file()
                                           : std::filesystem::path(options_.algorithm_cache);
    find_cache_.emplace(file);
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    CARB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    // The search may try algorithms with large workspaces; it gets what it can without
    // squeezing the network itself.
    const auto bytes =
        std::min<std::int64_t>(kFindWorkspaceBytes, static_cast<std::int64_t>(free_bytes / 4));
    find_workspace_ = allocator_.allocate(bytes, MemoryKind::kTransient);
  }

  // A ResNet's ops: the device refuses imported networks (DeviceInfo::imported_reason), whose
  // other ops and activations this engine does not run.
  std::unique_ptr<Step> make_step(const engine::Op& op, std::uint64_t seed) {
    CARB_CHECK(op.activation < 0 || op.relu, op.name + ": the CUDA engine fuses only ReLU");
    switch (op.kind) {
      case engine::OpKind::kConv:
        return make_conv(op, seed);
      case engine::OpKind::kMaxPool:
      case engine::OpKind::kGlobalAvgPool:
        return make_pool(op);
      case engine::OpKind::kFullyConnected:
        return make_fully_connected(op, seed);
      default:
        break;
    }
    CARB_CHECK(false, op.name + ": the CUDA engine runs only a ResNet's ops");
    return nullptr;
  }

  std::unique_ptr<Step> make_conv(const engine::Op& op, std::uint64_t seed) {
    const Layer& conv = layer(op.layer);
    const Shape& in = tensor(conv.inputs[0]);
    const Shape& out = tensor(conv.output);
    ConvStep::Setup s;
    s.name = op.name;
    s.relu = op.relu;
    s.x = value_desc(op.input);
    s.y = value_desc(op.output);
    s.x_data = value_data(op.input);
    s.y_data = value_data(op.output);
    if (op.residual >= 0) s.z_data = value_data(op.residual);

    // Weights: generated, batch norm folded (in double), converted and laid out on the host.
    LayerParameters parameters = generate_layer_parameters(network_, op.layer, seed);
    const LayerParameters batch_norm = generate_layer_parameters(network_, op.batch_norm, seed);
    const std::vector<float> bias = engine::fold_batch_norm(parameters.weight, batch_norm);
    const Shape weight_shape{out.c, in.c, conv.kernel, conv.kernel};
    s.weights = upload(encode_tensor(parameters.weight, weight_shape, precision_, layout_),
                       MemoryKind::kWeights);
    s.bias_values = upload(encode_vector(bias, precision_), MemoryKind::kWeights);
    s.bias = tensor_desc({1, out.c, 1, 1}, data_type_, format_);

    cudnnFilterDescriptor_t filter = nullptr;
    CARB_CUDNN(cudnnCreateFilterDescriptor(&filter));
    s.w.reset(filter);
    CARB_CUDNN(cudnnSetFilter4dDescriptor(filter, data_type_, format_, out.c, in.c, conv.kernel,
                                          conv.kernel));
    cudnnConvolutionDescriptor_t convolution = nullptr;
    CARB_CUDNN(cudnnCreateConvolutionDescriptor(&convolution));
    s.conv.reset(convolution);
    // fp32 accumulation in every precision (what PyTorch asks of cuDNN for half and bfloat16).
    CARB_CUDNN(cudnnSetConvolution2dDescriptor(convolution, conv.padding, conv.padding, conv.stride,
                                               conv.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT));
    const bool fp32 = precision_ == Precision::kFp32;
    CARB_CUDNN(
        cudnnSetConvolutionMathType(convolution, fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    int n = 0, c = 0, h = 0, w = 0;
    CARB_CUDNN(
        cudnnGetConvolution2dForwardOutputDim(convolution, s.x.get(), filter, &n, &c, &h, &w));
    CARB_CHECK(Shape({n, c, h, w}) == out,
               "cuDNN's conv output shape differs from the IR's at " + op.name);

    choose_algorithm_for(s, in, out, conv);
    // The math the chosen algorithm runs with; fp32 stays FMA (never TF32).
    CARB_CUDNN(cudnnSetConvolutionMathType(convolution, s.math));
    ++convolutions_by_math_[std::string(math_name(s.math))];
    return std::make_unique<ConvStep>(std::move(s));
  }

  void choose_algorithm_for(ConvStep::Setup& s, const Shape& in, const Shape& out,
                            const Layer& conv) {
    const bool fp32 = precision_ == Precision::kFp32;
    // cuDNN's candidates with the convolution's math type set to `math`; none when it refuses.
    const auto candidates_with = [&](cudnnMathType_t math, bool find) {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> found{};
      int returned = 0;
      cudnnStatus_t status = cudnnSetConvolutionMathType(s.conv.get(), math);
      if (status == CUDNN_STATUS_SUCCESS && find) {
        status = cudnnFindConvolutionForwardAlgorithmEx(
            cudnn_.get(), s.x.get(), s.x_data, s.w.get(), s.weights.data(), s.conv.get(), s.y.get(),
            s.y_data, static_cast<int>(found.size()), &returned, found.data(),
            find_workspace_.data(), static_cast<std::size_t>(find_workspace_.bytes()));
      } else if (status == CUDNN_STATUS_SUCCESS) {
        status = cudnnGetConvolutionForwardAlgorithm_v7(
            cudnn_.get(), s.x.get(), s.w.get(), s.conv.get(), s.y.get(),
            static_cast<int>(found.size()), &returned, found.data());
      }
      if (status != CUDNN_STATUS_SUCCESS) {
        if (!is_refusal(status)) throw_cudnn(status, "cuDNN algorithm query", __FILE__, __LINE__);
        returned = 0;
      }
      return std::vector<cudnnConvolutionFwdAlgoPerf_t>(found.begin(), found.begin() + returned);
    };
    // Which math the choice took, for the kernel record.
    const auto math_note = [](const AlgorithmChoice& choice) {
      return choice.fell_back ? std::string(", default math: tensor-op math offered none usable")
                              : std::string();
    };
    if (find_cache_) {
      ConvolutionKey key;
      key.n = in.n, key.c = in.c, key.h = in.h, key.w = in.w;
      key.k = out.c, key.r = conv.kernel, key.s = conv.kernel;
      key.stride = conv.stride, key.padding = conv.padding;
      key.data_type = std::string(to_string(precision_));
      key.layout = layout_ == Layout::kNchw ? "nchw" : "nhwc";
      key.gpu = info_.name + " " + info_.isa;
      key.cudnn = cudnn_version();
      const std::string text = key.to_string();
      if (const auto cached = find_cache_->find(text)) {
        s.algorithm = cached->algorithm;
        s.math = fp32 ? CUDNN_FMA_MATH : cached->math;
        s.workspace_bytes = cached->workspace_bytes;
        s.selection = "cudnnFind, cached in " + find_cache_->file().string();
        ++find_hits_;
        return;
      }
      std::size_t offered = 0;
      const auto choice = choose_algorithm_over_maths(
          [&](cudnnMathType_t math) { return candidates_with(math, true); },
          find_workspace_.bytes(), fp32, &offered);
      if (!choice) throw no_algorithm(s, "cudnnFindConvolutionForwardAlgorithmEx", offered);
      s.algorithm = choice->candidate.algo;
      s.math = choice->math;
      s.workspace_bytes = static_cast<std::int64_t>(choice->candidate.memory);
      s.selection = "cudnnFind #" + std::to_string(choice->rank + 1) + " of " +
                    std::to_string(choice->returned) + ", " +
                    std::to_string(choice->candidate.time) + " ms" + math_note(*choice);
      find_cache_->store(text, {s.algorithm, s.math, s.workspace_bytes, choice->candidate.time});
      ++find_searches_;
      return;
    }
    std::size_t offered = 0;
    const auto choice = choose_algorithm_over_maths(
        [&](cudnnMathType_t math) { return candidates_with(math, false); }, kMaxWorkspaceBytes,
        fp32, &offered);
    if (!choice) throw no_algorithm(s, "cudnnGetConvolutionForwardAlgorithm_v7", offered);
    s.algorithm = choice->candidate.algo;
    s.math = choice->math;
    s.selection = "heuristic #" + std::to_string(choice->rank + 1) + " of " +
                  std::to_string(choice->returned) + math_note(*choice);
    // The workspace of the algorithm with the math it will run with.
    CARB_CUDNN(cudnnSetConvolutionMathType(s.conv.get(), s.math));
    std::size_t workspace = 0;
    CARB_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(
        cudnn_.get(), s.x.get(), s.w.get(), s.conv.get(), s.y.get(), s.algorithm, &workspace));
    s.workspace_bytes = static_cast<std::int64_t>(workspace);
  }

  Error no_algorithm(const ConvStep::Setup& s, const char* source, std::size_t offered) const {
    return Error(ErrorCategory::kRuntime,
                 "cuDNN: " + std::string(source) + " offered no usable algorithm for " + s.name +
                     " of " + to_key(network_.config) + " (" + std::to_string(offered) +
                     " candidates over every math type tried; fp32 excludes tensor-op math, "
                     "workspaces are capped at " +
                     mib(kMaxWorkspaceBytes) + ")");
  }

  static std::string cudnn_version() {
    const std::size_t version = cudnnGetVersion();
    return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
           std::to_string(version % 100);
  }

  std::unique_ptr<Step> make_pool(const engine::Op& op) {
    const Layer& pool = layer(op.layer);
    const Shape& in = tensor(pool.inputs[0]);
    const bool max = op.kind == engine::OpKind::kMaxPool;
    cudnnPoolingDescriptor_t raw = nullptr;
    CARB_CUDNN(cudnnCreatePoolingDescriptor(&raw));
    PoolingDesc desc(raw);
    // Max pooling follows a ReLU in every IR network, so padding never wins the max either way.
    const int window_h = max ? pool.kernel : in.h;
    const int window_w = max ? pool.kernel : in.w;
    const int padding = max ? pool.padding : 0;
    const int stride_h = max ? pool.stride : in.h;
    const int stride_w = max ? pool.stride : in.w;
    CARB_CUDNN(cudnnSetPooling2dDescriptor(
        raw, max ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
        CUDNN_NOT_PROPAGATE_NAN, window_h, window_w, padding, padding, stride_h, stride_w));
    TensorDesc x = value_desc(op.input);
    int n = 0, c = 0, h = 0, w = 0;
    CARB_CUDNN(cudnnGetPooling2dForwardOutputDim(raw, x.get(), &n, &c, &h, &w));
    CARB_CHECK(Shape({n, c, h, w}) == tensor(pool.output),
               "cuDNN's pooling output shape differs from the IR's at " + op.name);
    return std::make_unique<PoolStep>(op.name, std::move(desc), std::move(x), value_desc(op.output),
                                      value_data(op.input), value_data(op.output),
                                      max ? "max" : "average");
  }

  std::unique_ptr<Step> make_fully_connected(const engine::Op& op, std::uint64_t seed) {
    const Layer& fc = layer(op.layer);
    const Shape& in = tensor(fc.inputs[0]);
    const Shape& out = tensor(fc.output);
    CARB_CHECK(in.h == 1 && in.w == 1 && out.h == 1 && out.w == 1, "fc over a spatial tensor");
    const LayerParameters parameters = generate_layer_parameters(network_, op.layer, seed);
    FullyConnectedStep::Setup s;
    s.name = op.name;
    s.batch = in.n;
    s.classes = out.c;
    s.features = in.c;
    s.type = blas_type(precision_);
    s.x_data = value_data(op.input);
    s.y_data = value_data(op.output);
    s.weights = upload(encode_vector(parameters.weight, precision_), MemoryKind::kWeights);
    s.bias_values = upload(encode_vector(parameters.bias, precision_), MemoryKind::kWeights);
    s.y = value_desc(op.output);
    s.bias = tensor_desc({1, out.c, 1, 1}, data_type_, format_);
    return std::make_unique<FullyConnectedStep>(std::move(s));
  }

  void enqueue_steps(bool probe) {
    Context context;
    context.cudnn = cudnn_.get();
    context.cublas = blas_.get();
    context.workspace = workspace_.data();
    context.workspace_bytes = workspace_.bytes();
    context.probe = probe;
    for (const auto& step : steps_) step->enqueue(context);
  }

  // Captures one forward pass as a CUDA Graph; when capture fails the session runs eagerly and
  // says why in its details.
  void capture_graph() {
    nlohmann::json graph = {{"requested", true}, {"used", false}};
    cudaGraph_t captured = nullptr;
    CARB_CUDA(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
    std::string failure;
    try {
      enqueue_steps(false);
    } catch (const Error& error) {
      failure = error.what();
    } catch (...) {
      // Out of memory or a bug: end the capture so the stream is usable, then let it go on.
      cudaStreamEndCapture(stream_.get(), &captured);
      if (captured != nullptr) cudaGraphDestroy(captured);
      throw;
    }
    const cudaError_t ended = cudaStreamEndCapture(stream_.get(), &captured);
    if (failure.empty() && ended != cudaSuccess) {
      failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
    }
    if (failure.empty()) {
      cudaGraphExec_t exec = nullptr;
      const cudaError_t instantiated = cudaGraphInstantiate(&exec, captured, 0);
      if (instantiated == cudaSuccess) {
        graph_.reset(exec);
        std::size_t nodes = 0;
        cudaGraphGetNodes(captured, nullptr, &nodes);
        graph["used"] = true;
        graph["nodes"] = nodes;
      } else {
        failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(instantiated);
      }
    }
    if (captured != nullptr) cudaGraphDestroy(captured);
    if (!failure.empty()) {
      cudaGetLastError();  // capture errors are not sticky; the eager path is unaffected
      graph["failure"] = failure;
    } else {
      CARB_CUDA(cudaGraphUpload(graph_.get(), stream_.get()));
      CARB_CUDA(cudaStreamSynchronize(stream_.get()));
    }
    details_["cuda_graph"] = graph;
  }

  void describe() {
    details_["layout"] = layout_ == Layout::kNchw ? "nchw" : "nhwc";
    details_["math"] =
        precision_ == Precision::kFp32
            ? "fp32: cuDNN CUDNN_FMA_MATH, cuBLAS CUBLAS_COMPUTE_32F (no TF32)"
            : std::string(to_string(precision_)) +
                  ": tensor-op math where cuDNN offers it, else default math; fp32 accumulation";
    // How many convolutions run with each math type (a conv's kernel record says which).
    details_["convolutions_by_math"] = convolutions_by_math_;
    nlohmann::json selection = {{"mode", options_.cudnn_find ? "find" : "heuristic"}};
    if (find_cache_) {
      selection["cache"] = find_cache_->file().string();
      selection["cache_hits"] = find_hits_;
      selection["searched"] = find_searches_;
    }
    details_["algorithm_selection"] = selection;
    details_["memory"]["allocator_peak_bytes"] = allocator_.peak_bytes();
    details_["memory"]["cublas_workspace_bytes"] = blas_workspace_.bytes();
    details_["memory"]["cudnn_workspace_bytes"] = workspace_.bytes();
    int version = 0;
    cublas().get_version(blas_.get(), &version);
    details_["libraries"] = {
        {"cudnn", cudnn_version()}, {"cublas", version}, {"cublas_library", cublas().library}};
  }

  Network network_;
  DeviceInfo info_;
  Precision precision_;
  Layout layout_;
  cudnnDataType_t data_type_;
  cudnnTensorFormat_t format_;
  std::int64_t element_bytes_;
  SessionOptions options_;
  nlohmann::json details_ = nlohmann::json::object();
  std::map<std::string, int> convolutions_by_math_;
  // Everything below is released before the allocator and the handles it depends on.
  DeviceAllocator allocator_;
  Stream stream_;
  Event start_;
  Event stop_;
  CudnnHandle cudnn_;
  CublasHandle blas_;
  engine::ExecutionPlan plan_;
  engine::ArenaPlan arena_plan_;
  Buffer arena_;
  Buffer blas_workspace_;
  Buffer find_workspace_;
  Buffer workspace_;
  std::optional<AlgorithmCache> find_cache_;
  int find_hits_ = 0;
  int find_searches_ = 0;
  std::vector<std::unique_ptr<Step>> steps_;
  GraphExec graph_;
  MemoryUsage memory_;
  bool timed_run_ = false;
};

}  // namespace

std::unique_ptr<Session> make_cuda_session(const Network& network, std::uint64_t seed,
                                           const DeviceInfo& info, int ordinal,
                                           const SessionOptions& options) {
  return std::make_unique<CudaSession>(network, seed, info, ordinal, options);
}

}  // namespace carb::cuda
