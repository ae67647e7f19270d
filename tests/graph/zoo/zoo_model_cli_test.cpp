// Imported networks through the whole tool, as a user runs it: the zoo campaign
// (data/cpu-zoo.sqlite.xz: torchvision's families measured on carb's CPU engine beside a ResNet
// sample) fitted with one family held out, then predict, screen, characterize and report on
// imported configurations, from the fixture's ONNX exports (scripts/onnx_zoo.py).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "run.hpp"
#include "zoo.hpp"

namespace {

using carb_test::CommandResult;
using carb_test::run;
using carb_test::zoo_file;

class ZooModelCli : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test in its own process, two at a time: names unique to this process.
    start = testing::TempDir() + "zoo-model-cli-" + std::to_string(::getpid());
    db = start + ".sqlite";
    model = start + ".json";
    const std::string unpack =
        "xz -dc " + std::string(CARB_SOURCE_DIR) + "/data/cpu-zoo.sqlite.xz > " + db;
    ASSERT_EQ(std::system(unpack.c_str()), 0);
    fit = run("fit --db " + db + " --hold-out squeezenet1_1-bn -o " + model +
                  " --forest-trees 16 --threads 1 --format json",
              false);
  }
  static std::string start, db, model;
  static CommandResult fit;
};
std::string ZooModelCli::start, ZooModelCli::db, ZooModelCli::model;
CommandResult ZooModelCli::fit;

// A spec at `path` over two of the zoo's exports, squeezenet (held out) and mobilenet_v2, at 96
// and 160 px and batches 1 and 4: 8 configurations the campaign measured.
std::string two_models(const std::string& path) {
  std::ofstream(path) << "name: two-models\nmodels:\n  - " << zoo_file("squeezenet1_1-bn.onnx")
                      << "\n  - " << zoo_file("mobilenet_v2-bn.onnx")
                      << "\nresolution: [96, 160]\nbatch: [1, 4]\n";
  return path;
}

// The carb row of a fit's or evaluation's scores for `target`.
nlohmann::json carb_scores(const nlohmann::json& scores, const std::string& target) {
  for (const auto& s : scores) {
    if (s.at("method") == "carb" && s.at("target") == target) return s.at("metrics");
  }
  ADD_FAILURE() << "no carb scores of " << target;
  return {};
}

TEST_F(ZooModelCli, HoldsOutAFamilyAndPredictsItFromTheOthers) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const auto summary = nlohmann::json::parse(fit.out);
  EXPECT_EQ(summary.at("rows"), 555);
  // The test rows are squeezenet's 25 (5 resolutions x 5 batches), none of them fitted on.
  const nlohmann::json latency = carb_scores(summary.at("scores"), "latency");
  EXPECT_EQ(latency.at("n"), 25);
  // A family never seen: the additive layer-cost base keeps the error bounded (the ridge base
  // extrapolated squeezenet to thousands of times its latency) and the order right.
  EXPECT_LT(latency.at("mape").get<double>(), 50.0);
  EXPECT_GT(latency.at("spearman").get<double>(), 0.95);
  // Its intervals are a new family's, calibrated on how far the other families lie from an
  // additive base fitted without each: they cover it (its own family's intervals covered 1-4%).
  EXPECT_GE(latency.at("coverage").get<double>(), 80.0);
  EXPECT_LT(carb_scores(summary.at("scores"), "memory").at("mape").get<double>(), 30.0);

  const CommandResult unknown =
      run("fit --db " + db + " --hold-out lenet -o " + start + "-bad.json");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("no rows of family 'lenet' to hold out; the data's families: "
                             "densenet121-bn, efficientnet_b0-bn,"),
            std::string::npos)
      << unknown.out;
}

