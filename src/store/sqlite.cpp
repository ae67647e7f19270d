// SQLite plumbing for the store.
#include "sqlite.hpp"

#include <sys/resource.h>

#include <cstring>

#include "carb/error.hpp"

namespace carb::store {

int check_sqlite(int status, sqlite3* db, const char* call, const char* file, int line) {
  if (status == SQLITE_OK || status == SQLITE_ROW || status == SQLITE_DONE) return status;
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line);
  const char* filename = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  if (filename != nullptr && *filename != '\0') message += " on " + std::string(filename);
  // sqlite3_errmsg describes the connection's latest failure, which is this call's.
  const char* library_message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(status);
  message += ": " + std::string(library_message) + " (SQLite code " + std::to_string(status) + ")";
  // A failed write says why: the system's words where SQLite kept them ("No space left on
  // device", "File too large"), and a file size limit (ulimit -f, a batch system's
  // RLIMIT_FSIZE) when one is set, since past it writes fail while the disk has room.
  if (status == SQLITE_FULL || (status & 0xff) == SQLITE_IOERR) {
    const int system_errno = db != nullptr ? sqlite3_system_errno(db) : 0;
    if (system_errno != 0) message += ": " + std::string(std::strerror(system_errno));
    rlimit limit{};
    if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      message += "; this process may write files of at most " + std::to_string(limit.rlim_cur) +
                 " bytes (ulimit -f)";
    }
  }
  throw Error(ErrorCategory::kRuntime, message);
}

namespace {

// The start of an SQL text on one line, to name the call in an error message.
std::string sql_call(const char* function, std::string_view sql) {
  constexpr std::size_t kShown = 60;
  std::string text;
  for (char c : sql) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (text.empty() || text.back() == ' ')) continue;
    if (text.size() == kShown) {
      text += "...";
      break;
    }
    text += space ? ' ' : c;
  }
  return std::string(function) + "(\"" + text + "\")";
}

}  // namespace

void execute(sqlite3* db, const std::string& sql, CallSite where) {
  check_sqlite(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), db,
               sql_call("sqlite3_exec", sql).c_str(), where.file, where.line);
}

Statement::Statement(sqlite3* db, std::string_view sql, CallSite where) : db_(db) {
  sqlite3_stmt* raw = nullptr;
  const int status =
      sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  statement_.reset(raw);
  check_sqlite(status, db, sql_call("sqlite3_prepare_v2", sql).c_str(), where.file, where.line);
}

int Statement::parameter(const char* name) const {
  const int index = sqlite3_bind_parameter_index(statement_.get(), name);
  CARB_CHECK(index > 0, std::string("no SQL parameter ") + name);
  return index;
}

Statement& Statement::bind(const char* name, std::int64_t value) {
  CARB_SQLITE(db_, sqlite3_bind_int64(statement_.get(), parameter(name), value));
  return *this;
}

Statement& Statement::bind(const char* name, double value) {
  CARB_SQLITE(db_, sqlite3_bind_double(statement_.get(), parameter(name), value));
  return *this;
}

Statement& Statement::bind(const char* name, std::string_view value) {
  // A default-constructed view has no data pointer, which SQLite would bind as NULL, not ''.
  if (value.data() == nullptr) value = "";
  CARB_SQLITE(db_, sqlite3_bind_text64(statement_.get(), parameter(name), value.data(),
                                       value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

Statement& Statement::bind(const char* name, std::optional<std::int64_t> value) {
  if (value) return bind(name, *value);
  CARB_SQLITE(db_, sqlite3_bind_null(statement_.get(), parameter(name)));
  return *this;
}

Statement& Statement::bind(const char* name, std::optional<double> value) {
  if (value) return bind(name, *value);
  CARB_SQLITE(db_, sqlite3_bind_null(statement_.get(), parameter(name)));
  return *this;
}

Statement& Statement::bind(const char* name, const std::optional<std::string>& value) {
  if (value) return bind(name, std::string_view(*value));
  CARB_SQLITE(db_, sqlite3_bind_null(statement_.get(), parameter(name)));
  return *this;
}

bool Statement::step(CallSite where) {
  const int status = sqlite3_step(statement_.get());
  if (status == SQLITE_ROW) return true;
  if (status == SQLITE_DONE) return false;
  check_sqlite(status, db_, sql_call("sqlite3_step", sqlite3_sql(statement_.get())).c_str(),
               where.file, where.line);
  return false;
}

void Statement::run(CallSite where) {
  while (step(where)) {
  }
  reset();
}

void Statement::reset() {
  // sqlite3_reset repeats the last step's error, which step() has already reported.
  sqlite3_reset(statement_.get());
  sqlite3_clear_bindings(statement_.get());
}

int Statement::column_count() const { return sqlite3_column_count(statement_.get()); }

int Statement::column(std::string_view name) const {
  const int count = column_count();
  for (int index = 0; index < count; ++index) {
    if (name == sqlite3_column_name(statement_.get(), index)) return index;
  }
  CARB_CHECK(false, "no SQL result column " + std::string(name));
  return -1;
}

bool Statement::is_null(std::string_view name) const {
  return sqlite3_column_type(statement_.get(), column(name)) == SQLITE_NULL;
}

std::int64_t Statement::integer(std::string_view name) const {
  return sqlite3_column_int64(statement_.get(), column(name));
}

double Statement::real(std::string_view name) const {
  return sqlite3_column_double(statement_.get(), column(name));
}

std::string Statement::text(std::string_view name) const {
  const int index = column(name);
  const auto* bytes = sqlite3_column_text(statement_.get(), index);
  if (bytes == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(bytes),
                     static_cast<std::size_t>(sqlite3_column_bytes(statement_.get(), index)));
}

std::optional<std::int64_t> Statement::optional_integer(std::string_view name) const {
  if (is_null(name)) return std::nullopt;
  return integer(name);
}

std::optional<double> Statement::optional_real(std::string_view name) const {
  if (is_null(name)) return std::nullopt;
  return real(name);
}

std::optional<std::string> Statement::optional_text(std::string_view name) const {
  if (is_null(name)) return std::nullopt;
  return text(name);
}

Transaction::Transaction(sqlite3* db, Mode mode, CallSite where) : db_(db) {
  execute(db_, mode == Mode::kWrite ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED", where);
}

Transaction::~Transaction() {
  // Rolling back can only fail when SQLite already rolled back by itself; nothing to report.
  if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit(CallSite where) {
  execute(db_, "COMMIT", where);
  open_ = false;
}

}  // namespace carb::store
