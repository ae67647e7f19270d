// Merging shard databases: disjoint shards add up, a shard merged twice changes nothing, the
// same key measured differently is kept and reported, and the result does not depend on the
// order of the sources.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "carb/error.hpp"
#include "carb/store.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using store_test::contains;
using store_test::error_of;
using store_test::key_of;
using store_test::make_record;
using store_test::RawDb;
using store_test::ScratchDir;

constexpr int kSamples = 40;

// A shard database holding measurements of the given test configurations (index, status),
// optionally shifting every sample by `shift_ms` (a re-measurement gives other numbers).
std::string make_shard(const ScratchDir& dir, const std::string& name,
                       const std::vector<std::pair<int, MeasurementStatus>>& rows,
                       double shift_ms = 0, int finished_offset_ms = 0) {
  const std::string path = dir.file(name);
  Store store = Store::create_or_open(path);
  const std::int64_t campaign_id = store_test::ensure_test_campaign(store, "unit");
  for (const auto& [index, status] : rows) {
    MeasurementRecord record = make_record(index, campaign_id, kSamples, status);
    for (double& sample : record.wall_samples_ms) sample += shift_ms;
    if (record.wall_latency) record.wall_latency = store_test::summarise(record.wall_samples_ms);
    record.started_at = Timestamp(std::chrono::seconds(1'700'000'000 + index)) +
                        std::chrono::milliseconds(finished_offset_ms);
    record.finished_at = record.started_at + std::chrono::milliseconds(5);
    store.write_measurement(record);
  }
  return path;
}

std::vector<std::pair<int, MeasurementStatus>> ok_rows(int first, int last) {
  std::vector<std::pair<int, MeasurementStatus>> rows;
  for (int index = first; index <= last; ++index) rows.emplace_back(index, MeasurementStatus::kOk);
  return rows;
}

std::string exported(const Store& store) {
  std::ostringstream out;
  store.export_measurements(out, ExportFormat::kJsonLines);
  return out.str();
}

TEST(StoreMerge, DisjointShardsAddUpWithTheirSamples) {
  ScratchDir dir;
  const std::string a = make_shard(dir, "a.db", ok_rows(0, 4));
  const std::string b = make_shard(dir, "b.db", ok_rows(5, 9));
  Store out = Store::create_or_open(dir.file("out.db"));
  const MergeReport first = out.merge(a);
  EXPECT_EQ(first.source, a);
  EXPECT_EQ(first.measurements, 5);
  EXPECT_EQ(first.added, 5);
  EXPECT_EQ(first.identical + first.replaced + first.kept, 0);
  const MergeReport second = out.merge(b);
  EXPECT_EQ(second.added, 5);
  EXPECT_TRUE(second.conflicts.empty());

  EXPECT_EQ(out.integrity_check(), "ok");
  RawDb raw(dir.file("out.db"));
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), 10);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples"), 10 * 2 * kSamples);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM campaigns"), 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM devices"), 1);
  EXPECT_EQ(raw.text("PRAGMA foreign_key_check"), "");
  // Each merged measurement reads back exactly as its shard holds it, samples included.
  const Store shard = Store::open(b);
  for (int index = 5; index <= 9; ++index) {
    const auto merged = out.find_measurement(key_of(index));
    const auto original = shard.find_measurement(key_of(index));
    ASSERT_TRUE(merged && original) << index;
    EXPECT_EQ(merged->wall_samples_ms, original->wall_samples_ms);
    EXPECT_EQ(merged->device_samples_ms, original->device_samples_ms);
    EXPECT_EQ(merged->wall_latency->median_ms, original->wall_latency->median_ms);
    EXPECT_EQ(merged->finished_at, original->finished_at);
    EXPECT_EQ(merged->provenance_json, original->provenance_json);
  }
}

