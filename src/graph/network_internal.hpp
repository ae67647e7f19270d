// What the graph module's files share and nothing else needs.
#pragma once

#include <string>

#include "carb/graph.hpp"

namespace carb {

/// The network of an imported configuration (architecture.cpp): its registered architecture at
/// the configuration's batch, resolution and precision.
Network build_imported_network(const Config& config);

/// The network of an architecture (registered or not) for a configuration of it.
Network instantiate_architecture(const Architecture& architecture, const Config& config);

/// An ONNX file as an architecture (onnx_import.cpp, docs/onnx.md).
Architecture import_onnx(const std::string& path);

}  // namespace carb
