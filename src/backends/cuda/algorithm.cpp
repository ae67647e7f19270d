#include "algorithm.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "carb/error.hpp"

namespace carb::cuda {

namespace {

constexpr std::array<std::pair<cudnnConvolutionFwdAlgo_t, std::string_view>, 8> kAlgorithms = {{
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM"},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "IMPLICIT_PRECOMP_GEMM"},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "GEMM"},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "DIRECT"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "FFT"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "FFT_TILING"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "WINOGRAD"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED"},
}};

constexpr std::array<std::pair<cudnnMathType_t, std::string_view>, 4> kMaths = {{
    {CUDNN_DEFAULT_MATH, "default"},
    {CUDNN_TENSOR_OP_MATH, "tensor_op"},
    {CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, "tensor_op_allow_conversion"},
    {CUDNN_FMA_MATH, "fma"},
}};

template <typename Value, std::size_t N>
std::string_view name_in(const std::array<std::pair<Value, std::string_view>, N>& table,
                         Value value) {
  for (const auto& [known, name] : table) {
    if (known == value) return name;
  }
  return "unknown";
}

template <typename Value, std::size_t N>
std::optional<Value> value_in(const std::array<std::pair<Value, std::string_view>, N>& table,
                              std::string_view name) {
  for (const auto& [value, known] : table) {
    if (known == name) return value;
  }
  return std::nullopt;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    fields.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

template <typename Number>
std::optional<Number> parse_number(std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string_view algorithm_name(cudnnConvolutionFwdAlgo_t algorithm) {
  return name_in(kAlgorithms, algorithm);
}

std::optional<cudnnConvolutionFwdAlgo_t> parse_algorithm(std::string_view name) {
  return value_in(kAlgorithms, name);
}

std::string_view math_name(cudnnMathType_t math) { return name_in(kMaths, math); }

std::optional<cudnnMathType_t> parse_math(std::string_view name) { return value_in(kMaths, name); }

std::optional<std::size_t> choose_algorithm(
    std::span<const cudnnConvolutionFwdAlgoPerf_t> candidates, std::int64_t workspace_limit_bytes,
    bool fp32) {
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& candidate = candidates[i];
    if (candidate.status != CUDNN_STATUS_SUCCESS) continue;
    if (static_cast<std::int64_t>(candidate.memory) > workspace_limit_bytes) continue;
    if (fp32 && (candidate.mathType == CUDNN_TENSOR_OP_MATH ||
                 candidate.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) {
      continue;
    }
    return i;
  }
  return std::nullopt;
}

std::vector<cudnnMathType_t> math_attempts(bool fp32) {
  if (fp32) return {CUDNN_FMA_MATH};
  return {CUDNN_TENSOR_OP_MATH, CUDNN_DEFAULT_MATH};
}

std::optional<AlgorithmChoice> choose_algorithm_over_maths(
    const std::function<std::vector<cudnnConvolutionFwdAlgoPerf_t>(cudnnMathType_t)>& query,
    std::int64_t workspace_limit_bytes, bool fp32, std::size_t* offered) {
  std::size_t total = 0;
  bool fell_back = false;
  for (const cudnnMathType_t asked : math_attempts(fp32)) {
    const std::vector<cudnnConvolutionFwdAlgoPerf_t> candidates = query(asked);
    total += candidates.size();
    if (const auto chosen = choose_algorithm(candidates, workspace_limit_bytes, fp32)) {
      AlgorithmChoice choice;
      choice.candidate = candidates[*chosen];
      choice.asked = asked;
      choice.math = fp32 ? CUDNN_FMA_MATH : choice.candidate.mathType;
      choice.rank = *chosen;
      choice.returned = candidates.size();
      choice.fell_back = fell_back;
      return choice;
    }
    fell_back = true;
  }
  if (offered != nullptr) *offered = total;
  return std::nullopt;
}

std::string ConvolutionKey::to_string() const {
  std::ostringstream text;
  text << "n" << n << " c" << c << " h" << h << " w" << w << " k" << k << " r" << r << " s" << s
       << " u" << stride << " p" << padding << " " << data_type << " " << layout << "|" << gpu
       << "|cuDNN " << cudnn;
  return text.str();
}

std::string format_cache_line(const std::string& key, const FoundAlgorithm& found) {
  CARB_CHECK(key.find('\t') == std::string::npos && key.find('\n') == std::string::npos,
             "a cache key holds a tab or newline");
  std::ostringstream line;
  line << key << '\t' << algorithm_name(found.algorithm) << '\t' << math_name(found.math) << '\t'
       << found.workspace_bytes << '\t' << found.time_ms;
  return line.str();
}

std::optional<std::pair<std::string, FoundAlgorithm>> parse_cache_line(std::string_view line) {
  const std::vector<std::string_view> fields = split(line, '\t');
  if (fields.size() != 5 || fields[0].empty()) return std::nullopt;
  FoundAlgorithm found;
  const auto algorithm = parse_algorithm(fields[1]);
  const auto math = parse_math(fields[2]);
  const auto workspace = parse_number<std::int64_t>(fields[3]);
  const auto time = parse_number<double>(fields[4]);
  if (!algorithm || !math || !workspace || *workspace < 0 || !time || !(*time >= 0)) {
    return std::nullopt;
  }
  found.algorithm = *algorithm;
  found.math = *math;
  found.workspace_bytes = *workspace;
  found.time_ms = *time;
  return std::make_pair(std::string(fields[0]), found);
}

AlgorithmCache::AlgorithmCache(std::filesystem::path file) : file_(std::move(file)) {
  const int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return;  // no cache yet: the first store() creates it
    throw Error(ErrorCategory::kRuntime,
                file_.string() + ": cannot read the cuDNN find cache: " + std::strerror(errno));
  }
  // A shared lock: a writer holds an exclusive one while it appends, so no line is read torn.
  std::string text;
  char buffer[65536];
  bool failed = ::flock(fd, LOCK_SH) != 0;
  while (!failed) {
    const ssize_t count = ::read(fd, buffer, sizeof buffer);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      failed = count < 0;
      break;
    }
    text.append(buffer, static_cast<std::size_t>(count));
  }
  const std::string reason = failed ? std::strerror(errno) : "";
  ::close(fd);
  if (failed) {
    throw Error(ErrorCategory::kRuntime,
                file_.string() + ": cannot read the cuDNN find cache: " + reason);
  }
  int number = 0;
  for (const std::string_view line : split(text, '\n')) {
    ++number;
    if (line.empty()) continue;
    auto parsed = parse_cache_line(line);
    if (!parsed) {
      throw input_error_at(file_.string(), number, 1,
                           "not a cuDNN find cache line (key, algorithm, math, workspace bytes, "
                           "time ms, tab-separated); delete the file to start a new cache");
    }
    entries_[parsed->first] = parsed->second;
  }
}

std::optional<FoundAlgorithm> AlgorithmCache::find(const std::string& key) const {
  const auto found = entries_.find(key);
  if (found == entries_.end()) return std::nullopt;
  return found->second;
}

void AlgorithmCache::store(const std::string& key, const FoundAlgorithm& found) {
  const std::string line = format_cache_line(key, found) + "\n";
  std::error_code error;
  if (file_.has_parent_path()) std::filesystem::create_directories(file_.parent_path(), error);
  const int fd = ::open(file_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw Error(ErrorCategory::kRuntime,
                file_.string() + ": cannot " + what + " the cuDNN find cache: " + reason);
  };
  if (fd < 0) fail("open");
  if (::flock(fd, LOCK_EX) != 0) fail("lock");
  std::size_t written = 0;
  while (written < line.size()) {
    const ssize_t count = ::write(fd, line.data() + written, line.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) fail("write");
    written += static_cast<std::size_t>(count);
  }
  ::close(fd);  // releases the lock
  entries_[key] = found;
}

std::filesystem::path default_algorithm_cache_file() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::filesystem::path(xdg) / "carb" / "cudnn-find.tsv";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr && *home != '\0' ? home : ".") / ".cache" / "carb" /
         "cudnn-find.tsv";
}

}  // namespace carb::cuda
