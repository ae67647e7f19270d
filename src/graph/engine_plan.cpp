// Fusion of the IR into kernels, value lifetimes, and the arena placement of activation buffers.
#include "carb/engine_plan.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "carb/error.hpp"

namespace carb::engine {

namespace {

// What a kernel's name calls a fused layer: a ResNet layer's role ("bn1", "relu", "add"), else
// its kind ("clip", "batch_norm").
std::string part_name(const Layer& layer) {
  return *layer.role != '\0' ? std::string(layer.role) : std::string(to_string(layer.kind));
}

class Planner {
 public:
  Planner(const Network& network, ResidualMode mode, OpNames names)
      : network_(network),
        mode_(mode),
        named_(names == OpNames::kNamed),
        readers_(network.tensors.size()),
        value_of_(network.tensors.size(), -1),
        covered_(network.layers.size(), false),
        deferred_to_(network.layers.size(), -1) {
    for (std::size_t i = 0; i < network.layers.size(); ++i) {
      for (const int input : network.layers[i].inputs) {
        readers_[tensor_index(input)].push_back(static_cast<int>(i));
      }
    }
  }

  ExecutionPlan plan() {
    plan_.input_value = new_value(network_.input);
    for (std::size_t i = 0; i < network_.layers.size(); ++i) {
      const int index = static_cast<int>(i);
      if (auto found = pending_sums_.find(index); found != pending_sums_.end()) {
        PendingSum pending = std::move(found->second);
        pending_sums_.erase(found);
        emit_sum(index, pending);
      } else if (!covered_[i]) {
        plan_layer(index);
      }
    }
    plan_.output_value = value_of_[tensor_index(network_.output)];
    CARB_CHECK(plan_.output_value >= 0, "the network output is never written");
    set_lifetimes();
    return std::move(plan_);
  }

 private:
  // A conv whose result is added to an identity: it runs at the add, writing the identity's value.
  struct PendingSum {
    Op op;
    Op plain;  ///< the conv (+ batch norm) alone, should the add have to run on its own
    int plain_result = -1;  ///< tensor `plain` computes
    int identity = -1;      ///< tensor
    int result = -1;        ///< tensor holding the block's output (the add's or its activation's)
  };

  static std::size_t tensor_index(int tensor) { return static_cast<std::size_t>(tensor); }
  const Layer& layer_at(int index) const {
    return network_.layers[static_cast<std::size_t>(index)];
  }

  // The only layer reading `tensor`, if exactly one does and the tensor is not the network's
  // output (which must be kept, so nothing can be fused past it).
  std::optional<int> sole_reader(int tensor) const {
    const std::vector<int>& readers = readers_[tensor_index(tensor)];
    if (readers.size() != 1 || tensor == network_.output) return std::nullopt;
    return readers.front();
  }
  std::optional<int> sole_reader_of_kind(int tensor, LayerKind kind) const {
    const std::optional<int> reader = sole_reader(tensor);
    if (reader && layer_at(*reader).kind == kind) return reader;
    return std::nullopt;
  }
  // The activation that is the only reader of `tensor`, which a post-op can apply.
  std::optional<int> sole_activation(int tensor) const {
    const std::optional<int> reader = sole_reader(tensor);
    if (reader && is_activation(layer_at(*reader).kind)) return reader;
    return std::nullopt;
  }

  // When the IR's layer `reader` reads its inputs: where the op covering it runs (a conv fused
  // with a later add runs at the add).
  int read_time(int reader) const {
    const int deferred = deferred_to_[static_cast<std::size_t>(reader)];
    return deferred >= 0 ? deferred : reader;
  }

  // Whether layer `writer`'s op, running at IR position `time`, may write over `tensor`: no other
  // reader runs later, and it is neither the network input (the next run() reads it again) nor
  // its output.
  bool may_overwrite(int tensor, int time, int writer) const {
    if (tensor == network_.input || tensor == network_.output) return false;
    const std::vector<int>& readers = readers_[tensor_index(tensor)];
    return std::all_of(readers.begin(), readers.end(),
                       [&](int reader) { return reader == writer || read_time(reader) <= time; });
  }

