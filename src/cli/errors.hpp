// The command line's words for a library error: the flag that set the input the error is about.
#pragma once

#include <string>
#include <string_view>

#include "carb/error.hpp"

namespace carb::cli {

/// The flag that sets the library input named `subject` (an options field or parameter, as in
/// carb::Error::subject()), e.g. "--shard" for "shard"; empty when no flag sets it.
std::string flag_of(std::string_view subject);

/// The one line the command line prints for `error` (without "carb: error: "): the library's
/// message with the flag in place of the subject's name when the message begins with it
/// ("shard 4/4: ..." becomes "--shard 4/4: ..."), or the flag before it ("--mpi: ...").
std::string error_message(const Error& error);

}  // namespace carb::cli
