// carb devices | carb profile | carb export, and the hidden worker verb.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "carb/campaign.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/model.hpp"
#include "carb/screen.hpp"
#include "carb/statistics.hpp"
#include "carb/store.hpp"
#include "domain.hpp"
#include "errors.hpp"
#include "output.hpp"
#include "select.hpp"
#include "verbs.hpp"

namespace carb::cli {

namespace {

// --- carb devices -------------------------------------------------------------------------

void run_devices(const std::string& format) {
  const auto backends = make_backends();
  auto writer = make_row_writer(
      parse_format(format),
      {"id", "kind", "name", "library", "isa", "threads", "fp32", "fp16", "bf16", "energy"},
      std::cout);
  for (const auto& backend : backends) {
    for (const auto& device : backend->devices()) {
      const DeviceInfo& info = device->info();
      std::vector<Cell> row = {info.id,      info.kind, info.name,
                               info.library, info.isa,  std::int64_t{info.threads}};
      for (Precision precision : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
        std::string text = "unknown";
        for (const PrecisionSupport& support : info.precisions) {
          if (support.precision == precision) {
            text = support.supported ? "yes" : "no: " + support.reason;
          }
        }
        row.emplace_back(text);
      }
      const auto meter = open_energy_meter(info);
      row.emplace_back(meter->available() ? meter->name() + " (" + meter->sensor() + ")"
                                          : "none: " + meter->unavailable_reason());
      writer->row(row);
    }
  }
  writer->finish();
  // A backend built in but without devices says why: below the table, or on stderr so CSV and
  // JSON stay machine-readable.
  std::ostream& notes = format == "table" ? std::cout : std::cerr;
  for (const auto& backend : backends) {
    if (backend->devices().empty()) {
      notes << backend->name() << ": no devices: " << backend->unavailable_reason() << "\n";
    }
  }
}

// --drift-probe's configuration; nullopt for "none" or a --drift-every of 0.
std::optional<Config> drift_probe_of(const std::string& probe, double every_s) {
  if (probe == "none" || every_s <= 0) return std::nullopt;
  try {
    return parse_key(probe);
  } catch (const Error& error) {
    throw Error(ErrorCategory::kUsage, "--drift-probe: " + std::string(error.what()));
  }
}

// --- carb kernels -------------------------------------------------------------------------

struct KernelsOptions {
  Selection selection;
  OnnxModel onnx;
  std::string device = "cpu";
  int passes = 20;
  int warmup = 5;
  int rounds = 1;
  std::string drift_probe = std::string(kDefaultDriftProbe);
  std::string drift_every = "10s";
  std::string format = "table";
};

void run_kernels(const KernelsOptions& options) {
  const int given = static_cast<int>(!options.selection.spec.empty()) +
                    static_cast<int>(!options.selection.keys_file.empty()) +
                    static_cast<int>(!options.onnx.path.empty());
  if (given != 1) throw Error(ErrorCategory::kUsage, "give one of --spec, --keys or --onnx");
  const std::vector<Config> configs = options.onnx.path.empty()
                                          ? select_configs(options.selection)
                                          : std::vector<Config>{onnx_config(options.onnx)};
  const Format format = parse_format(options.format);
  std::vector<std::string> columns = {"key", "index"};
  for_each_kernel_column(Network{}, KernelTime{}, 0, engine::KernelEngine::kCarb,
                         [&](std::string_view name, const auto&) { columns.emplace_back(name); });
  columns.insert(columns.end(),
                 {"pass_ms", "drift_probe", "probe_ms", "device", "device_name", "instance"});
  // What a kernel model fitted on these timings knows of its device and host.
  const DeviceIdentity identity = identify_device(options.device);
  const engine::KernelEngine kernel_engine = kernel_engine_of(identity.fingerprint);
  const double every_s = parse_duration_s(options.drift_every);
  std::optional<KernelDriftProbe> probe;
  if (const std::optional<Config> config = drift_probe_of(options.drift_probe, every_s)) {
    probe = KernelDriftProbe{*config, every_s};
  }
  const Cell probe_key = probe ? Cell(to_key(probe->config)) : Cell(kNull);
  auto writer = make_row_writer(format, columns, std::cout);
  // Weights and input seeded as a measurement's are (Protocol::seed), whatever --seed samples.
  profile_kernels(configs, options.device, Protocol{}.seed, options.warmup, options.passes,
                  options.rounds, probe, [&](const Network& network, const KernelBreakdown& times) {
                    const double sum_ms = kernels_sum_ms(times);
                    const std::string key = to_key(network.config);
                    for (std::size_t k = 0; k < times.kernels.size(); ++k) {
                      std::vector<Cell> row = {key, static_cast<std::int64_t>(k)};
                      for_each_kernel_column(network, times.kernels[k], sum_ms, kernel_engine,
                                             [&](std::string_view, const auto& value) {
                                               row.push_back(cell_of(value()));
                                             });
                      row.emplace_back(times.pass_median_ms);
                      row.push_back(probe_key);
                      row.push_back(cell_of(times.probe_ms));
                      row.insert(row.end(), {identity.fingerprint, identity.name,
                                             identity.instance.empty() ? Cell(kNull)
                                                                       : Cell(identity.instance)});
                      writer->row(row);
                    }
                    if (times.passes > options.passes * options.rounds) {
                      std::cerr << "carb: " << key << ": its whole passes and its kernels' sum "
                                << "differed by more than " << cell_text(kPassKernelsTolerance)
                                << "x, so it was timed again: " << times.passes
                                << " passes, a whole pass " << cell_text(times.pass_median_ms)
                                << " ms, its kernels " << cell_text(sum_ms) << " ms"
                                << (pass_agrees_with_kernels(times)
                                        ? "\n"
                                        : " (still apart: kept as measured)\n");
                    }
                    if (format == Format::kTable) {
                      std::cerr << key << ": a whole pass " << cell_text(times.pass_median_ms)
                                << " ms, its kernels run one at a time " << cell_text(sum_ms)
                                << " ms (medians of " << times.passes << " passes)\n";
                    }
                  });
  writer->finish();
}

// --- carb profile -------------------------------------------------------------------------

struct ProfileOptions {
  Selection selection;
  std::string device = "cpu";
  std::string db;
  std::string time_budget;
  std::string shard = "0/1";
  std::string worker_memory_limit;
  bool mpi = false;
  Protocol protocol;
  int retry_limit = 3;
  double idle_window_s = 2.0;
  std::string drift_probe = std::string(kDefaultDriftProbe);
  std::string drift_every = "10s";
  int rounds = 1;
  std::string transfer_for;  ///< a model of another device: measure what a transfer needs
};

// A size such as "2GiB" or "512MB" (the units of a memory budget), in bytes.
std::int64_t parse_size_bytes(const std::string& text, const std::string& option) {
  try {
    const auto budgets = parse_budgets("memory<=" + text, option);
    if (budgets.size() == 1) return static_cast<std::int64_t>(budgets.front().limit);
  } catch (const Error&) {
  }
  throw Error(ErrorCategory::kUsage,
              option + " '" + text + "': expected a size with its unit, e.g. 2GiB or 512MB");
}

// The host a campaign ran on, in one line: its instance, CPU revision, hypervisor and speed.
std::string host_line(const nlohmann::json& host) {
  const auto text = [&](const char* field) {
    return host.contains(field) && host.at(field).is_string() ? host.at(field).get<std::string>()
                                                              : std::string();
  };
  std::ostringstream line;
  const std::string instance = text("instance");
  line << "instance " << (instance.empty() ? "unknown (no machine or boot id)" : instance) << ", "
       << text("cpu_model") << " family " << text("cpu_family") << " model "
       << text("cpu_model_number") << " stepping " << text("cpu_stepping") << ", hypervisor "
       << text("hypervisor");
  if (host.contains("speed")) {
    char speed[96];
    std::snprintf(speed, sizeof speed, "; one thread: triad %.1f GB/s, multiply-add %.2f GFLOP/s",
                  host.at("speed").value("triad_gb_per_s", 0.0),
                  host.at("speed").value("fma_gflop_per_s", 0.0));
    line << speed;
  }
  return line.str();
}

}  // namespace

void print_progress(const CampaignProgress& progress, bool terminal) {
  const std::string line = progress_text(progress);
  if (terminal) {
    std::cerr << "\r\033[K" << line << std::flush;
  } else if (progress.finished % 50 == 0 || progress.finished == progress.total) {
    std::cerr << line << "\n";
  }
}

namespace {

// The most configurations --transfer-for chooses from: a seeded sample of a larger space.
constexpr std::uint64_t kTransferPool = 20000;

// --transfer-for: the --sample K configurations of the selection a transfer from `source`
// learns most from (choose_transfer_rows over the whole selection, or a sample of a large one).
std::vector<Config> transfer_configs(const Predictor& source, const Selection& selection) {
  if (selection.sample == 0) {
    throw Error(ErrorCategory::kUsage,
                "--transfer-for needs --sample K: how many configurations to measure");
  }
  Selection pool = selection;
  pool.sample = 0;
  if (!selection.spec.empty() && Space::from_file(selection.spec).size() > kTransferPool) {
    pool.sample = kTransferPool;
    pool.sampling = "random";
  }
  const std::vector<Config> candidates = select_configs(pool);
  const FeatureRows rows = feature_rows(candidates);
  std::vector<Config> chosen;
  for (std::size_t i : choose_transfer_rows(source, rows.x.data(), candidates.size(),
                                            rows.batch.data(), selection.sample, selection.seed)) {
    chosen.push_back(candidates[i]);
  }
  // A new family's few rows can only say one factor (transfer_fit notes it too): say so before
  // measuring, while more can still be asked for.
  std::map<std::string, std::size_t> new_families;
  for (const Config& config : chosen) {
    const std::string family = family_of(config);
    if (source.training_domain().new_family(family)) ++new_families[family];
  }
  for (const auto& [family, count] : new_families) {
    if (count >= kTransferFamilyRows) continue;
    std::cerr << "warning: " << count << " of the chosen configurations "
              << (count == 1 ? "is" : "are") << " of " << family
              << ", a network family the source model never saw: from fewer than "
              << kTransferFamilyRows
              << " its transfer is one factor (docs/onnx.md, \"A family carb never saw\"); "
                 "measure more with a larger --sample\n";
  }
  return chosen;
}

// After a --transfer-for campaign: how far this machine is from the source model's device,
// over the configurations just chosen, measured on this host instance.
void print_distance(const Predictor& source, const std::string& source_path,
                    const std::vector<Config>& chosen, const CampaignSummary& summary,
                    const std::string& db) {
  const Store store = Store::open(db);
  const std::string instance = this_host_instance();
  Dataset data;
  try {
    data = dataset_from_store(store, summary.device_fingerprint, DriftMode::kOff, std::nullopt,
                              instance);
  } catch (const Error& error) {
    std::cout << "  distance:       none measured (" << error_message(error) << ")\n";
    return;
  }
  std::set<std::string> keys;
  for (const Config& config : chosen) keys.insert(to_key(config));
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    if (keys.contains(data.ids[i])) rows.push_back(i);
  }
  if (rows.empty()) {
    std::cout << "  distance:       none of the chosen configurations measured here\n";
    return;
  }
  std::cout << "  distance:       measured / predicted by " << source_path << " ("
            << source.device_name()
            << "): " << distance_text(device_distance(source, subset(data, rows))) << "\n"
            << "  next:           carb fit --from " << source_path << " --db " << db
            << " -o MODEL.json\n";
}

void run_profile(const ProfileOptions& options) {
  if (options.selection.spec.empty() == options.selection.keys_file.empty()) {
    throw Error(ErrorCategory::kUsage, "give either --spec or --keys");
  }
  std::unique_ptr<Predictor> source;
  if (!options.transfer_for.empty()) {
    source = std::make_unique<Predictor>(Predictor::load(options.transfer_for));
    if (source->schema() != kArchitectureSchema) {
      throw Error(ErrorCategory::kInput, options.transfer_for +
                                             " was fitted on a table; a transfer needs a model "
                                             "of carb's measurements");
    }
  }
  CampaignOptions campaign;
  campaign.spec_text = options.selection.keys_file.empty()
                           ? read_file(options.selection.spec, "spec file")
                           : read_file(options.selection.keys_file, "key list");
  const std::vector<Config> configs =
      source ? transfer_configs(*source, options.selection) : select_configs(options.selection);
  campaign.name = options.selection.keys_file.empty()
                      ? Space::from_file(options.selection.spec).name()
                      : options.selection.keys_file;
  campaign.device = options.device;
  campaign.protocol = options.protocol;
  if (!options.worker_memory_limit.empty()) {
    campaign.protocol.worker_memory_limit_bytes =
        parse_size_bytes(options.worker_memory_limit, "--worker-memory-limit");
  }
  campaign.resume.retry_limit = options.retry_limit;
  campaign.resume.claim_timeout = claim_timeout_for(options.protocol);
  if (!options.time_budget.empty()) campaign.time_budget_s = parse_duration_s(options.time_budget);
  campaign.shard = Shard::parse(options.shard);
  campaign.db_path = campaign.shard.expand(options.db);
  campaign.worker = {"/proc/self/exe", {"__worker"}};
  campaign.idle_window_s = options.idle_window_s;
  campaign.drift_every_s = parse_duration_s(options.drift_every);
  if (options.rounds > 1 && options.mpi) {
    throw Error(ErrorCategory::kUsage, "--rounds is not supported with --mpi yet");
  }
  campaign.rounds = options.rounds;
  if (!options.mpi)
    campaign.drift_probe = drift_probe_of(options.drift_probe, campaign.drift_every_s);

  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const auto show = [terminal](const CampaignProgress& progress) {
    print_progress(progress, terminal);
  };
  const CampaignSummary summary = options.mpi ? run_mpi_campaign(configs, campaign, show)
                                              : run_campaign(configs, campaign, show);
  if (summary.mpi_rank != 0) return;  // rank 0 reports for the whole MPI job
  if (terminal) std::cerr << "\n";

  std::int64_t measured = 0;
  std::string outcomes;
  for (const auto& [status, count] : summary.measured) {
    measured += count;
    outcomes += (outcomes.empty() ? "" : ", ") + status + " " + std::to_string(count);
  }
  std::cout << "campaign " << summary.campaign_id << " on " << summary.device_id << " into "
            << campaign.db_path << "\n"
            << "  configurations: " << summary.selected << " selected, "
            << summary.in_shard / campaign.rounds << " in shard " << campaign.shard.name()
            << (campaign.rounds > 1 ? ", " + std::to_string(campaign.rounds) + " rounds: " +
                                          std::to_string(summary.in_shard) + " measurements"
                                    : "")
            << "\n"
            << "  measured now:   " << measured << (outcomes.empty() ? "" : " (" + outcomes + ")")
            << "\n"
            << "  skipped:        " << summary.already_done << " already done, "
            << summary.claimed_elsewhere << " claimed by another process, " << summary.not_started
            << " left by the time budget\n"
            << "  host:           " << host_line(summary.host) << "\n"
            << "  idle power:     "
            << (summary.idle_power_w ? std::to_string(*summary.idle_power_w) + " W"
                                     : "NULL (" + summary.idle_power_null_reason + ")")
            << "\n"
            << "  time:           " << duration_text(summary.wall_s) << " wall, "
            << duration_text(summary.inference_s) << " inside inferences, "
            << duration_text(summary.prepare_s) << " preparing networks\n";
  if (options.mpi) {
    std::cout << "  mpi ranks:      " << summary.mpi_ranks - 1 << " measuring, "
              << summary.ranks_lost << " lost, " << summary.reissued
              << " configurations handed out again\n";
  }
  if (campaign.drift_probe) {
    std::cout << "  drift probes:   " << summary.probes << " of " << to_key(*campaign.drift_probe)
              << " (" << duration_text(summary.probe_s) << ")";
    if (!summary.probe_ms.empty()) {
      const double median = upper_median(summary.probe_ms);
      const auto [lowest, highest] =
          std::minmax_element(summary.probe_ms.begin(), summary.probe_ms.end());
      char text[160];
      std::snprintf(text, sizeof text, ": median %.3f ms, %.2f-%.2fx of it", median,
                    *lowest / median, *highest / median);
      std::cout << text;
    }
    if (!summary.probe_failure.empty()) std::cout << "; failed: " << summary.probe_failure;
    std::cout << "\n";
  } else if (options.mpi && options.drift_probe != "none") {
    std::cout << "  drift probes:   none (not under --mpi yet)\n";
  }
  if (summary.contended > 0) {
    std::cout << "  contended:      " << summary.contended
              << " measurements timed while other processes used >= "
              << std::lround(100 * kContendedShare)
              << "% of the CPUs (their detail says so; re-measure them on a quiet machine)\n";
  }
  if (source) print_distance(*source, options.transfer_for, configs, summary, campaign.db_path);
}

}  // namespace

