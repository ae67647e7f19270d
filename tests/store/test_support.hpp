// Shared fixtures of the store tests: a scratch directory, a store with the test campaign and
// device, and raw SQLite queries for checking what is on disk.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "carb/error.hpp"
#include "carb/store.hpp"
#include "writer/fake_measurements.hpp"

namespace carb::store_test {

/// A directory under the system's temp dir, removed with everything in it at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "carb-store-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// A raw connection for inspecting a database behind the store's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      throw std::runtime_error("cannot open " + path);
    }
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void exec(const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      const std::string text = message ? message : "?";
      sqlite3_free(message);
      throw std::runtime_error(sql + ": " + text);
    }
  }
  /// The first column of the first row, as text ("" for NULL or no row).
  std::string text(const std::string& sql) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    }
    std::string result;
    if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0) != nullptr) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
    return result;
  }
  long long integer(const std::string& sql) { return std::stoll(text(sql)); }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

/// A fresh store holding the test campaign and device.
struct StoreFixture : ::testing::Test {
  ScratchDir dir;
  std::string path = dir.file("carb.db");
  Store store = Store::create_or_open(path);
  std::int64_t campaign_id = 0;

  void SetUp() override { campaign_id = ensure_test_campaign(store, "unit"); }
};

/// The message of the carb::Error that `action` throws, checking its category.
template <typename Action>
std::string error_of(Action action, ErrorCategory category) {
  try {
    action();
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), category) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no carb::Error";
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `sql` with every "{clock}" replaced by `clock`.
inline std::string for_clock(std::string sql, const std::string& clock) {
  for (auto at = sql.find("{clock}"); at != std::string::npos; at = sql.find("{clock}", at)) {
    sql.replace(at, 7, clock);
  }
  return sql;
}

/// Everything that must hold of a carb database whenever a writer stopped, however it stopped:
/// integrity, foreign keys, one row per key, every row with exactly its samples, at most one
/// claim per (dead) writer.
inline void expect_consistent(const std::string& path) {
  if (!std::filesystem::exists(path)) return;  // killed before it created the file
  RawDb raw(path);
  ASSERT_EQ(raw.text("PRAGMA integrity_check"), "ok");
  if (raw.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'measurements'") == 0) {
    // Killed before the schema committed: the file holds nothing, not half a schema.
    EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_schema"), 0);
    return;
  }
  EXPECT_EQ(raw.text("PRAGMA foreign_key_check"), "");
  EXPECT_EQ(raw.integer("SELECT count(*) - count(DISTINCT measurement_key) FROM measurements"), 0);
  // Each row has exactly its samples, numbered 0..count-1, per clock.
  for (const std::string clock : {"wall", "device"}) {
    EXPECT_EQ(raw.integer(for_clock("SELECT count(*) FROM measurements m WHERE "
                                    "coalesce({clock}_count, 0) <> (SELECT count(*) FROM samples "
                                    "s WHERE s.measurement_id = m.id AND s.clock = '{clock}')",
                                    clock)),
              0)
        << clock;
    EXPECT_EQ(raw.integer(for_clock("SELECT count(*) FROM measurements m WHERE {clock}_count IS "
                                    "NOT NULL AND {clock}_count - 1 <> (SELECT max(sequence) "
                                    "FROM samples s WHERE s.measurement_id = m.id AND s.clock = "
                                    "'{clock}')",
                                    clock)),
              0)
        << clock;
  }
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples WHERE measurement_id NOT IN "
                        "(SELECT id FROM measurements)"),
            0);
  // At most the configuration in flight is lost: each killed writer left at most one claim.
  EXPECT_EQ(raw.integer("SELECT count(*) - count(DISTINCT owner_pid) FROM claims"), 0);
}

}  // namespace carb::store_test
