#include "domain.hpp"

#include "carb/error.hpp"
#include "carb/telemetry.hpp"
#include "output.hpp"

namespace carb::cli {

void DomainCheck::add(const float* row, const std::string& id, const std::string& family) {
  const TrainingDomain& domain = model_.training_domain();
  const DomainJudgement judgement = family.empty() ? domain.judge(row) : domain.judge(row, family);
  if (judgement.inside) return;
  if (outside_++ > 0) return;
  first_ = id + ", " + domain_text(domain, judgement, row, model_.feature_names(), family);
}

std::string DomainCheck::warning(std::uint64_t of, const std::string& what,
                                 const std::string& model_path) const {
  if (outside_ == 0) return "";
  return "warning: " + std::to_string(outside_) + " of " + std::to_string(of) + " " + what +
         " lie outside the data " + model_path + " was fitted on (first: " + first_ +
         "): their predictions extrapolate";
}

std::string this_host_instance() {
  try {
    return host_instance(read_host_info());
  } catch (const Error&) {
    return "";
  }
}

namespace {

// instances_text, or for a machine rather than rows (counts of 0) its instance alone.
std::string describe(const std::map<std::string, std::size_t>& instances) {
  if (instances.size() == 1 && instances.begin()->second == 0) {
    const std::string& instance = instances.begin()->first;
    return "instance " + (instance.empty() ? std::string("unknown") : instance);
  }
  return instances_text(instances);
}

}  // namespace

std::string host_difference(const Predictor& model, const std::string& model_path,
                            const std::map<std::string, std::size_t>& measured,
                            const std::string& what) {
  const std::map<std::string, std::size_t>& own = model.device_instances();
  // Within: every measured instance is one of the model's. Rows from before instances were
  // recorded ("") count as the model's own when the model's rows were unrecorded too (the same
  // campaign, as carb saw it before); a recorded instance never matches an unrecorded one.
  bool within = !own.empty();
  bool recorded = true;
  for (const auto& [instance, rows] : measured) {
    if (!own.contains(instance)) within = false;
    if (instance.empty()) recorded = false;
  }
  for (const auto& [instance, rows] : own) {
    if (instance.empty()) recorded = false;
  }
  if (within) return "";
  const std::string advice =
      "; hosts of one CPU model differ in latency by up to a third: measure a few "
      "configurations here with carb profile --transfer-for " +
      model_path + " and adapt the model with carb fit --from " + model_path +
      " (docs/model.md, Transfer)";
  if (recorded && !own.empty()) {
    return "note: " + what + " (" + describe(measured) + ") did not measure " + model_path +
           "'s data (" + instances_text(own) + ", " + model.device_name() +
           "), though the device fingerprint matches" + advice;
  }
  return "note: whether " + what + " (" + describe(measured) + ") is the host that measured " +
         model_path + "'s data (" + instances_text(own) +
         ") is unknown: unrecorded rows predate "
         "carb's host instances" +
         advice;
}

std::string this_machine_note(const Predictor& model, const std::string& model_path) {
  // A model of a device: of measurements, or of kernel timings that recorded their device.
  const bool of_kernels = model.schema() == kKernelSchema && !model.device_fingerprint().empty();
  if (model.schema() != kArchitectureSchema && !of_kernels) return "";
  std::string fingerprint;
  try {
    fingerprint = device_fingerprint(read_host_info());
  } catch (const Error&) {
    return "";
  }
  if (model.device_fingerprint().rfind(fingerprint + "|", 0) != 0) {
    return "note: " + model_path + " predicts " + model.device_name() +
           ", not this machine (another device fingerprint)";
  }
  const std::string instance = this_host_instance();
  return host_difference(model, model_path, {{instance, 0}}, "this machine");
}

}  // namespace carb::cli
