// The engines' planners: which IR layers fuse into which kernels, and where activation buffers
// sit in the arena.
#include <gtest/gtest.h>

#include <algorithm>

#include "carb/graph.hpp"
#include "engine/plan.hpp"

namespace carb::engine {
namespace {

std::vector<BufferRequest> fp32_requests(const ExecutionPlan& plan) {
  std::vector<BufferRequest> requests;
  for (const Value& value : plan.values) {
    requests.push_back({value.shape.elements() * 4, value.first_op, value.last_op});
  }
  return requests;
}

const Op& op_named(const ExecutionPlan& plan, const std::string& name) {
  const auto found =
      std::find_if(plan.ops.begin(), plan.ops.end(), [&](const Op& op) { return op.name == name; });
  EXPECT_NE(found, plan.ops.end()) << name;
  return *found;
}

std::ptrdiff_t position(const ExecutionPlan& plan, const std::string& name) {
  return &op_named(plan, name) - plan.ops.data();
}

TEST(ExecutionPlan, FusesBatchNormReluAndTheResidualAddIntoConvs) {
  const Network network = build_network(parse_key("basic18_w0.25_ds_r32_b1_fp32"));
  const ExecutionPlan plan = plan_execution(network);
  // 20 convs, max pool, average pool, fc.
  ASSERT_EQ(plan.ops.size(), 23u);
  EXPECT_EQ(plan.ops.front().name, "conv1+bn1+relu");
  EXPECT_TRUE(plan.ops.front().relu);
  EXPECT_FALSE(plan.ops.front().sum);
  EXPECT_EQ(plan.ops[1].kind, OpKind::kMaxPool);
  EXPECT_EQ(plan.ops.back().kind, OpKind::kFullyConnected);
  for (const Op& op : plan.ops) {
    EXPECT_EQ(op.kind == OpKind::kConv, op.batch_norm >= 0) << op.name;
  }

  // Without downsampling the block's second conv accumulates into the block input's buffer.
  const Op& conv1 = op_named(plan, "layer1.0.conv1+bn1+relu");
  const Op& conv2 = op_named(plan, "layer1.0.conv2+bn2+add+relu");
  EXPECT_TRUE(conv2.sum && conv2.relu);
  EXPECT_EQ(conv2.output, conv1.input);
  EXPECT_EQ(conv2.input, conv1.output);

  // With downsampling it accumulates into the downsample's output, so it runs after it.
  const Op& downsample = op_named(plan, "layer2.0.downsample.0+downsample.1");
  const Op& sum = op_named(plan, "layer2.0.conv2+bn2+add+relu");
  EXPECT_FALSE(downsample.relu || downsample.sum);
  EXPECT_EQ(sum.output, downsample.output);
  EXPECT_LT(position(plan, "layer2.0.downsample.0+downsample.1"),
            position(plan, "layer2.0.conv2+bn2+add+relu"));
}

TEST(ExecutionPlan, KeepsTheInputAndOutputLiveForTheWholePass) {
  const Network network = build_network(parse_key("bottleneck50_w0.25_nods_r16_b2_fp32"));
  const ExecutionPlan plan = plan_execution(network);
  const int last = static_cast<int>(plan.ops.size()) - 1;
  const Value& input = plan.values[static_cast<std::size_t>(plan.input_value)];
  EXPECT_EQ(input.first_op, 0);
  EXPECT_EQ(input.last_op, last);
  EXPECT_EQ(plan.values[static_cast<std::size_t>(plan.output_value)].last_op, last);
  EXPECT_EQ(plan.values[static_cast<std::size_t>(plan.output_value)].shape,
            network.tensors[static_cast<std::size_t>(network.output)]);
  for (const Value& value : plan.values) {
    EXPECT_GE(value.first_op, 0);
    EXPECT_LE(value.first_op, value.last_op);
  }
  // Every op writes either a fresh value or (a residual sum) one written before it.
  for (std::size_t k = 0; k < plan.ops.size(); ++k) {
    const Value& output = plan.values[static_cast<std::size_t>(plan.ops[k].output)];
    EXPECT_EQ(output.first_op == static_cast<int>(k), !plan.ops[k].sum) << plan.ops[k].name;
  }
}

TEST(ExecutionPlan, SeparateOutputSumsReadTheIdentityAndWriteAFreshValue) {
  const Network network = build_network(parse_key("basic18_w0.25_ds_r32_b1_fp32"));
  const ExecutionPlan in_place = plan_execution(network);
  const ExecutionPlan plan = plan_execution(network, ResidualMode::kSeparateOutput);
  // The same kernels in the same order; only where the sums write differs.
  ASSERT_EQ(plan.ops.size(), in_place.ops.size());
  for (std::size_t k = 0; k < plan.ops.size(); ++k) {
    EXPECT_EQ(plan.ops[k].name, in_place.ops[k].name);
    EXPECT_EQ(plan.ops[k].sum, in_place.ops[k].sum);
    EXPECT_EQ(in_place.ops[k].residual, -1);
    // Every op writes a value no op wrote before it.
    const Value& output = plan.values[static_cast<std::size_t>(plan.ops[k].output)];
    EXPECT_EQ(output.first_op, static_cast<int>(k)) << plan.ops[k].name;
    EXPECT_EQ(plan.ops[k].residual >= 0, plan.ops[k].sum) << plan.ops[k].name;
  }
  const Op& conv1 = op_named(plan, "layer1.0.conv1+bn1+relu");
  const Op& conv2 = op_named(plan, "layer1.0.conv2+bn2+add+relu");
  EXPECT_EQ(conv2.residual, conv1.input);
  EXPECT_NE(conv2.output, conv2.residual);
  EXPECT_NE(conv2.output, conv2.input);
  const Op& downsample = op_named(plan, "layer2.0.downsample.0+downsample.1");
  const Op& sum = op_named(plan, "layer2.0.conv2+bn2+add+relu");
  EXPECT_EQ(sum.residual, downsample.output);
  // The identity stays live until the sum has read it, so the arena never lets the sum's output
  // overwrite it.
  const std::size_t sum_index = static_cast<std::size_t>(&sum - plan.ops.data());
  EXPECT_GE(plan.values[static_cast<std::size_t>(sum.residual)].last_op,
            static_cast<int>(sum_index));
  EXPECT_EQ(plan.values[static_cast<std::size_t>(plan.output_value)].shape,
            network.tensors[static_cast<std::size_t>(network.output)]);
  // A separate output costs at most one more identity-sized buffer at a time.
  const ArenaPlan separate = plan_arena(fp32_requests(plan), 64);
  const ArenaPlan accumulate = plan_arena(fp32_requests(in_place), 64);
  EXPECT_GE(separate.peak_live_bytes, accumulate.peak_live_bytes);
  EXPECT_LE(separate.peak_live_bytes, accumulate.peak_live_bytes * 2);
}

TEST(ExecutionPlan, ArenaIsThePeakLiveSetWithinTheAnalyticPeakPlusTheKeptInput) {
  for (const char* key : {"basic18_w1_ds_r224_b1_fp32", "basic34_w1_nods_r64_b4_fp32",
                          "bottleneck50_w1_ds_r224_b1_fp32", "bottleneck101_w0.5_nods_r33_b2_fp32",
                          "basic8s1.1.1_c8.16.32_w1_nods_r16_b2_fp32_k10"}) {
    const Network network = build_network(parse_key(key));
    const ExecutionPlan plan = plan_execution(network);
    const ArenaPlan arena = plan_arena(fp32_requests(plan), 64);
    const std::int64_t input_bytes = network.tensors[0].elements() * 4;
    const std::int64_t peak_bytes = compute_features(network).peak_activation_bytes;
    // Fusion never grows a live set of the analytic in-place model; the kept input is extra.
    EXPECT_LE(arena.peak_live_bytes, peak_bytes + input_bytes) << key;
    // On a ResNet's lifetimes greedy-by-size placement wastes nothing.
    EXPECT_EQ(arena.arena_bytes, arena.peak_live_bytes) << key;
  }
}

TEST(ArenaPlan, BuffersWithDisjointLifetimesShareBytes) {
  const ArenaPlan plan = plan_arena({{100, 0, 1}, {100, 1, 2}, {100, 2, 3}}, 64);
  EXPECT_EQ(plan.offsets_bytes, (std::vector<std::int64_t>{0, 128, 0}));
  EXPECT_EQ(plan.arena_bytes, 256);
  EXPECT_EQ(plan.peak_live_bytes, 256);
}

TEST(ArenaPlan, PicksTheSmallestGapThatFits) {
  // Free during op 2: [256, 512) (B) and [640, 704) (D); F fits both and takes the tighter one.
  const ArenaPlan plan = plan_arena({{256, 0, 4},  // A
                                     {256, 0, 0},  // B
                                     {128, 0, 4},  // C
                                     {64, 0, 0},   // D
                                     {64, 0, 4},   // E
                                     {64, 2, 2}},  // F
                                    64);
  EXPECT_EQ(plan.offsets_bytes, (std::vector<std::int64_t>{0, 256, 512, 640, 704, 640}));
  EXPECT_EQ(plan.arena_bytes, 768);
  EXPECT_EQ(plan.peak_live_bytes, 768);
}

TEST(ArenaPlan, RandomRequestsNeverShareBytesWhileBothLive) {
  std::uint64_t state = 12345;
  const auto next = [&state](std::uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % bound);
  };
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferRequest> requests;
    for (int i = 0; i < 40; ++i) {
      const int first = next(30);
      requests.push_back({1 + next(5000), first, first + next(8)});
    }
    const ArenaPlan plan = plan_arena(requests, 64);
    std::int64_t top = 0;
    for (std::size_t a = 0; a < requests.size(); ++a) {
      const std::int64_t a_end = plan.offsets_bytes[a] + requests[a].size_bytes;
      EXPECT_EQ(plan.offsets_bytes[a] % 64, 0);
      top = std::max(top, a_end);
      for (std::size_t b = a + 1; b < requests.size(); ++b) {
        const bool live_together = requests[a].first_op <= requests[b].last_op &&
                                   requests[b].first_op <= requests[a].last_op;
        const bool bytes_overlap =
            plan.offsets_bytes[a] < plan.offsets_bytes[b] + requests[b].size_bytes &&
            plan.offsets_bytes[b] < a_end;
        EXPECT_FALSE(live_together && bytes_overlap) << "trial " << trial << ": " << a << ", " << b;
      }
    }
    EXPECT_GE(plan.arena_bytes, top);
    EXPECT_GE(plan.arena_bytes, plan.peak_live_bytes);
  }
}

}  // namespace
}  // namespace carb::engine