  int new_value(int tensor) {
    plan_.values.push_back(Value{network_.tensors[tensor_index(tensor)], -1, -1, tensor});
    const int value = static_cast<int>(plan_.values.size()) - 1;
    value_of_[tensor_index(tensor)] = value;
    return value;
  }

  // Appends `op`, writing `result` into a fresh value, or over its input when `in_place`.
  void emit(Op op, int result, bool in_place = false) {
    if (in_place) {
      op.output = op.input;
      value_of_[tensor_index(result)] = op.input;
    } else {
      op.output = new_value(result);
    }
    plan_.ops.push_back(std::move(op));
  }

  // Names `layer` in the name of the op it is fused into, when the plan names its ops.
  void append_name(Op& op, const Layer& layer) const {
    if (named_) op.name += "+" + part_name(layer);
  }

  void fuse_activation(Op& op, int activation, int& result) {
    covered_[static_cast<std::size_t>(activation)] = true;
    op.activation = activation;
    op.relu = layer_at(activation).kind == LayerKind::kRelu;
    append_name(op, layer_at(activation));
    result = layer_at(activation).output;
  }

  void plan_layer(int index) {
    const Layer& layer = layer_at(index);
    Op op;
    op.layer = index;
    op.input = value_of_[tensor_index(layer.inputs[0])];
    for (std::size_t k = 1; k < layer.inputs.size(); ++k) {
      op.other_inputs.push_back(value_of_[tensor_index(layer.inputs[k])]);
    }
    if (named_) {
      op.name = layer_name(layer);
      if (op.name.empty())
        op.name = std::string(to_string(layer.kind)) + "#" + std::to_string(index);
    }
    if (layer.kind == LayerKind::kConv) {
      plan_conv(std::move(op));
      return;
    }
    int result = layer.output;
    // Batch norm, activations, add and mul write over their first operand where they may.
    bool elementwise = true;
    std::optional<int> activation;  // fused as the op's last step
    if (is_activation(layer.kind)) {
      op.kind = OpKind::kEltwise;
    } else if (layer.kind == LayerKind::kBatchNorm) {
      op.kind = OpKind::kBatchNorm;
      activation = sole_reader_of_kind(result, LayerKind::kRelu);  // all a batch norm fuses
    } else if (layer.kind == LayerKind::kAdd || layer.kind == LayerKind::kMul) {
      op.kind = layer.kind == LayerKind::kAdd ? OpKind::kAdd : OpKind::kMul;
      activation = sole_activation(result);
    } else {
      elementwise = false;
      op.kind = data_op_kind(layer.kind);
      if (op.kind == OpKind::kFullyConnected) activation = sole_activation(result);
    }
    if (activation) fuse_activation(op, *activation, result);
    emit(std::move(op), result, elementwise && may_overwrite(layer.inputs[0], index, index));
  }

  // The op kind of a layer that writes a fresh value: pools, fc, concat, shuffle, slice.
  static OpKind data_op_kind(LayerKind kind) {
    switch (kind) {
      case LayerKind::kMaxPool:
        return OpKind::kMaxPool;
      case LayerKind::kAvgPool:
        return OpKind::kAvgPool;
      case LayerKind::kGlobalAvgPool:
        return OpKind::kGlobalAvgPool;
      case LayerKind::kFullyConnected:
        return OpKind::kFullyConnected;
      case LayerKind::kConcat:
        return OpKind::kConcat;
      case LayerKind::kChannelShuffle:
        return OpKind::kChannelShuffle;
      case LayerKind::kSlice:
        return OpKind::kSlice;
      default:
        break;
    }
    CARB_CHECK(false, "layer kind " + std::string(to_string(kind)) + " has no op of its own");
    return OpKind::kConv;
  }

