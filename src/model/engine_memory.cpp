// Engine memory from the engine's own plan (EngineMemoryPlanner): exact where this machine runs
// the model's engine, so memory needs no model there.
#include <memory>

#include "carb/backend.hpp"
#include "carb/error.hpp"
#include "carb/model.hpp"

namespace carb {

struct EngineMemoryPlanner::State {
  std::unique_ptr<Backend> backend;
  const Device* device = nullptr;
  std::size_t memory_target = 0;
  std::string engine;
};

EngineMemoryPlanner::EngineMemoryPlanner(std::unique_ptr<State> state) : state_(std::move(state)) {}
EngineMemoryPlanner::~EngineMemoryPlanner() = default;

std::unique_ptr<EngineMemoryPlanner> EngineMemoryPlanner::for_model(const Predictor& model,
                                                                    std::string* why) {
  const auto fail = [&](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return std::unique_ptr<EngineMemoryPlanner>();
  };
  if (model.schema() != kArchitectureSchema) return fail("a model of a table");
  auto state = std::make_unique<State>();
  state->memory_target = model.targets().size();
  for (std::size_t t = 0; t < model.targets().size(); ++t) {
    if (model.targets()[t].name == "memory") state->memory_target = t;
  }
  if (state->memory_target == model.targets().size()) return fail("no memory target");
  state->engine = engine_part(model.device_fingerprint());
  const std::string kind = engine_backend(model.device_fingerprint());
  try {
    state->backend = make_backend_for(kind);
    for (const auto& device : state->backend->devices()) {
      if (engine_fingerprint(device->info()) == state->engine) state->device = device.get();
    }
  } catch (const Error& error) {
    return fail("no " + kind + " engine here: " + error.what());
  }
  if (state->device == nullptr) {
    std::string here;
    for (const auto& device : state->backend->devices()) {
      here += (here.empty() ? "" : ", ") + engine_fingerprint(device->info());
    }
    return fail("this machine runs no engine " + state->engine +
                (here.empty() ? "" : " (it has " + here + ")"));
  }
  return std::unique_ptr<EngineMemoryPlanner>(new EngineMemoryPlanner(std::move(state)));
}

const std::string& EngineMemoryPlanner::engine() const { return state_->engine; }

std::size_t EngineMemoryPlanner::apply(
    const std::vector<Config>& configs,
    std::vector<std::vector<TargetPrediction>>& predictions) const {
  CARB_CHECK(predictions.at(state_->memory_target).size() == configs.size(),
             "one memory prediction per configuration");
  std::vector<std::pair<std::size_t, Config>> rows;
  rows.reserve(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) rows.emplace_back(i, configs[i]);
  return apply(rows, predictions);
}

std::size_t EngineMemoryPlanner::apply(
    const std::vector<std::pair<std::size_t, Config>>& rows,
    std::vector<std::vector<TargetPrediction>>& predictions) const {
  std::vector<TargetPrediction>& memory = predictions.at(state_->memory_target);
  std::size_t planned = 0;
  for (const auto& [row, config] : rows) {
    CARB_CHECK(row < memory.size(), "a row of the predictions");
    if (!state_->device->supports(config).supported) continue;
    const std::optional<MemoryUsage> usage = state_->device->plan_memory(config);
    if (!usage) continue;
    TargetPrediction& p = memory[row];
    p.available = true;
    p.reason.clear();
    p.value = p.low = p.high = static_cast<double>(usage->peak_bytes);
    ++planned;
  }
  return planned;
}

}  // namespace carb
