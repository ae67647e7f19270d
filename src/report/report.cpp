// The HTML report: one file with the Vega-Lite scripts, the data and the charts inlined, so it
// opens offline. After every chart has rendered, the page marks <body> with the count of charts
// drawn and of console errors and warnings, so a headless browser can check it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "carb/error.hpp"
#include "carb/report.hpp"
#include "carb/version.hpp"
#include "report_html.hpp"
#include "vega_scripts.hpp"

namespace carb {

namespace {

using report_detail::Chart;
using report_detail::display_unit;
using report_detail::display_value;
using report_detail::escape_html;
using report_detail::format_number;
using report_detail::json;
using report_detail::Page;

constexpr const char* kNoHtmlReport =
    "this carb was built without the HTML report (CARB_REPORT=OFF: no Vega-Lite scripts); "
    "carb characterize prints the same figures";

constexpr const char* kStyle = R"css(
body { font: 14px/1.45 "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; margin: 0;
       background: #fafafa; }
header { background: #1f3b57; color: #fff; padding: 14px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 2px 0; color: #d5e2ee; font-size: 13px; }
header nav a { color: #fff; margin-right: 14px; font-size: 13px; }
main { padding: 6px 28px 40px; }
section { margin-top: 18px; }
h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 3px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
table { border-collapse: collapse; margin: 6px 0 12px; background: #fff; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td code.fingerprint { font-size: 11px; word-break: break-all; display: inline-block; max-width: 420px; }
th { background: #eef2f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.na { color: #8a5a00; }
.charts { display: flex; flex-wrap: wrap; gap: 14px; }
figure { margin: 0; background: #fff; border: 1px solid #e2e2e2; padding: 8px; }
figcaption { font-size: 12px; color: #555; max-width: 560px; margin-top: 4px; }
.note { color: #8a5a00; margin: 4px 0; }
code { background: #eef2f6; padding: 0 3px; }
#carb-errors { color: #b00; white-space: pre-wrap; margin: 20px 28px; }
)css";

// Runs after the data: embeds every chart, then marks <body> for headless checks.
constexpr const char* kScript = R"js(
(function () {
  const problems = [];
  const record = (kind, args) =>
    problems.push(kind + ': ' + Array.from(args).map(a => (a && a.message) || String(a)).join(' '));
  const originalError = console.error, originalWarn = console.warn;
  console.error = function () { record('console error', arguments); originalError.apply(console, arguments); };
  console.warn = function () { record('console warning', arguments); originalWarn.apply(console, arguments); };
  window.addEventListener('error', e => record('uncaught error', [e.message]));
  window.addEventListener('unhandledrejection', e => record('unhandled rejection', [e.reason]));
  const data = JSON.parse(document.getElementById('carb-data').textContent);
  const charts = JSON.parse(document.getElementById('carb-charts').textContent);
  const embedded = charts.map(chart => {
    const spec = chart.spec;
    spec.datasets = {};
    chart.datasets.forEach(name => { spec.datasets[name] = data[name]; });
    return vegaEmbed('#' + chart.id, spec, {renderer: 'svg', actions: false})
      .then(result => {
        const element = document.getElementById(chart.id);
        if (!element.querySelector('svg .role-mark')) throw new Error(chart.id + ': nothing drawn');
        element.setAttribute('data-rendered', 'true');
        return result;
      })
      .catch(error => record('chart ' + chart.id, [error]));
  });
  Promise.allSettled(embedded).then(() => {
    const body = document.body;
    body.setAttribute('data-carb-rendered',
                      String(document.querySelectorAll('.chart[data-rendered="true"]').length));
    body.setAttribute('data-carb-errors', String(problems.length));
    if (problems.length > 0) {
      const list = document.getElementById('carb-errors');
      list.textContent = problems.join('\n');
      list.hidden = false;
    }
    body.setAttribute('data-carb-status', 'done');
  });
})();
)js";

// JSON inside <script>: "</" would end the element early; "<\/" means the same in JSON.
std::string script_json(const json& value) {
  std::string text = value.dump();
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += '\\';
  }
  return out;
}

std::string td(const std::string& text) { return "<td>" + escape_html(text) + "</td>"; }
std::string num(double value, int digits = 4) {
  return "<td class=\"num\">" + format_number(value, digits) + "</td>";
}
std::string na(const std::string& reason, int columns) {
  return "<td class=\"na\" colspan=\"" + std::to_string(columns) +
         "\">unavailable: " + escape_html(reason) + "</td>";
}

std::string charts_html(const std::vector<Chart>& charts) {
  if (charts.empty()) return "";
  std::string out = "<div class=\"charts\">";
  for (const Chart& chart : charts) {
    out += "<figure><div class=\"chart\" id=\"" + chart.id + "\"></div><figcaption>" +
           escape_html(chart.caption) + "</figcaption></figure>";
  }
  return out + "</div>";
}

std::string notes_html(const std::vector<std::string>& notes) {
  std::string out;
  for (const std::string& note : notes) out += "<p class=\"note\">" + escape_html(note) + "</p>";
  return out;
}

std::string overview_html(const CampaignData& data) {
  std::string out =
      "<table><thead><tr><th>device</th><th>fingerprint</th><th>databases</th>"
      "<th>host instances</th><th>configurations measured</th><th>measurement rows by status</th>"
      "<th>configurations that never succeeded</th></tr></thead><tbody>";
  for (const DeviceCampaign& device : data.devices) {
    std::string statuses, sources;
    for (std::size_t s = 0; s < device.status_counts.size(); ++s) {
      if (device.status_counts[s] == 0) continue;
      statuses += (statuses.empty() ? "" : ", ") +
                  std::string(to_string(static_cast<MeasurementStatus>(s))) + " " +
                  std::to_string(device.status_counts[s]);
    }
    for (const std::string& source : device.sources)
      sources += (sources.empty() ? "" : ", ") + source;
    out += "<tr>" + td(device.name) + "<td><code class=\"fingerprint\">" +
           escape_html(device.fingerprint) + "</code></td>" + td(sources) +
           td(instances_text(device.instances)) + num(static_cast<double>(device.rows.size()), 10) +
           td(statuses) + num(static_cast<double>(device.failures.size()), 10) + "</tr>";
  }
  out += "</tbody></table>";
  for (const DeviceCampaign& device : data.devices) {
    const std::string pooled = pooled_hosts_warning(device);
    if (!pooled.empty()) out += notes_html({pooled});
  }
  for (const DeviceCampaign& device : data.devices) {
    if (device.failures.empty()) continue;
    constexpr std::size_t kShown = 50;
    out += "<h3>Failures on " + escape_html(device.name) + " (" +
           std::to_string(device.failures.size()) + " configurations" +
           (device.failures.size() > kShown ? ", the first " + std::to_string(kShown) + " shown"
                                            : "") +
           ")</h3><table><thead><tr><th>configuration</th><th>status</th><th>attempts</th>"
           "<th>detail</th></tr></thead><tbody>";
    for (std::size_t i = 0; i < device.failures.size() && i < kShown; ++i) {
      const MeasurementOutcome& f = device.failures[i];
      out += "<tr><td><code>" + escape_html(f.configuration_key) + "</code></td>" +
             td(std::string(to_string(f.status))) + num(f.attempts, 6) + td(f.detail) + "</tr>";
    }
    out += "</tbody></table>";
  }
  return out;
}

std::string characterization_html(const Characterization& characterization) {
  std::string out;
  for (const DeviceCharacterization& device : characterization.devices) {
    out += "<h3>" + escape_html(device.name) + " (" + std::to_string(device.configurations) +
           " configurations)</h3>";
    std::vector<const TargetCharacterization*> available;
    for (const TargetCharacterization& t : device.targets) {
      if (t.available) {
        available.push_back(&t);
      } else {
        out += "<p class=\"note\">" + std::string(to_string(t.target)) +
               ": unavailable: " + escape_html(t.reason) + "</p>";
      }
    }
    if (available.empty()) continue;
    // Regimes as columns: every regime any target has.
    std::vector<std::string> regimes;
    for (const TargetCharacterization* t : available) {
      for (const RegimeMedian& r : t->regimes) {
        if (std::find(regimes.begin(), regimes.end(), r.name) == regimes.end()) {
          regimes.push_back(r.name);
        }
      }
    }
    out += "<table><thead><tr><th>median by batch regime</th>";
    for (const std::string& r : regimes) out += "<th>" + escape_html(r) + "</th>";
    out += "<th>highest / lowest regime</th><th>the same networks in both</th></tr></thead><tbody>";
    for (const TargetCharacterization* t : available) {
      out += "<tr>" + td(std::string(to_string(t->target)) + " (" + display_unit(t->target) + ")");
      for (const std::string& name : regimes) {
        const auto found = std::find_if(t->regimes.begin(), t->regimes.end(),
                                        [&](const RegimeMedian& r) { return r.name == name; });
        out += found == t->regimes.end()
                   ? "<td></td>"
                   : "<td class=\"num\">" + format_number(display_value(t->target, found->median)) +
                         " <small>(n " + std::to_string(found->rows) + ")</small></td>";
      }
      out += t->regime_ratio ? num(*t->regime_ratio, 3)
                             : "<td class=\"na\">" + escape_html(t->regime_ratio_reason) + "</td>";
      out += t->matched_regime_ratio
                 ? "<td class=\"num\">" + format_number(*t->matched_regime_ratio, 3) + " <small>(" +
                       std::to_string(t->matched_networks) + " networks)</small></td>"
                 : std::string("<td></td>");
      out += "</tr>";
    }
    out += "</tbody></table><p>Energy vs latency divergence (energy's regime ratio / latency's): " +
           (device.energy_latency_divergence
                ? "<b>" + format_number(*device.energy_latency_divergence, 3) + "</b>" +
                      (device.matched_energy_latency_divergence
                           ? " (the same networks: " +
                                 format_number(*device.matched_energy_latency_divergence, 3) + ")"
                           : std::string())
                : "<span class=\"note\">unavailable" +
                      (device.targets[static_cast<std::size_t>(Target::kEnergy)].available
                           ? ": " + escape_html(device.divergence_reason)
                           : std::string(" (energy is, above)")) +
                      "</span>") +
           "</p>";

    // Per GFLOP by batch size, for energy and latency.
    std::vector<const TargetCharacterization*> per_gflop;
    std::set<int> batches;
    for (const TargetCharacterization* t : available) {
      if (t->target == Target::kMemory) continue;
      per_gflop.push_back(t);
      for (const BatchMedian& b : t->by_batch) batches.insert(b.batch);
    }
    if (!per_gflop.empty()) {
      out += "<table><thead><tr><th>batch</th>";
      for (const TargetCharacterization* t : per_gflop) {
        out += "<th>" + std::string(to_string(t->target)) + " per GFLOP (" +
               display_unit(t->target) + ", median)</th>";
      }
      out += "</tr></thead><tbody>";
      for (int batch : batches) {
        out += "<tr>" + num(batch, 6);
        for (const TargetCharacterization* t : per_gflop) {
          const auto found = std::find_if(t->by_batch.begin(), t->by_batch.end(),
                                          [&](const BatchMedian& b) { return b.batch == batch; });
          out += found != t->by_batch.end() && found->median_per_gflop
                     ? num(*found->median_per_gflop)
                     : "<td></td>";
        }
        out += "</tr>";
      }
      out += "<tr><td>smallest / largest batch</td>";
      for (const TargetCharacterization* t : per_gflop) {
        out += t->small_batch_penalty ? "<td class=\"num\"><b>" +
                                            format_number(*t->small_batch_penalty, 3) + "</b></td>"
                                      : std::string("<td></td>");
      }
      out += "</tr></tbody></table>";
    }

    // Precision.
    out +=
        "<table><thead><tr><th>precision effect</th><th>precision</th><th>fp32 / it</th>"
        "<th>how</th></tr></thead><tbody>";
    for (const TargetCharacterization* t : available) {
      out += "<tr>" + td(std::string(to_string(t->target)));
      if (t->precision.empty()) {
        out += na(t->precision_reason, 3) + "</tr>";
        continue;
      }
      for (std::size_t p = 0; p < t->precision.size(); ++p) {
        const PrecisionEffect& e = t->precision[p];
        if (p > 0) out += "<tr><td></td>";
        out += td(std::string(to_string(e.precision))) + num(e.ratio, 3) +
               td(e.pairs > 0
                      ? "median of " + std::to_string(e.pairs) + " matched pairs"
                      : "group medians (" + std::to_string(e.fp32_rows) + " fp32, " +
                            std::to_string(e.rows) + " " + std::string(to_string(e.precision)) +
                            " rows; no configuration measured in both)") +
               "</tr>";
      }
    }
    out += "</tbody></table>";

    // FLOPs alone against CARB.
    out +=
        "<table><thead><tr><th>how well FLOPs explain</th><th>FLOPs-only log-log R² (all rows)</th>"
        "<th>exponent</th><th>CARB R² (test split)</th><th>FLOPs-only R² (same split)</th>"
        "<th>test rows</th><th>model</th></tr></thead><tbody>";
    for (const TargetCharacterization* t : available) {
      out += "<tr>" + td(std::string(to_string(t->target)));
      out += t->flops ? num(t->flops->r2) + num(t->flops->exponent, 3)
                      : "<td class=\"na\" colspan=\"2\">" + escape_html(t->flops_reason) + "</td>";
      out += t->carb.available
                 ? num(t->carb.r2) + num(t->carb.flops_r2) +
                       num(static_cast<double>(t->carb.test_rows), 8) + td(t->carb.source)
                 : na(t->carb.reason, 4);
      out += "</tr>";
    }
    out += "</tbody></table>";
  }
  return out;
}

// Per pair and target: the ratio of the second device to the first by knob value, a knob a
// row, so one sees where the gap between two engines or machines grows and where it reverses.
std::string ratio_groups_html(const DeviceTransfer& transfer) {
  std::string out;
  for (const TargetTransfer& t : transfer.targets) {
    if (!t.available || t.by_knob.empty()) continue;
    out += "<p>" + escape_html(std::string(to_string(t.target))) + ", " +
           escape_html(transfer.to_name + " / " + transfer.from_name) +
           " by knob (geometric mean of the ratio; configurations in brackets; below 1: the "
           "second is faster or smaller):</p><table><tbody>";
    for (std::size_t g = 0; g < t.by_knob.size(); ++g) {
      const RatioGroup& group = t.by_knob[g];
      if (g == 0 || t.by_knob[g - 1].knob != group.knob) {
        out +=
            (g == 0 ? "" : "</tr>") + std::string("<tr><th>") + escape_html(group.knob) + "</th>";
      }
      out += "<td class=\"num\">" + escape_html(group.value) + ": " +
             format_number(group.geomean_ratio, 3) + " (" + std::to_string(group.rows) + ")</td>";
    }
    out += "</tr></tbody></table>";
  }
  return out;
}

std::string transfer_html(const Characterization& characterization) {
  if (characterization.transfers.empty()) return "";
  std::string out =
      "<table><thead><tr><th>devices</th><th>target</th><th>shared configurations</th>"
      "<th>slope</th><th>median ratio</th><th>geometric mean ratio (range)</th>"
      "<th>lower on the second</th><th>Spearman ρ</th><th>verdict</th></tr></thead><tbody>";
  for (const DeviceTransfer& transfer : characterization.transfers) {
    for (const TargetTransfer& t : transfer.targets) {
      out += "<tr>" +
             td(transfer.from_name + " → " + transfer.to_name + " (" +
                std::string(describe_relation(transfer.relation)) + ")") +
             td(std::string(to_string(t.target)));
      if (!t.available) {
        out += na(t.reason, 7) + "</tr>";
        continue;
      }
      out += num(static_cast<double>(t.shared), 8) + num(t.slope, 3) + num(t.median_ratio, 3) +
             "<td class=\"num\">" + format_number(t.geomean_ratio, 3) + " (" +
             format_number(t.min_ratio, 3) + "–" + format_number(t.max_ratio, 3) + ")</td>" +
             num(static_cast<double>(t.second_lower), 8) + num(t.spearman, 3) + td(t.verdict) +
             "</tr>";
    }
  }
  out += "</tbody></table>";
  for (const DeviceTransfer& transfer : characterization.transfers) {
    out += ratio_groups_html(transfer);
  }
  return out;
}

std::string screening_html(const ReportInput& input, const Page& page) {
  if (!input.screening || !page.data.contains("screening")) return "";
  std::size_t front = 0, feasible = 0, over = 0, measured = 0;
  for (const json& point : page.data.at("screening")) {
    const std::string set = point.at("set").get<std::string>();
    front += set == "Pareto front (shortlist)" ? 1 : 0;
    feasible += set == "feasible" ? 1 : 0;
    over += set == "over budget" ? 1 : 0;
  }
  measured = page.data.at("screening_validation").size();
  const ScreenResult& result = input.screening->result;
  std::string budgets;
  for (const Budget& b : result.budgets) {
    budgets += (budgets.empty() ? "" : ", ") + std::string(to_string(b.target)) +
               (b.strict ? " < " : " ≤ ") + format_number(display_value(b.target, b.limit)) + " " +
               display_unit(b.target);
  }
  std::string objectives = result.value ? result.value->describe() + " maximised; " : "";
  for (std::size_t k = 0; k < result.costs.size(); ++k) {
    objectives += (k == 0 ? "" : ", ") + std::string(to_string(result.costs[k]));
  }
  objectives += " minimised";
  std::string out =
      "<p>Screening <code>" + escape_html(input.screening->path) + "</code> of " +
      std::to_string(result.counts.configurations) + " configurations (" + escape_html(objectives) +
      "): " + std::to_string(front) + (front == 1 ? " configuration" : " configurations") +
      " on the Pareto front; of the other candidates stage 2 scored, " + std::to_string(feasible) +
      " feasible and " + std::to_string(over) + " over budget";
  out += ". Budgets: " + (budgets.empty() ? std::string("none given") : escape_html(budgets)) +
         ". " + std::to_string(measured) +
         (measured == 1 ? " shortlisted configuration has" : " shortlisted configurations have") +
         " measurements in the databases.</p>";
  return out;
}

}  // namespace

void require_html_report() {
  if (report_detail::vega_scripts().empty()) throw Error(ErrorCategory::kUsage, kNoHtmlReport);
}

std::string render_report(const ReportInput& input) {
  require_html_report();
  CARB_CHECK(input.data != nullptr && input.characterization != nullptr, "report needs data");
  Page page;
  report_detail::add_overview(page, *input.data);
  report_detail::add_scaling(page, *input.data, *input.characterization);
  report_detail::add_predictions(page, input);
  report_detail::add_transfer(page, *input.data, *input.characterization);
  report_detail::add_screening(page, input);

  std::vector<const Chart*> all;
  for (const auto* group :
       {&page.overview, &page.scaling, &page.predictions, &page.transfer, &page.screening}) {
    for (const Chart& chart : *group) all.push_back(&chart);
  }
  json charts = json::array();
  for (const Chart* chart : all) {
    charts.push_back({{"id", chart->id}, {"spec", chart->spec}, {"datasets", chart->datasets}});
  }

  std::string sources;
  for (const std::string& source : input.data->sources)
    sources += (sources.empty() ? "" : ", ") + source;
  std::string html =
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>carb report</title>\n<style>" +
      std::string(kStyle) + "</style>\n";
  std::string versions;
  for (const auto& script : report_detail::vega_scripts()) {
    versions += (versions.empty() ? "" : ", ") + std::string(script.package) + " " +
                std::string(script.version);
  }
  html += "<!-- Charts by " + versions +
          " (BSD-3-Clause; their licences are at the end of this file). -->\n";
  for (const auto& script : report_detail::vega_scripts()) {
    html += "<script>" + std::string(script.script) + "</script>\n";
  }
  html +=
      "</head>\n<body data-carb-charts=\"" + std::to_string(all.size()) +
      "\">\n<header><h1>carb report</h1>"
      "<p>Generated " +
      escape_html(input.generated_at) + " by carb " + kVersion + " (" + kGitCommit + ") from " +
      escape_html(sources) +
      (input.model_path.empty() ? "" : "; model " + escape_html(input.model_path)) +
      ".</p>"
      "<nav><a href=\"#overview\">overview</a><a href=\"#characterization\">characterization</a>"
      "<a href=\"#scaling\">scaling</a><a href=\"#predictions\">predicted vs measured</a>"
      "<a href=\"#transfer\">across devices</a><a "
      "href=\"#screening\">screening</a></nav></header>\n<main>\n";
  html += "<section id=\"overview\"><h2>Campaign overview</h2>" + overview_html(*input.data) +
          charts_html(page.overview) + "</section>\n";
  html +=
      "<section id=\"characterization\"><h2>Characterization</h2><p>method.md §6, as "
      "<code>carb characterize</code> prints it. Batch regimes are the predictor's batch "
      "tiers; ratios are of medians; docs/characterization.md defines each figure.</p>" +
      characterization_html(*input.characterization) + "</section>\n";
  html += "<section id=\"scaling\"><h2>Scaling</h2>" + notes_html(page.notes_scaling) +
          charts_html(page.scaling) + "</section>\n";
  html += "<section id=\"predictions\"><h2>Predicted vs measured</h2>" + page.predictions_summary +
          notes_html(page.notes_predictions) + charts_html(page.predictions) + "</section>\n";
  html += "<section id=\"transfer\"><h2>Across devices</h2>" +
          transfer_html(*input.characterization) + notes_html(page.notes_transfer) +
          charts_html(page.transfer) + "</section>\n";
  html += "<section id=\"screening\"><h2>Screening</h2>" + screening_html(input, page) +
          notes_html(page.notes_screening) + charts_html(page.screening) + "</section>\n";
  html += "</main>\n<pre id=\"carb-errors\" hidden></pre>\n";
  html += "<script type=\"application/json\" id=\"carb-data\">" + script_json(page.data) +
          "</script>\n";
  html +=
      "<script type=\"application/json\" id=\"carb-charts\">" + script_json(charts) + "</script>\n";
  html += "<script>" + std::string(kScript) + "</script>\n";
  for (const auto& script : report_detail::vega_scripts()) {
    html += "<!-- " + std::string(script.package) + " " + std::string(script.version) +
            " licence:\n" + std::string(script.licence) + "-->\n";
  }
  html += "</body>\n</html>\n";
  return html;
}

ReportFile write_report(const ReportInput& input, const std::string& path) {
  const std::string html = render_report(input);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCategory::kRuntime, path + ": cannot write");
    out << html;
    if (!out.flush()) throw Error(ErrorCategory::kRuntime, path + ": write failed");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) throw Error(ErrorCategory::kRuntime, path + ": " + error.message());
  ReportFile file;
  file.bytes = html.size();
  for (std::size_t at = html.find("class=\"chart\""); at != std::string::npos;
       at = html.find("class=\"chart\"", at + 1)) {
    ++file.charts;
  }
  return file;
}

}  // namespace carb
