// Test helper: profiles synthetic measurements of the first N test configurations into a
// database the way `carb profile` will (pending -> claim -> measure -> write), until none is
// pending. The store tests kill it with SIGKILL at random moments and run two side by side.
//
// usage: store_writer DB COUNT SAMPLES [--fail-first-every K] [--measure-us U] [--wait-stdin]
//                     [--log FILE]
//   --fail-first-every K  the first attempt of every K-th configuration records status error
//   --measure-us U        time one measurement "takes", outside any transaction
//   --wait-stdin          start only when stdin reaches end of file (a start barrier)
//   --log FILE            append "measured KEY" before and "wrote KEY" after each write
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "carb/error.hpp"
#include "fake_measurements.hpp"

namespace {

using namespace carb;

// One unbuffered write per line, so what a killed writer logged is exactly what it did.
void log_line(int fd, const std::string& line) {
  if (fd < 0) return;
  const std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
}

int run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: store_writer DB COUNT SAMPLES [options]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int count = std::atoi(argv[2]);
  const int samples = std::atoi(argv[3]);
  int fail_first_every = 0;
  int measure_us = 0;
  int log_fd = -1;
  for (int index = 4; index < argc; ++index) {
    const std::string option = argv[index];
    if (option == "--fail-first-every" && index + 1 < argc) {
      fail_first_every = std::atoi(argv[++index]);
    } else if (option == "--measure-us" && index + 1 < argc) {
      measure_us = std::atoi(argv[++index]);
    } else if (option == "--wait-stdin") {
      char byte = 0;
      while (read(0, &byte, 1) > 0) {
      }
    } else if (option == "--log" && index + 1 < argc) {
      log_fd = ::open(argv[++index], O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log_fd < 0) return 2;
    } else {
      std::fprintf(stderr, "store_writer: unknown option %s\n", option.c_str());
      return 2;
    }
  }

  Store store = Store::create_or_open(path);
  const std::int64_t campaign_id = store_test::ensure_test_campaign(store, "crash-test");

  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(count));
  for (int index = 0; index < count; ++index) keys.push_back(store_test::key_of(index));
  const ResumePolicy policy;
  const ClaimOwner self = ClaimOwner::current();
  while (true) {
    const std::vector<std::string> pending = store.pending(keys, policy);
    if (pending.empty()) return 0;
    bool progressed = false;
    for (const std::string& key : pending) {
      if (!store.claim(key, self, policy)) continue;
      const auto position = std::find(keys.begin(), keys.end(), key) - keys.begin();
      const int index = static_cast<int>(position);
      const bool fail = fail_first_every > 0 && index % fail_first_every == 0 &&
                        !store.find_measurement(key).has_value();
      MeasurementRecord record = store_test::make_record(
          index, campaign_id, samples, fail ? MeasurementStatus::kError : MeasurementStatus::kOk);
      if (measure_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(measure_us));
      log_line(log_fd, "measured " + key);
      store.write_measurement(record);
      log_line(log_fd, "wrote " + key + " " + std::string(to_string(record.status)));
      progressed = true;
    }
    // Keys another process holds are finished by it; look again shortly.
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const carb::Error& error) {
    std::fprintf(stderr, "store_writer: %s\n", error.what());
    return 1;
  }
}
