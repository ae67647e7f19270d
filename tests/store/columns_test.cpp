// The measured-column list (src/store/columns.hpp) against what the database holds: a fresh
// database and one migrated from version 1 have exactly the list's columns, types, CHECKs and
// order, in the table and in measurement_view; and a column added after the historical schema
// gets its migration step, view and INSERT from its entry alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "carb/store.hpp"
#include "columns.hpp"
#include "schema.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using store::Column;
using store::ColumnType;
using store_test::RawDb;
using store_test::ScratchDir;

struct ColumnInfo {
  std::string name;
  std::string type;
  bool operator==(const ColumnInfo&) const = default;
};

std::ostream& operator<<(std::ostream& out, const ColumnInfo& column) {
  return out << column.name << " " << column.type;
}

std::vector<ColumnInfo> table_info(RawDb& raw, const std::string& table) {
  sqlite3_stmt* statement = nullptr;
  const std::string sql = "SELECT name, type FROM pragma_table_info('" + table + "') ORDER BY cid";
  EXPECT_EQ(sqlite3_prepare_v2(raw.get(), sql.c_str(), -1, &statement, nullptr), SQLITE_OK);
  std::vector<ColumnInfo> columns;
  while (sqlite3_step(statement) == SQLITE_ROW) {
    columns.push_back({reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)),
                       reinterpret_cast<const char*>(sqlite3_column_text(statement, 1))});
  }
  sqlite3_finalize(statement);
  return columns;
}

std::vector<std::string> names(const std::vector<ColumnInfo>& columns) {
  std::vector<std::string> result;
  for (const ColumnInfo& column : columns) result.push_back(column.name);
  return result;
}

ColumnInfo info(const Column& column) {
  return {std::string(column.name), std::string(store::sql_type(column.type))};
}

// What PRAGMA table_info(measurements) must say for `columns`: the row id and the leading
// columns, the version-1 measured columns in list order, provenance and protocol, then the later
// columns in the order their versions added them (ALTER TABLE appends).
std::vector<ColumnInfo> expected_table(std::span<const Column> columns) {
  std::vector<ColumnInfo> expected = {{"id", "INTEGER"}};
  for (std::string_view name : store::measurement_leading_columns()) {
    expected.push_back({std::string(name), ""});  // types checked by the CREATE TABLE text
  }
  for (const Column& column : columns) {
    if (column.since_version <= store::kHistoricalVersion) expected.push_back(info(column));
  }
  for (std::string_view name : store::measurement_trailing_columns()) {
    expected.push_back({std::string(name), "TEXT"});
  }
  std::vector<const Column*> later;
  for (const Column& column : columns) {
    if (column.since_version > store::kHistoricalVersion) later.push_back(&column);
  }
  std::stable_sort(later.begin(), later.end(), [](const Column* a, const Column* b) {
    return a->since_version < b->since_version;
  });
  for (const Column* column : later) expected.push_back(info(*column));
  return expected;
}

// Checks the measurements table and measurement_view of `path` against `columns`.
void expect_matches(const std::string& path, std::span<const Column> columns) {
  RawDb raw(path);
  std::vector<ColumnInfo> table = table_info(raw, "measurements");
  const std::vector<ColumnInfo> expected = expected_table(columns);
  ASSERT_EQ(table.size(), expected.size()) << testing::PrintToString(names(table));
  for (std::size_t index = 0; index < table.size(); ++index) {
    if (expected[index].type.empty()) table[index].type.clear();
    EXPECT_EQ(table[index], expected[index]) << "column " << index;
  }

  // Each column's definition, CHECK included, as the CREATE TABLE text holds it (SQLite keeps
  // the text of renames and ADD COLUMN in it).
  const std::string create =
      raw.text("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'measurements'");
  for (const Column& column : columns) {
    const std::string definition = store::column_definition(column);
    EXPECT_TRUE(store_test::contains(create, definition + ",") ||
                store_test::contains(create, definition + ")"))
        << definition << " not in\n"
        << create;
  }

  // The view: the identity and knobs up to software_versions, the list in order, then
  // provenance and protocol.
  const std::vector<ColumnInfo> view = table_info(raw, "measurement_view");
  const auto start = std::find_if(view.begin(), view.end(), [](const ColumnInfo& column) {
    return column.name == "software_versions";
  });
  ASSERT_NE(start, view.end());
  std::vector<ColumnInfo> measured(start + 1, view.end());
  std::vector<ColumnInfo> expected_measured;
  for (const Column& column : columns) expected_measured.push_back(info(column));
  expected_measured.push_back({"provenance", "TEXT"});
  expected_measured.push_back({"protocol", "TEXT"});
  EXPECT_EQ(measured, expected_measured);
}

