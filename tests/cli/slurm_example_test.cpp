// examples/slurm/profile-array.sh run as Slurm runs it: three array tasks (ids 1-3, so
// --shard auto must use SLURM_ARRAY_TASK_MIN) with Slurm's variables, then the merge job the
// first task submits. No Slurm here: a stand-in sbatch on PATH records its arguments, and the
// test runs the --wrap command it was given, as the merge job would.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "run.hpp"

namespace {

using carb_test::run_shell;

TEST(SlurmExample, ArrayTasksProfileTheirSharesAndTheMergeJobJoinsThem) {
  const std::string dir = testing::TempDir() + "slurm-example";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/bin");
  {
    std::ofstream sbatch(dir + "/bin/sbatch");
    sbatch << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> " << dir
           << "/sbatch.args\n";
  }
  std::filesystem::permissions(dir + "/bin/sbatch", std::filesystem::perms::owner_all);

  const std::string environment = "cd " CARB_SOURCE_DIR " && PATH=" + dir +
                                  "/bin:$PATH OUT=" + dir +
                                  "/out SAMPLE=6 CARB=" CARB_BINARY
                                  " SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_MIN=1 "
                                  "SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_STEP=1 "
                                  "SLURM_ARRAY_TASK_COUNT=3 ";
  int selected_in_shards = 0;
  for (int task = 1; task <= 3; ++task) {
    const auto result = run_shell(environment + "SLURM_ARRAY_TASK_ID=" + std::to_string(task) +
                                  " bash examples/slurm/profile-array.sh --min-time 0.02 "
                                  "--max-time 0.2 --target-ci 0.5 --idle-window 0.1 2>/dev/null");
    ASSERT_EQ(result.exit_code, 0) << result.out;
    const std::string shard = std::to_string(task - 1) + "/3";
    const std::size_t at = result.out.find(" in shard " + shard);
    ASSERT_NE(at, std::string::npos) << result.out;
    const std::size_t count_at = result.out.rfind("selected, ", at) + 10;
    selected_in_shards += std::stoi(result.out.substr(count_at));
    EXPECT_NE(result.out.find("into " + dir + "/out/shard-" + std::to_string(task - 1) + ".sqlite"),
              std::string::npos)
        << result.out;
  }
  EXPECT_EQ(selected_in_shards, 6);

  // Only the first task submitted the merge, after the whole array.
  std::ifstream args_file(dir + "/sbatch.args");
  std::stringstream args;
  args << args_file.rdbuf();
  EXPECT_NE(args.str().find("--dependency=afterany:77\n"), std::string::npos) << args.str();
  const std::size_t wrap = args.str().find("--wrap=");
  ASSERT_NE(wrap, std::string::npos) << args.str();
  EXPECT_EQ(args.str().find("--wrap=", wrap + 1), std::string::npos) << args.str();
  const std::string merge_command =
      args.str().substr(wrap + 7, args.str().find('\n', wrap) - wrap - 7);
  const auto merged = run_shell("cd " CARB_SOURCE_DIR " && sh -c \"" + merge_command + "\"");
  ASSERT_EQ(merged.exit_code, 0) << merged.out;
  const auto count = run_shell("sqlite3 " + dir +
                               "/out/campaign.sqlite 'SELECT count(*), count(DISTINCT "
                               "configuration_key), sum(status = \"ok\") FROM measurements'");
  EXPECT_EQ(count.out, "6|6|6\n");
}

}  // namespace