  // The add a conv's result (after its batch norm) can be summed into: the result's only reader,
  // whose other operand (the identity) may be overwritten there as far as the IR's order tells
  // (emit_sum checks again, knowing which convs wait for later adds). The identity must not be
  // the conv's own input, which the conv reads while the sum writes the identity.
  std::optional<int> summing_add(int result, int conv_input) const {
    const auto add = sole_reader_of_kind(result, LayerKind::kAdd);
    if (!add || pending_sums_.contains(*add)) return std::nullopt;
    const Layer& layer = layer_at(*add);
    const int identity = layer.inputs[0] == result ? layer.inputs[1] : layer.inputs[0];
    if (identity == result || identity == conv_input) return std::nullopt;
    const std::vector<int>& readers = readers_[tensor_index(identity)];
    const bool later_reader =
        std::any_of(readers.begin(), readers.end(), [&](int reader) { return reader > *add; });
    if (identity == network_.input || identity == network_.output || later_reader) {
      return std::nullopt;
    }
    return add;
  }

  void plan_conv(Op op) {
    op.kind = OpKind::kConv;
    const Layer& conv = layer_at(op.layer);
    int result = conv.output;
    if (const auto batch_norm = sole_reader_of_kind(result, LayerKind::kBatchNorm)) {
      covered_[static_cast<std::size_t>(*batch_norm)] = true;
      op.batch_norm = *batch_norm;
      append_name(op, layer_at(*batch_norm));
      result = layer_at(*batch_norm).output;
    }

    if (const auto activation = sole_activation(result)) {
      fuse_activation(op, *activation, result);
    } else if (const auto add = summing_add(result, conv.inputs[0])) {
      const Layer& add_layer = layer_at(*add);
      PendingSum pending;
      pending.plain = op;
      pending.plain_result = result;
      pending.identity = add_layer.inputs[0] == result ? add_layer.inputs[1] : add_layer.inputs[0];
      covered_[static_cast<std::size_t>(*add)] = true;
      op.sum = true;
      append_name(op, add_layer);
      result = add_layer.output;
      if (const auto block_activation = sole_activation(result)) {
        fuse_activation(op, *block_activation, result);
      }
      pending.op = std::move(op);
      pending.result = result;
      deferred_to_[static_cast<std::size_t>(pending.op.layer)] = *add;
      pending_sums_.emplace(*add, std::move(pending));
      return;
    }
    emit(std::move(op), result);
  }

  void emit_sum(int add, PendingSum& pending) {
    const int identity = value_of_[tensor_index(pending.identity)];
    CARB_CHECK(identity >= 0, "residual identity of " + pending.op.name + " is not computed yet");
    if (mode_ == ResidualMode::kSeparateOutput) {
      pending.op.residual = identity;
      pending.op.output = new_value(pending.result);
      value_of_[tensor_index(layer_at(add).output)] = pending.op.output;
      plan_.ops.push_back(std::move(pending.op));
      return;
    }
    if (!may_overwrite(pending.identity, add, add)) {
      // A conv that waits for a later add still reads the identity: the conv runs here on its
      // own, then the add (with its activation).
      deferred_to_[static_cast<std::size_t>(pending.plain.layer)] = -1;
      emit(std::move(pending.plain), pending.plain_result);
      if (pending.op.activation >= 0) {
        covered_[static_cast<std::size_t>(pending.op.activation)] = false;
      }
      plan_layer(add);
      return;
    }
    pending.op.output = identity;
    // Every tensor between the identity and the block's result now lives in the same buffer.
    value_of_[tensor_index(layer_at(add).output)] = identity;
    value_of_[tensor_index(pending.result)] = identity;
    plan_.ops.push_back(std::move(pending.op));
  }

  void set_lifetimes() {
    const auto read = [this](int value, int step) {
      Value& read_value = plan_.values[static_cast<std::size_t>(value)];
      read_value.last_op = std::max(read_value.last_op, step);
    };
    for (std::size_t k = 0; k < plan_.ops.size(); ++k) {
      const Op& op = plan_.ops[k];
      const int step = static_cast<int>(k);
      read(op.input, step);
      for (const int other : op.other_inputs) read(other, step);
      if (op.residual >= 0) read(op.residual, step);
      Value& output = plan_.values[static_cast<std::size_t>(op.output)];
      if (output.first_op < 0) output.first_op = step;
      output.last_op = std::max(output.last_op, step);
    }
    const int last = static_cast<int>(plan_.ops.size()) - 1;
    Value& input = plan_.values[static_cast<std::size_t>(plan_.input_value)];
    input.first_op = 0;
    input.last_op = last;
    plan_.values[static_cast<std::size_t>(plan_.output_value)].last_op = last;
  }

