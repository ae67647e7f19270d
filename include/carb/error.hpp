// carb's one error type for environment and input failures, and the check macro for bugs.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

namespace carb {

/// What kind of failure an Error is; decides the CLI's exit code (input: 2, runtime: 1).
enum class ErrorCategory {
  kUsage,    ///< bad command line
  kInput,    ///< bad spec, key, budget, table or model file
  kRuntime,  ///< environment failure: I/O, database, driver, library
};

/// A failure the user can act on. `what()` says what is wrong in the library's own terms: it
/// names options by their field or parameter names, never by a command-line flag.
///
/// `subject()` is the machine-readable name of the input at fault (an options field or a
/// parameter, e.g. "shard", "coverage", "device"), empty when the error is about no one input.
/// A message with a subject begins with the subject's name where that reads naturally
/// ("shard 4/4: needs 0 <= K < N"); a front end that set the input from a flag of its own
/// (the CLI) shows the flag in its place, or before the message when it does not begin so.
class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& message, std::string subject = {})
      : std::runtime_error(message), category_(category), subject_(std::move(subject)) {}

  ErrorCategory category() const { return category_; }
  /// The name of the input this error is about (an options field or parameter), or empty.
  const std::string& subject() const { return subject_; }
  /// The process exit code for this error: 2 for usage and input, 1 for runtime.
  int exit_code() const { return category_ == ErrorCategory::kRuntime ? 1 : 2; }

 private:
  ErrorCategory category_;
  std::string subject_;
};

/// Builds an input Error located at `file:line:column` (1-based; line 0 means "whole file").
inline Error input_error_at(const std::string& file, int line, int column,
                            const std::string& message) {
  std::string where = file;
  if (line > 0) {
    where += ":" + std::to_string(line) + ":" + std::to_string(column);
  }
  return Error(ErrorCategory::kInput, where + ": " + message);
}

}  // namespace carb

/// Aborts with file:line and a message when an internal invariant is broken (a bug, not bad input).
#define CARB_CHECK(condition, message)                                                     \
  do {                                                                                     \
    if (!(condition)) {                                                                    \
      std::fprintf(stderr, "carb: internal error at %s:%d: %s (%s)\n", __FILE__, __LINE__, \
                   #condition, std::string(message).c_str());                              \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)
