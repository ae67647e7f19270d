// carb::Store: campaigns, devices, idempotent measurement writes, resume and claims.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/space.hpp"
#include "carb/statistics.hpp"
#include "carb/version.hpp"
#include "columns.hpp"
#include "schema.hpp"
#include "store_impl.hpp"

namespace carb {

namespace {

using store::read_status;
using store::Statement;
using store::Transaction;

constexpr const char* kStatusNames[] = {"ok", "unsupported", "oom", "timeout", "crashed", "error"};

[[noreturn]] void throw_input(const std::string& message) {
  throw Error(ErrorCategory::kInput, message);
}

// The canonical text of a JSON document: keys sorted (nlohmann keeps objects in a std::map),
// no whitespace, numbers in shortest round-trip form.
std::string canonical_json(std::string_view text, const std::string& what) {
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded()) throw_input(what + " is not valid JSON");
  return parsed.dump();
}

std::string json_ints(const std::vector<int>& values) { return nlohmann::json(values).dump(); }

}  // namespace

std::string_view to_string(MeasurementStatus status) {
  return kStatusNames[static_cast<std::size_t>(status)];
}

std::optional<MeasurementStatus> parse_measurement_status(std::string_view text) {
  for (std::size_t index = 0; index < std::size(kStatusNames); ++index) {
    if (text == kStatusNames[index]) return static_cast<MeasurementStatus>(index);
  }
  return std::nullopt;
}

bool is_final(MeasurementStatus status) {
  // An unsupported configuration stays unsupported under the same software (which is part of
  // the key), so retrying it would only spend time.
  return status == MeasurementStatus::kOk || status == MeasurementStatus::kUnsupported;
}

std::string_view to_string(SampleClock clock) {
  return clock == SampleClock::kDevice ? "device" : "wall";
}

std::string measurement_key(std::string_view configuration_key, std::string_view device_fingerprint,
                            std::string_view software_versions, std::string_view protocol_json) {
  const std::string protocol = canonical_json(protocol_json, "protocol");
  std::string input;
  for (std::string_view field :
       {configuration_key, device_fingerprint, software_versions, std::string_view(protocol)}) {
    input += std::to_string(field.size());
    input += ':';
    input += field;
  }
  return sha256_hex(input);
}

ClaimOwner ClaimOwner::current() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) {
    throw Error(ErrorCategory::kRuntime, "cannot read this machine's host name");
  }
  return ClaimOwner{host, static_cast<std::int64_t>(getpid())};
}

namespace store {

std::string format_timestamp(Timestamp time) {
  using namespace std::chrono;
  const auto milliseconds_since_epoch = floor<milliseconds>(time);
  const auto seconds_since_epoch = floor<seconds>(milliseconds_since_epoch);
  const std::time_t seconds = system_clock::to_time_t(seconds_since_epoch);
  const auto millis = static_cast<int>((milliseconds_since_epoch - seconds_since_epoch).count());
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[96];  // room for any int fields, so the compiler can prove nothing is cut
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
  return text;
}

Timestamp parse_timestamp(const std::string& text) {
  std::tm utc{};
  int millis = 0;
  char zone = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &utc.tm_year, &utc.tm_mon,
                  &utc.tm_mday, &utc.tm_hour, &utc.tm_min, &utc.tm_sec, &millis, &zone) != 8 ||
      zone != 'Z') {
    throw Error(ErrorCategory::kRuntime, "bad timestamp '" + text + "' in the database");
  }
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&utc)) + std::chrono::milliseconds(millis);
}

}  // namespace store

