// The report's private parts: the data tables it embeds, its Vega-Lite charts, and formatting.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "carb/report.hpp"

namespace carb::report_detail {

using json = nlohmann::ordered_json;

/// One chart: a Vega-Lite spec whose data are named datasets of the page (attached when it is
/// embedded, so each table is written into the file once).
struct Chart {
  std::string id;                     ///< the element id, "chart-..."
  std::string caption;                ///< what it shows, under it
  json spec;                          ///< Vega-Lite, without "datasets"
  std::vector<std::string> datasets;  ///< names of the page's tables it reads
};

/// A value in the unit the report shows: memory in MiB, energy in J, latency in ms.
double display_value(Target target, double canonical);
/// The field name of a target in the report's tables: "memory_MiB", "energy_J", "latency_ms".
std::string display_field(Target target);
/// "MiB", "J", "ms".
std::string display_unit(Target target);
/// "memory (MiB)", "energy (J)", "latency (ms)".
std::string display_label(Target target);

/// `value` rounded to `digits` significant digits (the tables stay small and print short).
double round_to(double value, int digits = 5);
/// A number for people: up to `digits` significant digits.
std::string format_number(double value, int digits = 4);
std::string escape_html(std::string_view text);

/// The knobs of a configuration, for tooltips.
json knobs(const Config& config);

/// The page's tables and charts, built from the report's input.
struct Page {
  json data = json::object();  ///< name -> array of rows
  std::vector<Chart> overview, scaling, predictions, transfer, screening;
  std::vector<std::string> notes_scaling, notes_predictions, notes_transfer, notes_screening;
  std::string predictions_summary;  ///< HTML: the scores of the predictions charts
};

void add_overview(Page& page, const CampaignData& data);
void add_scaling(Page& page, const CampaignData& data, const Characterization& characterization);
void add_predictions(Page& page, const ReportInput& input);
void add_transfer(Page& page, const CampaignData& data, const Characterization& characterization);
void add_screening(Page& page, const ReportInput& input);

}  // namespace carb::report_detail
