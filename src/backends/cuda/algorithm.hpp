// Choosing cuDNN's convolution algorithm, and the cache of algorithms found by timing them
// (--cudnn-find). Pure functions and a file format, tested without a GPU.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace carb::cuda {

/// The largest workspace a convolution may take, bytes: a fixed bound, so the heuristic choice
/// does not depend on how much memory happens to be free.
inline constexpr std::int64_t kMaxWorkspaceBytes = std::int64_t{1} << 30;

/// cuDNN's name for an algorithm without its prefix, e.g. "IMPLICIT_PRECOMP_GEMM".
std::string_view algorithm_name(cudnnConvolutionFwdAlgo_t algorithm);
/// The algorithm with that name; nullopt for an unknown name.
std::optional<cudnnConvolutionFwdAlgo_t> parse_algorithm(std::string_view name);
/// "default", "tensor_op", "tensor_op_allow_conversion" or "fma".
std::string_view math_name(cudnnMathType_t math);
std::optional<cudnnMathType_t> parse_math(std::string_view name);

/// The first of `candidates` (in cuDNN's order: heuristics rank by expected speed, a search by
/// measured time) that succeeded, needs at most `workspace_limit_bytes`, and whose math type
/// is allowed: for fp32 not a tensor-op math (carb's fp32 is IEEE single precision, never TF32;
/// the session then runs the algorithm with CUDNN_FMA_MATH), for fp16 and bf16 any. nullopt
/// when none qualifies.
std::optional<std::size_t> choose_algorithm(
    std::span<const cudnnConvolutionFwdAlgoPerf_t> candidates, std::int64_t workspace_limit_bytes,
    bool fp32);

/// The math types a convolution's algorithms are asked for, in order: fp32 only FMA (IEEE single
/// precision); fp16 and bf16 tensor-op math first, then default math, because cuDNN may offer no
/// tensor-op algorithm for channel counts its tensor-core kernels do not take (3, 6, 13, 51).
std::vector<cudnnMathType_t> math_attempts(bool fp32);

/// An algorithm chosen over math_attempts(): the candidate, the math type the descriptor was set
/// to when cuDNN offered it, and the math type it runs with (FMA for fp32, else the candidate's).
struct AlgorithmChoice {
  cudnnConvolutionFwdAlgoPerf_t candidate{};
  cudnnMathType_t asked = CUDNN_DEFAULT_MATH;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t rank = 0;      ///< its place among that attempt's candidates, from 0
  std::size_t returned = 0;  ///< how many candidates that attempt returned
  bool fell_back = false;    ///< whether an earlier math type offered nothing usable
};

/// For each of math_attempts(fp32) in turn, `query` sets the convolution's math type and returns
/// cuDNN's candidates (empty when cuDNN refused the request); the first attempt with a usable
/// candidate (choose_algorithm) wins. nullopt when none has one; `offered` then counts what
/// every attempt returned.
std::optional<AlgorithmChoice> choose_algorithm_over_maths(
    const std::function<std::vector<cudnnConvolutionFwdAlgoPerf_t>(cudnnMathType_t)>& query,
    std::int64_t workspace_limit_bytes, bool fp32, std::size_t* offered = nullptr);

/// What identifies a convolution for the find cache: its shapes, element type, layout and math,
/// the GPU model and the cuDNN version. Two configurations with the same convolution share it.
struct ConvolutionKey {
  int n = 0, c = 0, h = 0, w = 0;  ///< input
  int k = 0, r = 0, s = 0;         ///< output channels, window
  int stride = 1, padding = 0;
  std::string data_type;  ///< "fp32", "fp16", "bf16"
  std::string layout;     ///< "nchw", "nhwc"
  std::string gpu;        ///< GPU name and compute capability, e.g. "NVIDIA H200 sm_90"
  std::string cudnn;      ///< cuDNN version, e.g. "9.19.0"

  /// One line without tabs, e.g. "n8 c64 h56 w56 k64 r3 s3 u1 p1 fp16 nhwc|NVIDIA H200
  /// sm_90|cuDNN 9.19.0".
  std::string to_string() const;
};

/// The algorithm a search found for one convolution.
struct FoundAlgorithm {
  cudnnConvolutionFwdAlgo_t algorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::int64_t workspace_bytes = 0;
  double time_ms = 0;  ///< what the search measured
};

/// One cache line: key, algorithm, math, workspace bytes, time, tab-separated.
std::string format_cache_line(const std::string& key, const FoundAlgorithm& found);
/// The key and algorithm of a cache line; nullopt when it is malformed.
std::optional<std::pair<std::string, FoundAlgorithm>> parse_cache_line(std::string_view line);

/// A file of found algorithms shared by every worker of a campaign (and later campaigns): read
/// once when opened, appended a line at a time under an exclusive flock, so concurrent workers
/// never interleave lines. A later line for a key wins.
class AlgorithmCache {
 public:
  /// Reads `file` when it exists. Throws carb::Error (input) naming file:line for a malformed
  /// line, (runtime) when it cannot be read.
  explicit AlgorithmCache(std::filesystem::path file);

  const std::filesystem::path& file() const { return file_; }
  std::optional<FoundAlgorithm> find(const std::string& key) const;
  /// Appends the line (creating the file and its folder) and remembers it. Throws carb::Error
  /// (runtime) when the file cannot be written.
  void store(const std::string& key, const FoundAlgorithm& found);

 private:
  std::filesystem::path file_;
  std::map<std::string, FoundAlgorithm> entries_;
};

/// $XDG_CACHE_HOME/carb/cudnn-find.tsv, else ~/.cache/carb/cudnn-find.tsv.
std::filesystem::path default_algorithm_cache_file();

}  // namespace carb::cuda
