// The CPU session: oneDNN primitives built from the execution plan, batch norm folded into the
// conv weights, weights reordered once into the layouts the kernels chose, activations in one
// planned arena (channel-blocked), and one user-mode scratchpad shared by every primitive.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <omp.h>
#include <sys/mman.h>
#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "cpu_backend.hpp"
#include "dnnl_check.hpp"
#include "engine/fold.hpp"
#include "engine/plan.hpp"
#include "pages.hpp"

namespace carb::cpu {

namespace {

using engine::ArenaPlan;
using engine::BufferRequest;
using engine::ExecutionPlan;
using engine::fold_batch_norm;
using engine::Op;
using engine::OpKind;
using engine::plan_arena;
using engine::plan_execution;
using engine::Value;

using Memory = dnnl::memory;
using DataType = Memory::data_type;
using Tag = Memory::format_tag;

// Every arena buffer starts on a 64-byte boundary (a cache line), so no two buffers share a line
// and aligned vector loads never split one.
constexpr std::int64_t kAlignmentBytes = 64;

// Activations between layers are channel-blocked (nChw8c on avx2, nChw16c with avx512), the
// layout oneDNN's fastest direct conv kernels are written for, and one layout throughout so no
// reorder runs between layers; channels are padded to the block, and the padding is counted in
// the arena. It was faster than nhwc on resnet18/50 and no slower on any (docs/benchmarks.md,
// "CPU engine against PyTorch"). The network input stays plain nchw (a blocked 3-channel stem
// input sends the stem conv to oneDNN's reference kernel, far slower), and the classifier's
// output is a plain [batch][classes] matrix.
Tag blocked_layout() {
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? Tag::nChw16c : Tag::nChw8c;
}

std::int64_t desc_bytes(const Memory::desc& desc) {
  return static_cast<std::int64_t>(desc.get_size());
}

template <typename T>
std::int64_t vector_bytes(const std::vector<T>& values) {
  return static_cast<std::int64_t>(values.size() * sizeof(T));
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  CARB_DNNL(attr.set_scratchpad_mode(dnnl::scratchpad_mode::user));
  return attr;
}

Memory::desc activation_desc(const Shape& shape, DataType data_type, Tag layout) {
  return CARB_DNNL(Memory::desc({shape.n, shape.c, shape.h, shape.w}, data_type, layout));
}

// The classifier's output, n x c x 1 x 1, as the [batch][classes] matrix inner product writes.
Memory::desc matrix_desc(const Shape& shape, DataType data_type) {
  CARB_CHECK(shape.h == 1 && shape.w == 1, "matrix view of a tensor with spatial extent");
  return CARB_DNNL(Memory::desc({shape.n, shape.c}, data_type, Tag::nc));
}

// Runs the oneDNN calls of its scope on the calling thread alone: OpenMP's thread count is 1
// until the scope ends. For prepare's weight reorders and the input and output conversions,
// none of which run() executes; never around creating a primitive run() executes, whose
// descriptor fixes its threading. Otherwise each weight reorder is a parallel region that wakes
// OpenMP's sleeping second thread, which costs milliseconds whenever the other core is busy
// (docs/benchmarks.md, "CPU engine: prepare"). Page faults bound the copy, so two threads are no
// faster (docs/cpu-engine.md).
class SingleThreaded {
 public:
  SingleThreaded() : threads_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreaded() { omp_set_num_threads(threads_); }
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  int threads_;
};

// Prepare's staging area for generated weights: one mapping sized to the largest layer's and
// reused by every layer. A fresh buffer per layer would page-fault every weight twice (its
// staging and its kernel layout), and where page faults are expensive first touches dominate
// prepare (docs/cpu-engine.md). Pages past the current layer's weights are kept for the next larger
// layer only while they fit under a bound, and given back otherwise: prepare's bytes never
// exceed the high-water mark of one layer staged at a time, which MemoryUsage reports, by more
// than the rounding to the mapping's page (2 MiB where it is on huge pages).
class Staging {
 public:
  explicit Staging(std::size_t capacity_values)
      : capacity_bytes_(static_cast<std::int64_t>(capacity_values * sizeof(float))),
        pages_(capacity_bytes_),
        unit_bytes_(capacity_bytes_ >= kHugePageBytes ? kHugePageBytes : page_bytes()) {}