TEST(StoreMerge, MergingAShardTwiceChangesNothing) {
  ScratchDir dir;
  const std::string a = make_shard(dir, "a.db", ok_rows(0, 5));
  Store out = Store::create_or_open(dir.file("out.db"));
  out.merge(a);
  const std::string before = exported(out);
  const MergeReport again = out.merge(a);
  EXPECT_EQ(again.measurements, 6);
  EXPECT_EQ(again.identical, 6);
  EXPECT_EQ(again.added + again.replaced + again.kept, 0);
  EXPECT_EQ(exported(out), before);
  RawDb raw(dir.file("out.db"));
  EXPECT_EQ(raw.integer("SELECT count(*) FROM samples"), 6 * 2 * kSamples);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurement_conflicts"), 0);
}

TEST(StoreMerge, ConflictingMeasurementsAreKeptAndReported) {
  ScratchDir dir;
  // Key 3 was measured on two nodes: the other node's samples are 0.5 ms slower and it
  // finished a second later.
  const std::string a = make_shard(dir, "a.db", ok_rows(0, 3));
  const std::string b = make_shard(dir, "b.db", ok_rows(3, 5), 0.5, 1000);

  Store out = Store::create_or_open(dir.file("out.db"));
  out.merge(a);
  const MergeReport report = out.merge(b);
  EXPECT_EQ(report.added, 2);
  ASSERT_EQ(report.conflicts.size(), 1u);
  EXPECT_EQ(report.kept, 1);
  const MergeConflict& conflict = report.conflicts[0];
  EXPECT_EQ(conflict.measurement_key, key_of(3));
  EXPECT_EQ(conflict.configuration_key, store_test::configuration_key(3));
  EXPECT_EQ(conflict.device_fingerprint, store_test::kDeviceFingerprint);
  EXPECT_EQ(conflict.kept_from, "");  // the earlier measurement, already in out.db
  EXPECT_EQ(conflict.other_from, b);

  // One row per key in measurements; the other version whole in measurement_conflicts.
  RawDb raw(dir.file("out.db"));
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), 6);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurement_conflicts"), 1);
  EXPECT_EQ(raw.text("SELECT source FROM measurement_conflicts"), b);
  const auto kept = out.find_measurement(key_of(3));
  const auto other = Store::open(b).find_measurement(key_of(3));
  ASSERT_TRUE(kept && other);
  EXPECT_EQ(kept->wall_samples_ms, Store::open(a).find_measurement(key_of(3))->wall_samples_ms);
  EXPECT_DOUBLE_EQ(raw.integer("SELECT json_array_length(measurement, '$.samples.wall') FROM "
                               "measurement_conflicts"),
                   kSamples);
  EXPECT_DOUBLE_EQ(std::stod(raw.text("SELECT json_extract(measurement, '$.samples.wall[0]') "
                                      "FROM measurement_conflicts")),
                   other->wall_samples_ms[0]);
  EXPECT_DOUBLE_EQ(std::stod(raw.text("SELECT json_extract(measurement, '$.wall_median_ms') FROM "
                                      "measurement_conflicts")),
                   other->wall_latency->median_ms);

  // Merging either shard again adds nothing, not even a second copy of the conflict.
  const std::string before = exported(out);
  const MergeReport again = out.merge(b);
  EXPECT_EQ(again.identical, 2);
  EXPECT_EQ(again.kept, 1);
  EXPECT_EQ(again.conflicts.size(), 1u);
  out.merge(a);
  EXPECT_EQ(exported(out), before);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurement_conflicts"), 1);
}

