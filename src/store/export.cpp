// Export of measurements joined with configuration knobs and analytic features, as CSV or JSON
// Lines, streamed row by row so an export never holds the database in memory.
#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "carb/csv.hpp"
#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/space.hpp"
#include "columns.hpp"
#include "store_impl.hpp"

namespace carb {

namespace {

using store::Statement;

// Columns holding JSON text that JSON Lines nests as values rather than strings.
constexpr std::array<std::string_view, 4> kJsonColumns = {"stage_blocks", "stage_widths",
                                                          "provenance", "protocol"};
// The analytic features (kScalarFeatures) join each row after the configuration knobs, whose
// last column is "classes".
constexpr std::string_view kLastKnobColumn = "classes";

ExportValue read_value(const Statement& row, int column) {
  sqlite3_stmt* statement = row.get();
  switch (sqlite3_column_type(statement, column)) {
    case SQLITE_INTEGER:
      return std::int64_t{sqlite3_column_int64(statement, column)};
    case SQLITE_FLOAT:
      return sqlite3_column_double(statement, column);
    case SQLITE_TEXT:
      return std::string(reinterpret_cast<const char*>(sqlite3_column_text(statement, column)),
                         static_cast<std::size_t>(sqlite3_column_bytes(statement, column)));
    default:
      return std::monostate{};
  }
}

// A view column's kind, from the type the table declares for it.
ExportKind kind_of(const Statement& rows, int column, const std::string& name) {
  const char* declared = sqlite3_column_decltype(rows.get(), column);
  const std::string_view type = declared != nullptr ? declared : "";
  if (type == "INTEGER") {
    // Columns holding 0/1: a knob and the column list's kBoolean ones.
    return name == "early_downsample" || store::is_boolean_column(name) ? ExportKind::kBoolean
                                                                        : ExportKind::kInteger;
  }
  if (type == "REAL") return ExportKind::kReal;
  return std::ranges::find(kJsonColumns, name) != kJsonColumns.end() ? ExportKind::kJson
                                                                     : ExportKind::kText;
}

// Shortest text that reads back to the same number, so an export loses nothing.
template <typename Number>
void write_number(CsvWriter& csv, Number value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  csv.field(std::string_view(text, static_cast<std::size_t>(result.ptr - text)));
}

void write_csv_field(CsvWriter& csv, const ExportValue& value) {
  if (const auto* integer = std::get_if<std::int64_t>(&value)) {
    write_number(csv, *integer);
  } else if (const auto* real = std::get_if<double>(&value)) {
    write_number(csv, *real);
  } else if (const auto* text = std::get_if<std::string>(&value)) {
    csv.field(*text);
  } else {
    csv.field("");  // NULL is an empty field, never 0
  }
}

nlohmann::ordered_json json_value(ExportKind kind, const ExportValue& value) {
  if (const auto* integer = std::get_if<std::int64_t>(&value)) {
    if (kind == ExportKind::kBoolean) return *integer != 0;
    return *integer;
  }
  if (const auto* real = std::get_if<double>(&value)) return *real;
  if (const auto* text = std::get_if<std::string>(&value)) {
    if (kind == ExportKind::kJson) return nlohmann::ordered_json::parse(*text);
    return *text;
  }
  return nullptr;
}

}  // namespace

std::int64_t Store::export_rows(
    bool ok_only, const std::function<void(const std::vector<ExportColumn>&)>& columns,
    const std::function<void(const std::vector<ExportValue>&)>& row) const {
  sqlite3* db = impl_->db.get();
  store::Transaction transaction(db, store::Transaction::Mode::kRead);
  Statement rows(db, std::string("SELECT * FROM measurement_view") +
                         (ok_only ? " WHERE status = 'ok'" : "") +
                         " ORDER BY configuration_key, measurement_key");
  // The view's columns, the analytic features (kScalarFeatures) after its knobs, whose last
  // column is "classes", and last the drift probe's latency at the middle of each measurement
  // (docs/measurement.md, "Drift probes"), from its device's probes; NULL where none lies near
  // enough.
  const int view_width = rows.column_count();
  std::vector<ExportColumn> header;
  int knob_end = 0;
  for (int column = 0; column < view_width; ++column) {
    std::string name = sqlite3_column_name(rows.get(), column);
    const ExportKind kind = kind_of(rows, column, name);
    header.push_back({std::move(name), kind});
    if (header.back().name == kLastKnobColumn) knob_end = column + 1;
  }
  CARB_CHECK(knob_end > 0, "measurement_view lacks the knob columns");
  std::vector<ExportColumn> features;
  features.reserve(kScalarFeatures.size());
  for (const ScalarFeature& feature : kScalarFeatures) {
    features.push_back({std::string(feature.name),
                        feature.integer != nullptr ? ExportKind::kInteger : ExportKind::kReal});
  }
  header.insert(header.begin() + knob_end, features.begin(), features.end());
  header.push_back({"drift_probe_ms", ExportKind::kReal});
  columns(header);

  std::map<std::string, DriftCurve> curves;
  const int device_column = rows.column("device_fingerprint");
  const int started_column = rows.column("started_at");
  const int finished_column = rows.column("finished_at");
  const int key_column = rows.column("configuration_key");
  // Features depend on the configuration only, and rows come grouped by configuration, so the
  // last configuration's features are all there is to keep.
  std::string features_key;
  Features computed;
  std::int64_t written = 0;
  std::vector<ExportValue> values;
  while (rows.step()) {
    values.clear();
    for (int column = 0; column < view_width; ++column) values.push_back(read_value(rows, column));
    const auto text_at = [&](int column) -> const std::string& {
      return std::get<std::string>(values[static_cast<std::size_t>(column)]);
    };
    const std::string& key = text_at(key_column);
    if (written == 0 || key != features_key) {
      computed = compute_features(build_network(parse_key(key)));
      features_key = key;
    }
    const std::string& device = text_at(device_column);
    auto curve = curves.find(device);
    if (curve == curves.end()) curve = curves.emplace(device, drift_curve(drift_probes(device))).first;
    const Timestamp started = store::parse_timestamp(text_at(started_column));
    const Timestamp finished = store::parse_timestamp(text_at(finished_column));
    ExportValue probe;
    if (const auto factor = curve->second.factor_at(started + (finished - started) / 2)) {
      probe = *factor * curve->second.reference_ms;
    }
    std::vector<ExportValue> feature_values;
    feature_values.reserve(kScalarFeatures.size());
    for (const ScalarFeature& feature : kScalarFeatures) {
      if (feature.integer != nullptr) {
        feature_values.emplace_back(computed.*feature.integer);
      } else {
        feature_values.emplace_back(computed.*feature.real);
      }
    }
    values.insert(values.begin() + knob_end, feature_values.begin(), feature_values.end());
    values.push_back(std::move(probe));
    row(values);
    ++written;
  }
  transaction.commit();
  return written;
}

std::int64_t Store::export_measurements(std::ostream& out, ExportFormat format,
                                        bool ok_only) const {
  CsvWriter csv(out, CsvQuoting::kRfc4180);
  std::vector<ExportColumn> header;
  return export_rows(
      ok_only,
      [&](const std::vector<ExportColumn>& columns) {
        header = columns;
        if (format != ExportFormat::kCsv) return;
        for (const ExportColumn& column : header) csv.field(column.name);
        csv.end_record();
      },
      [&](const std::vector<ExportValue>& values) {
        if (format == ExportFormat::kCsv) {
          for (const ExportValue& value : values) write_csv_field(csv, value);
          csv.end_record();
          return;
        }
        nlohmann::ordered_json object = nlohmann::ordered_json::object();
        for (std::size_t position = 0; position < values.size(); ++position) {
          object[header[position].name] = json_value(header[position].kind, values[position]);
        }
        out << object.dump() << '\n';
      });
}

}  // namespace carb