  // The first `values` floats (uninitialised), holding at most max(their pages, `bound_bytes`).
  std::span<float> take(std::size_t values, std::int64_t bound_bytes) {
    const std::int64_t bytes = static_cast<std::int64_t>(values * sizeof(float));
    CARB_CHECK(bytes <= capacity_bytes_, "staging overflow");
    const std::int64_t mapped = round_up(capacity_bytes_, page_bytes());
    const std::int64_t needed = std::min(round_up(bytes, unit_bytes_), mapped);
    const std::int64_t kept = std::min(held_bytes_, bound_bytes / unit_bytes_ * unit_bytes_);
    const std::int64_t held = std::max(needed, kept);
    if (held < held_bytes_) {
      ::madvise(pages_.data() + held, static_cast<std::size_t>(held_bytes_ - held), MADV_DONTNEED);
    } else if (held > held_bytes_) {
      populate_pages(pages_.data() + held_bytes_, held - held_bytes_);
    }
    held_bytes_ = held;
    return {reinterpret_cast<float*>(pages_.data()), values};
  }

 private:
  std::int64_t capacity_bytes_ = 0;
  Pages pages_;
  std::int64_t unit_bytes_;      ///< what the mapping is backed in: 2 MiB when on huge pages
  std::int64_t held_bytes_ = 0;  ///< bytes backed now: whole units, or the whole mapping
};

// What prepare() chose for one op: the primitive and, for conv and fc, the reorder of the
// generated weights into the primitive's weight layout.
struct OpDescription {
  dnnl::primitive_desc primitive;
  std::optional<dnnl::reorder::primitive_desc> weights_reorder;
};

// One primitive of run() with its arguments bound to arena, weights and scratchpad memory.
struct Kernel {
  dnnl::primitive primitive;
  std::unordered_map<int, Memory> args;
  KernelInfo info;
};

// A reorder between a caller's float buffer and an arena tensor (input and output conversion,
// not part of run()).
struct Conversion {
  dnnl::reorder::primitive_desc desc;
  dnnl::reorder primitive;
  Memory::desc user_desc;  ///< the caller's float layout
  Memory arena_view;       ///< the arena tensor
};

// Where prepare()'s time goes, per phase, for provenance (Session::details): seconds of the
// steady clock, each phase's laps summed.
class PrepareClock {
 public:
  enum Phase { kDescribe, kAllocate, kKernels, kGenerate, kFold, kReorder, kInput, kPhases };

