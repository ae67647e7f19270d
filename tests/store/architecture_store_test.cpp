// Imported architectures in a database (schema version 6, docs/database.md): their
// configurations' rows, their definitions, what a reader registers, and the migration of
// version 5 files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/store.hpp"
#include "schema.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using store_test::RawDb;
using store_test::ScratchDir;
using store_test::StoreFixture;

// A two-layer architecture: conv 3 -> 4 (3x3, stride 2) and a global average pool.
Architecture small_architecture(int channels) {
  Architecture a;
  a.name = "small";
  a.source = "by hand";
  a.native_resolution = 16;
  Layer conv;
  conv.kind = LayerKind::kConv;
  conv.inputs = {0};
  conv.channels = channels;
  conv.kernel = 3;
  conv.stride = 2;
  conv.padding = conv.padding_after = 1;
  a.layers.push_back(conv);
  Layer pool;
  pool.kind = LayerKind::kGlobalAvgPool;
  pool.inputs = {1};
  a.layers.push_back(pool);
  a.output = 2;
  return a;
}

// make_record's measurement of configuration `key` instead of its own.
MeasurementRecord record_of(const std::string& key, std::int64_t campaign_id) {
  MeasurementRecord record = store_test::make_record(0, campaign_id, 10);
  record.configuration_key = key;
  record.measurement_key =
      measurement_key(key, record.device_fingerprint, record.software_versions,
                      record.protocol_json);
  return record;
}

using StoreArchitectures = StoreFixture;

TEST_F(StoreArchitectures, AnImportedConfigurationKeepsItsArchitectureAndNoResnetKnobs) {
  const std::string hash = register_architecture(small_architecture(4));
  const std::string key = "graph-" + hash + "_r16_b2_fp32";
  ASSERT_EQ(store.write_measurement(record_of(key, campaign_id)), WriteOutcome::kInserted);
  // A ResNet beside it keeps its knobs.
  ASSERT_EQ(store.write_measurement(store_test::make_record(1, campaign_id, 10)),
            WriteOutcome::kInserted);

  RawDb raw(path);
  EXPECT_EQ(raw.text("SELECT architecture FROM configurations WHERE key = '" + key + "'"), hash);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM configurations WHERE key = '" + key +
                        "' AND block IS NULL AND depth IS NULL AND width_multiplier IS NULL "
                        "AND classes IS NULL AND resolution = 16 AND batch = 2"),
            1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM configurations WHERE architecture IS NULL AND "
                        "block IS NOT NULL"),
            1);
  const auto definition =
      nlohmann::json::parse(raw.text("SELECT definition FROM architectures"));
  EXPECT_EQ(architecture_from_json(definition, "stored").hash, hash);
  EXPECT_EQ(raw.text("SELECT architecture FROM measurement_view WHERE configuration_key = '" +
                     key + "'"),
            "small");
  // Neither kind of row can be half of the other.
  EXPECT_THROW(raw.exec("INSERT INTO configurations (key, architecture, block, resolution, batch, "
                        "precision) VALUES ('x', '" + hash + "', 'basic', 16, 1, 'fp32')"),
               std::runtime_error);
  EXPECT_THROW(raw.exec("INSERT INTO configurations (key, resolution, batch, precision) "
                        "VALUES ('y', 16, 1, 'fp32')"),
               std::runtime_error);
}

TEST_F(StoreArchitectures, AnUnknownArchitectureIsNotWritten) {
  const std::string key = "graph-00000000000000ab_r16_b2_fp32";
  EXPECT_THROW((void)store.write_measurement(record_of(key, campaign_id)), Error);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurements"), 0);
}

TEST_F(StoreArchitectures, ADefinitionThatIsNotItsHashIsAnInputErrorOnOpening) {
  const std::string hash = register_architecture(small_architecture(5));
  ASSERT_EQ(store.write_measurement(record_of("graph-" + hash + "_r16_b1_fp32", campaign_id)),
            WriteOutcome::kInserted);
  {
    RawDb raw(path);
    nlohmann::json other = architecture_to_json(small_architecture(6));
    other.erase("hash");
    raw.exec("UPDATE architectures SET definition = '" + other.dump() + "'");
  }
  try {
    (void)Store::open(path);
    ADD_FAILURE() << "opened";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(error.what()).find("is stored under another hash"), std::string::npos)
        << error.what();
  }
}

TEST(StoreSchemaVersion6, AVersion5DatabaseKeepsItsConfigurationsAndMeasurements) {
  ScratchDir dir;
  const std::string path = dir.file("v5.db");
  {
    RawDb raw(path);
    raw.exec("BEGIN IMMEDIATE");
    store::migrate(raw.get(), 0, 5);
    raw.exec("INSERT INTO configurations (key, block, depth, width_multiplier, early_downsample, "
             "resolution, batch, precision, stage_blocks, stage_widths, classes) VALUES "
             "('basic10_w1_ds_r32_b1_fp32', 'basic', 10, 1.0, 1, 32, 1, 'fp32', '[1,1,1,1]', "
             "'[64,128,256,512]', 1000)");
    raw.exec("INSERT INTO campaigns (name, spec_text, spec_hash, created_at, carb_version, "
             "git_commit, protocol) VALUES ('old', 'spec', '" +
             sha256_hex("spec") + "', '2026-01-01T00:00:00.000Z', '0.2.0', 'abc', '{}')");
    raw.exec("INSERT INTO devices (fingerprint, kind, name, details) VALUES ('f', 'cpu', 'n', "
             "'{}')");
    raw.exec("INSERT INTO measurements (measurement_key, configuration_key, device_id, "
             "campaign_id, software_versions, status, detail, attempts, started_at, finished_at, "
             "provenance, protocol) VALUES ('" +
             std::string(64, 'a') +
             "', 'basic10_w1_ds_r32_b1_fp32', 1, 1, 'v', 'error', 'x', 1, "
             "'2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', '{}', '{}')");
    raw.exec("COMMIT");
  }
  (void)Store::open(path);
  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), 6);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM configurations WHERE architecture IS NULL AND "
                        "block = 'basic' AND depth = 10 AND classes = 1000"),
            1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM measurement_view"), 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM pragma_foreign_key_check"), 0);
  EXPECT_EQ(raw.text("PRAGMA integrity_check"), "ok");
}

}  // namespace
}  // namespace carb
