// carb characterize / carb report as a user runs them, on a slice of the reference CPU campaign
// (real measurements, data/cpu-reference.sqlite.xz), and the report opened in headless Chromium.
// To have two devices, the test copies part of the slice under a second device with latencies
// doubled and marks two rows failed: test data, named as such, never shown as a measurement.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "run.hpp"

namespace {

using carb_test::CommandResult;
using carb_test::lines;
using carb_test::run;
using carb_test::sql;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr const char* kReference =
    "cpu=AMD EPYC;logical_cpus=2;isa=sse4_2,avx,avx2,fma,avx512f,avx512_bf16,avx512_vnni;"
    "governor=unavailable|cpu|oneDNN 2.6.3 (N/A)|isa=avx512_core_bf16|threads=2";
constexpr const char* kBudget = "'latency<=5ms,memory<=64MiB'";

// One slice, model, screen and report shared by the tests of a process.
class ReportCli : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = testing::TempDir() + "report-cli-" + std::to_string(::getpid()) + "/";
    std::filesystem::create_directories(dir);
    db = dir + "slice.sqlite";
    ASSERT_EQ(std::system(("xz -dc " + std::string(CARB_SOURCE_DIR) +
                           "/data/cpu-reference.sqlite.xz > " + db)
                              .c_str()),
              0);
    // A tenth of the campaign; half of that again under a second device, latencies doubled.
    sql(db,
        "DELETE FROM samples; DELETE FROM measurements WHERE id % 10 != 0;"
        "INSERT INTO devices (fingerprint, kind, name, details) VALUES ('test-copy', 'cpu', "
        "'Test copy (latency x2)', '{}');"
        "INSERT INTO measurements (measurement_key, configuration_key, device_id, campaign_id, "
        "software_versions, status, detail, attempts, started_at, finished_at, wall_median_ms, "
        "wall_mean_ms, wall_p5_ms, wall_p95_ms, wall_cv, wall_count, wall_ci_half_width_ms, "
        "wall_converged, energy_null_reason, engine_peak_bytes, provenance, protocol) "
        "SELECT substr(measurement_key, 1, 62) || 'zz', configuration_key, "
        "(SELECT id FROM devices WHERE fingerprint = 'test-copy'), campaign_id, "
        "software_versions, status, detail, attempts, started_at, finished_at, 2 * wall_median_ms, "
        "2 * wall_mean_ms, 2 * wall_p5_ms, 2 * wall_p95_ms, wall_cv, wall_count, "
        "2 * wall_ci_half_width_ms, wall_converged, energy_null_reason, engine_peak_bytes, "
        "provenance, protocol FROM measurements WHERE id % 20 = 0;"
        "UPDATE measurements SET status = 'crashed', detail = 'test: marked failed' "
        "WHERE id IN (10, 30);");
    model = dir + "model.json";
    keys = dir + "keys.txt";
    shortlist = dir + "shortlist.csv";
    candidates = dir + "candidates.csv";
    html = dir + "report.html";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir); }

  static std::string read_keys() {
    std::string text;
    sqlite3* handle = nullptr;
    sqlite3_open(db.c_str(), &handle);
    sqlite3_stmt* statement = nullptr;
    sqlite3_prepare_v2(handle, "SELECT DISTINCT configuration_key FROM measurements", -1,
                       &statement, nullptr);
    while (sqlite3_step(statement) == SQLITE_ROW) {
      text += reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)) + std::string("\n");
    }
    sqlite3_finalize(statement);
    sqlite3_close(handle);
    return text;
  }

  // The steps after the slice run when a test first needs them: each test is its own process.
  static const CommandResult& fitted() {
    static const CommandResult fit = run("fit --db " + db + " --device '" + kReference + "' -o " +
                                         model + " --forest-trees 16 --threads 1");
    return fit;
  }
  static const CommandResult& screened() {
    static const CommandResult screen = [] {
      EXPECT_EQ(fitted().exit_code, 0) << fitted().out;
      std::ofstream(keys) << read_keys();
      return run("screen --model " + model + " --keys " + keys + " --budget " + kBudget + " -o " +
                 shortlist + " --candidates " + candidates + " --json " + dir + "screen.json");
    }();
    return screen;
  }
  static const CommandResult& reported() {
    static const CommandResult report = [] {
      EXPECT_EQ(screened().exit_code, 0) << screened().out;
      return run("report --db " + db + " --model " + model + " --screening " + dir +
                 "screen.json --no-fit -o " + html);
    }();
    return report;
  }

  static std::string dir, db, model, keys, shortlist, candidates, html;
};
std::string ReportCli::dir, ReportCli::db, ReportCli::model, ReportCli::keys, ReportCli::shortlist,
    ReportCli::candidates, ReportCli::html;