namespace {

// The configurations row of a measured configuration (once), and for an imported one its
// architecture's definition, so that whoever reads the database can build its networks.
void write_configuration(sqlite3* db, const std::string& key, const Config& config) {
  const bool imported = config.imported();
  if (imported) {
    const std::shared_ptr<const Architecture> architecture = find_architecture(config.architecture);
    if (!architecture) {
      throw Error(ErrorCategory::kInput, "configuration " + key + ": architecture " +
                                             config.architecture + " is not loaded");
    }
    Statement definition(db, R"sql(
      INSERT INTO architectures (hash, name, source, definition)
      VALUES (:hash, :name, :source, :definition) ON CONFLICT (hash) DO NOTHING)sql");
    definition.bind(":hash", architecture->hash)
        .bind(":name", architecture->name)
        .bind(":source", architecture->source)
        .bind(":definition", architecture_to_json(*architecture).dump())
        .run();
  }
  const auto resnet_text = [&](std::string value) {
    return imported ? std::nullopt : std::optional<std::string>(std::move(value));
  };
  const auto resnet_integer = [&](std::int64_t value) {
    return imported ? std::nullopt : std::optional<std::int64_t>(value);
  };
  Statement configuration(db, R"sql(
    INSERT INTO configurations (key, architecture, block, depth, width_multiplier,
                                early_downsample, resolution, batch, precision, stage_blocks,
                                stage_widths, classes)
    VALUES (:key, :architecture, :block, :depth, :width_multiplier, :early_downsample,
            :resolution, :batch, :precision, :stage_blocks, :stage_widths, :classes)
    ON CONFLICT (key) DO NOTHING)sql");
  configuration.bind(":key", key)
      .bind(":architecture", imported ? std::optional<std::string>(config.architecture)
                                      : std::nullopt)
      .bind(":block", resnet_text(std::string(to_string(config.block))))
      .bind(":depth", resnet_integer(config.depth()))
      .bind(":width_multiplier",
            imported ? std::nullopt : std::optional<double>(config.width_multiplier))
      .bind(":early_downsample", resnet_integer(config.early_downsample ? 1 : 0))
      .bind(":resolution", std::int64_t{config.resolution})
      .bind(":batch", std::int64_t{config.batch})
      .bind(":precision", to_string(config.precision))
      .bind(":stage_blocks", resnet_text(json_ints(config.stage_blocks)))
      .bind(":stage_widths", resnet_text(json_ints(config.stage_widths)))
      .bind(":classes", resnet_integer(config.classes))
      .run();
}

// Makes the architectures a database measured known to this process (register_architecture),
// so that its imported configurations build wherever it is read.
void register_stored_architectures(sqlite3* db, const std::string& path) {
  Statement rows(db, "SELECT hash, definition FROM architectures ORDER BY hash");
  while (rows.step()) {
    nlohmann::json definition;
    try {
      definition = nlohmann::json::parse(rows.text("definition"));
    } catch (const nlohmann::json::exception&) {
      throw Error(ErrorCategory::kInput,
                  path + ": architecture " + rows.text("hash") + " is not valid JSON");
    }
    const Architecture architecture =
        architecture_from_json(definition, path + ": architecture " + rows.text("hash"));
    if (architecture.hash != rows.text("hash")) {
      throw Error(ErrorCategory::kInput, path + ": architecture " + rows.text("hash") +
                                             " is stored under another hash than its own (" +
                                             architecture.hash + ")");
    }
    (void)register_architecture(architecture);
  }
}

}  // namespace

Store::Store(const std::string& path, bool create) : impl_(std::make_unique<Impl>()) {
  impl_->db = store::open_database(path, create);
  impl_->path = path;
  impl_->host = ClaimOwner::current().host;
  register_stored_architectures(impl_->db.get(), path);
}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Store Store::open(const std::string& path) { return Store(path, false); }

Store Store::create_or_open(const std::string& path) { return Store(path, true); }

const std::string& Store::path() const { return impl_->path; }

std::string Store::integrity_check() const {
  Statement check(impl_->db.get(), "PRAGMA integrity_check");
  std::string result;
  while (check.step()) {
    if (!result.empty()) result += "\n";
    result += check.text("integrity_check");
  }
  return result;
}

