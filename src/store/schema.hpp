// The store's schema as a list of migrations, and the code that opens a database file, checks
// that it is a carb database of a version this build understands, and migrates it forward.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sqlite.hpp"

namespace carb::store {

/// migrations()[i] upgrades schema version i to i + 1. A released step is never edited; a
/// schema change appends a step, and Store::kSchemaVersion is the number of steps. A step adds
/// the measured columns (columns.hpp) whose since_version is i + 1 after its written-out SQL.
const std::vector<std::string>& migrations();

/// Applies the steps from version `from` to `to`, inside the caller's write transaction, and
/// sets PRAGMA user_version (and the application id when starting from 0). When it ran a step
/// to Store::kSchemaVersion it recreates measurement_view from the column list.
void migrate(sqlite3* db, int from, int to);

/// Opens `path`, sets the connection up (busy timeout, WAL, synchronous, foreign keys) and
/// brings its schema to Store::kSchemaVersion in one transaction. Throws carb::Error (input)
/// for a missing file (unless `create`), a file that is not a carb database, or a newer schema.
DatabasePtr open_database(const std::string& path, bool create);

}  // namespace carb::store
