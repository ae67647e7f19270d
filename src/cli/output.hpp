// Tabular output for humans (aligned table) and tools (CSV, JSON), streamed row by row so a
// million-row listing never sits in memory.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace carb {
struct CampaignProgress;
}

namespace carb::cli {

/// One cell: text, an integer, a real number, a boolean, or nothing (kNull): a value that does
/// not exist, such as an imported network's ResNet knobs or an unavailable target's prediction.
/// JSON writes nothing as null; the table and CSV as an empty field.
using Cell = std::variant<std::string, std::int64_t, double, bool, std::monostate>;
inline constexpr std::monostate kNull{};

/// The cell of a value that may not exist: the value, or null.
template <typename T>
Cell or_null(const std::optional<T>& value) {
  if (!value) return Cell(kNull);
  return Cell(*value);
}

template <typename T>
Cell cell_of(T value);

/// The cell of a value that may not exist (an imported architecture's ResNet knob): null.
template <typename T>
Cell cell_of(std::optional<T> value) {
  return value ? cell_of(*value) : Cell(kNull);
}

/// The cell of a value as the writers print it: an enum (block, precision) by name, an int as
/// std::int64_t.
template <typename T>
Cell cell_of(T value) {
  if constexpr (std::is_enum_v<T>) {
    return std::string(to_string(value));
  } else if constexpr (std::is_same_v<T, int>) {
    return std::int64_t{value};
  } else {
    return value;
  }
}

enum class Format { kTable, kCsv, kJson };

/// Parses "table", "csv" or "json"; throws carb::Error (usage) otherwise.
Format parse_format(const std::string& text);

/// Writes rows with fixed columns in one format. Call finish() once at the end.
class RowWriter {
 public:
  virtual ~RowWriter() = default;
  virtual void row(const std::vector<Cell>& cells) = 0;
  virtual void finish() = 0;
};

std::unique_ptr<RowWriter> make_row_writer(Format format, std::vector<std::string> columns,
                                           std::ostream& out);

/// A cell's text as the table and CSV show it (reals with up to 6 significant digits).
std::string cell_text(const Cell& cell);

/// A campaign's progress on stderr: rewritten in place on a terminal, else every 50th line.
void print_progress(const CampaignProgress& progress, bool terminal);

}  // namespace carb::cli
