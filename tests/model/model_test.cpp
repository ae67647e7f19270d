// The predictor on tables whose truth is known, and its model file.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/store.hpp"

namespace carb {
namespace {

// A table of rows whose targets are known functions of the features: memory depends on a and b,
// latency on memory and c, with multiplicative noise of about 2%.
std::string known_table(int rows, std::uint64_t seed = 7) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::ostringstream csv;
  csv << "a,b,c,batch,memory,latency\n";
  for (int i = 0; i < rows; ++i) {
    const double a = 10 + 10 * unit(random);
    const double b = std::pow(2.0, static_cast<int>(unit(random) * 8));
    const double c = unit(random);
    const int batch = 1 << static_cast<int>(unit(random) * 7);
    const double memory = 1000 * a * b * (1 + 0.02 * (unit(random) - 0.5));
    const double latency =
        (memory / 1e4) * (1 + c) * std::sqrt(batch) * (1 + 0.04 * (unit(random) - 0.5));
    csv << a << "," << b << "," << c << "," << batch << "," << memory << "," << latency << "\n";
  }
  return csv.str();
}

TableSpec known_spec() {
  TableSpec spec;
  spec.features = {"a", "b", "c", "batch"};
  spec.targets = {parse_table_target("memory"), parse_table_target("latency=latency")};
  spec.stratify = {"batch"};
  spec.batch_column = "batch";
  return spec;
}

FitOptions quick_options() {
  FitOptions options;
  options.threads = 1;  // ctest runs two tests at once: no OpenMP oversubscription
  options.forest_trees = 16;
  return options;
}

const Metrics& scores_of(const std::vector<MethodScores>& scores, const std::string& method,
                         const std::string& target) {
  for (const MethodScores& s : scores) {
    if (s.method == method && s.target == target) return s.metrics;
  }
  ADD_FAILURE() << "no scores for " << method << " / " << target;
  static const Metrics none;
  return none;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid())))
      .string();
}

// --- CSV ----------------------------------------------------------------------------------

TEST(Csv, QuotedFieldsDoubledQuotesAndEmbeddedNewlines) {
  const CsvTable table =
      parse_csv("x,\"y, z\",w\n1,\"say \"\"hi\"\"\",\"two\nlines\"\r\n\n3,4,5", "t.csv");
  ASSERT_EQ(table.header, (std::vector<std::string>{"x", "y, z", "w"}));
  ASSERT_EQ(table.rows.size(), 2U);
  EXPECT_EQ(table.rows[0][1], "say \"hi\"");
  EXPECT_EQ(table.rows[0][2], "two\nlines");
  EXPECT_EQ(table.lines[0], 2);
  EXPECT_EQ(table.lines[1], 5);
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"3", "4", "5"}));
}

TEST(Csv, MalformedTextIsAnErrorAtItsPosition) {
  const auto message = [](std::string_view text) {
    try {
      parse_csv(text, "t.csv");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("a,b\n1,2,3\n"), "t.csv:2:1: 3 fields, the header has 2");
  EXPECT_EQ(message("a,b\n1,\"2\n"), "t.csv:2:1: a quoted field is never closed");
  EXPECT_EQ(message("a,b\n1,\"2\"x\n"), "t.csv:2:6: text after a closing quote");
  EXPECT_EQ(message(""), "t.csv:1:1: empty table, no header");
}

TEST(Table, BadCellsAndMissingColumnsNameTheirPlace) {
  const auto message = [](std::string_view text, const TableSpec& spec) {
    try {
      dataset_from_table(parse_csv(text, "t.csv"), spec);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  TableSpec spec;
  spec.features = {"a"};
  spec.targets = {parse_table_target("y")};
  EXPECT_EQ(message("a,y\n1,2\nx,3\n", spec), "t.csv:3:1: column 'a': 'x' is not a finite number");
  EXPECT_EQ(message("a,y\n1,2\n2,-3\n", spec), "t.csv:3:2: target 'y' is negative (-3)");
  EXPECT_EQ(message("a,y\n1,nan\n", spec), "t.csv:2:2: column 'y': 'nan' is not a finite number");
  EXPECT_EQ(message("a,z\n1,2\n", spec), "t.csv:1:1: no column 'y'; the table has: a, z");
  EXPECT_THROW(parse_table_target("=x"), Error);
}

// Errors about an option name it by its field (the Error's subject), never by a flag.
TEST(Table, OptionErrorsNameTheFieldAsTheirSubject) {
  const auto error_of = [](const auto& call) -> std::pair<std::string, std::string> {
    try {
      call();
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      return {e.what(), e.subject()};
    }
    return {"no error", ""};
  };
  using Result = std::pair<std::string, std::string>;
  EXPECT_EQ(error_of([] { (void)parse_table_target("y="); }),
            (Result{"target 'y=': expected NAME=COLUMN or COLUMN", "target"}));
  const CsvTable table = parse_csv(known_table(100), "t.csv");
  TableSpec no_features = known_spec();
  no_features.features.clear();
  EXPECT_EQ(error_of([&] { (void)dataset_from_table(table, no_features); }),
            (Result{"features: name at least one feature column", "features"}));
  TableSpec no_targets = known_spec();
  no_targets.targets.clear();
  EXPECT_EQ(error_of([&] { (void)dataset_from_table(table, no_targets); }),
            (Result{"targets: name at least one target", "targets"}));
  const Dataset data = dataset_from_table(table, known_spec());
  for (double coverage : {0.0, 1.0, 1.5}) {
    FitOptions options;
    options.coverage = coverage;
    EXPECT_EQ(error_of([&] { (void)Predictor::fit(data, options, nullptr); }),
              (Result{"coverage must be between 0 and 1 (exclusive)", "coverage"}))
        << coverage;
  }
}

TEST(Table, HeavyTailedFeaturesGoToLogSpace) {
  const Dataset data = dataset_from_table(parse_csv(known_table(100), "t.csv"), known_spec());
  EXPECT_EQ(data.feature_names, (std::vector<std::string>{"a", "log_b", "c", "log_batch"}));
  EXPECT_EQ(data.rows(), 100U);
  EXPECT_NEAR(data.row(0)[1], std::log1p(std::stod(parse_csv(known_table(100), "t").rows[0][1])),
              1e-5);
}

// --- Metrics --------------------------------------------------------------------------------

TEST(Metrics, KnownValues) {
  const std::vector<double> measured = {1, 2, 3, 4};
  const std::vector<double> predicted = {1.05, 1.9, 3, 5};
  const std::vector<double> low = {1, 1, 3.5, 4}, high = {2, 3, 4, 6};
  const Metrics m = score(measured, predicted, &low, &high);
  EXPECT_EQ(m.n, 4U);
  EXPECT_NEAR(m.mae, (0.05 + 0.1 + 0 + 1) / 4, 1e-12);
  EXPECT_NEAR(m.mape, 100 * (0.05 + 0.05 + 0 + 0.25) / 4, 1e-9);
  EXPECT_NEAR(m.within10, 75, 1e-9);
  EXPECT_NEAR(m.r2, 1 - (0.0025 + 0.01 + 0 + 1) / 5.0, 1e-12);
  EXPECT_NEAR(m.spearman, 1.0, 1e-12);
  EXPECT_NEAR(*m.coverage, 75, 1e-9);
  EXPECT_NEAR(*m.mean_width, (1 + 2 + 0.5 + 2) / 4.0, 1e-12);
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {3, 2, 2, 1}), -1.0, 1e-12);
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 0.8207826816681233, 1e-12);
}