  // Adds the time since the last lap (or since construction) to `phase`.
  void lap(Phase phase) {
    const auto now = std::chrono::steady_clock::now();
    seconds_[phase] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

  nlohmann::json to_json() const {
    static constexpr std::array<const char*, kPhases> kNames = {
        "describe", "allocate", "kernels", "generate", "fold", "reorder", "input"};
    nlohmann::json json = nlohmann::json::object();
    for (int phase = 0; phase < kPhases; ++phase) json[kNames[phase]] = seconds_[phase];
    return json;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::array<double, kPhases> seconds_{};
};

// What a network needs on this engine, known before anything is allocated or generated: every
// primitive's description (oneDNN's choice of kernels and weight layouts), the arena plan, the
// shared scratchpad, and so the exact memory figures prepare() will reach (Device::plan_memory).
// The session builds on it.
class CpuPlanner {
 public:
  CpuPlanner(const Network& network, const dnnl::engine& engine)
      : network_(network),
        engine_(engine),
        data_type_(network.config.precision == Precision::kBf16 ? DataType::bf16 : DataType::f32),
        plan_(plan_execution(network)) {
    CARB_CHECK(network.config.precision != Precision::kFp16, "fp16 reached the CPU engine");
    descriptions_ = describe_primitives();
    clock_.lap(PrepareClock::kDescribe);
    std::vector<BufferRequest> requests;
    requests.reserve(plan_.values.size());
    for (std::size_t v = 0; v < plan_.values.size(); ++v) {
      const Value& value = plan_.values[v];
      requests.push_back(
          {desc_bytes(activation_desc_of(static_cast<int>(v))), value.first_op, value.last_op});
    }
    arena_plan_ = plan_arena(requests, kAlignmentBytes);
    planned_.activation_bytes = arena_plan_.arena_bytes;
    planned_.scratchpad_bytes = round_up(scratchpad_bytes_needed_, kAlignmentBytes);
    planned_.peak_bytes = plan_peak_bytes();
    for (const OpDescription& description : descriptions_) {
      if (!description.weights_reorder) continue;
      planned_.weight_bytes += desc_bytes(description.primitive.weights_desc()) +
                               desc_bytes(description.primitive.weights_desc(1));
    }
  }

  /// The memory figures prepare() reaches (weights, arena, scratchpad, and its high-water mark).
  const MemoryUsage& planned() const { return planned_; }

 protected:
  const Shape& tensor(int id) const { return network_.tensors[static_cast<std::size_t>(id)]; }
  const Layer& layer(int index) const { return network_.layers[static_cast<std::size_t>(index)]; }
  Memory::desc activation_desc_of(int value) const {
    const Shape& shape = plan_.values[static_cast<std::size_t>(value)].shape;
    if (value == plan_.output_value) return matrix_desc(shape, data_type_);
    return activation_desc(shape, data_type_,
                           value == plan_.input_value ? Tag::nchw : blocked_layout_);
  }

  // Phase 1: every primitive descriptor, so the shared scratchpad size is known before anything
  // is allocated. Also describes the input and output conversions.
  std::vector<OpDescription> describe_primitives() {
    std::vector<OpDescription> descriptions;
    descriptions.reserve(plan_.ops.size());
    for (const Op& op : plan_.ops) {
      OpDescription description{describe(op), std::nullopt};
      note_scratchpad(description.primitive.scratchpad_desc());
      if (op.kind == OpKind::kConv || op.kind == OpKind::kFullyConnected) {
        {
          const SingleThreaded single_threaded;
          description.weights_reorder = CARB_DNNL(dnnl::reorder::primitive_desc(
              engine_, plain_weights_desc(op), engine_, description.primitive.weights_desc(),
              user_scratchpad()));
        }
        note_scratchpad(description.weights_reorder->scratchpad_desc());
      }
      descriptions.push_back(std::move(description));
    }
    const SingleThreaded single_threaded;
    const Shape& in = tensor(network_.input);
    input_.user_desc = CARB_DNNL(Memory::desc({in.n, in.c, in.h, in.w}, DataType::f32, Tag::nchw));
    input_.desc = CARB_DNNL(dnnl::reorder::primitive_desc(engine_, input_.user_desc, engine_,
                                                          activation_desc_of(plan_.input_value),
                                                          user_scratchpad()));
    const Shape& out = tensor(network_.output);
    output_.user_desc = matrix_desc(out, DataType::f32);
    output_.desc =
        CARB_DNNL(dnnl::reorder::primitive_desc(engine_, activation_desc_of(plan_.output_value),
                                                engine_, output_.user_desc, user_scratchpad()));
    note_scratchpad(input_.desc.scratchpad_desc());
    note_scratchpad(output_.desc.scratchpad_desc());
    return descriptions;
  }

  void note_scratchpad(const Memory::desc& desc) {
    scratchpad_bytes_needed_ = std::max(scratchpad_bytes_needed_, desc_bytes(desc));
  }

  dnnl::primitive_desc describe(const Op& op) const {
    const Layer& source = layer(op.layer);
    const Shape& in = tensor(source.inputs[0]);
    const Shape& out = tensor(source.output);
    const dnnl::primitive_attr attr = user_scratchpad();
    const auto prop = dnnl::prop_kind::forward_inference;
    switch (op.kind) {
      case OpKind::kConv: {
        dnnl::post_ops post_ops;
        if (op.sum) CARB_DNNL(post_ops.append_sum(1.0f));
        if (op.relu) {
          CARB_DNNL(post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f));
        }
        dnnl::primitive_attr conv_attr = attr;
        CARB_DNNL(conv_attr.set_post_ops(post_ops));
        const Memory::dim stride = source.stride;
        const Memory::dim padding = source.padding;
        const Memory::desc weights = CARB_DNNL(
            Memory::desc({out.c, in.c, source.kernel, source.kernel}, data_type_, Tag::any));
        // Bias stays f32 in bf16 too: oneDNN accepts it, and the folded shift keeps its bits.
        const Memory::desc bias = CARB_DNNL(Memory::desc({out.c}, DataType::f32, Tag::a));
        // padding_r = padding_l: oneDNN's shape check floors like PyTorch's output size does.
        const dnnl::convolution_forward::desc desc = CARB_DNNL(dnnl::convolution_forward::desc(
            prop, dnnl::algorithm::convolution_direct, activation_desc_of(op.input), weights, bias,
            activation_desc_of(op.output), {stride, stride}, {padding, padding},
            {padding, padding}));
        return CARB_DNNL(dnnl::convolution_forward::primitive_desc(desc, conv_attr, engine_));
      }
      case OpKind::kMaxPool:
      case OpKind::kGlobalAvgPool: {
        const bool max = op.kind == OpKind::kMaxPool;
        const Memory::dim kernel_h = max ? source.kernel : in.h;
        const Memory::dim kernel_w = max ? source.kernel : in.w;
        const Memory::dim stride = source.stride;
        const Memory::dim padding = max ? source.padding : 0;
        const dnnl::pooling_forward::desc desc = CARB_DNNL(dnnl::pooling_forward::desc(
            prop, max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
            activation_desc_of(op.input), activation_desc_of(op.output), {stride, stride},
            {kernel_h, kernel_w}, {padding, padding}, {padding, padding}));
        return CARB_DNNL(dnnl::pooling_forward::primitive_desc(desc, attr, engine_));
      }
      case OpKind::kFullyConnected: {
        // Inner product over the blocked n x c x 1 x 1 pooled tensor: weights are o x i x 1 x 1.
        const Memory::desc weights =
            CARB_DNNL(Memory::desc({out.c, in.c, 1, 1}, data_type_, Tag::any));
        const Memory::desc bias = CARB_DNNL(Memory::desc({out.c}, DataType::f32, Tag::a));
        const dnnl::inner_product_forward::desc desc = CARB_DNNL(dnnl::inner_product_forward::desc(
            prop, activation_desc_of(op.input), weights, bias, activation_desc_of(op.output)));
        return CARB_DNNL(dnnl::inner_product_forward::primitive_desc(desc, attr, engine_));
      }
    }
    CARB_CHECK(false, "unknown op kind");
    return {};
  }

  // The generated weights' layout: PyTorch's OIHW (conv), or [out][in] seen as OIHW with a 1x1
  // window (fc), f32.
  Memory::desc plain_weights_desc(const Op& op) const {
    const Layer& source = layer(op.layer);
    const Shape& in = tensor(source.inputs[0]);
    const Shape& out = tensor(source.output);
    const Memory::dim window = op.kind == OpKind::kFullyConnected ? 1 : source.kernel;
    return CARB_DNNL(Memory::desc({out.c, in.c, window, window}, DataType::f32, Tag::oihw));
  }

  // Bytes of one layer's batch norm and bias while its weights are staged (conv: gamma, beta,
  // mean, variance and the folded bias; fc: its bias).
  std::int64_t staged_parameter_bytes(const Op& op) const {
    const LayerParameterSizes layer = layer_parameter_sizes(network_, op.layer);
    std::size_t values = layer.bias;
    if (op.kind == OpKind::kConv) {
      const LayerParameterSizes batch_norm = layer_parameter_sizes(network_, op.batch_norm);
      const std::size_t folded_bias = batch_norm.weight;  // one per output channel
      values = batch_norm.weight + batch_norm.bias + batch_norm.running_mean +
               batch_norm.running_var + folded_bias;
    }
    return static_cast<std::int64_t>(values * sizeof(float));
  }

  // Prepare's high-water mark, known before any weight is loaded: the steady state so far plus
  // one layer's staged parameters, layer by layer, then with the input. The staging area keeps
  // spare pages only while they fit under it.
  std::int64_t plan_peak_bytes() const {
    std::int64_t steady = planned_.activation_bytes + planned_.scratchpad_bytes;
    std::int64_t peak = steady;
    for (std::size_t k = 0; k < plan_.ops.size(); ++k) {
      if (!descriptions_[k].weights_reorder) continue;
      const Op& op = plan_.ops[k];
      const dnnl::primitive_desc& desc = descriptions_[k].primitive;
      steady += desc_bytes(desc.weights_desc()) + desc_bytes(desc.weights_desc(1));
      const auto weights = layer_parameter_sizes(network_, op.layer).weight;
      peak = std::max(peak, steady + static_cast<std::int64_t>(weights * sizeof(float)) +
                                staged_parameter_bytes(op));
    }
    const auto input_values = tensor(network_.input).elements();
    return std::max(peak, steady + input_values * static_cast<std::int64_t>(sizeof(float)));
  }

  PrepareClock clock_;  ///< first: it starts when prepare() does
  Network network_;
  dnnl::engine engine_;
  DataType data_type_;
  Tag blocked_layout_ = blocked_layout();
  ExecutionPlan plan_;
  std::vector<OpDescription> descriptions_;  ///< one per op of plan_
  std::int64_t scratchpad_bytes_needed_ = 0;
  ArenaPlan arena_plan_;
  Conversion input_;
  Conversion output_;
  MemoryUsage planned_;
};

class CpuSession final : public Session, private CpuPlanner {
 public:
  CpuSession(const Network& network, std::uint64_t seed, const dnnl::engine& engine,
             std::shared_ptr<WeightMemory> weight_memory)
      : CpuPlanner(network, engine),
        weight_memory_(std::move(weight_memory)),
        stream_(CARB_DNNL(dnnl::stream(engine, dnnl::stream::flags::in_order))) {
    allocate_buffers();
    std::size_t staging_values = 0;
    for (const Op& op : plan_.ops) {
      if (op.kind == OpKind::kConv || op.kind == OpKind::kFullyConnected) {
        staging_values = std::max(staging_values, layer_parameter_sizes(network_, op.layer).weight);
      }
    }
    Staging staging(staging_values);
    clock_.lap(PrepareClock::kAllocate);
    for (std::size_t k = 0; k < plan_.ops.size(); ++k) {
      bind_kernel(k, descriptions_[k], seed, staging);
    }
    input_.arena_view = arena_view(plan_.input_value, input_.desc.dst_desc());
    output_.arena_view = arena_view(plan_.output_value, output_.desc.src_desc());
    input_.primitive = CARB_DNNL(dnnl::reorder(input_.desc));
    output_.primitive = CARB_DNNL(dnnl::reorder(output_.desc));

    const std::vector<float> input = generate_input(network_, seed);
    memory_.peak_bytes = std::max(memory_.peak_bytes, memory_.steady_bytes() + vector_bytes(input));
    CARB_CHECK(memory_ == planned_, "prepare's memory differs from its plan");
    const SingleThreaded single_threaded;
    set_input(input);
    clock_.lap(PrepareClock::kInput);
  }

