// Per-configuration isolation: the parent starts a worker process, reads its JSON result and
// turns a crash, a kill or a timeout into a status row.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>

#include "carb/error.hpp"
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

Measurement measure_in_worker(const WorkerCommand& command, const std::string& device_id,
                              const Config& config, const Protocol& protocol) {
  std::vector<std::string> arguments = {command.executable};
  arguments.insert(arguments.end(), command.arguments.begin(), command.arguments.end());
  for (const std::string& argument :
       {std::string("--device"), device_id, std::string("--key"), to_key(config),
        std::string("--protocol"), protocol.to_json().dump()}) {
    arguments.push_back(argument);
  }
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  auto [out_read, out_write] = make_pipe();
  auto [err_read, err_write] = make_pipe();
  const pid_t parent = ::getpid();
  const rlimit memory_limit{static_cast<rlim_t>(protocol.worker_memory_limit_bytes),
                            static_cast<rlim_t>(protocol.worker_memory_limit_bytes)};
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
    if (protocol.worker_memory_limit_bytes > 0) ::setrlimit(RLIMIT_AS, &memory_limit);
    ::dup2(out_write.get(), STDOUT_FILENO);
    ::dup2(err_write.get(), STDERR_FILENO);
    ::execv(argv[0], argv.data());
    const char message[] = "carb worker: exec failed\n";
    [[maybe_unused]] auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(127);
  }
  out_write.reset();
  err_write.reset();

  std::string out;
  std::string err;
  const auto deadline = Clock::now() + std::chrono::duration<double>(protocol.timeout_s);
  bool timed_out = false;
  pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
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
        (i == 0 ? out : err).append(buffer, static_cast<std::size_t>(count));
      } else if (count == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

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
  try {
    return Measurement::from_json(nlohmann::json::parse(out));
  } catch (const nlohmann::json::exception& error) {
    return failure(MeasurementStatus::kError,
                   std::string("worker wrote no valid result: ") + error.what());
  } catch (const Error& error) {
    return failure(MeasurementStatus::kError, error.what());
  }
}

std::unique_ptr<EnergyMeter> open_energy_meter(const DeviceInfo& device) {
  if (device.kind == "cpu") return open_cpu_energy_meter();
  if (device.kind == "cuda") return open_nvml_energy_meter(device.uuid);
  return std::make_unique<NoSensorMeter>("no energy meter for " + device.kind +
                                         " devices in this build");
}

std::unique_ptr<GpuMonitor> open_device_monitor(const DeviceInfo& device) {
  if (device.kind == "cuda") return open_gpu_monitor(device.uuid);
  return nullptr;
}

int worker_main(const std::string& device_id, const std::string& key,
                const std::string& protocol_json) {
  const Config config = parse_key(key);
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(protocol_json);
  } catch (const nlohmann::json::exception& error) {
    throw Error(ErrorCategory::kInput, std::string("--protocol is not JSON: ") + error.what());
  }
  const Protocol protocol = Protocol::from_json(parsed);
  // Only the device's own backend: a CPU worker never initialises CUDA.
  const std::unique_ptr<Backend> backend = make_backend_for(device_id);
  for (const auto& device : backend->devices()) {
    if (device->info().id != device_id) continue;
    const std::unique_ptr<EnergyMeter> meter = open_energy_meter(device->info());
    const std::unique_ptr<GpuMonitor> monitor = open_device_monitor(device->info());
    const Measurement measurement =
        measure_configuration(*device, config, protocol, *meter, monitor.get());
    std::cout << measurement.to_json().dump() << std::endl;
    return 0;
  }
  throw Error(ErrorCategory::kInput, "no device '" + device_id + "' (see carb devices)");
}

}  // namespace carb