// --- Fitting ----------------------------------------------------------------------------------

class Fitted : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    data = new Dataset(dataset_from_table(parse_csv(known_table(600), "known.csv"), known_spec()));
    predictor = new Predictor(Predictor::fit(*data, quick_options(), &report));
  }
  static void TearDownTestSuite() {
    delete predictor;
    delete data;
  }
  static Dataset* data;
  static Predictor* predictor;
  static FitReport report;
};
Dataset* Fitted::data = nullptr;
Predictor* Fitted::predictor = nullptr;
FitReport Fitted::report;

TEST_F(Fitted, SplitsSeventyFifteenFifteen) {
  const double n = 600;
  EXPECT_NEAR(report.train_rows / n, 0.70, 0.02);
  EXPECT_NEAR((report.validation_rows + report.calibration_rows) / n, 0.15, 0.02);
  EXPECT_NEAR(report.test_rows / n, 0.15, 0.02);
  EXPECT_EQ(report.train_rows + report.validation_rows + report.calibration_rows + report.test_rows,
            600U);
}

TEST_F(Fitted, LearnsKnownFunctionsWithCalibratedIntervals) {
  const Metrics& memory = scores_of(report.scores, "carb", "memory");
  const Metrics& latency = scores_of(report.scores, "carb", "latency");
  EXPECT_GT(memory.r2, 0.99);
  EXPECT_LT(memory.mape, 5);
  EXPECT_GT(latency.r2, 0.97);
  EXPECT_LT(latency.mape, 10);
  ASSERT_TRUE(latency.coverage.has_value());
  EXPECT_GT(*latency.coverage, 75);
  // Members and the specialist are scored in the same run, on the same test rows, and each
  // learns the known functions too.
  const Metrics& depthwise = scores_of(report.scores, "depthwise", "latency");
  const Metrics& specialist = scores_of(report.scores, "specialist", "latency");
  EXPECT_EQ(depthwise.n, latency.n);
  EXPECT_EQ(specialist.n, latency.n);
  EXPECT_GT(depthwise.r2, 0.95);
  EXPECT_LT(specialist.mape, 12);
}

TEST_F(Fitted, PredictionsCarryTheirIntervals) {
  const auto predictions = predictor->predict(data->x.data(), 50, data->batch.data());
  ASSERT_EQ(predictions.size(), 2U);
  for (const auto& target : predictions) {
    for (const TargetPrediction& p : target) {
      ASSERT_TRUE(p.available);
      EXPECT_LE(p.low, p.value);
      EXPECT_LE(p.value, p.high);
      EXPECT_GT(p.high, p.low);
    }
  }
}

// A fit decides from its rows' span which columns go through log1p (b spans 1-128: log_b). Rows
// of a narrower span are scored in the model's layout all the same: dataset_from_table would
// not log b there, and their feature schema would differ from the model's.
TEST_F(Fitted, ScoresATableOfANarrowerSpanInTheModelsLayout) {
  std::istringstream all(known_table(400, 9));
  std::string line, narrow;
  std::getline(all, line);
  narrow = line + "\n";
  while (std::getline(all, line)) {
    const std::string b =
        line.substr(line.find(',') + 1, line.find(',', line.find(',') + 1) - line.find(',') - 1);
    if (b == "8" || b == "16") narrow += line + "\n";
  }
  const CsvTable table = parse_csv(narrow, "narrow.csv");
  ASSERT_GT(table.rows.size(), 50u);
  ASSERT_NE(dataset_from_table(table, known_spec()).feature_names, predictor->feature_names());
  const Dataset rows = table_dataset_for(*predictor, table, "batch");
  EXPECT_EQ(rows.feature_names, predictor->feature_names());
  EXPECT_EQ(rows.x, table_feature_rows(*predictor, table).x);
  ASSERT_EQ(rows.y.size(), 2u);
  EXPECT_EQ(rows.y[0].size(), table.rows.size());
  EXPECT_EQ(rows.batch, dataset_from_table(table, known_spec()).batch);
  const auto scores = evaluate(*predictor, rows);
  EXPECT_LT(scores_of(scores, "carb", "memory").mape, 5.0);
  EXPECT_LT(scores_of(scores, "carb", "latency").mape, 15.0);
}

TEST_F(Fitted, TheModelFileRoundTripsExactly) {
  const std::string path = temp_path("model.json");
  predictor->save(path);
  const Predictor loaded = Predictor::load(path);
  std::filesystem::remove(path);
  const auto a = predictor->predict(data->x.data(), data->rows(), data->batch.data());
  const auto b = loaded.predict(data->x.data(), data->rows(), data->batch.data());
  for (std::size_t t = 0; t < a.size(); ++t) {
    for (std::size_t i = 0; i < a[t].size(); ++i) {
      ASSERT_EQ(a[t][i].value, b[t][i].value);
      ASSERT_EQ(a[t][i].high, b[t][i].high);
    }
  }
  EXPECT_EQ(loaded.feature_names(), predictor->feature_names());
  EXPECT_EQ(loaded.fit_report().scores.size(), report.scores.size());
}

