// Campaigns on the real CPU engine with real worker processes, into a real SQLite file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "carb/campaign.hpp"
#include "carb/error.hpp"
#include "campaign_fixtures.hpp"

namespace carb {
namespace {

using testing::fresh_db;
using testing::quick_options;
using testing::tiny_configs;

TEST(Campaign, MeasuresThenResumesWithoutRepeating) {
  const std::string db = fresh_db("resume.sqlite");
  const auto configs = tiny_configs(3);
  std::int64_t progress_calls = 0;
  const CampaignSummary first =
      run_campaign(configs, quick_options(db), [&](const CampaignProgress&) { ++progress_calls; });
  EXPECT_EQ(first.selected, 3);
  EXPECT_EQ(first.measured.at("ok"), 3);
  EXPECT_EQ(first.already_done, 0);
  EXPECT_EQ(progress_calls, 3);
  // An idle baseline exactly when the machine has an energy sensor, else its reason.
  if (open_cpu_energy_meter()->available()) {
    EXPECT_TRUE(first.idle_power_w.has_value()) << first.idle_power_null_reason;
  } else {
    EXPECT_FALSE(first.idle_power_w.has_value());
    EXPECT_FALSE(first.idle_power_null_reason.empty());
  }
  EXPECT_GT(first.inference_s, 0);
  EXPECT_LT(first.inference_s, first.wall_s);

  const CampaignSummary second = run_campaign(configs, quick_options(db), {});
  EXPECT_TRUE(second.measured.empty());
  EXPECT_EQ(second.already_done, 3);
  EXPECT_EQ(second.campaign_id, first.campaign_id);
  // Nothing to measure: no idle window either, and the summary says why.
  EXPECT_FALSE(second.idle_power_w.has_value());
  EXPECT_EQ(second.idle_power_null_reason, "not measured: nothing left to measure");

  const Store store = Store::open(db);
  EXPECT_EQ(store.integrity_check(), "ok");
  std::ostringstream csv;
  EXPECT_EQ(store.export_measurements(csv, ExportFormat::kCsv), 3);
  // One worker process measured all three, one after another (Protocol::worker_reuse).
  std::ostringstream lines;
  ASSERT_EQ(store.export_measurements(lines, ExportFormat::kJsonLines), 3);
  std::istringstream rows(lines.str());
  std::set<int> pids;
  std::set<int> before;
  for (std::string line; std::getline(rows, line);) {
    const auto worker = nlohmann::json::parse(line).at("provenance").at("worker");
    pids.insert(worker.at("pid").get<int>());
    before.insert(worker.at("measured_before").get<int>());
  }
  EXPECT_EQ(pids.size(), 1u);
  EXPECT_EQ(before, (std::set<int>{0, 1, 2}));
}

TEST(Campaign, DriftProbesFrameTheCampaignAndFollowTheInterval) {
  const std::string db = fresh_db("drift.sqlite");
  CampaignOptions options = quick_options(db);
  const std::string probe_key = "basic10_w0.25_nods_r32_b1_fp32_k10";
  options.drift_probe = parse_key(probe_key);
  options.drift_every_s = 1e9;  // only before the first configuration and after the last
  const CampaignSummary summary = run_campaign(tiny_configs(3), options, {});
  EXPECT_EQ(summary.measured.at("ok"), 3);
  EXPECT_EQ(summary.probes, 2);
  EXPECT_GT(summary.probe_s, 0);
  const Store store = Store::open(db);
  const std::vector<DriftProbeRecord> probes = store.drift_probes();
  ASSERT_EQ(probes.size(), 2u);
  // The summary lists the ok probes nothing else contended (under load, perhaps none).
  std::size_t usable = 0;
  for (const DriftProbeRecord& probe : probes) usable += probe.contended ? 0 : 1;
  EXPECT_EQ(summary.probe_ms.size(), usable);
  EXPECT_TRUE(summary.probe_failure.empty()) << summary.probe_failure;
  for (const DriftProbeRecord& probe : probes) {
    EXPECT_EQ(probe.status, MeasurementStatus::kOk) << probe.detail;
    EXPECT_EQ(probe.configuration_key, probe_key);
    ASSERT_TRUE(probe.latency.has_value());
    EXPECT_GT(probe.latency->median_ms, 0);
    // Ten samples, unless the probe's 0.5 s limit came first (a loaded machine: one run took
    // 100 ms beside the parallel suite), and then it says it did not converge.
    EXPECT_GE(probe.latency->count, 1);
    if (probe.latency->count < 10) {
      EXPECT_FALSE(probe.latency->converged);
    }
    EXPECT_EQ(probe.clock, "wall");
    EXPECT_EQ(probe.campaign_id, summary.campaign_id);
    EXPECT_EQ(probe.device_fingerprint, summary.device_fingerprint);
    EXPECT_EQ(nlohmann::json::parse(probe.protocol_json).at("min_time_s"), 0.15);
  }
  // The probes frame the measurements in time, and are not measurements themselves.
  const std::vector<MeasuredTargets> measured = store.ok_measurements();
  ASSERT_EQ(measured.size(), 3u);
  for (const MeasuredTargets& row : measured) {
    EXPECT_LT(probes[0].measured_at, row.measured_at);
    EXPECT_GT(probes[1].measured_at, row.measured_at);
  }
  // Resuming with nothing left to measure probes nothing.
  EXPECT_EQ(run_campaign(tiny_configs(3), options, {}).probes, 0);

  // Every 0 s: before each configuration, and once after the last.
  CampaignOptions every = quick_options(fresh_db("drift-every.sqlite"));
  every.drift_probe = parse_key(probe_key);
  every.drift_every_s = 0;
  EXPECT_EQ(run_campaign(tiny_configs(3), every, {}).probes, 4);
}

TEST(Campaign, FailuresAreRowsAndTheCampaignGoesOn) {
  const std::string db = fresh_db("failures.sqlite");
  std::vector<Config> configs = tiny_configs(1);
  configs.push_back(parse_key("basic10_w0.25_nods_r32_b1_fp16_k10"));  // no fp16 on any CPU
  const CampaignSummary summary = run_campaign(configs, quick_options(db), {});
  EXPECT_EQ(summary.measured.at("ok"), 1);
  EXPECT_EQ(summary.measured.at("unsupported"), 1);
}

TEST(Campaign, TimeBudgetStopsStartingConfigurations) {
  const std::string db = fresh_db("budget.sqlite");
  CampaignOptions options = quick_options(db);
  options.time_budget_s = 0;
  const CampaignSummary summary = run_campaign(tiny_configs(4), options, {});
  EXPECT_TRUE(summary.measured.empty());
  EXPECT_EQ(summary.not_started, 4);
}

TEST(Campaign, StopKeepsEveryFinishedMeasurementAndReleasesTheOneInFlight) {
  const std::string db = fresh_db("stop.sqlite");
  const auto configs = tiny_configs(5);
  CampaignOptions options = quick_options(db);
  // Asked before each configuration and during each measurement: after two finished
  // configurations, let the third start, then stop while it is measured.
  int finished = 0;
  bool asked_in_flight = false;
  options.stop = [&] {
    if (finished < 2) return false;
    if (!asked_in_flight) {
      asked_in_flight = true;  // the question before the third configuration: go on
      return false;
    }
    return true;  // while the third is measured
  };
  const CampaignSummary first = run_campaign(configs, options, [&](const CampaignProgress& p) {
    finished = static_cast<int>(p.finished);
  });
  EXPECT_TRUE(first.stopped);
  EXPECT_EQ(first.measured.at("ok"), 2);
  EXPECT_EQ(first.not_started, 0);
  {
    const Store store = Store::open(db);
    EXPECT_EQ(store.integrity_check(), "ok");
    EXPECT_EQ(store.ok_measurements().size(), 2u);
    EXPECT_EQ(store.outcomes().size(), 2u);  // nothing stored of the one in flight
  }
  // Its claim was released: this process resumes it at once, and measures the rest.
  const CampaignSummary second = run_campaign(configs, quick_options(db), {});
  EXPECT_FALSE(second.stopped);
  EXPECT_EQ(second.already_done, 2);
  EXPECT_EQ(second.claimed_elsewhere, 0);
  EXPECT_EQ(second.measured.at("ok"), 3);

  // Asked to stop before anything: nothing measured, nothing left claimed.
  CampaignOptions at_once = quick_options(fresh_db("stop-at-once.sqlite"));
  at_once.stop = [] { return true; };
  const CampaignSummary none = run_campaign(configs, at_once, {});
  EXPECT_TRUE(none.stopped);
  EXPECT_TRUE(none.measured.empty());
}

TEST(Campaign, ProgressTextSaysHowFarHowFastAndWhatCameOut) {
  CampaignProgress progress;
  progress.total = 40;
  progress.finished = 12;
  progress.elapsed_s = 24;
  progress.by_status = {{"ok", 11}, {"oom", 1}};
  progress.last_key = "basic10_w0.25_nods_r32_b1_fp32";
  EXPECT_EQ(progress_text(progress),
            "[12/40] 30/min, ETA 56s, ok 11, oom 1  basic10_w0.25_nods_r32_b1_fp32");
  progress.finished = 0;
  progress.by_status.clear();
  EXPECT_EQ(progress_text(progress), "[0/40] 0/min, ETA 0s  basic10_w0.25_nods_r32_b1_fp32");
  EXPECT_EQ(duration_text(3723.4), "1h2m3s");
  EXPECT_EQ(duration_text(240), "4m0s");
  EXPECT_EQ(duration_text(6.6), "7s");
}

TEST(KernelDriftProbe, AConfigurationsProbeLatencyIsLinearInTimeBetweenTheOkProbesAroundIt) {
  using Point = std::optional<std::pair<double, double>>;
  const Point before = std::pair{10.0, 2.0};
  const Point after = std::pair{20.0, 4.0};
  EXPECT_DOUBLE_EQ(*probe_ms_at(10, before, after), 2);
  EXPECT_DOUBLE_EQ(*probe_ms_at(12.5, before, after), 2.5);
  EXPECT_DOUBLE_EQ(*probe_ms_at(20, before, after), 4);
  // One side only (the first probe failed, or the last one did): that one's latency.
  EXPECT_DOUBLE_EQ(*probe_ms_at(12.5, std::nullopt, after), 4);
  EXPECT_DOUBLE_EQ(*probe_ms_at(12.5, before, std::nullopt), 2);
  // Two probes of one moment: the later one's; none ok: none.
  EXPECT_DOUBLE_EQ(*probe_ms_at(10, before, std::pair{10.0, 3.0}), 3);
  EXPECT_FALSE(probe_ms_at(12.5, std::nullopt, std::nullopt).has_value());
}

// carb kernels --rounds: every configuration once a round, then one breakdown each, in their
// order, of every round's passes (more where a round was timed again), each with its probe.
TEST(KernelRounds, EachConfigurationIsTimedOnceARoundAndCombinedAfterTheLast) {
  const std::vector<Config> configs = tiny_configs(2);
  std::vector<std::string> keys;
  std::vector<int> passes;
  profile_kernels(configs, "cpu", 1, 0, 2, 3, KernelDriftProbe{configs.front(), 1000.0},
                  [&](const Network& network, const KernelBreakdown& times) {
                    keys.push_back(to_key(network.config));
                    passes.push_back(times.passes);
                    EXPECT_TRUE(times.probe_ms.has_value());
                    EXPECT_GT(times.pass_median_ms, 0);
                  });
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], to_key(configs[0]));
  EXPECT_EQ(keys[1], to_key(configs[1]));
  for (const int count : passes) {
    EXPECT_GE(count, 2 * 3);  // time_kernels' re-timings add rounds of 2
    EXPECT_EQ(count % 2, 0);
  }
  EXPECT_THROW(profile_kernels(configs, "cpu", 1, 0, 1, 0, std::nullopt,
                               [](const Network&, const KernelBreakdown&) {}),
               Error);
}