std::int64_t Store::ensure_campaign(const CampaignRecord& campaign) {
  if (campaign.name.empty()) throw_input("a campaign needs a name");
  const std::string spec_hash = sha256_hex(campaign.spec_text);
  const std::string protocol =
      canonical_json(campaign.protocol_json, "protocol of campaign '" + campaign.name + "'");
  sqlite3* db = impl_->db.get();
  Transaction transaction(db, Transaction::Mode::kWrite);
  Statement insert(db, R"sql(
    INSERT INTO campaigns (name, spec_text, spec_hash, created_at, carb_version, git_commit,
                           protocol)
    VALUES (:name, :spec_text, :spec_hash, :created_at, :carb_version, :git_commit, :protocol)
    ON CONFLICT (name, spec_hash, protocol) DO NOTHING)sql");
  insert.bind(":name", campaign.name)
      .bind(":spec_text", campaign.spec_text)
      .bind(":spec_hash", spec_hash)
      .bind(":created_at", store::format_timestamp(std::chrono::system_clock::now()))
      .bind(":carb_version",
            campaign.carb_version.empty() ? std::string_view(kVersion) : campaign.carb_version)
      .bind(":git_commit",
            campaign.git_commit.empty() ? std::string_view(kGitCommit) : campaign.git_commit)
      .bind(":protocol", protocol)
      .run();
  Statement find(db, R"sql(
    SELECT id FROM campaigns
    WHERE name = :name AND spec_hash = :spec_hash AND protocol = :protocol)sql");
  find.bind(":name", campaign.name).bind(":spec_hash", spec_hash).bind(":protocol", protocol);
  CARB_CHECK(find.step(), "campaign row missing right after its insert");
  const std::int64_t id = find.integer("id");
  transaction.commit();
  return id;
}

std::optional<CampaignRecord> Store::find_campaign(std::int64_t id) const {
  Statement find(impl_->db.get(), "SELECT * FROM campaigns WHERE id = :id");
  find.bind(":id", id);
  if (!find.step()) return std::nullopt;
  CampaignRecord campaign;
  campaign.id = find.integer("id");
  campaign.name = find.text("name");
  campaign.spec_text = find.text("spec_text");
  campaign.spec_hash = find.text("spec_hash");
  campaign.created_at = store::parse_timestamp(find.text("created_at"));
  campaign.carb_version = find.text("carb_version");
  campaign.git_commit = find.text("git_commit");
  campaign.protocol_json = find.text("protocol");
  return campaign;
}

std::int64_t Store::ensure_device(const DeviceRecord& device) {
  if (device.fingerprint.empty()) throw_input("a device needs a fingerprint");
  const std::string details =
      canonical_json(device.details_json, "details of device '" + device.fingerprint + "'");
  sqlite3* db = impl_->db.get();
  Transaction transaction(db, Transaction::Mode::kWrite);
  Statement insert(db, R"sql(
    INSERT INTO devices (fingerprint, kind, name, details)
    VALUES (:fingerprint, :kind, :name, :details)
    ON CONFLICT (fingerprint) DO NOTHING)sql");
  insert.bind(":fingerprint", device.fingerprint)
      .bind(":kind", device.kind)
      .bind(":name", device.name)
      .bind(":details", details)
      .run();
  Statement find(db, "SELECT id FROM devices WHERE fingerprint = :fingerprint");
  find.bind(":fingerprint", device.fingerprint);
  CARB_CHECK(find.step(), "device row missing right after its insert");
  const std::int64_t id = find.integer("id");
  transaction.commit();
  return id;
}

namespace {

DeviceRecord read_device(const Statement& row) {
  DeviceRecord device;
  device.id = row.integer("id");
  device.fingerprint = row.text("fingerprint");
  device.kind = row.text("kind");
  device.name = row.text("name");
  device.details_json = row.text("details");
  return device;
}

}  // namespace

std::optional<DeviceRecord> Store::find_device(std::string_view fingerprint) const {
  Statement find(impl_->db.get(), "SELECT * FROM devices WHERE fingerprint = :fingerprint");
  find.bind(":fingerprint", fingerprint);
  if (!find.step()) return std::nullopt;
  return read_device(find);
}