TEST(StoreColumns, AFreshDatabaseHasTheListsColumnsInOrder) {
  ScratchDir dir;
  const std::string path = dir.file("fresh.db");
  { Store store = Store::create_or_open(path); }
  expect_matches(path, store::measurement_columns());
  // The view's identity and knob columns, as every export begins.
  RawDb raw(path);
  const std::vector<std::string> view = names(table_info(raw, "measurement_view"));
  const std::vector<std::string> head(view.begin(), view.begin() + 23);
  EXPECT_EQ(head, (std::vector<std::string>{"measurement_key",
                                            "campaign",
                                            "device_fingerprint",
                                            "device_kind",
                                            "device_name",
                                            "configuration_key",
                                            "architecture",
                                            "block",
                                            "depth",
                                            "width_multiplier",
                                            "early_downsample",
                                            "resolution",
                                            "batch",
                                            "precision",
                                            "stage_blocks",
                                            "stage_widths",
                                            "classes",
                                            "status",
                                            "detail",
                                            "attempts",
                                            "started_at",
                                            "finished_at",
                                            "software_versions"}));
}

TEST(StoreColumns, ADatabaseMigratedFromVersion1IsTheFreshOne) {
  ScratchDir dir;
  const std::string fresh = dir.file("fresh.db");
  const std::string old = dir.file("old.db");
  { Store store = Store::create_or_open(fresh); }
  {
    RawDb raw(old);
    raw.exec("BEGIN IMMEDIATE");
    store::migrate(raw.get(), 0, 1);
    raw.exec("COMMIT");
  }
  { Store store = Store::open(old); }
  expect_matches(old, store::measurement_columns());
  RawDb a(fresh);
  RawDb b(old);
  for (const std::string object : {"measurements", "measurement_view"}) {
    EXPECT_EQ(table_info(a, object), table_info(b, object)) << object;
    const std::string sql = "SELECT sql FROM sqlite_schema WHERE name = '" + object + "'";
    EXPECT_EQ(a.text(sql), b.text(sql)) << object;
  }
  EXPECT_EQ(a.integer("PRAGMA user_version"), b.integer("PRAGMA user_version"));
}

TEST(StoreColumns, EveryColumnRoundTripsThroughTheStore) {
  ScratchDir dir;
  Store store = Store::create_or_open(dir.file("carb.db"));
  const std::int64_t campaign_id = store_test::ensure_test_campaign(store, "columns");
  MeasurementRecord record = store_test::make_record(0, campaign_id, 12);
  record.device_latency->converged = false;
  record.energy_j = 0.5;
  record.energy_method = "rapl-powercap";
  record.energy_sensor = "sensor:0";
  record.energy_null_reason.reset();
  record.energy_window_s = 1.25;
  record.energy_window_inferences = 7;
  record.idle_power_w = 3.5;
  record.dynamic_energy_j = -0.01;
  record.engine_peak_bytes = 1;
  record.engine_weight_bytes = 2;
  record.engine_activation_bytes = 3;
  record.engine_scratchpad_bytes = 4;
  record.process_peak_rss_bytes = 5;
  record.baseline_rss_bytes = 6;
  // And one as the tests make it: no energy, with the reason; no engine memory.
  const MeasurementRecord without = store_test::make_record(1, campaign_id, 5);
  for (const MeasurementRecord* written : {&std::as_const(record), &without}) {
    ASSERT_EQ(store.write_measurement(*written), WriteOutcome::kInserted);
    const auto found = store.find_measurement(written->measurement_key);
    ASSERT_TRUE(found.has_value());
    for (const Column& column : store::measurement_columns()) {
      const store::Value value = column.get(*written);
      // The first has every column but the reason for a missing energy.
      if (written == &record && column.name != "energy_null_reason") {
        EXPECT_FALSE(std::holds_alternative<std::monostate>(value)) << column.name;
      }
      EXPECT_EQ(column.get(*found), value) << column.name;
    }
  }
  EXPECT_TRUE(store::is_boolean_column("wall_converged"));
  EXPECT_FALSE(store::is_boolean_column("wall_count"));
}

