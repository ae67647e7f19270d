// The measured columns of the measurements table, listed once. The INSERT and the
// row-to-record mapping of Store::write_measurement and find_measurement, measurement_view (and
// so `carb export`), JSON's booleans, and the migration step of a column added after the
// historical schema are all generated from this list (docs/extending.md, "A measured column").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "carb/store.hpp"
#include "sqlite.hpp"

namespace carb::store {

/// How a column is stored. kBoolean is an INTEGER holding 0 or 1 that JSON shows as a boolean.
enum class ColumnType { kInteger, kReal, kText, kBoolean };

/// One value of a column: NULL, an integer, a real or text.
using Value = std::variant<std::monostate, std::int64_t, double, std::string>;

/// One measured column of the measurements table.
struct Column {
  std::string_view name;
  ColumnType type;
  std::string_view check;  ///< the CHECK expression, or empty for none; NULL always passes
  /// The schema version that first has the column. Versions up to kHistoricalVersion were
  /// written out by hand (schema.cpp) and are never regenerated; a later column's step,
  /// `ALTER TABLE measurements ADD COLUMN`, is generated from this entry.
  int since_version;
  Value (*get)(const MeasurementRecord& record);         ///< monostate for NULL
  void (*set)(MeasurementRecord& record, const Value& value);  ///< leaves NULL absent
};

/// The last schema version whose steps are written out in schema.cpp.
inline constexpr int kHistoricalVersion = 6;

/// The measured columns, in the order of measurement_view (and so of `carb export`). In the
/// table, those of version 1 sit between finished_at and provenance; later ones follow protocol,
/// in the order they were added.
std::span<const Column> measurement_columns();

/// The measurements table's columns before the measured ones (after `id`), in table order:
/// the store fills them itself (keys, status, attempts, timestamps).
std::span<const std::string_view> measurement_leading_columns();
/// The measurements table's version-1 columns after the measured ones, in table order.
std::span<const std::string_view> measurement_trailing_columns();

/// "INTEGER", "REAL" or "TEXT".
std::string_view sql_type(ColumnType type);
/// The column's definition as in CREATE TABLE: "name TYPE" and " CHECK (expression)" if any.
std::string column_definition(const Column& column);

/// The `ALTER TABLE measurements ADD COLUMN` statements for the columns of `version` (none for
/// versions up to kHistoricalVersion: their steps are written out).
std::string added_columns_sql(std::span<const Column> columns, int version);
/// Drops measurement_view if it exists and creates it with `columns` as its measured columns.
std::string measurement_view_sql(std::span<const Column> columns);
/// The INSERT of one measurement: the leading columns, `columns` and the trailing ones, each
/// bound to the parameter ":" + its name.
std::string insert_measurement_sql(std::span<const Column> columns);

/// Binds every column of `columns` from `record` to its parameter.
void bind_columns(Statement& statement, std::span<const Column> columns,
                  const MeasurementRecord& record);
/// Reads every column of `columns` from the current row (by name) into `record`.
void read_columns(const Statement& row, std::span<const Column> columns, MeasurementRecord& record);

/// Whether `name` is a kBoolean column of measurement_columns().
bool is_boolean_column(std::string_view name);

}  // namespace carb::store
