// Merging carb databases (e.g. the shards of a Slurm array) by measurement key: new keys are
// copied in bulk inside SQLite, keys both databases hold are compared whole.
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "store_impl.hpp"

namespace carb {

namespace {

using store::Statement;
using store::Transaction;

// The schema name the source database is attached under.
constexpr std::string_view kSource = "merge_source";

[[noreturn]] void throw_input(const std::string& message) {
  throw Error(ErrorCategory::kInput, message);
}

// One measurement as the merge compares it: every column but the row ids, with its campaign's
// identity, its device's fingerprint and its raw samples.
struct Version {
  std::int64_t id = 0;  // the row id in its own database
  MeasurementStatus status = MeasurementStatus::kError;
  std::int64_t attempts = 0;
  std::string finished_at;
  std::string configuration_key;
  std::string device_fingerprint;
  nlohmann::json content;
  std::string content_sha256;
};

nlohmann::json column_value(sqlite3_stmt* row, int column) {
  switch (sqlite3_column_type(row, column)) {
    case SQLITE_INTEGER:
      return sqlite3_column_int64(row, column);
    case SQLITE_FLOAT:
      return sqlite3_column_double(row, column);
    case SQLITE_TEXT:
      return std::string(reinterpret_cast<const char*>(sqlite3_column_text(row, column)),
                         static_cast<std::size_t>(sqlite3_column_bytes(row, column)));
    case SQLITE_NULL:
      return nullptr;
    default:
      CARB_CHECK(false, std::string("a BLOB in column ") + sqlite3_column_name(row, column));
      return nullptr;
  }
}

Version read_version(sqlite3* db, std::string_view schema, const std::string& key) {
  const std::string prefix = std::string(schema) + ".";
  Statement row(db,
                "SELECT m.*, c.name AS campaign_name, c.spec_hash AS campaign_spec_hash, "
                "c.protocol AS campaign_protocol, d.fingerprint AS device_fingerprint FROM " +
                    prefix + "measurements m JOIN " + prefix +
                    "campaigns c ON c.id = m.campaign_id JOIN " + prefix +
                    "devices d ON d.id = m.device_id WHERE m.measurement_key = :key");
  row.bind(":key", key);
  CARB_CHECK(row.step(), "measurement " + key + " vanished during the merge");
  Version version;
  version.id = row.integer("id");
  version.status = *parse_measurement_status(row.text("status"));
  version.attempts = row.integer("attempts");
  version.finished_at = row.text("finished_at");
  version.configuration_key = row.text("configuration_key");
  version.device_fingerprint = row.text("device_fingerprint");
  version.content = nlohmann::json::object();
  for (int column = 0; column < row.column_count(); ++column) {
    const std::string name = sqlite3_column_name(row.get(), column);
    if (name == "id" || name == "campaign_id" || name == "device_id") continue;
    version.content[name] = column_value(row.get(), column);
  }
  Statement samples(db, "SELECT clock, value_ms FROM " + prefix +
                            "samples WHERE measurement_id = :id ORDER BY clock, sequence");
  samples.bind(":id", version.id);
  nlohmann::json by_clock = nlohmann::json::object();
  while (samples.step()) by_clock[samples.text("clock")].push_back(samples.real("value_ms"));
  version.content["samples"] = std::move(by_clock);
  version.content_sha256 = sha256_hex(version.content.dump());
  return version;
}

// Whether `a` rather than `b` (two different versions of one key) stays in `measurements`: a
// final status beats a failure; of two failures the one with more attempts, then the later;
// of two final ones the earlier finished. The content hash breaks ties, so the choice never
// depends on which database is merged into which.
bool stays(const Version& a, const Version& b) {
  const bool a_final = is_final(a.status);
  if (a_final != is_final(b.status)) return a_final;
  if (!a_final && a.attempts != b.attempts) return a.attempts > b.attempts;
  if (a.finished_at != b.finished_at) {
    return a_final ? a.finished_at < b.finished_at : a.finished_at > b.finished_at;
  }
  return a.content_sha256 < b.content_sha256;
}

void keep_conflict(sqlite3* db, const Version& version, const std::string& source) {
  Statement keep(db, R"sql(
    INSERT INTO main.measurement_conflicts (measurement_key, content_sha256, source, merged_at,
                                            measurement)
    VALUES (:key, :sha, :source, :merged_at, :measurement)
    ON CONFLICT (measurement_key, content_sha256) DO NOTHING)sql");
  keep.bind(":key", version.content.at("measurement_key").get<std::string>())
      .bind(":sha", version.content_sha256)
      .bind(":source", source)
      .bind(":merged_at", store::format_timestamp(std::chrono::system_clock::now()))
      .bind(":measurement", version.content.dump())
      .run();
}

// The measurements table's columns other than the row and foreign ids, as a list for SQL.
std::string copied_columns(sqlite3* db, const std::string& table_alias) {
  Statement columns(db, "SELECT name FROM pragma_table_info('measurements', 'main') ORDER BY cid");
  std::string list;
  while (columns.step()) {
    const std::string name = columns.text("name");
    if (name == "id" || name == "campaign_id" || name == "device_id") continue;
    if (!list.empty()) list += ", ";
    list += table_alias;
    list += name;
  }
  return list;
}

// Detaches the source however the merge ends (after its transaction has ended).
class Attachment {
 public:
  Attachment(sqlite3* db, const std::string& path) : db_(db) {
    Statement attach(db, "ATTACH DATABASE :path AS " + std::string(kSource));
    attach.bind(":path", path).run();
  }
  ~Attachment() {
    const std::string detach = "DETACH DATABASE " + std::string(kSource);
    sqlite3_exec(db_, detach.c_str(), nullptr, nullptr, nullptr);
  }
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;