// A throwaway column of a future version: its entry alone gives the ALTER TABLE step, the view
// and the INSERT, and its get/set carry it through a row.
double extra_value = 0;
store::Value get_extra(const MeasurementRecord&) { return 2.5; }
void set_extra(MeasurementRecord&, const store::Value& value) {
  extra_value = std::get<double>(value);
}

TEST(StoreColumns, AColumnOfANewVersionComesFromItsEntry) {
  const int version = Store::kSchemaVersion + 1;
  std::vector<Column> columns(store::measurement_columns().begin(),
                              store::measurement_columns().end());
  // In the view and the export it goes where it is listed, here after the energy columns.
  const auto after_energy = std::find_if(
      columns.begin(), columns.end(), [](const Column& c) { return c.name == "dynamic_energy_j"; });
  columns.insert(after_energy + 1, Column{"extra_energy_j", ColumnType::kReal,
                                          "extra_energy_j >= 0", version, &get_extra, &set_extra});
  EXPECT_EQ(
      store::added_columns_sql(columns, version),
      "ALTER TABLE measurements ADD COLUMN extra_energy_j REAL CHECK (extra_energy_j >= 0);\n");
  for (int past = 1; past <= store::kHistoricalVersion; ++past) {
    EXPECT_EQ(store::added_columns_sql(columns, past), "") << past;
  }

  ScratchDir dir;
  const std::string path = dir.file("future.db");
  { Store store = Store::create_or_open(path); }
  {
    RawDb raw(path);
    raw.exec("BEGIN IMMEDIATE");
    raw.exec(store::added_columns_sql(columns, version));
    raw.exec(store::measurement_view_sql(columns));
    raw.exec("COMMIT");
  }
  expect_matches(path, columns);

  // The generated INSERT names it; a row written with it reads back through its setter.
  Store store = Store::open(path);
  const std::int64_t campaign_id = store_test::ensure_test_campaign(store, "future");
  MeasurementRecord record = store_test::make_record(0, campaign_id, 4);
  ASSERT_EQ(store.write_measurement(record), WriteOutcome::kInserted);  // leaves it NULL
  RawDb raw(path);
  EXPECT_EQ(raw.text("SELECT count(*) FROM measurements WHERE extra_energy_j IS NULL"), "1");
  const std::string insert = store::insert_measurement_sql(columns);
  EXPECT_TRUE(store_test::contains(insert, ":extra_energy_j"));
  raw.exec("DELETE FROM measurements");
  {
    store::Statement statement(raw.get(), insert);
    statement.bind(":measurement_key", record.measurement_key)
        .bind(":configuration_key", record.configuration_key)
        .bind(":device_id", std::int64_t{1})
        .bind(":campaign_id", campaign_id)
        .bind(":software_versions", record.software_versions)
        .bind(":status", std::string_view("ok"))
        .bind(":detail", std::string_view(""))
        .bind(":attempts", std::int64_t{1})
        .bind(":started_at", std::string_view("2025-01-01T00:00:00.000Z"))
        .bind(":finished_at", std::string_view("2025-01-01T00:00:01.000Z"))
        .bind(":provenance", std::string_view("{}"))
        .bind(":protocol", std::string_view("{}"));
    store::bind_columns(statement, columns, record);
    statement.run();
  }
  EXPECT_EQ(raw.text("SELECT extra_energy_j FROM measurement_view"), "2.5");
  store::Statement row(raw.get(), "SELECT * FROM measurements");
  ASSERT_TRUE(row.step());
  MeasurementRecord read;
  store::read_columns(row, columns, read);
  EXPECT_EQ(extra_value, 2.5);
  EXPECT_EQ(read.wall_latency->count, 4);
  row.reset();
  // Its CHECK holds.
  EXPECT_THROW(raw.exec("UPDATE measurements SET extra_energy_j = -1"), std::runtime_error);
}

}  // namespace
}  // namespace carb
