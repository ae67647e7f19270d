// cuDNN algorithm choice and the --cudnn-find cache. The candidate lists are written in the shape
// cudnnGetConvolutionForwardAlgorithm_v7 returns them (synthetic values: no GPU here); the cache
// tests use real files in a temporary folder, and real processes for concurrent appends.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "carb/error.hpp"
#include "cuda/algorithm.hpp"

namespace carb::cuda {
namespace {

namespace fs = std::filesystem;

cudnnConvolutionFwdAlgoPerf_t candidate(cudnnConvolutionFwdAlgo_t algorithm, cudnnStatus_t status,
                                        std::size_t memory, cudnnMathType_t math) {
  cudnnConvolutionFwdAlgoPerf_t perf{};
  perf.algo = algorithm;
  perf.status = status;
  perf.time = -1;
  perf.memory = memory;
  perf.mathType = math;
  return perf;
}

class TemporaryFolder {
 public:
  TemporaryFolder() {
    char pattern[] = "/tmp/carb-cuda-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TemporaryFolder() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(ChooseAlgorithm, TakesTheFirstUsableInCudnnsOrder) {
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> candidates = {
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_STATUS_NOT_SUPPORTED, 0,
                CUDNN_TENSOR_OP_MATH),
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_SUCCESS, std::size_t{3} << 30,
                CUDNN_TENSOR_OP_MATH),
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, 4096,
                CUDNN_TENSOR_OP_MATH),
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, 0,
                CUDNN_DEFAULT_MATH),
  };
  // The unsupported one and the one over the workspace cap are skipped.
  EXPECT_EQ(choose_algorithm(candidates, kMaxWorkspaceBytes, false), 2u);
  // With a tiny cap only the workspace-free one remains.
  EXPECT_EQ(choose_algorithm(candidates, 1024, false), 3u);
  EXPECT_EQ(choose_algorithm({}, kMaxWorkspaceBytes, false), std::nullopt);
}

TEST(ChooseAlgorithm, Fp32NeverTakesTensorOpMath) {
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> candidates = {
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, 0,
                CUDNN_TENSOR_OP_MATH),
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_SUCCESS, 0,
                CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, CUDNN_STATUS_SUCCESS, 1 << 20,
                CUDNN_FMA_MATH),
  };
  EXPECT_EQ(choose_algorithm(candidates, kMaxWorkspaceBytes, true), 2u);
  EXPECT_EQ(choose_algorithm(candidates, kMaxWorkspaceBytes, false), 0u);
  EXPECT_EQ(choose_algorithm(std::span(candidates).first(2), kMaxWorkspaceBytes, true),
            std::nullopt);
}

// A query that answers with `by_math`'s list for each math type it is asked under, and records
// the order it was asked in.
struct ScriptedQuery {
  std::map<cudnnMathType_t, std::vector<cudnnConvolutionFwdAlgoPerf_t>> by_math;
  std::vector<cudnnMathType_t> asked;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> operator()(cudnnMathType_t math) {
    asked.push_back(math);
    const auto found = by_math.find(math);
    return found == by_math.end() ? std::vector<cudnnConvolutionFwdAlgoPerf_t>{} : found->second;
  }
};

TEST(ChooseAlgorithmOverMaths, HalfPrecisionTakesTensorOpMathWhenOffered) {
  ScriptedQuery query;
  query.by_math[CUDNN_TENSOR_OP_MATH] = {
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_STATUS_NOT_SUPPORTED, 0,
                CUDNN_TENSOR_OP_MATH),
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, 0,
                CUDNN_TENSOR_OP_MATH)};
  const auto choice = choose_algorithm_over_maths(std::ref(query), kMaxWorkspaceBytes, false);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->candidate.algo, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  EXPECT_EQ(choice->math, CUDNN_TENSOR_OP_MATH);
  EXPECT_EQ(choice->asked, CUDNN_TENSOR_OP_MATH);
  EXPECT_EQ(choice->rank, 1u);
  EXPECT_EQ(choice->returned, 2u);
  EXPECT_FALSE(choice->fell_back);
  // Default math was never asked for.
  EXPECT_EQ(query.asked, std::vector<cudnnMathType_t>{CUDNN_TENSOR_OP_MATH});
}