TEST_F(Fitted, RecordsItsTrainingDomainAndSaysWhatLiesOutside) {
  const TrainingDomain& domain = predictor->training_domain();
  const auto& ranges = domain.ranges();
  ASSERT_EQ(ranges.size(), data->cols());
  for (std::size_t f = 0; f < data->cols(); ++f) {
    float low = data->row(0)[f], high = low;
    for (std::size_t i = 0; i < data->rows(); ++i) {
      low = std::min(low, data->row(i)[f]);
      high = std::max(high, data->row(i)[f]);
    }
    EXPECT_EQ(ranges[f].min, low) << f;
    EXPECT_EQ(ranges[f].max, high) << f;
  }
  // The joint space keeps every training row; at most 1% of them (the threshold is their 99th
  // percentile nearest-neighbour distance) lie farther than it from the nearest other row, and
  // a training row itself is at distance 0 from itself.
  ASSERT_TRUE(domain.joint());
  ASSERT_EQ(domain.rows(), data->rows());
  EXPECT_GT(domain.threshold(), 0);
  for (std::size_t i = 0; i < data->rows(); ++i) {
    const DomainJudgement judgement = domain.judge(data->row(i));
    ASSERT_TRUE(judgement.inside) << i;
    EXPECT_EQ(judgement.distance_ratio, 0) << i;
    EXPECT_EQ(domain.id(judgement.nearest), data->ids[i]) << i;
  }
  // One past either end of a feature lies outside, and says which feature and by how much.
  std::vector<float> row(data->row(0), data->row(0) + data->cols());
  row[1] = ranges[1].max + (ranges[1].max - ranges[1].min);
  DomainJudgement judgement = domain.judge(row.data());
  EXPECT_FALSE(judgement.inside);
  EXPECT_EQ(judgement.outside_feature, 1U);
  EXPECT_NEAR(judgement.box_excess, 1.0, 1e-6);
  EXPECT_NEAR(judgement.widening(), std::max(2.0, judgement.distance_ratio), 1e-6);
  EXPECT_NE(domain_text(domain, judgement, row.data(), data->feature_names)
                .find("whose " + data->feature_names[1] + " is "),
            std::string::npos);
  row[0] = ranges[0].min - 1;
  EXPECT_EQ(domain.judge(row.data()).outside_feature, 0U);
  // Inside every range but a combination far from every training row: outside jointly. Every
  // joint feature at the midpoint of two training rows that differ most is such a case only when
  // far; here, a row whose joint features are all at their extremes at once.
  std::vector<float> corner(data->row(0), data->row(0) + data->cols());
  for (std::size_t f = 0; f < data->cols(); ++f) {
    const bool joint_feature = std::find(domain.features().begin(), domain.features().end(),
                                         data->feature_names[f]) != domain.features().end();
    if (joint_feature) corner[f] = f % 2 == 0 ? ranges[f].min : ranges[f].max;
  }
  const DomainJudgement far = domain.judge(corner.data());
  EXPECT_EQ(far.outside_feature, kNoFeature);
  EXPECT_GT(far.distance_ratio, 1);
  EXPECT_FALSE(far.inside);
  EXPECT_NE(domain_text(domain, far, corner.data(), data->feature_names)
                .find("farther from the nearest fitted configuration ("),
            std::string::npos);
  // It survives the model file; a file without it (older carb) has no domain and no warning.
  const Predictor loaded = Predictor::from_json_text(predictor->to_json_text(), "m.json");
  ASSERT_EQ(loaded.training_domain().ranges().size(), ranges.size());
  EXPECT_EQ(loaded.training_domain().ranges()[1].max, ranges[1].max);
  EXPECT_EQ(loaded.training_domain().threshold(), domain.threshold());
  EXPECT_EQ(loaded.training_domain().judge(corner.data()).distance_ratio, far.distance_ratio);
  auto file = nlohmann::json::parse(predictor->to_json_text());
  file["training_domain"].erase("joint");
  const Predictor boxed = Predictor::from_json_text(file.dump(), "boxed.json");
  EXPECT_FALSE(boxed.training_domain().joint());
  EXPECT_TRUE(boxed.training_domain().judge(corner.data()).inside);
  file.erase("training_domain");
  const Predictor older = Predictor::from_json_text(file.dump(), "old.json");
  EXPECT_TRUE(older.training_domain().empty());
  EXPECT_TRUE(older.training_domain().judge(row.data()).inside);
  file["training_domain"] = {{"min", {1.0}}, {"max", {2.0}}};
  EXPECT_THROW(Predictor::from_json_text(file.dump(), "bad.json"), Error);
  file = nlohmann::json::parse(predictor->to_json_text());
  file["training_domain"]["joint"]["points"].erase(0);
  EXPECT_THROW(Predictor::from_json_text(file.dump(), "bad.json"), Error);
}

