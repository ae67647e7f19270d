// carb profile / export / devices as a user runs them (faults: tests/fault).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "run.hpp"

namespace {

using carb_test::slurp;
using carb_test::start;
using carb_test::wait_for;

const std::string kQuick =
    " --min-time 0.02 --max-time 0.2 --target-ci 0.5 --idle-window 0.1 --timeout 60";

std::string fresh_db(const std::string& name) {
  const std::string path = testing::TempDir() + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

std::string write_keys(const std::string& name, int count) {
  const std::string path = testing::TempDir() + name;
  std::ofstream file(path);
  file << "# tiny networks, one per line\n";
  for (int batch = 1; batch <= count; ++batch) {
    file << "basic10_w0.25_nods_r32_b" << batch << "_fp32_k10\n";
  }
  return path;
}

// Rows of the export: one line per measurement after the header.
std::vector<std::string> exported_rows(const std::string& db) {
  const std::string out = testing::TempDir() + "export.csv";
  EXPECT_EQ(wait_for(start("export --db " + db + " -o " + out, "/dev/null")), 0);
  std::istringstream text(slurp(out));
  std::vector<std::string> rows;
  std::string line;
  std::getline(text, line);
  while (std::getline(text, line)) rows.push_back(line);
  return rows;
}

int count_key(const std::vector<std::string>& rows, const std::string& key) {
  int count = 0;
  for (const auto& row : rows) {
    if (row.find("," + key + ",") != std::string::npos) ++count;
  }
  return count;
}

TEST(ProfileCli, ShardsSplitTheKeysIntoTheirOwnFilesAndMergeBack) {
  const std::string keys = write_keys("shard-keys.txt", 9);
  std::map<std::string, int> seen;
  for (int shard = 0; shard < 3; ++shard) {
    const std::string db = fresh_db("shard-" + std::to_string(shard) + ".sqlite");
    const std::string log = testing::TempDir() + "shard.log";
    ASSERT_EQ(
        wait_for(start("profile --keys " + keys + " --db " + testing::TempDir() +
                           "shard-{shard}.sqlite --shard " + std::to_string(shard) + "/3" + kQuick,
                       log)),
        0)
        << slurp(log);
    EXPECT_NE(slurp(log).find(" in shard " + std::to_string(shard) + "/3\n"), std::string::npos)
        << slurp(log);
    EXPECT_NE(slurp(log).find(" into " + db + "\n"), std::string::npos) << slurp(log);
    for (const auto& row : exported_rows(db)) ++seen[row.substr(row.find("basic10_"), 30)];
  }
  // Every key in exactly one shard's file.
  ASSERT_EQ(seen.size(), 9u);
  for (const auto& [key, count] : seen) EXPECT_EQ(count, 1) << key;

  // Merged back, and merged twice, they are the whole campaign once.
  const std::string merged = fresh_db("shards-merged.sqlite");
  std::string shards;
  for (int shard = 0; shard < 3; ++shard) {
    shards += " " + testing::TempDir() + "shard-" + std::to_string(shard) + ".sqlite";
  }
  const std::string log = testing::TempDir() + "merge.log";
  ASSERT_EQ(wait_for(start("merge --db " + merged + shards + shards, log)), 0) << slurp(log);
  const auto rows = exported_rows(merged);
  ASSERT_EQ(rows.size(), 9u) << slurp(log);
  for (const auto& [key, count] : seen) EXPECT_EQ(count_key(rows, key + "_k10"), 1) << key;
}

TEST(ProfileCli, RoundsMeasureEveryConfigurationOncePerRoundAndResume) {
  const std::string keys = write_keys("round-keys.txt", 2);
  const std::string db = fresh_db("rounds.sqlite");
  const std::string log = testing::TempDir() + "rounds.log";
  const std::string command =
      "profile --keys " + keys + " --db " + db + " --rounds 3 --drift-probe none" + kQuick;
  ASSERT_EQ(wait_for(start(command, log)), 0) << slurp(log);
  EXPECT_NE(slurp(log).find("configurations: 2 selected, 2 in shard 0/1, 3 rounds: 6 "
                            "measurements\n  measured now:   6 (ok 6)"),
            std::string::npos)
      << slurp(log);
  // Each configuration three times, under three measurement keys; round 0's protocol is the
  // one a campaign without rounds has, so earlier campaigns count as its first round.
  const auto rows = exported_rows(db);
  ASSERT_EQ(rows.size(), 6u);
  for (int batch = 1; batch <= 2; ++batch) {
    const std::string key = "basic10_w0.25_nods_r32_b" + std::to_string(batch) + "_fp32_k10";
    EXPECT_EQ(count_key(rows, key), 3) << key;
  }
  int second = 0, third = 0, first = 0;
  for (const auto& row : rows) {
    second += row.find("\"\"round\"\":1") != std::string::npos ? 1 : 0;
    third += row.find("\"\"round\"\":2") != std::string::npos ? 1 : 0;
    first += row.find("\"\"round\"\"") == std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(first, 2);
  EXPECT_EQ(second, 2);
  EXPECT_EQ(third, 2);
  // A rerun has nothing left; a campaign of one round on the same database neither.
  ASSERT_EQ(wait_for(start(command, log)), 0) << slurp(log);
  EXPECT_NE(slurp(log).find("skipped:        6 already done"), std::string::npos) << slurp(log);
  ASSERT_EQ(wait_for(start(
                "profile --keys " + keys + " --db " + db + " --drift-probe none" + kQuick, log)),
            0);
  EXPECT_NE(slurp(log).find("skipped:        2 already done"), std::string::npos) << slurp(log);
}

TEST(ProfileCli, EnergyIsNullWithItsReasonOnThisMachine) {
  // A sensor: a RAPL package zone (powercap may exist and be empty) or perf's energy-pkg event.
  bool zone = false;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/powercap", error)) {
    std::ifstream name(entry.path() / "name");
    std::string text;
    zone = zone || (name >> text && text.rfind("package", 0) == 0);
  }
  if (zone || std::filesystem::exists("/sys/bus/event_source/devices/power/events/energy-pkg")) {
    GTEST_SKIP() << "this machine may have an energy sensor; the NULL path needs one without";
  }
  const std::string db = fresh_db("energy.sqlite");
  const std::string keys = write_keys("energy-keys.txt", 1);
  ASSERT_EQ(wait_for(start("profile --keys " + keys + " --db " + db + kQuick, "/dev/null")), 0);
  const std::string out = testing::TempDir() + "energy.jsonl";
  ASSERT_EQ(wait_for(start("export --format jsonl --db " + db + " -o " + out, "/dev/null")), 0);
  const std::string row = slurp(out);
  EXPECT_NE(row.find("\"energy_j\":null"), std::string::npos) << row;
  EXPECT_NE(row.find("no /sys/class/powercap"), std::string::npos) << row;
}

TEST(ProfileCli, TheTorchDeviceMeasuresIntoItsOwnDevice) {
  const std::string devices = testing::TempDir() + "torch-devices.log";
  ASSERT_EQ(wait_for(start("devices", devices)), 0);
  if (slurp(devices).find("\ntorch:0 ") == std::string::npos) {
    GTEST_SKIP() << "no torch:0 in this build: " << slurp(devices);
  }
  const std::string db = fresh_db("torch.sqlite");
  const std::string keys = write_keys("torch-keys.txt", 2);
  const std::string log = testing::TempDir() + "torch-profile.log";
  for (const char* device : {"torch:0", "cpu:0"}) {
    ASSERT_EQ(wait_for(start("profile --keys " + keys + " --db " + db + " --device " + device +
                                 " --drift-probe none" + kQuick,
                             log)),
              0)
        << slurp(log);
  }
  const std::string out = testing::TempDir() + "torch.jsonl";
  ASSERT_EQ(wait_for(start("export --format jsonl --db " + db + " -o " + out, "/dev/null")), 0);
  std::istringstream rows(slurp(out));
  std::string row;
  int torch = 0, engine = 0;
  while (std::getline(rows, row)) {
    EXPECT_NE(row.find("\"status\":\"ok\""), std::string::npos) << row;
    if (row.find("|PyTorch 1.") != std::string::npos) {
      ++torch;
      EXPECT_NE(row.find("aten::conv2d"), std::string::npos) << row;
    } else if (row.find("|oneDNN 2.") != std::string::npos) {
      ++engine;
    }
  }
  // The same two keys on two devices: four rows, never pooled as one device's.
  EXPECT_EQ(torch, 2);
  EXPECT_EQ(engine, 2);
}

TEST(ProfileCli, BadInputIsOneLineAndExitTwo) {
  for (const char* name : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_SIZE"}) {
    ::unsetenv(name);
  }
  const std::string keys = testing::TempDir() + "bad-keys.txt";
  std::ofstream(keys) << "basic10_w0.25_nods_r32_b1_fp32\n  basic11_w1_ds_r64_b1_fp32\n";
  const std::string not_db = testing::TempDir() + "not-a-db.sqlite";
  std::ofstream(not_db) << "hello, I am text\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"profile --keys " + keys + " --db " + fresh_db("bad.sqlite"),
       keys + ":2:3: key 'basic11_w1_ds_r64_b1_fp32': depth 11 cannot be built"},
      {"profile --db x.sqlite", "give either --spec or --keys"},
      {"profile --keys " + keys + " --spec y.yaml --db x.sqlite", "give either --spec or --keys"},
      {"profile --keys /nonexistent --db x.sqlite", "/nonexistent: cannot open key list"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --device tpu",
       "no device 'tpu'"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --time-budget soon",
       "duration 'soon'"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --shard 3/2",
       "--shard 3/2: needs 0 <= K < N (shards count from 0: 0/2 is the first of 2)"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --shard 1of2",
       "--shard '1of2': expected K/N"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --shard auto",
       "--shard auto: neither SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --cudnn-cache c.tsv",
       "--cudnn-cache requires --cudnn-find"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --throttle-retries -1",
       "--throttle-retries"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --worker-reuse 0",
       "--worker-reuse"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --rounds 0",
       "--rounds: Value 0 not in range 1 to 100"},
      {"profile --keys " + write_keys("ok-keys.txt", 1) + " --db x.sqlite --rounds 2 --mpi",
       "--rounds is not supported with --mpi yet"},
      {"kernels --keys " + write_keys("ok-keys.txt", 1) + " --device tpu", "no device 'tpu'"},
      {"kernels --keys " + keys, keys + ":2:3: key 'basic11_w1_ds_r64_b1_fp32'"},
      {"kernels --keys " + write_keys("ok-keys.txt", 1) + " --passes 0",
       "--passes: Value 0 not in range"},
      {"kernels", "give one of --spec, --keys or --onnx"},
      {"kernels --keys " + keys + " --onnx m.onnx", "give one of --spec, --keys or --onnx"},
      {"kernels --onnx /nonexistent.onnx", "/nonexistent.onnx"},
      {"export --db " + not_db, "not a carb database"},
      {"export --db /nonexistent.sqlite", "/nonexistent.sqlite"},
  };
  for (const auto& [arguments, expected] : cases) {
    const std::string log = testing::TempDir() + "bad.log";
    EXPECT_EQ(wait_for(start(arguments, log)), 2) << arguments << "\n" << slurp(log);
    const std::string out = slurp(log);
    EXPECT_NE(out.find(expected), std::string::npos) << arguments << "\n" << out;
    EXPECT_EQ(out.rfind("carb: error: ", 0), 0u) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

// carb kernels: one row per kernel of each configuration, in the session's order, with the
// IR layer that decides its kind; the shares of a configuration sum to one; each row carries
// the drift probe's latency at its configuration's moment (one per configuration).
// The rows are stdout's; stderr holds nothing but the notes of configurations timed again (a
// loaded machine can disturb the whole passes: docs/cli.md).
carb_test::CommandResult kernels_csv(const std::string& arguments) {
  const std::string notes = testing::TempDir() + "kernels-notes.log";
  carb_test::CommandResult result = carb_test::run_shell(
      std::string(CARB_BINARY) + " kernels " + arguments + " --format csv 2>" + notes);
  std::istringstream text(slurp(notes));
  for (std::string note; std::getline(text, note);) {
    EXPECT_EQ(note.rfind("carb: ", 0), 0u) << note;
    EXPECT_NE(note.find("so it was timed again"), std::string::npos) << note;
  }
  return result;
}

TEST(KernelsCli, BreaksEachPassDownKernelByKernel) {
  const std::string keys = write_keys("kernel-keys.txt", 2);
  const carb_test::CommandResult timed = kernels_csv("--keys " + keys + " --passes 3 --warmup 1");
  ASSERT_EQ(timed.exit_code, 0) << timed.out;
  std::istringstream text(timed.out);
  std::string line;
  std::getline(text, line);
  EXPECT_EQ(line,
            "key,index,kernel,implementation,kind,class,input_shape,output_shape,window,stride,"
            "groups,macs,params,median_ms,share,in_bytes,out_bytes,weight_bytes,batch,cin,cout,"
            "in_hw,out_hw,chan_per_group,inputs,macs_per_byte,is_pw,is_dense,is_stem,is_dw,"
            "is_grouped,is_fc,is_max_pool,is_avg_pool,is_global_avg_pool,is_batch_norm,"
            "is_eltwise,is_add,is_mul,is_concat,is_channel_shuffle,is_slice,fused_clip,"
            "fused_hard_sigmoid,fused_hard_swish,fused_relu,fused_sigmoid,fused_swish,"
            "is_torch_native,pass_ms,"
            "drift_probe,probe_ms,device,device_name,instance");
  std::map<std::string, double> shares;
  std::map<std::string, std::string> probe_ms;
  std::map<std::string, int> rows;
  std::map<std::string, std::int64_t> macs;
  while (std::getline(text, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    // Then the device: its fingerprint (quoted, as it holds commas), name and host instance.
    ASSERT_GE(cells.size(), 55u) << line;
    EXPECT_EQ(cells[52].front(), '"') << line;
    EXPECT_EQ(std::stoi(cells[1]), rows[cells[0]]++) << line;
    EXPECT_GT(std::stod(cells[13]), 0) << line;
    EXPECT_EQ(cells[48], "0") << line;  // is_torch_native: carb's engine runs convs on oneDNN
    EXPECT_GT(std::stod(cells[49]), 0) << line;
    EXPECT_EQ(cells[50], "basic18_w0.5_ds_r64_b1_fp32") << line;
    EXPECT_GT(std::stod(cells[51]), 0) << line;
    EXPECT_EQ(probe_ms.emplace(cells[0], cells[51]).first->second, cells[51]) << line;
    shares[cells[0]] += std::stod(cells[14]);
    macs[cells[0]] += std::stoll(cells[11]);
    if (cells[1] == "0") {  // the stem (3x3, stride 1 without early downsampling), bn1 and relu
      EXPECT_EQ(cells[2], "conv1+bn1+relu");
      EXPECT_EQ(cells[4], "conv");
      EXPECT_EQ(cells[5], "conv_stem");
      EXPECT_EQ(cells[8], "3");
      EXPECT_EQ(cells[9], "1");
      // Its kernel-model features: batch x 3 x 32 x 32 floats in, is_stem, a fused ReLU.
      const int batch = cells[0].find("_b2_") != std::string::npos ? 2 : 1;
      EXPECT_EQ(cells[15], std::to_string(batch * 3 * 32 * 32 * 4));
      EXPECT_EQ(cells[28], "1");
      EXPECT_EQ(cells[45], "1");
    }
  }
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& [key, share] : shares) {
    EXPECT_NEAR(share, 1.0, 1e-4) << key;
    EXPECT_EQ(rows[key], rows.begin()->second) << key;  // batch changes no kernel
  }
  // Every MAC of the network is in exactly one kernel.
  const std::string features = testing::TempDir() + "kernels-features.json";
  ASSERT_EQ(
      wait_for(start("space show basic10_w0.25_nods_r32_b2_fp32_k10 --format json", features)), 0);
  const std::string shown = slurp(features);
  const std::string field = "\"macs\":";
  const auto at = shown.find(field);
  ASSERT_NE(at, std::string::npos) << shown;
  EXPECT_EQ(std::stoll(shown.substr(at + field.size())),
            macs["basic10_w0.25_nods_r32_b2_fp32_k10"]);
  // Without a probe the two columns are empty (the device's follow them).
  const carb_test::CommandResult unprobed = kernels_csv(
      "--keys " + write_keys("one-key.txt", 1) + " --passes 1 --warmup 0 --drift-probe none");
  ASSERT_EQ(unprobed.exit_code, 0) << unprobed.out;
  std::istringstream rows_unprobed(unprobed.out);
  std::getline(rows_unprobed, line);
  ASSERT_TRUE(std::getline(rows_unprobed, line));
  EXPECT_NE(line.find(",,,\""), std::string::npos) << line;
}

TEST(DevicesCli, ListsTheCpuWithItsCapabilities) {
  const std::string log = testing::TempDir() + "devices.log";
  ASSERT_EQ(wait_for(start("devices --format csv", log)), 0);
  const std::string out = slurp(log);
  EXPECT_EQ(out.rfind("id,kind,name,library,isa,threads,fp32,fp16,bf16,energy\ncpu:0,cpu,", 0), 0u)
      << out;
  EXPECT_NE(out.find("oneDNN 2.6"), std::string::npos);
}

TEST(DevicesCli, EveryBackendListsDevicesOrSaysWhyNot) {
  const std::string log = testing::TempDir() + "devices-table.log";
  ASSERT_EQ(wait_for(start("devices", log)), 0);
  const std::string out = slurp(log);
  EXPECT_NE(out.find("\ncpu:0 "), std::string::npos) << out;
#ifdef CARB_WITH_CUDA
  // Built with CUDA: a cuda device row, or one line saying why there is none.
  const bool listed = out.find("\ncuda:0 ") != std::string::npos;
  const bool explained = out.find("\ncuda: no devices: ") != std::string::npos;
  EXPECT_NE(listed, explained) << out;
#else
  EXPECT_EQ(out.find("cuda"), std::string::npos) << out;
#endif
}

}  // namespace
