// What the graph module's files share and nothing else needs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "carb/graph.hpp"

namespace carb {

/// The network of an imported configuration (architecture.cpp): its registered architecture at
/// the configuration's batch, resolution and precision.
Network build_imported_network(const Config& config);

/// The network of an architecture (registered or not) for a configuration of it.
Network instantiate_architecture(const Architecture& architecture, const Config& config);

/// Builds a network layer by layer, inferring each layer's output shape, parameters and MACs: how
/// an imported configuration's network is built, and how the importer knows its tensors' shapes
/// at the file's own size as it adds layers. Counts stay below 2^60, so that every feature
/// computed from the network fits 64 bits; a network past that does not build.
class NetworkBuilder {
 public:
  /// `where` begins every error message (e.g. "architecture x (graph-...) at resolution 224: "),
  /// followed by the layer's name and kind where `name_layers`; the input tensor is config's
  /// batch x `input_channels` x its resolution squared.
  NetworkBuilder(std::string where, const Config& config, int input_channels,
                 bool name_layers = true);
  /// Appends a layer that reads earlier tensors and returns its output's shape; throws
  /// carb::Error (input) naming the layer when it does not fit its inputs.
  const Shape& append(Layer layer);
  /// The network built so far, its output tensor `output` (which must exist); the builder is spent.
  Network finish(int output);
  /// The shape of a tensor built so far.
  const Shape& shape(int tensor) const {
    return network_.tensors[static_cast<std::size_t>(tensor)];
  }
  /// How many tensors exist (the input and one per layer).
  int tensor_count() const { return static_cast<int>(network_.tensors.size()); }

 private:
  [[noreturn]] void fail(const Layer& layer, const std::string& message) const;
  const Shape& input(const Layer& layer, std::size_t k) const;
  void expect_inputs(const Layer& layer, int count) const;
  Shape window(Layer& layer, const Shape& in, int channels) const;
  Shape output_shape(Layer& layer) const;
  std::int64_t checked_elements(const Layer* layer, const Shape& shape) const;
  void add_to_totals(const Layer& layer, const Shape& out);
  void set_in_place();

  std::string where_;
  bool name_layers_ = true;
  Network network_;
  std::int64_t total_macs_ = 0;
  std::int64_t total_params_ = 0;
  std::int64_t total_elements_ = 0;  ///< every layer's inputs and output, as features sum them
};

/// An ONNX model as an architecture (onnx_import.cpp, docs/onnx.md): `bytes` are the file's,
/// `path` names it in errors and gives the architecture its name (the file's stem).
Architecture import_onnx_bytes(std::string_view bytes, const std::string& path);

/// An ONNX file as an architecture (onnx_import.cpp, docs/onnx.md).
Architecture import_onnx(const std::string& path);

}  // namespace carb
