// Export: one row per measurement with knobs and analytic features, NULL energy kept empty
// (CSV) or null (JSON), numbers that read back exactly.
#include <gtest/gtest.h>

#include <set>

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "carb/graph.hpp"
#include "carb/space.hpp"
#include "carb/store.hpp"
#include "test_support.hpp"

namespace carb {
namespace {

using store_test::make_record;
using StoreExport = store_test::StoreFixture;

// RFC 4180 records: fields split at commas outside quotes, "" inside quotes is one quote.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        rows.back().back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        rows.back().back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else {
      rows.back().back() += c;
    }
  }
  if (rows.back() == std::vector<std::string>(1)) rows.pop_back();
  return rows;
}

double to_double(const std::string& text) {
  double value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  EXPECT_EQ(result.ptr, text.data() + text.size()) << text;
  return value;
}

class StoreExportData : public StoreExport {
 protected:
  void SetUp() override {
    StoreExport::SetUp();
    without_energy = make_record(0, campaign_id, 12);
    without_energy.provenance_json = R"({"host":"test","note":"a \"quoted\", comma"})";
    with_energy = make_record(1, campaign_id, 12);
    with_energy.energy_null_reason.reset();
    with_energy.energy_j = 0.0123456789012345;
    with_energy.energy_method = "rapl-powercap";
    failed = make_record(2, campaign_id, 0, MeasurementStatus::kTimeout);
    // The first configuration again, on a second device: two rows share its features.
    DeviceRecord gpu;
    gpu.fingerprint = "cuda:GPU-test";
    gpu.kind = "cuda";
    gpu.name = "Test GPU";
    store.ensure_device(gpu);
    on_gpu = make_record(0, campaign_id, 12);
    on_gpu.device_fingerprint = gpu.fingerprint;
    on_gpu.measurement_key = measurement_key(on_gpu.configuration_key, gpu.fingerprint,
                                             on_gpu.software_versions, on_gpu.protocol_json);
    for (const auto* record : {&without_energy, &with_energy, &failed, &on_gpu}) {
      store.write_measurement(*record);
    }
  }

  MeasurementRecord without_energy, with_energy, failed, on_gpu;
};

