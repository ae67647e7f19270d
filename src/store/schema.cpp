// Schema, migrations and opening of carb databases.
#include "schema.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "carb/error.hpp"
#include "carb/store.hpp"
#include "columns.hpp"

namespace carb::store {

namespace {

// Version 1: what was measured, where, how, and the raw samples. Tables are STRICT so that a
// value of the wrong type is an error rather than silently stored as text; CHECK constraints
// reject values that cannot be physical (a NULL passes a CHECK, which is what optional columns
// need). NaN never reaches a column: SQLite stores it as NULL, so the writer rejects it first.
constexpr std::string_view kVersion1 = R"sql(
CREATE TABLE campaigns (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL CHECK (name <> ''),
  spec_text TEXT NOT NULL,
  spec_hash TEXT NOT NULL CHECK (length(spec_hash) = 64),
  created_at TEXT NOT NULL,
  carb_version TEXT NOT NULL,
  git_commit TEXT NOT NULL,
  protocol TEXT NOT NULL CHECK (json_valid(protocol)),
  UNIQUE (name, spec_hash, protocol)
) STRICT;

CREATE TABLE devices (
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE CHECK (fingerprint <> ''),
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  details TEXT NOT NULL CHECK (json_valid(details))
) STRICT;

CREATE TABLE configurations (
  key TEXT PRIMARY KEY,
  block TEXT NOT NULL CHECK (block IN ('basic', 'bottleneck')),
  depth INTEGER NOT NULL CHECK (depth > 0),
  width_multiplier REAL NOT NULL CHECK (width_multiplier > 0),
  early_downsample INTEGER NOT NULL CHECK (early_downsample IN (0, 1)),
  resolution INTEGER NOT NULL CHECK (resolution > 0),
  batch INTEGER NOT NULL CHECK (batch > 0),
  precision TEXT NOT NULL CHECK (precision IN ('fp32', 'fp16', 'bf16')),
  stage_blocks TEXT NOT NULL CHECK (json_valid(stage_blocks)),
  stage_widths TEXT NOT NULL CHECK (json_valid(stage_widths)),
  classes INTEGER NOT NULL CHECK (classes > 0)
) STRICT, WITHOUT ROWID;
CREATE INDEX configurations_by_structure ON configurations (block, depth, width_multiplier);
CREATE INDEX configurations_by_input ON configurations (resolution, batch, precision);

CREATE TABLE measurements (
  id INTEGER PRIMARY KEY,
  measurement_key TEXT NOT NULL UNIQUE CHECK (length(measurement_key) = 64),
  configuration_key TEXT NOT NULL REFERENCES configurations (key),
  device_id INTEGER NOT NULL REFERENCES devices (id),
  campaign_id INTEGER NOT NULL REFERENCES campaigns (id),
  software_versions TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('ok', 'unsupported', 'oom', 'timeout', 'crashed', 'error')),
  detail TEXT NOT NULL,
  attempts INTEGER NOT NULL CHECK (attempts >= 1),
  started_at TEXT NOT NULL CHECK (started_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*Z'),
  finished_at TEXT NOT NULL
    CHECK (finished_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*Z'),

  device_median_ms REAL CHECK (device_median_ms >= 0),
  device_mean_ms REAL CHECK (device_mean_ms >= 0),
  device_p5_ms REAL CHECK (device_p5_ms >= 0),
  device_p95_ms REAL CHECK (device_p95_ms >= 0),
  device_cv REAL CHECK (device_cv >= 0),
  device_count INTEGER CHECK (device_count >= 1),
  device_ci_half_width_ms REAL CHECK (device_ci_half_width_ms >= 0),
  device_converged INTEGER CHECK (device_converged IN (0, 1)),

  wall_median_ms REAL CHECK (wall_median_ms >= 0),
  wall_mean_ms REAL CHECK (wall_mean_ms >= 0),
  wall_p5_ms REAL CHECK (wall_p5_ms >= 0),
  wall_p95_ms REAL CHECK (wall_p95_ms >= 0),
  wall_cv REAL CHECK (wall_cv >= 0),
  wall_count INTEGER CHECK (wall_count >= 1),
  wall_ci_half_width_ms REAL CHECK (wall_ci_half_width_ms >= 0),
  wall_converged INTEGER CHECK (wall_converged IN (0, 1)),

  energy_j REAL CHECK (energy_j >= 0),
  energy_method TEXT,
  energy_sensor TEXT,
  energy_null_reason TEXT,
  energy_window_s REAL CHECK (energy_window_s > 0),
  energy_window_inferences INTEGER CHECK (energy_window_inferences >= 1),
  idle_power_w REAL CHECK (idle_power_w >= 0),
  dynamic_energy_j REAL,

  engine_peak_bytes INTEGER CHECK (engine_peak_bytes >= 0),
  weights_bytes INTEGER CHECK (weights_bytes >= 0),
  activation_bytes INTEGER CHECK (activation_bytes >= 0),
  scratchpad_bytes INTEGER CHECK (scratchpad_bytes >= 0),
  process_peak_rss_bytes INTEGER CHECK (process_peak_rss_bytes >= 0),
  baseline_rss_bytes INTEGER CHECK (baseline_rss_bytes >= 0),

  provenance TEXT NOT NULL CHECK (json_valid(provenance)),
  protocol TEXT NOT NULL CHECK (json_valid(protocol)),

  CHECK (finished_at >= started_at),
  -- A clock's statistics are all present or all absent, and percentiles are ordered.
  CHECK ((device_median_ms IS NULL) + (device_mean_ms IS NULL) + (device_p5_ms IS NULL) +
         (device_p95_ms IS NULL) + (device_cv IS NULL) + (device_count IS NULL) +
         (device_ci_half_width_ms IS NULL) + (device_converged IS NULL) IN (0, 8)),
  CHECK (device_p5_ms <= device_median_ms AND device_median_ms <= device_p95_ms),
  CHECK ((wall_median_ms IS NULL) + (wall_mean_ms IS NULL) + (wall_p5_ms IS NULL) +
         (wall_p95_ms IS NULL) + (wall_cv IS NULL) + (wall_count IS NULL) +
         (wall_ci_half_width_ms IS NULL) + (wall_converged IS NULL) IN (0, 8)),
  CHECK (wall_p5_ms <= wall_median_ms AND wall_median_ms <= wall_p95_ms),
  -- A successful measurement has a latency.
  CHECK (status <> 'ok' OR wall_median_ms IS NOT NULL),
  -- Energy is measured (with its method) or NULL with the reason; never both, never silent.
  CHECK (energy_j IS NULL OR energy_null_reason IS NULL),
  CHECK (energy_j IS NULL OR energy_method IS NOT NULL),
  CHECK (status <> 'ok' OR energy_j IS NOT NULL OR energy_null_reason IS NOT NULL),
  CHECK (energy_j IS NOT NULL OR dynamic_energy_j IS NULL)
) STRICT;
CREATE INDEX measurements_by_configuration ON measurements (configuration_key, device_id);
CREATE INDEX measurements_by_device ON measurements (device_id, status);
CREATE INDEX measurements_by_campaign ON measurements (campaign_id, status);
CREATE INDEX measurements_by_finish ON measurements (finished_at);

-- Raw latency samples, clustered by measurement so one measurement's samples are contiguous.
-- They point at measurements.id rather than repeating the 64-character key in every row.
CREATE TABLE samples (
  measurement_id INTEGER NOT NULL REFERENCES measurements (id) ON DELETE CASCADE,
  clock TEXT NOT NULL CHECK (clock IN ('device', 'wall')),
  sequence INTEGER NOT NULL CHECK (sequence >= 0),
  value_ms REAL NOT NULL CHECK (value_ms >= 0),
  PRIMARY KEY (measurement_id, clock, sequence)
) STRICT, WITHOUT ROWID;

-- One row per measurement with its campaign, device and configuration knobs: what people query.
CREATE VIEW measurement_view AS
SELECT m.measurement_key, c.name AS campaign, d.fingerprint AS device_fingerprint,
       d.kind AS device_kind, d.name AS device_name, m.configuration_key,
       k.block, k.depth, k.width_multiplier, k.early_downsample, k.resolution, k.batch,
       k.precision, k.stage_blocks, k.stage_widths, k.classes,
       m.status, m.detail, m.attempts, m.started_at, m.finished_at, m.software_versions,
       m.device_median_ms, m.device_mean_ms, m.device_p5_ms, m.device_p95_ms, m.device_cv,
       m.device_count, m.device_ci_half_width_ms, m.device_converged,
       m.wall_median_ms, m.wall_mean_ms, m.wall_p5_ms, m.wall_p95_ms, m.wall_cv,
       m.wall_count, m.wall_ci_half_width_ms, m.wall_converged,
       m.energy_j, m.energy_method, m.energy_sensor, m.energy_null_reason, m.energy_window_s,
       m.energy_window_inferences, m.idle_power_w, m.dynamic_energy_j,
       m.engine_peak_bytes, m.weights_bytes, m.activation_bytes, m.scratchpad_bytes,
       m.process_peak_rss_bytes, m.baseline_rss_bytes,
       m.provenance, m.protocol
FROM measurements m
JOIN campaigns c ON c.id = m.campaign_id
JOIN devices d ON d.id = m.device_id
JOIN configurations k ON k.key = m.configuration_key;
)sql";

// Version 2: claims, so that several processes can profile into one database without measuring
// a key twice. A row exists only while a key is being measured.
constexpr std::string_view kVersion2 = R"sql(
CREATE TABLE claims (
  measurement_key TEXT PRIMARY KEY,
  owner_host TEXT NOT NULL,
  owner_pid INTEGER NOT NULL CHECK (owner_pid > 0),
  claimed_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;
)sql";

// Version 3: the engine's memory columns say they are the engine's (weights_bytes ->
// engine_weight_bytes, ...), so an export that also carries the analytic activation_bytes
// feature never has two columns of one name.
constexpr std::string_view kVersion3 = R"sql(
DROP VIEW measurement_view;
ALTER TABLE measurements RENAME COLUMN weights_bytes TO engine_weight_bytes;
ALTER TABLE measurements RENAME COLUMN activation_bytes TO engine_activation_bytes;
ALTER TABLE measurements RENAME COLUMN scratchpad_bytes TO engine_scratchpad_bytes;
CREATE VIEW measurement_view AS
SELECT m.measurement_key, c.name AS campaign, d.fingerprint AS device_fingerprint,
       d.kind AS device_kind, d.name AS device_name, m.configuration_key,
       k.block, k.depth, k.width_multiplier, k.early_downsample, k.resolution, k.batch,
       k.precision, k.stage_blocks, k.stage_widths, k.classes,
       m.status, m.detail, m.attempts, m.started_at, m.finished_at, m.software_versions,
       m.device_median_ms, m.device_mean_ms, m.device_p5_ms, m.device_p95_ms, m.device_cv,
       m.device_count, m.device_ci_half_width_ms, m.device_converged,
       m.wall_median_ms, m.wall_mean_ms, m.wall_p5_ms, m.wall_p95_ms, m.wall_cv,
       m.wall_count, m.wall_ci_half_width_ms, m.wall_converged,
       m.energy_j, m.energy_method, m.energy_sensor, m.energy_null_reason, m.energy_window_s,
       m.energy_window_inferences, m.idle_power_w, m.dynamic_energy_j,
       m.engine_peak_bytes, m.engine_weight_bytes, m.engine_activation_bytes,
       m.engine_scratchpad_bytes, m.process_peak_rss_bytes, m.baseline_rss_bytes,
       m.provenance, m.protocol
FROM measurements m
JOIN campaigns c ON c.id = m.campaign_id
JOIN devices d ON d.id = m.device_id
JOIN configurations k ON k.key = m.configuration_key;
)sql";

// Version 4: measurements that `carb merge` found in two databases under one measurement key
// with different results. The measurements table keeps one of them (merge.cpp says which);
// every other version is kept here whole (row, campaign, device fingerprint and samples as
// JSON), once per distinct content.
constexpr std::string_view kVersion4 = R"sql(
CREATE TABLE measurement_conflicts (
  id INTEGER PRIMARY KEY,
  measurement_key TEXT NOT NULL CHECK (length(measurement_key) = 64),
  content_sha256 TEXT NOT NULL CHECK (length(content_sha256) = 64),
  source TEXT NOT NULL,
  merged_at TEXT NOT NULL CHECK (merged_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*Z'),
  measurement TEXT NOT NULL CHECK (json_valid(measurement)),
  UNIQUE (measurement_key, content_sha256)
) STRICT;
)sql";

// Version 5: drift probes. A campaign measures one fixed configuration every so often while it
// runs; how that probe's latency moves over time is the device's speed drifting, which the
// predictor can divide out (docs/measurement.md, "Drift probes"). Probes are not measurements
// of the campaign: they have no measurement key and are never resumed.
constexpr std::string_view kVersion5 = R"sql(
CREATE TABLE drift_probes (
  id INTEGER PRIMARY KEY,
  campaign_id INTEGER NOT NULL REFERENCES campaigns (id),
  device_id INTEGER NOT NULL REFERENCES devices (id),
  configuration_key TEXT NOT NULL CHECK (configuration_key <> ''),
  software_versions TEXT NOT NULL,
  protocol TEXT NOT NULL CHECK (json_valid(protocol)),
  measured_at TEXT NOT NULL
    CHECK (measured_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*Z'),
  status TEXT NOT NULL
    CHECK (status IN ('ok', 'unsupported', 'oom', 'timeout', 'crashed', 'error')),
  detail TEXT NOT NULL,
  clock TEXT CHECK (clock IN ('device', 'wall')),
  median_ms REAL CHECK (median_ms > 0),
  ci_half_width_ms REAL CHECK (ci_half_width_ms >= 0),
  sample_count INTEGER CHECK (sample_count >= 1),
  cv REAL CHECK (cv >= 0),
  converged INTEGER CHECK (converged IN (0, 1)),
  contended INTEGER NOT NULL CHECK (contended IN (0, 1)),
  CHECK ((clock IS NULL) + (median_ms IS NULL) + (ci_half_width_ms IS NULL) +
         (sample_count IS NULL) + (cv IS NULL) + (converged IS NULL) IN (0, 6)),
  CHECK (status <> 'ok' OR median_ms IS NOT NULL),
  UNIQUE (device_id, configuration_key, measured_at)
) STRICT;
CREATE INDEX drift_probes_by_device ON drift_probes (device_id, measured_at);
)sql";

// Version 6: imported architectures (docs/onnx.md). A configuration is a ResNet (its knob
// columns) or a network imported from a model file (its architecture's content hash, whose
// definition the architectures table keeps, so that any carb reading the database can build its
// networks). SQLite cannot relax a table's CHECK constraints in place, so configurations is
// rebuilt (SQLite's documented twelve-step procedure; foreign keys are off while a migration
// runs), and measurement_view, which reads it, is dropped first and made again after the step.
constexpr std::string_view kVersion6 = R"sql(
DROP VIEW measurement_view;
CREATE TABLE architectures (
  hash TEXT PRIMARY KEY CHECK (length(hash) = 16),
  name TEXT NOT NULL,
  source TEXT NOT NULL,
  definition TEXT NOT NULL CHECK (json_valid(definition))
) STRICT, WITHOUT ROWID;
CREATE TABLE configurations_v6 (
  key TEXT PRIMARY KEY,
  architecture TEXT REFERENCES architectures (hash),
  block TEXT CHECK (block IN ('basic', 'bottleneck')),
  depth INTEGER CHECK (depth > 0),
  width_multiplier REAL CHECK (width_multiplier > 0),
  early_downsample INTEGER CHECK (early_downsample IN (0, 1)),
  resolution INTEGER NOT NULL CHECK (resolution > 0),
  batch INTEGER NOT NULL CHECK (batch > 0),
  precision TEXT NOT NULL CHECK (precision IN ('fp32', 'fp16', 'bf16')),
  stage_blocks TEXT CHECK (stage_blocks IS NULL OR json_valid(stage_blocks)),
  stage_widths TEXT CHECK (stage_widths IS NULL OR json_valid(stage_widths)),
  classes INTEGER CHECK (classes > 0),
  CHECK ((architecture IS NULL) + (block IS NULL) + (depth IS NULL) +
         (width_multiplier IS NULL) + (early_downsample IS NULL) + (stage_blocks IS NULL) +
         (stage_widths IS NULL) + (classes IS NULL) IN (1, 7))
) STRICT, WITHOUT ROWID;
INSERT INTO configurations_v6 (key, architecture, block, depth, width_multiplier,
                               early_downsample, resolution, batch, precision, stage_blocks,
                               stage_widths, classes)
SELECT key, NULL, block, depth, width_multiplier, early_downsample, resolution, batch, precision,
       stage_blocks, stage_widths, classes FROM configurations;
DROP TABLE configurations;
ALTER TABLE configurations_v6 RENAME TO configurations;
CREATE INDEX configurations_by_structure ON configurations (block, depth, width_multiplier);
CREATE INDEX configurations_by_input ON configurations (resolution, batch, precision);
CREATE INDEX configurations_by_architecture ON configurations (architecture);
)sql";

