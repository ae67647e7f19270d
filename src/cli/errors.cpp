// The one table from library subjects to command-line flags.
#include "errors.hpp"

#include <array>
#include <cctype>
#include <utility>

namespace carb::cli {

namespace {

// Library input (the subject a library Error names) -> the flag that sets it. A library error
// with a subject missing here prints as the library wrote it.
constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kFlags = {{
    {"budget", "--budget"},                  // ScreenOptions::budget
    {"coverage", "--coverage"},              // FitOptions::coverage, TransferOptions::coverage
    {"databases", "--db"},                   // load_campaigns' paths
    {"device", "--device"},                  // dataset_from_store's device, find_device's name
    {"drift", "--drift"},                    // dataset_from_store's DriftMode
    {"features", "--features"},              // TableSpec::features
    {"keep", "--keep"},                      // ScreenOptions::keep
    {"maximize", "--maximize"},              // ScreenOptions::maximize
    {"mpi", "--mpi"},                        // run_mpi_campaign
    {"objectives", "--objectives"},          // ScreenOptions::objectives
    {"outside_domain", "--outside-domain"},  // ScreenOptions::outside_domain
    {"rank", "--rank"},                      // ScreenOptions::rank
    {"shard", "--shard"},                    // Shard::parse
    {"target", "--target"},                  // parse_table_target's text
    {"targets", "--target"},                 // TableSpec::targets
    {"value", "--value"},                    // ScreenOptions::value
}};

}  // namespace

std::string flag_of(std::string_view subject) {
  for (const auto& [name, flag] : kFlags) {
    if (name == subject) return std::string(flag);
  }
  return "";
}

std::string error_message(const Error& error) {
  std::string message = error.what();
  const std::string& subject = error.subject();
  const std::string flag = flag_of(subject);
  if (flag.empty()) return message;
  const bool begins_with_subject =
      message.starts_with(subject) &&
      (message.size() == subject.size() ||
       !(std::isalnum(static_cast<unsigned char>(message[subject.size()])) ||
         message[subject.size()] == '_'));
  return begins_with_subject ? flag + message.substr(subject.size()) : flag + ": " + message;
}

}  // namespace carb::cli