TEST(Campaign, AClaimOutlastsTheLongestMeasurement) {
  Protocol protocol;
  protocol.timeout_s = 300;
  EXPECT_EQ(claim_timeout_for(protocol), std::chrono::seconds(660));
  protocol.timeout_s = 2.5;
  EXPECT_EQ(claim_timeout_for(protocol), std::chrono::seconds(65));
}

TEST(Campaign, UnknownDeviceIsAUsageError) {
  CampaignOptions options = quick_options(fresh_db("nodevice.sqlite"));
  options.device = "cuda:3";
  try {
    run_campaign(tiny_configs(1), options, {});
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.exit_code(), 2);
    EXPECT_NE(std::string(error.what()).find("no device 'cuda:3' on this machine (devices: cpu:0"),
              std::string::npos)
        << error.what();
  }
}

TEST(Shard, PartitionsKeysExactly) {
  std::vector<std::string> keys;
  for (int batch = 1; batch <= 200; ++batch) {
    keys.push_back("basic18_w1_ds_r64_b" + std::to_string(batch) + "_fp32");
  }
  std::multiset<std::string> seen;
  for (int index = 0; index < 3; ++index) {
    const Shard shard = Shard::parse(std::to_string(index) + "/3");
    int taken = 0;
    for (const auto& key : keys) {
      if (shard.contains(key)) {
        seen.insert(key);
        ++taken;
      }
    }
    EXPECT_GT(taken, 40) << index;  // roughly a third each
  }
  EXPECT_EQ(seen.size(), keys.size());
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), keys.size());
}

