// Fuzzes the CSV table reader (carb fit --table): any text either parses or throws carb::Error
// with file:line:column; a parsed table has one line number per row and rows no wider than
// RFC 4180 allows them to be read.
#include "carb/error.hpp"
#include "carb/model.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const carb::CsvTable table = carb::parse_csv(carb_fuzz::text_of(data, size), "fuzz.csv");
    carb_fuzz::require(table.rows.size() == table.lines.size(), "a row without its line");
    for (std::size_t row = 0; row < table.rows.size(); ++row) {
      carb_fuzz::require(table.lines[row] >= 1, "row on line " + std::to_string(table.lines[row]));
    }
    if (!table.header.empty()) table.column(table.header.front());
  } catch (const carb::Error&) {
  }
  return 0;
}