const nlohmann::json& target_entry(const nlohmann::json& device, const std::string& name) {
  for (const auto& entry : device.at("targets")) {
    if (entry.at("target") == name) return entry;
  }
  static const nlohmann::json none;
  ADD_FAILURE() << "no target " << name;
  return none;
}

TEST_F(ReportCli, CharacterizesTwoDevicesAsJson) {
  CommandResult result = run("characterize --db " + db + " --no-fit --json", false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const auto json = nlohmann::json::parse(result.out);
  ASSERT_EQ(json.at("devices").size(), 2U);
  const auto& reference = json.at("devices").at(0);
  EXPECT_EQ(reference.at("name"), "AMD EPYC");
  EXPECT_EQ(reference.at("configurations"), 158);  // 160 rows, 2 marked failed
  const auto& energy = target_entry(reference, "energy");
  EXPECT_EQ(energy.at("available"), false);
  EXPECT_EQ(energy.at("reason").get<std::string>().rfind("no energy measured on AMD EPYC: ", 0), 0U)
      << energy.dump();
  const auto& latency = target_entry(reference, "latency");
  EXPECT_EQ(latency.at("available"), true);
  EXPECT_EQ(latency.at("regimes").size(), 2U);  // cpu-demo.yaml's batches are 1-32
  EXPECT_GT(latency.at("flops_loglog").at("r2").get<double>(), 0.8);
  EXPECT_EQ(latency.at("carb").at("reason"), "no model given, and fitting one now is off");

  ASSERT_EQ(json.at("transfers").size(), 1U);
  for (const auto& t : json.at("transfers").at(0).at("targets")) {
    if (t.at("target") == "latency") {
      EXPECT_EQ(t.at("shared"), 80);  // every 20th row of the campaign
      EXPECT_NEAR(t.at("slope").get<double>(), 2.0, 1e-9);
      EXPECT_NEAR(t.at("median_ratio").get<double>(), 2.0, 1e-9);
      EXPECT_NEAR(t.at("spearman").get<double>(), 1.0, 1e-12);
      EXPECT_EQ(t.at("verdict"), "ranks transfer");
    } else if (t.at("target") == "memory") {
      EXPECT_EQ(t.at("verdict"), "transfers");
    } else {
      EXPECT_EQ(t.at("available"), false);
    }
  }
}

TEST_F(ReportCli, TakesCarbAccuracyFromTheModelOfItsDevice) {
  ASSERT_EQ(fitted().exit_code, 0) << fitted().out;
  const auto model_file = nlohmann::json::parse(read(model));
  double recorded = 0;
  for (const auto& s : model_file.at("evaluation").at("scores")) {
    if (s.at("method") == "carb" && s.at("target") == "latency") recorded = s["metrics"]["r2"];
  }
  EXPECT_GT(model_file.at("evaluation").at("fitted_ids").size(), 100U);
  CommandResult result =
      run("characterize --db " + db + " --device 'AMD EPYC' --model " + model + " --json", false);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const auto json = nlohmann::json::parse(result.out);
  ASSERT_EQ(json.at("devices").size(), 1U);
  const auto& carb = target_entry(json.at("devices").at(0), "latency").at("carb");
  EXPECT_EQ(carb.at("source"), model);
  EXPECT_DOUBLE_EQ(carb.at("r2").get<double>(), recorded);
  EXPECT_TRUE(json.at("transfers").empty());
}

TEST_F(ReportCli, FitsCarbNowForADeviceWithoutAModel) {
  CommandResult result = run("characterize --db " + db + " --device test-copy --json");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("fitting CARB on 80 configurations of Test copy (latency x2)"),
            std::string::npos)
      << result.out;
  const auto json = nlohmann::json::parse(result.out.substr(result.out.find('{')));
  const auto& carb = target_entry(json.at("devices").at(0), "latency").at("carb");
  EXPECT_EQ(carb.at("source"), "fitted now (seed 1)");
  // The fit's own test split: 15% of each stratum (batch tier x depth tier), rounded in each,
  // which for these 80 rows is 11 (pinned from the split, not 15% of 80 = 12).
  EXPECT_EQ(carb.at("test_rows"), 11);
  EXPECT_GT(carb.at("r2").get<double>(), 0.5);
  EXPECT_TRUE(carb.contains("flops_loglinear_r2"));
}

