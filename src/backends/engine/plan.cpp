// Fusion of the IR into kernels, value lifetimes, and the arena placement of activation buffers.
#include "plan.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "carb/error.hpp"

namespace carb::engine {

namespace {

class Planner {
 public:
  Planner(const Network& network, ResidualMode mode)
      : network_(network),
        mode_(mode),
        readers_(network.tensors.size()),
        value_of_(network.tensors.size(), -1),
        fused_(network.layers.size(), false) {
    for (std::size_t i = 0; i < network.layers.size(); ++i) {
      const Layer& layer = network.layers[i];
      for (int k = 0; k < layer.input_count(); ++k) {
        readers_[tensor_index(layer.inputs[static_cast<std::size_t>(k)])].push_back(
            static_cast<int>(i));
      }
    }
  }

  ExecutionPlan plan() {
    plan_.input_value = new_value(network_.input);
    for (std::size_t i = 0; i < network_.layers.size(); ++i) {
      if (auto found = pending_sums_.find(static_cast<int>(i)); found != pending_sums_.end()) {
        emit_sum(static_cast<int>(i), found->second);
      } else if (!fused_[i]) {
        plan_layer(static_cast<int>(i));
      }
    }
    plan_.output_value = value_of_[tensor_index(network_.output)];
    set_lifetimes();
    return std::move(plan_);
  }

 private:
  // A conv whose result is added to an identity: it runs at the add, writing the identity's value.
  struct PendingSum {
    Op op;
    int identity = -1;  ///< tensor
    int result = -1;    ///< tensor holding the block's output (the add's or its ReLU's)
  };

  static std::size_t tensor_index(int tensor) { return static_cast<std::size_t>(tensor); }
  const Layer& layer_at(int index) const {
    return network_.layers[static_cast<std::size_t>(index)];
  }

  // The only layer reading `tensor`, if exactly one does.
  std::optional<int> sole_reader(int tensor) const {
    const std::vector<int>& readers = readers_[tensor_index(tensor)];
    if (readers.size() != 1) return std::nullopt;
    return readers.front();
  }
  std::optional<int> sole_reader_of_kind(int tensor, LayerKind kind) const {
    const std::optional<int> reader = sole_reader(tensor);
    if (reader && layer_at(*reader).kind == kind) return reader;
    return std::nullopt;
  }

  int new_value(int tensor) {
    plan_.values.push_back(Value{network_.tensors[tensor_index(tensor)], -1, -1});
    const int value = static_cast<int>(plan_.values.size()) - 1;
    value_of_[tensor_index(tensor)] = value;
    return value;
  }

  void emit(Op op, int result) {
    op.output = new_value(result);
    plan_.ops.push_back(std::move(op));
  }

  // The add may write its identity's buffer only when nothing reads the identity afterwards and
  // the identity is not the network input (which must survive for the next run()).
  bool can_accumulate_into_identity(int add) const {
    const int identity = layer_at(add).inputs[1];
    if (identity == network_.input) return false;
    const std::vector<int>& readers = readers_[tensor_index(identity)];
    return std::all_of(readers.begin(), readers.end(), [add](int reader) { return reader <= add; });
  }

  void plan_layer(int index) {
    const Layer& layer = layer_at(index);
    Op op;
    op.layer = index;
    op.input = value_of_[tensor_index(layer.inputs[0])];
    op.name = layer_name(layer);
    switch (layer.kind) {
      case LayerKind::kConv:
        plan_conv(std::move(op));
        return;
      case LayerKind::kMaxPool:
        op.kind = OpKind::kMaxPool;
        break;
      case LayerKind::kGlobalAvgPool:
        op.kind = OpKind::kGlobalAvgPool;
        break;
      case LayerKind::kFullyConnected:
        op.kind = OpKind::kFullyConnected;
        break;
      case LayerKind::kBatchNorm:
      case LayerKind::kRelu:
      case LayerKind::kAdd:
        CARB_CHECK(false, "IR layer " + op.name + " (" + std::string(to_string(layer.kind)) +
                              ") does not follow a conv the engine can fuse it into");
    }
    emit(std::move(op), layer.output);
  }

  void plan_conv(Op op) {
    const Layer& conv = layer_at(op.layer);
    const std::optional<int> batch_norm = sole_reader_of_kind(conv.output, LayerKind::kBatchNorm);
    CARB_CHECK(batch_norm.has_value(), "conv " + op.name + " is not followed by a batch norm");
    fused_[static_cast<std::size_t>(*batch_norm)] = true;
    op.batch_norm = *batch_norm;
    op.name += std::string("+") + layer_at(*batch_norm).role;
    int result = layer_at(*batch_norm).output;

    if (const auto relu = sole_reader_of_kind(result, LayerKind::kRelu)) {
      fuse_relu(op, *relu, result);
    } else if (const auto add = sole_reader_of_kind(result, LayerKind::kAdd);
               add && layer_at(*add).inputs[0] == result && can_accumulate_into_identity(*add)) {
      fused_[static_cast<std::size_t>(*add)] = true;
      op.sum = true;
      op.name += "+add";
      result = layer_at(*add).output;
      if (const auto block_relu = sole_reader_of_kind(result, LayerKind::kRelu)) {
        fuse_relu(op, *block_relu, result);
      }
      pending_sums_.emplace(*add, PendingSum{std::move(op), layer_at(*add).inputs[1], result});
      return;
    }
    emit(std::move(op), result);
  }

  void fuse_relu(Op& op, int relu, int& result) {
    fused_[static_cast<std::size_t>(relu)] = true;
    op.relu = true;
    op.name += "+relu";
    result = layer_at(relu).output;
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
    pending.op.output = identity;
    // Every tensor between the identity and the block's result now lives in the same buffer.
    value_of_[tensor_index(layer_at(add).output)] = identity;
    value_of_[tensor_index(pending.result)] = identity;
    plan_.ops.push_back(std::move(pending.op));
  }

  void set_lifetimes() {
    for (std::size_t k = 0; k < plan_.ops.size(); ++k) {
      const Op& op = plan_.ops[k];
      const int step = static_cast<int>(k);
      Value& input = plan_.values[static_cast<std::size_t>(op.input)];
      input.last_op = std::max(input.last_op, step);
      if (op.residual >= 0) {
        Value& residual = plan_.values[static_cast<std::size_t>(op.residual)];
        residual.last_op = std::max(residual.last_op, step);
      }
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
  std::vector<std::vector<int>> readers_;  ///< per tensor, the layers reading it
  std::vector<int> value_of_;              ///< per tensor, its value (-1 until written)
  std::vector<bool> fused_;                ///< per layer, whether an op already covers it
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

ExecutionPlan plan_execution(const Network& network, ResidualMode mode) {
  return Planner(network, mode).plan();
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
  for (const std::size_t index : order) {
    std::vector<std::size_t> conflicts;
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

  int last_op = -1;
  for (const BufferRequest& request : requests) last_op = std::max(last_op, request.last_op);
  for (int op = 0; op <= last_op; ++op) {
    std::int64_t live = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (requests[i].first_op <= op && op <= requests[i].last_op) live += sizes[i];
    }
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
  }
  return plan;
}

}  // namespace carb::engine
