// How an inference engine runs a network: IR layers fused into kernels (execution plan) and
// activation buffers placed in one arena (memory plan). Pure functions of the IR, tested on their
// own; the CPU and CUDA engines share them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "carb/graph.hpp"

namespace carb::engine {

/// What one kernel computes: the kind of its anchor IR layer (activations: kEltwise).
enum class OpKind {
  kConv,
  kMaxPool,
  kGlobalAvgPool,
  kFullyConnected,
  kAvgPool,
  kBatchNorm,  ///< a batch norm no conv absorbs (DenseNet's, after a concat)
  kEltwise,    ///< an activation no other op absorbs
  kAdd,
  kMul,
  kConcat,
  kChannelShuffle,
  kSlice,
};

/// One kernel: an IR layer with the layers fused into it. A conv absorbs the batch norm that is
/// its output's only reader, then one activation or the residual add (then one activation);
/// a fully connected layer, an add or a mul absorbs one activation; a batch norm a ReLU.
struct Op {
  OpKind kind = OpKind::kConv;
  int layer = -1;       ///< IR index of the anchor layer (conv, pool, fc, batch norm, ...)
  int batch_norm = -1;  ///< IR index of the batch norm folded into the conv, or -1
  /// The conv result is added to the residual identity (ResidualMode says where it lives).
  bool sum = false;
  /// With ResidualMode::kSeparateOutput, the identity's value, read while the sum is written to
  /// `output`; -1 otherwise.
  int residual = -1;
  int activation = -1;  ///< IR index of the activation applied last (a post-op), or -1
  bool relu = false;    ///< that activation is a ReLU (the one activation the CUDA engine fuses)
  int input = -1;       ///< value read (an add's or mul's first operand, a concat's first input)
  /// Values read after `input`: an add's or mul's second operand, a concat's further inputs.
  std::vector<int> other_inputs;
  /// Value written: the identity's value when `sum` accumulates in place, `input` when an
  /// elementwise op (batch norm, activation, add, mul) writes over its first operand.
  int output = -1;
  std::string name;  ///< the IR layers it computes, e.g. "layer1.0.conv2+bn2+add+relu"
};

/// The IR layers `op` computes: its anchor, then the batch norm and the activation fused into it.
std::vector<int> op_layers(const Op& op);

/// Whose kernels: carb's CPU engine's (its execution plan's ops) or PyTorch's (one ATen operator
/// per IR layer, the PyTorch backend's).
enum class KernelEngine { kCarb, kTorch };

/// The kernel-level latency model's features of one kernel (docs/onnx.md, "Kernel model"), the
/// one definition that `carb kernels` writes beside each kernel's time and that predicting from
/// a network's execution plan computes: bytes read and written, weight bytes, MACs and their
/// ratio to bytes, batch, channels, spatial sizes, window, stride, groups, the number of inputs,
/// the kind of kernel (one-hot: pointwise, dense, stem, depthwise or grouped conv, fc, pools,
/// batch norm, eltwise, add, mul, concat, shuffle, slice), the activation fused into it, and
/// whether PyTorch runs it on its native path rather than oneDNN (is_torch_native: a float32
/// conv torch_runs_natively says so of, on PyTorch's kernels; 0 on carb's engine, which runs
/// every conv on oneDNN).
const std::vector<std::string>& kernel_feature_names();
/// Values in kernel_feature_names()'s order for the kernel that computes `layers` of `network`
/// (op_layers' order: the anchor first) on `engine`; empty for no layers.
std::vector<double> kernel_features(const Network& network, const std::vector<int>& layers,
                                    KernelEngine engine = KernelEngine::kCarb);

/// One activation buffer: a tensor and every tensor written over it in place.
struct Value {
  Shape shape;        ///< that of `tensor`
  int first_op = -1;  ///< op that first writes it (0 for the network input)
  int last_op = -1;   ///< last op that reads or writes it, inclusive
  int tensor = -1;    ///< the IR tensor first written into it
};

/// Kernels in execution order and the values they pass. The network input and output values are
/// live for the whole pass: the input must survive for the next run(), the output for reading.
struct ExecutionPlan {
  std::vector<Op> ops;
  std::vector<Value> values;
  int input_value = -1;
  int output_value = -1;
};

/// Where a fused residual add writes.
enum class ResidualMode {
  /// Into the identity's buffer, which already holds the identity (oneDNN's sum post-op): the
  /// add costs no buffer and no pass over memory.
  kAccumulateInPlace,
  /// Into a buffer of its own, reading the identity as a second input (cuDNN's fused
  /// conv-bias-add-activation, whose documentation does not promise that its output may alias
  /// the added tensor).
  kSeparateOutput,
};

/// Whether plan_execution names its ops (Op::name), which only diagnostics read.
enum class OpNames { kNamed, kUnnamed };

/// Fuses the IR: conv + batch norm (+ activation); a conv + batch norm whose only reader is an
/// add, + add (+ activation), as one conv that adds the other operand (the identity), run where
/// the IR runs the add (after a ResNet's downsample branch). An op writes over a tensor (a sum
/// into its identity, an elementwise op over its first operand) only when every other reader
/// of that tensor has run, and never over the network input or output; a sum that cannot runs
/// as a conv and an add. The plan depends on the network's topology only (its layers' kinds,
/// inputs and outputs), not on its shapes, which its values copy.
/// With OpNames::kUnnamed the ops' names stay empty: the same plan, faster (the analytic
/// features plan every architecture of a space; docs/benchmarks.md, "Naming the plan's ops").
ExecutionPlan plan_execution(const Network& network,
                             ResidualMode mode = ResidualMode::kAccumulateInPlace,
                             OpNames names = OpNames::kNamed);

/// A buffer to place: its size and the ops during which it is live (inclusive).
struct BufferRequest {
  std::int64_t size_bytes = 0;
  int first_op = 0;
  int last_op = 0;
};

/// Offsets of buffers in one arena.
struct ArenaPlan {
  std::vector<std::int64_t> offsets_bytes;  ///< one per request, multiples of the alignment
  std::int64_t arena_bytes = 0;             ///< bytes the arena needs
  /// The largest sum of aligned sizes live during one op: no placement can use less.
  std::int64_t peak_live_bytes = 0;
};

/// Greedy-by-size best-fit placement: buffers are placed largest first, each into the smallest
/// gap between already placed buffers whose lifetimes overlap its own (else above them), so
/// buffers with disjoint lifetimes share bytes.
ArenaPlan plan_arena(const std::vector<BufferRequest>& requests, std::int64_t alignment_bytes);

}  // namespace carb::engine
