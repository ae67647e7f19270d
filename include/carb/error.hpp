// carb's one error type for environment and input failures, and the check macro for bugs.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace carb {

/// What kind of failure an Error is; decides the CLI's exit code (input: 2, runtime: 1).
enum class ErrorCategory {
  kUsage,    ///< bad command line
  kInput,    ///< bad spec, key, budget, table or model file
  kRuntime,  ///< environment failure: I/O, database, driver, library
};

/// A failure the user can act on. `what()` is the one line the CLI prints.
class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& message)
      : std::runtime_error(message), category_(category) {}

  ErrorCategory category() const { return category_; }
  /// The process exit code for this error: 2 for usage and input, 1 for runtime.
  int exit_code() const { return category_ == ErrorCategory::kRuntime ? 1 : 2; }

 private:
  ErrorCategory category_;
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