TEST_F(ZooModelCli, PredictsAndScreensASpaceOfModelFiles) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const std::string spec = two_models(start + "-models.yaml");
  const CommandResult predicted =
      run("predict --model " + model + " --spec " + spec + " --format json", false);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.out;
  const auto rows = nlohmann::json::parse(predicted.out);
  ASSERT_EQ(rows.size(), 8U) << predicted.out;
  std::set<std::string> names;
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("key").get<std::string>().rfind("graph-", 0), 0U) << row;
    names.insert(row.at("architecture").get<std::string>());
    EXPECT_GT(row.at("latency_ms").get<double>(), 0) << row;
    EXPECT_GT(row.at("memory_B").get<double>(), 0) << row;
    EXPECT_LE(row.at("latency_ms_low").get<double>(), row.at("latency_ms").get<double>()) << row;
  }
  // Each imported network by its file's name beside its key.
  EXPECT_EQ(names, (std::set<std::string>{"squeezenet1_1-bn", "mobilenet_v2-bn"}));
  // One of those keys again: alone it names an architecture this run never imported; with the
  // spec its model files are imported and it predicts as above.
  const std::string key = rows.at(3).at("key").get<std::string>();
  const CommandResult alone = run("predict --model " + model + " " + key);
  EXPECT_EQ(alone.exit_code, 2) << alone.out;
  EXPECT_NE(alone.out.find("is not loaded: import its model file"), std::string::npos) << alone.out;
  const CommandResult keyed =
      run("predict --model " + model + " --spec " + spec + " --format json " + key, false);
  ASSERT_EQ(keyed.exit_code, 0) << keyed.out;
  const auto one = nlohmann::json::parse(keyed.out);
  ASSERT_EQ(one.size(), 1U) << keyed.out;
  EXPECT_EQ(one.at(0).at("key"), key);
  EXPECT_DOUBLE_EQ(one.at(0).at("latency_ms").get<double>(),
                   rows.at(3).at("latency_ms").get<double>());
  EXPECT_EQ(run("predict --model " + model + " --spec " + spec + " --sample 2 " + key).exit_code,
            2);

  const std::string front = start + "-front.csv";
  const CommandResult screened = run("screen --model " + model + " --spec " + spec +
                                     " --budget 'latency<=1000ms' -o " + front);
  ASSERT_EQ(screened.exit_code, 0) << screened.out;
  EXPECT_NE(screened.out.find("screened 8 configurations"), std::string::npos) << screened.out;
  // The shortlist names each imported network beside its hash key.
  EXPECT_NE(screened.out.find("rank  key"), std::string::npos) << screened.out;
  EXPECT_NE(screened.out.find("architecture"), std::string::npos) << screened.out;
  EXPECT_NE(screened.out.find("squeezenet1_1-bn"), std::string::npos) << screened.out;
  // squeezenet was held out: whatever its features, its predictions extrapolate, and say so.
  EXPECT_NE(screened.out.find("whose family squeezenet1_1-bn the model never saw (it saw "
                              "densenet121-bn, efficientnet_b0-bn,"),
            std::string::npos)
      << screened.out;
  const CommandResult warned = run("predict --model " + model + " --spec " + spec);
  EXPECT_NE(warned.out.find("warning: 4 of 8 configurations lie outside the data"),
            std::string::npos)
      << warned.out;
  EXPECT_NE(warned.out.find("whose family squeezenet1_1-bn the model never saw"), std::string::npos)
      << warned.out;
  const std::string csv = carb_test::slurp(front);
  EXPECT_NE(csv.find("graph-"), std::string::npos) << csv;
  // An imported network has no width: maximizing it is one error line, not a value of 0.
  const CommandResult widest = run("screen --model " + model + " --spec " + spec +
                                   " --budget 'latency<=1000ms' --maximize width");
  EXPECT_EQ(widest.exit_code, 2) << widest.out;
  EXPECT_EQ(carb_test::lines(widest.out), 1) << widest.out;
  EXPECT_NE(widest.out.find("--maximize width: graph-"), std::string::npos) << widest.out;
  EXPECT_NE(widest.out.find("has no width (8 of 8 candidates are imported networks"),
            std::string::npos)
      << widest.out;
}

// validate judges the budget as screening did: a family the model never saw (squeezenet, held
// out) by the new family's intervals, so its screening policy accepts what screening found
// feasible (with the model's own intervals it accepted 5 where screening had 3).
TEST_F(ZooModelCli, ValidateJudgesANewFamilyAsScreeningDid) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const std::string spec = two_models(start + "-validate.yaml");
  const std::string shortlist = start + "-validate.json";
  const CommandResult screened = run("screen --model " + model + " --spec " + spec +
                                     " --budget 'latency<=3ms' --json " + shortlist);
  ASSERT_EQ(screened.exit_code, 0) << screened.out;
  const auto counts = nlohmann::json::parse(carb_test::slurp(shortlist)).at("counts");
  EXPECT_EQ(counts.at("outside_training_domain").get<int>(), 4) << counts;
  const int feasible = counts.at("feasible").get<int>();
  const CommandResult validated = run("validate --shortlist " + shortlist + " --db " + db +
                                      " --model " + model + " --spec " + spec);
  ASSERT_EQ(validated.exit_code, 0) << validated.out;
  EXPECT_NE(validated.out.find("budget classification over 8 measured configurations (4 outside "
                               "the training domain"),
            std::string::npos)
      << validated.out;
  const std::string accepted = " of " + std::to_string(feasible) + " accepted)";
  const std::size_t widen = validated.out.find("outside-domain widen:");
  ASSERT_NE(widen, std::string::npos) << validated.out;
  const std::string line = validated.out.substr(widen, validated.out.find('\n', widen) - widen);
  EXPECT_NE(line.find(accepted), std::string::npos) << line << " | screening: " << feasible;
  EXPECT_NE(line.find("<- the screening's"), std::string::npos) << line;
}

