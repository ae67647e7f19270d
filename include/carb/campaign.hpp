// A profiling campaign: measure a list of configurations on one device into a carb database,
// one worker process per configuration, resumable, shardable and safe to run concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "carb/measure.hpp"
#include "carb/store.hpp"

namespace carb {

/// A deterministic share of a campaign's configurations: those whose configuration key's
/// SHA-256 is `index` modulo `count`. Shards count from 0: "0/4" .. "3/4".
struct Shard {
  int index = 0;
  int count = 1;

  /// Parses "K/N" (0 <= K < N) or "auto" (from_environment()). Throws carb::Error (usage,
  /// subject "shard") on bad text.
  static Shard parse(const std::string& text);
  /// The shard of this process: a Slurm array task's position in its array
  /// ((SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP of
  /// SLURM_ARRAY_TASK_COUNT), else OMPI_COMM_WORLD_RANK of OMPI_COMM_WORLD_SIZE. Throws
  /// carb::Error (usage, subject "shard") when neither is set or they do not describe a shard.
  static Shard from_environment();
  /// Whether a configuration key belongs to this shard.
  bool contains(const std::string& configuration_key) const;
  /// "K/N".
  std::string name() const;
  /// `pattern` with "{shard}" replaced by K and "{shards}" by N, e.g. for per-shard file names.
  std::string expand(const std::string& pattern) const;
};

/// What to measure and where.
struct CampaignOptions {
  std::string name;       ///< campaign name (the spec's name)
  std::string spec_text;  ///< the spec or key list as given, kept with the campaign
  std::string db_path;
  std::string device;  ///< a device id ("cpu:0") or kind ("cpu": its first device)
  Protocol protocol;
  ResumePolicy resume;
  std::optional<double> time_budget_s;  ///< no new configuration starts after this long
  Shard shard;
  WorkerCommand worker;
  double idle_window_s = 2.0;  ///< idle-power baseline window at the start, when a sensor exists
  /// The drift probe: measured briefly (drift_probe_protocol) before the first configuration,
  /// then before the next one whenever drift_every_s have passed since the last probe, and
  /// after the last one, into the database's drift_probes (docs/measurement.md, "Drift probes").
  /// None: no probes.
  std::optional<Config> drift_probe;
  double drift_every_s = 10.0;
  /// Every configuration is measured once per round, round after round, so that a noisy
  /// machine's slow spells fall on different configurations in each (Protocol::round);
  /// carb fit takes the median of a configuration's rounds. Not under MPI.
  int rounds = 1;
  /// Asked before each configuration and while one is measured (WorkerProcess::measure): when
  /// it returns true the campaign stops there. The measurement in flight is abandoned (its
  /// worker killed, its claim released, nothing stored), every finished one is stored, and the
  /// summary says stopped; a later run resumes. Empty: never stops early. Not under MPI.
  std::function<bool()> stop;
};

/// The default drift probe: a small network at batch 1, so a probe is short.
inline constexpr std::string_view kDefaultDriftProbe = "basic18_w0.5_ds_r64_b1_fp32";

/// A drift probe's protocol: the campaign's, with a short warm-up (0.05 s), 0.15-0.5 s of timed
/// passes, no energy window and no cooldown (what probes cost a campaign: docs/benchmarks.md,
/// "Harness overhead").
Protocol drift_probe_protocol(const Protocol& campaign);

/// Where a running campaign is, for progress lines.
struct CampaignProgress {
  std::int64_t total = 0;     ///< configurations to measure in this run (pending in this shard)
  std::int64_t finished = 0;  ///< measured or skipped so far in this run
  double elapsed_s = 0;
  std::map<std::string, std::int64_t> by_status;  ///< outcomes so far, by status name
  std::string last_key;
};

/// What a campaign run did.
struct CampaignSummary {
  std::string device_id;
  std::string device_fingerprint;
  /// The host as every row records it (provenance.host): identity, instance and speed probe.
  nlohmann::json host = nlohmann::json::object();
  std::int64_t campaign_id = 0;
  std::int64_t selected = 0;           ///< configurations given
  std::int64_t in_shard = 0;           ///< measurements of those in this shard, all rounds
  std::int64_t already_done = 0;       ///< final, or failed too often, before this run
  std::int64_t claimed_elsewhere = 0;  ///< left to another process measuring them
  std::int64_t not_started = 0;        ///< left because the time budget ran out
  std::map<std::string, std::int64_t> measured;  ///< this run's outcomes by status name
  std::optional<double> idle_power_w;
  std::string idle_power_null_reason;
  double wall_s = 0;       ///< the whole run
  double inference_s = 0;  ///< inside run()+sync(): warm-up, timed samples, energy windows
  double prepare_s = 0;    ///< building sessions inside workers
  /// Measurements during whose timing other work took >= kContendedShare of the CPUs.
  std::int64_t contended = 0;
  int mpi_rank = 0;              ///< this process's rank under --mpi (only rank 0 has the rest)
  int mpi_ranks = 1;             ///< ranks in the MPI job
  std::int64_t ranks_lost = 0;   ///< measuring ranks that died or never started
  std::int64_t reissued = 0;     ///< configurations handed out again after their rank was lost
  std::int64_t probes = 0;       ///< drift probes measured, whatever their status
  std::vector<double> probe_ms;  ///< the ok, uncontended probes' median latencies, in order
  double probe_s = 0;            ///< wall time the probes took, workers included
  std::string probe_failure;     ///< the first failed probe's status and detail
  /// CampaignOptions::stop stopped the run: configurations were left unmeasured (not counted
  /// in not_started), a later run measures them.
  bool stopped = false;
};

/// Measures `configs` (in order) on one device into the database at options.db_path: skips keys
/// already final (or failed options.resume.retry_limit times), claims each key so concurrent
/// campaigns never measure one twice, runs each in a worker with a timeout, and writes each
/// result in one transaction. Calls `progress` after every configuration.
CampaignSummary run_campaign(const std::vector<Config>& configs, const CampaignOptions& options,
                             const std::function<void(const CampaignProgress&)>& progress);

/// The fingerprint under which run_campaign stores measurements on `device` (an id or a kind) of
/// this machine. Throws carb::Error (usage) when there is no such device.
std::string device_fingerprint_of(const std::string& device);

/// The same campaign over MPI (`mpirun -n P carb profile --mpi`): rank 0 owns the database and
/// hands out one configuration at a time; ranks 1..P-1 each measure on their device (all must
/// have one fingerprint) in worker processes and send results back. A rank that dies (with
/// `mpirun --enable-recovery`) or never starts loses only its configuration in flight, which is
/// handed out again. Rank 0 returns the campaign's summary, the others only their rank. Throws
/// carb::Error (usage) when carb was built without MPI (CARB_MPI) or runs as one rank.
CampaignSummary run_mpi_campaign(const std::vector<Config>& configs, const CampaignOptions& options,
                                 const std::function<void(const CampaignProgress&)>& progress);

/// profile_kernels' drift probe: `config` measured in this process with drift_probe_protocol()
/// before the first configuration, before the next one whenever `every_s` have passed since the
/// last probe, and after the last configuration, as a campaign's (docs/measurement.md, "Drift
/// probes").
struct KernelDriftProbe {
  Config config;
  double every_s = 10.0;
};

/// A drift probe's latency at moment `at_s` (seconds) from the ok probes around it, each
/// (moment in seconds, median ms): linear in time between `before` and `after` when both are
/// and `after` is later, the one there is when only one is (or the two share a moment: then
/// `after`), nullopt when neither is. profile_kernels' probe_ms.
std::optional<double> probe_ms_at(double at_s,
                                  const std::optional<std::pair<double, double>>& before,
                                  const std::optional<std::pair<double, double>>& after);

/// Where each configuration's forward pass spends its time on `device`, kernel by kernel
/// (time_kernels, after `warmup_passes` whole passes, over `passes`), in this process: a
/// diagnostic, not a measurement (no worker, no store). Calls `each` per configuration in order
/// with its session's network and breakdown. With a drift probe, each breakdown's probe_ms is
/// the probe's latency at the configuration's moment, linear in time between the ok probes
/// around it (the nearest one where there is one on one side only; nullopt where none was ok),
/// and `each` is called once the probe after a configuration has run. With `rounds` > 1, every
/// configuration is timed once per round, the rounds one after the other (each with its probes),
/// and `each` is called once per configuration after the last round, with its rounds combined
/// (combine_rounds: medians). Throws carb::Error: usage for an unknown device, one that cannot
/// run its pass a kernel at a time or fewer than one round, input for a configuration it cannot
/// run.
void profile_kernels(const std::vector<Config>& configs, const std::string& device,
                     std::uint64_t seed, int warmup_passes, int passes, int rounds,
                     const std::optional<KernelDriftProbe>& probe,
                     const std::function<void(const Network&, const KernelBreakdown&)>& each);

/// A device of this machine as a campaign records it: what kernel timings carry so that a kernel
/// model knows its device and host.
struct DeviceIdentity {
  std::string fingerprint;  ///< the host's and the engine's (a store's device fingerprint)
  std::string name;         ///< the hardware model, e.g. "AMD EPYC 7B13"
  std::string instance;     ///< this host's instance (machine:boot id); "" where unreadable
};

/// The identity of `device` (a device id, e.g. "cpu") on this machine. Throws carb::Error (usage)
/// for an unknown device, as profile_kernels does.
[[nodiscard]] DeviceIdentity identify_device(const std::string& device);

/// How long a claim of a campaign measuring under `protocol` holds before another process may
/// take it over (ResumePolicy::claim_timeout): twice the worker timeout plus a minute, longer
/// than one measurement can take.
std::chrono::seconds claim_timeout_for(const Protocol& protocol);

/// A duration for people: "1h2m3s", "4m0s", "7s" (rounded to the second).
std::string duration_text(double seconds);

/// A campaign's progress in one line: "[12/40] 31/min, ETA 54s, ok 12  KEY" (configurations
/// finished of those to measure, the rate, the time left at that rate, the outcomes so far by
/// status, the last configuration).
std::string progress_text(const CampaignProgress& progress);

/// Parses a duration such as "90", "90s", "30m", "2h" or "1h30m" into seconds; throws
/// carb::Error (usage) on bad text.
double parse_duration_s(const std::string& text);

}  // namespace carb
