// Opening files: fresh creation, the application id and version checks, and migration of an
// older schema in one transaction.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/store.hpp"
#include "schema.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using store_test::contains;
using store_test::error_of;
using store_test::RawDb;
using store_test::ScratchDir;

TEST(StoreSchema, CreatesAWalDatabaseWithCarbsIdAndVersion) {
  ScratchDir dir;
  const std::string path = dir.file("new.db");
  { Store store = Store::create_or_open(path); }
  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA application_id"), 0x43415242);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  for (const char* table : {"campaigns", "devices", "configurations", "measurements", "samples",
                            "claims", "measurement_conflicts"}) {
    EXPECT_EQ(raw.integer(std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'table' "
                                      "AND name = '") +
                          table + "'"),
              1)
        << table;
  }
  EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'measurement_view'"), 1);
  // Opening again finds it as it is.
  Store again = Store::open(path);
  EXPECT_EQ(again.integrity_check(), "ok");
}

TEST(StoreSchema, RefusesFilesThatAreNotCarbDatabases) {
  ScratchDir dir;
  const std::string text_file = dir.file("notes.txt");
  std::ofstream(text_file) << "these are not the rows you are looking for\n"
                           << std::string(600, '#');
  const std::string message =
      error_of([&] { Store::create_or_open(text_file); }, ErrorCategory::kInput);
  EXPECT_EQ(message, text_file + ": not a carb database (not an SQLite database file)");

  const std::string other = dir.file("other.db");
  {
    RawDb raw(other);
    raw.exec("CREATE TABLE people (name TEXT)");
  }
  EXPECT_EQ(error_of([&] { Store::create_or_open(other); }, ErrorCategory::kInput),
            other +
                ": not a carb database (SQLite application_id 0x00000000, carb's is "
                "0x43415242)");
  {
    RawDb raw(other);
    raw.exec("PRAGMA application_id = 1234");
  }
  EXPECT_TRUE(contains(error_of([&] { Store::open(other); }, ErrorCategory::kInput),
                       "application_id 0x000004d2"));
  // The foreign database is left exactly as it was.
  RawDb raw(other);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_schema"), 1);
}

TEST(StoreSchema, OpenNeedsAnExistingDatabase) {
  ScratchDir dir;
  const std::string missing = dir.file("missing.db");
  EXPECT_TRUE(contains(error_of([&] { Store::open(missing); }, ErrorCategory::kInput),
                       "cannot open carb database " + missing));
  EXPECT_FALSE(std::filesystem::exists(missing));
  const std::string empty = dir.file("empty.db");
  { std::ofstream create(empty); }
  EXPECT_EQ(error_of([&] { Store::open(empty); }, ErrorCategory::kInput),
            empty + ": not a carb database (empty file)");
  // create_or_open accepts the same empty file.
  EXPECT_EQ(Store::create_or_open(empty).integrity_check(), "ok");
}

TEST(StoreSchema, RefusesANewerSchemaNamingBothVersions) {
  ScratchDir dir;
  const std::string path = dir.file("future.db");
  { Store store = Store::create_or_open(path); }
  {
    RawDb raw(path);
    raw.exec("PRAGMA user_version = 7");
  }
  EXPECT_EQ(error_of([&] { Store::open(path); }, ErrorCategory::kInput),
            path + ": schema version 7 is newer than this carb build understands (" +
                std::to_string(Store::kSchemaVersion) + "); use a newer carb");
}

// A database as the version-1 build left it: its schema plus one campaign.
void make_version_1(const std::string& path) {
  RawDb raw(path);
  raw.exec("BEGIN IMMEDIATE");
  store::migrate(raw.get(), 0, 1);
  raw.exec(
      "INSERT INTO campaigns (name, spec_text, spec_hash, created_at, carb_version, "
      "git_commit, protocol) VALUES ('old', 'spec', '" +
      sha256_hex("spec") + "', '2024-01-01T00:00:00.000Z', '0.0.9', 'abc', '{}')");
  raw.exec("COMMIT");
  ASSERT_EQ(raw.integer("PRAGMA user_version"), 1);
}

TEST(StoreSchema, MigratesAnOlderSchemaForwardKeepingItsRows) {
  ScratchDir dir;
  const std::string path = dir.file("old.db");
  make_version_1(path);
  Store store = Store::open(path);
  const auto campaign = store.find_campaign(1);
  ASSERT_TRUE(campaign.has_value());
  EXPECT_EQ(campaign->name, "old");
  EXPECT_EQ(campaign->carb_version, "0.0.9");
  // Version 2's claims work on the migrated file.
  EXPECT_TRUE(store.claim(store_test::key_of(0), ClaimOwner::current(), ResumePolicy{}));
  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM claims"), 1);
  // Version 3 renamed the engine's memory columns, in the table and in the view.
  EXPECT_EQ(raw.integer("SELECT count(*) FROM pragma_table_info('measurements') "
                        "WHERE name = 'engine_activation_bytes'"),
            1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM pragma_table_info('measurement_view') "
                        "WHERE name LIKE '%weight%'"),
            1);
}

TEST(StoreSchema, AFailedMigrationChangesNothing) {
  ScratchDir dir;
  const std::string path = dir.file("blocked.db");
  make_version_1(path);
  {
    // A table in the way of version 2's claims table makes the migration fail part-way.
    RawDb raw(path);
    raw.exec("CREATE TABLE claims (note TEXT)");
  }
  const std::string message = error_of([&] { Store::open(path); }, ErrorCategory::kRuntime);
  EXPECT_TRUE(contains(message, path + ": migrating schema version 1 to " +
                                    std::to_string(Store::kSchemaVersion) + " failed"));
  EXPECT_TRUE(contains(message, "table claims already exists"));
  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), 1);
  EXPECT_EQ(raw.text("SELECT sql FROM sqlite_schema WHERE name = 'claims'"),
            "CREATE TABLE claims (note TEXT)");
  EXPECT_EQ(raw.integer("SELECT count(*) FROM campaigns"), 1);
}

TEST(StoreSchema, ASecondConnectionFindsTheSchemaDone) {
  // Creation looks again under the write lock, so a second opener never creates it twice: the
  // nine tables of version 6 (architectures the newest), once each.
  ScratchDir dir;
  const std::string path = dir.file("shared.db");
  Store first = Store::create_or_open(path);
  Store second = Store::create_or_open(path);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM sqlite_schema WHERE type = 'table'"), 9);
}

}  // namespace
}  // namespace carb