  const Network& network_;
  ResidualMode mode_;
  bool named_;                             ///< ops get names (OpNames::kNamed)
  std::vector<std::vector<int>> readers_;  ///< per tensor, the layers reading it
  std::vector<int> value_of_;              ///< per tensor, its value (-1 until written)
  std::vector<bool> covered_;              ///< per layer, whether an op already covers it
  /// Per layer, the IR position where the op covering it runs when later than its own (a conv
  /// summed into a later add), else -1.
  std::vector<int> deferred_to_;
  std::unordered_map<int, PendingSum> pending_sums_;  ///< by the add's layer index
  ExecutionPlan plan_;
};

std::int64_t round_up(std::int64_t bytes, std::int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

bool overlap(const BufferRequest& a, const BufferRequest& b) {
  return a.first_op <= b.last_op && b.first_op <= a.last_op;
}

}  // namespace

ExecutionPlan plan_execution(const Network& network, ResidualMode mode, OpNames names) {
  return Planner(network, mode, names).plan();
}

ArenaPlan plan_arena(const std::vector<BufferRequest>& requests, std::int64_t alignment_bytes) {
  const std::size_t count = requests.size();
  std::vector<std::int64_t> sizes(count);
  for (std::size_t i = 0; i < count; ++i) {
    sizes[i] = round_up(requests[i].size_bytes, alignment_bytes);
  }
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });

  ArenaPlan plan;
  plan.offsets_bytes.assign(count, 0);
  std::vector<std::size_t> placed;
  std::vector<std::size_t> conflicts;
  for (const std::size_t index : order) {
    conflicts.clear();
    for (const std::size_t other : placed) {
      if (overlap(requests[index], requests[other])) conflicts.push_back(other);
    }
    std::sort(conflicts.begin(), conflicts.end(), [&](std::size_t a, std::size_t b) {
      return plan.offsets_bytes[a] < plan.offsets_bytes[b];
    });
    std::optional<std::int64_t> best_offset;
    std::int64_t best_gap = std::numeric_limits<std::int64_t>::max();
    std::int64_t end = 0;  // highest end of the conflicts seen so far
    for (const std::size_t other : conflicts) {
      const std::int64_t gap = plan.offsets_bytes[other] - end;
      if (gap >= sizes[index] && gap < best_gap) {
        best_offset = end;
        best_gap = gap;
      }
      end = std::max(end, plan.offsets_bytes[other] + sizes[other]);
    }
    plan.offsets_bytes[index] = best_offset.value_or(end);
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets_bytes[index] + sizes[index]);
    placed.push_back(index);
  }

  // The live bytes op by op: each buffer adds its size at its first op and takes it away after
  // its last, swept in op order (at one op, what ends before it has been taken away).
  std::vector<std::pair<int, std::int64_t>> changes;
  changes.reserve(2 * count);
  for (std::size_t i = 0; i < count; ++i) {
    changes.emplace_back(requests[i].first_op, sizes[i]);
    changes.emplace_back(requests[i].last_op + 1, -sizes[i]);
  }
  std::sort(changes.begin(), changes.end());  // at one op, what ends comes first (negative)
  std::int64_t live = 0;
  for (const auto& [op, change] : changes) {
    live += change;
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
  }
  return plan;
}

std::vector<int> op_layers(const Op& op) {
  std::vector<int> layers = {op.layer};
  for (const int fused : {op.batch_norm, op.activation}) {
    if (fused >= 0 && fused != op.layer) layers.push_back(fused);
  }
  return layers;
}

