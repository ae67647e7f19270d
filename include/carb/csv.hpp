// The one CSV writer: fields separated by commas, records ended by '\n', a field quoted (inner
// quotes doubled) only when it needs it. Header-only (module util): the store's export and the
// command line's tables both write through it.
#pragma once

#include <ostream>
#include <string_view>

namespace carb {

/// Which characters make a field need quotes.
enum class CsvQuoting {
  kRfc4180,            ///< a separator, a quote, a carriage return or a line feed (RFC 4180)
  kCommaQuoteNewline,  ///< a separator, a quote or a line feed; a carriage return goes bare
};

/// Writes CSV records to a stream one field at a time. It does not own the stream.
class CsvWriter {
 public:
  explicit CsvWriter(std::ostream& out, CsvQuoting quoting = CsvQuoting::kRfc4180)
      : out_(out), special_(quoting == CsvQuoting::kRfc4180 ? ",\"\r\n" : ",\"\n") {}

  /// Appends one field to the current record ("" is an empty field).
  void field(std::string_view text) {
    if (!first_) out_ << ',';
    first_ = false;
    if (text.find_first_of(special_) == std::string_view::npos) {
      out_ << text;
      return;
    }
    out_ << '"';
    for (char c : text) {
      if (c == '"') out_ << '"';
      out_ << c;
    }
    out_ << '"';
  }

  /// Ends the current record.
  void end_record() {
    out_ << '\n';
    first_ = true;
  }

  /// Writes `fields` (any range of things that convert to std::string_view) as one record.
  template <typename Fields>
  void record(const Fields& fields) {
    for (const auto& text : fields) field(text);
    end_record();
  }

 private:
  std::ostream& out_;
  std::string_view special_;
  bool first_ = true;
};

}  // namespace carb