// The error loading `text` as the model file m.json gives (it must be an input error, exit 2),
// or "loaded" when it loads.
std::string model_load_error(const std::string& text) {
  try {
    (void)Predictor::from_json_text(text, "m.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  return "loaded";
}

TEST_F(Fitted, BrokenModelFilesAreInputErrors) {
  const std::string text = predictor->to_json_text();
  const auto message = model_load_error;
  // A broken file whose error names what is corrupt.
  const auto expect_corrupt = [&](const std::string& broken, const std::string& why) {
    EXPECT_NE(message(broken).find("m.json: corrupt carb model file: " + why), std::string::npos)
        << message(broken);
  };
  EXPECT_NE(
      message(text.substr(0, text.size() / 2)).find("m.json: not a carb model file (truncated"),
      std::string::npos);
  EXPECT_NE(message("{\"format\": \"other\"}").find("not a carb model file"), std::string::npos);
  // Valid JSON with a number no double holds (found by fuzz/model_fuzz.cpp; it used to escape as
  // nlohmann's out_of_range exception).
  EXPECT_EQ(message("{\"format\": \"carb-model\", \"x\": 0.00688E661}"),
            "m.json: not a carb model file ([json.exception.out_of_range.406] number overflow "
            "parsing '0.00688E661')");
  // Trees XGBoost would load into a corrupt heap or loop over forever (found by fuzzing).
  std::string short_array = text;
  short_array.replace(short_array.find("\"base_weights\":["), 16, "\"base_weights\":[1.0,");
  expect_corrupt(short_array, "a tree's base_weights does not have num_nodes");
  std::string cycle = text;
  const auto left = cycle.find("\"left_children\":[") + 17;
  cycle.replace(left, cycle.find(',', left) - left, "0");
  expect_corrupt(cycle, "a tree node's children are not later nodes");
  // Two trees with one id: XGBoost loads both into one slot from two threads, a double free.
  std::string same_id = text;
  const auto second_id = same_id.find("\"id\":1,", same_id.find("\"trees\":["));
  ASSERT_NE(second_id, std::string::npos);
  same_id.replace(second_id, 7, "\"id\":0,");
  expect_corrupt(same_id, "a gbtree's tree ids are not 0, 1, 2, ... in order");
  std::string no_forest = text;
  no_forest.replace(no_forest.find("\"num_parallel_tree\":\"1\""), 23,
                    "\"num_parallel_tree\":\"0\"");
  expect_corrupt(no_forest, "a gbtree's num_parallel_tree does not divide its trees");
  // A parent XGBoost would look up past its node array (found by fuzzing: a read out of bounds).
  std::string orphan = text;
  const auto parents = orphan.find("\"parents\":[2147483647,") + 22;
  orphan.replace(parents, orphan.find(',', parents) - parents, "70000");
  expect_corrupt(orphan, "a tree's parents do not match its children");
  // Categorical arrays, which XGBoost indexes by one another unchecked (carb's trees have none).
  std::string categories = text;
  categories.replace(categories.find("\"categories_segments\":[]"), 24,
                     "\"categories_segments\":null");
  expect_corrupt(categories, "a tree's categories_segments is not empty");
  // A tree wider than the model: its splits would read past XGBoost's feature vector.
  std::string wide = text;
  const auto tree_features = wide.find("\"num_feature\":\"", wide.find("\"tree_param\""));
  wide.replace(tree_features, 15, "\"num_feature\":\"9");
  expect_corrupt(wide, "a tree with the wrong number of features");
  // A table model keeps no out-of-sample predictions (a transfer takes carb's measurements).
  EXPECT_TRUE(predictor->out_of_sample().ids.empty());
  EXPECT_TRUE(nlohmann::json::parse(text).at("out_of_sample").is_null());
  std::string newer = text;
  newer.replace(newer.find("\"format_version\":1"), 18, "\"format_version\":99");
  EXPECT_NE(message(newer).find("model format 99 is newer"), std::string::npos);
  std::string corrupt = text;
  corrupt.replace(corrupt.find("\"members\""), 9, "\"membres\"");
  EXPECT_NE(message(corrupt).find("m.json: corrupt carb model file"), std::string::npos);
  std::string bad_tree = text;
  const auto trees = bad_tree.find("\"trees\"");
  ASSERT_NE(trees, std::string::npos);
  bad_tree.replace(trees, 7, "\"treez\"");
  EXPECT_NE(message(bad_tree).find("m.json: corrupt carb model file"), std::string::npos);
}

TEST(Fit, ATargetWithNoValuesIsLeftOutWithItsReason) {
  std::string csv = "a,b,c,batch,memory,latency,energy\n";
  std::istringstream rows(known_table(200));
  std::string line;
  std::getline(rows, line);
  while (std::getline(rows, line)) csv += line + ",\n";
  TableSpec spec = known_spec();
  spec.targets.insert(spec.targets.begin() + 1, parse_table_target("energy"));
  // Named explicitly in a table, an empty target is an error; in a store it is left out.
  try {
    dataset_from_table(parse_csv(csv, "t.csv"), spec);
    ADD_FAILURE() << "an all-empty target was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "t.csv: target 'energy' (column 'energy') has no values");
  }
  spec.targets.erase(spec.targets.begin() + 1);
  Dataset data = dataset_from_table(parse_csv(csv, "t.csv"), spec);
  data.targets.insert(data.targets.begin() + 1, TargetInfo{"energy", "J", "energy_j"});
  data.y.insert(data.y.begin() + 1, std::vector<double>(data.rows(), std::nan("")));
  data.missing_reason.insert(data.missing_reason.begin() + 1, "");
  FitOptions options = quick_options();
  options.baselines = false;
  const Predictor predictor = Predictor::fit(data, options, nullptr);
  const auto predictions = predictor.predict(data.x.data(), 3, data.batch.data());
  EXPECT_FALSE(predictions[1][0].available);
  EXPECT_EQ(predictions[1][0].reason, "no energy values in the data");
  EXPECT_TRUE(predictions[2][0].available);  // the cascade skipped energy
}

TEST(Fit, TooFewRowsSaysHowManyAreNeeded) {
  const Dataset data = dataset_from_table(parse_csv(known_table(30), "t.csv"), known_spec());
  try {
    (void)Predictor::fit(data, quick_options(), nullptr);
    FAIL() << "fitted 30 rows";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("too few rows to split: 30 measured rows of memory, need "
                                         "at least 40"),
              std::string::npos)
        << e.what();
  }
}

TEST(Fit, NegativeOrNanMeasurementsAreRejected) {
  Dataset data = dataset_from_table(parse_csv(known_table(100), "t.csv"), known_spec());
  data.y[1][5] = -1;
  EXPECT_THROW(Predictor::fit(data, quick_options(), nullptr), Error);
  data.y[1][5] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(Predictor::fit(data, quick_options(), nullptr), Error);
}

TEST(Fit, TheSameSeedGivesTheSameModel) {
  const Dataset data = dataset_from_table(parse_csv(known_table(200), "t.csv"), known_spec());
  FitOptions options = quick_options();
  options.baselines = false;
  const Predictor a = Predictor::fit(data, options, nullptr);
  const Predictor b = Predictor::fit(data, options, nullptr);
  const auto pa = a.predict(data.x.data(), data.rows(), data.batch.data());
  const auto pb = b.predict(data.x.data(), data.rows(), data.batch.data());
  for (std::size_t i = 0; i < data.rows(); ++i) ASSERT_EQ(pa[1][i].value, pb[1][i].value);
}

TEST(Fit, LeaveLowBatchOutTestsOnlyLowBatches) {
  const Dataset data = dataset_from_table(parse_csv(known_table(400), "t.csv"), known_spec());
  FitOptions options = quick_options();
  options.leave_low_batch_out = true;
  options.baselines = false;
  FitReport report;
  (void)Predictor::fit(data, options, &report);
  std::size_t low = 0;
  for (int batch : data.batch) low += batch <= 8 ? 1 : 0;
  EXPECT_EQ(report.test_rows, low);
}

// A table's rows with families assigned as a store's rows have them: every fifth row "b".
Dataset with_families(Dataset data) {
  data.family.clear();
  for (std::size_t i = 0; i < data.rows(); ++i) data.family.push_back(i % 5 == 0 ? "b" : "a");
  return data;
}

TEST(Fit, HoldOutTestsOnlyTheHeldOutFamilyAndFitsTheRest) {
  const Dataset data =
      with_families(dataset_from_table(parse_csv(known_table(400), "t.csv"), known_spec()));
  FitOptions options = quick_options();
  options.hold_out = {"b"};
  options.baselines = false;
  FitReport report;
  const Predictor predictor = Predictor::fit(data, options, &report);
  EXPECT_EQ(report.test_rows, 80U);
  EXPECT_EQ(report.train_rows + report.validation_rows + report.calibration_rows, 320U);
  // None of the held-out rows was fitted on.
  ASSERT_EQ(report.fitted_ids.size(), 320U);
  for (std::size_t i = 0; i < data.rows(); i += 5) {
    EXPECT_EQ(std::count(report.fitted_ids.begin(), report.fitted_ids.end(), data.ids[i]), 0)
        << data.ids[i];
  }
  // The model file says what was held out.
  const std::string text = predictor.to_json_text();
  EXPECT_NE(text.find("\"hold_out\""), std::string::npos);
  const Predictor reloaded = Predictor::from_json_text(text, "held.json");
  EXPECT_EQ(reloaded.to_json_text(), text);
}

TEST(Fit, AFamilyTheModelNeverSawLiesOutsideItsDomain) {
  const Dataset data =
      with_families(dataset_from_table(parse_csv(known_table(400), "t.csv"), known_spec()));
  FitOptions options = quick_options();
  options.hold_out = {"b"};
  options.baselines = false;
  const Predictor predictor = Predictor::fit(data, options, nullptr);
  const TrainingDomain& domain = predictor.training_domain();
  EXPECT_EQ(domain.families(), std::vector<std::string>{"a"});
  EXPECT_TRUE(domain.new_family("b"));
  EXPECT_FALSE(domain.new_family("a"));
  // A fitted row is inside as family a; the same features as the held-out family b, or as one
  // no row had, are not, whatever the features say.
  const float* row = data.row(1);
  ASSERT_TRUE(domain.judge(row).inside);
  EXPECT_TRUE(domain.judge(row, "a").inside);
  const DomainJudgement held = domain.judge(row, "b");
  EXPECT_FALSE(held.inside);
  EXPECT_TRUE(held.new_family);
  EXPECT_EQ(held.outside_feature, kNoFeature);
  EXPECT_EQ(domain_text(domain, held, row, data.feature_names, "b"),
            "whose family b the model never saw (it saw a)");
  EXPECT_TRUE(domain.judge(row, "resnet").new_family);
  // The families survive the model file; a file without them (older carb) knows every family,
  // and a list out of order is not one carb wrote.
  const Predictor loaded = Predictor::from_json_text(predictor.to_json_text(), "m.json");
  EXPECT_EQ(loaded.training_domain().families(), std::vector<std::string>{"a"});
  EXPECT_TRUE(loaded.training_domain().judge(row, "b").new_family);
  auto file = nlohmann::json::parse(predictor.to_json_text());
  file["training_domain"].erase("families");
  const Predictor older = Predictor::from_json_text(file.dump(), "old.json");
  EXPECT_TRUE(older.training_domain().judge(row, "b").inside);
  EXPECT_FALSE(older.training_domain().new_family("b"));
  file["training_domain"]["families"] = {"b", "a"};
  EXPECT_THROW((void)Predictor::from_json_text(file.dump(), "bad.json"), Error);
  // A table's rows name no family: its domain knows none and judges by features alone.
  options.hold_out.clear();
  const Predictor table = Predictor::fit(
      dataset_from_table(parse_csv(known_table(100), "t.csv"), known_spec()), options, nullptr);
  EXPECT_TRUE(table.training_domain().families().empty());
}

TEST(Fit, HoldOutOfAnUnknownFamilyListsTheFamilies) {
  const Dataset data =
      with_families(dataset_from_table(parse_csv(known_table(100), "t.csv"), known_spec()));
  FitOptions options = quick_options();
  options.hold_out = {"mobilenet"};
  try {
    (void)Predictor::fit(data, options, nullptr);
    FAIL() << "held out a family with no rows";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("no rows of family 'mobilenet' to hold out; the data's "
                                         "families: a, b"),
              std::string::npos)
        << e.what();
  }
  // A table names no families at all.
  Dataset table = dataset_from_table(parse_csv(known_table(100), "t.csv"), known_spec());
  options.hold_out = {"a"};
  EXPECT_THROW((void)Predictor::fit(table, options, nullptr), Error);
}

