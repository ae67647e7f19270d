// The Vega-Lite scripts the report inlines, embedded into the binary at build time
// (embed_vega.cmake, from the versions third_party/vega/package-lock.json pins).
#pragma once

#include <string_view>
#include <vector>

namespace carb::report_detail {

/// One npm package's browser script.
struct VegaScript {
  std::string_view package;  ///< "vega", "vega-lite" or "vega-embed"
  std::string_view version;  ///< as its package.json says
  std::string_view script;   ///< the minified UMD build
  std::string_view licence;  ///< its LICENSE file (BSD-3-Clause)
};

/// vega, vega-lite and vega-embed, in the order a page must load them.
const std::vector<VegaScript>& vega_scripts();

}  // namespace carb::report_detail
