// carb characterize | carb report: method.md §6's characterization of measurement campaigns,
// printed or as one self-contained HTML report with the predictions and the screening result.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "carb/model.hpp"
#include "carb/report.hpp"
#include "carb/screen.hpp"
#include "domain.hpp"
#include "output.hpp"
#include "verbs.hpp"

namespace carb::cli {

namespace {

// What characterize and report share: the databases, the devices, and where CARB comes from.
struct CampaignOptions {
  std::vector<std::string> databases;
  std::vector<std::string> devices;
  std::string model;
  bool no_fit = false;
  FitOptions fit = [] {
    FitOptions options;
    options.threads = 1;  // XGBoost's threads collapse when another process holds a core
    return options;
  }();
};

void add_campaign_options(CLI::App* verb, CampaignOptions& options) {
  verb->add_option("--db", options.databases, "carb database; repeat to pool several")->required();
  verb->add_option(
      "--device", options.devices,
      "a device (fingerprint, or name when unique) to keep; repeatable (default: all)");
  verb->add_option("--model", options.model,
                   "CARB model file: its test-split scores on its own device, and its predictions");
  verb->add_flag("--no-fit", options.no_fit,
                 "do not fit CARB now on a device without a model (no CARB R² for it)");
  verb->add_option("--seed", options.fit.seed, "seed of a fit made now (1)");
  verb->add_option("--threads", options.fit.threads,
                   "XGBoost threads of a fit made now (1: steady on a busy machine; 0: all cores)");
}

struct Loaded {
  CampaignData data;
  std::shared_ptr<const Predictor> model;
  std::vector<DeviceModel> models;
  Characterization characterization;
};

Loaded load(const CampaignOptions& options) {
  Loaded loaded;
  loaded.data = load_campaigns(options.databases);
  keep_devices(loaded.data, options.devices);
  if (!options.model.empty()) loaded.model = load_device_model(options.model);
  for (const DeviceCampaign& device : loaded.data.devices) {
    if (const std::string pooled = pooled_hosts_warning(device); !pooled.empty()) {
      std::cerr << pooled << "\n";
    }
    if (loaded.model && loaded.model->device_fingerprint() == device.fingerprint) {
      const std::string hosts = host_difference(*loaded.model, options.model, device.instances,
                                                device.name + "'s measurements");
      if (!hosts.empty()) std::cerr << hosts << "\n";
    }
  }
  if (!options.no_fit) {
    for (const DeviceCampaign& device : loaded.data.devices) {
      if (loaded.model && loaded.model->device_fingerprint() == device.fingerprint) continue;
      std::cerr << "fitting CARB on " << device.rows.size() << " configurations of " << device.name
                << " for its accuracy (--model reuses a model file, --no-fit "
                << "skips this)\n";
    }
  }
  loaded.models = device_models(loaded.data, loaded.model, options.model,
                                options.no_fit ? std::nullopt : std::optional(options.fit));
  loaded.characterization = characterize(loaded.data, loaded.models);
  return loaded;
}

// --- carb characterize ----------------------------------------------------------------------

struct CharacterizeCommand {
  CampaignOptions campaign;
  std::string format = "table";
  bool json = false;
};

std::string shown(Target target, double value) {
  return cell_text(target == Target::kMemory ? value / (1024.0 * 1024.0) : value);
}

std::string unit_shown(Target target) {
  return target == Target::kMemory ? "MiB" : std::string(canonical_unit(target));
}

std::string networks_text(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " network" : " networks");
}

void print_device(const DeviceCharacterization& device) {
  std::cout << device.name << ": " << device.configurations << " configurations ("
            << device.fingerprint << ")\n";
  std::vector<const TargetCharacterization*> available;
  for (const TargetCharacterization& t : device.targets) {
    if (t.available) {
      available.push_back(&t);
    } else {
      std::cout << to_string(t.target) << ": unavailable: " << t.reason << "\n";
    }
  }
  if (available.empty()) return;

  std::cout << "\nscaling across batch regimes (medians; ratio = highest-batch regime / lowest; "
               "matched: the same networks in both):\n";
  std::vector<std::string> regimes;
  for (const TargetCharacterization* t : available) {
    for (const RegimeMedian& r : t->regimes) {
      if (std::find(regimes.begin(), regimes.end(), r.name) == regimes.end()) {
        regimes.push_back(r.name);
      }
    }
  }
  std::vector<std::string> columns = {"target", "unit"};
  columns.insert(columns.end(), regimes.begin(), regimes.end());
  columns.insert(columns.end(), {"ratio", "matched_ratio"});
  auto writer = make_row_writer(Format::kTable, columns, std::cout);
  for (const TargetCharacterization* t : available) {
    std::vector<Cell> row = {std::string(to_string(t->target)), unit_shown(t->target)};
    for (const std::string& name : regimes) {
      const auto found = std::find_if(t->regimes.begin(), t->regimes.end(),
                                      [&](const RegimeMedian& r) { return r.name == name; });
      row.emplace_back(found == t->regimes.end() ? std::string("-")
                                                 : shown(t->target, found->median) + " (n " +
                                                       std::to_string(found->rows) + ")");
    }
    row.emplace_back(t->regime_ratio ? cell_text(*t->regime_ratio)
                                     : "n/a: " + t->regime_ratio_reason);
    row.emplace_back(t->matched_regime_ratio ? cell_text(*t->matched_regime_ratio) + " (" +
                                                   networks_text(t->matched_networks) + ")"
                                             : std::string("n/a"));
    writer->row(row);
  }
  writer->finish();
  std::cout << "energy vs latency divergence (energy ratio / latency ratio): ";
  if (device.energy_latency_divergence) {
    std::cout << cell_text(*device.energy_latency_divergence) << "; matched "
              << (device.matched_energy_latency_divergence
                      ? cell_text(*device.matched_energy_latency_divergence)
                      : std::string("n/a"))
              << "\n";
  } else if (!device.targets[static_cast<std::size_t>(Target::kEnergy)].available) {
    std::cout << "unavailable (energy is, above)\n";
  } else {
    std::cout << "unavailable: " << device.divergence_reason << "\n";
  }

  std::cout << "\nmedian per GFLOP by batch size:\n";
  std::vector<const TargetCharacterization*> per_gflop;
  for (const TargetCharacterization* t : available) {
    if (t->target != Target::kMemory) per_gflop.push_back(t);
  }
  std::vector<int> batches;
  for (const TargetCharacterization* t : per_gflop) {
    for (const BatchMedian& b : t->by_batch) {
      if (std::find(batches.begin(), batches.end(), b.batch) == batches.end()) {
        batches.push_back(b.batch);
      }
    }
  }
  std::sort(batches.begin(), batches.end());
  columns = {"batch"};
  for (const TargetCharacterization* t : per_gflop) {
    columns.push_back(std::string(to_string(t->target)) + "_" + unit_shown(t->target) +
                      "_per_gflop");
  }
  writer = make_row_writer(Format::kTable, columns, std::cout);
  for (int batch : batches) {
    std::vector<Cell> row = {static_cast<std::int64_t>(batch)};
    for (const TargetCharacterization* t : per_gflop) {
      const auto found = std::find_if(t->by_batch.begin(), t->by_batch.end(),
                                      [&](const BatchMedian& b) { return b.batch == batch; });
      row.emplace_back(found != t->by_batch.end() && found->median_per_gflop
                           ? Cell(*found->median_per_gflop)
                           : Cell(std::string("-")));
    }
    writer->row(row);
  }
  writer->finish();
  for (Target target : {Target::kEnergy, Target::kLatency}) {
    const TargetCharacterization& t = device.targets[static_cast<std::size_t>(target)];
    std::cout << to_string(target) << " per GFLOP, smallest batch / largest: "
              << (!t.available            ? std::string("unavailable (above)")
                  : t.small_batch_penalty ? cell_text(*t.small_batch_penalty)
                                          : std::string("n/a: fewer than two batch sizes"))
              << "\n";
  }

  std::cout << "\nprecision (fp32 value / lower-precision value):\n";
  for (const TargetCharacterization* t : available) {
    if (t->precision.empty()) {
      std::cout << to_string(t->target) << ": n/a: " << t->precision_reason << "\n";
    }
    for (const PrecisionEffect& e : t->precision) {
      std::cout << to_string(t->target) << ", " << to_string(e.precision) << ": "
                << cell_text(e.ratio) << " ("
                << (e.pairs > 0
                        ? "median of " + std::to_string(e.pairs) + " matched pairs"
                        : "group medians of " + std::to_string(e.fp32_rows) + " fp32 and " +
                              std::to_string(e.rows) + " " + std::string(to_string(e.precision)) +
                              " rows; no configuration measured in both")
                << ")\n";
    }
  }

  std::cout << "\nhow well FLOPs alone explains each target (log-log fit over all rows), next to "
               "CARB (test split, linear space):\n";
  writer = make_row_writer(
      Format::kTable,
      {"target", "flops_loglog_r2", "exponent", "carb_r2", "flops_r2", "test_rows", "model"},
      std::cout);
  std::vector<std::string> reasons;
  for (const TargetCharacterization* t : available) {
    std::vector<Cell> row = {std::string(to_string(t->target))};
    if (t->flops) {
      row.insert(row.end(), {t->flops->r2, t->flops->exponent});
    } else {
      row.insert(row.end(), {std::string("n/a"), std::string("n/a")});
      reasons.push_back(std::string(to_string(t->target)) + " FLOPs fit: " + t->flops_reason);
    }
    if (t->carb.available) {
      row.insert(row.end(), {t->carb.r2, t->carb.flops_r2,
                             static_cast<std::int64_t>(t->carb.test_rows), t->carb.source});
    } else {
      row.insert(row.end(),
                 {std::string("n/a"), std::string("n/a"), std::string("n/a"), std::string("n/a")});
      reasons.push_back(std::string(to_string(t->target)) + " CARB: " + t->carb.reason);
    }
    writer->row(row);
  }
  writer->finish();
  for (const std::string& reason : reasons) std::cout << reason << "\n";
}

void print_transfer(const DeviceTransfer& transfer) {
  std::cout << "\nacross devices: " << transfer.from_name << " -> " << transfer.to_name << " ("
            << describe_relation(transfer.relation)
            << "; ratios: the second / the first; slope: least squares of the second on the "
               "first; lower_on_second: shared configurations where the second is faster or "
               "smaller)\n";
  auto writer =
      make_row_writer(Format::kTable,
                      {"target", "shared", "slope", "median_ratio", "geomean_ratio", "min_ratio",
                       "max_ratio", "lower_on_second", "spearman", "verdict"},
                      std::cout);
  for (const TargetTransfer& t : transfer.targets) {
    if (!t.available) {
      std::vector<Cell> row(10, kNull);
      row[0] = std::string(to_string(t.target));
      row[1] = static_cast<std::int64_t>(t.shared);
      row[9] = "unavailable: " + t.reason;
      writer->row(row);
      continue;
    }
    writer->row({std::string(to_string(t.target)), static_cast<std::int64_t>(t.shared), t.slope,
                 t.median_ratio, t.geomean_ratio, t.min_ratio, t.max_ratio,
                 static_cast<std::int64_t>(t.second_lower), t.spearman, t.verdict});
  }
  writer->finish();
  for (const TargetTransfer& t : transfer.targets) {
    if (!t.available || t.by_knob.empty()) continue;
    std::cout << to_string(t.target) << " ratio (geometric mean, configurations) by knob:\n";
    for (std::size_t g = 0; g < t.by_knob.size(); ++g) {
      const RatioGroup& group = t.by_knob[g];
      const bool first = g == 0 || t.by_knob[g - 1].knob != group.knob;
      const bool last = g + 1 == t.by_knob.size() || t.by_knob[g + 1].knob != group.knob;
      if (first) std::cout << "  " << group.knob << ": ";
      std::cout << group.value << " " << cell_text(group.geomean_ratio) << " (" << group.rows << ")"
                << (last ? "\n" : ", ");
    }
  }
}

void run_characterize(const CharacterizeCommand& command) {
  const Format format = command.json ? Format::kJson : parse_format(command.format);
  if (format == Format::kCsv) {
    throw Error(ErrorCategory::kUsage, "characterize prints sections: --format table or json");
  }
  const Loaded loaded = load(command.campaign);
  if (format == Format::kJson) {
    std::cout << characterization_json(loaded.characterization) << "\n";
    return;
  }
  for (std::size_t d = 0; d < loaded.characterization.devices.size(); ++d) {
    if (d > 0) std::cout << "\n";
    print_device(loaded.characterization.devices[d]);
  }
  for (const DeviceTransfer& transfer : loaded.characterization.transfers) {
    print_transfer(transfer);
  }
  if (loaded.characterization.devices.size() == 1) {
    std::cout << "\nacross devices: one device measured; transfer needs two (several --db, or one "
                 "database holding two devices)\n";
  }
}

// --- carb report ----------------------------------------------------------------------------

struct ReportCommand {
  CampaignOptions campaign;
  std::string screening;  ///< carb screen --json's file
  std::string output;
};

std::string now_utc() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

void run_report(const ReportCommand& command) {
  if (command.output.empty()) throw Error(ErrorCategory::kUsage, "give -o REPORT.html");
  require_html_report();  // before anything is read
  // Read every input before the slow part, so a bad one fails at once.
  std::optional<ScreeningInput> screening;
  if (!command.screening.empty()) {
    screening = ScreeningInput{command.screening, read_screen_result(command.screening)};
  }
  Loaded loaded = load(command.campaign);
  ReportInput input;
  input.data = &loaded.data;
  input.characterization = &loaded.characterization;
  input.models = loaded.models;
  input.model = loaded.model;
  input.model_path = command.campaign.model;
  input.screening = std::move(screening);
  input.generated_at = now_utc();
  const ReportFile file = write_report(input, command.output);
  std::cerr << "wrote " << command.output << " (" << file.charts << " charts, "
            << cell_text(static_cast<double>(file.bytes) / 1e6) << " MB, opens offline)\n";
}

}  // namespace

void add_report_verbs(CLI::App& app) {
  auto characterize_command = std::make_shared<CharacterizeCommand>();
  CLI::App* verb = app.add_subcommand(
      "characterize",
      "how energy, latency and memory scale with batch, precision and FLOPs, and across devices");
  add_campaign_options(verb, characterize_command->campaign);
  verb->add_option("--format", characterize_command->format, "table or json");
  verb->add_flag("--json", characterize_command->json, "the same as --format json");
  verb->callback([characterize_command] { run_characterize(*characterize_command); });

  auto report = std::make_shared<ReportCommand>();
  CLI::App* report_verb = app.add_subcommand(
      "report", "one self-contained HTML file: campaign, characterization, predictions, screening");
  add_campaign_options(report_verb, report->campaign);
  report_verb->add_option("--screening", report->screening,
                          "a screening result to draw: carb screen --json FILE");
  report_verb->add_option("-o,--output", report->output, "the HTML file to write")->required();
  report_verb->callback([report] { run_report(*report); });
}

}  // namespace carb::cli
