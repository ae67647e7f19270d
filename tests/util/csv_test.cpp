// The one CSV writer (carb/csv.hpp): when a field is quoted, and how.
#include "carb/csv.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace carb {
namespace {

TEST(Csv, PlainFieldsGoBareSeparatedByCommas) {
  std::ostringstream out;
  CsvWriter csv(out);
  csv.record(std::vector<std::string>{"a", "1.5", "", "x y"});
  csv.field("second");
  csv.field("record");
  csv.end_record();
  EXPECT_EQ(out.str(), "a,1.5,,x y\nsecond,record\n");
}

TEST(Csv, Rfc4180QuotesSeparatorsQuotesAndLineBreaks) {
  std::ostringstream out;
  CsvWriter csv(out, CsvQuoting::kRfc4180);
  csv.record(std::vector<std::string>{"b,c", "say \"hi\"", "two\nlines", "cr\rhere", "\""});
  EXPECT_EQ(out.str(), "\"b,c\",\"say \"\"hi\"\"\",\"two\nlines\",\"cr\rhere\",\"\"\"\"\n");
}

TEST(Csv, CommaQuoteNewlineLeavesACarriageReturnBare) {
  std::ostringstream out;
  CsvWriter csv(out, CsvQuoting::kCommaQuoteNewline);
  csv.record(std::vector<std::string>{"cr\rhere", "b,c", "say \"hi\"", "two\nlines"});
  EXPECT_EQ(out.str(), "cr\rhere,\"b,c\",\"say \"\"hi\"\"\",\"two\nlines\"\n");
}

}  // namespace
}  // namespace carb