TEST(ChooseAlgorithmOverMaths, OddChannelsInHalfPrecisionFallBackToDefaultMath) {
  // What cuDNN may answer for fp16 with 3 or 13 channels: every tensor-op candidate unsupported
  // (or none at all); under default math a plain implicit GEMM.
  for (const bool none_at_all : {false, true}) {
    ScriptedQuery query;
    if (!none_at_all) {
      query.by_math[CUDNN_TENSOR_OP_MATH] = {
          candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                    CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_TENSOR_OP_MATH),
          candidate(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_SUCCESS,
                    std::size_t{4} << 30, CUDNN_TENSOR_OP_MATH)};  // over the workspace cap
    }
    query.by_math[CUDNN_DEFAULT_MATH] = {candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                   CUDNN_STATUS_SUCCESS, 0, CUDNN_DEFAULT_MATH)};
    std::size_t offered = 99;
    const auto choice =
        choose_algorithm_over_maths(std::ref(query), kMaxWorkspaceBytes, false, &offered);
    ASSERT_TRUE(choice.has_value()) << none_at_all;
    EXPECT_EQ(choice->candidate.algo, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
    EXPECT_EQ(choice->math, CUDNN_DEFAULT_MATH);
    EXPECT_EQ(choice->asked, CUDNN_DEFAULT_MATH);
    EXPECT_TRUE(choice->fell_back);
    EXPECT_EQ(offered, 99u);  // only set when nothing was found
    EXPECT_EQ(query.asked,
              (std::vector<cudnnMathType_t>{CUDNN_TENSOR_OP_MATH, CUDNN_DEFAULT_MATH}));
  }
}

TEST(ChooseAlgorithmOverMaths, Fp32AsksOnlyForFmaAndRunsWithIt) {
  ScriptedQuery query;
  query.by_math[CUDNN_FMA_MATH] = {
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, 0,
                CUDNN_TENSOR_OP_MATH),  // skipped: fp32 is never TF32
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_STATUS_SUCCESS, 0, CUDNN_DEFAULT_MATH)};
  const auto choice = choose_algorithm_over_maths(std::ref(query), kMaxWorkspaceBytes, true);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->candidate.algo, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD);
  EXPECT_EQ(choice->math, CUDNN_FMA_MATH);
  EXPECT_EQ(query.asked, std::vector<cudnnMathType_t>{CUDNN_FMA_MATH});
}

TEST(ChooseAlgorithmOverMaths, NothingUsableUnderAnyMathCountsWhatWasOffered) {
  ScriptedQuery query;
  query.by_math[CUDNN_TENSOR_OP_MATH] = {candidate(
      CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_TENSOR_OP_MATH)};
  query.by_math[CUDNN_DEFAULT_MATH] = {
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_DEFAULT_MATH),
      candidate(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_NOT_SUPPORTED, 0, CUDNN_DEFAULT_MATH)};
  std::size_t offered = 0;
  EXPECT_EQ(choose_algorithm_over_maths(std::ref(query), kMaxWorkspaceBytes, false, &offered),
            std::nullopt);
  EXPECT_EQ(offered, 3u);
}

TEST(AlgorithmNames, RoundTripEveryAlgorithmAndMath) {
  for (int value = 0; value < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++value) {
    const auto algorithm = static_cast<cudnnConvolutionFwdAlgo_t>(value);
    EXPECT_EQ(parse_algorithm(algorithm_name(algorithm)), algorithm) << value;
  }
  EXPECT_EQ(algorithm_name(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),
            "IMPLICIT_PRECOMP_GEMM");
  for (cudnnMathType_t math : {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH,
                               CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, CUDNN_FMA_MATH}) {
    EXPECT_EQ(parse_math(math_name(math)), math);
  }
  EXPECT_EQ(parse_algorithm("FASTEST"), std::nullopt);
  EXPECT_EQ(parse_math("tf32"), std::nullopt);
}

ConvolutionKey h200_key() {
  ConvolutionKey key;
  key.n = 8, key.c = 64, key.h = 56, key.w = 56;
  key.k = 64, key.r = 3, key.s = 3, key.stride = 1, key.padding = 1;
  key.data_type = "fp16";
  key.layout = "nhwc";
  key.gpu = "NVIDIA H200 sm_90";
  key.cudnn = "9.19.0";
  return key;
}

TEST(ConvolutionKey, NamesShapesTypeLayoutGpuAndCudnn) {
  EXPECT_EQ(h200_key().to_string(),
            "n8 c64 h56 w56 k64 r3 s3 u1 p1 fp16 nhwc|NVIDIA H200 sm_90|cuDNN 9.19.0");
  ConvolutionKey other = h200_key();
  other.cudnn = "9.20.0";
  EXPECT_NE(other.to_string(), h200_key().to_string());
  other = h200_key();
  other.stride = 2;
  EXPECT_NE(other.to_string(), h200_key().to_string());
}