 private:
  sqlite3* db_;
};

bool same_file(const std::string& a, const std::string& b) {
  struct stat first {};
  struct stat second {};
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

}  // namespace

MergeReport Store::merge(const std::string& source_path) {
  if (same_file(source_path, impl_->path)) {
    throw_input(source_path + ": is the database being merged into");
  }
  {
    // Opening checks that it is a carb database and brings an older schema forward, as every
    // verb does; a damaged file is refused before anything is copied from it.
    const Store source = Store::open(source_path);
    Statement check(source.impl_->db.get(), "PRAGMA quick_check");
    std::string problems;
    while (check.step()) problems += (problems.empty() ? "" : "; ") + check.text("quick_check");
    if (problems != "ok") throw_input(source_path + ": damaged database (" + problems + ")");
  }

  MergeReport report;
  report.source = source_path;
  sqlite3* db = impl_->db.get();
  const Attachment attachment(db, source_path);
  Transaction transaction(db, Transaction::Mode::kWrite);
  const std::string source = std::string(kSource) + ".";

  Statement count(db, "SELECT count(*) AS n FROM " + source + "measurements");
  CARB_CHECK(count.step(), "count(*) returned no row");
  report.measurements = count.integer("n");

  store::execute(db,
                 "INSERT INTO main.campaigns (name, spec_text, spec_hash, created_at, "
                 "carb_version, git_commit, protocol) SELECT name, spec_text, spec_hash, "
                 "created_at, carb_version, git_commit, protocol FROM " +
                     source +
                     "campaigns WHERE true ON CONFLICT (name, spec_hash, protocol) DO NOTHING");
  store::execute(db,
                 "INSERT INTO main.devices (fingerprint, kind, name, details) SELECT "
                 "fingerprint, kind, name, details FROM " +
                     source + "devices WHERE true ON CONFLICT (fingerprint) DO NOTHING");
  store::execute(db,
                 "INSERT INTO main.architectures (hash, name, source, definition) SELECT hash, "
                 "name, source, definition FROM " +
                     source + "architectures WHERE true ON CONFLICT (hash) DO NOTHING");
  store::execute(db,
                 "INSERT INTO main.configurations (key, architecture, block, depth, "
                 "width_multiplier, early_downsample, resolution, batch, precision, stage_blocks, "
                 "stage_widths, classes) SELECT key, architecture, block, depth, "
                 "width_multiplier, early_downsample, resolution, batch, precision, stage_blocks, "
                 "stage_widths, classes FROM " +
                     source + "configurations WHERE true ON CONFLICT (key) DO NOTHING");

  // Drift probes are points in time: each (device, probe, moment) is copied once.
  store::execute(db,
                 "INSERT INTO main.drift_probes (campaign_id, device_id, configuration_key, "
                 "software_versions, protocol, measured_at, status, detail, clock, median_ms, "
                 "ci_half_width_ms, sample_count, cv, converged, contended) SELECT cm.id, dm.id, "
                 "p.configuration_key, p.software_versions, p.protocol, p.measured_at, p.status, "
                 "p.detail, p.clock, p.median_ms, p.ci_half_width_ms, p.sample_count, p.cv, "
                 "p.converged, p.contended FROM " +
                     source + "drift_probes p JOIN " + source +
                     "campaigns sc ON sc.id = p.campaign_id JOIN main.campaigns cm ON cm.name = "
                     "sc.name AND cm.spec_hash = sc.spec_hash AND cm.protocol = sc.protocol JOIN " +
                     source +
                     "devices sd ON sd.id = p.device_id JOIN main.devices dm ON dm.fingerprint = "
                     "sd.fingerprint WHERE true ON CONFLICT DO NOTHING");
  report.probes_added = static_cast<std::int64_t>(sqlite3_changes64(db));

  // Keys both databases hold: compared whole, one version stays.
  std::vector<std::string> shared_keys;
  Statement shared(db, "SELECT s.measurement_key FROM " + source +
                           "measurements s JOIN main.measurements m USING (measurement_key)");
  while (shared.step()) shared_keys.push_back(shared.text("measurement_key"));
  Statement remove(db, "DELETE FROM main.measurements WHERE id = :id");
  for (const std::string& key : shared_keys) {
    const Version ours = read_version(db, "main", key);
    const Version theirs = read_version(db, kSource, key);
    if (ours.content_sha256 == theirs.content_sha256) {
      ++report.identical;
      continue;
    }
    const bool ours_stays = stays(ours, theirs);
    if (is_final(ours.status) && is_final(theirs.status)) {
      keep_conflict(db, ours_stays ? theirs : ours, ours_stays ? source_path : impl_->path);
      report.conflicts.push_back({key, ours.configuration_key, ours.device_fingerprint,
                                  ours_stays ? "" : source_path, ours_stays ? source_path : ""});
    }
    if (ours_stays) {
      ++report.kept;
    } else {
      // Its samples go with it (ON DELETE CASCADE); the copy below brings the source's.
      remove.bind(":id", ours.id).run();
      ++report.replaced;
    }
  }

  // Every source key the target now lacks (new ones, and those just removed to be replaced)
  // is copied in one statement, then their samples in another: new rows get ids above the
  // largest before the copy.
  Statement largest(db, "SELECT coalesce(max(id), 0) AS id FROM main.measurements");
  CARB_CHECK(largest.step(), "max(id) returned no row");
  const std::int64_t largest_id = largest.integer("id");
  store::execute(db, "INSERT INTO main.measurements (" + copied_columns(db, "") +
                         ", campaign_id, device_id) SELECT " + copied_columns(db, "s.") +
                         ", cm.id, dm.id FROM " + source + "measurements s JOIN " + source +
                         "campaigns sc ON sc.id = s.campaign_id JOIN main.campaigns cm ON cm.name "
                         "= sc.name AND cm.spec_hash = sc.spec_hash AND cm.protocol = sc.protocol "
                         "JOIN " +
                         source +
                         "devices sd ON sd.id = s.device_id JOIN main.devices dm ON "
                         "dm.fingerprint = sd.fingerprint WHERE NOT EXISTS (SELECT 1 FROM "
                         "main.measurements m WHERE m.measurement_key = "
                         "s.measurement_key)");
  const auto copied = static_cast<std::int64_t>(sqlite3_changes64(db));
  report.added = copied - report.replaced;
  CARB_CHECK(report.added + report.replaced + report.identical + report.kept == report.measurements,
             "merge counted " +
                 std::to_string(report.added + report.replaced + report.identical + report.kept) +
                 " of " + std::to_string(report.measurements) + " measurements");
  Statement samples(db,
                    "INSERT INTO main.samples (measurement_id, clock, sequence, value_ms) "
                    "SELECT m.id, ss.clock, ss.sequence, ss.value_ms FROM main.measurements m "
                    "JOIN " +
                        source + "measurements s ON s.measurement_key = m.measurement_key JOIN " +
                        source + "samples ss ON ss.measurement_id = s.id WHERE m.id > :largest");
  samples.bind(":largest", largest_id).run();
  transaction.commit();
  return report;
}

}  // namespace carb