std::vector<DeviceRecord> Store::devices() const {
  Statement all(impl_->db.get(), "SELECT * FROM devices ORDER BY id");
  std::vector<DeviceRecord> devices;
  while (all.step()) devices.push_back(read_device(all));
  return devices;
}

namespace store {

MeasurementStatus read_status(const Statement& row) {
  const auto status = parse_measurement_status(row.text("status"));
  CARB_CHECK(status.has_value(), "status '" + row.text("status") + "' outside the schema's CHECK");
  return *status;
}

}  // namespace store

std::vector<MeasurementOutcome> Store::outcomes(std::string_view fingerprint) const {
  Statement rows(impl_->db.get(),
                 "SELECT m.configuration_key, d.fingerprint, m.status, m.detail, m.attempts, "
                 "m.finished_at FROM measurements m JOIN devices d ON d.id = m.device_id "
                 "WHERE :fingerprint = '' OR d.fingerprint = :fingerprint "
                 "ORDER BY m.configuration_key, m.finished_at, m.id");
  rows.bind(":fingerprint", fingerprint);
  std::vector<MeasurementOutcome> outcomes;
  while (rows.step()) {
    MeasurementOutcome& row = outcomes.emplace_back();
    row.configuration_key = rows.text("configuration_key");
    row.device_fingerprint = rows.text("fingerprint");
    row.status = read_status(rows);
    row.detail = rows.text("detail");
    row.attempts = static_cast<int>(rows.integer("attempts"));
    row.finished_at = rows.text("finished_at");
  }
  return outcomes;
}

std::vector<MeasuredTargets> combine_repeated(const std::vector<MeasuredTargets>& rows,
                                              RepeatCount* repeated,
                                              std::vector<std::size_t>* last) {
  std::vector<MeasuredTargets> combined;
  for (std::size_t first = 0; first < rows.size();) {
    std::size_t end = first + 1;
    while (end < rows.size() && rows[end].configuration_key == rows[first].configuration_key) {
      ++end;
    }
    MeasuredTargets row = rows[end - 1];
    if (end - first > 1) {
      std::vector<double> latencies, energies;
      for (std::size_t i = first; i < end; ++i) {
        latencies.push_back(rows[i].latency_ms);
        if (rows[i].energy_j) energies.push_back(*rows[i].energy_j);
      }
      row.latency_ms = median(latencies);
      if (!energies.empty()) {
        row.energy_j = median(energies);
        row.energy_null_reason.clear();
      }
      if (repeated != nullptr) {
        ++repeated->configurations;
        repeated->measurements += end - first;
      }
    }
    combined.push_back(std::move(row));
    if (last != nullptr) last->push_back(end - 1);
    first = end;
  }
  return combined;
}

std::vector<MeasuredTargets> Store::ok_measurements(std::string_view fingerprint) const {
  Statement rows(
      impl_->db.get(),
      "SELECT m.configuration_key, d.fingerprint, m.started_at, m.finished_at, m.device_median_ms, "
      "m.wall_median_ms, m.energy_j, m.energy_null_reason, m.engine_peak_bytes, "
      "m.process_peak_rss_bytes, "
      "COALESCE(json_extract(m.provenance, '$.host.instance'), '') AS host_instance "
      "FROM measurements m JOIN devices d ON d.id = m.device_id "
      "WHERE m.status = 'ok' AND (:fingerprint = '' OR d.fingerprint = :fingerprint) "
      "ORDER BY m.configuration_key, m.finished_at, m.id");
  rows.bind(":fingerprint", fingerprint);
  std::vector<MeasuredTargets> measured;
  while (rows.step()) {
    MeasuredTargets& row = measured.emplace_back();
    row.configuration_key = rows.text("configuration_key");
    row.device_fingerprint = rows.text("fingerprint");
    row.started_at = rows.text("started_at");
    row.finished_at = rows.text("finished_at");
    const Timestamp started = store::parse_timestamp(row.started_at);
    row.measured_at = started + (store::parse_timestamp(row.finished_at) - started) / 2;
    const std::optional<double> device_ms = rows.optional_real("device_median_ms");
    row.latency_ms = device_ms ? *device_ms : rows.real("wall_median_ms");
    row.latency_clock = device_ms ? "device" : "wall";
    row.energy_j = rows.optional_real("energy_j");
    row.energy_null_reason = rows.optional_text("energy_null_reason").value_or("");
    row.engine_peak_bytes = rows.optional_integer("engine_peak_bytes");
    row.process_peak_rss_bytes = rows.optional_integer("process_peak_rss_bytes");
    row.host_instance = rows.text("host_instance");
  }
  return measured;
}