void add_profile_verbs(CLI::App& app) {
  auto format = std::make_shared<std::string>("table");
  CLI::App* devices = app.add_subcommand("devices", "devices on this machine and what they can do");
  devices->add_option("--format", *format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  devices->callback([format] { run_devices(*format); });

  auto options = std::make_shared<ProfileOptions>();
  CLI::App* profile = app.add_subcommand(
      "profile", "measure configurations on a device into a SQLite database (resumable)");
  profile->add_option("--spec", options->selection.spec, "design-space spec (YAML)");
  profile->add_option("--keys", options->selection.keys_file,
                      "file with one configuration key per line");
  profile->add_option("--device", options->device,
                      "device id, kind or backend, e.g. cpu, cuda:1, torch (default cpu)");
  profile
      ->add_option("--db", options->db,
                   "SQLite database to write (created if missing); {shard} and {shards} "
                   "in the name become K and N of --shard")
      ->required();
  profile->add_option("--sample", options->selection.sample,
                      "profile N configurations of the spec");
  profile->add_option("--seed", options->selection.seed, "seed of the sample");
  profile->add_option("--sampling", options->selection.sampling, "random or stratified")
      ->check(CLI::IsMember({"random", "stratified"}));
  profile->add_option("--time-budget", options->time_budget,
                      "start no configuration after this long, e.g. 30m");
  profile->add_option("--shard", options->shard,
                      "K/N: measure share K of N (0 <= K < N); auto: the Slurm array task's or "
                      "mpirun rank's share");
  profile->add_option("--min-time", options->protocol.min_time_s, "timed seconds, at least");
  profile->add_option("--max-time", options->protocol.max_time_s, "timed seconds, at most");
  profile->add_option("--min-samples", options->protocol.min_samples, "timed passes, at least");
  profile->add_option("--target-ci", options->protocol.target_relative_ci,
                      "stop when the median's 95% CI half-width / median is below this");
  profile->add_option("--energy-window", options->protocol.energy_window_min_s,
                      "energy window, seconds (with a sensor)");
  profile->add_option("--cooldown", options->protocol.cooldown_s,
                      "idle seconds before each configuration");
  profile->add_option("--timeout", options->protocol.timeout_s,
                      "kill a worker without a result after this many seconds");
  profile->add_option("--worker-memory-limit", options->worker_memory_limit,
                      "address space each worker may use, e.g. 8GiB; past it a configuration is "
                      "recorded as oom");
  profile
      ->add_option("--worker-reuse", options->protocol.worker_reuse,
                   "configurations one worker process measures before a fresh one starts; "
                   "1: a fresh process for each")
      ->check(CLI::PositiveNumber);
  profile->add_flag("--mpi", options->mpi,
                    "under mpirun: rank 0 writes the database and hands out configurations, "
                    "the other ranks measure");
  profile
      ->add_option("--drift-probe", options->drift_probe,
                   "configuration measured briefly every --drift-every to follow the "
                   "device's speed over time, or none")
      ->capture_default_str();
  profile->add_option("--drift-every", options->drift_every, "time between drift probes (0: none)")
      ->capture_default_str();
  profile->add_option("--transfer-for", options->transfer_for,
                      "a model of another device: measure the --sample K configurations of the "
                      "selection a transfer of it learns most from, then say how far this machine "
                      "is from its device");
  profile
      ->add_option("--rounds", options->rounds,
                   "measure every configuration this many times, one round after another; "
                   "carb fit takes the median")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  profile->add_option("--retry-limit", options->retry_limit, "attempts per failing configuration");
  profile->add_option("--idle-window", options->idle_window_s,
                      "idle-power baseline window, seconds (with a sensor)");
  profile->add_flag("--cuda-graph", options->protocol.cuda_graph,
                    "GPU: replay each forward pass as one captured CUDA Graph");
  CLI::Option* find = profile->add_flag(
      "--cudnn-find", options->protocol.cudnn_find,
      "GPU: choose cuDNN algorithms by timing them (cached) instead of heuristics");
  profile
      ->add_option("--cudnn-cache", options->protocol.cudnn_cache,
                   "GPU: file caching --cudnn-find's choices (default "
                   "~/.cache/carb/cudnn-find.tsv)")
      ->needs(find);
  profile
      ->add_option("--throttle-cooldown", options->protocol.throttle_cooldown_s,
                   "GPU: idle seconds before measuring a throttled configuration again")
      ->check(CLI::NonNegativeNumber);
  profile
      ->add_option("--throttle-retries", options->protocol.throttle_retries,
                   "GPU: how often a throttled configuration is measured again")
      ->check(CLI::NonNegativeNumber);
  profile->callback([options] { run_profile(*options); });

  auto kernels = std::make_shared<KernelsOptions>();
  CLI::App* kernels_verb =
      app.add_subcommand("kernels",
                         "where a forward pass spends its time, kernel by kernel (a diagnostic: "
                         "in this process, nothing stored)");
  kernels_verb->add_option("--spec", kernels->selection.spec, "design-space spec (YAML)");
  kernels_verb->add_option("--keys", kernels->selection.keys_file,
                           "file with one configuration key per line");
  add_onnx_options(*kernels_verb, kernels->onnx, "a spec or keys");
  kernels_verb->add_option("--sample", kernels->selection.sample, "N configurations of the spec");
  kernels_verb->add_option("--seed", kernels->selection.seed, "seed of the sample");
  kernels_verb->add_option("--device", kernels->device, "device id, kind or backend (default cpu)");
  kernels_verb->add_option("--passes", kernels->passes, "passes timed kernel by kernel")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  kernels_verb->add_option("--warmup", kernels->warmup, "whole passes before timing")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  kernels_verb
      ->add_option("--rounds", kernels->rounds,
                   "time every configuration this many times, round after round, and write "
                   "each one's medians")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  kernels_verb
      ->add_option("--drift-probe", kernels->drift_probe,
                   "configuration measured briefly every --drift-every (and after the last), so "
                   "that each configuration's timings carry the device's speed at their moment "
                   "(probe_ms: carb fit --kernels divides by it), or none")
      ->capture_default_str();
  kernels_verb
      ->add_option("--drift-every", kernels->drift_every, "time between drift probes (0: none)")
      ->capture_default_str();
  kernels_verb->add_option("--format", kernels->format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  kernels_verb->callback([kernels] { run_kernels(*kernels); });

  auto export_options = std::make_shared<std::pair<std::string, std::string>>();
  auto export_format = std::make_shared<std::string>("csv");
  auto ok_only = std::make_shared<bool>(false);
  CLI::App* export_verb = app.add_subcommand(
      "export", "one row per measurement with its configuration's features (CSV or JSON Lines)");
  export_verb->add_option("--db", export_options->first, "carb database")->required();
  export_verb->add_option("--format", *export_format, "csv or jsonl")
      ->check(CLI::IsMember({"csv", "jsonl"}));
  export_verb->add_option("-o,--output", export_options->second, "output file (default stdout)");
  export_verb->add_flag("--ok-only", *ok_only, "only successful measurements");
  export_verb->callback([export_options, export_format, ok_only] {
    const Store store = Store::open(export_options->first);
    const ExportFormat chosen =
        *export_format == "csv" ? ExportFormat::kCsv : ExportFormat::kJsonLines;
    if (export_options->second.empty()) {
      store.export_measurements(std::cout, chosen, *ok_only);
      return;
    }
    std::ofstream file(export_options->second);
    if (!file) throw Error(ErrorCategory::kRuntime, export_options->second + ": cannot write");
    const std::int64_t rows = store.export_measurements(file, chosen, *ok_only);
    file.close();
    if (!file) throw Error(ErrorCategory::kRuntime, export_options->second + ": write failed");
    std::cerr << "wrote " << rows << " rows to " << export_options->second << "\n";
  });

  auto worker_device = std::make_shared<std::string>();
  // Hidden: measures the configurations its stdin names, one JSON line each (WorkerProcess).
  CLI::App* worker_verb = app.add_subcommand("__worker", "");
  worker_verb->group("");
  worker_verb->add_option("--device", *worker_device)->required();
  worker_verb->callback([worker_device] {
    const int code = worker_main(*worker_device);
    if (code != 0) std::exit(code);
  });
}

}  // namespace carb::cli
