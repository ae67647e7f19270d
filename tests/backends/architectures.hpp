// Small imported-style architectures built by hand (no model file), one per CNN family the
// engines must run: the shapes the conformance suite, the planner's and the CPU device's tests
// share.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "carb/graph.hpp"

namespace carb::testing {

/// Builds an Architecture layer by layer; each call appends one layer and returns the tensor it
/// writes (layer i writes tensor i + 1; tensor 0 is the input). Layers are named after their
/// kind and output tensor ("conv1", "batch_norm2"), so a kernel's name says which it computes.
class ArchitectureBuilder {
 public:
  explicit ArchitectureBuilder(std::string name, int input_channels = 3);

  struct ConvOptions {
    int groups = 1;
    int dilation = 1;
    int padding_after = -1;  ///< -1: the same as before
    bool bias = false;
  };
  int conv(int input, int channels, int kernel, int stride, int padding, ConvOptions options);
  int conv(int input, int channels, int kernel, int stride, int padding) {
    return conv(input, channels, kernel, stride, padding, ConvOptions{});
  }
  int batch_norm(int input);
  int relu(int input);
  int clip(int input, float lower, float upper);
  int relu6(int input) { return clip(input, 0, 6); }
  int sigmoid(int input);
  int hard_sigmoid(int input, float alpha, float beta);
  int hard_swish(int input);
  int swish(int input);
  int add(int a, int b);
  int mul(int a, int b);
  int max_pool(int input, int kernel, int stride, int padding, bool ceil_mode);
  int avg_pool(int input, int kernel, int stride, int padding, bool ceil_mode,
               bool count_include_pad);
  int global_avg_pool(int input);
  int fc(int input, int outputs, bool bias = true);
  int concat(const std::vector<int>& inputs);
  int channel_shuffle(int input, int groups);
  int slice(int input, int begin, int channels);

  /// The architecture, its output the last layer's tensor unless `output` says otherwise.
  Architecture finish(int output = -1) const;

 private:
  // Appends a layer of `kind` reading `inputs`, its other fields from `set`; returns its output.
  int append(LayerKind kind, std::vector<int> inputs,
             const std::function<void(Layer&)>& set = nullptr);
  static void set_window(Layer& layer, int kernel, int stride, int padding);
  Architecture architecture_;
};

/// A hand-built architecture for tests.
struct TestArchitecture {
  std::string name;  ///< e.g. "mobilenet_v2_block"
  Architecture architecture;
};

/// Every hand-built architecture, registered (register_architecture) on the first call:
/// a MobileNetV2 inverted-residual pair (1x1 expand, depthwise 3x3 stride 2, ReLU6, linear 1x1,
/// residual add, 24 channels), a MobileNetV3 squeeze-excite block (hard swish, hard sigmoid, an
/// fc + hard swish head) and its EfficientNet twin (swish, sigmoid), a ShuffleNetV2 downsample
/// and basic unit with 58-channel halves (slice, concat, shuffle; off the channel blocks) and
/// with 32-channel halves (on them), a DenseNet pair of dense layers and transition (standalone
/// batch norms, multi-reader concats, average pool), a SqueezeNet fire module (ceil-mode max
/// pools, a concat of 1x1 and 3x3 expands, the output a global average pool), a ResNeXt block
/// (a 4-channels-per-group conv), dilated and asymmetrically padded convs (one grouped in
/// whole blocks), a chain of pools and standalone activations (average pools with and without
/// count_include_pad and ceil mode, a ceil-mode max pool, a hard sigmoid, an fc over 24 x 3 x 3
/// values), a batch-norm-folded residual network (convs with biases, a conv with a bias and a
/// batch norm), and crossing residuals (a sum the planner must run as a conv and an add).
const std::vector<TestArchitecture>& test_architectures();

/// The registered architecture called `name`; aborts the test program when there is none.
const Architecture& test_architecture(std::string_view name);

/// The configuration of test architecture `name` at a resolution, batch and precision.
Config test_config(std::string_view name, int resolution, int batch, Precision precision);

}  // namespace carb::testing
