// carb profile --mpi: rank 0 owns the database and hands out one configuration at a time; every
// other rank measures on its device, each configuration in a worker process as always. A rank
// that dies (mpirun --enable-recovery keeps the others running) loses only the configuration it
// had, which goes to the next free rank.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <thread>

#include "campaign_impl.hpp"
#include "carb/error.hpp"
#include "carb/statistics.hpp"

namespace carb {

namespace {

using Clock = std::chrono::steady_clock;
using namespace campaign_detail;

enum Tag : int { kHello = 1, kWork = 2, kResult = 3 };

// Work messages that are no configuration key: stop, and stop without MPI_Finalize, whose
// collective step can wait forever for a rank that died (OpenMPI 4.1, --enable-recovery).
constexpr std::string_view kStop{};
constexpr std::string_view kStopAfterLoss = "!";

void send_text(const std::string& text, int to, int tag) {
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

// Receives a message of any length; `from` may be MPI_ANY_SOURCE. Sets *source to the sender.
std::string receive_text(int from, int tag, int* source) {
  MPI_Status status;
  MPI_Probe(from, tag, MPI_COMM_WORLD, &status);
  int size = 0;
  MPI_Get_count(&status, MPI_CHAR, &size);
  std::string text(static_cast<std::size_t>(size), '\0');
  MPI_Recv(text.data(), size, MPI_CHAR, status.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (source != nullptr) *source = status.MPI_SOURCE;
  return text;
}

bool message_waiting(int tag) {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  return flag != 0;
}

// MPI for the length of one campaign.
class MpiSession {
 public:
  MpiSession() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiSession() {
    if (finalize_) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// After a rank died, leave without MPI_Finalize (mpirun --enable-recovery accepts that).
  void skip_finalize() { finalize_ = false; }

 private:
  bool finalize_ = true;
  int rank_ = 0;
  int size_ = 1;
};

// --- a measuring rank -------------------------------------------------------------------------

// Says hello (its device, host and idle power, or what went wrong), then measures what rank 0
// sends until it sends nothing. CARB_MPI_TEST_DIE_RANK=R (tests only) makes rank R kill itself
// with SIGKILL on receiving its second configuration, i.e. with one in flight.
// Returns whether rank 0 said a rank was lost.
bool measure_for_rank_zero(const CampaignOptions& options, int rank) {
  nlohmann::json hello;
  const auto backends = campaign_detail::backends_for(options.device);
  const Device* device = nullptr;
  try {
    device = &find_device(backends, options.device);
    const DeviceInfo& info = device->info();
    const HostInfo host = read_host_info();
    const std::unique_ptr<EnergyMeter> meter = open_energy_meter(info);
    std::string idle_null_reason;
    const auto idle_power_w =
        measure_idle_power_w(*meter, options.idle_window_s, &idle_null_reason);
    hello = {{"host", host.hostname},
             {"pid", static_cast<std::int64_t>(::getpid())},
             {"device_id", info.id},
             {"fingerprint", fingerprint_of(info, host)},
             {"kind", info.kind},
             {"name", info.name},
             {"details", device_details(info, host)},
             {"software", software_of(info)},
             {"host_json", measured_host_json(host)},
             {"idle_power_w", idle_power_w ? nlohmann::json(*idle_power_w) : nullptr},
             {"idle_null_reason", idle_null_reason}};
  } catch (const Error& error) {
    hello = {{"error", error.what()}, {"exit_code", error.exit_code()}};
  }
  send_text(hello.dump(), 0, kHello);
  if (hello.contains("error")) {
    return receive_text(0, kWork, nullptr) == kStopAfterLoss;  // rank 0 stops everyone
  }
  const char* die = std::getenv("CARB_MPI_TEST_DIE_RANK");
  const bool dies = die != nullptr && std::atoi(die) == rank;
  WorkerProcess worker(options.worker, device->info().id);
  for (int received = 1;; ++received) {
    const std::string key = receive_text(0, kWork, nullptr);
    if (key == kStop || key == kStopAfterLoss) return key == kStopAfterLoss;
    if (dies && received == 2) std::raise(SIGKILL);
    const Timestamp started = std::chrono::system_clock::now();
    const Measurement measurement = worker.measure(parse_key(key), options.protocol);
    const Timestamp finished = std::chrono::system_clock::now();
    const auto millis = [](Timestamp time) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
    };
    send_text(nlohmann::json{{"key", key},
                             {"measurement", measurement.to_json()},
                             {"started_ms", millis(started)},
                             {"finished_ms", millis(finished)}}
                  .dump(),
              0, kResult);
  }
}

// --- rank 0 -----------------------------------------------------------------------------------

struct Rank {
  nlohmann::json hello;
  bool alive = true;
  bool busy = false;
  std::string key;  // measurement key in flight
  Clock::time_point since;
};

class Dispatcher {
 public:
  Dispatcher(const std::vector<Config>& configs, const CampaignOptions& options, int size,
             const std::function<void(const CampaignProgress&)>& progress)
      : configs_(configs), options_(options), progress_(progress), ranks_(size) {}

  CampaignSummary run() {
    try {
      greet();
      prepare();
      serve();
      stop_idle_ranks();
    } catch (...) {
      stop_idle_ranks();
      throw;
    }
    summary_.wall_s = seconds_since(start_);
    return summary_;
  }

 private:
  // Waits for every rank's hello (a minute at most: a rank that never says it is lost).
  void greet() {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    int greeted = 0;
    while (greeted < static_cast<int>(ranks_.size()) - 1 && Clock::now() < deadline) {
      if (!message_waiting(kHello)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      int source = 0;
      const nlohmann::json hello =
          nlohmann::json::parse(receive_text(MPI_ANY_SOURCE, kHello, &source));
      ranks_[static_cast<std::size_t>(source)].hello = hello;
      ++greeted;
      if (hello.contains("error")) {
        throw Error(
            hello.at("exit_code").get<int>() == 1 ? ErrorCategory::kRuntime : ErrorCategory::kUsage,
            "rank " + std::to_string(source) + ": " + hello.at("error").get<std::string>());
      }
    }
    for (std::size_t rank = 1; rank < ranks_.size(); ++rank) {
      if (ranks_[rank].hello.is_null()) {
        ranks_[rank].alive = false;
        ++summary_.ranks_lost;
      }
    }
  }

  void prepare() {
    const nlohmann::json* first = nullptr;
    for (std::size_t rank = 1; rank < ranks_.size(); ++rank) {
      if (!ranks_[rank].alive) continue;
      const nlohmann::json& hello = ranks_[rank].hello;
      if (first == nullptr) {
        first = &hello;
      } else if (hello.at("fingerprint") != first->at("fingerprint")) {
        throw Error(ErrorCategory::kUsage,
                    "rank " + std::to_string(rank) + " measures on '" +
                        hello.at("fingerprint").get<std::string>() + "' but another rank on '" +
                        first->at("fingerprint").get<std::string>() +
                        "': one campaign measures one kind of device (run one mpirun per kind)",
                    "mpi");
      }
    }
    if (first == nullptr) throw Error(ErrorCategory::kRuntime, "no measuring rank started", "mpi");
    fingerprint_ = first->at("fingerprint").get<std::string>();
    software_ = first->at("software").get<std::string>();
    summary_.device_id = first->at("device_id").get<std::string>();
    summary_.device_fingerprint = fingerprint_;
    summary_.selected = static_cast<std::int64_t>(configs_.size());
    if (!first->at("idle_power_w").is_null()) {
      summary_.idle_power_w = first->at("idle_power_w").get<double>();
    }
    summary_.idle_power_null_reason = first->at("idle_null_reason").get<std::string>();

    store_ = std::make_unique<Store>(Store::create_or_open(options_.db_path));
    CampaignRecord campaign;
    campaign.name = options_.name;
    campaign.spec_text = options_.spec_text;
    campaign.protocol_json = options_.protocol.key_json().dump();
    summary_.campaign_id = store_->ensure_campaign(campaign);
    store_->ensure_device({0, fingerprint_, first->at("kind").get<std::string>(),
                           first->at("name").get<std::string>(), first->at("details").dump()});
    const std::vector<std::string> keys = campaign_keys(configs_, options_.shard, fingerprint_,
                                                        software_, options_.protocol, &config_of_);
    summary_.in_shard = static_cast<std::int64_t>(keys.size());
    const std::vector<std::string> pending = store_->pending(keys, options_.resume);
    summary_.already_done = summary_.in_shard - static_cast<std::int64_t>(pending.size());
    queue_.assign(pending.begin(), pending.end());
    state_.total = static_cast<std::int64_t>(pending.size());
  }

  // Gives `rank` the next configuration it may measure, if any.
  void assign(std::size_t rank) {
    while (!queue_.empty()) {
      if (options_.time_budget_s &&
          seconds_since(start_) >= *options_.time_budget_s) {
        summary_.not_started += static_cast<std::int64_t>(queue_.size());
        queue_.clear();
        return;
      }
      const std::string key = queue_.front();
      queue_.pop_front();
      if (!store_->claim(key, owner_, options_.resume)) {
        ++summary_.claimed_elsewhere;
        finished_one(key);
        continue;
      }
      Rank& state = ranks_[rank];
      state.busy = true;
      state.key = key;
      state.since = Clock::now();
      send_text(to_key(*config_of_.at(key)), static_cast<int>(rank), kWork);
      return;
    }
  }

  void finished_one(const std::string& key) {
    ++state_.finished;
    state_.last_key = to_key(*config_of_.at(key));
    state_.elapsed_s = seconds_since(start_);
    if (progress_) progress_(state_);
  }

  void record(std::size_t rank, const nlohmann::json& result) {
    const Rank& state = ranks_[rank];
    const Measurement measurement = Measurement::from_json(result.at("measurement"));
    const Config& config = *config_of_.at(state.key);
    const auto time = [&](const char* name) {
      return Timestamp(std::chrono::milliseconds(result.at(name).get<std::int64_t>()));
    };
    std::optional<double> idle_power_w;
    if (!state.hello.at("idle_power_w").is_null()) {
      idle_power_w = state.hello.at("idle_power_w").get<double>();
    }
    store_->write_measurement(record_of(measurement, config, state.key, fingerprint_,
                                        summary_.campaign_id, software_, options_.protocol,
                                        state.hello.at("host_json"), idle_power_w,
                                        time("started_ms"), time("finished_ms")));
    count_outcome(measurement, &summary_, &state_);
    finished_one(state.key);
  }

  // Whether a busy rank is gone: its process has exited (checked where it runs on this host)
  // or it has had its configuration for longer than any measurement may take.
  bool lost(const Rank& rank) const {
    if (rank.hello.at("host").get<std::string>() == owner_.host &&
        ::kill(static_cast<pid_t>(rank.hello.at("pid").get<std::int64_t>()), 0) != 0 &&
        errno == ESRCH) {
      return true;
    }
    return Clock::now() - rank.since >
           std::chrono::duration<double>(options_.protocol.timeout_s * 2 + 60);
  }

  void serve() {
    for (std::size_t rank = 1; rank < ranks_.size(); ++rank) {
      if (ranks_[rank].alive) assign(rank);
    }
    auto last_check = Clock::now();
    while (true) {
      bool any_busy = false;
      for (const Rank& rank : ranks_) any_busy = any_busy || (rank.alive && rank.busy);
      if (!any_busy) return;
      if (message_waiting(kResult)) {
        int source = 0;
        const nlohmann::json result =
            nlohmann::json::parse(receive_text(MPI_ANY_SOURCE, kResult, &source));
        Rank& rank = ranks_[static_cast<std::size_t>(source)];
        if (!rank.alive || !rank.busy || result.at("key") != to_key(*config_of_.at(rank.key))) {
          continue;  // from a rank given up for lost: its configuration went elsewhere
        }
        record(static_cast<std::size_t>(source), result);
        rank.busy = false;
        assign(static_cast<std::size_t>(source));
        continue;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (Clock::now() - last_check < std::chrono::milliseconds(250)) continue;
      last_check = Clock::now();
      for (std::size_t index = 1; index < ranks_.size(); ++index) {
        Rank& rank = ranks_[index];
        if (!rank.alive || !rank.busy || !lost(rank)) continue;
        rank.alive = false;
        ++summary_.ranks_lost;
        ++summary_.reissued;
        queue_.push_front(rank.key);
        // An idle rank takes the configuration now; otherwise the next one to finish does.
        for (std::size_t other = 1; other < ranks_.size(); ++other) {
          if (ranks_[other].alive && !ranks_[other].busy && !queue_.empty()) assign(other);
        }
      }
    }
  }

  void stop_idle_ranks() {
    for (std::size_t rank = 1; rank < ranks_.size(); ++rank) {
      if (ranks_[rank].alive) {
        send_text(std::string(summary_.ranks_lost > 0 ? kStopAfterLoss : kStop),
                  static_cast<int>(rank), kWork);
        ranks_[rank].alive = false;
      }
    }
    summary_.not_started += static_cast<std::int64_t>(queue_.size());
    queue_.clear();
  }

  const std::vector<Config>& configs_;
  const CampaignOptions& options_;
  const std::function<void(const CampaignProgress&)>& progress_;
  std::vector<Rank> ranks_;
  const Clock::time_point start_ = Clock::now();
  const ClaimOwner owner_ = ClaimOwner::current();
  CampaignSummary summary_;
  CampaignProgress state_;
  std::unique_ptr<Store> store_;
  std::string fingerprint_;
  std::string software_;
  std::map<std::string, const Config*> config_of_;
  std::deque<std::string> queue_;
};

}  // namespace

CampaignSummary run_mpi_campaign(const std::vector<Config>& configs, const CampaignOptions& options,
                                 const std::function<void(const CampaignProgress&)>& progress) {
  MpiSession mpi;
  CampaignSummary summary;
  summary.mpi_rank = mpi.rank();
  summary.mpi_ranks = mpi.size();
  if (mpi.size() < 2) {
    throw Error(ErrorCategory::kUsage,
                "an MPI campaign needs 2 or more ranks (rank 0 hands out configurations, the "
                "others measure), e.g. mpirun -n 3",
                "mpi");
  }
  if (mpi.rank() != 0) {
    if (measure_for_rank_zero(options, mpi.rank())) mpi.skip_finalize();
    return summary;
  }
  summary = Dispatcher(configs, options, mpi.size(), progress).run();
  if (summary.ranks_lost > 0) mpi.skip_finalize();
  summary.mpi_rank = 0;
  summary.mpi_ranks = mpi.size();
  return summary;
}

}  // namespace carb
