// Straightforward loops, written for obviousness rather than speed; the networks are tiny.
#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "carb/backend.hpp"
#include "carb/error.hpp"

namespace carb::testing {

namespace {

using Tensor = std::vector<double>;

// Index of element (a, b, c, d) of a row-major 4-D array of shape `s` (NCHW, or OIHW weights).
std::size_t at(const Shape& s, int a, int b, int c, int d) {
  const auto index = ((static_cast<std::int64_t>(a) * s.c + b) * s.h + c) * s.w + d;
  return static_cast<std::size_t>(index);
}

Tensor convolution(const Tensor& in, const Shape& is, const Shape& os, const Layer& layer,
                   const std::vector<double>& weight) {
  Tensor out(static_cast<std::size_t>(os.elements()), 0.0);
  const int k = layer.kernel;
  const Shape weights{os.c, is.c, k, k};  // OIHW
  for (int n = 0; n < os.n; ++n) {
    for (int o = 0; o < os.c; ++o) {
      for (int y = 0; y < os.h; ++y) {
        for (int x = 0; x < os.w; ++x) {
          double sum = 0;
          for (int i = 0; i < is.c; ++i) {
            for (int ky = 0; ky < k; ++ky) {
              const int iy = y * layer.stride - layer.padding + ky;
              if (iy < 0 || iy >= is.h) continue;
              for (int kx = 0; kx < k; ++kx) {
                const int ix = x * layer.stride - layer.padding + kx;
                if (ix < 0 || ix >= is.w) continue;
                sum += in[at(is, n, i, iy, ix)] * weight[at(weights, o, i, ky, kx)];
              }
            }
          }
          out[at(os, n, o, y, x)] = sum;
        }
      }
    }
  }
  return out;
}

Tensor batch_norm(Tensor x, const Shape& s, const LayerParameters& p) {
  for (int n = 0; n < s.n; ++n) {
    for (int c = 0; c < s.c; ++c) {
      const auto ch = static_cast<std::size_t>(c);
      const double scale =
          p.weight[ch] / std::sqrt(static_cast<double>(p.running_var[ch]) + kBatchNormEpsilon);
      for (int y = 0; y < s.h; ++y) {
        for (int xx = 0; xx < s.w; ++xx) {
          double& v = x[at(s, n, c, y, xx)];
          v = (v - p.running_mean[ch]) * scale + p.bias[ch];
        }
      }
    }
  }
  return x;
}

// Padding never wins the max (PyTorch pads max pooling with -infinity).
Tensor max_pool(const Tensor& in, const Shape& is, const Shape& os, const Layer& layer) {
  Tensor out(static_cast<std::size_t>(os.elements()));
  for (int n = 0; n < os.n; ++n) {
    for (int c = 0; c < os.c; ++c) {
      for (int y = 0; y < os.h; ++y) {
        for (int x = 0; x < os.w; ++x) {
          double best = -std::numeric_limits<double>::infinity();
          for (int ky = 0; ky < layer.kernel; ++ky) {
            for (int kx = 0; kx < layer.kernel; ++kx) {
              const int iy = y * layer.stride - layer.padding + ky;
              const int ix = x * layer.stride - layer.padding + kx;
              if (iy >= 0 && iy < is.h && ix >= 0 && ix < is.w) {
                best = std::max(best, in[at(is, n, c, iy, ix)]);
              }
            }
          }
          out[at(os, n, c, y, x)] = best;
        }
      }
    }
  }
  return out;
}

Tensor global_avg_pool(const Tensor& in, const Shape& is, const Shape& os) {
  Tensor out(static_cast<std::size_t>(os.elements()));
  for (int n = 0; n < is.n; ++n) {
    for (int c = 0; c < is.c; ++c) {
      double sum = 0;
      for (int y = 0; y < is.h; ++y) {
        for (int x = 0; x < is.w; ++x) sum += in[at(is, n, c, y, x)];
      }
      out[at(os, n, c, 0, 0)] = sum / (is.h * is.w);
    }
  }
  return out;
}

Tensor fully_connected(const Tensor& in, const Shape& is, const Shape& os, const LayerParameters& p,
                       const std::vector<double>& weight) {
  Tensor out(static_cast<std::size_t>(os.elements()));
  const Shape weights{os.c, is.c, 1, 1};  // [out][in]
  for (int n = 0; n < os.n; ++n) {
    for (int o = 0; o < os.c; ++o) {
      double sum = p.bias[static_cast<std::size_t>(o)];
      for (int i = 0; i < is.c; ++i) {
        sum += in[at(is, n, i, 0, 0)] * weight[at(weights, o, i, 0, 0)];
      }
      out[at(os, n, o, 0, 0)] = sum;
    }
  }
  return out;
}

}  // namespace

std::vector<double> reference_forward(const Network& network, std::uint64_t seed,
                                      std::span<const float> input) {
  return reference_forward(network, seed, input, [](double value) { return value; });
}

std::vector<double> reference_forward(const Network& network, std::uint64_t seed,
                                      std::span<const float> input,
                                      const std::function<double(double)>& round) {
  const auto rounded = [&round](auto values) {
    Tensor out(values.begin(), values.end());
    for (double& v : out) v = round(v);
    return out;
  };
  std::vector<Tensor> tensors(network.tensors.size());
  tensors[static_cast<std::size_t>(network.input)] = rounded(input);
  for (std::size_t i = 0; i < network.layers.size(); ++i) {
    const Layer& layer = network.layers[i];
    const Shape& is = network.tensors[static_cast<std::size_t>(layer.inputs[0])];
    const Shape& os = network.tensors[static_cast<std::size_t>(layer.output)];
    const Tensor& in = tensors[static_cast<std::size_t>(layer.inputs[0])];
    const LayerParameters p = generate_layer_parameters(network, static_cast<int>(i), seed);
    Tensor out;
    switch (layer.kind) {
      case LayerKind::kConv:
        out = convolution(in, is, os, layer, rounded(p.weight));
        break;
      case LayerKind::kBatchNorm:
        out = batch_norm(in, os, p);
        break;
      case LayerKind::kRelu:
        out = in;
        for (double& v : out) v = std::max(v, 0.0);
        break;
      case LayerKind::kAdd: {
        out = in;
        const Tensor& identity = tensors[static_cast<std::size_t>(layer.inputs[1])];
        for (std::size_t e = 0; e < out.size(); ++e) out[e] += identity[e];
        break;
      }
      case LayerKind::kMaxPool:
        out = max_pool(in, is, os, layer);
        break;
      case LayerKind::kGlobalAvgPool:
        out = global_avg_pool(in, is, os);
        break;
      case LayerKind::kFullyConnected:
        out = fully_connected(in, is, os, p, rounded(p.weight));
        break;
    }
    for (double& v : out) v = round(v);
    tensors[static_cast<std::size_t>(layer.output)] = std::move(out);
  }
  return tensors[static_cast<std::size_t>(network.output)];
}

double relative_error(std::span<const float> actual, std::span<const double> expected) {
  CARB_CHECK(actual.size() == expected.size(), "outputs of different sizes");
  double largest = 0;
  double worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    largest = std::max(largest, std::abs(expected[i]));
    const double difference = std::abs(static_cast<double>(actual[i]) - expected[i]);
    // std::max would drop a NaN; a NaN output must fail the comparison.
    if (std::isnan(difference)) return difference;
    worst = std::max(worst, difference);
  }
  return worst / largest;
}

}  // namespace carb::testing
