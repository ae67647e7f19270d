// SQLite plumbing for the store: owning handles, the one check macro, statements with named
// parameters, and transactions that roll back unless committed.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace carb::store {

/// Closes a connection (sqlite3_close_v2 also finalises anything left behind).
struct DatabaseDeleter {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
/// Finalises a prepared statement.
struct StatementDeleter {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using DatabasePtr = std::unique_ptr<sqlite3, DatabaseDeleter>;
using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

/// Returns `status` when it is SQLITE_OK, SQLITE_ROW or SQLITE_DONE; otherwise throws
/// carb::Error (runtime) naming the call, the place, the database file and SQLite's message.
int check_sqlite(int status, sqlite3* db, const char* call, const char* file, int line);

}  // namespace carb::store

/// Runs an SQLite call on connection `db` and turns a failure status into carb::Error.
#define CARB_SQLITE(db, call) ::carb::store::check_sqlite((call), (db), #call, __FILE__, __LINE__)

namespace carb::store {

/// Where a call was made. Used as a default argument filled with the caller's file and line by
/// GCC's and Clang's builtins, which, unlike std::source_location, clang-tidy 14 also parses.
struct CallSite {
  const char* file;
  int line;
};

/// Executes SQL that returns no rows (one or more statements). Failures name the caller's place.
void execute(sqlite3* db, const std::string& sql,
             CallSite where = {__builtin_FILE(), __builtin_LINE()});

/// A prepared statement with named parameters (":name") and columns read by name. Failures to
/// prepare, step or run it name the caller's place, where the statement's purpose is visible.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql,
            CallSite where = {__builtin_FILE(), __builtin_LINE()});

  /// Binds a value to parameter ":name"; nullopt binds NULL.
  Statement& bind(const char* name, std::int64_t value);
  Statement& bind(const char* name, double value);
  Statement& bind(const char* name, std::string_view value);
  Statement& bind(const char* name, const std::string& value) {
    return bind(name, std::string_view(value));
  }
  Statement& bind(const char* name, std::optional<std::int64_t> value);
  Statement& bind(const char* name, std::optional<double> value);
  Statement& bind(const char* name, const std::optional<std::string>& value);

  /// Advances to the next row: true while there is one.
  bool step(CallSite where = {__builtin_FILE(), __builtin_LINE()});
  /// Runs a statement that returns no rows, then resets it for reuse.
  void run(CallSite where = {__builtin_FILE(), __builtin_LINE()});
  /// Resets the statement and clears its bindings.
  void reset();

  int column_count() const;
  /// The index of a result column; a missing name is a bug (CARB_CHECK).
  int column(std::string_view name) const;
  bool is_null(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;
  std::string text(std::string_view name) const;
  std::optional<std::int64_t> optional_integer(std::string_view name) const;
  std::optional<double> optional_real(std::string_view name) const;
  std::optional<std::string> optional_text(std::string_view name) const;

  sqlite3_stmt* get() const { return statement_.get(); }

 private:
  int parameter(const char* name) const;

  sqlite3* db_;
  StatementPtr statement_;
};

/// A transaction: BEGIN IMMEDIATE for writers (takes the write lock up front, so the busy
/// timeout applies and a read never has to be upgraded), BEGIN DEFERRED for readers. Rolls back
/// on destruction unless committed.
class Transaction {
 public:
  enum class Mode { kRead, kWrite };
  Transaction(sqlite3* db, Mode mode, CallSite where = {__builtin_FILE(), __builtin_LINE()});
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit(CallSite where = {__builtin_FILE(), __builtin_LINE()});

 private:
  sqlite3* db_;
  bool open_ = true;
};

}  // namespace carb::store