// The value of the architecture feature `name` in `row`.
float feature_of(const std::vector<float>& row, const std::string& name) {
  const auto& names = architecture_feature_names();
  const auto found = std::find(names.begin(), names.end(), name);
  EXPECT_NE(found, names.end()) << name;
  return found == names.end() ? std::nanf("")
                              : row[static_cast<std::size_t>(found - names.begin())];
}

TEST(ArchitectureFeatures, LayerClassTotalsOfATinyNetworkByHand) {
  // Stem 3 -> 8 (3x3 on 8x8), one basic block of two 3x3 convs 8 -> 8 on 8x8 (64 pixels:
  // medium), 3 batch-norms, 3 ReLUs, 1 add, avgpool, fc 8 -> 10; batch 2, fp32.
  const Config config = parse_key("basic4s1_c8_w1_nods_r8_b2_fp32_k10");
  const FeatureRows rows = feature_rows(std::vector<Config>{config});
  const std::vector<float>& row = rows.x;
  ASSERT_EQ(row.size(), architecture_feature_names().size());
  // 25 whole-network features, then 57 per-class totals (MACs of the 17 classes that have them,
  // bytes and layer counts of all 20) and 3 roofline sums.
  EXPECT_EQ(row.size(), 85u);
  EXPECT_EQ(std::count_if(architecture_feature_names().begin(), architecture_feature_names().end(),
                          [](const std::string& name) { return is_layer_feature(name); }),
            60);
  const auto log1 = [](double value) { return static_cast<float>(std::log1p(value)); };
  EXPECT_FLOAT_EQ(feature_of(row, "log_macs_conv_stem"), log1(2 * 64 * 8 * 3 * 9));
  // Bytes moved by the stem: batch x (input 192 + output 512) + 216 weights, 4 bytes each.
  EXPECT_FLOAT_EQ(feature_of(row, "log_bytes_conv_stem"), log1((2 * 704 + 216) * 4));
  EXPECT_FLOAT_EQ(feature_of(row, "layers_conv_stem"), 1);
  EXPECT_FLOAT_EQ(feature_of(row, "log_macs_conv3x3_s1_medium"), log1(2 * 2 * 64 * 8 * 8 * 9));
  EXPECT_FLOAT_EQ(feature_of(row, "layers_conv3x3_s1_medium"), 2);
  EXPECT_FLOAT_EQ(feature_of(row, "log_macs_conv1x1_s2_small"), 0);
  EXPECT_FLOAT_EQ(feature_of(row, "layers_conv3x3_s2_large"), 0);
  // 3 batch-norms (1,024 in and out, 16 parameters), 3 ReLUs (1,024 in and out), 1 add (2 x 1,024
  // in, 1,024 out), elements of the whole batch.
  const double elementwise = (3 * (2048 + 16) + 3 * 2048 + 3072) * 4;
  EXPECT_FLOAT_EQ(feature_of(row, "log_bytes_elementwise"), log1(elementwise));
  EXPECT_FLOAT_EQ(feature_of(row, "layers_elementwise"), 7);
  EXPECT_FLOAT_EQ(feature_of(row, "log_macs_fc"), log1(2 * 8 * 10));
  EXPECT_FLOAT_EQ(feature_of(row, "log_torch_native_macs"), 0);  // batch 2: all oneDNN
  // At a balance of 16 FLOP/B every layer is memory-bound: 16 x all bytes moved.
  const double bytes = (2 * 704 + 216) * 4 + 2 * (2 * 1024 + 576) * 4 + elementwise +
                       2 * (512 + 8) * 4 + (2 * (8 + 10) + 90) * 4;
  EXPECT_FLOAT_EQ(feature_of(row, "log_roofline_b16"), log1(16 * bytes));
  EXPECT_FLOAT_EQ(feature_of(row, "log_roofline_b64"), log1(64 * bytes));
}

