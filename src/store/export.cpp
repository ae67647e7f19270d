// Export of measurements joined with configuration knobs and analytic features, as CSV or JSON
// Lines, streamed row by row so an export never holds the database in memory.
#include <algorithm>
#include <array>
#include <charconv>
#include <nlohmann/json.hpp>
#include <ostream>

#include <map>

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

// One output value: NULL, an integer, a real or text; features join the row as numbers.
struct Cell {
  int type = SQLITE_NULL;
  std::int64_t integer = 0;
  double real = 0;
  std::string text;
};

Cell read_cell(const Statement& row, int column) {
  sqlite3_stmt* statement = row.get();
  Cell cell;
  cell.type = sqlite3_column_type(statement, column);
  if (cell.type == SQLITE_INTEGER) cell.integer = sqlite3_column_int64(statement, column);
  if (cell.type == SQLITE_FLOAT) cell.real = sqlite3_column_double(statement, column);
  if (cell.type == SQLITE_TEXT) {
    cell.text.assign(reinterpret_cast<const char*>(sqlite3_column_text(statement, column)),
                     static_cast<std::size_t>(sqlite3_column_bytes(statement, column)));
  }
  return cell;
}

std::array<Cell, kScalarFeatures.size()> feature_cells(const Features& features) {
  std::array<Cell, kScalarFeatures.size()> cells;
  for (std::size_t index = 0; index < kScalarFeatures.size(); ++index) {
    const ScalarFeature& feature = kScalarFeatures[index];
    if (feature.integer != nullptr) {
      cells[index].type = SQLITE_INTEGER;
      cells[index].integer = features.*feature.integer;
    } else {
      cells[index].type = SQLITE_FLOAT;
      cells[index].real = features.*feature.real;
    }
  }
  return cells;
}

// Shortest text that reads back to the same number, so an export loses nothing.
template <typename Number>
void write_number(CsvWriter& csv, Number value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  csv.field(std::string_view(text, static_cast<std::size_t>(result.ptr - text)));
}

void write_csv_field(CsvWriter& csv, const Cell& cell) {
  switch (cell.type) {
    case SQLITE_INTEGER:
      write_number(csv, cell.integer);
      return;
    case SQLITE_FLOAT:
      write_number(csv, cell.real);
      return;
    case SQLITE_TEXT:
      csv.field(cell.text);
      return;
    default:
      csv.field("");  // NULL is an empty field, never 0
      return;
  }
}

nlohmann::ordered_json json_value(const std::string& column, const Cell& cell) {
  switch (cell.type) {
    case SQLITE_INTEGER:
      // Columns holding 0/1 that JSON shows as booleans: a knob and the list's kBoolean ones.
      if (column == "early_downsample" || store::is_boolean_column(column)) return cell.integer != 0;
      return cell.integer;
    case SQLITE_FLOAT:
      return cell.real;
    case SQLITE_TEXT:
      if (std::ranges::find(kJsonColumns, column) != kJsonColumns.end())
        return nlohmann::ordered_json::parse(cell.text);
      return cell.text;
    default:
      return nullptr;
  }
}

}  // namespace

std::int64_t Store::export_measurements(std::ostream& out, ExportFormat format,
                                        bool ok_only) const {
  sqlite3* db = impl_->db.get();
  store::Transaction transaction(db, store::Transaction::Mode::kRead);
  Statement rows(db, std::string("SELECT * FROM measurement_view") +
                         (ok_only ? " WHERE status = 'ok'" : "") +
                         " ORDER BY configuration_key, measurement_key");
  std::vector<std::string> columns;
  int knob_end = 0;
  for (int column = 0; column < rows.column_count(); ++column) {
    columns.emplace_back(sqlite3_column_name(rows.get(), column));
    if (columns.back() == kLastKnobColumn) knob_end = column + 1;
  }
  CARB_CHECK(knob_end > 0, "measurement_view lacks the knob columns");

  const auto name_at = [&](std::size_t position) -> std::string {
    const auto knobs = static_cast<std::size_t>(knob_end);
    if (position < knobs) return columns[position];
    if (position < knobs + kScalarFeatures.size()) {
      return std::string(kScalarFeatures[position - knobs].name);
    }
    return columns[position - kScalarFeatures.size()];
  };
  // Last, the drift probe's latency at the middle of each measurement (docs/measurement.md,
  // "Drift probes"), from its device's probes; NULL where none lies near enough.
  const std::size_t width = columns.size() + kScalarFeatures.size() + 1;
  const auto base_name_at = name_at;
  const auto name_of = [&](std::size_t position) -> std::string {
    return position + 1 == width ? std::string("drift_probe_ms") : base_name_at(position);
  };
  std::map<std::string, DriftCurve> curves;
  const int device_column = rows.column("device_fingerprint");
  const int started_column = rows.column("started_at");
  const int finished_column = rows.column("finished_at");
  CsvWriter csv(out, CsvQuoting::kRfc4180);
  if (format == ExportFormat::kCsv) {
    for (std::size_t position = 0; position < width; ++position) csv.field(name_of(position));
    csv.end_record();
  }

  // Features depend on the configuration only, and rows come grouped by configuration, so the
  // last configuration's features are all there is to keep.
  std::string features_key;
  Features features;
  const int key_column = rows.column("configuration_key");
  std::int64_t written = 0;
  while (rows.step()) {
    std::vector<Cell> cells;
    cells.reserve(width);
    for (int column = 0; column < static_cast<int>(columns.size()); ++column) {
      cells.push_back(read_cell(rows, column));
    }
    const std::string& key = cells[static_cast<std::size_t>(key_column)].text;
    if (written == 0 || key != features_key) {
      features = compute_features(build_network(parse_key(key)));
      features_key = key;
    }
    const auto feature_row = feature_cells(features);
    const std::string& device = cells[static_cast<std::size_t>(device_column)].text;
    auto curve = curves.find(device);
    if (curve == curves.end()) curve = curves.emplace(device, drift_curve(drift_probes(device))).first;
    const Timestamp started =
        store::parse_timestamp(cells[static_cast<std::size_t>(started_column)].text);
    const Timestamp finished =
        store::parse_timestamp(cells[static_cast<std::size_t>(finished_column)].text);
    Cell probe;
    probe.type = SQLITE_NULL;
    if (const auto factor = curve->second.factor_at(started + (finished - started) / 2)) {
      probe.type = SQLITE_FLOAT;
      probe.real = *factor * curve->second.reference_ms;
    }
    cells.insert(cells.begin() + knob_end, feature_row.begin(), feature_row.end());
    cells.push_back(probe);

    if (format == ExportFormat::kCsv) {
      for (std::size_t position = 0; position < width; ++position) {
        write_csv_field(csv, cells[position]);
      }
      csv.end_record();
    } else {
      nlohmann::ordered_json object = nlohmann::ordered_json::object();
      for (std::size_t position = 0; position < width; ++position) {
        const std::string name = name_of(position);
        object[name] = json_value(name, cells[position]);
      }
      out << object.dump() << '\n';
    }
    ++written;
  }
  transaction.commit();
  return written;
}

}  // namespace carb