  // The weight region goes back to the device, which keeps it for the next session when asked
  // to (Device::keep_memory_between_sessions).
  ~CpuSession() override { weight_memory_->give_back(std::move(weights_)); }
  CpuSession(const CpuSession&) = delete;
  CpuSession& operator=(const CpuSession&) = delete;

  void run() override {
    for (Kernel& kernel : kernels_) CARB_DNNL(kernel.primitive.execute(stream_, kernel.args));
  }

  void sync() override { CARB_DNNL(stream_.wait()); }

  const Network& network() const override { return network_; }
  MemoryUsage memory() const override { return memory_; }
  nlohmann::json details() const override { return {{"prepare_s", clock_.to_json()}}; }

  std::vector<KernelInfo> kernels() const override {
    std::vector<KernelInfo> infos;
    infos.reserve(kernels_.size());
    for (const Kernel& kernel : kernels_) infos.push_back(kernel.info);
    return infos;
  }

  void set_input(std::span<const float> values) override {
    const std::int64_t expected =
        network_.tensors[static_cast<std::size_t>(network_.input)].elements();
    if (static_cast<std::int64_t>(values.size()) != expected) {
      throw Error(ErrorCategory::kInput, "input of " + to_key(network_.config) + " needs " +
                                             std::to_string(expected) + " values, got " +
                                             std::to_string(values.size()));
    }
    // A reorder only reads its source, so handing oneDNN a non-const pointer is safe.
    convert(input_, const_cast<float*>(values.data()), true);
  }