// A store dataset whose latency is an additive function of the per-layer-class totals and whose
// memory is parameters plus peak activations.
Dataset additive_store_data() {
  std::mt19937_64 random(3);
  const std::vector<std::string> blocks = {"basic10", "basic18", "basic26", "bottleneck14",
                                           "bottleneck26"};
  const std::vector<std::string> widths = {"0.25", "0.5", "0.75", "1"};
  std::vector<MeasuredTargets> measured;
  std::set<std::string> seen;
  while (measured.size() < 400) {
    const std::string key = blocks[random() % blocks.size()] + "_w" +
                            widths[random() % widths.size()] + (random() % 2 ? "_ds" : "_nods") +
                            "_r" + std::to_string(32 + 16 * static_cast<int>(random() % 3)) + "_b" +
                            std::to_string(1 << (random() % 5)) + "_fp32";
    if (!seen.insert(key).second) continue;
    const Features f = compute_features(build_network(parse_key(key)));
    const auto totals = [&](LayerClass c) { return f.layer_classes[static_cast<int>(c)]; };
    double latency = 0.05 + 2e-10 * totals(LayerClass::kElementwise).bytes +
                     0.004 * totals(LayerClass::kElementwise).count +
                     1e-9 * totals(LayerClass::kPool).bytes;
    for (LayerClass c : {LayerClass::kConv3x3S1Small, LayerClass::kConv3x3S1Medium,
                         LayerClass::kConv3x3S1Large, LayerClass::kConv3x3S2Medium}) {
      latency += 1e-9 * totals(c).macs;
    }
    for (LayerClass c : {LayerClass::kConv1x1S1Medium, LayerClass::kConv1x1S1Large}) {
      latency += 3e-9 * totals(c).macs;
    }
    MeasuredTargets row;
    row.configuration_key = key;
    row.latency_ms = latency;
    row.engine_peak_bytes = f.param_bytes + f.peak_activation_bytes;
    measured.push_back(row);
  }
  std::sort(measured.begin(), measured.end(),
            [](const auto& a, const auto& b) { return a.configuration_key < b.configuration_key; });
  return dataset_from_measurements(measured, "fp", "device");
}

