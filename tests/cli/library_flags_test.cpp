// Library errors speak the library's terms; only the CLI names flags. Two halves: the CLI's one
// table (src/cli/errors.cpp) puts the flag into a library message, and a scan of every C++
// string literal outside src/cli fails when library code names a command-line flag again.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../../src/cli/errors.hpp"
#include "carb/error.hpp"
#include "run.hpp"

namespace carb {
namespace {

struct Literal {
  int line = 0;
  std::string text;  // the literal's contents, escapes as written
};

// The string literals of C++ source `text` (comments, character literals and raw strings
// and digit separators understood), except those on a line that says "flag-ok:" in a comment: an
// argument list carb builds for its own hidden verb is no message.
std::vector<Literal> string_literals(const std::string& text) {
  std::vector<Literal> literals;
  std::vector<bool> exempt_lines(1, false);
  {
    std::istringstream lines(text);
    std::string line;
    exempt_lines.clear();
    exempt_lines.push_back(false);  // lines count from 1
    while (std::getline(lines, line)) {
      exempt_lines.push_back(line.find("// flag-ok:") != std::string::npos);
    }
    exempt_lines.push_back(false);
  }
  int line = 1;
  const auto exempt = [&](int at) {
    return at < static_cast<int>(exempt_lines.size()) && exempt_lines[at];
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\n') {
      ++line;
    } else if (c == '/' && next == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      --i;
    } else if (c == '/' && next == '*') {
      for (i += 2; i + 1 < text.size() && !(text[i] == '*' && text[i + 1] == '/'); ++i) {
        if (text[i] == '\n') ++line;
      }
      ++i;
    } else if (c == '\'' && !(i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1])))) {
      for (++i; i < text.size() && text[i] != '\''; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == 'R' && next == '"') {
      const std::size_t open = text.find('(', i + 2);
      const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
      const std::size_t end = text.find(close, open);
      Literal literal{line, text.substr(open + 1, end - open - 1)};
      for (std::size_t k = i; k < end; ++k) line += text[k] == '\n' ? 1 : 0;
      if (!exempt(literal.line)) literals.push_back(literal);
      i = end + close.size() - 1;
    } else if (c == '"') {
      Literal literal{line, ""};
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i) {
        if (text[i] == '\\') literal.text += text[i++];
        literal.text += text[i];
      }
      if (!exempt(literal.line)) literals.push_back(literal);
    }
  }
  return literals;
}

// Whether a literal names a command-line flag: "--" then a letter.
bool names_a_flag(const std::string& literal) {
  for (std::size_t at = literal.find("--"); at != std::string::npos;
       at = literal.find("--", at + 1)) {
    if (at + 2 < literal.size() && std::isalpha(static_cast<unsigned char>(literal[at + 2])) &&
        (at == 0 || literal[at - 1] != '-')) {
      return true;
    }
  }
  return false;
}

TEST(LibraryFlags, TheScanFindsAFlagInAStringAndNotInAComment) {
  const std::string source =
      "// \"--shard\" in a comment\n"
      "/* \"--db\" in a block\n comment */\n"
      "char c = '\"'; int i = 3'000; --i;\n"
      "throw Error(k, \"shard \" + text + \": give --shard K/N\");\n"
      "auto raw = R\"x(a \"--raw\" one)x\";\n"
      "args.push_back(\"--device\");  // flag-ok: the worker's argument\n"
      "std::string s = \"a-b --- c\";\n";
  std::vector<std::string> flagged;
  for (const Literal& literal : string_literals(source)) {
    if (names_a_flag(literal.text)) flagged.push_back(std::to_string(literal.line));
  }
  EXPECT_EQ(flagged, (std::vector<std::string>{"5", "6"}));
}