  std::vector<float> read_output() override {
    const Shape& shape = network_.tensors[static_cast<std::size_t>(network_.output)];
    std::vector<float> values(static_cast<std::size_t>(shape.elements()));
    convert(output_, values.data(), false);
    return values;
  }

 private:
  // Phase 2: the arena at its planned size, the shared scratchpad, and one region for every
  // weight and bias (its pages are backed layer by layer as load_weights() writes them).
  void allocate_buffers() {
    std::int64_t weight_region_bytes = 0;
    weight_offsets_.assign(descriptions_.size(), -1);
    for (std::size_t k = 0; k < descriptions_.size(); ++k) {
      if (!descriptions_[k].weights_reorder) continue;
      const dnnl::primitive_desc& desc = descriptions_[k].primitive;
      weight_offsets_[k] = weight_region_bytes;
      weight_region_bytes += round_up(desc_bytes(desc.weights_desc()), kAlignmentBytes) +
                             round_up(desc_bytes(desc.weights_desc(1)), kAlignmentBytes);
    }
    weights_ = weight_memory_->take(weight_region_bytes);
    arena_ = Pages(arena_plan_.arena_bytes);
    populate_pages(arena_.data(), arena_plan_.arena_bytes);
    memory_.activation_bytes = planned_.activation_bytes;
    memory_.scratchpad_bytes = planned_.scratchpad_bytes;
    scratchpad_ = Pages(memory_.scratchpad_bytes);
    populate_pages(scratchpad_.data(), memory_.scratchpad_bytes);
    memory_.peak_bytes = memory_.steady_bytes();
  }

