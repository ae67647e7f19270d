// carb space show --onnx, run as a user runs it: the features of an exported model as JSON, and
// one error line with exit code 2 for a file carb cannot import.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "../onnx_builder.hpp"
#include "run.hpp"
#include "zoo.hpp"

namespace {

using carb_test::CommandResult;
using carb_test::run;
using carb_test::zoo_file;

std::string temp_path(const std::string& name) { return testing::TempDir() + name; }

// `carb space show --onnx FILE` fails with exactly `carb: error: ` + `message` and exit code 2.
void expect_one_line_error(const std::string& file, const std::string& message) {
  const CommandResult result = run("space show --onnx '" + file + "' --format json");
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_EQ(result.out, "carb: error: " + message + "\n");
}

TEST(OnnxCli, ShowsTheFeaturesOfAnExport) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  const nlohmann::json& truths = carb_test::zoo_truths()["models"];
  const CommandResult shown =
      run("space show --onnx " + zoo_file("resnet50-bn.onnx") + " --format json", false);
  ASSERT_EQ(shown.exit_code, 0) << shown.out;
  const nlohmann::json rows = nlohmann::json::parse(shown.out);
  ASSERT_EQ(rows.size(), 1u);
  const nlohmann::json& row = rows[0];
  EXPECT_EQ(row["params"], truths["resnet50"]["params"]);
  EXPECT_EQ(row["macs"], truths["resnet50"]["macs"]["224"]);
  EXPECT_EQ(row["flops"].get<std::int64_t>(), 2 * row["macs"].get<std::int64_t>());
  EXPECT_EQ(row["resolution"], 224);
  EXPECT_EQ(row["batch"], 1);
  EXPECT_EQ(row["key"].get<std::string>().rfind("graph-", 0), 0u) << row["key"];
  EXPECT_NE(row["key"].get<std::string>().find("_r224_b1_fp32"), std::string::npos);
  EXPECT_EQ(row["architecture"], "resnet50-bn");
  // The ResNet knobs an imported network does not have are null, not "" or 0.
  for (const char* knob : {"block", "width", "early_downsample"}) {
    EXPECT_TRUE(row[knob].is_null()) << knob << ": " << row[knob];
  }

  // At another resolution and batch: the MACs PyTorch's hooks count at 160 px, times 4.
  const CommandResult other = run("space show --onnx " + zoo_file("mobilenet_v2-bn.onnx") +
                                      " --resolution 160 --batch 4 --format json",
                                  false);
  ASSERT_EQ(other.exit_code, 0) << other.out;
  const nlohmann::json small = nlohmann::json::parse(other.out).at(0);
  EXPECT_EQ(small["params"], truths["mobilenet_v2"]["params"]);
  EXPECT_EQ(small["macs"].get<std::int64_t>(),
            4 * truths["mobilenet_v2"]["macs"]["160"].get<std::int64_t>());
  EXPECT_NE(small["key"].get<std::string>().find("_r160_b4_fp32"), std::string::npos);
}

// carb kernels --onnx: the model's kernels, each computing its share of torchvision's MACs.
TEST(OnnxCli, KernelsOfAnExportCarryAllItsMacs) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  const nlohmann::json& truths = carb_test::zoo_truths()["models"];
  const CommandResult result = run("kernels --onnx " + zoo_file("mobilenet_v2-bn.onnx") +
                                       " --resolution 160 --batch 2 --passes 2 --warmup 1 "
                                       "--format json",
                                   false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const nlohmann::json rows = nlohmann::json::parse(result.out);
  ASSERT_GT(rows.size(), 50u);  // 52 convs fused with their batch norms and ReLU6s, pool, fc
  std::int64_t macs = 0;
  int depthwise = 0;
  for (const nlohmann::json& row : rows) {
    EXPECT_NE(row["key"].get<std::string>().find("_r160_b2_fp32"), std::string::npos);
    macs += row["macs"].get<std::int64_t>();
    if (row["class"] == "conv_depthwise") ++depthwise;
  }
  EXPECT_EQ(macs, 2 * truths["mobilenet_v2"]["macs"]["160"].get<std::int64_t>());
  EXPECT_EQ(depthwise, 17);
}

TEST(OnnxCli, ClassifierAtAnotherResolutionIsOneLineNamingTheFcLayer) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  const CommandResult result =
      run("space show --onnx " + zoo_file("vgg11-bn.onnx") + " --resolution 160");
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_EQ(carb_test::lines(result.out), 1) << result.out;
  EXPECT_NE(result.out.find("layer /classifier/classifier.0/Gemm (fc) has weights for 25088 "
                            "inputs but gets 1x512x5x5"),
            std::string::npos)
      << result.out;
}

TEST(OnnxCli, TruncatedExportIsOneLine) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  std::ifstream in(zoo_file("squeezenet1_1-bn.onnx"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string half = temp_path("half-squeezenet.onnx");
  std::ofstream(half, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_one_line_error(half, half +
                                  ": not an ONNX model (the protobuf decoder rejects it: "
                                  "truncated or another format)");
}

TEST(OnnxCli, UnsupportedOperatorIsOneLineNamingNodeAndOp) {
  carb_test::OnnxBuilder model(3, 8);
  model.conv("input", "features", 3, 4, 3);
  model.node("Softmax", {"features"}, {"probabilities"}, "/head/Softmax");
  model.output("probabilities");
  const std::string path = model.write(temp_path("softmax.onnx"));
  expect_one_line_error(path, path +
                                  ": node '/head/Softmax' (Softmax): operator Softmax is not "
                                  "supported (docs/onnx.md lists those that are)");
  carb_test::OnnxBuilder lstm(3, 8);
  lstm.node("LSTM", {"input", lstm.weight("w", {1, 16, 3}), lstm.weight("r", {1, 16, 4})}, {"y"},
            "rnn");
  lstm.output("y");
  const std::string lstm_path = lstm.write(temp_path("lstm.onnx"));
  expect_one_line_error(lstm_path, lstm_path +
                                       ": node 'rnn' (LSTM): operator LSTM is not supported "
                                       "(docs/onnx.md lists those that are)");
}

TEST(OnnxCli, FilesThatAreNoModelAreOneLineNeverACrash) {
  const std::string empty = temp_path("empty.onnx");
  std::ofstream(empty).close();
  expect_one_line_error(empty, empty + ": an empty file, not an ONNX model");
  const std::string text = temp_path("notes.onnx");
  std::ofstream(text) << "These are notes, not a model.\n";
  const CommandResult result = run("space show --onnx " + text);
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_EQ(carb_test::lines(result.out), 1) << result.out;
  EXPECT_EQ(result.out.rfind("carb: error: " + text + ": ", 0), 0u) << result.out;
  const std::string folder = temp_path("folder.onnx");
  std::filesystem::create_directories(folder);
  expect_one_line_error(folder, folder + ": not a regular file");
  const std::string missing = temp_path("missing.onnx");
  expect_one_line_error(missing, missing + ": cannot open: No such file or directory");
  const std::string other = temp_path("model.pt");
  std::ofstream(other) << "x";
  expect_one_line_error(other, other + ": not a model file carb reads (ONNX, *.onnx)");
}

}  // namespace