TEST_F(ReportCli, PrintsTablesThatSayWhatIsUnavailable) {
  CommandResult result = run("characterize --db " + db + " --no-fit");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  for (const char* part :
       {"AMD EPYC: 158 configurations", "energy: unavailable: no energy measured on AMD EPYC: ",
        "scaling across batch regimes", "latency per GFLOP, smallest batch / largest: ",
        "energy per GFLOP, smallest batch / largest: unavailable (above)",
        "memory: n/a: only fp32 measured", "flops_loglog_r2",
        "across devices: AMD EPYC -> Test copy (latency x2)", "ranks transfer"}) {
    EXPECT_NE(result.out.find(part), std::string::npos) << part << "\n" << result.out;
  }
}

TEST_F(ReportCli, BadInputIsOneLineAndExitTwo) {
  const auto expect_error = [](const std::string& arguments, const std::string& message) {
    CommandResult result = run(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.out;
    EXPECT_EQ(lines(result.out), 1) << result.out;
    EXPECT_NE(result.out.find(message), std::string::npos) << result.out;
  };
  expect_error("characterize --db " + dir + "missing.sqlite", "missing.sqlite: no such database");
  expect_error("characterize --db " + db + " --format csv",
               "characterize prints sections: --format table or json");
  expect_error("characterize --db " + db + " --no-fit --device nothing",
               "--device 'nothing' names no device; give a fingerprint or a name: ");
  expect_error(
      "report --db " + db + " --no-fit --screening " + dir + "none.json -o " + dir + "x.html",
      "none.json: cannot open");
  ASSERT_EQ(screened().exit_code, 0) << screened().out;
  const std::string out = dir + "bad.html";
  // A shortlist CSV is not the result file; a result with a front rank that skips is corrupt.
  expect_error("report --db " + db + " --no-fit --screening " + shortlist + " -o " + out,
               "shortlist.csv: not JSON: ");
  const std::string bad = dir + "bad-screen.json";
  {
    auto result = nlohmann::json::parse(read(dir + "screen.json"));
    for (auto& candidate : result.at("candidates")) {
      if (candidate.at("front_rank") == 1) candidate["front_rank"] = 0;
    }
    std::ofstream(bad) << result.dump();
  }
  expect_error("report --db " + db + " --no-fit --screening " + bad + " -o " + out,
               "bad-screen.json: its front ranks are not 1, 2, 3, ...");
  {
    auto result = nlohmann::json::parse(read(dir + "screen.json"));
    result["format"] = "carb-model";
    std::ofstream(bad) << result.dump();
  }
  expect_error(
      "report --db " + db + " --no-fit --screening " + bad + " -o " + out,
      "bad-screen.json: not a screening result (its \"format\" is not \"carb-screening\")");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(ReportCli, ScreenWritesEveryStageTwoCandidate) {
  ASSERT_EQ(screened().exit_code, 0) << screened().out;
  const auto counts = nlohmann::json::parse(read(dir + "screen.json")).at("counts");
  const std::string text = read(candidates);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "key,feasible,front_rank,value_macs,p_feasible,memory_B,memory_B_low,memory_B_high,"
            "latency_ms,latency_ms_low,latency_ms_high,inside_domain");
  EXPECT_EQ(lines(text) - 1, counts.at("stage2_scored").get<int>());
  const std::regex feasible("\n[^,]+,true,");
  const auto found = std::distance(std::sregex_iterator(text.begin(), text.end(), feasible),
                                   std::sregex_iterator());
  EXPECT_EQ(found, counts.at("feasible").get<int>());
}

// Every chart of the report renders in headless Chromium with nothing on the console.
TEST_F(ReportCli, ReportRendersEveryChartInHeadlessChromium) {
  const CommandResult& report = reported();
  ASSERT_EQ(report.exit_code, 0) << report.out;
  EXPECT_NE(report.out.find("wrote " + html + " (13 charts, "), std::string::npos) << report.out;
  const std::string page = read(html);
  // Self-contained: no script or style is fetched.
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_NE(page.find("data-carb-charts=\"13\""), std::string::npos);
  EXPECT_NE(page.find("test: marked failed"), std::string::npos) << "the failures table";
  // The across-devices table says how the pair differs, and the ratio by knob follows it: the
  // copy's latencies are doubled, so every batch size's ratio is 2.
  EXPECT_NE(page.find("AMD EPYC → Test copy (latency x2) (other machines and engines)"),
            std::string::npos);
  const std::size_t by_knob = page.find("latency, Test copy (latency x2) / AMD EPYC by knob");
  ASSERT_NE(by_knob, std::string::npos);
  const std::size_t batch_row = page.find("<tr><th>batch</th>", by_knob);
  ASSERT_NE(batch_row, std::string::npos);
  EXPECT_EQ(page.find("<tr><th>batch</th><td class=\"num\">1: 2 (", by_knob), batch_row)
      << page.substr(batch_row, 200);
  // Every point chart's tooltip starts with the configuration key.
  const std::size_t begin = page.find("<script type=\"application/json\" id=\"carb-charts\">");
  ASSERT_NE(begin, std::string::npos);
  const std::size_t start = page.find('>', begin) + 1;
  auto charts = nlohmann::json::parse(page.substr(start, page.find("</script>", start) - start));
  ASSERT_EQ(charts.size(), 13U);
  for (const auto& chart : charts) {
    const std::string id = chart.at("id");
    if (id.rfind("chart-scaling", 0) != 0 && id.rfind("chart-predicted", 0) != 0 &&
        id.rfind("chart-transfer", 0) != 0 && id.rfind("chart-screening", 0) != 0) {
      continue;
    }
    EXPECT_NE(chart.at("spec").dump().find(R"("tooltip":[{"field":"key")"), std::string::npos)
        << id;
  }

  const std::string browser = std::system("command -v chromium >/dev/null") == 0 ? "chromium"
                              : std::system("command -v chromium-browser >/dev/null") == 0
                                  ? "chromium-browser"
                                  : "";
  ASSERT_FALSE(browser.empty()) << "no chromium: scripts/install-deps.sh installs it";
  const std::string dom = dir + "dom.html", console = dir + "console.txt";
  // Its own profile directory, so browsers run by other tests or users cannot lock it; a time
  // limit so a browser that hangs fails the test instead of stalling the suite.
  const std::string command = "timeout 300 " + browser +
                              " --headless --no-sandbox --disable-gpu --no-first-run "
                              "--user-data-dir=" +
                              dir +
                              "chromium-profile --virtual-time-budget=20000 "
                              "--enable-logging=stderr --v=0 --dump-dom file://" +
                              html + " > " + dom + " 2> " + console;
  ASSERT_EQ(std::system(command.c_str()), 0) << read(console);
  const std::string rendered = read(dom);
  EXPECT_NE(rendered.find("data-carb-status=\"done\""), std::string::npos)
      << "the page never finished embedding its charts";
  EXPECT_NE(rendered.find("data-carb-rendered=\"13\""), std::string::npos);
  EXPECT_NE(rendered.find("data-carb-errors=\"0\""), std::string::npos) << [&] {
    const std::size_t from = rendered.find("id=\"carb-errors\"");
    return rendered.substr(from, rendered.find("</pre>", from) - from);
  }();
  const std::regex drawn_chart(
      R"(<div class="chart[^"]*" id="chart-[^"]+"[^>]* data-rendered="true")");
  EXPECT_EQ(std::distance(std::sregex_iterator(rendered.begin(), rendered.end(), drawn_chart),
                          std::sregex_iterator()),
            13);
  // Nothing logged to the console at all (Chromium copies console messages to stderr).
  const std::string log = read(console);
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
}

}  // namespace