namespace {

// Rejects what the schema cannot: NaN and infinities (SQLite would store NaN as NULL) and
// statistics that disagree with the raw samples they summarise.
void validate(const MeasurementRecord& record) {
  const auto fail = [&](const std::string& message) {
    throw_input("measurement " + record.measurement_key + " of " + record.configuration_key + ": " +
                message);
  };
  const auto finite = [&](std::string_view name, std::optional<double> value) {
    if (value && !std::isfinite(*value)) fail(std::string(name) + " is not a finite number");
  };
  const auto clock = [&](const std::string& name, const std::optional<LatencyStats>& stats,
                         const std::vector<double>& samples_ms) {
    if (stats) {
      finite(name + " median_ms", stats->median_ms);
      finite(name + " mean_ms", stats->mean_ms);
      finite(name + " p5_ms", stats->p5_ms);
      finite(name + " p95_ms", stats->p95_ms);
      finite(name + " cv", stats->cv);
      finite(name + " ci_half_width_ms", stats->ci_half_width_ms);
    }
    const std::int64_t counted = stats ? stats->count : 0;
    const auto given = static_cast<std::int64_t>(samples_ms.size());
    if (counted != given) {
      fail(name + " latency counts " + std::to_string(counted) + " samples but " +
           std::to_string(given) + " raw samples were given");
    }
    for (double sample_ms : samples_ms) {
      if (!std::isfinite(sample_ms)) fail(name + " sample is not a finite number");
    }
  };
  clock("device", record.device_latency, record.device_samples_ms);
  clock("wall", record.wall_latency, record.wall_samples_ms);
  // Every other REAL column of the list (the clocks' statistics have passed above).
  for (const store::Column& column : store::measurement_columns()) {
    if (column.type != store::ColumnType::kReal) continue;
    const store::Value value = column.get(record);
    if (const double* real = std::get_if<double>(&value)) finite(column.name, *real);
  }
}

}  // namespace