[[noreturn]] void throw_input(const std::string& message) {
  throw Error(ErrorCategory::kInput, message);
}

std::string hex32(std::int64_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", static_cast<unsigned>(value & 0xffffffff));
  return text;
}

// One integer-valued pragma or query. The first read of a file is where SQLite notices that it
// is not a database at all, so that status becomes the "not a carb database" error.
std::int64_t query_integer(sqlite3* db, const std::string& path, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  int status = sqlite3_prepare_v2(db, sql, -1, &raw, nullptr);
  const StatementPtr statement(raw);
  if (status == SQLITE_OK) status = sqlite3_step(statement.get());
  if (status == SQLITE_NOTADB) {
    throw_input(path + ": not a carb database (not an SQLite database file)");
  }
  CARB_SQLITE(db, status);
  return sqlite3_column_int64(statement.get(), 0);
}

// Sets WAL mode (persistent in the file) and returns the journal mode in force. Switching needs
// an exclusive lock, and when two processes open a new file at once SQLite reports the conflict
// as SQLITE_BUSY without waiting (waiting could deadlock), so this waits and retries itself.
std::string switch_to_wal(sqlite3* db) {
  constexpr const char* kSql = "PRAGMA journal_mode = WAL";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    sqlite3_stmt* raw = nullptr;
    CARB_SQLITE(db, sqlite3_prepare_v2(db, kSql, -1, &raw, nullptr));
    const StatementPtr statement(raw);
    const int status = sqlite3_step(statement.get());
    if (status == SQLITE_ROW) {
      return reinterpret_cast<const char*>(sqlite3_column_text(statement.get(), 0));
    }
    if (status != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline) {
      check_sqlite(status, db, "sqlite3_step(\"PRAGMA journal_mode = WAL\")", __FILE__, __LINE__);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

const std::vector<std::string>& migrations() {
  // Each step is its written-out SQL (versions up to kHistoricalVersion) followed by the
  // generated ADD COLUMN of the measured columns that version introduced (columns.hpp).
  static const std::vector<std::string> steps = [] {
    constexpr std::string_view kWritten[] = {kVersion1, kVersion2, kVersion3,
                                             kVersion4, kVersion5, kVersion6};
    static_assert(std::size(kWritten) == kHistoricalVersion);
    int last = Store::kSchemaVersion;
    for (const Column& column : measurement_columns()) {
      last = std::max(last, column.since_version);
    }
    std::vector<std::string> result;
    for (int version = 1; version <= last; ++version) {
      std::string step;
      if (version <= kHistoricalVersion) step = kWritten[version - 1];
      step += added_columns_sql(measurement_columns(), version);
      result.push_back(std::move(step));
    }
    return result;
  }();
  return steps;
}

void migrate(sqlite3* db, int from, int to) {
  CARB_CHECK(0 <= from && from <= to && to <= static_cast<int>(migrations().size()),
             "bad migration " + std::to_string(from) + " -> " + std::to_string(to));
  for (int version = from; version < to; ++version) {
    execute(db, migrations()[static_cast<std::size_t>(version)]);
  }
  // The view of the current schema is made from the column list, so a new column needs no
  // hand-written view; an older version (the tests build them) keeps the view its steps made.
  if (from < to && to == Store::kSchemaVersion) {
    execute(db, measurement_view_sql(measurement_columns()));
  }
  if (from == 0) execute(db, "PRAGMA application_id = " + std::to_string(Store::kApplicationId));
  execute(db, "PRAGMA user_version = " + std::to_string(to));
}

DatabasePtr open_database(const std::string& path, bool create) {
  CARB_CHECK(static_cast<int>(migrations().size()) == Store::kSchemaVersion,
             "Store::kSchemaVersion must equal the number of migrations (a measured column's "
             "since_version is at most Store::kSchemaVersion)");
  sqlite3* raw = nullptr;
  // Each Store is used by one thread, so SQLite's per-connection mutex is not needed.
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  const int status = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  DatabasePtr db(raw);
  if (status != SQLITE_OK) {
    throw_input("cannot open carb database " + path + ": " +
                (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(status)));
  }
  // Other processes may hold the write lock for one measurement's transaction (milliseconds);
  // 10 s rides out any of them, and a longer wait means something is stuck.
  CARB_SQLITE(db.get(), sqlite3_busy_timeout(db.get(), 10000));

  const auto inspect = [&](bool may_be_fresh) {
    const std::int64_t application_id = query_integer(db.get(), path, "PRAGMA application_id");
    const std::int64_t version = query_integer(db.get(), path, "PRAGMA user_version");
    const std::int64_t objects =
        query_integer(db.get(), path, "SELECT count(*) FROM sqlite_schema");
    if (application_id == 0 && objects == 0 && version == 0) {
      if (!may_be_fresh) throw_input(path + ": not a carb database (empty file)");
      return 0;
    }
    if (application_id != Store::kApplicationId) {
      throw_input(path + ": not a carb database (SQLite application_id " + hex32(application_id) +
                  ", carb's is " + hex32(Store::kApplicationId) + ")");
    }
    if (version > Store::kSchemaVersion) {
      throw_input(path + ": schema version " + std::to_string(version) +
                  " is newer than this carb build understands (" +
                  std::to_string(Store::kSchemaVersion) + "); use a newer carb");
    }
    return static_cast<int>(version);
  };
  {
    // One snapshot, so a file another process creates meanwhile is seen whole or not at all.
    Transaction snapshot(db.get(), Transaction::Mode::kRead);
    inspect(create);
    snapshot.commit();
  }

  // WAL: readers never block the writer and a killed writer leaves the database intact.
  // synchronous=NORMAL: in WAL mode a commit is durable against process death (kill -9) as
  // soon as it returns, because the WAL lives in the OS page cache; only a power loss or OS
  // crash can lose the last commits, and even then the database is never corrupted. FULL would
  // fsync every measurement for protection against power loss only.
  const std::string mode = switch_to_wal(db.get());
  if (mode != "wal") {
    throw Error(ErrorCategory::kRuntime,
                path + ": cannot use write-ahead logging (journal mode stays '" + mode + "')");
  }
  execute(db.get(), "PRAGMA synchronous = NORMAL");

  // Another process may have created or migrated the file since inspect(), so look again under
  // the write lock; the whole migration commits or none of it does. Foreign keys are enforced
  // from after it: a step that rebuilds a table (version 6) needs them off, as SQLite's
  // procedure says, and checks them itself (foreign_key_check below).
  Transaction transaction(db.get(), Transaction::Mode::kWrite);
  const int version = inspect(create);
  if (version < Store::kSchemaVersion) {
    try {
      migrate(db.get(), version, Store::kSchemaVersion);
      if (query_integer(db.get(), path, "SELECT count(*) FROM pragma_foreign_key_check") != 0) {
        throw Error(ErrorCategory::kRuntime, "a foreign key no longer holds");
      }
    } catch (const Error& error) {
      throw Error(ErrorCategory::kRuntime,
                  path + ": migrating schema version " + std::to_string(version) + " to " +
                      std::to_string(Store::kSchemaVersion) + " failed: " + error.what());
    }
  }
  transaction.commit();
  execute(db.get(), "PRAGMA foreign_keys = ON");
  return db;
}

}  // namespace carb::store
