// The report's tables and Vega-Lite charts: campaign overview, scaling, predicted against
// measured, transfer between devices, and the screening result.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "report_html.hpp"

namespace carb::report_detail {

namespace {

constexpr const char* kSchema = "https://vega.github.io/schema/vega-lite/v6.json";
constexpr int kWidth = 380, kHeight = 270;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::array<MeasurementStatus, 6> kStatuses = {
    MeasurementStatus::kOk,      MeasurementStatus::kUnsupported, MeasurementStatus::kOom,
    MeasurementStatus::kTimeout, MeasurementStatus::kCrashed,     MeasurementStatus::kError};
constexpr std::array<Target, 3> kTargets = {Target::kMemory, Target::kEnergy, Target::kLatency};

std::size_t at(Target target) { return static_cast<std::size_t>(target); }

json unit_spec(const std::string& title) {
  return {{"$schema", kSchema}, {"title", title}, {"width", kWidth}, {"height", kHeight}};
}

json log_axis(const std::string& field, const std::string& title) {
  return {
      {"field", field}, {"type", "quantitative"}, {"scale", {{"type", "log"}}}, {"title", title}};
}

json field(const std::string& name, const std::string& type = "nominal") {
  return {{"field", name}, {"type", type}};
}

json number_field(const std::string& name, const std::string& title = "") {
  json out = {{"field", name}, {"type", "quantitative"}, {"format", ".4~g"}};
  if (!title.empty()) out["title"] = title;
  return out;
}

// A y = x line across [low, high] (display units), drawn dashed.
json diagonal(double low, double high) {
  return {{"data", {{"values", json::array({{{"v", low}}, {{"v", high}}})}}},
          {"mark", {{"type", "line"}, {"color", "#888"}, {"strokeDash", {4, 4}}}},
          {"encoding",
           {{"x", {{"field", "v"}, {"type", "quantitative"}}},
            {"y", {{"field", "v"}, {"type", "quantitative"}}}}}};
}

std::string filter_target(Target target) {
  return "datum.target == '" + std::string(to_string(target)) + "'";
}

std::string chart_id(const std::string& text) {
  std::string id = "chart-";
  for (char c : text) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return id;
}

// The configuration fields every point's tooltip starts with.
json key_tooltip() { return json::array({field("key"), field("device")}); }

}  // namespace

double display_value(Target target, double canonical) {
  return target == Target::kMemory ? canonical / kMiB : canonical;
}

std::string display_unit(Target target) {
  switch (target) {
    case Target::kMemory:
      return "MiB";
    case Target::kEnergy:
      return "J";
    case Target::kLatency:
      break;
  }
  return "ms";
}

std::string display_field(Target target) {
  return std::string(to_string(target)) + "_" + display_unit(target);
}

std::string display_label(Target target) {
  return std::string(to_string(target)) + " (" + display_unit(target) + ")";
}

double round_to(double value, int digits) {
  if (value == 0 || !std::isfinite(value)) return value;
  const double magnitude =
      std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(value)))));
  return std::round(value * magnitude) / magnitude;
}

std::string format_number(double value, int digits) {
  if (!std::isfinite(value)) return "n/a";
  char buffer[32];
  auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general, digits);
  CARB_CHECK(ec == std::errc(), "to_chars failed");
  return std::string(buffer, end);
}