WriteOutcome Store::write_measurement(const MeasurementRecord& record) {
  validate(record);
  const Config config = parse_key(record.configuration_key);
  if (to_key(config) != record.configuration_key) {
    throw_input("configuration key '" + record.configuration_key +
                "' is not canonical (carb::to_key gives '" + to_key(config) + "')");
  }
  const std::string expected_key =
      carb::measurement_key(record.configuration_key, record.device_fingerprint,
                            record.software_versions, record.protocol_json);
  if (record.measurement_key != expected_key) {
    throw_input("measurement key " + record.measurement_key + " does not match its fields (" +
                expected_key + ")");
  }
  const std::string provenance = canonical_json(record.provenance_json, "provenance");
  const std::string protocol = canonical_json(record.protocol_json, "protocol");

  sqlite3* db = impl_->db.get();
  Transaction transaction(db, Transaction::Mode::kWrite);
  Statement device(db, "SELECT id FROM devices WHERE fingerprint = :fingerprint");
  device.bind(":fingerprint", record.device_fingerprint);
  if (!device.step()) {
    throw_input("device '" + record.device_fingerprint + "' is not recorded in " + impl_->path +
                "; record it with ensure_device first");
  }
  const std::int64_t device_id = device.integer("id");
  Statement campaign(db, "SELECT id FROM campaigns WHERE id = :id");
  campaign.bind(":id", record.campaign_id);
  if (!campaign.step()) {
    throw_input("campaign " + std::to_string(record.campaign_id) + " is not recorded in " +
                impl_->path);
  }

  // A write always ends the key's claim: whoever claimed it is done with it.
  Statement drop_claim(db, "DELETE FROM claims WHERE measurement_key = :key");
  drop_claim.bind(":key", record.measurement_key);

  Statement existing(db,
                     "SELECT id, status, attempts FROM measurements WHERE measurement_key = :key");
  existing.bind(":key", record.measurement_key);
  std::int64_t attempts = 1;
  WriteOutcome outcome = WriteOutcome::kInserted;
  if (existing.step()) {
    if (is_final(read_status(existing))) {
      drop_claim.run();
      transaction.commit();
      return WriteOutcome::kKept;
    }
    attempts = existing.integer("attempts") + 1;
    outcome = WriteOutcome::kReplaced;
    const std::int64_t failed_id = existing.integer("id");
    existing.reset();
    // The failed row's samples go with it (ON DELETE CASCADE).
    Statement remove(db, "DELETE FROM measurements WHERE id = :id");
    remove.bind(":id", failed_id).run();
  }

  write_configuration(db, record.configuration_key, config);

  static const std::string insert_sql =
      store::insert_measurement_sql(store::measurement_columns());
  Statement insert(db, insert_sql);
  insert.bind(":measurement_key", record.measurement_key)
      .bind(":configuration_key", record.configuration_key)
      .bind(":device_id", device_id)
      .bind(":campaign_id", record.campaign_id)
      .bind(":software_versions", record.software_versions)
      .bind(":status", to_string(record.status))
      .bind(":detail", record.detail)
      .bind(":attempts", attempts)
      .bind(":started_at", store::format_timestamp(record.started_at))
      .bind(":finished_at", store::format_timestamp(record.finished_at))
      .bind(":provenance", provenance)
      .bind(":protocol", protocol);
  store::bind_columns(insert, store::measurement_columns(), record);
  insert.run();
  const std::int64_t measurement_id = sqlite3_last_insert_rowid(db);

  Statement sample(db, R"sql(
    INSERT INTO samples (measurement_id, clock, sequence, value_ms)
    VALUES (:measurement_id, :clock, :sequence, :value_ms))sql");
  for (const auto& [clock, values] : {std::pair{SampleClock::kDevice, &record.device_samples_ms},
                                      std::pair{SampleClock::kWall, &record.wall_samples_ms}}) {
    std::int64_t sequence = 0;
    for (double value_ms : *values) {
      sample.bind(":measurement_id", measurement_id)
          .bind(":clock", to_string(clock))
          .bind(":sequence", sequence++)
          .bind(":value_ms", value_ms)
          .run();
    }
  }
  drop_claim.run();
  transaction.commit();
  return outcome;
}

std::optional<MeasurementRecord> Store::find_measurement(std::string_view measurement_key) const {
  sqlite3* db = impl_->db.get();
  Transaction transaction(db, Transaction::Mode::kRead);
  Statement find(db, R"sql(
    SELECT m.*, d.fingerprint AS device_fingerprint
    FROM measurements m JOIN devices d ON d.id = m.device_id
    WHERE m.measurement_key = :key)sql");
  find.bind(":key", measurement_key);
  if (!find.step()) return std::nullopt;
  MeasurementRecord record;
  record.measurement_key = find.text("measurement_key");
  record.configuration_key = find.text("configuration_key");
  record.device_fingerprint = find.text("device_fingerprint");
  record.campaign_id = find.integer("campaign_id");
  record.software_versions = find.text("software_versions");
  record.status = read_status(find);
  record.detail = find.text("detail");
  record.attempts = static_cast<int>(find.integer("attempts"));
  record.started_at = store::parse_timestamp(find.text("started_at"));
  record.finished_at = store::parse_timestamp(find.text("finished_at"));
  store::read_columns(find, store::measurement_columns(), record);
  record.provenance_json = find.text("provenance");
  record.protocol_json = find.text("protocol");

  Statement samples(db, R"sql(
    SELECT clock, value_ms FROM samples WHERE measurement_id = :id ORDER BY clock, sequence)sql");
  samples.bind(":id", find.integer("id"));
  while (samples.step()) {
    auto& values = samples.text("clock") == to_string(SampleClock::kDevice)
                       ? record.device_samples_ms
                       : record.wall_samples_ms;
    values.push_back(samples.real("value_ms"));
  }
  transaction.commit();
  return record;
}

