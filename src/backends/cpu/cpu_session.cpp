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

#include "carb/engine_plan.hpp"
#include "carb/error.hpp"
#include "cpu_backend.hpp"
#include "dnnl_check.hpp"
#include "engine/fold.hpp"
#include "pages.hpp"

namespace carb::cpu {

namespace {

using engine::ArenaPlan;
using engine::BufferRequest;
using engine::ExecutionPlan;
using engine::fold_batch_norm;
using engine::Op;
using engine::op_layers;
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
// input sends the stem conv to oneDNN's reference kernel, far slower), and a fully connected
// layer writes a plain [batch][features] matrix.
Tag blocked_layout() {
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? Tag::nChw16c : Tag::nChw8c;
}

int block_channels(Tag blocked) { return blocked == Tag::nChw16c ? 16 : 8; }

// Why a network's activations cannot be channel-blocked without oneDNN's reference kernels,
// empty when they can: a sub-tensor view of a blocked tensor must start and end on a block
// boundary (a concat's inputs, a slice), oneDNN 2.6's blocked grouped convs need whole
// blocks per group (ResNeXt's 4 channels per group run its reference kernel, far slower), and
// its blocked direct convs wider than 1x1 need a whole block of input channels but for the
// stem's (8 channels, 3x3, ran its reference kernel at 250-4,400 times the nhwc pass: of the
// kernel campaign's 200 chains, 13; docs/benchmarks.md, "carb's kernel model").
// Such a network runs in nhwc throughout: every kernel it needs has an nhwc implementation.
std::string blocking_obstacle(const Network& network, int block) {
  for (const Layer& layer : network.layers) {
    const Shape& in = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
    const Shape& out = network.tensors[static_cast<std::size_t>(layer.output)];
    if (layer.kind == LayerKind::kConcat) {
      int offset = 0;
      for (const int input : layer.inputs) {
        if (offset % block != 0) return layer_name(layer) + ": a concat input off the blocks";
        offset += network.tensors[static_cast<std::size_t>(input)].c;
      }
    } else if (layer.kind == LayerKind::kSlice) {
      const int end = layer.begin + layer.channels;
      if (layer.begin % block != 0 || (end % block != 0 && end != in.c)) {
        return layer_name(layer) + ": a slice off the blocks";
      }
    } else if (layer.kind == LayerKind::kConv && layer.groups == 1 && layer.kernel > 1 &&
               layer.inputs[0] != network.input && in.c < block) {
      return layer_name(layer) + ": a conv of fewer input channels than a block";
    } else if (layer.kind == LayerKind::kConv && layer.groups > 1) {
      const int in_per_group = in.c / layer.groups;
      const int out_per_group = out.c / layer.groups;
      const bool depthwise = in_per_group == 1 && out_per_group == 1;
      if (!depthwise && (in_per_group % block != 0 || out_per_group % block != 0)) {
        return layer_name(layer) + ": a grouped conv of partial blocks";
      }
    }
  }
  return {};
}

// The padding oneDNN's pooling gets after the input: the layer's own, or more where a ceil-mode
// window overhangs it (oneDNN sizes its output by flooring, like a conv).
Memory::dim pooling_padding_after(const Layer& layer, int in_size, int out_size) {
  const int reach = (out_size - 1) * layer.stride + layer.kernel - in_size - layer.padding;
  return std::max(layer.padding_after, reach);
}

// One eltwise step of an activation: oneDNN's algorithm with its alpha and beta.
struct EltwiseStep {
  const char* name;  ///< for the kernel's name when the step runs as a kernel of its own
  dnnl::algorithm algorithm;
  float alpha = 0;
  float beta = 0;
};

// The eltwise steps of an activation layer. oneDNN 2.6 has no hard sigmoid: it is a linear step,
// alpha x + beta, then a clip to [0, 1] (two post-ops where it is fused, two kernels where it
// is not). Its hardswish is PyTorch's, x relu6(x + 3) / 6 (alpha and beta ignored).
std::vector<EltwiseStep> activation_steps(const Layer& layer) {
  switch (layer.kind) {
    case LayerKind::kRelu:
      return {{"relu", dnnl::algorithm::eltwise_relu, 0.0f, 0.0f}};
    case LayerKind::kClip:
      return {{"clip", dnnl::algorithm::eltwise_clip, layer.lower, layer.upper}};
    case LayerKind::kSigmoid:
      return {{"logistic", dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f}};
    case LayerKind::kHardSigmoid:
      return {{"linear", dnnl::algorithm::eltwise_linear, layer.alpha, layer.beta},
              {"clip", dnnl::algorithm::eltwise_clip, 0.0f, 1.0f}};
    case LayerKind::kHardSwish:
      return {{"hardswish", dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f}};
    case LayerKind::kSwish:
      return {{"swish", dnnl::algorithm::eltwise_swish, 1.0f, 0.0f}};
    default:
      break;
  }
  CARB_CHECK(false, layer_name(layer) + " is not an activation");
  return {};
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

// One type for every kind of oneDNN primitive descriptor. dnnl::primitive_desc adds to its base
// only its iterator over implementations (next_impl()), which carb never advances: a primitive
// runs oneDNN's first choice. The base shares the descriptor itself.
dnnl::primitive_desc_base any_kind(const dnnl::primitive_desc_base& descriptor) {
  return descriptor;
}

Memory::desc vector_desc(int values) {
  return CARB_DNNL(Memory::desc({values}, DataType::f32, Tag::a));
}

// Whether a tensor's blocked layout pads its channels.
bool padded(const Memory::desc& desc) { return desc.data.padded_dims[1] != desc.data.dims[1]; }

// A tensor's whole buffer, its channel padding included, as one dense vector: what a
// standalone eltwise step runs on. oneDNN 2.6's jit eltwise refuses padded blocked tensors
// unless the function keeps 0 at 0 (its reference kernel runs instead, many times slower); over
// the vector it runs on the padding too, whose values then are the function of 0, finite, and
// read by no kernel as anything but a product with zero-padded weights.
Memory::desc dense_view(const Memory::desc& desc, DataType data_type) {
  const auto elements =
      static_cast<Memory::dim>(desc.get_size() / Memory::data_type_size(data_type));
  return CARB_DNNL(Memory::desc({elements}, data_type, Tag::a));
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

// A primitive that runs after an op's own, writing its output: an eltwise in place on it, or a
// reorder of one of its inputs into a view of it.
struct Step {
  std::string name;  ///< the kernel's, after the op's in parentheses
  dnnl::primitive_desc_base primitive;
  int input = -1;  ///< the value it reads; -1: the op's output, in place
};

// What prepare() chose for one op: the primitive; for conv and fc, the reorder of the generated
// weights into the primitive's weight layout; steps that run after it (a standalone hard
// sigmoid's clip; an activation oneDNN cannot fuse; a concat's copies of its other inputs); and
// the op's parameter tensors as they lie in the weight region (conv and fc: weights in the
// kernel's layout, then the bias if any; batch norm: mean, variance, scale and shift).
struct OpDescription {
  dnnl::primitive_desc_base primitive;
  std::optional<dnnl::reorder::primitive_desc> weights_reorder;
  std::vector<Step> steps;  ///< in order
  std::vector<Memory::desc> parameters;

  std::int64_t parameter_bytes() const {
    std::int64_t bytes = 0;
    for (const Memory::desc& desc : parameters) bytes += desc_bytes(desc);
    return bytes;
  }
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
    const std::string unsupported = unsupported_reason(network);
    CARB_CHECK(unsupported.empty(), "unsupported network reached the CPU engine: " + unsupported);
    choose_layouts();
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
      planned_.weight_bytes += description.parameter_bytes();
    }
  }

  /// The memory figures prepare() reaches (weights, arena, scratchpad, and its high-water mark).
  const MemoryUsage& planned() const { return planned_; }

 protected:
  const Shape& tensor(int id) const { return network_.tensors[static_cast<std::size_t>(id)]; }
  const Layer& layer(int index) const { return network_.layers[static_cast<std::size_t>(index)]; }
  Memory::desc activation_desc_of(int value) const {
    const std::size_t index = static_cast<std::size_t>(value);
    return activation_desc(plan_.values[index].shape, data_type_, value_layouts_[index]);
  }

  // Every value's layout: the input plain (nchw, or nhwc in an nhwc network), a fully connected
  // layer's output a plain matrix (nchw with 1 x 1 pixels), what a conv, concat or slice writes
  // the network's layout (blocked unless blocking_obstacle() finds an obstacle, then nhwc), and
  // what any other op writes the layout of its first input, which oneDNN's pooling, batch norm,
  // eltwise, binary and shuffle primitives want for their output.
  void choose_layouts() {
    const Tag blocked = blocked_layout();
    layout_obstacle_ = blocking_obstacle(network_, block_channels(blocked));
    network_layout_ = layout_obstacle_.empty() ? blocked : Tag::nhwc;
    value_layouts_.assign(plan_.values.size(), Tag::undef);
    // nchw feeds the blocked stem conv's jit kernel; nhwc the nhwc one (from nchw, oneDNN has
    // only its reference kernel).
    value_layouts_[static_cast<std::size_t>(plan_.input_value)] =
        network_layout_ == Tag::nhwc ? Tag::nhwc : Tag::nchw;
    for (const Op& op : plan_.ops) {
      Tag& layout = value_layouts_[static_cast<std::size_t>(op.output)];
      if (layout != Tag::undef) continue;  // written in place, or a sum into its identity
      switch (op.kind) {
        case OpKind::kConv:
        case OpKind::kConcat:
        case OpKind::kSlice:
          layout = network_layout_;
          break;
        case OpKind::kFullyConnected:
          layout = Tag::nchw;
          break;
        default:
          layout = value_layouts_[static_cast<std::size_t>(op.input)];
          break;
      }
    }
  }

  // Phase 1: every primitive descriptor, so the shared scratchpad size is known before anything
  // is allocated. Also describes the input and output conversions.
  std::vector<OpDescription> describe_primitives() {
    std::vector<OpDescription> descriptions;
    descriptions.reserve(plan_.ops.size());
    for (const Op& op : plan_.ops) {
      OpDescription description = describe(op);
      note_scratchpad(description.primitive.scratchpad_desc());
      for (const Step& step : description.steps) note_scratchpad(step.primitive.scratchpad_desc());
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
    input_.user_desc = plain_float_desc(tensor(network_.input));
    input_.desc = CARB_DNNL(dnnl::reorder::primitive_desc(engine_, input_.user_desc, engine_,
                                                          activation_desc_of(plan_.input_value),
                                                          user_scratchpad()));
    output_.user_desc = plain_float_desc(tensor(network_.output));
    output_.desc =
        CARB_DNNL(dnnl::reorder::primitive_desc(engine_, activation_desc_of(plan_.output_value),
                                                engine_, output_.user_desc, user_scratchpad()));
    note_scratchpad(input_.desc.scratchpad_desc());
    note_scratchpad(output_.desc.scratchpad_desc());
    return descriptions;
  }

  // The caller's side of the input and output: float NCHW, which for a classifier's n x c x 1 x 1
  // output is the [batch][classes] matrix.
  static Memory::desc plain_float_desc(const Shape& shape) {
    return activation_desc(shape, DataType::f32, Tag::nchw);
  }

  void note_scratchpad(const Memory::desc& desc) {
    scratchpad_bytes_needed_ = std::max(scratchpad_bytes_needed_, desc_bytes(desc));
  }

  // The activation `op` ends with as post-ops, after a residual sum when it has one.
  static dnnl::primitive_attr attr_with_post_ops(const Op& op, const Layer* activation) {
    dnnl::primitive_attr attr = user_scratchpad();
    dnnl::post_ops post_ops;
    if (op.sum) CARB_DNNL(post_ops.append_sum(1.0f));
    if (activation != nullptr) {
      for (const EltwiseStep& step : activation_steps(*activation)) {
        CARB_DNNL(post_ops.append_eltwise(1.0f, step.algorithm, step.alpha, step.beta));
      }
    }
    CARB_DNNL(attr.set_post_ops(post_ops));
    return attr;
  }

  OpDescription describe(const Op& op) const {
    const Layer& source = layer(op.layer);
    const Layer* activation = op.activation >= 0 ? &layer(op.activation) : nullptr;
    const Memory::desc src = activation_desc_of(op.input);
    const Memory::desc dst = activation_desc_of(op.output);
    const dnnl::primitive_attr attr = user_scratchpad();
    const auto prop = dnnl::prop_kind::forward_inference;
    OpDescription description;
    switch (op.kind) {
      case OpKind::kConv:
        description.primitive = describe_conv(op, attr_with_post_ops(op, activation));
        break;
      case OpKind::kFullyConnected:
        description.primitive = describe_fully_connected(op, attr_with_post_ops(op, activation));
        break;
      case OpKind::kMaxPool:
      case OpKind::kAvgPool:
      case OpKind::kGlobalAvgPool:
        description.primitive = describe_pooling(op, src, dst, attr);
        break;
      case OpKind::kBatchNorm: {
        // oneDNN's batch norm with the running statistics and the affine scale and shift; a
        // following ReLU is its fuse_norm_relu flag (it takes no other post-op).
        auto flags = dnnl::normalization_flags::use_global_stats |
                     dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
        if (op.relu) flags |= dnnl::normalization_flags::fuse_norm_relu;
        CARB_CHECK(activation == nullptr || op.relu, "batch norm fused with a non-ReLU");
        const dnnl::batch_normalization_forward::desc desc =
            CARB_DNNL(dnnl::batch_normalization_forward::desc(
                prop, src, static_cast<float>(kBatchNormEpsilon), flags));
        description.primitive = any_kind(
            CARB_DNNL(dnnl::batch_normalization_forward::primitive_desc(desc, attr, engine_)));
        const Memory::desc per_channel = vector_desc(tensor(source.output).c);
        description.parameters.assign(4, per_channel);  // mean, variance, scale, shift
        break;
      }
      case OpKind::kEltwise: {
        const std::vector<EltwiseStep> steps = activation_steps(source);
        description.primitive = describe_eltwise(steps.front(), dense_view(src, data_type_), attr);
        add_steps(description, {steps.begin() + 1, steps.end()}, dst);
        break;
      }
      case OpKind::kAdd:
      case OpKind::kMul: {
        // The second operand may be n x c x 1 x 1 (a squeeze-excite scale): oneDNN broadcasts
        // its unit dimensions. oneDNN 2.6's jit binary computes wrong values where it writes
        // over its first operand with channel padding and an eltwise post-op: the activation
        // then runs as steps of its own.
        const dnnl::binary::desc desc = CARB_DNNL(dnnl::binary::desc(
            op.kind == OpKind::kAdd ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul,
            src, activation_desc_of(op.other_inputs.front()), dst));
        const bool fuse = activation == nullptr || op.output != op.input || !padded(dst);
        description.primitive = any_kind(CARB_DNNL(dnnl::binary::primitive_desc(
            desc, attr_with_post_ops(op, fuse ? activation : nullptr), engine_)));
        if (!fuse) add_steps(description, activation_steps(*activation), dst);
        break;
      }
      case OpKind::kConcat: {
        if (tensor(source.output).n == 1 && network_layout_ != Tag::nhwc) {
          describe_concat_copies(op, dst, attr, description);
          break;
        }
        std::vector<Memory::desc> inputs = {src};
        for (const int other : op.other_inputs) inputs.push_back(activation_desc_of(other));
        description.primitive =
            any_kind(CARB_DNNL(dnnl::concat::primitive_desc(dst, 1, inputs, engine_, attr)));
        break;
      }
      case OpKind::kChannelShuffle:
        description.primitive = describe_shuffle(op, src, dst, attr);
        break;
      case OpKind::kSlice: {
        // A copy of the input's sub-tensor view (on block boundaries where it is blocked).
        const Shape& out = tensor(source.output);
        const Memory::desc view =
            CARB_DNNL(src.submemory_desc({out.n, out.c, out.h, out.w}, {0, source.begin, 0, 0}));
        description.primitive =
            any_kind(CARB_DNNL(dnnl::reorder::primitive_desc(engine_, view, engine_, dst, attr)));
        break;
      }
    }
    if (op.kind == OpKind::kConv || op.kind == OpKind::kFullyConnected) {
      description.parameters.push_back(description.primitive.weights_desc());
      const Memory::desc bias = description.primitive.weights_desc(1);
      if (desc_bytes(bias) > 0) description.parameters.push_back(bias);
    }
    return description;
  }

  dnnl::primitive_desc_base describe_conv(const Op& op, const dnnl::primitive_attr& attr) const {
    const Layer& conv = layer(op.layer);
    const Shape& in = tensor(conv.inputs[0]);
    const Shape& out = tensor(conv.output);
    const Memory::dim groups = conv.groups;
    const Memory::dim kernel = conv.kernel;
    const Memory::dims weight_dims =
        groups == 1 ? Memory::dims{out.c, in.c, kernel, kernel}
                    : Memory::dims{groups, out.c / groups, in.c / groups, kernel, kernel};
    const Memory::desc weights = CARB_DNNL(Memory::desc(weight_dims, data_type_, Tag::any));
    const Memory::dim stride = conv.stride;
    const Memory::dim dilation = conv.dilation - 1;  // oneDNN counts the gaps
    const Memory::dim padding = conv.padding;
    const Memory::dim padding_after = conv.padding_after;
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto algorithm = dnnl::algorithm::convolution_direct;
    const Memory::desc src = activation_desc_of(op.input);
    const Memory::desc dst = activation_desc_of(op.output);
    // oneDNN's shape check floors like PyTorch's output size does.
    if (op.batch_norm >= 0 || conv.bias) {
      // Bias stays f32 in bf16 too: oneDNN accepts it, and the folded shift keeps its bits.
      const Memory::desc bias = vector_desc(out.c);
      return any_kind(CARB_DNNL(dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(prop, algorithm, src, weights, bias, dst,
                                          {stride, stride}, {dilation, dilation},
                                          {padding, padding}, {padding_after, padding_after}),
          attr, engine_)));
    }
    return any_kind(CARB_DNNL(dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(prop, algorithm, src, weights, dst, {stride, stride},
                                        {dilation, dilation}, {padding, padding},
                                        {padding_after, padding_after}),
        attr, engine_)));
  }