std::string escape_html(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A configuration's knobs for the charts' data. An imported architecture has no block, width or
// stem of carb's ResNets: null there (the charts skip nulls), and its name as the architecture.
json knobs(const Config& config) {
  json out = {{"depth", config.depth()},
              {"resolution", config.resolution},
              {"batch", config.batch},
              {"precision", to_string(config.precision)}};
  if (config.imported()) {
    out["architecture"] = *architecture_name(config);
    for (const char* knob : {"block", "width", "early_downsample"}) out[knob] = nullptr;
  } else {
    out["architecture"] = std::string(to_string(config.block)) + std::to_string(config.depth());
    out["block"] = to_string(config.block);
    out["width"] = config.width_multiplier;
    out["early_downsample"] = config.early_downsample;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Campaign overview

void add_overview(Page& page, const CampaignData& data) {
  json statuses = json::array(), measurements = json::array();
  for (const DeviceCampaign& device : data.devices) {
    for (MeasurementStatus status : kStatuses) {
      statuses.push_back({{"device", device.name},
                          {"status", to_string(status)},
                          {"count", device.status_counts[static_cast<std::size_t>(status)]}});
    }
    for (const MeasuredConfiguration& row : device.rows) {
      json entry = {{"key", row.key}, {"device", device.name}, {"database", row.source}};
      entry.update(knobs(row.config));
      entry["gflops"] = round_to(row.gflops);
      for (Target target : kTargets) {
        const auto& value = row.values[at(target)];
        entry[display_field(target)] =
            value ? json(round_to(display_value(target, *value))) : json(nullptr);
      }
      measurements.push_back(std::move(entry));
    }
  }
  page.data["statuses"] = std::move(statuses);
  page.data["measurements"] = std::move(measurements);
  const bool several = data.devices.size() > 1;

  json statuses_order = json::array();
  for (MeasurementStatus status : kStatuses) statuses_order.push_back(to_string(status));
  json status_layers = json::array(
      {{{"mark", "bar"},
        {"encoding",
         {{"x",
           {{"field", "status"},
            {"type", "nominal"},
            {"sort", statuses_order},
            {"title", "status"}}},
          {"y", {{"field", "count"}, {"type", "quantitative"}, {"title", "measurements"}}},
          {"color",
           {{"field", "status"},
            {"type", "nominal"},
            {"legend", nullptr},
            {"scale",
             {{"domain", statuses_order},
              {"range", {"#4c78a8", "#bab0ac", "#f58518", "#eeca3b", "#e45756", "#b279a2"}}}}}},
          {"tooltip", json::array({field("device"), field("status"), number_field("count")})}}}},
       {{"mark", {{"type", "text"}, {"dy", -7}}},
        {"encoding",
         {{"x", {{"field", "status"}, {"type", "nominal"}, {"sort", statuses_order}}},
          {"y", {{"field", "count"}, {"type", "quantitative"}}},
          {"text", {{"field", "count"}, {"type", "quantitative"}}}}}}});
  json status = unit_spec("Measurements by status");
  status["data"] = {{"name", "statuses"}};
  if (several) {
    status.erase("width");
    status.erase("height");
    status["facet"] = {{"column", {{"field", "device"}, {"type", "nominal"}}}};
    status["spec"] = {{"width", 220}, {"height", kHeight}, {"layer", status_layers}};
  } else {
    status["width"] = 240;
    status["layer"] = status_layers;
  }
  page.overview.push_back({"chart-status",
                           "Every measurement row by status; failures are kept as rows, with their "
                           "reason (the table below).",
                           status,
                           {"statuses"}});

  json by_batch = unit_spec("Measured configurations by batch size and block");
  by_batch["data"] = {{"name", "measurements"}};
  by_batch["mark"] = "bar";
  by_batch["encoding"] = {
      {"x", {{"field", "batch"}, {"type", "ordinal"}, {"title", "batch size"}}},
      {"y", {{"aggregate", "count"}, {"type", "quantitative"}, {"title", "configurations"}}},
      {"color", {{"field", "block"}, {"type", "nominal"}}},
      {"tooltip",
       json::array(
           {field("device"),
            field("batch", "ordinal"),
            field("block"),
            {{"aggregate", "count"}, {"type", "quantitative"}, {"title", "configurations"}}})}};
  if (several) by_batch["encoding"]["column"] = field("device");
  page.overview.push_back({"chart-measured-batch",
                           "Successful measurements by batch size (a configuration measured "
                           "more than once counts once).",
                           by_batch,
                           {"measurements"}});

  json grid = unit_spec("Measured configurations by architecture and resolution");
  grid["data"] = {{"name", "measurements"}};
  grid["mark"] = "rect";
  grid["encoding"] = {
      {"x", {{"field", "resolution"}, {"type", "ordinal"}, {"title", "input resolution (px)"}}},
      {"y",
       {{"field", "architecture"},
        {"type", "ordinal"},
        {"sort", {{"field", "depth"}}},
        {"title", "architecture (block and depth, or an imported model)"}}},
      {"color", {{"aggregate", "count"}, {"type", "quantitative"}, {"title", "configurations"}}},
      {"tooltip",
       json::array(
           {field("device"),
            field("architecture"),
            field("resolution", "ordinal"),
            {{"aggregate", "count"}, {"type", "quantitative"}, {"title", "configurations"}}})}};
  if (several) grid["encoding"]["column"] = field("device");
  page.overview.push_back({"chart-measured-grid",
                           "How the sample covers architectures and input resolutions (all batch "
                           "sizes, widths and stems together).",
                           grid,
                           {"measurements"}});
}

// ---------------------------------------------------------------------------------------------
// Scaling

void add_scaling(Page& page, const CampaignData& data, const Characterization& characterization) {
  json fits = json::array();
  for (Target target : kTargets) {
    const std::string value = display_field(target);
    const std::string label = display_label(target);
    bool any = false;
    std::string fit_titles;
    for (std::size_t d = 0; d < data.devices.size(); ++d) {
      const DeviceCampaign& device = data.devices[d];
      const TargetCharacterization& c = characterization.devices[d].targets[at(target)];
      if (!c.available) {
        page.notes_scaling.push_back(std::string(to_string(target)) + " on " + device.name +
                                     ": unavailable: " + c.reason);
        continue;
      }
      any = true;
      if (!c.flops) continue;
      double low = INFINITY, high = 0;
      for (const MeasuredConfiguration& row : device.rows) {
        if (!row.values[at(target)] || row.gflops <= 0) continue;
        low = std::min(low, row.gflops);
        high = std::max(high, row.gflops);
      }
      for (double gflops : {low, high}) {
        const double fitted = std::exp(c.flops->intercept) * std::pow(gflops, c.flops->exponent);
        fits.push_back({{"device", device.name},
                        {"target", to_string(target)},
                        {"gflops", round_to(gflops)},
                        {"value", round_to(display_value(target, fitted))}});
      }
      fit_titles += (fit_titles.empty() ? "" : ", ") + std::string("log-log R² ") +
                    format_number(c.flops->r2, 3) +
                    (data.devices.size() > 1 ? " (" + device.name + ")" : "");
    }
    if (!any) continue;
    std::string filter = "isValid(datum.";
    filter += value;
    filter += ") && datum.";
    filter += value;
    filter += " > 0";
    const json valid = {{"filter", filter}};
    json tooltip = key_tooltip();
    for (const char* knob :
         {"block", "depth", "width", "early_downsample", "resolution", "batch", "precision"}) {
      tooltip.push_back(field(knob));
    }
    tooltip.push_back(number_field("gflops", "GFLOPs"));
    tooltip.push_back(number_field(value, label));
    tooltip.push_back(field("database"));

    json batch = unit_spec(std::string(to_string(target)) + " vs batch size");
    batch["layer"] = json::array(
        {{{"data", {{"name", "measurements"}}},
          {"transform", json::array({valid})},
          {"mark", {{"type", "point"}, {"filled", true}, {"opacity", 0.35}, {"size", 16}}},
          {"encoding",
           {{"x",
             {{"field", "batch"},
              {"type", "quantitative"},
              {"scale", {{"type", "log"}, {"base", 2}}},
              {"title", "batch size"}}},
            {"y", log_axis(value, label)},
            {"color", {{"field", "device"}, {"type", "nominal"}}},
            {"tooltip", tooltip}}}},
         {{"data", {{"name", "measurements"}}},
          {"transform", json::array({valid})},
          {"mark", {{"type", "line"}, {"point", true}, {"strokeWidth", 2.5}}},
          {"encoding",
           {{"x",
             {{"field", "batch"},
              {"type", "quantitative"},
              {"scale", {{"type", "log"}, {"base", 2}}}}},
            {"y", {{"aggregate", "median"}, {"field", value}, {"type", "quantitative"}}},
            {"color", {{"field", "device"}, {"type", "nominal"}}},
            {"tooltip", json::array({field("device"),
                                     field("batch", "quantitative"),
                                     {{"aggregate", "median"},
                                      {"field", value},
                                      {"type", "quantitative"},
                                      {"format", ".4~g"},
                                      {"title", "median " + label}}})}}}}});
    page.scaling.push_back({chart_id("scaling-batch-" + std::string(to_string(target))),
                            "Every configuration (points) and the median per batch size (line).",
                            batch,
                            {"measurements"}});

    json flops = unit_spec(std::string(to_string(target)) + " vs FLOPs" +
                           (fit_titles.empty() ? "" : ": " + fit_titles));
    flops["layer"] = json::array(
        {{{"data", {{"name", "measurements"}}},
          {"transform", json::array({valid})},
          {"mark", {{"type", "point"}, {"filled", true}, {"opacity", 0.5}, {"size", 16}}},
          {"encoding",
           {{"x", log_axis("gflops", "GFLOPs per forward pass (whole batch)")},
            {"y", log_axis(value, label)},
            {"color",
             {{"field", "batch"},
              {"type", "ordinal"},
              {"scale", {{"scheme", "viridis"}}},
              {"title", "batch"}}},
            {"shape", {{"field", "device"}, {"type", "nominal"}}},
            {"tooltip", tooltip}}}},
         {{"data", {{"name", "flops_fit"}}},
          {"transform", json::array({{{"filter", filter_target(target)}}})},
          {"mark", {{"type", "line"}, {"color", "#222"}, {"strokeDash", {6, 3}}}},
          {"encoding",
           {{"x", {{"field", "gflops"}, {"type", "quantitative"}}},
            {"y", {{"field", "value"}, {"type", "quantitative"}}},
            {"detail", field("device")}}}}});
    if (fit_titles.empty()) flops["layer"].erase(1);  // no fit: an empty layer makes Vega warn
    page.scaling.push_back({chart_id("scaling-flops-" + std::string(to_string(target))),
                            "Dashed: the FLOPs-only log-log fit (how much FLOPs alone explains).",
                            flops,
                            {"measurements", "flops_fit"}});
  }
  page.data["flops_fit"] = std::move(fits);
}

// ---------------------------------------------------------------------------------------------
// Predicted against measured

void add_predictions(Page& page, const ReportInput& input) {
  const CampaignData& data = *input.data;
  json rows = json::array();
  std::map<std::pair<Target, std::string>, std::array<std::vector<double>, 4>> scored;  // by role
  std::array<std::pair<double, double>, kTargetCount> range;
  range.fill({INFINITY, 0});
  std::set<std::string> roles;
  for (std::size_t d = 0; d < data.devices.size(); ++d) {
    const DeviceCampaign& device = data.devices[d];
    const Predictor* model = input.model               ? input.model.get()
                             : d < input.models.size() ? input.models[d].predictor.get()
                                                       : nullptr;
    if (model == nullptr || device.rows.empty()) continue;
    std::vector<Config> configs;
    for (const MeasuredConfiguration& row : device.rows) configs.push_back(row.config);
    const FeatureRows features = feature_rows(configs);
    const auto predictions =
        model->predict(features.x.data(), configs.size(), features.batch.data());
    const std::set<std::string> fitted(model->fit_report().fitted_ids.begin(),
                                       model->fit_report().fitted_ids.end());
    const bool own = model->device_fingerprint() == device.fingerprint;
    for (std::size_t t = 0; t < model->targets().size(); ++t) {
      const auto target = parse_target(model->targets()[t].name);
      if (!target) continue;
      for (std::size_t i = 0; i < device.rows.size(); ++i) {
        const TargetPrediction& p = predictions[t][i];
        const auto& measured = device.rows[i].values[at(*target)];
        if (!p.available || !measured) continue;
        std::string role;
        if (!own) {
          role = "transfer: model of " + model->device_name() + " on " + device.name;
        } else if (fitted.empty()) {
          role = "the model file does not say which rows it was fitted on";
        } else {
          // By key: a configuration measured again after the fit shows its new measurement.
          role = fitted.count(device.rows[i].key) ? "in the fit" : "not in the fit";
        }
        roles.insert(role);
        auto& lists = scored[{*target, role}];
        lists[0].push_back(*measured);
        lists[1].push_back(p.value);
        lists[2].push_back(p.low);
        lists[3].push_back(p.high);
        const double shown = display_value(*target, *measured);
        auto& [low, high] = range[at(*target)];
        for (double v : {shown, display_value(*target, p.value)}) {
          if (v > 0) {
            low = std::min(low, v);
            high = std::max(high, v);
          }
        }
        rows.push_back({{"target", to_string(*target)},
                        {"key", device.rows[i].key},
                        {"device", device.name},
                        {"database", device.rows[i].source},
                        {"batch", device.rows[i].config.batch},
                        {"role", role},
                        {"measured", round_to(shown)},
                        {"predicted", round_to(display_value(*target, p.value))},
                        {"low", round_to(display_value(*target, p.low))},
                        {"high", round_to(display_value(*target, p.high))}});
      }
    }
  }
  page.data["predictions"] = std::move(rows);
  if (scored.empty()) {
    std::string why;
    for (std::size_t d = 0; d < data.devices.size() && d < input.models.size(); ++d) {
      if (!input.models[d].reason.empty()) why += " " + input.models[d].reason + ".";
    }
    page.notes_predictions.push_back("No predictions to show: no model of a measured device." +
                                     why);
    return;
  }
  // The scores beside the charts, per target and role.
  std::string table =
      "<table><thead><tr><th>target</th><th>rows</th><th>n</th><th>R²</th><th>MAPE</th>"
      "<th>within ±10%</th><th>Spearman ρ</th><th>interval coverage</th></tr></thead><tbody>";
  for (const auto& [what, lists] : scored) {
    const Metrics m = score(lists[0], lists[1], &lists[2], &lists[3]);
    table += "<tr><td>" + std::string(to_string(what.first)) + "</td><td>" +
             escape_html(what.second) + "</td><td>" + std::to_string(m.n) + "</td><td>" +
             format_number(m.r2) + "</td><td>" + format_number(m.mape, 3) + "%</td><td>" +
             format_number(m.within10, 3) + "%</td><td>" + format_number(m.spearman) + "</td><td>" +
             format_number(*m.coverage, 3) + "%</td></tr>";
  }
  page.predictions_summary = table + "</tbody></table>";
  json role_domain = json::array();
  for (const std::string& role : roles) role_domain.push_back(role);
  for (Target target : kTargets) {
    const auto [low, high] = range[at(target)];
    if (!(low < high)) continue;
    const std::string label = display_label(target);
    const json only = {{"filter", filter_target(target)}};
    const json color = {{"field", "role"},
                        {"type", "nominal"},
                        {"scale", {{"domain", role_domain}}},
                        {"title", "rows"}};
    json spec = unit_spec(std::string(to_string(target)) + ": predicted vs measured");
    spec["layer"] = json::array(
        {{{"data", {{"name", "predictions"}}},
          {"transform", json::array({only})},
          {"mark", {{"type", "rule"}, {"opacity", 0.3}}},
          {"encoding",
           {{"x", log_axis("measured", "measured " + label)},
            {"y", log_axis("low", "predicted " + label)},
            {"y2", {{"field", "high"}}},
            {"color", color}}}},
         {{"data", {{"name", "predictions"}}},
          {"transform", json::array({only})},
          {"mark", {{"type", "point"}, {"filled", true}, {"size", 18}, {"opacity", 0.7}}},
          {"encoding",
           {{"x", {{"field", "measured"}, {"type", "quantitative"}}},
            {"y", {{"field", "predicted"}, {"type", "quantitative"}}},
            {"color", color},
            {"tooltip",
             json::array(
                 {field("key"), field("device"), field("database"), field("batch", "quantitative"),
                  field("role"), number_field("measured", "measured " + label),
                  number_field("predicted", "predicted " + label),
                  number_field("low", "interval low"), number_field("high", "interval high")})}}}},
         diagonal(low, high)});
    page.predictions.push_back({chart_id("predicted-" + std::string(to_string(target))),
                                "Each point is a measured configuration; the vertical bars are "
                                "its prediction interval; dashed: predicted = measured. In the "
                                "fit: the model was fitted on this configuration.",
                                spec,
                                {"predictions"}});
  }
}

// ---------------------------------------------------------------------------------------------
// Transfer between devices

void add_transfer(Page& page, const CampaignData& data, const Characterization& characterization) {
  json rows = json::array(), curves = json::array();
  if (data.devices.size() < 2) {
    page.notes_transfer.push_back(
        "One device measured: transfer needs measurements of shared configurations on two "
        "devices (several databases, or a database holding two devices).");
  }
  for (const DeviceTransfer& transfer : characterization.transfers) {
    const auto find = [&](const std::string& fingerprint) -> const DeviceCampaign& {
      return *std::find_if(data.devices.begin(), data.devices.end(),
                           [&](const DeviceCampaign& d) { return d.fingerprint == fingerprint; });
    };
    const DeviceCampaign& from = find(transfer.from_fingerprint);
    const DeviceCampaign& to = find(transfer.to_fingerprint);
    const std::string pair = from.name + " → " + to.name;
    std::map<std::string, const MeasuredConfiguration*> first;
    for (const MeasuredConfiguration& row : from.rows) first[row.key] = &row;
    for (const TargetTransfer& t : transfer.targets) {
      if (!t.available) {
        page.notes_transfer.push_back(std::string(to_string(t.target)) + ", " + pair + ": " +
                                      t.reason);
        continue;
      }
      const std::size_t index = at(t.target);
      double low = INFINITY, high = 0;
      for (const MeasuredConfiguration& row : to.rows) {
        const auto found = first.find(row.key);
        if (found == first.end() || !row.values[index] || !found->second->values[index]) continue;
        const double x = display_value(t.target, *found->second->values[index]);
        const double y = display_value(t.target, *row.values[index]);
        rows.push_back({{"pair", pair},
                        {"target", to_string(t.target)},
                        {"key", row.key},
                        {"batch", row.config.batch},
                        {"from", round_to(x)},
                        {"to", round_to(y)}});
        for (double v : {x, y}) {
          if (v > 0) {
            low = std::min(low, v);
            high = std::max(high, v);
          }
        }
      }
      if (!(low < high)) continue;
      // The least-squares line (display units scale both sides alike), drawn over the x range.
      for (int k = 0; k <= 24; ++k) {
        const double x = low * std::pow(high / low, k / 24.0);
        const double y = t.intercept * display_value(t.target, 1.0) + t.slope * x;
        if (y > 0) {
          curves.push_back({{"pair", pair},
                            {"target", to_string(t.target)},
                            {"from", round_to(x)},
                            {"to", round_to(y)}});
        }
      }
      const std::string label = display_label(t.target);
      const std::string where = "datum.pair == '" + pair + "' && " + filter_target(t.target);
      json spec = unit_spec(std::string(to_string(t.target)) + ": Spearman ρ " +
                            format_number(t.spearman, 3) + ", slope " + format_number(t.slope, 3) +
                            " — " + t.verdict);
      spec["layer"] = json::array(
          {{{"data", {{"name", "transfer"}}},
            {"transform", json::array({{{"filter", where}}})},
            {"mark", {{"type", "point"}, {"filled", true}, {"size", 18}, {"opacity", 0.6}}},
            {"encoding",
             {{"x", log_axis("from", label + " on " + from.name)},
              {"y", log_axis("to", label + " on " + to.name)},
              {"color",
               {{"field", "batch"}, {"type", "ordinal"}, {"scale", {{"scheme", "viridis"}}}}},
              {"tooltip",
               json::array({field("key"), field("batch", "quantitative"),
                            number_field("from", from.name), number_field("to", to.name)})}}}},
           {{"data", {{"name", "transfer_fit"}}},
            {"transform", json::array({{{"filter", where}}})},
            {"mark", {{"type", "line"}, {"color", "#d62728"}}},
            {"encoding",
             {{"x", {{"field", "from"}, {"type", "quantitative"}}},
              {"y", {{"field", "to"}, {"type", "quantitative"}}}}}},
           diagonal(low, high)});
      page.transfer.push_back(
          {chart_id("transfer-" + pair + "-" + std::string(to_string(t.target))),
           pair + ", " + std::to_string(t.shared) +
               " shared configurations. Red: least-squares line; dashed: equal values.",
           spec,
           {"transfer", "transfer_fit"}});
    }
  }
  page.data["transfer"] = std::move(rows);
  page.data["transfer_fit"] = std::move(curves);
}

// ---------------------------------------------------------------------------------------------
// Screening

namespace {

constexpr const char* kFrontSet = "Pareto front (shortlist)";

// One screened candidate: its key, knobs, set, value and predictions in display units.
json screening_point(const ScreenResult& result, std::size_t i, std::size_t rank,
                     const std::vector<Target>& targets) {
  const ScreenCandidate& c = result.pool[i];
  json point = {{"key", c.key},
                {"set", rank > 0                      ? kFrontSet
                        : result.assessed[i].feasible ? "feasible"
                                                      : "over budget"},
                {"p_feasible", result.assessed[i].probability},
                {"inside_domain", c.domain.inside}};
  if (rank > 0) point["rank"] = rank;
  point.update(knobs(parse_key(c.key)));
  if (c.value) point["value"] = *c.value;
  for (Target target : targets) {
    for (std::size_t t = 0; t < result.targets.size(); ++t) {
      if (result.targets[t].name != to_string(target)) continue;
      const TargetPrediction& p = result.predictions[t][i];
      if (!p.available) continue;
      const std::string f = display_field(target);
      point[f] = round_to(display_value(target, p.value));
      point[f + "_low"] = round_to(display_value(target, p.low));
      point[f + "_high"] =
          std::isfinite(p.high) ? json(round_to(display_value(target, p.high))) : json(nullptr);
    }
  }
  return point;
}

// The axis of a value objective: log for the analytic sizes, linear for the rest.
json value_axis(const ValueObjective& value) {
  const std::string title = value.name + (value.analytic() ? " per image" : "") + " (maximised)";
  if (value.name == "params" || value.name == "macs" || value.name == "flops") {
    return log_axis("value", title);
  }
  return {
      {"field", "value"}, {"type", "quantitative"}, {"title", title}, {"scale", {{"zero", false}}}};
}

}  // namespace

void add_screening(Page& page, const ReportInput& input) {
  if (!input.screening) {
    page.notes_screening.push_back(
        "No screening result given: given one (the JSON a screen writes), this section shows its "
        "front.");
    return;
  }
  const ScreeningInput& screening = *input.screening;
  const ScreenResult& result = screening.result;
  if (result.ranked.empty()) {
    page.notes_screening.push_back(screening.path + " has no configuration on its front.");
    return;
  }
  // The costs it predicted, latency first (the x axis).
  std::vector<Target> targets;
  for (Target target : {Target::kLatency, Target::kEnergy, Target::kMemory}) {
    for (std::size_t t = 0; t < result.targets.size(); ++t) {
      if (result.targets[t].name == to_string(target) && !result.predictions[t].empty() &&
          result.predictions[t].front().available) {
        targets.push_back(target);
      }
    }
  }
  if (targets.empty()) {
    page.notes_screening.push_back(screening.path + " predicts no cost.");
    return;
  }
  const std::vector<std::size_t> ranks = result.front_ranks();
  json points = json::array(), validation = json::array();
  for (std::size_t i = 0; i < result.pool.size(); ++i) {
    json point = screening_point(result, i, ranks[i], targets);
    if (ranks[i] > 0) {
      // Measured already (e.g. by carb validate --measure into one of the databases)?
      for (const DeviceCampaign& device : input.data->devices) {
        const auto found = std::lower_bound(
            device.rows.begin(), device.rows.end(), result.pool[i].key,
            [](const MeasuredConfiguration& row, const std::string& key) { return row.key < key; });
        if (found == device.rows.end() || found->key != result.pool[i].key) continue;
        json measured = {{"key", found->key}, {"device", device.name}, {"rank", ranks[i]}};
        if (result.pool[i].value) measured["value"] = *result.pool[i].value;
        bool complete = true;
        for (Target target : targets) {
          const auto& value = found->values[at(target)];
          if (!value || !point.contains(display_field(target))) {
            complete = false;
            break;
          }
          measured[display_field(target)] = round_to(display_value(target, *value));
          measured["predicted_" + display_field(target)] = point[display_field(target)];
        }
        if (complete) validation.push_back(std::move(measured));
      }
    }
    points.push_back(std::move(point));
  }
  json budgets = json::array();
  for (const Budget& budget : result.budgets) {
    if (std::find(targets.begin(), targets.end(), budget.target) == targets.end()) {
      page.notes_screening.push_back("The budget on " + std::string(to_string(budget.target)) +
                                     " is not drawn: the screening has no " +
                                     std::string(to_string(budget.target)) + " predictions.");
      continue;
    }
    const double limit = display_value(budget.target, budget.limit);
    budgets.push_back({{"target", to_string(budget.target)},
                       {"limit", round_to(limit)},
                       {"label", "budget " + std::string(budget.strict ? "< " : "≤ ") +
                                     format_number(limit) + " " + display_unit(budget.target)}});
  }
  if (result.budgets.empty()) page.notes_screening.push_back("The screening had no budget.");
  if (result.counts.excluded_outside_domain > 0) {
    page.notes_screening.push_back(
        std::to_string(result.counts.excluded_outside_domain) +
        " candidates outside the model's training domain were left out (first: " +
        result.first_outside + ").");
  }
  page.data["screening"] = std::move(points);
  page.data["screening_validation"] = std::move(validation);
  page.data["budgets"] = std::move(budgets);

  // The legend names only the sets present.
  json set_domain = json::array(), set_range = json::array();
  const std::pair<const char*, const char*> sets[] = {{"over budget", "#c7c7c7"},
                                                      {"feasible", "#9ecae9"},
                                                      {kFrontSet, "#e45756"},
                                                      {"measured (validation)", "#111111"}};
  for (const auto& [set_name, colour] : sets) {
    const char* name = set_name;  // clang 14 cannot capture a structured binding
    const bool present =
        std::string(name) == "measured (validation)"
            ? !page.data["screening_validation"].empty()
            : std::any_of(page.data["screening"].begin(), page.data["screening"].end(),
                          [&](const json& point) { return point["set"] == name; });
    if (!present) continue;
    set_domain.push_back(name);
    set_range.push_back(colour);
  }
  const json color = {{"field", "set"},
                      {"type", "nominal"},
                      {"title", nullptr},
                      {"scale", {{"domain", set_domain}, {"range", set_range}}}};
  json tooltip = json::array({field("key"), field("set"), field("rank", "quantitative")});
  for (const char* knob :
       {"block", "depth", "width", "early_downsample", "resolution", "batch", "precision"}) {
    tooltip.push_back(field(knob));
  }
  if (result.value) tooltip.push_back(number_field("value", result.value->name));
  tooltip.push_back(number_field("p_feasible", "P(meets every budget)"));
  for (Target target : targets) {
    const std::string f = display_field(target);
    tooltip.push_back(number_field(f, "predicted " + display_label(target)));
    tooltip.push_back(number_field(f + "_low", "interval low"));
    tooltip.push_back(number_field(f + "_high", "interval high"));
  }

  // The charts: with a value, the value against each cost; else the first cost against each
  // other (or against the probability when there is one cost).
  struct Axes {
    Target x;
    std::optional<Target> y;  ///< a cost on y; none: the value, or the probability
  };
  std::vector<Axes> charts;
  if (result.value) {
    for (Target target : targets) charts.push_back({target, std::nullopt});
  } else {
    for (std::size_t k = 1; k < targets.size(); ++k)
      charts.push_back({targets.front(), targets[k]});
    if (charts.empty()) charts.push_back({targets.front(), std::nullopt});
  }
  const std::string front = "datum.set == '" + std::string(kFrontSet) + "'";
  for (const Axes& axes : charts) {
    const Target x = axes.x;
    const std::optional<Target>& y = axes.y;
    const std::string xf = display_field(x);
    const std::string yf = y ? display_field(*y) : result.value ? "value" : "p_feasible";
    const json y_axis =
        y ? log_axis(yf, "predicted " + display_label(*y))
        : result.value
            ? value_axis(*result.value)
            : json{{"field", yf}, {"type", "quantitative"}, {"title", "P(meets every budget)"}};
    json layers = json::array();
    // The other candidates small, the front on top of them and larger.
    for (const bool on_front : {false, true}) {
      if (!on_front && page.data["screening"].size() == result.ranked.size()) continue;
      layers.push_back(
          {{"data", {{"name", "screening"}}},
           {"transform", json::array({{{"filter", on_front ? front : "!(" + front + ")"}}})},
           {"mark",
            {{"type", "point"},
             {"filled", true},
             {"opacity", on_front ? 0.95 : 0.6},
             {"size", on_front ? 70 : 14}}},
           {"encoding",
            {{"x", log_axis(xf, "predicted " + display_label(x))},
             {"y", y_axis},
             {"color", color},
             {"tooltip", tooltip}}}});
    }
    // Intervals of the front's predictions (the value is exact).
    layers.push_back({{"data", {{"name", "screening"}}},
                      {"transform", json::array({{{"filter", front}}})},
                      {"mark", {{"type", "rule"}, {"color", "#e45756"}, {"opacity", 0.5}}},
                      {"encoding",
                       {{"x", {{"field", xf + "_low"}, {"type", "quantitative"}}},
                        {"x2", {{"field", xf + "_high"}}},
                        {"y", {{"field", yf}, {"type", "quantitative"}}}}}});
    if (y) {
      layers.push_back({{"data", {{"name", "screening"}}},
                        {"transform", json::array({{{"filter", front}}})},
                        {"mark", {{"type", "rule"}, {"color", "#e45756"}, {"opacity", 0.5}}},
                        {"encoding",
                         {{"x", {{"field", xf}, {"type", "quantitative"}}},
                          {"y", {{"field", yf + "_low"}, {"type", "quantitative"}}},
                          {"y2", {{"field", yf + "_high"}}}}}});
    }
    layers.push_back({{"data", {{"name", "screening"}}},
                      {"transform", json::array({{{"filter", front + " && datum.rank <= 10"}}})},
                      {"mark", {{"type", "text"}, {"dx", 9}, {"dy", -7}, {"fontSize", 11}}},
                      {"encoding",
                       {{"x", {{"field", xf}, {"type", "quantitative"}}},
                        {"y", {{"field", yf}, {"type", "quantitative"}}},
                        {"text", {{"field", "rank"}, {"type", "quantitative"}}}}}});
    // Budget lines.
    const auto budget_layers = [&](Target target, const char* channel) {
      const json where = json::array({{{"filter", filter_target(target)}}});
      layers.push_back(
          {{"data", {{"name", "budgets"}}},
           {"transform", where},
           {"mark",
            {{"type", "rule"}, {"color", "#2ca02c"}, {"strokeWidth", 2}, {"strokeDash", {8, 4}}}},
           {"encoding", {{channel, {{"field", "limit"}, {"type", "quantitative"}}}}}});
      layers.push_back({{"data", {{"name", "budgets"}}},
                        {"transform", where},
                        {"mark",
                         {{"type", "text"},
                          {"color", "#2ca02c"},
                          {"align", "left"},
                          {"dx", 4},
                          {"dy", -6},
                          {"angle", std::string(channel) == "x" ? 270 : 0}}},
                        {"encoding",
                         {{channel, {{"field", "limit"}, {"type", "quantitative"}}},
                          {"text", {{"field", "label"}, {"type", "nominal"}}}}}});
    };
    // Only layers with data: an empty one makes Vega warn of an infinite extent.
    const auto budgeted = [&](Target target) {
      return std::any_of(result.budgets.begin(), result.budgets.end(),
                         [&](const Budget& b) { return b.target == target; });
    };
    if (budgeted(x)) budget_layers(x, "x");
    if (y && budgeted(*y)) budget_layers(*y, "y");
    if ((y || result.value) && !page.data["screening_validation"].empty()) {
      // Validation: each measured shortlisted configuration, joined to its prediction.
      const std::string predicted_y = y ? "predicted_" + yf : yf;
      layers.push_back({{"data", {{"name", "screening_validation"}}},
                        {"mark", {{"type", "rule"}, {"color", "#111"}, {"opacity", 0.4}}},
                        {"encoding",
                         {{"x", {{"field", "predicted_" + xf}, {"type", "quantitative"}}},
                          {"y", {{"field", predicted_y}, {"type", "quantitative"}}},
                          {"x2", {{"field", xf}}},
                          {"y2", {{"field", yf}}}}}});
      layers.push_back(
          {{"data", {{"name", "screening_validation"}}},
           {"transform", json::array({{{"calculate", "'measured (validation)'"}, {"as", "set"}}})},
           {"mark", {{"type", "point"}, {"shape", "cross"}, {"filled", true}, {"size", 60}}},
           {"encoding",
            {{"x", {{"field", xf}, {"type", "quantitative"}}},
             {"y", {{"field", yf}, {"type", "quantitative"}}},
             {"color", color},
             {"tooltip", json::array({field("key"), field("device"), field("rank", "quantitative"),
                                      number_field(xf, "measured " + display_label(x)),
                                      number_field(yf, y ? "measured " + display_label(*y)
                                                         : result.value->name)})}}}});
    }
    const std::string y_name = y              ? std::string(to_string(*y))
                               : result.value ? result.value->name
                                              : std::string("probability");
    json spec =
        unit_spec("Screening: " + (result.value ? y_name + " vs " + std::string(to_string(x))
                                                : std::string(to_string(x)) + " vs " + y_name));
    spec["width"] = 520;
    spec["height"] = 360;
    spec["layer"] = std::move(layers);
    page.screening.push_back(
        {chart_id("screening-" + std::string(to_string(x)) + "-" + y_name),
         result.value
             ? "The value maximised (" + result.value->describe() + ") against predicted " +
                   std::string(to_string(x)) +
                   " of the screened candidates; red: the value-cost Pareto front within budget, "
                   "numbered by rank, with prediction intervals; green: budgets; black crosses: "
                   "measured shortlisted configurations, joined to their predictions."
             : std::string("Predicted costs of the screened candidates; red: the Pareto front "
                           "within budget, numbered by rank, with prediction intervals; green: "
                           "budgets; black crosses: measured shortlisted configurations, joined "
                           "to their predictions."),
         spec,
         {"screening", "budgets", "screening_validation"}});
  }
}

}  // namespace carb::report_detail
