// The ONNX importer on models built here node by node (tests/graph/onnx_builder.hpp) and on the
// fuzz target's seeds (small PyTorch exports, fuzz/corpus/onnx): each operator and fusion, and
// malformed files, each one error line naming the file and, where a node is at fault, the node.
// The torchvision models' exports are tested in tests/graph/zoo/.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "onnx_builder.hpp"

namespace carb {
namespace {

using carb_test::OnnxBuilder;

std::string temp_path(const std::string& name) { return testing::TempDir() + name; }

Architecture import_built(const OnnxBuilder& model, const std::string& name = "model.onnx") {
  return import_model(model.write(temp_path(name)));
}

// The input error importing `path` gives; fails the test when it imports or gives another error.
std::string import_error(const std::string& path) {
  try {
    (void)import_model(path);
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput) << error.what();
    const std::string what = error.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << "does not begin with the file: " << what;
    return what;
  }
  ADD_FAILURE() << path << " imported";
  return {};
}

std::string built_error(const OnnxBuilder& model, const std::string& name = "bad.onnx") {
  return import_error(model.write(temp_path(name)));
}

std::vector<LayerKind> kinds(const Architecture& architecture) {
  std::vector<LayerKind> out;
  for (const Layer& layer : architecture.layers) out.push_back(layer.kind);
  return out;
}

Network native_network(const Architecture& architecture, int batch = 1) {
  const std::string hash = register_architecture(architecture);
  return build_network(imported_config(*find_architecture(hash), architecture.native_resolution,
                                       batch, Precision::kFp32));
}

// Layers of a class in the architecture's network at its own resolution.
int class_count(const Architecture& architecture, LayerClass layer_class) {
  return compute_features(native_network(architecture))
      .layer_classes[static_cast<std::size_t>(layer_class)]
      .count;
}

// conv 3->8 3x3/2 p1, batch norm, relu, global average pool, flatten, gemm 8->10 with bias.
OnnxBuilder classifier() {
  OnnxBuilder m(3, 8);
  m.conv("input", "c1", 3, 8, 3, 2, 1);
  m.node("BatchNormalization",
         {"c1", m.weight("s", {8}), m.weight("b", {8}), m.weight("m", {8}), m.weight("v", {8})},
         {"bn"});
  m.node("Relu", {"bn"}, {"r"});
  m.node("GlobalAveragePool", {"r"}, {"g"});
  m.node("Flatten", {"g"}, {"f"});
  onnx::NodeProto& fc =
      m.node("Gemm", {"f", m.weight("fc.w", {10, 8}), m.weight("fc.b", {10})}, {"out"});
  OnnxBuilder::attribute(fc, "transB", std::int64_t{1});
  m.output("out");
  return m;
}

TEST(OnnxImport, AClassifierBecomesItsLayers) {
  const Architecture a = import_built(classifier(), "classifier.onnx");
  EXPECT_EQ(a.name, "classifier");
  EXPECT_EQ(a.native_resolution, 8);
  EXPECT_EQ(a.input_channels, 3);
  EXPECT_EQ(kinds(a),
            (std::vector<LayerKind>{LayerKind::kConv, LayerKind::kBatchNorm, LayerKind::kRelu,
                                    LayerKind::kGlobalAvgPool, LayerKind::kFullyConnected}));
  EXPECT_EQ(a.layers[0].name, "c1");
  EXPECT_EQ(a.layers[0].padding, 1);
  EXPECT_EQ(a.layers[0].stride, 2);
  EXPECT_EQ(a.layers[4].fc_inputs, 8);
  EXPECT_TRUE(a.layers[4].bias);
  EXPECT_EQ(a.output, 5);
  const Features f = compute_features(native_network(a));
  // conv 8*3*9 = 216, batch norm 2*8 = 16, fc 80 + 10 = 90.
  EXPECT_EQ(f.params, 216 + 16 + 90);
  // conv output 8 x 4 x 4, 27 MACs each; fc 80.
  EXPECT_EQ(f.macs, 8 * 4 * 4 * 27 + 80);
  EXPECT_EQ(f.output_channels, 10);
  EXPECT_EQ(a.hash, architecture_hash(a));
}

TEST(OnnxImport, HashIgnoresNamesAndNativeResolutionButNotAttributes) {
  OnnxBuilder renamed = classifier();
  for (onnx::NodeProto& node : *renamed.graph()->mutable_node()) node.set_name("n" + node.name());
  OnnxBuilder bigger = classifier();
  bigger.graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(2)
      ->set_dim_value(16);
  bigger.graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(3)
      ->set_dim_value(16);
  OnnxBuilder strided = classifier();
  strided.graph()->mutable_node(0)->mutable_attribute(1)->set_ints(0, 1);
  strided.graph()->mutable_node(0)->mutable_attribute(1)->set_ints(1, 1);
  const std::string hash = import_built(classifier(), "a.onnx").hash;
  EXPECT_EQ(import_built(renamed, "b.onnx").hash, hash);
  EXPECT_EQ(import_built(bigger, "c.onnx").hash, hash);
  EXPECT_NE(import_built(strided, "d.onnx").hash, hash);
}

TEST(OnnxImport, FusesSwishHardSwishShuffleAndLinearBias) {
  OnnxBuilder m(4, 8);
  m.conv("input", "c", 4, 4, 1);
  m.node("Sigmoid", {"c"}, {"s"});
  m.node("Mul", {"c", "s"}, {"swish"});
  onnx::NodeProto& hs = m.node("HardSigmoid", {"swish"}, {"h"});
  OnnxBuilder::attribute_float(hs, "alpha", 1.0f / 6);
  m.node("Mul", {"h", "swish"}, {"hswish"});
  // channel shuffle as exported: shape arithmetic, then reshape-transpose-reshape
  m.node("Shape", {"hswish"}, {"shape"});
  m.node("Gather", {"shape", m.ints("one", {1}, true)}, {"channels"});
  m.node("Div", {"channels", m.ints("two", {2}, true)}, {"per_group"});
  m.node("Unsqueeze", {"per_group", m.ints("axes0", {0})}, {"per_group_1d"});
  m.node("Concat", {m.ints("head", {1, 2}), "per_group_1d", m.ints("tail", {8, 8})},
         {"grouped_shape"});
  m.node("Reshape", {"hswish", "grouped_shape"}, {"grouped"});
  onnx::NodeProto& t = m.node("Transpose", {"grouped"}, {"transposed"});
  OnnxBuilder::attribute(t, "perm", std::vector<std::int64_t>{0, 2, 1, 3, 4});
  m.node("Reshape", {"transposed", m.ints("back", {1, -1, 8, 8})}, {"shuffled"});
  // squeeze-excite with a sigmoid gate: not a swish (the gate reads another tensor)
  m.node("GlobalAveragePool", {"shuffled"}, {"pooled"});
  m.node("Sigmoid", {"pooled"}, {"gate"});
  m.node("Mul", {"gate", "shuffled"}, {"excited"});
  m.node("ReduceMean", {"excited"}, {"mean"}).clear_attribute();
  OnnxBuilder::attribute(m.graph()->mutable_node(m.graph()->node_size() - 1)[0], "axes",
                         std::vector<std::int64_t>{-1, -2});
  OnnxBuilder::attribute(m.graph()->mutable_node(m.graph()->node_size() - 1)[0], "keepdims",
                         std::int64_t{0});
  m.node("MatMul", {"mean", m.weight("w", {4, 5})}, {"mm"});
  m.node("Add", {"mm", m.weight("b", {5})}, {"out"});
  m.output("out");
  const Architecture a = import_built(m, "fusions.onnx");
  EXPECT_EQ(kinds(a),
            (std::vector<LayerKind>{LayerKind::kConv, LayerKind::kSwish, LayerKind::kHardSwish,
                                    LayerKind::kChannelShuffle, LayerKind::kGlobalAvgPool,
                                    LayerKind::kSigmoid, LayerKind::kMul, LayerKind::kGlobalAvgPool,
                                    LayerKind::kFullyConnected}));
  EXPECT_EQ(a.layers[3].groups, 2);
  // The product's full-size operand first, the broadcast gate second.
  EXPECT_EQ(a.layers[6].inputs, (std::vector<int>{4, 6}));
  EXPECT_TRUE(a.layers[8].bias);
  EXPECT_EQ(a.layers[8].channels, 5);
  const Features f = compute_features(native_network(a));
  EXPECT_EQ(f.params, 4 * 4 + 4 * 5 + 5);
  EXPECT_EQ(class_count(a, LayerClass::kDataMovement), 1);
}

TEST(OnnxImport, PadFoldsIntoTheWindowAfterIt) {
  OnnxBuilder m(3, 8);
  m.node("Pad", {"input", m.ints("pads", {0, 0, 2, 2, 0, 0, 2, 2})}, {"p"});
  m.conv("p", "c", 3, 4, 3, 1, 1);
  m.node("Pad", {"c", m.ints("pads2", {0, 0, 1, 1, 0, 0, 1, 1})}, {"p2"});
  onnx::NodeProto& pool = m.node("AveragePool", {"p2"}, {"out"});
  OnnxBuilder::attribute(pool, "kernel_shape", std::vector<std::int64_t>{2, 2});
  OnnxBuilder::attribute(pool, "strides", std::vector<std::int64_t>{2, 2});
  m.output("out");
  const Architecture a = import_built(m, "pads.onnx");
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_EQ(a.layers[0].padding, 3);
  EXPECT_EQ(a.layers[0].padding_after, 3);
  EXPECT_EQ(a.layers[1].padding, 1);
  EXPECT_TRUE(a.layers[1].count_include_pad);  // a Pad's zeros count in the average
  const Network n = native_network(a);
  EXPECT_EQ(n.tensors[1], (Shape{1, 4, 12, 12}));  // 8 + 2 x 3 - 2
  EXPECT_EQ(n.tensors[2], (Shape{1, 4, 7, 7}));    // (12 + 2 - 2) / 2 + 1
}

TEST(OnnxImport, ClipIsReluSixOrARelu) {
  OnnxBuilder m(3, 4);
  m.conv("input", "c", 3, 3, 1);
  m.node("Clip", {"c", m.scalar("lo", 0), m.scalar("hi", 6)}, {"r6"});
  m.node("Clip", {"r6", m.scalar("zero", 0)}, {"r"});
  m.node("Clip", {"r", "", m.scalar("top", 2)}, {"out"});
  m.output("out");
  const Architecture a = import_built(m, "clip.onnx");
  ASSERT_EQ(a.layers.size(), 4u);
  EXPECT_EQ(a.layers[1].kind, LayerKind::kClip);
  EXPECT_EQ(a.layers[1].lower, 0);
  EXPECT_EQ(a.layers[1].upper, 6);
  EXPECT_EQ(a.layers[2].kind, LayerKind::kRelu);
  // An open bound is the float's extreme, which JSON text keeps (infinity it would not).
  EXPECT_EQ(a.layers[3].lower, std::numeric_limits<float>::lowest());
  const Architecture back =
      architecture_from_json(nlohmann::json::parse(architecture_to_json(a).dump()), "clip.json");
  EXPECT_EQ(back.hash, a.hash);
}

TEST(OnnxImport, UnsupportedOperatorNamesTheNodeItsOpAndTheFile) {
  OnnxBuilder m = classifier();
  m.graph()->mutable_output()->Clear();
  m.node("Softmax", {"out"}, {"probabilities"}, "head/softmax");
  m.output("probabilities");
  const std::string path = temp_path("softmax.onnx");
  EXPECT_EQ(built_error(m, "softmax.onnx"),
            path +
                ": node 'head/softmax' (Softmax): operator Softmax is not supported "
                "(docs/onnx.md lists those that are)");
  // A node without a name is named by its place in the graph.
  m.graph()->mutable_node(6)->clear_name();
  EXPECT_NE(built_error(m, "softmax.onnx").find(": node '#6' (Softmax): "), std::string::npos);
  OnnxBuilder lstm = classifier();
  lstm.node("LSTM", {"out"}, {"y"}, "rnn");
  EXPECT_NE(built_error(lstm, "lstm.onnx").find(": node 'rnn' (LSTM): operator LSTM"),
            std::string::npos);
  OnnxBuilder custom = classifier();
  custom.node("Relu", {"out"}, {"y"}, "mine").set_domain("com.example");
  EXPECT_NE(built_error(custom, "domain.onnx")
                .find("node 'mine' (Relu): operator of domain 'com.example' is not supported"),
            std::string::npos);
}

TEST(OnnxImport, FilesThatAreNoModelAreOneLineInputErrors) {
  const std::string real = classifier().write(temp_path("real.onnx"));
  std::ifstream in(real, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto write = [](const std::string& name, const std::string& content) {
    std::ofstream(temp_path(name), std::ios::binary) << content;
    return temp_path(name);
  };
  EXPECT_NE(import_error(write("empty.onnx", "")).find("an empty file"), std::string::npos);
  EXPECT_NE(import_error(write("half.onnx", bytes.substr(0, bytes.size() / 2)))
                .find("not an ONNX model (the protobuf decoder rejects it"),
            std::string::npos);
  // Every prefix of a model is refused or imports; none crashes.
  for (std::size_t size = 1; size < bytes.size(); size += 7) {
    try {
      (void)import_model(write("prefix.onnx", bytes.substr(0, size)));
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::kInput);
    }
  }
  (void)import_error(write("text.onnx", "ir_version: 7\ngraph { node { op_type: \"Relu\" } }\n"));
  EXPECT_NE(import_error(write("model.txt", bytes)).find("not a model file carb reads"),
            std::string::npos);
  std::filesystem::create_directories(temp_path("folder.onnx"));
  EXPECT_NE(import_error(temp_path("folder.onnx")).find("not a regular file"), std::string::npos);
  EXPECT_NE(import_error(temp_path("missing.onnx")).find("cannot open: No such file"),
            std::string::npos);
  onnx::ModelProto no_graph;
  no_graph.set_ir_version(7);
  EXPECT_NE(import_error(write("nograph.onnx", no_graph.SerializeAsString()))
                .find("an ONNX model without a graph"),
            std::string::npos);
}

// A graph whose nodes hold each malformation; each is an input error naming the node.
TEST(OnnxImport, MalformedGraphsAreInputErrorsNamingTheNode) {
  struct Case {
    std::string name;
    std::function<void(OnnxBuilder&)> build;
    std::string expected;  // a part of the message
  };
  const std::vector<Case> cases = {
      {"forward reference",
       [](OnnxBuilder& m) {
         m.node("Relu", {"later"}, {"r"});
         m.node("Relu", {"input"}, {"later"});
         m.output("r");
       },
       "node 'r' (Relu): reads 'later', which no node before it defines"},
      {"cycle",
       [](OnnxBuilder& m) {
         m.node("Add", {"input", "b"}, {"a"});
         m.node("Relu", {"a"}, {"b"});
         m.output("b");
       },
       "node 'a' (Add): reads 'b', which no node before it defines"},
      {"redefinition",
       [](OnnxBuilder& m) {
         m.node("Relu", {"input"}, {"r"});
         m.node("Sigmoid", {"input"}, {"r"}, "again");
         m.output("r");
       },
       "node 'again' (Sigmoid): defines 'r' again"},
      {"huge weight dims",
       [](OnnxBuilder& m) {
         m.node("Conv", {"input", m.weight("w", {std::int64_t{1} << 40, 3, 3, 3})}, {"c"});
         m.output("c");
       },
       "node 'c' (Conv): weight dims or group out of range"},
      {"negative weight dims",
       [](OnnxBuilder& m) {
         m.node("Conv", {"input", m.weight("w", {-8, 3, 3, 3})}, {"c"});
         m.output("c");
       },
       "node 'c' (Conv): weight dims or group out of range"},
      {"enormous group count",
       [](OnnxBuilder& m) {
         for (onnx::AttributeProto& a : *m.conv("input", "c", 3, 6, 1).mutable_attribute()) {
           if (a.name() == "group") a.set_i(std::int64_t{1} << 40);
         }
         m.output("c");
       },
       "node 'c' (Conv): weight dims or group out of range"},
      {"groups that do not split the input",
       [](OnnxBuilder& m) {
         m.node("Conv", {"input", m.weight("w", {4, 1, 1, 1})}, {"c"});
         OnnxBuilder::attribute(m.graph()->mutable_node(0)[0], "group", std::int64_t{2});
         m.output("c");
       },
       "node 'c' (Conv): its weight takes 2 input channels, its input has 3"},
      {"window larger than the input",
       [](OnnxBuilder& m) {
         m.conv("input", "c", 3, 4, 11);
         m.output("c");
       },
       "node 'c' (Conv): gets an input of 1x3x8x8, too small for its 11x11 window"},
      {"shape arithmetic that overflows",
       [](OnnxBuilder& m) {
         m.node("Mul", {m.ints("big", {std::numeric_limits<std::int64_t>::max()}), "big"},
                {"square"});
         m.node("Reshape", {"input", "square"}, {"r"});
         m.output("r");
       },
       "node 'r' (Reshape): reshape to [9223372036854775807] is not supported"},
      {"a constant that doubles past the limit",
       [](OnnxBuilder& m) {
         std::string last = m.ints("c0", {1, 2, 3, 4});
         for (int i = 1; i <= 12; ++i) {
           const std::string next = "c" + std::to_string(i);
           m.node("Concat", {last, last}, {next});
           last = next;
         }
         m.node("Reshape", {"input", last}, {"r"});
         m.output("r");
       },
       "node 'c11' (Concat): computes a constant of more than 4096 values at import"},
      {"a huge constant of a shape",
       [](OnnxBuilder& m) {
         m.node("ConstantOfShape", {m.ints("shape", {1 << 20, 1 << 20})}, {"zeros"});
         m.output("zeros");
       },
       "node 'zeros' (ConstantOfShape): its shape is negative or too large"},
      {"pads piled past the limit",
       [](OnnxBuilder& m) {
         const std::string pads = m.ints("pads", {0, 0, 4000, 4000, 0, 0, 4000, 4000});
         m.node("Pad", {"input", pads}, {"p1"});
         m.node("Pad", {"p1", pads}, {"p2"});
         m.output("p2");
       },
       "node 'p2' (Pad): only zero padding of H and W, equal in both, 0 to 4096"},
      {"channels concatenated past 2^30",
       [](OnnxBuilder& m) {
         m.conv("input", "x", 3, 1 << 20, 1);
         std::string last = "x";
         for (int i = 0; i < 11; ++i) {
           const std::string next = "cat" + std::to_string(i);
           m.node("Concat", {last, last}, {next});
           OnnxBuilder::attribute(m.graph()->mutable_node(m.graph()->node_size() - 1)[0], "axis",
                                  std::int64_t{1});
           last = next;
         }
         m.output(last);
       },
       "node 'cat10' (Concat): makes more than 2^30 channels"},
      {"a gather out of range",
       [](OnnxBuilder& m) {
         m.node("Shape", {"input"}, {"s"});
         m.node("Gather", {"s", m.ints("i", {std::numeric_limits<std::int64_t>::min()}, true)},
                {"g"});
         m.output("g");
       },
       "node 'g' (Gather): index -9223372036854775808 is out of range"},
      {"a clip bound that is not a number",
       [](OnnxBuilder& m) {
         m.node("Clip", {"input", m.scalar("nan", std::nanf(""))}, {"c"});
         m.output("c");
       },
       "node 'c' (Clip): a bound is not a number"},
      {"a hard sigmoid of infinite slope",
       [](OnnxBuilder& m) {
         OnnxBuilder::attribute_float(m.node("HardSigmoid", {"input"}, {"h"}), "alpha",
                                      std::numeric_limits<float>::infinity());
         m.output("h");
       },
       "node 'h' (HardSigmoid): alpha and beta must be finite"},
      {"a name that breaks lines",
       [](OnnxBuilder& m) {
         m.node("Softmax", {"input"}, {"s"}, "two\nlines\x01\xff");
         m.output("s");
       },
       "node 'two\\x0alines\\x01\\xff' (Softmax)"},
      {"a batch norm of the wrong width",
       [](OnnxBuilder& m) {
         const std::string v = m.weight("v", {4});
         m.node("BatchNormalization", {"input", v, v, v, v}, {"bn"});
         m.output("bn");
       },
       "node 'bn' (BatchNormalization): its scale and bias is not 3 values"},
      {"an input that is only a weight",
       [](OnnxBuilder& m) {
         m.node("Relu", {m.weight("w", {1, 3, 8, 8})}, {"r"});
         m.output("r");
       },
       "node 'r' (Relu): input 1 is not a computed tensor"},
      {"no node computes the output", [](OnnxBuilder& m) { m.output("nowhere"); },
       "its output 'nowhere' is not computed by any node"},
      {"the output is the input", [](OnnxBuilder& m) { m.output("input"); },
       "its output 'input' is not a computed tensor"},
  };
  for (const Case& c : cases) {
    OnnxBuilder m(3, 8);
    c.build(m);
    const std::string what = built_error(m, "malformed.onnx");
    EXPECT_NE(what.find(c.expected), std::string::npos) << c.name << ": " << what;
  }
}

TEST(OnnxImport, InputsThatAreNoImageAreRefused) {
  OnnxBuilder wide(3, 8);
  wide.graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(3)
      ->set_dim_value(9);
  wide.node("Relu", {"input"}, {"r"});
  wide.output("r");
  EXPECT_NE(built_error(wide).find("its input 'input' is 8x9; carb takes square inputs"),
            std::string::npos);
  OnnxBuilder huge(1 << 20, 8);
  huge.node("Relu", {"input"}, {"r"});
  huge.output("r");
  EXPECT_NE(built_error(huge).find("implausibly large"), std::string::npos);
  OnnxBuilder old(3, 8, 7);
  old.node("Relu", {"input"}, {"r"});
  old.output("r");
  EXPECT_NE(built_error(old).find("opset 7; carb reads opsets 9 to 18"), std::string::npos);
}

TEST(OnnxImport, DeeplyNestedAttributesAreRefusedNotRecursedInto) {
  OnnxBuilder m = classifier();
  onnx::NodeProto& node = *m.graph()->mutable_node(2);
  onnx::GraphProto* graph = node.add_attribute()->mutable_g();
  for (int depth = 0; depth < 2000; ++depth) {
    graph = graph->add_node()->add_attribute()->mutable_g();
  }
  EXPECT_NE(built_error(m, "nested.onnx").find("not an ONNX model"), std::string::npos);
}

// The fuzz target's seeds are PyTorch 1.13 exports of small modules (scripts/onnx_zoo.py --tiny):
// real exporter output for each operator and fusion, so these run without PyTorch.
TEST(OnnxImport, SmallPyTorchExportsImportAsTheirModules) {
  const std::string corpus = std::string(CARB_SOURCE_DIR) + "/fuzz/corpus/onnx/";
  const auto import_seed = [&](const std::string& name) {
    const std::string path = temp_path(name + ".onnx");
    std::filesystem::copy_file(corpus + name, path,
                               std::filesystem::copy_options::overwrite_existing);
    return import_model(path);
  };
  const auto count = [](const Architecture& a, LayerKind kind) {
    return std::count_if(a.layers.begin(), a.layers.end(),
                         [kind](const Layer& l) { return l.kind == kind; });
  };
  const Architecture conv_bn = import_seed("conv_bn_relu");
  EXPECT_EQ(kinds(conv_bn),
            (std::vector<LayerKind>{LayerKind::kConv, LayerKind::kBatchNorm, LayerKind::kRelu,
                                    LayerKind::kMaxPool, LayerKind::kGlobalAvgPool,
                                    LayerKind::kFullyConnected}));
  // conv 4x3x3x3, batch norm 2 x 4, fc 4 x 3 + 3, as torch counts them
  EXPECT_EQ(compute_features(native_network(conv_bn)).params, 108 + 8 + 15);
  const Architecture folded = import_seed("conv_bn_relu_folded");
  EXPECT_EQ(count(folded, LayerKind::kBatchNorm), 0);
  EXPECT_TRUE(folded.layers[0].bias);  // the batch norm's shift became the conv's bias
  EXPECT_EQ(compute_features(native_network(folded)).params, 108 + 4 + 15);
  EXPECT_NE(folded.hash, conv_bn.hash);

  // Hard swish: HardSigmoid times its input at opset 13, HardSwish at 17: one architecture.
  const Architecture mobile = import_seed("mobile");
  EXPECT_EQ(count(mobile, LayerKind::kHardSwish), 1);
  EXPECT_EQ(count(mobile, LayerKind::kHardSigmoid), 1);  // the squeeze-excite gate
  EXPECT_EQ(count(mobile, LayerKind::kClip), 1);
  EXPECT_EQ(count(mobile, LayerKind::kMul), 1);
  EXPECT_EQ(import_seed("mobile_o17").hash, mobile.hash);
  EXPECT_EQ(class_count(mobile, LayerClass::kConvDepthwise), 1);

  const Architecture swish = import_seed("swish");
  EXPECT_EQ(count(swish, LayerKind::kSwish), 1);
  EXPECT_EQ(count(swish, LayerKind::kSigmoid), 1);  // the gate
  EXPECT_EQ(swish.layers.back().kind, LayerKind::kFullyConnected);
  EXPECT_TRUE(swish.layers.back().bias);  // MatMul + Add
  EXPECT_EQ(swish.layers[0].dilation, 2);

  const Architecture shuffle = import_seed("shuffle");
  EXPECT_EQ(count(shuffle, LayerKind::kChannelShuffle), 1);
  EXPECT_EQ(count(shuffle, LayerKind::kSlice), 2);
  EXPECT_EQ(count(shuffle, LayerKind::kConcat), 1);
  EXPECT_EQ(class_count(shuffle, LayerClass::kConvGrouped), 1);

  // ZeroPad2d exports its pads as ConstantOfShape, Concat, Reshape, a reversing Slice,
  // Transpose, Reshape and Cast: evaluated at import, then folded into the conv.
  const Architecture dense = import_seed("dense");
  EXPECT_EQ(count(dense, LayerKind::kConcat), 2);
  EXPECT_EQ(count(dense, LayerKind::kAvgPool), 1);
  const auto padded_conv =
      std::find_if(dense.layers.begin(), dense.layers.end(), [](const Layer& l) {
        return l.kind == LayerKind::kConv && l.kernel == 3 && l.padding == 1 && l.channels == 3;
      });
  ASSERT_NE(padded_conv, dense.layers.end());
  const auto max_pool = std::find_if(dense.layers.begin(), dense.layers.end(),
                                     [](const Layer& l) { return l.kind == LayerKind::kMaxPool; });
  ASSERT_NE(max_pool, dense.layers.end());
  EXPECT_TRUE(max_pool->ceil_mode);
  // 16 px -> average pool 8 -> padded 10 -> conv 8 -> max pool 3x3/2, ceil: 4
  EXPECT_EQ(native_network(dense).tensors[static_cast<std::size_t>(max_pool->output)],
            (Shape{1, 3, 4, 4}));

  const Architecture head = import_seed("classifier");
  EXPECT_EQ(head.layers.back().fc_inputs, 2 * 8 * 8);
  EXPECT_FALSE(head.layers[2].count_include_pad);
  try {
    (void)build_network(
        imported_config(*find_architecture(register_architecture(head)), 32, 1, Precision::kFp32));
    ADD_FAILURE() << "a fixed-input classifier built at 32 px";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("(fc) has weights for 128 inputs but gets 1x2x16x16"),
              std::string::npos)
        << error.what();
  }

  const std::string softmax = temp_path("unsupported_softmax.onnx");
  std::filesystem::copy_file(corpus + "unsupported_softmax", softmax,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_NE(import_error(softmax).find("(Softmax): operator Softmax is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace carb