TEST(StoreMerge, TheOrderOfTheSourcesDoesNotMatter) {
  ScratchDir dir;
  const std::string a = make_shard(
      dir, "a.db",
      {{0, MeasurementStatus::kOk}, {1, MeasurementStatus::kError}, {2, MeasurementStatus::kOk}});
  const std::string b = make_shard(dir, "b.db",
                                   {{0, MeasurementStatus::kOk},
                                    {1, MeasurementStatus::kOk},
                                    {2, MeasurementStatus::kTimeout},
                                    {3, MeasurementStatus::kCrashed}},
                                   0.25, -1000);
  Store ab = Store::create_or_open(dir.file("ab.db"));
  const MergeReport ab_first = ab.merge(a);
  const MergeReport ab_second = ab.merge(b);
  Store ba = Store::create_or_open(dir.file("ba.db"));
  const MergeReport ba_first = ba.merge(b);
  const MergeReport ba_second = ba.merge(a);
  EXPECT_EQ(exported(ab), exported(ba));

  // Key 0: ok in both, different: b's finished first, so it stays either way.
  ASSERT_EQ(ab_second.conflicts.size(), 1u);
  EXPECT_EQ(ab_second.conflicts[0].kept_from, b);
  EXPECT_EQ(ab_second.conflicts[0].other_from, "");
  ASSERT_EQ(ba_second.conflicts.size(), 1u);
  EXPECT_EQ(ba_second.conflicts[0].kept_from, "");
  EXPECT_EQ(ba_second.conflicts[0].other_from, a);
  // Key 1: b's ok replaces a's error; key 2: a's ok stays over b's timeout; key 3 is new.
  EXPECT_EQ(ab_second.added, 1);
  EXPECT_EQ(ab_second.replaced, 2);  // keys 0 and 1
  EXPECT_EQ(ab_second.kept, 1);      // key 2
  EXPECT_EQ(ba_second.replaced, 1);  // key 2
  EXPECT_EQ(ba_second.kept, 2);      // keys 0 and 1
  EXPECT_EQ(ba_second.added, 0);
  EXPECT_EQ(ab.find_measurement(key_of(1))->status, MeasurementStatus::kOk);
  EXPECT_EQ(ab.find_measurement(key_of(2))->status, MeasurementStatus::kOk);
  EXPECT_EQ(ab.find_measurement(key_of(3))->status, MeasurementStatus::kCrashed);

  RawDb raw_ab(dir.file("ab.db"));
  RawDb raw_ba(dir.file("ba.db"));
  const std::string conflicts = "SELECT group_concat(content_sha256) FROM measurement_conflicts";
  EXPECT_EQ(raw_ab.text(conflicts), raw_ba.text(conflicts));
  EXPECT_EQ(raw_ab.integer("SELECT count(*) FROM measurement_conflicts"), 1);
  EXPECT_EQ(ab_first.added + ba_first.added, 3 + 4);
}

TEST(StoreMerge, RefusesWhatIsNotACarbDatabaseAndChangesNothing) {
  ScratchDir dir;
  const std::string a = make_shard(dir, "a.db", ok_rows(0, 2));
  Store out = Store::create_or_open(dir.file("out.db"));
  out.merge(a);
  const std::string before = exported(out);

  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << "not a database at all, just some words\n";
  EXPECT_TRUE(contains(error_of([&] { out.merge(text); }, ErrorCategory::kInput),
                       text + ": not a carb database"));
  const std::string other_app = dir.file("other.sqlite");
  {
    RawDb raw(other_app);
    raw.exec("CREATE TABLE t (x); PRAGMA application_id = 7");
  }
  EXPECT_TRUE(contains(error_of([&] { out.merge(other_app); }, ErrorCategory::kInput),
                       other_app + ": not a carb database (SQLite application_id 0x00000007"));
  EXPECT_TRUE(contains(error_of([&] { out.merge(dir.file("missing.db")); }, ErrorCategory::kInput),
                       "missing.db"));
  EXPECT_EQ(error_of([&] { out.merge(dir.file("out.db")); }, ErrorCategory::kInput),
            dir.file("out.db") + ": is the database being merged into");
  EXPECT_EQ(exported(out), before);
  EXPECT_EQ(out.integrity_check(), "ok");
}

}  // namespace
}  // namespace carb
