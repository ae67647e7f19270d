// The oneDNN check macro: a failing oneDNN call becomes a carb::Error (runtime) naming the call,
// the place and oneDNN's own message and status.
#pragma once

#include <oneapi/dnnl/dnnl_debug.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <new>
#include <string>

#include "carb/error.hpp"

namespace carb::cpu {

/// Runs `call` (a callable wrapping one oneDNN expression) and returns its result; turns the
/// dnnl::error the oneDNN C++ API throws for any non-success status into a carb::Error, except
/// out of memory, which becomes std::bad_alloc.
template <typename Call>
decltype(auto) dnnl_checked(Call&& call, const char* text, const char* file, int line) {
  try {
    return call();
  } catch (const dnnl::error& error) {
    // One type for out of memory everywhere, so callers map it to the `oom` outcome.
    if (error.status == dnnl_out_of_memory) throw std::bad_alloc();
    throw Error(ErrorCategory::kRuntime, std::string("oneDNN call ") + text + " failed at " + file +
                                             ":" + std::to_string(line) + ": " + error.what() +
                                             " (" + dnnl_status2str(error.status) + ")");
  }
}

}  // namespace carb::cpu

/// Evaluates one oneDNN expression, converting its failure into carb::Error (runtime).
/// Variadic so that expressions with commas (braced dimension lists) need no extra parentheses.
#define CARB_DNNL(...)                                                                     \
  ::carb::cpu::dnnl_checked([&]() -> decltype(auto) { return __VA_ARGS__; }, #__VA_ARGS__, \
                            __FILE__, __LINE__)