  Memory arena_view(int value, const Memory::desc& desc) const {
    return CARB_DNNL(Memory(
        desc, engine_, arena_.data() + arena_plan_.offsets_bytes[static_cast<std::size_t>(value)]));
  }

  std::unordered_map<int, Memory> scratchpad_arg(const Memory::desc& desc) const {
    if (desc_bytes(desc) == 0) return {};
    return {{DNNL_ARG_SCRATCHPAD, CARB_DNNL(Memory(desc, engine_, scratchpad_.data()))}};
  }

  // Phase 3, per op: weights generated into the staging area, folded and reordered into the
  // kernel's layout (one layer's weights, batch norm and bias are the transient bytes,
  // counted), and the primitive with its arguments.
  void bind_kernel(std::size_t index, const OpDescription& description, std::uint64_t seed,
                   Staging& staging) {
    const Op& op = plan_.ops[index];
    const dnnl::primitive_desc& desc = description.primitive;
    Kernel kernel;
    kernel.primitive = CARB_DNNL(dnnl::primitive(desc));
    kernel.info = {op.name, CARB_DNNL(std::string(desc.impl_info_str()))};
    kernel.args = scratchpad_arg(desc.scratchpad_desc());
    kernel.args.emplace(DNNL_ARG_SRC, arena_view(op.input, CARB_DNNL(desc.src_desc())));
    kernel.args.emplace(DNNL_ARG_DST, arena_view(op.output, CARB_DNNL(desc.dst_desc())));
    clock_.lap(PrepareClock::kKernels);
    if (description.weights_reorder) {
      load_weights(index, op, desc, *description.weights_reorder, seed, staging, kernel);
    }
    kernels_.push_back(std::move(kernel));
  }