namespace {

// The kinds of kernel kernel_features tells apart, one-hot, and the activations fused into one.
constexpr std::array<std::string_view, 16> kKernelTypes = {
    "pw",         "dense",    "stem",
    "dw",         "grouped",  "fc",
    "max_pool",   "avg_pool", "global_avg_pool",
    "batch_norm", "eltwise",  "add",
    "mul",        "concat",   "channel_shuffle",
    "slice"};
constexpr std::array<LayerKind, 6> kFusedActivations = {
    LayerKind::kClip, LayerKind::kHardSigmoid, LayerKind::kHardSwish,
    LayerKind::kRelu, LayerKind::kSigmoid,     LayerKind::kSwish};
constexpr std::size_t kNumericKernelFeatures = 15;

std::string_view kernel_type(const Network& network, const Layer& layer) {
  if (is_activation(layer.kind)) return "eltwise";
  if (layer.kind != LayerKind::kConv) return to_string(layer.kind);
  switch (layer_class_of(network, layer)) {
    case LayerClass::kConvStem:
      return "stem";
    case LayerClass::kConvDepthwise:
      return "dw";
    case LayerClass::kConvGrouped:
      return "grouped";
    default:
      return layer.kernel == 1 ? "pw" : "dense";
  }
}

}  // namespace

const std::vector<std::string>& kernel_feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list = {"in_bytes",       "out_bytes", "weight_bytes", "macs",
                                     "batch",          "cin",       "cout",         "in_hw",
                                     "out_hw",         "window",    "stride",       "groups",
                                     "chan_per_group", "inputs",    "macs_per_byte"};
    CARB_CHECK(list.size() == kNumericKernelFeatures, "numeric kernel features counted");
    for (const std::string_view type : kKernelTypes) list.push_back("is_" + std::string(type));
    for (const LayerKind kind : kFusedActivations) {
      list.push_back("fused_" + std::string(to_string(kind)));
    }
    list.emplace_back("is_torch_native");
    return list;
  }();
  return names;
}

std::vector<double> kernel_features(const Network& network, const std::vector<int>& layers,
                                    KernelEngine engine) {
  if (layers.empty()) return {};
  const auto layer_at = [&](int index) -> const Layer& {
    return network.layers[static_cast<std::size_t>(index)];
  };
  const Layer& anchor = layer_at(layers.front());
  const auto shape_of = [&](int tensor) -> const Shape& {
    return network.tensors[static_cast<std::size_t>(tensor)];
  };
  // Bytes at float32, as the CPU engine runs.
  constexpr double kBytes = 4;
  double in_bytes = 0;
  for (const int input : anchor.inputs)
    in_bytes += kBytes * static_cast<double>(shape_of(input).elements());
  const Shape& in = shape_of(anchor.inputs.front());
  const Shape& out = shape_of(anchor.output);
  const double out_bytes = kBytes * static_cast<double>(out.elements());
  double macs = 0;
  double params = 0;
  for (const int index : layers) {
    macs += static_cast<double>(layer_at(index).macs);
    params += static_cast<double>(layer_at(index).params);
  }
  const double weight_bytes = kBytes * params;
  std::vector<double> values = {
      in_bytes,
      out_bytes,
      weight_bytes,
      macs,
      static_cast<double>(out.n),
      static_cast<double>(in.c),
      static_cast<double>(out.c),
      static_cast<double>(in.h) * in.w,
      static_cast<double>(out.h) * out.w,
      static_cast<double>(anchor.kernel),
      static_cast<double>(anchor.stride),
      static_cast<double>(anchor.groups),
      static_cast<double>(in.c) / std::max(anchor.groups, 1),  // groups divide channels
      static_cast<double>(anchor.inputs.size()),
      macs / (in_bytes + out_bytes + weight_bytes)};
  const std::string_view type = kernel_type(network, anchor);
  for (const std::string_view name : kKernelTypes) values.push_back(type == name ? 1.0 : 0.0);
  const Layer& last = layer_at(layers.back());
  const bool fused = layers.size() > 1 && is_activation(last.kind);
  for (const LayerKind kind : kFusedActivations) {
    values.push_back(fused && last.kind == kind ? 1.0 : 0.0);
  }
  // A separate kind for the additive prior (an is_ column): costs of its own on top of its conv
  // kind's, which PyTorch's native path pays 20-40 times over (docs/torch.md).
  values.push_back(engine == KernelEngine::kTorch && network.config.precision == Precision::kFp32 &&
                           torch_runs_natively(network, anchor)
                       ? 1.0
                       : 0.0);
  return values;
}

}  // namespace carb::engine
