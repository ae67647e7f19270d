// The measured columns of the measurements table, and what is generated from them.
#include "columns.hpp"

#include <array>
#include <type_traits>

#include "carb/error.hpp"

namespace carb::store {

namespace {

using R = MeasurementRecord;
using S = LatencyStats;
using enum ColumnType;

// An optional field of the record: std::optional<std::int64_t>, <double> or <std::string>.
template <auto Field>
Value get_field(const R& record) {
  const auto& value = record.*Field;
  if (!value) return {};
  return Value(*value);
}

template <auto Field>
void set_field(R& record, const Value& value) {
  using T = typename std::remove_cvref_t<decltype(record.*Field)>::value_type;
  if (const T* present = std::get_if<T>(&value)) record.*Field = *present;
}

template <auto Field>
constexpr Column field(std::string_view name, ColumnType type, std::string_view check,
                       int since_version) {
  return {name, type, check, since_version, &get_field<Field>, &set_field<Field>};
}

// A statistic of one clock's latency (record.device_latency or record.wall_latency): NULL when
// the clock has no statistics; the schema holds a clock's statistics all present or all NULL.
template <auto Clock, auto Stat>
Value get_stat(const R& record) {
  const auto& stats = record.*Clock;
  if (!stats) return {};
  const auto value = (*stats).*Stat;
  if constexpr (std::is_same_v<decltype(value), const bool>) {
    return std::int64_t{value ? 1 : 0};
  } else {
    return Value(value);
  }
}

template <auto Clock, auto Stat>
void set_stat(R& record, const Value& value) {
  if (std::holds_alternative<std::monostate>(value)) return;
  auto& stats = record.*Clock;
  if (!stats) stats.emplace();
  auto& target = (*stats).*Stat;
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(target)>, bool>) {
    target = std::get<std::int64_t>(value) != 0;
  } else {
    target = std::get<std::remove_cvref_t<decltype(target)>>(value);
  }
}

template <auto Clock, auto Stat>
constexpr Column stat(std::string_view name, ColumnType type, std::string_view check,
                      int since_version) {
  return {name, type, check, since_version, &get_stat<Clock, Stat>, &set_stat<Clock, Stat>};
}

// THE LIST. A new measured column is one entry here (with since_version = the new
// Store::kSchemaVersion) and a field of MeasurementRecord; docs/extending.md walks through it.
// The entries of version 1 must match schema.cpp's kVersion1 (after version 3's renames) name
// for name, type and CHECK: tests/store/columns_test.cpp compares them with the database.
constexpr auto kColumns = std::to_array<Column>({
    stat<&R::device_latency, &S::median_ms>("device_median_ms", kReal, "device_median_ms >= 0", 1),
    stat<&R::device_latency, &S::mean_ms>("device_mean_ms", kReal, "device_mean_ms >= 0", 1),
    stat<&R::device_latency, &S::p5_ms>("device_p5_ms", kReal, "device_p5_ms >= 0", 1),
    stat<&R::device_latency, &S::p95_ms>("device_p95_ms", kReal, "device_p95_ms >= 0", 1),
    stat<&R::device_latency, &S::cv>("device_cv", kReal, "device_cv >= 0", 1),
    stat<&R::device_latency, &S::count>("device_count", kInteger, "device_count >= 1", 1),
    stat<&R::device_latency, &S::ci_half_width_ms>("device_ci_half_width_ms", kReal,
                                                   "device_ci_half_width_ms >= 0", 1),
    stat<&R::device_latency, &S::converged>("device_converged", kBoolean,
                                            "device_converged IN (0, 1)", 1),

    stat<&R::wall_latency, &S::median_ms>("wall_median_ms", kReal, "wall_median_ms >= 0", 1),
    stat<&R::wall_latency, &S::mean_ms>("wall_mean_ms", kReal, "wall_mean_ms >= 0", 1),
    stat<&R::wall_latency, &S::p5_ms>("wall_p5_ms", kReal, "wall_p5_ms >= 0", 1),
    stat<&R::wall_latency, &S::p95_ms>("wall_p95_ms", kReal, "wall_p95_ms >= 0", 1),
    stat<&R::wall_latency, &S::cv>("wall_cv", kReal, "wall_cv >= 0", 1),
    stat<&R::wall_latency, &S::count>("wall_count", kInteger, "wall_count >= 1", 1),
    stat<&R::wall_latency, &S::ci_half_width_ms>("wall_ci_half_width_ms", kReal,
                                                 "wall_ci_half_width_ms >= 0", 1),
    stat<&R::wall_latency, &S::converged>("wall_converged", kBoolean, "wall_converged IN (0, 1)",
                                          1),

    field<&R::energy_j>("energy_j", kReal, "energy_j >= 0", 1),
    field<&R::energy_method>("energy_method", kText, "", 1),
    field<&R::energy_sensor>("energy_sensor", kText, "", 1),
    field<&R::energy_null_reason>("energy_null_reason", kText, "", 1),
    field<&R::energy_window_s>("energy_window_s", kReal, "energy_window_s > 0", 1),
    field<&R::energy_window_inferences>("energy_window_inferences", kInteger,
                                        "energy_window_inferences >= 1", 1),
    field<&R::idle_power_w>("idle_power_w", kReal, "idle_power_w >= 0", 1),
    field<&R::dynamic_energy_j>("dynamic_energy_j", kReal, "", 1),

    field<&R::engine_peak_bytes>("engine_peak_bytes", kInteger, "engine_peak_bytes >= 0", 1),
    field<&R::engine_weight_bytes>("engine_weight_bytes", kInteger, "engine_weight_bytes >= 0", 1),
    field<&R::engine_activation_bytes>("engine_activation_bytes", kInteger,
                                       "engine_activation_bytes >= 0", 1),
    field<&R::engine_scratchpad_bytes>("engine_scratchpad_bytes", kInteger,
                                       "engine_scratchpad_bytes >= 0", 1),
    field<&R::process_peak_rss_bytes>("process_peak_rss_bytes", kInteger,
                                      "process_peak_rss_bytes >= 0", 1),
    field<&R::baseline_rss_bytes>("baseline_rss_bytes", kInteger, "baseline_rss_bytes >= 0", 1),
});

constexpr auto kLeading = std::to_array<std::string_view>(
    {"measurement_key", "configuration_key", "device_id", "campaign_id", "software_versions",
     "status", "detail", "attempts", "started_at", "finished_at"});
constexpr auto kTrailing = std::to_array<std::string_view>({"provenance", "protocol"});

// measurement_view around its measured columns: the measurement's identity with its campaign,
// device and configuration knobs before them, its provenance and protocol after.
constexpr std::string_view kViewHead = R"sql(CREATE VIEW measurement_view AS
SELECT m.measurement_key, c.name AS campaign, d.fingerprint AS device_fingerprint,
       d.kind AS device_kind, d.name AS device_name, m.configuration_key,
       a.name AS architecture, k.block, k.depth, k.width_multiplier, k.early_downsample, k.resolution, k.batch,
       k.precision, k.stage_blocks, k.stage_widths, k.classes,
       m.status, m.detail, m.attempts, m.started_at, m.finished_at, m.software_versions)sql";