  void load_weights(std::size_t index, const Op& op, const dnnl::primitive_desc& desc,
                    const dnnl::reorder::primitive_desc& reorder_desc, std::uint64_t seed,
                    Staging& staging, Kernel& kernel) {
    std::byte* const weights_data = weights_.data() + weight_offsets_[index];
    std::byte* const bias_data =
        weights_data + round_up(desc_bytes(desc.weights_desc()), kAlignmentBytes);
    Memory weights = CARB_DNNL(Memory(desc.weights_desc(), engine_, weights_data));
    Memory bias = CARB_DNNL(Memory(desc.weights_desc(1), engine_, bias_data));
    populate_pages(weights_data, desc_bytes(desc.weights_desc()));
    clock_.lap(PrepareClock::kReorder);
    memory_.weight_bytes += desc_bytes(desc.weights_desc()) + desc_bytes(desc.weights_desc(1));

    const LayerParameterSizes sizes = layer_parameter_sizes(network_, op.layer);
    const std::span<float> plain_values = staging.take(
        sizes.weight, planned_.peak_bytes - memory_.steady_bytes() - staged_parameter_bytes(op));
    std::int64_t staged_bytes = static_cast<std::int64_t>(plain_values.size_bytes());
    std::vector<float> bias_values;
    if (op.kind == OpKind::kConv) {
      generate_layer_parameters(network_, op.layer, seed, {plain_values, {}, {}, {}});
      const LayerParameters batch_norm = generate_layer_parameters(network_, op.batch_norm, seed);
      staged_bytes += vector_bytes(batch_norm.weight) + vector_bytes(batch_norm.bias) +
                      vector_bytes(batch_norm.running_mean) + vector_bytes(batch_norm.running_var);
      clock_.lap(PrepareClock::kGenerate);
      bias_values = fold_batch_norm(plain_values, batch_norm);
      clock_.lap(PrepareClock::kFold);
    } else {
      bias_values.resize(sizes.bias);
      generate_layer_parameters(network_, op.layer, seed, {plain_values, bias_values, {}, {}});
      clock_.lap(PrepareClock::kGenerate);
    }
    staged_bytes += vector_bytes(bias_values);
    memory_.peak_bytes = std::max(memory_.peak_bytes, memory_.steady_bytes() + staged_bytes);

    const Memory plain = CARB_DNNL(Memory(plain_weights_desc(op), engine_, plain_values.data()));
    std::unordered_map<int, Memory> args = scratchpad_arg(reorder_desc.scratchpad_desc());
    args.emplace(DNNL_ARG_FROM, plain);
    args.emplace(DNNL_ARG_TO, weights);
    {
      const SingleThreaded single_threaded;
      CARB_DNNL(dnnl::reorder(reorder_desc).execute(stream_, args));
    }
    CARB_DNNL(stream_.wait());
    CARB_CHECK(desc_bytes(desc.weights_desc(1)) == vector_bytes(bias_values), "bias size");
    std::memcpy(CARB_DNNL(bias.get_data_handle()), bias_values.data(),
                bias_values.size() * sizeof(float));
    clock_.lap(PrepareClock::kReorder);

    kernel.args.emplace(DNNL_ARG_WEIGHTS, std::move(weights));
    kernel.args.emplace(DNNL_ARG_BIAS, std::move(bias));
  }

  // Runs a conversion between a caller's float buffer and the arena, and waits for it (the
  // caller's buffer must outlive it; in-order, so it also waits for every enqueued run()).
  void convert(const Conversion& conversion, float* user_values, bool to_arena) {
    const Memory user = CARB_DNNL(Memory(conversion.user_desc, engine_, user_values));
    std::unordered_map<int, Memory> args = scratchpad_arg(conversion.desc.scratchpad_desc());
    args.emplace(DNNL_ARG_FROM, to_arena ? user : conversion.arena_view);
    args.emplace(DNNL_ARG_TO, to_arena ? conversion.arena_view : user);
    CARB_DNNL(conversion.primitive.execute(stream_, args));
    CARB_DNNL(stream_.wait());
  }

  std::shared_ptr<WeightMemory> weight_memory_;
  dnnl::stream stream_;
  Pages arena_;
  Pages scratchpad_;
  Pages weights_;  ///< every conv's and fc's weights and bias, each at its weight_offsets_ entry
  std::vector<std::int64_t> weight_offsets_;  ///< per op: its weights' offset in weights_, or -1
  std::vector<Kernel> kernels_;
  MemoryUsage memory_;
};

}  // namespace

MemoryUsage plan_cpu_memory(const Network& network, const dnnl::engine& engine) {
  return CpuPlanner(network, engine).planned();
}

std::unique_ptr<Session> make_cpu_session(const Network& network, std::uint64_t seed,
                                          const dnnl::engine& engine,
                                          std::shared_ptr<WeightMemory> weight_memory) {
  return std::make_unique<CpuSession>(network, seed, engine, std::move(weight_memory));
}

}  // namespace carb::cpu
