// Per-configuration isolation: the parent starts a worker process, sends it configurations one
// at a time, reads each JSON result and turns a crash, a kill or a timeout into a status row.
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/measure.hpp"

namespace carb {

namespace {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::pair<Fd, Fd> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(ErrorCategory::kRuntime, std::string("pipe2 failed: ") + std::strerror(errno));
  }
  return {Fd(fds[0]), Fd(fds[1])};
}

std::string signal_name(int signal) {
  const char* name = sigabbrev_np(signal);
  return name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

// The last few lines of a worker's stderr, on one line, for a status detail.
std::string tail_of(const std::string& text) {
  constexpr std::size_t kTailBytes = 600;
  std::string tail = text.size() > kTailBytes ? text.substr(text.size() - kTailBytes) : text;
  for (char& c : tail) {
    if (c == '\n') c = ' ';
  }
  while (!tail.empty() && tail.back() == ' ') tail.pop_back();
  return tail;
}

Measurement failure(MeasurementStatus status, std::string detail) {
  Measurement measurement;
  measurement.status = status;
  measurement.detail = std::move(detail);
  return measurement;
}

}  // namespace

// A running worker: its process group, the request socket (its stdin) and its output pipes.
struct WorkerProcess::Running {
  pid_t pid = -1;
  Fd requests;        ///< our end of the worker's stdin (a socket: a dead reader is EPIPE)
  Fd out;             ///< the worker's stdout: one result line per request
  Fd err;             ///< the worker's stderr
  std::string lines;  ///< stdout read past the last complete line
  int measured = 0;
  bool reusable = true;
  std::int64_t memory_limit_bytes = 0;  ///< the RLIMIT_AS it started under
};

WorkerProcess::WorkerProcess(WorkerCommand command, std::string device_id)
    : command_(std::move(command)), device_id_(std::move(device_id)) {}

WorkerProcess::~WorkerProcess() { stop(); }

// An idle worker keeps no state worth a goodbye: it is killed and reaped.
void WorkerProcess::stop() {
  if (!running_) return;
  ::kill(-running_->pid, SIGKILL);
  int status = 0;
  while (::waitpid(running_->pid, &status, 0) < 0 && errno == EINTR) {
  }
  running_.reset();
}

Measurement WorkerProcess::measure(const Config& config, const Protocol& protocol,
                                   const std::function<bool()>& stop_requested) {
  // A fresh process after protocol.worker_reuse configurations, where the worker cannot reset
  // its peak-RSS mark, for another memory limit, or when it died while idle.
  if (running_) {
    int status = 0;
    if (::waitpid(running_->pid, &status, WNOHANG) == running_->pid) {
      running_.reset();  // it died while idle, and is reaped now: nothing left to kill
    } else if (running_->measured >= std::max(1, protocol.worker_reuse) || !running_->reusable ||
               running_->memory_limit_bytes != protocol.worker_memory_limit_bytes) {
      stop();
    }
  }
  if (!running_) running_ = start(command_, device_id_, protocol.worker_memory_limit_bytes);
  Running& worker = *running_;

  nlohmann::json message = {{"key", to_key(config)}, {"protocol", protocol.to_json()}};
  // An imported configuration's architecture travels with it: the worker is another process.
  if (config.imported()) {
    const auto architecture = find_architecture(config.architecture);
    if (!architecture) {
      throw Error(ErrorCategory::kInput, "configuration " + to_key(config) + ": architecture " +
                                             config.architecture + " is not loaded");
    }
    message["architecture"] = architecture_to_json(*architecture);
  }
  const std::string request = message.dump() + "\n";
  bool sent = true;
  for (std::size_t at = 0; at < request.size();) {
    const ssize_t count =
        ::send(worker.requests.get(), request.data() + at, request.size() - at, MSG_NOSIGNAL);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      sent = false;  // the worker is gone: what it left says why
      break;
    }
    at += static_cast<std::size_t>(count);
  }

  std::string err;
  const auto deadline = Clock::now() + std::chrono::duration<double>(protocol.timeout_s);
  bool timed_out = false;
  pollfd fds[2] = {{worker.out.get(), POLLIN, 0}, {worker.err.get(), POLLIN, 0}};
  int open_fds = 2;
  char buffer[65536];
  // Until a whole result line, or until the worker closes both outputs (it ended).
  while (open_fds > 0 && (worker.lines.find('\n') == std::string::npos || !sent)) {
    if (stop_requested && stop_requested()) {
      stop();
      throw MeasurementStopped();
    }
    const auto remaining_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (remaining_ms <= 0) {
      timed_out = true;
      break;
    }
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(remaining_ms, 1000)));
    if (ready < 0 && errno != EINTR) {
      throw Error(ErrorCategory::kRuntime, std::string("poll failed: ") + std::strerror(errno));
    }
    for (int i = 0; i < 2 && ready > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t count = ::read(fds[i].fd, buffer, sizeof buffer);
      if (count > 0) {
        (i == 0 ? worker.lines : err).append(buffer, static_cast<std::size_t>(count));
      } else if (count == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }

  if (const std::size_t newline = worker.lines.find('\n');
      sent && !timed_out && newline != std::string::npos) {
    const std::string line = worker.lines.substr(0, newline);
    worker.lines.erase(0, newline + 1);
    ++worker.measured;
    try {
      const nlohmann::json result = nlohmann::json::parse(line);
      worker.reusable = result.at("reusable").get<bool>();
      return Measurement::from_json(result.at("measurement"));
    } catch (const nlohmann::json::exception& error) {
      stop();
      return failure(MeasurementStatus::kError,
                     std::string("worker wrote no valid result: ") + error.what());
    } catch (const Error& error) {
      stop();
      return failure(MeasurementStatus::kError, error.what());
    }
  }

  // No result: the worker hung, or ended (crashed, was killed, or failed).
  const pid_t pid = worker.pid;
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  running_.reset();
  if (timed_out) {
    return failure(MeasurementStatus::kTimeout,
                   "no result after " + std::to_string(protocol.timeout_s) + " s; worker killed");
  }
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    if (signal == SIGKILL) {
      return failure(MeasurementStatus::kOom,
                     "worker killed by SIGKILL (the kernel's OOM killer, or another process)");
    }
    std::string detail = "worker died of " + signal_name(signal);
    if (!err.empty()) detail += "; stderr: " + tail_of(err);
    return failure(MeasurementStatus::kCrashed, detail);
  }
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (exit_code != 0) {
    return failure(MeasurementStatus::kError,
                   "worker exited with code " + std::to_string(exit_code) + ": " + tail_of(err));
  }
  return failure(MeasurementStatus::kError, "worker ended without a result: " + tail_of(err));
}