TEST(LibraryFlags, NoLibraryStringNamesACommandLineFlag) {
  const std::filesystem::path root = CARB_SOURCE_DIR;
  std::vector<std::string> found;
  std::size_t files = 0;
  for (const char* top : {"src", "include"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / top)) {
      const std::filesystem::path& path = entry.path();
      const std::string relative = std::filesystem::relative(path, root).generic_string();
      const std::string extension = path.extension().string();
      if (!entry.is_regular_file() || relative.starts_with("src/cli/") ||
          (extension != ".cpp" && extension != ".hpp" && extension != ".h" && extension != ".cu" &&
           extension != ".cuh")) {
        continue;
      }
      ++files;
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      for (const Literal& literal : string_literals(text.str())) {
        if (names_a_flag(literal.text)) {
          found.push_back(relative + ":" + std::to_string(literal.line) + ": \"" + literal.text +
                          "\"");
        }
      }
    }
  }
  EXPECT_GT(files, 50U);  // the scan read the tree
  std::string list;
  for (const std::string& place : found) list += "\n  " + place;
  EXPECT_TRUE(found.empty())
      << "library strings that name a command-line flag (say what is wrong in the library's "
         "terms, give the Error a subject, and map it to the flag in src/cli/errors.cpp):"
      << list;
}

TEST(LibraryFlags, TheCliPutsTheFlagInPlaceOfTheSubject) {
  // The message begins with the subject: the flag takes its place.
  EXPECT_EQ(
      cli::error_message(Error(ErrorCategory::kUsage, "shard 4/4: needs 0 <= K < N", "shard")),
      "--shard 4/4: needs 0 <= K < N");
  EXPECT_EQ(cli::error_message(
                Error(ErrorCategory::kUsage, "targets: name at least one target", "targets")),
            "--target: name at least one target");
  // It does not: the flag goes before it.
  EXPECT_EQ(cli::error_message(Error(ErrorCategory::kUsage, "no measuring rank started", "mpi")),
            "--mpi: no measuring rank started");
  // A word that only begins with the subject is not the subject.
  EXPECT_EQ(cli::error_message(Error(ErrorCategory::kInput, "devices: 2", "device")),
            "--device: devices: 2");
  // No subject, or one no flag sets: the library's message as it is.
  EXPECT_EQ(cli::error_message(Error(ErrorCategory::kInput, "x.sqlite: not a carb database")),
            "x.sqlite: not a carb database");
  EXPECT_EQ(cli::error_message(Error(ErrorCategory::kInput, "alpha must be positive", "alpha")),
            "alpha must be positive");
  EXPECT_EQ(cli::flag_of("databases"), "--db");
  EXPECT_EQ(cli::flag_of(""), "");
}

TEST(LibraryFlags, TheCommandLineNamesTheFlagThatWasWrong) {
  using carb_test::run;
  const std::string dir = testing::TempDir();
  const std::string keys = dir + "library-flags-keys.txt";
  const std::string table = dir + "library-flags.csv";
  const std::string out = dir + "library-flags-model.json";
  std::ofstream(keys) << "basic18_w1_ds_r224_b1_fp32\n";
  std::string rows = "x,y\n";
  for (int i = 1; i <= 40; ++i) rows += std::to_string(i) + "," + std::to_string(2 * i) + "\n";
  std::ofstream(table) << rows;
  // (arguments, the one line carb prints): the library's subject shown as the flag.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"profile --keys " + keys + " --db " + dir + "library-flags.sqlite --shard 4/4",
       "--shard 4/4: needs 0 <= K < N (shards count from 0: 0/4 is the first of 4)"},
      {"fit --table " + table + " --features x --target y --coverage 1.5 -o " + out,
       "--coverage must be between 0 and 1 (exclusive)"},
      {"fit --table " + table + " --features x --target y= -o " + out,
       "--target 'y=': expected NAME=COLUMN or COLUMN"},
  };
  for (const auto& [arguments, line] : cases) {
    const carb_test::CommandResult result = run(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments;
    EXPECT_EQ(result.out, "carb: error: " + line + "\n") << arguments;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace carb