constexpr std::string_view kViewTail = R"sql(,
       m.provenance, m.protocol
FROM measurements m
JOIN campaigns c ON c.id = m.campaign_id
JOIN devices d ON d.id = m.device_id
JOIN configurations k ON k.key = m.configuration_key
LEFT JOIN architectures a ON a.hash = k.architecture;
)sql";

}  // namespace

std::span<const Column> measurement_columns() { return kColumns; }
std::span<const std::string_view> measurement_leading_columns() { return kLeading; }
std::span<const std::string_view> measurement_trailing_columns() { return kTrailing; }

std::string_view sql_type(ColumnType type) {
  switch (type) {
    case kInteger:
    case kBoolean:
      return "INTEGER";
    case kReal:
      return "REAL";
    case kText:
      return "TEXT";
  }
  CARB_CHECK(false, "unknown column type");
  return "";
}

std::string column_definition(const Column& column) {
  std::string definition = std::string(column.name) + " " + std::string(sql_type(column.type));
  if (!column.check.empty()) definition += " CHECK (" + std::string(column.check) + ")";
  return definition;
}

std::string added_columns_sql(std::span<const Column> columns, int version) {
  std::string sql;
  if (version <= kHistoricalVersion) return sql;
  for (const Column& column : columns) {
    if (column.since_version == version) {
      sql += "ALTER TABLE measurements ADD COLUMN " + column_definition(column) + ";\n";
    }
  }
  return sql;
}

std::string measurement_view_sql(std::span<const Column> columns) {
  std::string sql = "DROP VIEW IF EXISTS measurement_view;\n";
  sql += kViewHead;
  // Four to a line, as the view read when it was written out by hand.
  for (std::size_t index = 0; index < columns.size(); ++index) {
    sql += index % 4 == 0 ? ",\n       " : ", ";
    sql += "m.";
    sql += columns[index].name;
  }
  sql += kViewTail;
  return sql;
}

std::string insert_measurement_sql(std::span<const Column> columns) {
  std::string names;
  std::string parameters;
  const auto add = [&](std::string_view name) {
    if (!names.empty()) {
      names += ", ";
      parameters += ", ";
    }
    names += name;
    parameters += ":";
    parameters += name;
  };
  for (std::string_view name : kLeading) add(name);
  for (const Column& column : columns) add(column.name);
  for (std::string_view name : kTrailing) add(name);
  return "INSERT INTO measurements (" + names + ")\nVALUES (" + parameters + ")";
}

void bind_columns(Statement& statement, std::span<const Column> columns,
                  const MeasurementRecord& record) {
  for (const Column& column : columns) {
    const std::string parameter = ":" + std::string(column.name);
    const Value value = column.get(record);
    if (const auto* integer = std::get_if<std::int64_t>(&value)) {
      statement.bind(parameter.c_str(), *integer);
    } else if (const auto* real = std::get_if<double>(&value)) {
      statement.bind(parameter.c_str(), *real);
    } else if (const auto* text = std::get_if<std::string>(&value)) {
      statement.bind(parameter.c_str(), *text);
    } else {
      statement.bind(parameter.c_str(), std::optional<std::int64_t>());
    }
  }
}

void read_columns(const Statement& row, std::span<const Column> columns,
                  MeasurementRecord& record) {
  for (const Column& column : columns) {
    Value value;
    if (!row.is_null(column.name)) {
      switch (column.type) {
        case kInteger:
        case kBoolean:
          value = row.integer(column.name);
          break;
        case kReal:
          value = row.real(column.name);
          break;
        case kText:
          value = row.text(column.name);
          break;
      }
    }
    column.set(record, value);
  }
}

bool is_boolean_column(std::string_view name) {
  for (const Column& column : kColumns) {
    if (column.name == name) return column.type == kBoolean;
  }
  return false;
}

}  // namespace carb::store