  // Inner product over the input's C x H x W values (blocked or not); weights o x c x h x w.
  dnnl::primitive_desc_base describe_fully_connected(const Op& op,
                                                     const dnnl::primitive_attr& attr) const {
    const Layer& fc = layer(op.layer);
    const Shape& in = tensor(fc.inputs[0]);
    const Shape& out = tensor(fc.output);
    const Memory::desc weights =
        CARB_DNNL(Memory::desc({out.c, in.c, in.h, in.w}, data_type_, Tag::any));
    const Memory::desc src = activation_desc_of(op.input);
    const Memory::desc dst = CARB_DNNL(activation_desc_of(op.output).reshape({out.n, out.c}));
    const auto prop = dnnl::prop_kind::forward_inference;
    if (fc.bias) {
      return any_kind(CARB_DNNL(dnnl::inner_product_forward::primitive_desc(
          dnnl::inner_product_forward::desc(prop, src, weights, vector_desc(out.c), dst), attr,
          engine_)));
    }
    return any_kind(CARB_DNNL(dnnl::inner_product_forward::primitive_desc(
        dnnl::inner_product_forward::desc(prop, src, weights, dst), attr, engine_)));
  }

  dnnl::primitive_desc_base describe_pooling(const Op& op, const Memory::desc& src,
                                             const Memory::desc& dst,
                                             const dnnl::primitive_attr& attr) const {
    const Layer& pool = layer(op.layer);
    const Shape& in = tensor(pool.inputs[0]);
    const Shape& out = tensor(pool.output);
    dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
    Memory::dims kernel = {pool.kernel, pool.kernel};
    Memory::dims padding = {pool.padding, pool.padding};
    Memory::dims padding_after = {pooling_padding_after(pool, in.h, out.h),
                                  pooling_padding_after(pool, in.w, out.w)};
    if (op.kind == OpKind::kGlobalAvgPool) {
      algorithm = dnnl::algorithm::pooling_avg_exclude_padding;
      kernel = {in.h, in.w};
      padding = padding_after = {0, 0};
    } else if (op.kind == OpKind::kAvgPool) {
      // oneDNN's include-padding divides by the whole window, PyTorch's by the part inside the
      // padded input: they agree unless a ceil-mode window overhangs the padding, and then
      // (unsupported_reason() lets through) only without padding, where PyTorch's divisor is
      // the exclude-padding one.
      const bool overhang =
          padding_after[0] > pool.padding_after || padding_after[1] > pool.padding_after;
      algorithm = pool.count_include_pad && !overhang
                      ? dnnl::algorithm::pooling_avg_include_padding
                      : dnnl::algorithm::pooling_avg_exclude_padding;
    }
    const Memory::dim stride = pool.stride;
    const dnnl::pooling_forward::desc desc = CARB_DNNL(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src, dst,
                                    {stride, stride}, kernel, padding, padding_after));
    return any_kind(CARB_DNNL(dnnl::pooling_forward::primitive_desc(desc, attr, engine_)));
  }

