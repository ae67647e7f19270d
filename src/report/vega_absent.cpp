// carb built with CARB_REPORT=OFF: no Vega-Lite scripts, so render_report_html refuses (one line,
// exit 2) instead of writing a page whose charts cannot draw.
#include "vega_scripts.hpp"

namespace carb::report_detail {

const std::vector<VegaScript>& vega_scripts() {
  static const std::vector<VegaScript> none;
  return none;
}

}  // namespace carb::report_detail
