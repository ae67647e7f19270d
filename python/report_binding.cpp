// Characterization and the HTML report of one or more campaign databases.
#include <nlohmann/json.hpp>
#include <optional>

#include "binding.hpp"
#include "carb/error.hpp"
#include "carb/report.hpp"
#include "carb/screening.hpp"

namespace carb::python {

namespace {

// The databases' devices (those named, or all), the model given, each device's model (fitted
// now where none is given and `fit` says so) and the characterization, with the warnings a
// reader should see (several host instances pooled as one device).
struct Characterized {
  CampaignData data;
  std::shared_ptr<const Predictor> model;
  std::vector<DeviceModel> models;
  Characterization characterization;
  std::vector<std::string> warnings;
};

// The model a report or characterization scores: given as an object (named `model_name`), or
// read from `model_name` as a file; none when both are empty.
std::shared_ptr<const Predictor> device_model_of(const std::shared_ptr<Predictor>& model,
                                                 const std::string& model_name) {
  if (model) {
    require_device_model(*model, model_name);
    return model;
  }
  return model_name.empty() ? nullptr : load_device_model(model_name);
}

Characterized characterized(const std::vector<std::string>& databases,
                            const std::vector<std::string>& devices,
                            const std::shared_ptr<Predictor>& model, const std::string& model_path,
                            bool fit, const FitOptions& options) {
  Characterized out;
  out.data = load_campaigns(databases);
  keep_devices(out.data, devices);
  out.model = device_model_of(model, model_path);
  for (const DeviceCampaign& device : out.data.devices) {
    if (const std::string pooled = pooled_hosts_warning(device); !pooled.empty()) {
      out.warnings.push_back(pooled);
    }
  }
  out.models = device_models(out.data, out.model, model_path,
                             fit ? std::optional<FitOptions>(options) : std::nullopt);
  out.characterization = characterize(out.data, out.models);
  return out;
}

}  // namespace

void bind_report(py::module_& m) {
  m.def(
      "characterize",
      [](const std::vector<std::string>& databases, const std::vector<std::string>& devices,
         const std::shared_ptr<Predictor>& model, const std::string& model_path, bool fit,
         const FitOptions& options) {
        return without_gil([&] {
          const Characterized c =
              characterized(databases, devices, model, model_path, fit, options);
          return std::make_pair(characterization_json(c.characterization), c.warnings);
        });
      },
      py::arg("databases"), py::arg("devices"), py::arg("model").none(true), py::arg("model_path"),
      py::arg("fit"), py::arg("options"));

  m.def(
      "report",
      [](const std::vector<std::string>& databases, const std::vector<std::string>& devices,
         const std::shared_ptr<Predictor>& model, const std::string& model_path,
         const std::string& screening_path, const std::string& screening_json, bool fit,
         const FitOptions& options, const std::string& generated_at, const std::string& output) {
        return without_gil([&] {
          require_html_report();  // before anything is read
          // Every input before the slow part, so a bad one fails at once.
          std::optional<ScreeningInput> screening;
          if (!screening_path.empty()) {
            screening = ScreeningInput{screening_path, read_screen_result(screening_path)};
          } else if (!screening_json.empty()) {
            screening = ScreeningInput{
                "screen()",
                screen_result_from_json(nlohmann::json::parse(screening_json), "screen()")};
          }
          const Characterized c =
              characterized(databases, devices, model, model_path, fit, options);
          ReportInput input;
          input.data = &c.data;
          input.characterization = &c.characterization;
          input.models = c.models;
          input.model = c.model;
          input.model_path = model_path;
          input.screening = std::move(screening);
          input.generated_at = generated_at;
          const ReportFile file = write_report(input, output);
          return std::make_tuple(file.charts, file.bytes, c.warnings);
        });
      },
      py::arg("databases"), py::arg("devices"), py::arg("model").none(true), py::arg("model_path"),
      py::arg("screening_path"), py::arg("screening_json"), py::arg("fit"), py::arg("options"),
      py::arg("generated_at"), py::arg("output"));

  m.def("require_html_report", &require_html_report);
}

}  // namespace carb::python