TEST(CacheLine, FormatsAndParsesBack) {
  const FoundAlgorithm found{CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, CUDNN_TENSOR_OP_MATH,
                             12'345'678, 0.0417};
  const std::string line = format_cache_line(h200_key().to_string(), found);
  EXPECT_EQ(line, h200_key().to_string() + "\tWINOGRAD_NONFUSED\ttensor_op\t12345678\t0.0417");
  const auto parsed = parse_cache_line(line);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->first, h200_key().to_string());
  EXPECT_EQ(parsed->second.algorithm, found.algorithm);
  EXPECT_EQ(parsed->second.math, found.math);
  EXPECT_EQ(parsed->second.workspace_bytes, found.workspace_bytes);
  EXPECT_DOUBLE_EQ(parsed->second.time_ms, found.time_ms);
}

TEST(CacheLine, RejectsMalformedLines) {
  const std::string key = h200_key().to_string();
  for (const std::string& line :
       {key, key + "\tGEMM\tdefault\t0", key + "\tGEMM\tdefault\t0\t1\textra",
        key + "\tFASTEST\tdefault\t0\t1", key + "\tGEMM\ttf32\t0\t1",
        key + "\tGEMM\tdefault\t-5\t1", key + "\tGEMM\tdefault\t12x\t1",
        key + "\tGEMM\tdefault\t0\tnan", std::string("\tGEMM\tdefault\t0\t1")}) {
    EXPECT_EQ(parse_cache_line(line), std::nullopt) << line;
  }
}

TEST(AlgorithmCache, StoresAndFindsAcrossOpenings) {
  TemporaryFolder folder;
  const fs::path file = folder.path() / "nested" / "cudnn-find.tsv";
  {
    AlgorithmCache cache(file);
    EXPECT_EQ(cache.find("a"), std::nullopt);
    cache.store("a", {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_DEFAULT_MATH, 0, 1.5});
    cache.store("b", {CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_FMA_MATH, 1 << 20, 2.5});
    // A later line for the same key wins.
    cache.store("a", {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, CUDNN_DEFAULT_MATH, 0, 1.0});
    EXPECT_EQ(cache.find("a")->algorithm, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT);
  }
  const AlgorithmCache reopened(file);
  ASSERT_TRUE(reopened.find("a").has_value());
  EXPECT_EQ(reopened.find("a")->algorithm, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT);
  EXPECT_EQ(reopened.find("b")->workspace_bytes, 1 << 20);
  EXPECT_EQ(reopened.find("c"), std::nullopt);
}

TEST(AlgorithmCache, MalformedFileIsAnErrorAtItsLine) {
  TemporaryFolder folder;
  const fs::path file = folder.path() / "cache.tsv";
  std::ofstream(file) << "k1\tGEMM\tdefault\t0\t1\n\nk2\tGEMM\n";
  try {
    AlgorithmCache cache(file);
    FAIL() << "a malformed cache was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(error.what()).find(file.string() + ":3:1: not a cuDNN find cache line"),
              std::string::npos)
        << error.what();
  }
}

TEST(AlgorithmCache, ConcurrentWritersNeverInterleaveLines) {
  TemporaryFolder folder;
  const fs::path file = folder.path() / "cache.tsv";
  constexpr int kWriters = 4;
  constexpr int kLines = 200;
  std::vector<pid_t> children;
  for (int writer = 0; writer < kWriters; ++writer) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      AlgorithmCache cache(file);
      // Long keys make each line far larger than one write of a small buffer would be.
      const std::string padding(300, 'x');
      for (int line = 0; line < kLines; ++line) {
        cache.store("writer" + std::to_string(writer) + " line" + std::to_string(line) + padding,
                    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_DEFAULT_MATH, line, 0.5});
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const AlgorithmCache merged(file);  // throws on any torn line
  for (int writer = 0; writer < kWriters; ++writer) {
    for (int line = 0; line < kLines; line += 37) {
      const auto found = merged.find("writer" + std::to_string(writer) + " line" +
                                     std::to_string(line) + std::string(300, 'x'));
      ASSERT_TRUE(found.has_value());
      EXPECT_EQ(found->workspace_bytes, line);
    }
  }
}

TEST(AlgorithmCache, DefaultFileFollowsXdgCacheHome) {
  const char* saved = std::getenv("XDG_CACHE_HOME");
  const std::string restore = saved != nullptr ? saved : "";
  ::setenv("XDG_CACHE_HOME", "/var/cache/someone", 1);
  EXPECT_EQ(default_algorithm_cache_file(), fs::path("/var/cache/someone/carb/cudnn-find.tsv"));
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_algorithm_cache_file().filename(), "cudnn-find.tsv");
  EXPECT_NE(default_algorithm_cache_file().string().find("/.cache/carb/"), std::string::npos);
  if (saved != nullptr) ::setenv("XDG_CACHE_HOME", restore.c_str(), 1);
}

}  // namespace
}  // namespace carb::cuda