TEST_F(StoreExportData, CsvHasKnobsFeaturesAndEmptyNulls) {
  std::ostringstream out;
  EXPECT_EQ(store.export_measurements(out, ExportFormat::kCsv), 4);
  const auto rows = parse_csv(out.str());
  ASSERT_EQ(rows.size(), 5u);
  const std::vector<std::string>& header = rows[0];
  const auto column = [&](const std::string& name) {
    const auto found = std::find(header.begin(), header.end(), name);
    EXPECT_NE(found, header.end()) << name;
    return static_cast<std::size_t>(found - header.begin());
  };
  // Features follow the knobs.
  const std::size_t classes = column("classes");
  ASSERT_LT(classes + 8, header.size());
  EXPECT_EQ(std::vector<std::string>(header.begin() + static_cast<long>(classes) + 1,
                                     header.begin() + static_cast<long>(classes) + 9),
            (std::vector<std::string>{"params", "macs", "flops", "param_bytes", "activation_bytes",
                                      "peak_activation_bytes", "arithmetic_intensity", "status"}));
  EXPECT_EQ(header[0], "measurement_key");
  // Every column name is unique: JSON Lines objects would silently lose one of two.
  EXPECT_EQ(std::set<std::string>(header.begin(), header.end()).size(), header.size());
  EXPECT_LT(column("activation_bytes"), column("engine_activation_bytes"));
  for (std::size_t row = 1; row < rows.size(); ++row) {
    ASSERT_EQ(rows[row].size(), header.size()) << row;
  }

  for (std::size_t row = 1; row < rows.size(); ++row) {
    const auto& fields = rows[row];
    const std::string& key = fields[column("configuration_key")];
    const Features features = compute_features(build_network(parse_key(key)));
    EXPECT_EQ(fields[column("params")], std::to_string(features.params));
    EXPECT_EQ(fields[column("macs")], std::to_string(features.macs));
    EXPECT_EQ(fields[column("flops")], std::to_string(2 * features.macs));
    EXPECT_EQ(fields[column("peak_activation_bytes")],
              std::to_string(features.peak_activation_bytes));
    EXPECT_EQ(to_double(fields[column("arithmetic_intensity")]), features.arithmetic_intensity);
    EXPECT_EQ(fields[column("block")], "basic");
    EXPECT_EQ(fields[column("depth")], "18");
    EXPECT_EQ(fields[column("width_multiplier")], "0.25");
    EXPECT_EQ(fields[column("stage_blocks")], "[2,2,2,2]");
    EXPECT_EQ(fields[column("campaign")], "unit");

    const std::string& measurement = fields[column("measurement_key")];
    if (measurement == without_energy.measurement_key) {
      EXPECT_EQ(fields[column("energy_j")], "");
      EXPECT_EQ(fields[column("energy_null_reason")], "no energy sensor on the test device");
      EXPECT_EQ(fields[column("provenance")], R"({"host":"test","note":"a \"quoted\", comma"})");
      EXPECT_EQ(to_double(fields[column("wall_median_ms")]),
                without_energy.wall_latency->median_ms);
      EXPECT_EQ(fields[column("wall_count")], "12");
      EXPECT_EQ(fields[column("device_name")], "Fake 9000");
    } else if (measurement == with_energy.measurement_key) {
      EXPECT_EQ(to_double(fields[column("energy_j")]), 0.0123456789012345);
      EXPECT_EQ(fields[column("energy_null_reason")], "");
    } else if (measurement == on_gpu.measurement_key) {
      EXPECT_EQ(fields[column("device_name")], "Test GPU");
      EXPECT_EQ(fields[column("device_kind")], "cuda");
      EXPECT_EQ(fields[column("device_fingerprint")], "cuda:GPU-test");
    } else {
      EXPECT_EQ(measurement, failed.measurement_key);
      EXPECT_EQ(fields[column("status")], "timeout");
      EXPECT_EQ(fields[column("wall_median_ms")], "");
      EXPECT_EQ(fields[column("energy_j")], "");
    }
  }
  // Rows come in configuration key order (r32 on both devices, r40, r48).
  EXPECT_EQ(rows[1][column("configuration_key")], without_energy.configuration_key);
  EXPECT_EQ(rows[2][column("configuration_key")], on_gpu.configuration_key);
  EXPECT_EQ(rows[3][column("configuration_key")], with_energy.configuration_key);
  EXPECT_EQ(rows[4][column("configuration_key")], failed.configuration_key);
}

TEST_F(StoreExportData, JsonLinesKeepNullsAndNestJson) {
  std::ostringstream out;
  EXPECT_EQ(store.export_measurements(out, ExportFormat::kJsonLines), 4);
  std::istringstream lines(out.str());
  int seen = 0;
  for (std::string line; std::getline(lines, line); ++seen) {
    const auto row = nlohmann::json::parse(line);
    const Features features =
        compute_features(build_network(parse_key(row["configuration_key"].get<std::string>())));
    EXPECT_EQ(row["macs"], features.macs);
    EXPECT_EQ(row["param_bytes"], features.param_bytes);
    EXPECT_EQ(row["early_downsample"], true);
    EXPECT_EQ(row["stage_widths"], nlohmann::json({64, 128, 256, 512}));
    EXPECT_TRUE(row.contains("energy_j"));
    const std::string key = row["measurement_key"];
    if (key == without_energy.measurement_key) {
      EXPECT_TRUE(row["energy_j"].is_null());
      EXPECT_TRUE(row["dynamic_energy_j"].is_null());
      EXPECT_EQ(row["provenance"]["note"], "a \"quoted\", comma");
      EXPECT_EQ(row["wall_converged"], true);
      EXPECT_EQ(row["wall_p95_ms"], without_energy.wall_latency->p95_ms);
      EXPECT_EQ(row["protocol"]["warmup"], 10);
    } else if (key == with_energy.measurement_key) {
      EXPECT_EQ(row["energy_j"], 0.0123456789012345);
    } else if (key == on_gpu.measurement_key) {
      EXPECT_EQ(row["device_name"], "Test GPU");
    } else {
      EXPECT_EQ(row["status"], "timeout");
      EXPECT_TRUE(row["wall_median_ms"].is_null());
      EXPECT_TRUE(row["wall_converged"].is_null());
    }
  }
  EXPECT_EQ(seen, 4);
}