std::unique_ptr<WorkerProcess::Running> WorkerProcess::start(const WorkerCommand& command,
                                                             const std::string& device_id,
                                                             std::int64_t memory_limit_bytes) {
  std::vector<std::string> arguments = {command.executable};
  arguments.insert(arguments.end(), command.arguments.begin(), command.arguments.end());
  arguments.push_back("--device");  // flag-ok: the argument the worker verb reads, not a message
  arguments.push_back(device_id);
  std::vector<char*> argv;
  argv.reserve(arguments.size() + 1);
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    throw Error(ErrorCategory::kRuntime, std::string("socketpair failed: ") + std::strerror(errno));
  }
  Fd requests(sockets[0]);
  Fd requests_read(sockets[1]);
  auto [out_read, out_write] = make_pipe();
  auto [err_read, err_write] = make_pipe();
  const pid_t parent = ::getpid();
  const rlimit memory_limit{static_cast<rlim_t>(memory_limit_bytes),
                            static_cast<rlim_t>(memory_limit_bytes)};
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error(ErrorCategory::kRuntime, std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    // A worker never outlives its campaign: when carb profile dies (kill -9 included), the
    // kernel kills the worker, which would otherwise run on unwatched, a hung one forever.
    // The parent may have died before the request took effect, hence the check after it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (memory_limit_bytes > 0) ::setrlimit(RLIMIT_AS, &memory_limit);
    ::dup2(requests_read.get(), STDIN_FILENO);
    ::dup2(out_write.get(), STDOUT_FILENO);
    ::dup2(err_write.get(), STDERR_FILENO);
    ::execv(argv[0], argv.data());
    const char message[] = "carb worker: exec failed\n";
    [[maybe_unused]] auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(127);
  }
  auto running = std::make_unique<WorkerProcess::Running>();
  running->pid = pid;
  running->requests = std::move(requests);
  running->out = std::move(out_read);
  running->err = std::move(err_read);
  running->memory_limit_bytes = memory_limit_bytes;
  return running;
}

Measurement measure_in_worker(const WorkerCommand& command, const std::string& device_id,
                              const Config& config, const Protocol& protocol) {
  WorkerProcess worker(command, device_id);
  return worker.measure(config, protocol);
}