std::vector<std::string> Store::pending(const std::vector<std::string>& keys,
                                        const ResumePolicy& policy) const {
  sqlite3* db = impl_->db.get();
  Transaction transaction(db, Transaction::Mode::kRead);
  Statement find(db, "SELECT status, attempts FROM measurements WHERE measurement_key = :key");
  std::vector<std::string> result;
  for (const std::string& key : keys) {
    find.bind(":key", key);
    bool needed = true;
    if (find.step()) {
      needed = !is_final(read_status(find)) && find.integer("attempts") < policy.retry_limit;
    }
    find.reset();
    if (needed) result.push_back(key);
  }
  transaction.commit();
  return result;
}

namespace {

// Whether a claim can be taken over: its owner's process is gone (checked only on this host,
// since pids elsewhere mean nothing here) or the claim has outlived the timeout. A pid reused
// by an unrelated process looks alive; the timeout covers that case.
bool is_stale(const std::string& this_host, const std::string& owner_host, std::int64_t owner_pid,
              Timestamp claimed_at, const ResumePolicy& policy) {
  if (owner_host == this_host && kill(static_cast<pid_t>(owner_pid), 0) != 0 && errno == ESRCH) {
    return true;
  }
  return std::chrono::system_clock::now() - claimed_at > policy.claim_timeout;
}

}  // namespace

bool Store::claim(std::string_view measurement_key, const ClaimOwner& owner,
                  const ResumePolicy& policy) {
  sqlite3* db = impl_->db.get();
  // The write lock is taken before looking, so two processes cannot both see the key free.
  Transaction transaction(db, Transaction::Mode::kWrite);
  Statement measured(db, "SELECT status, attempts FROM measurements WHERE measurement_key = :key");
  measured.bind(":key", measurement_key);
  if (measured.step()) {
    if (is_final(read_status(measured)) || measured.integer("attempts") >= policy.retry_limit) {
      return false;
    }
  }
  Statement held(db, "SELECT * FROM claims WHERE measurement_key = :key");
  held.bind(":key", measurement_key);
  if (held.step()) {
    const ClaimOwner holder{held.text("owner_host"), held.integer("owner_pid")};
    if (!(holder == owner) && !is_stale(impl_->host, holder.host, holder.pid,
                                        store::parse_timestamp(held.text("claimed_at")), policy)) {
      return false;
    }
  }
  Statement take(db, R"sql(
    INSERT INTO claims (measurement_key, owner_host, owner_pid, claimed_at)
    VALUES (:key, :host, :pid, :claimed_at)
    ON CONFLICT (measurement_key) DO UPDATE
    SET owner_host = excluded.owner_host, owner_pid = excluded.owner_pid,
        claimed_at = excluded.claimed_at)sql");
  take.bind(":key", measurement_key)
      .bind(":host", owner.host)
      .bind(":pid", owner.pid)
      .bind(":claimed_at", store::format_timestamp(std::chrono::system_clock::now()))
      .run();
  transaction.commit();
  return true;
}

void Store::release(std::string_view measurement_key, const ClaimOwner& owner) {
  Statement release(impl_->db.get(), R"sql(
    DELETE FROM claims
    WHERE measurement_key = :key AND owner_host = :host AND owner_pid = :pid)sql");
  release.bind(":key", measurement_key).bind(":host", owner.host).bind(":pid", owner.pid).run();
}

}  // namespace carb
