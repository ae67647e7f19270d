// Profiling campaigns: measure configurations on a device into a database, with a progress
// callback, and stop cleanly on Ctrl-C (KeyboardInterrupt): every finished measurement is kept.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "binding.hpp"
#include "carb/campaign.hpp"
#include "carb/error.hpp"
#include "carb/measure.hpp"

namespace carb::python {

namespace {

// The executable campaigns start as workers: carb's own hidden worker verb. A Python process is
// no carb executable to start again (/proc/self/exe is python), so it is the build's carb, or
// CARB_EXECUTABLE's.
WorkerCommand worker_command() {
  const char* chosen = std::getenv("CARB_EXECUTABLE");
  const std::string executable =
      chosen != nullptr && *chosen != '\0' ? chosen : std::string(CARB_CLI_EXECUTABLE);
  if (::access(executable.c_str(), X_OK) != 0) {
    throw Error(ErrorCategory::kRuntime,
                "carb's executable " + executable +
                    " is missing or not executable: campaigns measure in its worker processes "
                    "(set CARB_EXECUTABLE to a carb binary of the same build)");
  }
  return {executable, {"__worker"}};  // flag-ok: the worker verb's name, not a message
}

py::dict progress_dict(const CampaignProgress& progress) {
  return py::dict(
      py::arg("total") = progress.total, py::arg("finished") = progress.finished,
      py::arg("elapsed_s") = progress.elapsed_s, py::arg("by_status") = progress.by_status,
      py::arg("last_key") = progress.last_key, py::arg("text") = progress_text(progress));
}

py::dict summary_dict(const CampaignSummary& s) {
  return py::dict(py::arg("campaign_id") = s.campaign_id, py::arg("device_id") = s.device_id,
                  py::arg("device_fingerprint") = s.device_fingerprint,
                  py::arg("host") = s.host.dump(), py::arg("selected") = s.selected,
                  py::arg("in_shard") = s.in_shard, py::arg("already_done") = s.already_done,
                  py::arg("claimed_elsewhere") = s.claimed_elsewhere,
                  py::arg("not_started") = s.not_started, py::arg("measured") = s.measured,
                  py::arg("idle_power_w") = s.idle_power_w,
                  py::arg("idle_power_null_reason") = s.idle_power_null_reason,
                  py::arg("wall_s") = s.wall_s, py::arg("inference_s") = s.inference_s,
                  py::arg("prepare_s") = s.prepare_s, py::arg("contended") = s.contended,
                  py::arg("probes") = s.probes, py::arg("probe_s") = s.probe_s,
                  py::arg("probe_failure") = s.probe_failure, py::arg("stopped") = s.stopped);
}

}  // namespace

void bind_campaign(py::module_& m) {
  py::class_<Protocol>(m, "Protocol")
      .def(py::init<>())
      .def_readwrite("warmup_min_s", &Protocol::warmup_min_s)
      .def_readwrite("warmup_min_runs", &Protocol::warmup_min_runs)
      .def_readwrite("min_samples", &Protocol::min_samples)
      .def_readwrite("min_time_s", &Protocol::min_time_s)
      .def_readwrite("target_relative_ci", &Protocol::target_relative_ci)
      .def_readwrite("max_time_s", &Protocol::max_time_s)
      .def_readwrite("energy_window_min_s", &Protocol::energy_window_min_s)
      .def_readwrite("cooldown_s", &Protocol::cooldown_s)
      .def_readwrite("seed", &Protocol::seed)
      .def_readwrite("timeout_s", &Protocol::timeout_s)
      .def_readwrite("worker_memory_limit_bytes", &Protocol::worker_memory_limit_bytes)
      .def_readwrite("worker_reuse", &Protocol::worker_reuse)
      .def("to_json", [](const Protocol& p) { return p.to_json().dump(); });

  m.def("parse_duration", &parse_duration_s, py::arg("text"));

  // carb kernels: the columns key, index, for_each_kernel_column's, pass_ms, drift_probe,
  // probe_ms; timed with the GIL released, the rows made Python objects after.
  m.def(
      "kernels",
      [](const std::vector<std::string>& keys, const std::string& device, int warmup, int passes,
         int rounds, std::uint64_t seed, const std::optional<std::string>& drift_probe,
         double drift_every) {
        using Value = std::variant<std::string, std::int64_t, double, std::optional<std::string>,
                                   std::optional<std::int64_t>, std::optional<double>>;
        std::vector<std::string> names = {"key", "index"};
        for_each_kernel_column(
            Network{}, KernelTime{}, 0, engine::KernelEngine::kCarb,
            [&](std::string_view name, const auto&) { names.emplace_back(name); });
        names.insert(names.end(),
                     {"pass_ms", "drift_probe", "probe_ms", "device", "device_name", "instance"});
        const DeviceIdentity identity = identify_device(device);
        const engine::KernelEngine kernel_engine = kernel_engine_of(identity.fingerprint);
        const std::optional<std::string> instance =
            identity.instance.empty() ? std::nullopt : std::optional(identity.instance);
        std::vector<std::vector<Value>> rows;
        std::vector<Config> configs;
        configs.reserve(keys.size());
        for (const std::string& key : keys) configs.push_back(parse_key(key));
        std::optional<KernelDriftProbe> probe;
        if (drift_probe && drift_every > 0)
          probe = KernelDriftProbe{parse_key(*drift_probe), drift_every};
        const std::optional<std::string> probe_key =
            probe ? std::optional(to_key(probe->config)) : std::nullopt;
        without_gil([&] {
          profile_kernels(
              configs, device, seed, warmup, passes, rounds, probe,
              [&](const Network& network, const KernelBreakdown& times) {
                const double sum_ms = kernels_sum_ms(times);
                for (std::size_t k = 0; k < times.kernels.size(); ++k) {
                  std::vector<Value> row = {to_key(network.config), static_cast<std::int64_t>(k)};
                  for_each_kernel_column(
                      network, times.kernels[k], sum_ms, kernel_engine,
                      [&](std::string_view, const auto& value) { row.emplace_back(value()); });
                  row.emplace_back(times.pass_median_ms);
                  row.emplace_back(probe_key);
                  row.emplace_back(times.probe_ms);
                  row.insert(row.end(), {identity.fingerprint, identity.name, instance});
                  rows.push_back(std::move(row));
                }
              });
        });
        py::dict columns;
        for (std::size_t c = 0; c < names.size(); ++c) {
          py::list column;
          for (const std::vector<Value>& row : rows) {
            column.append(std::visit([](const auto& v) { return py::cast(v); }, row[c]));
          }
          columns[py::str(names[c])] = column;
        }
        return columns;
      },
      py::arg("keys"), py::arg("device"), py::arg("warmup"), py::arg("passes"), py::arg("rounds"),
      py::arg("seed"), py::arg("drift_probe"), py::arg("drift_every"));
  m.attr("DEFAULT_DRIFT_PROBE") = std::string(kDefaultDriftProbe);

  m.def(
      "profile",
      [](const std::string& db, const std::optional<std::vector<std::string>>& keys,
         SpaceHandle* space,
         const std::optional<py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>>&
             indices,
         const std::string& name, const std::string& spec_text, const std::string& device,
         const Protocol& protocol, int retry_limit, std::optional<double> time_budget_s,
         const std::string& shard, int rounds, const std::optional<std::string>& drift_probe,
         double drift_every_s, double idle_window_s, const py::object& progress) {
        std::vector<Config> configs;
        if (keys) {
          configs = configs_of_keys(*keys);
        } else if (space != nullptr && indices) {
          for (py::ssize_t i = 0; i < indices->size(); ++i) {
            const std::uint64_t index = indices->data()[i];
            if (index >= space->space().size()) {
              throw Error(ErrorCategory::kUsage,
                          "indices: " + std::to_string(index) + " is not a point of " +
                              space->space().name(),
                          "indices");
            }
            configs.push_back(space->space().at(index));
          }
        } else {
          throw Error(ErrorCategory::kUsage, "give keys, or a space and its indices, to profile");
        }
        CampaignOptions options;
        options.name = name;
        options.spec_text = spec_text;
        options.db_path = db;
        options.device = device;
        options.protocol = protocol;
        options.resume.retry_limit = retry_limit;
        options.resume.claim_timeout = claim_timeout_for(protocol);
        options.time_budget_s = time_budget_s;
        options.shard = Shard::parse(shard);
        options.db_path = options.shard.expand(db);
        options.worker = worker_command();
        options.idle_window_s = idle_window_s;
        options.drift_every_s = drift_every_s;
        options.rounds = rounds;
        if (drift_probe && drift_every_s > 0) options.drift_probe = parse_key(*drift_probe);

        // Ctrl-C: Python's handler only flags the signal; the campaign asks here, with the GIL,
        // whether it ran (the KeyboardInterrupt it raises is kept, and raised once the campaign
        // has stopped, by the caller). An exception in the progress callback stops it the same.
        std::optional<py::object> raised;
        bool stopping = false;
        options.stop = [&] {
          if (stopping) return true;
          const py::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) {
            raised = py::error_already_set().value();
            stopping = true;
          }
          return stopping;
        };
        const auto report = [&](const CampaignProgress& state) {
          if (progress.is_none() || stopping) return;
          const py::gil_scoped_acquire gil;
          try {
            progress(progress_dict(state));
          } catch (py::error_already_set& error) {
            raised = error.value();
            stopping = true;
          }
        };
        const CampaignSummary summary =
            without_gil([&] { return run_campaign(configs, options, report); });
        return py::make_tuple(summary_dict(summary), raised ? *raised : py::object(py::none()));
      },
      py::arg("db"), py::arg("keys").none(true), py::arg("space").none(true),
      py::arg("indices").none(true), py::arg("name"), py::arg("spec_text"), py::arg("device"),
      py::arg("protocol"), py::arg("retry_limit"), py::arg("time_budget_s").none(true),
      py::arg("shard"), py::arg("rounds"), py::arg("drift_probe").none(true),
      py::arg("drift_every_s"), py::arg("idle_window_s"), py::arg("progress").none(true));
}

}  // namespace carb::python