std::unique_ptr<EnergyMeter> open_energy_meter(const DeviceInfo& device) {
  if (device.kind == "cpu") {
    const char* root = std::getenv(kTelemetryRootVariable);
    return open_cpu_energy_meter(root != nullptr && *root != '\0' ? root : "/");
  }
  if (device.kind == "cuda") return open_nvml_energy_meter(device.uuid);
  return std::make_unique<NoSensorMeter>("no energy meter for " + device.kind +
                                         " devices in this build");
}

std::unique_ptr<GpuMonitor> open_device_monitor(const DeviceInfo& device) {
  if (device.kind == "cuda") return open_gpu_monitor(device.uuid);
  return nullptr;
}

namespace {

// One request line: {"key": ..., "protocol": {...}}, with "architecture" for an imported one.
std::pair<Config, Protocol> parse_request(const std::string& line) {
  nlohmann::json request;
  try {
    request = nlohmann::json::parse(line);
    if (request.contains("architecture")) {
      (void)register_architecture(
          architecture_from_json(request.at("architecture"), "worker request"));
    }
    return {parse_key(request.at("key").get<std::string>()),
            Protocol::from_json(request.at("protocol"))};
  } catch (const nlohmann::json::exception& error) {
    throw Error(ErrorCategory::kInput,
                std::string("worker request is not {\"key\", \"protocol\"}: ") + error.what());
  }
}

}  // namespace

int worker_main(const std::string& device_id) {
  // Only the device's own backend: a CPU worker never initialises CUDA.
  const std::unique_ptr<Backend> backend = make_backend_for(device_id);
  for (const auto& device : backend->devices()) {
    if (device->info().id != device_id) continue;
    const std::unique_ptr<EnergyMeter> meter = open_energy_meter(device->info());
    const std::unique_ptr<GpuMonitor> monitor = open_device_monitor(device->info());
    // Each configuration's peak RSS is its own only if the mark can be lowered before it;
    // where it cannot, every configuration needs a fresh process ("reusable": false).
    std::string no_reset;
    const bool reusable = reset_peak_rss(&no_reset);
    // A reused worker keeps weight memory from one configuration for the next: its pages need
    // no zeroing again (docs/cpu-engine.md#prepare). Not under an address-space limit
    // (--worker-memory-limit): memory kept beyond what a configuration needs would count
    // against it, and a configuration could fail there that a fresh process would measure.
    rlimit address_space{};
    const bool limited =
        ::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY;
    device->keep_memory_between_sessions(reusable && !limited);
    std::string line;
    for (int measured = 0; std::getline(std::cin, line); ++measured) {
      const auto [config, protocol] = parse_request(line);
      // Kept memory is resident before the configuration starts: not part of its baseline. What
      // of it the configuration leaves unused stays resident and untouched throughout: not part
      // of its peak. So peak - baseline counts the bytes a fresh process would.
      const std::int64_t kept_bytes = device->kept_memory_bytes();
      // What the configurations before freed, glibc keeps resident for the next allocations
      // (libtorch's tensors and oneDNN's scratch come from malloc): handed back to the system
      // first, the next configuration's allocations fault in pages again and count in its peak,
      // as in a fresh process, rather than disappear into the baseline.
      if (measured > 0) {
        ::malloc_trim(0);
        reset_peak_rss(&no_reset);
      }
      Measurement measurement =
          measure_configuration(*device, config, protocol, *meter, monitor.get());
      const std::int64_t unused_bytes = device->kept_memory_unused_bytes();
      if (measurement.baseline_rss_bytes) *measurement.baseline_rss_bytes -= kept_bytes;
      if (measurement.process_peak_rss_bytes) *measurement.process_peak_rss_bytes -= unused_bytes;
      measurement.provenance["worker"] = {{"pid", ::getpid()},
                                          {"measured_before", measured},
                                          {"kept_bytes", kept_bytes},
                                          {"kept_unused_bytes", unused_bytes}};
      // After a failure the process may be in no state to measure again (a sticky CUDA error
      // leaves the context unusable; an out-of-memory may leave the heap fragmented).
      const bool again = reusable && (measurement.status == MeasurementStatus::kOk ||
                                      measurement.status == MeasurementStatus::kUnsupported);
      std::cout
          << nlohmann::json{{"measurement", measurement.to_json()}, {"reusable", again}}.dump()
          << std::endl;
    }
    return 0;
  }
  throw Error(ErrorCategory::kInput, "no device '" + device_id + "' (see carb devices)");
}

}  // namespace carb