TEST(Fit, AFamilyTheModelNeverSawGetsIntervalsFromTheFamiliesItSaw) {
  // The additive latency above, each width multiplier a family whose latency is off it by its
  // own factor: what a new family costs is as uncertain as the families seen differ.
  Dataset data = additive_store_data();
  const std::map<std::string, double> factors = {
      {"w0.25", 1.0}, {"w0.5", 1.25}, {"w0.75", 1.2}, {"w1", 0.8}};
  const std::size_t latency = data.targets.size() - 1;
  ASSERT_EQ(data.targets[latency].name, "latency");
  for (std::size_t i = 0; i < data.rows(); ++i) {
    const std::size_t width = data.ids[i].find("_w") + 1;
    data.family[i] = data.ids[i].substr(width, data.ids[i].find('_', width) - width);
    data.y[latency][i] *= factors.at(data.family[i]);
  }
  FitOptions options = quick_options();
  options.hold_out = {"w0.75"};
  FitReport report;
  const Predictor predictor = Predictor::fit(data, options, &report);
  const std::vector<double> widths = predictor.new_family_half_widths();
  ASSERT_EQ(widths.size(), data.targets.size());
  // Three families seen, 0.8-1.25 times the additive cost: the largest left-out family's error
  // (0.9 x 4 / 3 > 1). Left out, w1 is also a width the base extrapolates the others' trend to
  // (1.0 at w0.25, 1.25 at w0.5: about 1.6 at w1, against 0.8): log 2 or so in log1p space, far
  // wider than the model's own intervals.
  EXPECT_GT(widths[latency], 0.5);
  EXPECT_LT(widths[latency], 1.5);
  const auto file = nlohmann::json::parse(predictor.to_json_text());
  const double own = file.at("targets").at(latency).at("interval").at("log1p_half_width");
  EXPECT_GT(widths[latency], own);
  // The held-out rows (the test split): with their family their intervals are the new family's,
  // without it the model's own; the values are the same.
  std::vector<std::size_t> held;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    if (data.family[i] == "w0.75") held.push_back(i);
  }
  const Dataset test = subset(data, held);
  const auto plain = predictor.predict(test.x.data(), test.rows(), test.batch.data());
  const auto widened =
      predictor.predict(test.x.data(), test.rows(), test.batch.data(), &test.family);
  std::size_t covered_plain = 0, covered = 0;
  for (std::size_t i = 0; i < test.rows(); ++i) {
    const TargetPrediction& a = plain[latency][i];
    const TargetPrediction& b = widened[latency][i];
    ASSERT_EQ(a.value, b.value);
    EXPECT_LT(b.low, a.low);
    EXPECT_GT(b.high, a.high);
    const double y = test.y[latency][i];
    covered_plain += a.low <= y && y <= a.high ? 1 : 0;
    covered += b.low <= y && y <= b.high ? 1 : 0;
  }
  EXPECT_LT(covered_plain, test.rows() / 2) << "the family's 1.2x lies outside the own intervals";
  EXPECT_GE(covered, test.rows() * 9 / 10);
  // The fit scored the held-out family so (evaluate passes each row's family).
  EXPECT_GE(scores_of(report.scores, "carb", "latency").coverage.value_or(0), 90.0);
  // A family the model saw keeps its own intervals.
  std::vector<std::string> seen(test.rows(), "w0.5");
  const auto own_family = predictor.predict(test.x.data(), test.rows(), test.batch.data(), &seen);
  EXPECT_EQ(own_family[latency][0].low, plain[latency][0].low);
  // The width survives the model file.
  const Predictor loaded = Predictor::from_json_text(predictor.to_json_text(), "m.json");
  EXPECT_EQ(loaded.new_family_half_widths(), widths);
  auto edited = nlohmann::json::parse(predictor.to_json_text());
  edited["targets"][latency]["interval"]["new_family_log1p_half_width"] = -1;
  EXPECT_THROW((void)Predictor::from_json_text(edited.dump(), "bad.json"), Error);
  // Carried to a device 1.5 times slower by 16 rows of w0.25, the model keeps the width for a
  // family neither it nor those rows saw, and stretches its own intervals to it.
  std::vector<std::size_t> quarter;
  for (std::size_t i = 0; i < data.rows() && quarter.size() < 16; ++i) {
    if (data.family[i] == "w0.25") quarter.push_back(i);
  }
  Dataset slower = subset(data, quarter);
  slower.device_fingerprint = "slower";
  for (double& value : slower.y[latency]) value *= 1.5;
  TransferOptions transfer_options;
  transfer_options.threads = 1;
  const Predictor moved = transfer_fit(predictor, slower, transfer_options, nullptr);
  EXPECT_EQ(moved.new_family_half_widths(), widths);
  const auto moved_plain = moved.predict(test.x.data(), test.rows(), test.batch.data());
  const auto moved_new = moved.predict(test.x.data(), test.rows(), test.batch.data(), &test.family);
  std::vector<std::string> quarters(test.rows(), "w0.25");
  const auto moved_known = moved.predict(test.x.data(), test.rows(), test.batch.data(), &quarters);
  const double scale = file.at("targets").at(latency).at("scale");
  std::size_t moved_covered = 0;
  for (std::size_t i = 0; i < test.rows(); ++i) {
    const TargetPrediction& own_interval = moved_plain[latency][i];
    const TargetPrediction& b = moved_new[latency][i];
    ASSERT_EQ(own_interval.value, b.value);
    EXPECT_LE(b.low, own_interval.low);
    // The width is one in the source's log1p(scale x value) space, as the source's own
    // intervals are, not a plain log half-width: wider where scale x value is small.
    const double log1p_value = std::log1p(scale * b.value);
    EXPECT_NEAR(b.high, std::expm1(log1p_value + widths[latency]) / scale, 1e-9 * b.high);
    EXPECT_GT(b.high, b.value * std::exp(widths[latency]));
    EXPECT_NEAR(b.low, std::max(0.0, std::expm1(log1p_value - widths[latency]) / scale),
                1e-9 * b.high);
    EXPECT_EQ(moved_known[latency][i].low, own_interval.low);
    EXPECT_EQ(moved_known[latency][i].high, own_interval.high);
    const double y = 1.5 * test.y[latency][i];
    moved_covered += b.low <= y && y <= b.high ? 1 : 0;
  }
  EXPECT_GE(moved_covered, test.rows() * 9 / 10);
  // With two families there is no spread of families to calibrate from: none.
  for (std::size_t i = 0; i < data.rows(); ++i) {
    data.family[i] = data.family[i] == "w0.75" ? "w0.75" : "others";
  }
  const Predictor two = Predictor::fit(data, options, nullptr);
  EXPECT_EQ(two.new_family_half_widths()[latency], 0.0);
}

TEST(Dataset, ARepeatedConfigurationIsTheMedianOfItsMeasurements) {
  // Rows ordered by key, then finish time, as Store::ok_measurements returns them.
  std::vector<MeasuredTargets> measured;
  const auto add = [&](const std::string& key, double latency, std::optional<double> energy,
                       std::int64_t peak) {
    MeasuredTargets row;
    row.configuration_key = key;
    row.latency_ms = latency;
    row.energy_j = energy;
    row.energy_null_reason = energy ? "" : "no sensor";
    row.engine_peak_bytes = peak;
    measured.push_back(row);
  };
  add("basic10_w0.25_nods_r32_b1_fp32", 1.0, std::nullopt, 100);
  add("basic10_w0.25_nods_r32_b1_fp32", 3.0, 7.0, 100);
  add("basic10_w0.25_nods_r32_b1_fp32", 2.0, 5.0, 100);
  add("basic10_w0.25_nods_r32_b2_fp32", 4.0, std::nullopt, 200);
  add("basic10_w0.25_nods_r32_b4_fp32", 6.0, std::nullopt, 300);
  add("basic10_w0.25_nods_r32_b4_fp32", 9.0, std::nullopt, 300);
  const Dataset data = dataset_from_measurements(measured, "fp", "device");
  ASSERT_EQ(data.rows(), 3u);
  EXPECT_EQ(data.ids[0], "basic10_w0.25_nods_r32_b1_fp32");
  EXPECT_EQ(data.y[2][0], 2.0);  // median of 1, 3, 2
  EXPECT_EQ(data.y[1][0], 6.0);  // median of the energies measured, 7 and 5
  EXPECT_EQ(data.y[0][0], 100.0);
  EXPECT_EQ(data.y[2][1], 4.0);
  EXPECT_TRUE(std::isnan(data.y[1][1]));
  EXPECT_EQ(data.y[2][2], 7.5);  // an even count: the mean of the middle two
  EXPECT_EQ(data.repeated.configurations, 2u);
  EXPECT_EQ(data.repeated.measurements, 5u);
}

