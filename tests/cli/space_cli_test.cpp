// Runs the carb binary: outputs, and one clear error line with exit code 2 for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run.hpp"

namespace {

using carb_test::CommandResult;
using carb_test::run;

std::string examples(const std::string& name) {
  return std::string(CARB_SOURCE_DIR) + "/examples/spaces/" + name;
}

std::string write_spec(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

int line_count(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(SpaceCli, CountsThePaperSpace) {
  const CommandResult result =
      run("space count --spec " + examples("paper.yaml") + " --format csv");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_EQ(result.out, "space,grid_points,constraints,points\npaper,17280,none,17280\n");
}

TEST(SpaceCli, FeaturesCsvHasTheDocumentedHeader) {
  const CommandResult result =
      run("space features --spec " + examples("torchvision.yaml") + " --format csv");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_EQ(result.out.rfind(
                "key,architecture,block,depth,width,early_downsample,resolution,batch,precision,"
                "params,macs,"
                "flops,param_bytes,activation_bytes,peak_activation_bytes,arithmetic_intensity,",
                0),
            0u)
      << result.out;
  EXPECT_NE(result.out.find("\nbasic18_w1_ds_r224_b1_fp32,,basic,18,1,true,224,1,fp32,11689512,"
                            "1814073344,3628146688,"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(line_count(result.out), 6);
}

TEST(SpaceCli, SampleIsSeededAndHonoursConstraints) {
  const std::string arguments = "space list --spec " + examples("cpu-demo.yaml") +
                                " --sample 20 --seed 3 --sampling stratified --format csv";
  const CommandResult first = run(arguments);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_EQ(line_count(first.out), 21);
  EXPECT_EQ(run(arguments).out, first.out);
  const CommandResult features = run("space features --spec " + examples("cpu-demo.yaml") +
                                     " --sample 50 --seed 3 --format json");
  ASSERT_EQ(features.exit_code, 0);
  const auto rows = nlohmann::json::parse(features.out);
  ASSERT_EQ(rows.size(), 50u);
  for (const auto& row : rows) EXPECT_LE(row["flops"].get<double>(), 5.0e9) << row["key"];
}

TEST(SpaceCli, ShowPrintsLayersAndRoofline) {
  const CommandResult layers =
      run("space show bottleneck50_w1_ds_r224_b1_fp32 --layers --format csv");
  ASSERT_EQ(layers.exit_code, 0) << layers.out;
  EXPECT_EQ(line_count(layers.out), 1 + 174);
  EXPECT_NE(
      layers.out.find("layer4.2.conv3,conv,1x512x7x7,1x2048x7x7,1,1,0,1048576,51380224,false"),
      std::string::npos)
      << layers.out;
  const CommandResult roofline =
      run("space show basic18_w1_ds_r224_b1_fp32 --roofline 67:3350 --format json");
  ASSERT_EQ(roofline.exit_code, 0) << roofline.out;
  EXPECT_NE(roofline.out.find("\"roofline_ms\":"), std::string::npos);
  // A ResNet has knobs but no architecture name: null in JSON.
  EXPECT_NE(roofline.out.find("\"architecture\":null,\"block\":\"basic\""), std::string::npos)
      << roofline.out;
}

TEST(SpaceCli, BadInputGetsOneLineAndExitCodeTwo) {
  const std::string bad_yaml =
      write_spec("bad.yaml", "block: basic\ndepth: 18\nresolution: 64\nwidht: 1\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"space count --spec " + bad_yaml,
       "carb: error: " + bad_yaml + ":4:1: unknown knob 'widht' (did you mean 'width'?)"},
      {"space count --spec /nonexistent.yaml",
       "carb: error: /nonexistent.yaml: cannot open spec file"},
      {"space show basic19_w1_ds_r224_b1_fp32",
       "carb: error: key 'basic19_w1_ds_r224_b1_fp32': depth 19 cannot be built"},
      {"space show basic18_w1_ds_r224_b1_fp32 --roofline fast", "roofline device 'fast'"},
      {"space count", "--spec is required"},
      {"space list --spec " + examples("paper.yaml") + " --format xml", "--format"},
      {"space frobnicate", "frobnicate"},
      {"space", "give a verb: count, list, show or features"},
      {"", "give a verb"},
  };
  for (const auto& [arguments, expected] : cases) {
    const CommandResult result = run(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.out;
    EXPECT_NE(result.out.find(expected), std::string::npos) << arguments << "\n" << result.out;
    EXPECT_EQ(result.out.rfind("carb: error: ", 0), 0u) << result.out;
  }
}

}  // namespace