// Asked to measure fewer rows of a family the model never saw than a transfer needs to
// correct more than one factor, profile --transfer-for says so before measuring; with enough,
// it does not.
TEST_F(ZooModelCli, TransferForWarnsOfTooFewRowsOfANewFamily) {
  if (const std::string why = carb_test::zoo_missing(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  const std::string spec = start + "-squeezenet.yaml";
  std::ofstream(spec) << "name: squeezenet\nmodels:\n  - " << zoo_file("squeezenet1_1-bn.onnx")
                      << "\nresolution: [96, 128]\nbatch: [1, 2]\n";
  const std::string warning =
      "warning: 2 of the chosen configurations are of squeezenet1_1-bn, a network family the "
      "source model never saw: from fewer than 4 its transfer is one factor";
  const CommandResult few = run("profile --spec " + spec + " --transfer-for " + model +
                                " --sample 2 --db " + start + "-few.sqlite --min-time 0.01");
  ASSERT_EQ(few.exit_code, 0) << few.out;
  EXPECT_NE(few.out.find(warning), std::string::npos) << few.out;
  const CommandResult enough = run("profile --spec " + spec + " --transfer-for " + model +
                                   " --sample 4 --db " + start + "-enough.sqlite --min-time 0.01");
  ASSERT_EQ(enough.exit_code, 0) << enough.out;
  EXPECT_EQ(enough.out.find("warning: "), std::string::npos) << enough.out;
  // The transfer from the two rows says it too.
  const CommandResult transferred = run("fit --from " + model + " --db " + start +
                                        "-few.sqlite -o " + start + "-few.json --threads 1");
  ASSERT_EQ(transferred.exit_code, 0) << transferred.out;
  EXPECT_NE(transferred.out.find("note: 2 rows of a network family the source never saw: one "
                                 "factor from them"),
            std::string::npos)
      << transferred.out;
}

TEST_F(ZooModelCli, CharacterizesAndReportsImportedNetworksByName) {
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  // The same campaign as if a second device had measured it at other speeds: the ratio between
  // the devices is grouped by architecture, the imported networks by their names.
  const std::string other = start + "-other.sqlite";
  std::filesystem::copy_file(db, other, std::filesystem::copy_options::overwrite_existing);
  carb_test::sql(other, "UPDATE devices SET fingerprint = fingerprint || ';copy'");
  carb_test::sql(other,
                 "UPDATE measurements SET wall_median_ms = wall_median_ms * 2, wall_mean_ms = "
                 "wall_mean_ms * 2, wall_p5_ms = wall_p5_ms * 2, wall_p95_ms = wall_p95_ms * 2");
  const CommandResult characterized =
      run("characterize --db " + db + " --db " + other + " --no-fit --json", false);
  ASSERT_EQ(characterized.exit_code, 0) << characterized.out;
  EXPECT_NE(characterized.out.find("\"knob\": \"architecture\",\n       \"value\": "
                                   "\"mobilenet_v2-bn\""),
            std::string::npos);
  EXPECT_NE(characterized.out.find("\"knob\": \"architecture\",\n       \"value\": \"resnet\""),
            std::string::npos);
  // Imported networks have no width: the width groups hold the ResNet sample's rows only.
  EXPECT_EQ(characterized.out.find("\"knob\": \"block\",\n       \"value\": \"basic\",\n"
                                   "       \"rows\": 555"),
            std::string::npos);

  const std::string html = start + "-report.html";
  const CommandResult reported = run("report --db " + db + " --model " + model + " -o " + html);
  ASSERT_EQ(reported.exit_code, 0) << reported.out;
  const std::string page = carb_test::slurp(html);
  EXPECT_NE(page.find("mobilenet_v2-bn"), std::string::npos);
  EXPECT_NE(page.find("densenet121-bn"), std::string::npos);
}

}  // namespace
