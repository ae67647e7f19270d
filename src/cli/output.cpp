#include "output.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <ostream>
#include <type_traits>

#include "carb/csv.hpp"
#include "carb/error.hpp"

namespace carb::cli {

Format parse_format(const std::string& text) {
  if (text == "table") return Format::kTable;
  if (text == "csv") return Format::kCsv;
  if (text == "json") return Format::kJson;
  throw Error(ErrorCategory::kUsage, "--format '" + text + "': expected table, csv or json");
}

std::string cell_text(const Cell& cell) {
  if (const auto* text = std::get_if<std::string>(&cell)) return *text;
  if (const auto* integer = std::get_if<std::int64_t>(&cell)) return std::to_string(*integer);
  if (const auto* flag = std::get_if<bool>(&cell)) return *flag ? "true" : "false";
  if (std::holds_alternative<std::monostate>(cell)) return {};
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, std::get<double>(cell),
                                 std::chars_format::general, 6);
  CARB_CHECK(ec == std::errc(), "to_chars failed");
  return std::string(buffer, end);
}

namespace {

// The command line's CSV has always quoted on a separator, a quote or a line feed only.
class CsvRowWriter : public RowWriter {
 public:
  CsvRowWriter(const std::vector<std::string>& columns, std::ostream& out)
      : out_(out), csv_(out, CsvQuoting::kCommaQuoteNewline) {
    csv_.record(columns);
  }
  void row(const std::vector<Cell>& cells) override {
    for (const Cell& cell : cells) csv_.field(cell_text(cell));
    csv_.end_record();
  }
  void finish() override { out_.flush(); }

 private:
  std::ostream& out_;
  CsvWriter csv_;
};

class JsonWriter : public RowWriter {
 public:
  JsonWriter(std::vector<std::string> columns, std::ostream& out)
      : columns_(std::move(columns)), out_(out) {}
  void row(const std::vector<Cell>& cells) override {
    nlohmann::ordered_json object;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::visit(
          [&](const auto& value) {
            if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::monostate>) {
              object[columns_[i]] = nullptr;
            } else {
              object[columns_[i]] = value;
            }
          },
          cells[i]);
    }
    out_ << (first_ ? "[\n  " : ",\n  ") << object.dump();
    first_ = false;
  }
  void finish() override { out_ << (first_ ? "[]\n" : "\n]\n") << std::flush; }

 private:
  std::vector<std::string> columns_;
  std::ostream& out_;
  bool first_ = true;
};

// Column widths come from the header and the first rows; later rows stream with those widths.
class TableWriter : public RowWriter {
 public:
  TableWriter(std::vector<std::string> columns, std::ostream& out)
      : columns_(std::move(columns)), out_(out) {}
  void row(const std::vector<Cell>& cells) override {
    std::vector<std::string> texts;
    texts.reserve(cells.size());
    for (const Cell& cell : cells) texts.push_back(cell_text(cell));
    if (!flushed_) {
      pending_.push_back(std::move(texts));
      if (pending_.size() >= kBufferedRows) flush();
    } else {
      print(texts);
    }
  }
  void finish() override {
    if (!flushed_) flush();
    out_ << std::flush;
  }

 private:
  static constexpr std::size_t kBufferedRows = 500;

  void flush() {
    widths_.assign(columns_.size(), 0);
    for (std::size_t i = 0; i < columns_.size(); ++i) widths_[i] = columns_[i].size();
    for (const auto& texts : pending_) {
      for (std::size_t i = 0; i < texts.size(); ++i)
        widths_[i] = std::max(widths_[i], texts[i].size());
    }
    print(columns_);
    for (const auto& texts : pending_) print(texts);
    pending_.clear();
    flushed_ = true;
  }

  void print(const std::vector<std::string>& texts) {
    std::string line;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (i > 0) line += "  ";
      const std::string& text = texts[i];
      const std::size_t pad = widths_[i] > text.size() ? widths_[i] - text.size() : 0;
      const bool numeric =
          !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-');
      line += numeric ? std::string(pad, ' ') + text : text + std::string(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out_ << line << '\n';
  }

  std::vector<std::string> columns_;
  std::ostream& out_;
  std::vector<std::vector<std::string>> pending_;
  std::vector<std::size_t> widths_;
  bool flushed_ = false;
};

}  // namespace

std::unique_ptr<RowWriter> make_row_writer(Format format, std::vector<std::string> columns,
                                           std::ostream& out) {
  switch (format) {
    case Format::kCsv:
      return std::make_unique<CsvRowWriter>(columns, out);
    case Format::kJson:
      return std::make_unique<JsonWriter>(std::move(columns), out);
    case Format::kTable:
      break;
  }
  return std::make_unique<TableWriter>(std::move(columns), out);
}

}  // namespace carb::cli