TEST_F(StoreExportData, OkOnlyLeavesFailuresOut) {
  std::ostringstream out;
  EXPECT_EQ(store.export_measurements(out, ExportFormat::kCsv, true), 3);
  const auto rows = parse_csv(out.str());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(out.str().find("timeout"), std::string::npos);
}

TEST_F(StoreExportData, TypedRowsAreTheExportsValuesWithNullKeptNull) {
  std::vector<ExportColumn> columns;
  std::vector<std::vector<ExportValue>> rows;
  const std::int64_t written = store.export_rows(
      false, [&](const std::vector<ExportColumn>& header) { columns = header; },
      [&](const std::vector<ExportValue>& values) { rows.push_back(values); });
  EXPECT_EQ(written, 4);
  ASSERT_EQ(rows.size(), 4u);
  // The same columns, in the same order, as the CSV header.
  std::ostringstream out;
  store.export_measurements(out, ExportFormat::kCsv);
  const auto csv = parse_csv(out.str());
  ASSERT_EQ(columns.size(), csv.front().size());
  std::map<std::string, std::size_t> at;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    EXPECT_EQ(columns[c].name, csv.front()[c]);
    at[columns[c].name] = c;
  }
  const std::pair<const char*, ExportKind> kinds[] = {
      {"configuration_key", ExportKind::kText},    {"depth", ExportKind::kInteger},
      {"early_downsample", ExportKind::kBoolean},  {"wall_converged", ExportKind::kBoolean},
      {"width_multiplier", ExportKind::kReal},     {"energy_j", ExportKind::kReal},
      {"engine_peak_bytes", ExportKind::kInteger}, {"macs", ExportKind::kInteger},
      {"arithmetic_intensity", ExportKind::kReal}, {"stage_blocks", ExportKind::kJson},
      {"provenance", ExportKind::kJson},           {"drift_probe_ms", ExportKind::kReal}};
  for (const auto& [name, kind] : kinds) EXPECT_EQ(columns.at(at.at(name)).kind, kind) << name;
  int nulls = 0;
  for (const auto& values : rows) {
    ASSERT_EQ(values.size(), columns.size());
    for (std::size_t c = 0; c < values.size(); ++c) {
      // Every value is NULL or of its column's kind: an integer, a real or text.
      static constexpr std::size_t kHolds[] = {1, 2, 3, 1, 3};  // by ExportKind
      if (std::holds_alternative<std::monostate>(values[c])) continue;
      EXPECT_EQ(values[c].index(), kHolds[static_cast<std::size_t>(columns[c].kind)])
          << columns[c].name;
    }
    const auto& key = std::get<std::string>(values[at.at("measurement_key")]);
    const ExportValue& energy = values[at.at("energy_j")];
    if (key == with_energy.measurement_key) {
      EXPECT_EQ(std::get<double>(energy), 0.0123456789012345);
    } else {
      // NULL, never 0, with its reason where the measurement is ok.
      EXPECT_TRUE(std::holds_alternative<std::monostate>(energy));
      ++nulls;
    }
    if (key == without_energy.measurement_key) {
      EXPECT_EQ(std::get<std::string>(values[at.at("energy_null_reason")]),
                *without_energy.energy_null_reason);
      EXPECT_EQ(std::get<double>(values[at.at("wall_median_ms")]),
                without_energy.wall_latency->median_ms);
    }
  }
  EXPECT_EQ(nulls, 3);
}

TEST_F(StoreExport, AnEmptyDatabaseExportsAHeaderOnly) {
  std::ostringstream csv, jsonl;
  EXPECT_EQ(store.export_measurements(csv, ExportFormat::kCsv), 0);
  EXPECT_EQ(parse_csv(csv.str()).size(), 1u);
  EXPECT_EQ(store.export_measurements(jsonl, ExportFormat::kJsonLines), 0);
  EXPECT_EQ(jsonl.str(), "");
}

}  // namespace
}  // namespace carb
