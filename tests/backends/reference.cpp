// Straightforward loops, written for obviousness rather than speed; the networks are tiny. Every
// layer follows PyTorch's definition (and for what PyTorch cannot express, such as asymmetric
// padding, ONNX's).
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

// Grouped and dilated, zero padding before the input (the padding after only sets the output
// size, which `os` gives), plus the bias where the layer has one.
Tensor convolution(const Tensor& in, const Shape& is, const Shape& os, const Layer& layer,
                   const std::vector<double>& weight, const std::vector<float>& bias) {
  Tensor out(static_cast<std::size_t>(os.elements()), 0.0);
  const int k = layer.kernel;
  const int in_per_group = is.c / layer.groups;
  const int out_per_group = os.c / layer.groups;
  const Shape weights{os.c, in_per_group, k, k};  // OIHW, I the input channels of one group
  for (int n = 0; n < os.n; ++n) {
    for (int o = 0; o < os.c; ++o) {
      const int first_input = o / out_per_group * in_per_group;
      for (int y = 0; y < os.h; ++y) {
        for (int x = 0; x < os.w; ++x) {
          double sum = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(o)];
          for (int i = 0; i < in_per_group; ++i) {
            for (int ky = 0; ky < k; ++ky) {
              const int iy = y * layer.stride - layer.padding + ky * layer.dilation;
              if (iy < 0 || iy >= is.h) continue;
              for (int kx = 0; kx < k; ++kx) {
                const int ix = x * layer.stride - layer.padding + kx * layer.dilation;
                if (ix < 0 || ix >= is.w) continue;
                sum += in[at(is, n, first_input + i, iy, ix)] * weight[at(weights, o, i, ky, kx)];
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

double activation(const Layer& layer, double x) {
  switch (layer.kind) {
    case LayerKind::kRelu:
      return std::max(x, 0.0);
    case LayerKind::kClip:
      return std::min(std::max(x, static_cast<double>(layer.lower)),
                      static_cast<double>(layer.upper));
    case LayerKind::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case LayerKind::kHardSigmoid:
      return std::max(0.0, std::min(1.0, layer.alpha * x + layer.beta));
    case LayerKind::kHardSwish:
      return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case LayerKind::kSwish:
      return x / (1 + std::exp(-x));
    default:
      break;
  }
  CARB_CHECK(false, "not an activation");
  return 0;
}

// PyTorch's pooling: window (y, x) starts at (y, x) * stride - padding and is clipped to the
// input. Max: padding never wins (PyTorch pads with -infinity). Average: the divisor is the
// number of the window's values inside the input, or with count_include_pad inside the padded
// input (a ceil-mode window's overhang past the padding never counts).
Tensor pool(const Tensor& in, const Shape& is, const Shape& os, const Layer& layer) {
  Tensor out(static_cast<std::size_t>(os.elements()));
  for (int n = 0; n < os.n; ++n) {
    for (int c = 0; c < os.c; ++c) {
      for (int y = 0; y < os.h; ++y) {
        for (int x = 0; x < os.w; ++x) {
          const int y0 = y * layer.stride - layer.padding;
          const int x0 = x * layer.stride - layer.padding;
          double best = -std::numeric_limits<double>::infinity();
          double sum = 0;
          int count = 0;
          for (int iy = std::max(y0, 0); iy < std::min(y0 + layer.kernel, is.h); ++iy) {
            for (int ix = std::max(x0, 0); ix < std::min(x0 + layer.kernel, is.w); ++ix) {
              best = std::max(best, in[at(is, n, c, iy, ix)]);
              sum += in[at(is, n, c, iy, ix)];
              ++count;
            }
          }
          const int padded_rows = std::min(y0 + layer.kernel, is.h + layer.padding_after) - y0;
          const int padded_columns = std::min(x0 + layer.kernel, is.w + layer.padding_after) - x0;
          const int divisor = layer.count_include_pad ? padded_rows * padded_columns : count;
          out[at(os, n, c, y, x)] = layer.kind == LayerKind::kMaxPool ? best : sum / divisor;
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

// Over each image's C x H x W values in that order (a flatten before it); weights [out][C*H*W].
Tensor fully_connected(const Tensor& in, const Shape& is, const Shape& os, const LayerParameters& p,
                       const std::vector<double>& weight) {
  Tensor out(static_cast<std::size_t>(os.elements()));
  const std::int64_t inputs = is.elements() / is.n;
  for (int n = 0; n < os.n; ++n) {
    for (int o = 0; o < os.c; ++o) {
      double sum = p.bias.empty() ? 0.0 : p.bias[static_cast<std::size_t>(o)];
      for (std::int64_t i = 0; i < inputs; ++i) {
        sum += in[static_cast<std::size_t>(n * inputs + i)] *
               weight[static_cast<std::size_t>(o * inputs + i)];
      }
      out[at(os, n, o, 0, 0)] = sum;
    }
  }
  return out;
}

// a * b, where b has a's shape or is n x c x 1 x 1 (one factor per image and channel).
Tensor multiply(Tensor a, const Shape& as, const Tensor& b, const Shape& bs) {
  const bool broadcast = bs.h == 1 && bs.w == 1;
  for (int n = 0; n < as.n; ++n) {
    for (int c = 0; c < as.c; ++c) {
      for (int y = 0; y < as.h; ++y) {
        for (int x = 0; x < as.w; ++x) {
          a[at(as, n, c, y, x)] *= broadcast ? b[at(bs, n, c, 0, 0)] : b[at(bs, n, c, y, x)];
        }
      }
    }
  }
  return a;
}

// Copies channels [from, from + count) of `in` to channels [to, to + count) of `out`.
void copy_channels(const Tensor& in, const Shape& is, int from, Tensor& out, const Shape& os,
                   int to, int count) {
  for (int n = 0; n < is.n; ++n) {
    for (int c = 0; c < count; ++c) {
      for (int y = 0; y < is.h; ++y) {
        for (int x = 0; x < is.w; ++x) {
          out[at(os, n, to + c, y, x)] = in[at(is, n, from + c, y, x)];
        }
      }
    }
  }
}

Tensor concat(const std::vector<Tensor>& tensors, const Network& network, const Layer& layer,
              const Shape& os) {
  Tensor out(static_cast<std::size_t>(os.elements()));
  int channel = 0;
  for (const int input : layer.inputs) {
    const Shape& shape = network.tensors[static_cast<std::size_t>(input)];
    copy_channels(tensors[static_cast<std::size_t>(input)], shape, 0, out, os, channel, shape.c);
    channel += shape.c;
  }
  return out;
}

// torch's channel_shuffle: x.view(n, groups, c / groups, h, w).transpose(1, 2).reshape(n, c, h,
// w), so output channel i * groups + j is input channel j * (c / groups) + i.
Tensor channel_shuffle(const Tensor& in, const Shape& s, int groups) {
  Tensor out(in.size());
  const int per_group = s.c / groups;
  for (int j = 0; j < groups; ++j) {
    for (int i = 0; i < per_group; ++i) {
      copy_channels(in, s, j * per_group + i, out, s, i * groups + j, 1);
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
        out = convolution(in, is, os, layer, rounded(p.weight), p.bias);
        break;
      case LayerKind::kBatchNorm:
        out = batch_norm(in, os, p);
        break;
      case LayerKind::kAdd: {
        out = in;
        const Tensor& other = tensors[static_cast<std::size_t>(layer.inputs[1])];
        for (std::size_t e = 0; e < out.size(); ++e) out[e] += other[e];
        break;
      }
      case LayerKind::kMul: {
        const auto other = static_cast<std::size_t>(layer.inputs[1]);
        out = multiply(in, is, tensors[other], network.tensors[other]);
        break;
      }
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool:
        out = pool(in, is, os, layer);
        break;
      case LayerKind::kGlobalAvgPool:
        out = global_avg_pool(in, is, os);
        break;
      case LayerKind::kFullyConnected:
        out = fully_connected(in, is, os, p, rounded(p.weight));
        break;
      case LayerKind::kConcat:
        out = concat(tensors, network, layer, os);
        break;
      case LayerKind::kChannelShuffle:
        out = channel_shuffle(in, is, layer.groups);
        break;
      case LayerKind::kSlice:
        out.assign(static_cast<std::size_t>(os.elements()), 0.0);
        copy_channels(in, is, layer.begin, out, os, 0, os.c);
        break;
      default:  // an activation
        out = in;
        for (double& v : out) v = activation(layer, v);
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