  // A concat of blocked tensors of batch 1 as one reorder per input into its channels' view of
  // the output (on block boundaries: blocking_obstacle()). There the channels are the layout's
  // outermost axis, and oneDNN 2.6's concat copies them one element per call of a
  // std::function, 2-10 times slower than its reorders (docs/benchmarks.md, "Concats at batch 1").
  void describe_concat_copies(const Op& op, const Memory::desc& dst,
                              const dnnl::primitive_attr& attr, OpDescription& description) const {
    std::vector<int> inputs = {op.input};
    inputs.insert(inputs.end(), op.other_inputs.begin(), op.other_inputs.end());
    Memory::dim offset = 0;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const Memory::desc from = activation_desc_of(inputs[k]);
      const Memory::desc view = CARB_DNNL(dst.submemory_desc(from.dims(), {0, offset, 0, 0}));
      offset += from.dims()[1];
      dnnl::primitive_desc_base copy =
          any_kind(CARB_DNNL(dnnl::reorder::primitive_desc(engine_, from, engine_, view, attr)));
      if (k == 0) {
        description.primitive = std::move(copy);
      } else {
        description.steps.push_back({"copy " + std::to_string(k + 1), std::move(copy), inputs[k]});
      }
    }
  }

  // Appends eltwise steps running in place on the output `dst` (as one dense vector).
  void add_steps(OpDescription& description, std::span<const EltwiseStep> steps,
                 const Memory::desc& dst) const {
    for (const EltwiseStep& step : steps) {
      description.steps.push_back(
          {step.name, describe_eltwise(step, dense_view(dst, data_type_), user_scratchpad())});
    }
  }

  dnnl::primitive_desc_base describe_eltwise(const EltwiseStep& step, const Memory::desc& data,
                                             const dnnl::primitive_attr& attr) const {
    const dnnl::eltwise_forward::desc desc = CARB_DNNL(dnnl::eltwise_forward::desc(
        dnnl::prop_kind::forward_inference, step.algorithm, data, step.alpha, step.beta));
    return any_kind(CARB_DNNL(dnnl::eltwise_forward::primitive_desc(desc, attr, engine_)));
  }

  // PyTorch's channel shuffle views the channels as groups x (C / groups) and transposes them:
  // output channel i * groups + j is input channel j * (C / groups) + i. Blocked, that is
  // oneDNN's shuffle with group size C / groups (its formula swaps the roles). Plain (nhwc or
  // nchw), it is a reorder between two strided 5-D views of the same channels, which oneDNN's
  // jit reorder runs, where its shuffle has only a reference kernel.
  dnnl::primitive_desc_base describe_shuffle(const Op& op, const Memory::desc& src,
                                             const Memory::desc& dst,
                                             const dnnl::primitive_attr& attr) const {
    const Layer& shuffle = layer(op.layer);
    const Shape& shape = tensor(shuffle.output);
    const Memory::dim groups = shuffle.groups;
    const Memory::dim per_group = shape.c / groups;
    if (value_layouts_[static_cast<std::size_t>(op.input)] == blocked_layout()) {
      const dnnl::shuffle_forward::desc desc = CARB_DNNL(dnnl::shuffle_forward::desc(
          dnnl::prop_kind::forward_inference, src, 1, static_cast<int>(per_group)));
      return any_kind(CARB_DNNL(dnnl::shuffle_forward::primitive_desc(desc, engine_, attr)));
    }
    const auto strides_of = [](const Memory::desc& desc) {
      const dnnl_dims_t& strides = desc.data.format_desc.blocking.strides;
      return std::array<Memory::dim, 4>{strides[0], strides[1], strides[2], strides[3]};
    };
    // Strides of n, c, h and w; (n, groups, per_group, h, w) views of the same channels.
    const std::array<Memory::dim, 4> in = strides_of(src);
    const std::array<Memory::dim, 4> out = strides_of(dst);
    const Memory::dims dims = {shape.n, groups, per_group, shape.h, shape.w};
    const Memory::dims from_strides = {in[0], per_group * in[1], in[1], in[2], in[3]};
    const Memory::dims to_strides = {out[0], out[1], groups * out[1], out[2], out[3]};
    const Memory::desc from = CARB_DNNL(Memory::desc(dims, data_type_, from_strides));
    const Memory::desc to = CARB_DNNL(Memory::desc(dims, data_type_, to_strides));
    return any_kind(CARB_DNNL(dnnl::reorder::primitive_desc(engine_, from, engine_, to, attr)));
  }

  // The generated weights' layout: PyTorch's OIHW (conv; GOIHW for a grouped conv, the same
  // bytes), or [out][C x H x W] seen as OIHW (fc), f32.
  Memory::desc plain_weights_desc(const Op& op) const {
    const Layer& source = layer(op.layer);
    const Shape& in = tensor(source.inputs[0]);
    const Shape& out = tensor(source.output);
    if (op.kind == OpKind::kFullyConnected) {
      return CARB_DNNL(Memory::desc({out.c, in.c, in.h, in.w}, DataType::f32, Tag::oihw));
    }
    const Memory::dim window = source.kernel;
    const Memory::dim groups = source.groups;
    if (groups == 1) {
      return CARB_DNNL(Memory::desc({out.c, in.c, window, window}, DataType::f32, Tag::oihw));
    }
    return CARB_DNNL(Memory::desc({groups, out.c / groups, in.c / groups, window, window},
                                  DataType::f32, Tag::goihw));
  }

  // Bytes of one conv's or fc's parameters other than its weights while its weights are staged:
  // a folded batch norm's gamma, beta, mean and variance with the folded bias, and the layer's
  // own bias.
  std::int64_t staged_parameter_bytes(const Op& op) const {
    std::size_t values = layer_parameter_sizes(network_, op.layer).bias;
    if (op.batch_norm >= 0) {
      const LayerParameterSizes batch_norm = layer_parameter_sizes(network_, op.batch_norm);
      const std::size_t folded_bias = batch_norm.weight;  // one per output channel
      values += batch_norm.weight + batch_norm.bias + batch_norm.running_mean +
                batch_norm.running_var + folded_bias;
    }
    return static_cast<std::int64_t>(values * sizeof(float));
  }

  // Prepare's high-water mark, known before any weight is loaded: the steady state so far plus
  // one layer's staged parameters, layer by layer, then with the input. The staging area keeps
  // spare pages only while they fit under it. A batch norm's parameters are generated straight
  // into the weight region: nothing staged.
  std::int64_t plan_peak_bytes() const {
    std::int64_t steady = planned_.activation_bytes + planned_.scratchpad_bytes;
    std::int64_t peak = steady;
    for (std::size_t k = 0; k < plan_.ops.size(); ++k) {
      steady += descriptions_[k].parameter_bytes();
      if (!descriptions_[k].weights_reorder) continue;
      const Op& op = plan_.ops[k];
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
  ExecutionPlan plan_;
  Tag network_layout_ = Tag::undef;          ///< of conv, concat and slice outputs
  std::string layout_obstacle_;              ///< why it is not blocked; empty when it is
  std::vector<Tag> value_layouts_;           ///< one per value of plan_
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
    for (std::size_t k = 0; k < plan_.ops.size(); ++k) {
      if (descriptions_[k].weights_reorder) {
        staging_values =
            std::max(staging_values, layer_parameter_sizes(network_, plan_.ops[k].layer).weight);
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

  bool run_kernel(std::size_t index) override {
    CARB_CHECK(index < kernels_.size(), "a kernel of the session");
    Kernel& kernel = kernels_[index];
    CARB_DNNL(kernel.primitive.execute(stream_, kernel.args));
    CARB_DNNL(stream_.wait());
    return true;
  }

  const Network& network() const override { return network_; }
  MemoryUsage memory() const override { return memory_; }
  nlohmann::json details() const override {
    nlohmann::json details = {{"prepare_s", clock_.to_json()},
                              {"layout", layout_name(network_layout_)}};
    if (!layout_obstacle_.empty()) details["layout_reason"] = layout_obstacle_;
    return details;
  }

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
  static std::string layout_name(Tag layout) {
    switch (layout) {
      case Tag::nChw16c:
        return "nChw16c";
      case Tag::nChw8c:
        return "nChw8c";
      case Tag::nhwc:
        return "nhwc";
      default:
        return "?";
    }
  }

  // Phase 2: the arena at its planned size, the shared scratchpad, and one region for every
  // parameter tensor (its pages are backed layer by layer as load_parameters() writes them).
  void allocate_buffers() {
    std::int64_t weight_region_bytes = 0;
    parameter_offsets_.assign(descriptions_.size(), -1);
    for (std::size_t k = 0; k < descriptions_.size(); ++k) {
      if (descriptions_[k].parameters.empty()) continue;
      parameter_offsets_[k] = weight_region_bytes;
      for (const Memory::desc& desc : descriptions_[k].parameters) {
        weight_region_bytes += round_up(desc_bytes(desc), kAlignmentBytes);
      }
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

  // Phase 3, per op: the primitive with its arguments, and its parameters loaded into the
  // weight region (conv and fc: generated into the staging area, folded and reordered into the
  // kernel's layout, one layer's weights, batch norm and bias being the transient bytes,
  // counted; batch norm: generated in place).
  void bind_kernel(std::size_t index, const OpDescription& description, std::uint64_t seed,
                   Staging& staging) {
    const Op& op = plan_.ops[index];
    const dnnl::primitive_desc_base& desc = description.primitive;
    Kernel kernel;
    kernel.primitive = CARB_DNNL(dnnl::primitive(desc.get()));
    kernel.info = {op.name, CARB_DNNL(std::string(desc.impl_info_str())), op_layers(op)};
    kernel.args = scratchpad_arg(desc.scratchpad_desc());
    // Every primitive here names its inputs SRC_0, SRC_1, ... (reorders too: FROM is SRC_0),
    // but a concat, whose inputs are MULTIPLE_SRC + i; a reorder reads one (a concat's copies:
    // the others are its steps').
    const dnnl::primitive::kind kind = CARB_DNNL(desc.get_kind());
    const int first_input =
        kind == dnnl::primitive::kind::concat ? DNNL_ARG_MULTIPLE_SRC : DNNL_ARG_SRC_0;
    kernel.args.emplace(first_input, arena_view(op.input, CARB_DNNL(desc.src_desc(0))));
    const std::size_t other_inputs =
        kind == dnnl::primitive::kind::reorder ? 0 : op.other_inputs.size();
    for (std::size_t k = 0; k < other_inputs; ++k) {
      const int i = static_cast<int>(k) + 1;
      kernel.args.emplace(first_input + i,
                          arena_view(op.other_inputs[k], CARB_DNNL(desc.src_desc(i))));
    }
    kernel.args.emplace(DNNL_ARG_DST, arena_view(op.output, CARB_DNNL(desc.dst_desc())));
    clock_.lap(PrepareClock::kKernels);
    if (description.weights_reorder) {
      load_weights(index, op, description, seed, staging, kernel);
    } else if (op.kind == OpKind::kBatchNorm) {
      load_batch_norm(index, op, description, seed, kernel);
    }
    kernels_.push_back(std::move(kernel));
    for (const Step& named_step : description.steps) {
      const dnnl::primitive_desc_base& step_desc = named_step.primitive;
      Kernel step;
      step.primitive = CARB_DNNL(dnnl::primitive(step_desc.get()));
      step.info = {op.name + "(" + named_step.name + ")",
                   CARB_DNNL(std::string(step_desc.impl_info_str())),
                   {op.activation >= 0 ? op.activation : op.layer}};
      step.args = scratchpad_arg(step_desc.scratchpad_desc());
      const Memory output = arena_view(op.output, CARB_DNNL(step_desc.dst_desc()));
      step.args.emplace(DNNL_ARG_SRC,
                        named_step.input < 0
                            ? output
                            : arena_view(named_step.input, CARB_DNNL(step_desc.src_desc())));
      step.args.emplace(DNNL_ARG_DST, output);
      kernels_.push_back(std::move(step));
      clock_.lap(PrepareClock::kKernels);
    }
  }

  // The memory of op `index`'s parameter tensors in the weight region, in the order of its
  // description's parameters; counts their bytes.
  std::vector<Memory> parameter_memory(std::size_t index, const OpDescription& description) {
    std::vector<Memory> memories;
    std::byte* data = weights_.data() + parameter_offsets_[index];
    for (const Memory::desc& desc : description.parameters) {
      memories.push_back(CARB_DNNL(Memory(desc, engine_, data)));
      data += round_up(desc_bytes(desc), kAlignmentBytes);
    }
    memory_.weight_bytes += description.parameter_bytes();
    return memories;
  }

  void load_batch_norm(std::size_t index, const Op& op, const OpDescription& description,
                       std::uint64_t seed, Kernel& kernel) {
    const std::vector<Memory> memories = parameter_memory(index, description);
    const auto values = [&](std::size_t k) {
      return std::span<float>(static_cast<float*>(CARB_DNNL(memories[k].get_data_handle())),
                              static_cast<std::size_t>(tensor(layer(op.layer).output).c));
    };
    // LayerParameters' order: gamma (scale), beta (shift), mean, variance.
    generate_layer_parameters(network_, op.layer, seed,
                              {values(2), values(3), values(0), values(1)});
    clock_.lap(PrepareClock::kGenerate);
    kernel.args.emplace(DNNL_ARG_MEAN, memories[0]);
    kernel.args.emplace(DNNL_ARG_VARIANCE, memories[1]);
    kernel.args.emplace(DNNL_ARG_SCALE, memories[2]);
    kernel.args.emplace(DNNL_ARG_SHIFT, memories[3]);
  }

  void load_weights(std::size_t index, const Op& op, const OpDescription& description,
                    std::uint64_t seed, Staging& staging, Kernel& kernel) {
    const std::vector<Memory> memories = parameter_memory(index, description);
    const Memory& weights = memories.front();
    populate_pages(CARB_DNNL(weights.get_data_handle()), desc_bytes(description.parameters[0]));
    clock_.lap(PrepareClock::kReorder);

    const LayerParameterSizes sizes = layer_parameter_sizes(network_, op.layer);
    const std::span<float> plain_values = staging.take(
        sizes.weight, planned_.peak_bytes - memory_.steady_bytes() - staged_parameter_bytes(op));
    std::int64_t staged_bytes = static_cast<std::int64_t>(plain_values.size_bytes());
    std::vector<float> bias_values(sizes.bias);
    generate_layer_parameters(network_, op.layer, seed, {plain_values, bias_values, {}, {}});
    staged_bytes += vector_bytes(bias_values);
    if (op.batch_norm >= 0) {
      const LayerParameters batch_norm = generate_layer_parameters(network_, op.batch_norm, seed);
      staged_bytes += vector_bytes(batch_norm.weight) + vector_bytes(batch_norm.bias) +
                      vector_bytes(batch_norm.running_mean) + vector_bytes(batch_norm.running_var);
      clock_.lap(PrepareClock::kGenerate);
      std::vector<float> folded_bias = fold_batch_norm(plain_values, batch_norm, bias_values);
      staged_bytes += vector_bytes(folded_bias);
      bias_values = std::move(folded_bias);
      clock_.lap(PrepareClock::kFold);
    } else {
      clock_.lap(PrepareClock::kGenerate);
    }
    memory_.peak_bytes = std::max(memory_.peak_bytes, memory_.steady_bytes() + staged_bytes);

    const Memory plain = CARB_DNNL(Memory(plain_weights_desc(op), engine_, plain_values.data()));
    std::unordered_map<int, Memory> args =
        scratchpad_arg(description.weights_reorder->scratchpad_desc());
    args.emplace(DNNL_ARG_FROM, plain);
    args.emplace(DNNL_ARG_TO, weights);
    {
      const SingleThreaded single_threaded;
      CARB_DNNL(dnnl::reorder(*description.weights_reorder).execute(stream_, args));
    }
    CARB_DNNL(stream_.wait());
    kernel.args.emplace(DNNL_ARG_WEIGHTS, weights);
    if (memories.size() > 1) {
      const Memory& bias = memories[1];
      CARB_CHECK(desc_bytes(description.parameters[1]) == vector_bytes(bias_values), "bias size");
      std::memcpy(CARB_DNNL(bias.get_data_handle()), bias_values.data(),
                  bias_values.size() * sizeof(float));
      kernel.args.emplace(DNNL_ARG_BIAS, bias);
    }
    clock_.lap(PrepareClock::kReorder);
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
  Pages weights_;  ///< every op's parameters, each op's at its parameter_offsets_ entry
  std::vector<std::int64_t> parameter_offsets_;  ///< per op: its parameters' offset, or -1
  std::vector<Kernel> kernels_;
  MemoryUsage memory_;
};

}  // namespace

std::string unsupported_reason(const Network& network) {
  for (const Layer& layer : network.layers) {
    if (layer.kind != LayerKind::kAvgPool || !layer.count_include_pad) continue;
    const Shape& in = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
    const Shape& out = network.tensors[static_cast<std::size_t>(layer.output)];
    const bool overhang = pooling_padding_after(layer, in.h, out.h) > layer.padding_after ||
                          pooling_padding_after(layer, in.w, out.w) > layer.padding_after;
    if (overhang && layer.padding + layer.padding_after > 0) {
      return "layer " + layer_name(layer) +
             " (avg_pool): a ceil-mode window overhangs the padding, which it counts: oneDNN "
             "2.6 would divide by the whole window, PyTorch by the part inside the padding";
    }
  }
  return {};
}

MemoryUsage plan_cpu_memory(const Network& network, const dnnl::engine& engine) {
  return CpuPlanner(network, engine).planned();
}

std::unique_ptr<Session> make_cpu_session(const Network& network, std::uint64_t seed,
                                          const dnnl::engine& engine,
                                          std::shared_ptr<WeightMemory> weight_memory) {
  return std::make_unique<CpuSession>(network, seed, engine, std::move(weight_memory));
}

}  // namespace carb::cpu
