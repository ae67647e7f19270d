// The state behind carb::Store, shared by the files that implement it.
#pragma once

#include <string>
#include <vector>

#include "carb/store.hpp"
#include "sqlite.hpp"

namespace carb {

/// One connection to one database file.
struct Store::Impl {
  store::DatabasePtr db;
  std::string path;
  std::string host;  ///< this machine's name, to judge which claims' pids can be checked here
};

namespace store {

/// ISO 8601 UTC with milliseconds, e.g. "2025-01-31T12:00:00.250Z": sorts as text in time order.
std::string format_timestamp(Timestamp time);
/// Parses format_timestamp()'s text; throws carb::Error (runtime) on anything else.
Timestamp parse_timestamp(const std::string& text);
/// The `status` column of a row (measurements, drift probes); the schema's CHECK admits no
/// other values.
MeasurementStatus read_status(const Statement& row);

}  // namespace store
}  // namespace carb
