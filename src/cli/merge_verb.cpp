// carb merge: shard databases into one by measurement key.
#include <iostream>
#include <memory>

#include "carb/error.hpp"
#include "carb/store.hpp"
#include "output.hpp"
#include "verbs.hpp"

namespace carb::cli {

namespace {

struct MergeOptions {
  std::string db;
  std::vector<std::string> sources;
  std::string format = "table";
};

void run_merge(const MergeOptions& options) {
  // Every source is checked before anything is merged, so a bad file among many merges none.
  for (const std::string& source : options.sources) {
    const std::string problems = Store::open(source).integrity_check();
    if (problems != "ok") {
      throw Error(ErrorCategory::kInput, source + ": damaged database (" + problems + ")");
    }
  }
  Store target = Store::create_or_open(options.db);
  auto writer = make_row_writer(
      parse_format(options.format),
      {"source", "measurements", "added", "identical", "replaced", "kept", "conflicts", "probes"},
      std::cout);
  std::int64_t conflicts = 0;
  for (const std::string& source : options.sources) {
    const MergeReport report = target.merge(source);
    writer->row({report.source, report.measurements, report.added, report.identical,
                 report.replaced, report.kept, static_cast<std::int64_t>(report.conflicts.size()),
                 report.probes_added});
    for (const MergeConflict& conflict : report.conflicts) {
      std::cerr << "conflict: " << conflict.configuration_key << " on "
                << conflict.device_fingerprint << " (measurement " << conflict.measurement_key
                << ") differs: kept the version from "
                << (conflict.kept_from.empty() ? options.db : conflict.kept_from)
                << ", the one from "
                << (conflict.other_from.empty() ? options.db : conflict.other_from)
                << " is in measurement_conflicts\n";
    }
    conflicts += static_cast<std::int64_t>(report.conflicts.size());
  }
  writer->finish();
  if (conflicts > 0) {
    std::cerr << conflicts << " conflicting measurement" << (conflicts == 1 ? "" : "s")
              << " kept in " << options.db << " (table measurement_conflicts)\n";
  }
}

}  // namespace

void add_merge_verb(CLI::App& app) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* merge = app.add_subcommand(
      "merge", "merge carb databases (e.g. --shard outputs) into one, by measurement key");
  merge->add_option("--db", options->db, "database to merge into (created if missing)")->required();
  merge->add_option("sources", options->sources, "carb databases to merge from")->required();
  merge->add_option("--format", options->format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  merge->callback([options] { run_merge(*options); });
}

}  // namespace carb::cli