TEST(Fit, TheAdditivePriorRecoversAnAdditiveLatency) {
  const Dataset data = additive_store_data();
  EXPECT_EQ(data.schema, "carb-ir-5");
  FitReport report;
  const Predictor predictor = Predictor::fit(data, quick_options(), &report);
  // Latency is exactly additive in the totals: the additive prior alone is nearly exact, far
  // better than FLOPs alone; the trees that correct it (the default base) keep it so.
  const Metrics& additive = scores_of(report.scores, "additive-prior", "latency");
  EXPECT_LT(additive.mape, 0.5);
  EXPECT_GT(scores_of(report.scores, "flops-loglinear", "latency").mape, 10 * additive.mape);
  EXPECT_LT(scores_of(report.scores, "carb", "latency").mape, 1.0);
  // With the ridge as the base instead, the ridge, which sees the prior's prediction, is as good.
  FitOptions ridge_base = quick_options();
  ridge_base.prior = PriorMode::kBase;
  FitReport ridge_report;
  (void)Predictor::fit(data, ridge_base, &ridge_report);
  EXPECT_LT(scores_of(ridge_report.scores, "ridge-prior", "latency").mape, 0.5);

  const auto file = nlohmann::json::parse(predictor.to_json_text());
  const auto& memory = file.at("targets").at(0);
  const auto& latency = file.at("targets").at(2);
  // Memory keeps the whole-network features; its additive prior (the base of the default
  // PriorMode::kAdditive) is over the weights' and activations' bytes and the engine plan's
  // arena and prepare peak, not the layer classes.
  const auto& memory_terms = memory.at("additive_prior").at("coef");
  EXPECT_EQ(memory_terms.size(), 6u);
  EXPECT_TRUE(memory_terms.contains("log_param_bytes"));
  EXPECT_TRUE(memory_terms.contains("log_peak_activation_bytes"));
  EXPECT_TRUE(memory_terms.contains("log_engine_arena_bytes"));
  EXPECT_TRUE(memory_terms.contains("log_prepare_peak_bytes"));
  // With the ridge as the base, memory has no additive prior.
  const auto ridge_file =
      nlohmann::json::parse(Predictor::fit(data, ridge_base, nullptr).to_json_text());
  EXPECT_TRUE(ridge_file.at("targets").at(0).at("additive_prior").is_null());
  EXPECT_EQ(memory.at("features").size(), 25u);
  EXPECT_FALSE(latency.contains("features"));
  const auto& coef = latency.at("additive_prior").at("coef");
  // The per-class totals (MACs, bytes, layer counts) and the MACs PyTorch runs off oneDNN.
  EXPECT_EQ(coef.size(), 58u);
  EXPECT_TRUE(coef.contains("log_torch_native_macs"));
  for (const auto& [name, value] : coef.items()) EXPECT_GE(value.get<double>(), 0) << name;
  EXPECT_NEAR(coef.at("log_macs_conv1x1_s1_large").get<double>() /
                  coef.at("log_macs_conv3x3_s1_large").get<double>(),
              3.0, 0.3);

  // The file round-trips, and a model of the older schema must be refitted.
  const std::string text = predictor.to_json_text();
  const Predictor loaded = Predictor::from_json_text(text, "m.json");
  const auto before = predictor.predict(data.x.data(), data.rows(), data.batch.data());
  const auto after = loaded.predict(data.x.data(), data.rows(), data.batch.data());
  for (std::size_t i = 0; i < data.rows(); ++i) {
    ASSERT_EQ(before[0][i].value, after[0][i].value);
    ASSERT_EQ(before[2][i].value, after[2][i].value);
  }
  std::string old = text;
  old.replace(old.find("\"carb-ir-5\""), 11, "\"carb-ir-1\"");
  EXPECT_EQ(
      model_load_error(old),
      "m.json: fitted on feature schema carb-ir-1, this carb's is carb-ir-5; refit the model");
  // A prior the fit cannot have made (a negative coefficient) is a corrupt file, not a model.
  auto negative = nlohmann::json::parse(text);
  negative["targets"][2]["additive_prior"]["coef"]["layers_conv_stem"] = -1.0;
  EXPECT_EQ(model_load_error(negative.dump()),
            "m.json: corrupt carb model file: additive prior: a coefficient is negative or not "
            "finite");
}

// The transfer's structural correction scales these parts (docs/model.md, "Transfer"): the
// prior's terms, split by kind, sum to the prior; the pooling part holds the pool class's terms;
// the activation bytes, at 1 ns a byte, and the fc layer's MACs, at 1 ns a MAC, are no terms of it.
TEST(Fit, AdditivePartsSplitThePriorAndAddTheActivationBytes) {
  const Dataset data = additive_store_data();
  const Predictor predictor = Predictor::fit(data, quick_options(), nullptr);
  EXPECT_TRUE(predictor.additive_parts(data.x.data(), data.rows(), 0).empty());  // memory
  const auto parts = predictor.additive_parts(data.x.data(), data.rows(), 2);
  ASSERT_EQ(parts.size(), data.rows());
  const auto latency = nlohmann::json::parse(predictor.to_json_text()).at("targets").at(2);
  const double scale = latency.at("scale").get<double>();
  const auto& prior = latency.at("additive_prior");
  const auto value = [&](std::size_t i, const std::string& name) {
    const auto found = std::find(data.feature_names.begin(), data.feature_names.end(), name);
    EXPECT_NE(found, data.feature_names.end()) << name;
    const double x =
        data.x[i * data.cols() + static_cast<std::size_t>(found - data.feature_names.begin())];
    return name.rfind("log_", 0) == 0 ? std::expm1(x) : x;
  };
  const auto part = [&](std::size_t i, AdditivePart p) {
    return parts[i][static_cast<std::size_t>(p)];
  };
  double pool_total = 0;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    double sum = prior.at("intercept").get<double>(), pool = 0;
    for (const auto& [name, coef] : prior.at("coef").items()) {
      const double term = coef.get<double>() * value(i, name);
      sum += term;
      if (name == "log_bytes_pool" || name == "layers_pool") pool += term;
    }
    const double prior_parts =
        std::accumulate(parts[i].begin(), parts[i].begin() + kPriorPartCount, 0.0);
    EXPECT_NEAR(prior_parts, sum / scale, 1e-9 * sum / scale) << i;
    EXPECT_NEAR(part(i, AdditivePart::kPool), pool / scale, 1e-9 * sum / scale) << i;
    EXPECT_NEAR(part(i, AdditivePart::kActivationBytes),
                value(i, "log_activation_bytes") * kActivationBytesMs,
                1e-12 * value(i, "log_activation_bytes"))
        << i;
    EXPECT_GT(part(i, AdditivePart::kActivationBytes), 0) << i;
    EXPECT_NEAR(part(i, AdditivePart::kFcMacs), value(i, "log_macs_fc") * kFcMacMs,
                1e-12 * value(i, "log_macs_fc"))
        << i;
    EXPECT_GT(part(i, AdditivePart::kFcMacs), 0) << i;
    for (double p : parts[i]) EXPECT_GE(p, 0) << i;
    pool_total += pool;
  }
  EXPECT_GT(pool_total, 0);  // the test reaches the pooling part
}

}  // namespace
}  // namespace carb