// Sets environment variables for one scope and restores what was there.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::map<std::string, std::string>& values) {
    for (const char* name :
         {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
          "SLURM_ARRAY_TASK_STEP", "SLURM_ARRAY_TASK_MAX", "OMPI_COMM_WORLD_RANK",
          "OMPI_COMM_WORLD_SIZE"}) {
      const char* old = std::getenv(name);
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

std::string usage_error(const std::string& text) {
  try {
    Shard::parse(text);
  } catch (const Error& error) {
    EXPECT_EQ(error.exit_code(), 2) << text;
    EXPECT_EQ(error.subject(), "shard") << text;  // the CLI names its flag for it
    return error.what();
  }
  ADD_FAILURE() << "no error for " << text;
  return "";
}

TEST(Shard, ParsesKOfNCountingFromZero) {
  EXPECT_EQ(Shard::parse("2/5").index, 2);
  EXPECT_EQ(Shard::parse("2/5").count, 5);
  EXPECT_EQ(Shard::parse("0/1").name(), "0/1");
  for (const char* bad : {"5/5", "-1/3", "1", "a/b", "1/0", "1/2/3", "/3", "1/", " 1/3", "1/3 "}) {
    EXPECT_THROW(Shard::parse(bad), Error) << bad;
  }
  EXPECT_EQ(usage_error("4/4"),
            "shard 4/4: needs 0 <= K < N (shards count from 0: 0/4 is the first of 4)");
  EXPECT_EQ(usage_error("3"), "shard '3': expected K/N (0 <= K < N, shards count from 0) or auto");
  EXPECT_EQ(usage_error("x/4"), "shard 'x/4': K 'x' is not an integer");
}

TEST(Shard, AutoReadsSlurmArrays) {
  using Variables = std::map<std::string, std::string>;
  // (environment, the shard it means or the error it gets)
  const std::vector<std::pair<Variables, std::string>> cases = {
      {{{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "8"}}, "3/8"},
      // --array=1-8: tasks 1..8 are shards 0..7.
      {{{"SLURM_ARRAY_TASK_ID", "8"},
        {"SLURM_ARRAY_TASK_COUNT", "8"},
        {"SLURM_ARRAY_TASK_MIN", "1"},
        {"SLURM_ARRAY_TASK_STEP", "1"}},
       "7/8"},
      // --array=10-16:3: tasks 10, 13, 16 are shards 0, 1, 2.
      {{{"SLURM_ARRAY_TASK_ID", "13"},
        {"SLURM_ARRAY_TASK_COUNT", "3"},
        {"SLURM_ARRAY_TASK_MIN", "10"},
        {"SLURM_ARRAY_TASK_MAX", "16"},
        {"SLURM_ARRAY_TASK_STEP", "3"}},
       "1/3"},
      // --array=0,5,9: not a grid Slurm describes with min and step.
      {{{"SLURM_ARRAY_TASK_ID", "9"},
        {"SLURM_ARRAY_TASK_COUNT", "3"},
        {"SLURM_ARRAY_TASK_MIN", "0"}},
       "shard auto: Slurm array task 9 gives shard 9 of 3 (a non-contiguous array?); give "
       "the shard as K/N"},
      {{{"SLURM_ARRAY_TASK_ID", "0"},
        {"SLURM_ARRAY_TASK_COUNT", "3"},
        {"SLURM_ARRAY_TASK_MIN", "0"},
        {"SLURM_ARRAY_TASK_MAX", "9"},
        {"SLURM_ARRAY_TASK_STEP", "1"}},
       "shard auto: the Slurm array (min 0, max 9, step 1) does not have 3 evenly spaced "
       "tasks; give the shard as K/N"},
      {{{"SLURM_ARRAY_TASK_ID", "2"}},
       "shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not"},
      {{{"SLURM_ARRAY_TASK_ID", "two"}, {"SLURM_ARRAY_TASK_COUNT", "4"}},
       "shard auto: SLURM_ARRAY_TASK_ID 'two' is not an integer"},
  };
  for (const auto& [variables, expected] : cases) {
    const ScopedEnvironment slurm(variables);
    if (expected.starts_with("shard")) {
      EXPECT_EQ(usage_error("auto"), expected);
    } else {
      EXPECT_EQ(Shard::parse("auto").name(), expected);
    }
  }
}

TEST(Shard, AutoReadsOpenMpiRanksAndFailsWithoutAnything) {
  {
    const ScopedEnvironment mpi({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"}});
    EXPECT_EQ(Shard::parse("auto").name(), "2/3");
  }
  {
    // A Slurm array whose tasks run mpirun: the array decides the shard.
    const ScopedEnvironment both({{"SLURM_ARRAY_TASK_ID", "1"},
                                  {"SLURM_ARRAY_TASK_COUNT", "2"},
                                  {"OMPI_COMM_WORLD_RANK", "0"},
                                  {"OMPI_COMM_WORLD_SIZE", "4"}});
    EXPECT_EQ(Shard::parse("auto").name(), "1/2");
  }
  const ScopedEnvironment nothing(std::map<std::string, std::string>{});
  EXPECT_EQ(usage_error("auto"),
            "shard auto: neither SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (a Slurm job array "
            "task) nor OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (an mpirun rank) is set; give "
            "the shard as K/N");
}

TEST(Shard, ExpandsFileNames) {
  const Shard shard = Shard::parse("3/8");
  EXPECT_EQ(shard.expand("runs-{shard}-of-{shards}.sqlite"), "runs-3-of-8.sqlite");
  EXPECT_EQ(shard.expand("{shard}{shard}/x"), "33/x");
  EXPECT_EQ(shard.expand("plain.sqlite"), "plain.sqlite");
}

TEST(Duration, ParsesUnits) {
  EXPECT_DOUBLE_EQ(parse_duration_s("90"), 90);
  EXPECT_DOUBLE_EQ(parse_duration_s("90s"), 90);
  EXPECT_DOUBLE_EQ(parse_duration_s("30m"), 1800);
  EXPECT_DOUBLE_EQ(parse_duration_s("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(parse_duration_s("0.5h"), 1800);
  for (const char* bad : {"", "soon", "5d", "-3m", "m"}) {
    EXPECT_THROW(parse_duration_s(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace carb
