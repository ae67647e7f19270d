// ONNX model files as carb architectures (docs/onnx.md). The file is parsed by Debian's ONNX
// protobuf library; each node becomes an IR layer, after the import resolves what a CNN export
// computes statically: shape arithmetic (Shape, Gather, Add, Div, Slice, Transpose,
// ConstantOfShape, ...) to constants, Identity, Dropout and Flatten to the tensor they pass on, a
// Pad into the window that reads it, and the patterns PyTorch splits one module into back into
// that module: x * sigmoid(x) (SiLU), x * hardsigmoid(x) (hard swish), reshape-transpose-reshape
// (channel shuffle), MatMul + Add (a linear layer with its bias).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/onnx_pb.h>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "network_internal.hpp"

namespace carb {

namespace {

// A file mapped read-only, for the protobuf parser to read in place.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw Error(ErrorCategory::kInput, path + ": cannot open: " + std::strerror(errno));
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      throw Error(ErrorCategory::kInput, path + ": not a regular file");
    }
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    ::close(fd);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      throw Error(ErrorCategory::kInput, path + ": cannot map: " + std::strerror(errno));
    }
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const void* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// What carb reads of an ONNX model: the opsets and the graph's nodes, inputs and outputs whole,
// and of each initializer (a weight) its name, type and dimensions. Its values, nearly all of
// the file, are skipped unread (they are never paged in): protobuf's own decoder
// (CodedInputStream) walks the model and the graph field by field and parses every message
// carb keeps with the generated classes; only an initializer of more than kWholeTensorBytes is
// read for its dims, type and name alone.
struct ParsedModel {
  std::vector<onnx::OperatorSetIdProto> opsets;
  bool has_graph = false;
  std::vector<onnx::NodeProto> nodes;
  std::vector<onnx::TensorProto> initializers;
  std::vector<onnx::ValueInfoProto> inputs;
  std::vector<onnx::ValueInfoProto> outputs;
};

constexpr int kWholeTensorBytes = 4096;

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

class ModelReader {
 public:
  ModelReader(const std::string& path, std::string_view bytes) : path_(path), file_(bytes) {}

  ParsedModel read() {
    ParsedModel model;
    CodedInputStream in(reinterpret_cast<const std::uint8_t*>(file_.data()),
                        static_cast<int>(file_.size()));
    in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    while (const std::uint32_t tag = in.ReadTag()) {
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      if (field == 8 && delimited(tag)) {
        model.opsets.push_back(message<onnx::OperatorSetIdProto>(in));
      } else if (field == 7 && delimited(tag)) {
        std::string_view graph = slice(in);
        read_graph(graph, model);
        model.has_graph = true;
      } else if (!WireFormatLite::SkipField(&in, tag)) {
        malformed();
      }
    }
    if (!in.ConsumedEntireMessage() || in.CurrentPosition() != static_cast<int>(file_.size()))
      malformed();
    return model;
  }

 private:
  [[noreturn]] void malformed() const {
    throw Error(ErrorCategory::kInput,
                path_ +
                    ": not an ONNX model (the protobuf decoder rejects it: truncated or "
                    "another format)");
  }

  static bool delimited(std::uint32_t tag) {
    return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
  }

  // The bytes of a length-delimited field, which the stream then skips.
  std::string_view slice(CodedInputStream& in) const {
    std::uint32_t length = 0;
    if (!in.ReadVarint32(&length)) malformed();
    const int position = in.CurrentPosition();
    if (static_cast<std::size_t>(position) + length > file_.size()) malformed();
    if (!in.Skip(static_cast<int>(length))) malformed();
    return file_.substr(static_cast<std::size_t>(position), length);
  }

  template <typename Message>
  Message message(CodedInputStream& in) const {
    const std::string_view bytes = slice(in);
    Message parsed;
    if (!parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) malformed();
    return parsed;
  }

  void read_graph(std::string_view bytes, ParsedModel& model) const {
    CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                        static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    while (const std::uint32_t tag = in.ReadTag()) {
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      const bool kept = delimited(tag) && (field == 1 || field == 5 || field == 11 || field == 12);
      if (!kept) {
        if (!WireFormatLite::SkipField(&in, tag)) malformed();
        continue;
      }
      std::uint32_t length = 0;
      if (!in.ReadVarint32(&length)) malformed();
      const auto position = static_cast<std::size_t>(in.CurrentPosition());
      if (position + length > bytes.size()) malformed();
      const char* data = bytes.data() + position;
      if (!in.Skip(static_cast<int>(length))) malformed();
      const auto parse = [&](auto& parsed) {
        if (!parsed.ParseFromArray(data, static_cast<int>(length))) malformed();
      };
      if (field == 1) {
        parse(model.nodes.emplace_back());
      } else if (field == 11) {
        parse(model.inputs.emplace_back());
      } else if (field == 12) {
        parse(model.outputs.emplace_back());
      } else if (length <= static_cast<std::uint32_t>(kWholeTensorBytes)) {
        parse(model.initializers.emplace_back());
      } else {
        model.initializers.push_back(tensor_header({data, length}));
      }
    }
    if (!in.ConsumedEntireMessage()) malformed();
  }

  // An initializer's name, type and dimensions, its values skipped.
  onnx::TensorProto tensor_header(std::string_view bytes) const {
    onnx::TensorProto tensor;
    CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                        static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    while (const std::uint32_t tag = in.ReadTag()) {
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      const auto type = WireFormatLite::GetTagWireType(tag);
      if (field == 1 && type == WireFormatLite::WIRETYPE_VARINT) {
        std::uint64_t dim = 0;
        if (!in.ReadVarint64(&dim)) malformed();
        tensor.add_dims(static_cast<std::int64_t>(dim));
      } else if (field == 1 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        std::uint32_t length = 0;
        if (!in.ReadVarint32(&length) ||
            static_cast<std::size_t>(in.CurrentPosition()) + length > bytes.size()) {
          malformed();
        }
        const int limit = in.PushLimit(static_cast<int>(length));
        while (in.BytesUntilLimit() > 0) {
          std::uint64_t dim = 0;
          if (!in.ReadVarint64(&dim)) malformed();
          tensor.add_dims(static_cast<std::int64_t>(dim));
        }
        in.PopLimit(limit);
      } else if (field == 2 && type == WireFormatLite::WIRETYPE_VARINT) {
        std::uint32_t data_type = 0;
        if (!in.ReadVarint32(&data_type)) malformed();
        tensor.set_data_type(static_cast<std::int32_t>(data_type));
      } else if (field == 8 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        std::string name;
        std::uint32_t length = 0;
        if (!in.ReadVarint32(&length) || !in.ReadString(&name, static_cast<int>(length))) {
          malformed();
        }
        tensor.set_name(std::move(name));
      } else if (!WireFormatLite::SkipField(&in, tag)) {
        malformed();
      }
    }
    if (!in.ConsumedEntireMessage()) malformed();
    return tensor;
  }

  const std::string& path_;
  std::string_view file_;
};

// Values of shape arithmetic that carb evaluates at import are small (shapes, pads, axes): a
// constant of more values is refused, so that no input can make the import allocate much.
constexpr std::int64_t kMaxConstantValues = 4096;
// Initializers of up to this many values are read as constants (the rest are weights).
constexpr std::int64_t kConstantInitializerValues = 64;
constexpr int kMaxLayers = 100000;
constexpr int kMaxPadding = 4096;
constexpr std::size_t kMaxNameBytes = 200;

// A statically known value: a tensor of integers or reals, row-major, with its dimensions.
struct Constant {
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  bool integer = true;
};

// Elements of a tensor of these dimensions, or nullopt when one is negative or the product is
// past `limit`.
std::optional<std::int64_t> element_count(const std::vector<std::int64_t>& dims,
                                          std::int64_t limit) {
  std::int64_t elements = 1;
  for (const std::int64_t dim : dims) {
    if (dim < 0 || __builtin_mul_overflow(elements, dim, &elements) || elements > limit) {
      return std::nullopt;
    }
  }
  return elements;
}

// A name from the file as error messages and layer names show it: printable ASCII (others
// escaped, so a message stays one line and JSON text stays valid), at most kMaxNameBytes.
std::string printable(std::string_view name) {
  std::string out;
  for (const char c : name.substr(0, kMaxNameBytes)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += c;
    } else {
      std::array<char, 8> escaped{};
      std::snprintf(escaped.data(), escaped.size(), "\\x%02x", static_cast<unsigned char>(c));
      out += escaped.data();
    }
  }
  if (name.size() > kMaxNameBytes) out += "...";
  return out;
}

// A weight: an initializer (or a Constant node's tensor) whose values carb does not need, only
// its dimensions.
struct Weight {
  std::vector<std::int64_t> dims;
};

// What an ONNX value name stands for while importing.
struct Value {
  enum class Kind { kTensor, kConstant, kWeight, kGroupedView, kShuffledView } kind = Kind::kTensor;
  int tensor = -1;                    ///< kTensor (and the views): the IR tensor
  bool flattened = false;             ///< kTensor: seen as N x (C H W) (Flatten, Reshape)
  int pad_before = 0, pad_after = 0;  ///< kTensor: spatial zero padding a Pad added
  int groups = 0;                     ///< the views: channel groups
  Constant constant;
  Weight weight;
};

const std::set<std::string, std::less<>>& supported_operators() {
  static const std::set<std::string, std::less<>> names = {"Add",
                                                           "AveragePool",
                                                           "BatchNormalization",
                                                           "Cast",
                                                           "Clip",
                                                           "Concat",
                                                           "Constant",
                                                           "ConstantOfShape",
                                                           "Conv",
                                                           "Div",
                                                           "Dropout",
                                                           "Flatten",
                                                           "Gather",
                                                           "Gemm",
                                                           "GlobalAveragePool",
                                                           "HardSigmoid",
                                                           "HardSwish",
                                                           "Identity",
                                                           "MatMul",
                                                           "MaxPool",
                                                           "Mul",
                                                           "Pad",
                                                           "ReduceMean",
                                                           "Relu",
                                                           "Reshape",
                                                           "Shape",
                                                           "Sigmoid",
                                                           "Slice",
                                                           "Squeeze",
                                                           "Sub",
                                                           "Transpose",
                                                           "Unsqueeze"};
  return names;
}

class Importer {
 public:
  Importer(const std::string& path, const ParsedModel& model) : path_(path), model_(model) {}

  Architecture run() {
    check_opset();
    for (const onnx::TensorProto& initializer : model_.initializers) {
      Value value;
      value.kind = Value::Kind::kWeight;
      value.weight.dims.assign(initializer.dims().begin(), initializer.dims().end());
      if (auto constant = small_constant(initializer)) {
        value.kind = Value::Kind::kConstant;
        value.constant = std::move(*constant);
      }
      values_[initializer.name()] = std::move(value);
    }
    read_input();
    count_readers();
    for (std::size_t i = 0; i < model_.nodes.size(); ++i) {
      node_index_ = static_cast<int>(i);
      import_node(model_.nodes[i]);
    }
    if (model_.outputs.size() != 1) {
      fail_file("has " + std::to_string(model_.outputs.size()) + " outputs; carb takes one");
    }
    const std::string& output_name = model_.outputs[0].name();
    const auto out = values_.find(output_name);
    if (out == values_.end()) {
      fail_file("its output '" + printable(output_name) + "' is not computed by any node");
    }
    if (out->second.kind != Value::Kind::kTensor || padded(out->second) ||
        out->second.tensor == 0) {
      fail_file("its output '" + printable(output_name) + "' is not a computed tensor");
    }
    architecture_.output = out->second.tensor;
    architecture_.name = std::filesystem::path(path_).stem().string();
    architecture_.source = path_;
    architecture_.hash = architecture_hash(architecture_);
    return std::move(architecture_);
  }

 private:
  [[noreturn]] void fail_file(const std::string& message) const {
    throw Error(ErrorCategory::kInput, path_ + ": " + message);
  }

  [[noreturn]] void fail(const onnx::NodeProto& node, const std::string& message) const {
    throw Error(ErrorCategory::kInput, path_ + ": node '" + node_name(node) + "' (" +
                                           printable(node.op_type()) + "): " + message);
  }

  std::string node_name(const onnx::NodeProto& node) const {
    return node.name().empty() ? "#" + std::to_string(node_index_) : printable(node.name());
  }

  void check_opset() const {
    for (const onnx::OperatorSetIdProto& opset : model_.opsets) {
      if (!opset.domain().empty() && opset.domain() != "ai.onnx") continue;
      if (opset.version() < 9 || opset.version() > 18) {
        fail_file("opset " + std::to_string(opset.version()) +
                  "; carb reads opsets 9 to 18 (PyTorch exports 13 to 17)");
      }
    }
  }

  // The values of a small initializer or Constant tensor (shapes, pads, clip bounds), or
  // nullopt for a larger one or a type carb does not read (then only its dimensions count).
  static std::optional<Constant> small_constant(const onnx::TensorProto& tensor) {
    Constant constant;
    constant.dims.assign(tensor.dims().begin(), tensor.dims().end());
    const std::optional<std::int64_t> elements =
        element_count(constant.dims, kConstantInitializerValues);
    if (!elements) return std::nullopt;
    const std::string& raw = tensor.raw_data();
    const auto from_raw = [&]<typename T>(T) {
      if (raw.size() != static_cast<std::size_t>(*elements) * sizeof(T)) return false;
      for (std::int64_t i = 0; i < *elements; ++i) {
        T item;
        std::memcpy(&item, raw.data() + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
        constant.values.push_back(static_cast<double>(item));
      }
      return true;
    };
    const auto read = [&]<typename T>(T, const auto& typed) {
      if (!raw.empty()) return from_raw(T{});
      for (const auto v : typed) constant.values.push_back(static_cast<double>(v));
      return true;
    };
    bool read_values = false;
    switch (tensor.data_type()) {
      case onnx::TensorProto::INT64:
        read_values = read(std::int64_t{}, tensor.int64_data());
        break;
      case onnx::TensorProto::INT32:
        read_values = read(std::int32_t{}, tensor.int32_data());
        break;
      case onnx::TensorProto::FLOAT:
        constant.integer = false;
        read_values = read(float{}, tensor.float_data());
        break;
      case onnx::TensorProto::DOUBLE:
        constant.integer = false;
        read_values = read(double{}, tensor.double_data());
        break;
      default:
        return std::nullopt;
    }
    if (!read_values || static_cast<std::int64_t>(constant.values.size()) != *elements) {
      return std::nullopt;
    }
    return constant;
  }

  void read_input() {
    std::vector<const onnx::ValueInfoProto*> inputs;
    for (const onnx::ValueInfoProto& input : model_.inputs) {
      if (!values_.contains(input.name())) inputs.push_back(&input);
    }
    if (inputs.size() != 1) {
      fail_file("has " + std::to_string(inputs.size()) +
                " inputs that are not weights; carb takes one image input");
    }
    const onnx::ValueInfoProto& input = *inputs.front();
    const std::string name = printable(input.name());
    const onnx::TensorShapeProto& shape = input.type().tensor_type().shape();
    const auto dim = [&](int i) -> std::int64_t {
      return shape.dim(i).has_dim_value() ? shape.dim(i).dim_value() : -1;
    };
    if (shape.dim_size() != 4 || dim(1) < 1 || dim(2) < 1 || dim(3) < 1) {
      fail_file("its input '" + name + "' is not N x C x H x W with C, H and W fixed");
    }
    if (dim(2) != dim(3)) {
      fail_file("its input '" + name + "' is " + std::to_string(dim(2)) + "x" +
                std::to_string(dim(3)) + "; carb takes square inputs (a resolution)");
    }
    if (dim(1) > (1 << 16) || dim(2) > 8192) {
      fail_file("its input '" + name + "' is implausibly large (" + std::to_string(dim(1)) +
                " channels of " + std::to_string(dim(2)) + " px; at most 65536 of 8192)");
    }
    architecture_.input_channels = static_cast<int>(dim(1));
    architecture_.native_resolution = static_cast<int>(dim(2));
    // Shapes at the file's own size, inferred as layers are added; its batch is the file's
    // (which only a Shape node can see), 1 where the file leaves it open.
    Config native;
    native.resolution = architecture_.native_resolution;
    native.batch = dim(0) > 0 ? static_cast<int>(std::min<std::int64_t>(dim(0), 4096)) : 1;
    native_.emplace("", native, architecture_.input_channels, false);
    Value value;
    value.tensor = 0;
    values_[input.name()] = value;
  }

  void count_readers() {
    for (const onnx::NodeProto& node : model_.nodes) {
      for (const std::string& input : node.input()) ++readers_[input];
    }
    for (const onnx::ValueInfoProto& output : model_.outputs) ++readers_[output.name()];
  }

  int readers(const std::string& name) const {
    const auto found = readers_.find(name);
    return found == readers_.end() ? 0 : found->second;
  }

  static bool padded(const Value& v) { return v.pad_before + v.pad_after > 0; }

  const Value& input(const onnx::NodeProto& node, int k) const {
    if (!has_input(node, k)) fail(node, "lacks input " + std::to_string(k + 1));
    const auto found = values_.find(node.input(k));
    if (found == values_.end()) {
      fail(node, "reads '" + printable(node.input(k)) + "', which no node before it defines");
    }
    return found->second;
  }

  static bool has_input(const onnx::NodeProto& node, int k) {
    return k < node.input_size() && !node.input(k).empty();
  }

  // A computed tensor input, neither flattened nor padded unless allowed.
  int tensor_input(const onnx::NodeProto& node, int k, bool flattened_ok = false) const {
    const Value& v = input(node, k);
    if (v.kind != Value::Kind::kTensor) {
      fail(node, "input " + std::to_string(k + 1) + " is not a computed tensor");
    }
    if (v.flattened && !flattened_ok) fail(node, "reads a flattened tensor as an image");
    if (padded(v)) {
      fail(node,
           "reads a padded tensor; carb folds a Pad only into the Conv or AveragePool after it");
    }
    return v.tensor;
  }

  const Constant& constant_input(const onnx::NodeProto& node, int k) const {
    const Value& v = input(node, k);
    if (v.kind != Value::Kind::kConstant) {
      fail(node, "input " + std::to_string(k + 1) + " is not a constant known at import");
    }
    return v.constant;
  }

  // A constant's values as integers (shapes, axes, indices): saturated to 64 bits, as ONNX
  // spells "to the end" INT64_MAX; a value that is not a number is refused.
  std::vector<std::int64_t> integers(const onnx::NodeProto& node, const Constant& constant) const {
    constexpr double kTwoTo63 = 9223372036854775808.0;
    std::vector<std::int64_t> out;
    out.reserve(constant.values.size());
    for (const double v : constant.values) {
      if (std::isnan(v)) fail(node, "an integer it reads is not a number");
      out.push_back(v >= kTwoTo63    ? std::numeric_limits<std::int64_t>::max()
                    : v <= -kTwoTo63 ? std::numeric_limits<std::int64_t>::min()
                                     : static_cast<std::int64_t>(v));
    }
    return out;
  }

  std::vector<std::int64_t> integer_input(const onnx::NodeProto& node, int k) const {
    return integers(node, constant_input(node, k));
  }

  const std::vector<std::int64_t>& weight_dims(const onnx::NodeProto& node, int k) const {
    const Value& v = input(node, k);
    if (v.kind == Value::Kind::kWeight) return v.weight.dims;
    if (v.kind == Value::Kind::kConstant) return v.constant.dims;
    fail(node, "input " + std::to_string(k + 1) + " is not a weight (an initializer)");
  }

  // Elements of a weight input that must be a vector of `count` values (a bias, a batch norm's).
  void expect_vector(const onnx::NodeProto& node, int k, std::int64_t count,
                     const std::string& what) const {
    const std::optional<std::int64_t> elements =
        element_count(weight_dims(node, k), std::numeric_limits<std::int64_t>::max());
    if (!elements || *elements != count) {
      fail(node, what + " is not " + std::to_string(count) + " values");
    }
  }

  // Defines the node's (first) output as `value`.
  void define(const onnx::NodeProto& node, const Value& value) {
    if (node.output_size() == 0 || node.output(0).empty()) return;
    if (!values_.try_emplace(node.output(0), value).second) {
      fail(node,
           "defines '" + printable(node.output(0)) + "' again (a graph defines each value once)");
    }
  }

  void define_constant(const onnx::NodeProto& node, Constant constant) {
    if (static_cast<std::int64_t>(constant.values.size()) > kMaxConstantValues) {
      fail(node, "computes a constant of more than " + std::to_string(kMaxConstantValues) +
                     " values at import");
    }
    Value value;
    value.kind = Value::Kind::kConstant;
    value.constant = std::move(constant);
    define(node, value);
  }

  // Appends a layer reading `inputs`; its output becomes the node's first output. A layer that
  // does not fit its inputs at the file's own size is the node's error.
  Layer& emit(const onnx::NodeProto& node, Layer layer, std::vector<int> inputs) {
    if (architecture_.layers.size() >= static_cast<std::size_t>(kMaxLayers)) {
      fail(node, "the network has more than " + std::to_string(kMaxLayers) + " layers");
    }
    layer.name = node_name(node);
    layer.inputs = std::move(inputs);
    layer.output = static_cast<int>(architecture_.layers.size()) + 1;
    try {
      native_->append(layer);
    } catch (const Error& error) {
      fail(node, error.what());
    }
    architecture_.layers.push_back(std::move(layer));
    Value value;
    value.tensor = architecture_.layers.back().output;
    define(node, value);
    if (node.output_size() > 0 && !node.output(0).empty()) {
      layer_of_output_[node.output(0)] = static_cast<int>(architecture_.layers.size()) - 1;
    }
    return architecture_.layers.back();
  }

  // The shape of a tensor at the file's own input size.
  const Shape& native_shape(int tensor) const { return native_->shape(tensor); }

  static const onnx::AttributeProto* attribute(const onnx::NodeProto& node, std::string_view name) {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  static std::int64_t attribute_int(const onnx::NodeProto& node, std::string_view name,
                                    std::int64_t fallback) {
    const onnx::AttributeProto* a = attribute(node, name);
    return a != nullptr ? a->i() : fallback;
  }
  static float attribute_float(const onnx::NodeProto& node, std::string_view name, float fallback) {
    const onnx::AttributeProto* a = attribute(node, name);
    return a != nullptr ? a->f() : fallback;
  }
  static std::optional<std::vector<std::int64_t>> attribute_ints(const onnx::NodeProto& node,
                                                                 std::string_view name) {
    const onnx::AttributeProto* a = attribute(node, name);
    if (a == nullptr) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  }
  static std::string attribute_string(const onnx::NodeProto& node, std::string_view name) {
    const onnx::AttributeProto* a = attribute(node, name);
    return a != nullptr ? a->s() : std::string();
  }

  // Kernel, stride, dilation and padding of a 2-D window: square, equal before and after in H
  // and W separately.
  void window_attributes(const onnx::NodeProto& node, Layer& layer,
                         const std::vector<std::int64_t>& kernel_dims) const {
    const auto pair = [&](const char* name, std::int64_t fallback) -> std::int64_t {
      const auto values = attribute_ints(node, name);
      if (!values || values->empty()) return fallback;
      if (values->size() != 2 || (*values)[0] != (*values)[1]) {
        fail(node, std::string(name) + " must be two equal values (square windows only)");
      }
      return (*values)[0];
    };
    if (kernel_dims.size() != 2 || kernel_dims[0] != kernel_dims[1] || kernel_dims[0] < 1 ||
        kernel_dims[0] > 1024) {
      fail(node, "kernel must be square (k x k, k from 1 to 1024)");
    }
    const std::string auto_pad = attribute_string(node, "auto_pad");
    if (!auto_pad.empty() && auto_pad != "NOTSET") {
      fail(node,
           "auto_pad " + printable(auto_pad) + " is not supported; export with explicit pads");
    }
    layer.kernel = static_cast<int>(kernel_dims[0]);
    const std::int64_t stride = pair("strides", 1);
    const std::int64_t dilation = pair("dilations", 1);
    if (stride < 1 || stride > 1024 || dilation < 1 || dilation > 1024) {
      fail(node, "stride and dilation must be 1 to 1024");
    }
    layer.stride = static_cast<int>(stride);
    layer.dilation = static_cast<int>(dilation);
    const auto pads = attribute_ints(node, "pads");
    if (pads && !pads->empty()) {
      // [top, left, bottom, right]
      if (pads->size() != 4 || (*pads)[0] != (*pads)[1] || (*pads)[2] != (*pads)[3] ||
          (*pads)[0] < 0 || (*pads)[2] < 0 || (*pads)[0] > kMaxPadding ||
          (*pads)[2] > kMaxPadding) {
        fail(node,
             "pads must be [t, l, b, r] with t = l and b = r, 0 to " + std::to_string(kMaxPadding));
      }
      layer.padding = static_cast<int>((*pads)[0]);
      layer.padding_after = static_cast<int>((*pads)[2]);
    }
  }

  // The window layer's input, with a preceding Pad's padding folded into the layer.
  int padded_input(const onnx::NodeProto& node, Layer& layer) const {
    const Value& v = input(node, 0);
    if (v.kind != Value::Kind::kTensor || v.flattened) {
      fail(node, "input 1 is not a computed image tensor");
    }
    layer.padding += v.pad_before;
    layer.padding_after += v.pad_after;
    if (padded(v)) layer.count_include_pad = true;
    return v.tensor;
  }

  void import_node(const onnx::NodeProto& node) {
    const std::string& op = node.op_type();
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      fail(node, "operator of domain '" + printable(node.domain()) + "' is not supported");
    }
    if (!supported_operators().contains(op)) {
      fail(node,
           "operator " + printable(op) + " is not supported (docs/onnx.md lists those that are)");
    }
    if (op == "Identity" || op == "Dropout") {
      define(node, input(node, 0));
    } else if (op == "Constant") {
      import_constant(node);
    } else if (op == "ConstantOfShape") {
      import_constant_of_shape(node);
    } else if (op == "Shape") {
      import_shape(node);
    } else if (op == "Gather") {
      import_gather(node);
    } else if (op == "Cast" || op == "Squeeze" || op == "Unsqueeze") {
      import_reshaped_constant(node);
    } else if (op == "Conv") {
      import_conv(node);
    } else if (op == "BatchNormalization") {
      import_batch_norm(node);
    } else if (op == "Relu" || op == "Sigmoid" || op == "HardSwish") {
      Layer layer;
      layer.kind = op == "Relu"      ? LayerKind::kRelu
                   : op == "Sigmoid" ? LayerKind::kSigmoid
                                     : LayerKind::kHardSwish;
      emit(node, layer, {tensor_input(node, 0)});
    } else if (op == "HardSigmoid") {
      Layer layer;
      layer.kind = LayerKind::kHardSigmoid;
      layer.alpha = attribute_float(node, "alpha", 0.2f);
      layer.beta = attribute_float(node, "beta", 0.5f);
      if (!std::isfinite(layer.alpha) || !std::isfinite(layer.beta)) {
        fail(node, "alpha and beta must be finite");
      }
      emit(node, layer, {tensor_input(node, 0)});
    } else if (op == "Clip") {
      import_clip(node);
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      import_arithmetic(node);
    } else if (op == "MaxPool" || op == "AveragePool") {
      import_pool(node);
    } else if (op == "GlobalAveragePool" || op == "ReduceMean") {
      import_global_pool(node);
    } else if (op == "Flatten") {
      if (attribute_int(node, "axis", 1) != 1) fail(node, "only axis 1 is supported");
      Value v = input(node, 0);
      if (v.kind != Value::Kind::kTensor || padded(v)) {
        fail(node, "input 1 is not a computed tensor");
      }
      v.flattened = true;
      define(node, v);
    } else if (op == "Reshape") {
      import_reshape(node);
    } else if (op == "Transpose") {
      import_transpose(node);
    } else if (op == "Gemm" || op == "MatMul") {
      import_linear(node);
    } else if (op == "Concat") {
      import_concat(node);
    } else if (op == "Slice") {
      import_slice(node);
    } else {
      import_pad(node);
    }
  }

  void import_constant(const onnx::NodeProto& node) {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == "value") {
        if (auto constant = small_constant(a.t())) {
          define_constant(node, std::move(*constant));
          return;
        }
        Value value;
        value.kind = Value::Kind::kWeight;
        value.weight.dims.assign(a.t().dims().begin(), a.t().dims().end());
        define(node, value);
        return;
      }
      if (a.name() == "value_int" || a.name() == "value_ints" || a.name() == "value_float" ||
          a.name() == "value_floats") {
        Constant constant;
        constant.integer = a.name().starts_with("value_int");
        if (a.name() == "value_int") constant.values = {static_cast<double>(a.i())};
        if (a.name() == "value_float") constant.values = {a.f()};
        if (a.name().ends_with('s')) {
          if (a.ints_size() > kMaxConstantValues || a.floats_size() > kMaxConstantValues) {
            fail(node, "its value has more than " + std::to_string(kMaxConstantValues) + " values");
          }
          for (const std::int64_t v : a.ints()) constant.values.push_back(static_cast<double>(v));
          for (const float v : a.floats()) constant.values.push_back(v);
          constant.dims = {static_cast<std::int64_t>(constant.values.size())};
        }
        define_constant(node, std::move(constant));
        return;
      }
    }
    fail(node, "has no value carb reads (value, value_int(s) or value_float(s))");
  }

  // A constant of the given shape, every value the node's `value` (zero by default).
  void import_constant_of_shape(const onnx::NodeProto& node) {
    Constant out;
    out.dims = integer_input(node, 0);
    const std::optional<std::int64_t> elements = element_count(out.dims, kMaxConstantValues);
    if (!elements) fail(node, "its shape is negative or too large to evaluate at import");
    double fill = 0;
    out.integer = false;
    if (const onnx::AttributeProto* value = attribute(node, "value")) {
      const std::optional<Constant> given = small_constant(value->t());
      if (!given || given->values.size() != 1) fail(node, "its value is not one number");
      fill = given->values[0];
      out.integer = given->integer;
    }
    out.values.assign(static_cast<std::size_t>(*elements), fill);
    define_constant(node, std::move(out));
  }

  void import_shape(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    std::vector<std::int64_t> dims;
    if (v.kind == Value::Kind::kTensor) {
      const Shape& shape = native_shape(v.tensor);
      if (v.flattened) {
        dims = {shape.n, static_cast<std::int64_t>(shape.c) * shape.h * shape.w};
      } else {
        dims = {shape.n, shape.c, std::int64_t{shape.h} + v.pad_before + v.pad_after,
                std::int64_t{shape.w} + v.pad_before + v.pad_after};
      }
    } else if (v.kind == Value::Kind::kConstant) {
      dims = v.constant.dims;
    } else if (v.kind == Value::Kind::kWeight) {
      dims = v.weight.dims;
    } else {
      fail(node, "the shape of its input is not known at import");
    }
    // Opset 15 on: the dimensions from `start` to `end`, negative ones counted from the back.
    const auto rank = static_cast<std::int64_t>(dims.size());
    const auto clamp = [rank](std::int64_t index) {
      if (index < 0) index += rank;
      return std::clamp<std::int64_t>(index, 0, rank);
    };
    const std::int64_t start = clamp(attribute_int(node, "start", 0));
    const std::int64_t end = clamp(attribute_int(node, "end", rank));
    Constant constant;
    for (std::int64_t i = start; i < end; ++i) {
      constant.values.push_back(static_cast<double>(dims[static_cast<std::size_t>(i)]));
    }
    constant.dims = {static_cast<std::int64_t>(constant.values.size())};
    define_constant(node, std::move(constant));
  }

  void import_gather(const onnx::NodeProto& node) {
    const Constant& data = constant_input(node, 0);
    const Constant& indices = constant_input(node, 1);
    if (attribute_int(node, "axis", 0) != 0 || data.dims.size() != 1) {
      fail(node, "gathers other than from a 1-D constant along axis 0 are not supported");
    }
    Constant out;
    out.integer = data.integer;
    out.dims = indices.dims;
    const auto n = static_cast<std::int64_t>(data.values.size());
    for (std::int64_t i : integers(node, indices)) {
      if (i < 0 && i >= -n) i += n;
      if (i < 0 || i >= n) fail(node, "index " + std::to_string(i) + " is out of range");
      out.values.push_back(data.values[static_cast<std::size_t>(i)]);
    }
    define_constant(node, std::move(out));
  }

  // Cast, Squeeze and Unsqueeze of constants: the same values (cast to integers where asked).
  void import_reshaped_constant(const onnx::NodeProto& node) {
    Constant constant = constant_input(node, 0);
    if (node.op_type() == "Cast") {
      const std::int64_t to = attribute_int(node, "to", onnx::TensorProto::FLOAT);
      constant.integer = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
      if (constant.integer) {
        for (double& v : constant.values) v = std::trunc(v);
      }
    } else {
      constant.dims =
          constant.values.size() == 1 && node.op_type() == "Squeeze"
              ? std::vector<std::int64_t>{}
              : std::vector<std::int64_t>{static_cast<std::int64_t>(constant.values.size())};
    }
    define_constant(node, std::move(constant));
  }

  void import_conv(const onnx::NodeProto& node) {
    const std::vector<std::int64_t>& w = weight_dims(node, 1);
    if (w.size() != 4) {
      fail(node, "weight is not 4-D (out, in / groups, kH, kW): 2-D convolutions only");
    }
    Layer layer;
    layer.kind = LayerKind::kConv;
    const std::int64_t groups = attribute_int(node, "group", 1);
    if (w[0] < 1 || w[0] > (1 << 20) || w[1] < 1 || w[1] > (1 << 20) || groups < 1 ||
        groups > w[0]) {
      fail(node, "weight dims or group out of range");
    }
    layer.channels = static_cast<int>(w[0]);
    layer.groups = static_cast<int>(groups);
    const auto kernel =
        attribute_ints(node, "kernel_shape").value_or(std::vector<std::int64_t>{w[2], w[3]});
    if (kernel != std::vector<std::int64_t>{w[2], w[3]}) {
      fail(node, "kernel_shape differs from its weight's");
    }
    window_attributes(node, layer, kernel);
    if (has_input(node, 2)) {
      const std::vector<std::int64_t>& b = weight_dims(node, 2);
      if (b.size() != 1 || b[0] != w[0]) fail(node, "bias is not one value per output channel");
      layer.bias = true;
    }
    const int in = padded_input(node, layer);
    layer.count_include_pad = false;
    const int channels = native_shape(in).c;
    if (channels != w[1] * groups) {
      fail(node, "its weight takes " + std::to_string(w[1] * groups) +
                     " input channels, its input has " + std::to_string(channels));
    }
    emit(node, layer, {in});
  }

  // Inference batch norm: a scale and a shift per channel, learnable (2 per channel), its
  // running statistics buffers.
  void import_batch_norm(const onnx::NodeProto& node) {
    for (int k = 1; k < node.output_size(); ++k) {
      if (!node.output(k).empty()) fail(node, "training-mode outputs are not supported");
    }
    const int in = tensor_input(node, 0);
    const int channels = native_shape(in).c;
    for (int k = 1; k <= 4; ++k) {
      expect_vector(node, k, channels,
                    std::string(k <= 2 ? "its scale and bias" : "its running statistics"));
    }
    Layer layer;
    layer.kind = LayerKind::kBatchNorm;
    emit(node, layer, {in});
  }

  void import_clip(const onnx::NodeProto& node) {
    Layer layer;
    layer.kind = LayerKind::kClip;
    // Open bounds are the floats' extremes: the same function, and finite in JSON.
    layer.lower = std::numeric_limits<float>::lowest();
    layer.upper = std::numeric_limits<float>::max();
    const auto bound = [&](double value) {
      if (std::isnan(value)) fail(node, "a bound is not a number");
      return static_cast<float>(std::clamp<double>(value, layer.lower, layer.upper));
    };
    for (int k = 1; k <= 2; ++k) {  // opset 11 on: the bounds are inputs; before, attributes
      if (!has_input(node, k)) continue;
      const Constant& given = constant_input(node, k);
      if (given.values.size() != 1) fail(node, "bounds must be scalars");
      (k == 1 ? layer.lower : layer.upper) = bound(given.values[0]);
    }
    layer.lower = bound(attribute_float(node, "min", layer.lower));
    layer.upper = bound(attribute_float(node, "max", layer.upper));
    if (layer.lower > layer.upper) fail(node, "its lower bound is above its upper bound");
    if (layer.lower == 0 && layer.upper == std::numeric_limits<float>::max()) {
      layer.kind = LayerKind::kRelu;
      layer.lower = layer.upper = 0;
    }
    emit(node, layer, {tensor_input(node, 0)});
  }

  Constant arithmetic(const onnx::NodeProto& node, const Constant& a, const Constant& b) const {
    const std::string& op = node.op_type();
    const std::size_t n = std::max(a.values.size(), b.values.size());
    if (!(a.values.size() == b.values.size() || a.values.size() == 1 || b.values.size() == 1)) {
      fail(node, "constants of " + std::to_string(a.values.size()) + " and " +
                     std::to_string(b.values.size()) + " values do not broadcast");
    }
    Constant out;
    out.integer = a.integer && b.integer;
    out.dims = a.values.size() >= b.values.size() ? a.dims : b.dims;
    for (std::size_t i = 0; i < n; ++i) {
      const double x = a.values[a.values.size() == 1 ? 0 : i];
      const double y = b.values[b.values.size() == 1 ? 0 : i];
      double r = 0;
      if (op == "Add") r = x + y;
      if (op == "Sub") r = x - y;
      if (op == "Mul") r = x * y;
      if (op == "Div") {
        if (y == 0) fail(node, "divides by zero");
        r = out.integer ? std::trunc(x / y) : x / y;
      }
      out.values.push_back(r);
    }
    return out;
  }

  void import_arithmetic(const onnx::NodeProto& node) {
    const std::string& op = node.op_type();
    const Value& a = input(node, 0);
    const Value& b = input(node, 1);
    using Kind = Value::Kind;
    if (a.kind == Kind::kConstant && b.kind == Kind::kConstant) {
      define_constant(node, arithmetic(node, a.constant, b.constant));
      return;
    }
    if (a.kind == Kind::kTensor && b.kind == Kind::kTensor) {
      if (op == "Add") {
        Layer layer;
        layer.kind = LayerKind::kAdd;
        emit(node, layer, {tensor_input(node, 0), tensor_input(node, 1)});
        return;
      }
      if (op == "Mul") {
        import_tensor_product(node);
        return;
      }
    }
    // A linear layer's bias: MatMul's output plus a vector of its width.
    if (op == "Add" && (a.kind == Kind::kTensor) != (b.kind == Kind::kTensor)) {
      const int k = a.kind == Kind::kTensor ? 0 : 1;
      const Value& tensor = k == 0 ? a : b;
      const auto layer = layer_of_output_.find(node.input(k));
      const std::vector<std::int64_t>& dims = weight_dims(node, 1 - k);
      if (layer != layer_of_output_.end()) {
        Layer& fc = architecture_.layers[static_cast<std::size_t>(layer->second)];
        if (fc.kind == LayerKind::kFullyConnected && !fc.bias && fc.output == tensor.tensor &&
            readers(node.input(k)) == 1 && dims.size() == 1 && dims[0] == fc.channels) {
          fc.bias = true;
          define(node, tensor);
          return;
        }
      }
    }
    fail(node, op + " of a tensor and a constant is not supported (only a linear layer's bias)");
  }

  // Mul of two tensors: x * sigmoid(x) is a swish, x * hardsigmoid(x) (1/6, 1/2) a hard swish,
  // when nothing else reads the activation; otherwise an elementwise product, the broadcast
  // (N x C x 1 x 1) operand second.
  void import_tensor_product(const onnx::NodeProto& node) {
    for (int k = 0; k < 2; ++k) {
      const std::string& activation_name = node.input(k);
      const auto found = layer_of_output_.find(activation_name);
      if (found == layer_of_output_.end() || readers(activation_name) != 1) continue;
      Layer& activation = architecture_.layers[static_cast<std::size_t>(found->second)];
      const Value& other = input(node, 1 - k);
      if (other.kind != Value::Kind::kTensor || other.flattened || padded(other) ||
          activation.inputs.size() != 1 || activation.inputs[0] != other.tensor) {
        continue;
      }
      const bool swish = activation.kind == LayerKind::kSigmoid;
      const bool hard_swish = activation.kind == LayerKind::kHardSigmoid &&
                              std::abs(activation.alpha - 1.0f / 6) < 1e-6f &&
                              std::abs(activation.beta - 0.5f) < 1e-6f;
      if (!swish && !hard_swish) continue;
      activation.kind = swish ? LayerKind::kSwish : LayerKind::kHardSwish;
      activation.alpha = 0;
      activation.beta = 0;
      define(node, input(node, k));
      return;
    }
    int first = tensor_input(node, 0);
    int second = tensor_input(node, 1);
    const Shape& a = native_shape(first);
    const Shape& b = native_shape(second);
    if (a.h == 1 && a.w == 1 && !(b.h == 1 && b.w == 1)) std::swap(first, second);
    Layer layer;
    layer.kind = LayerKind::kMul;
    emit(node, layer, {first, second});
  }

  void import_pool(const onnx::NodeProto& node) {
    Layer layer;
    layer.kind = node.op_type() == "MaxPool" ? LayerKind::kMaxPool : LayerKind::kAvgPool;
    const auto kernel = attribute_ints(node, "kernel_shape");
    if (!kernel) fail(node, "has no kernel_shape");
    window_attributes(node, layer, *kernel);
    if (layer.dilation != 1) fail(node, "dilated pooling is not supported");
    if (attribute_int(node, "storage_order", 0) != 0) {
      fail(node, "storage_order 1 is not supported");
    }
    if (node.output_size() > 1 && !node.output(1).empty()) {
      fail(node, "its indices output is not supported");
    }
    layer.ceil_mode = attribute_int(node, "ceil_mode", 0) != 0;
    layer.count_include_pad = attribute_int(node, "count_include_pad", 0) != 0;
    const Value& v = input(node, 0);
    if (layer.kind == LayerKind::kMaxPool) {
      layer.count_include_pad = false;
      if (padded(v)) fail(node, "a Pad before MaxPool is not supported");
      emit(node, layer, {tensor_input(node, 0)});
      return;
    }
    // A folded Pad's zeros count in the average; the node's own padding does only when it says
    // so: both at once cannot be one window.
    const bool folded = padded(v);
    const bool include = layer.count_include_pad;
    if (folded && !include && layer.padding + layer.padding_after > 0) {
      fail(node, "a Pad before an AveragePool that pads without counting padding is not supported");
    }
    const int in = padded_input(node, layer);
    layer.count_include_pad = include || folded;
    emit(node, layer, {in});
  }

  void import_global_pool(const onnx::NodeProto& node) {
    if (node.op_type() == "ReduceMean") {
      std::vector<std::int64_t> axes =
          attribute_ints(node, "axes").value_or(std::vector<std::int64_t>{});
      if (axes.empty() && has_input(node, 1)) axes = integer_input(node, 1);
      for (std::int64_t& a : axes) a = a < 0 ? a + 4 : a;
      std::sort(axes.begin(), axes.end());
      if (axes != std::vector<std::int64_t>{2, 3}) {
        fail(node, "only a mean over H and W (axes 2, 3) is supported");
      }
    }
    Layer layer;
    layer.kind = LayerKind::kGlobalAvgPool;
    emit(node, layer, {tensor_input(node, 0)});
    if (node.op_type() == "ReduceMean" && attribute_int(node, "keepdims", 1) == 0 &&
        node.output_size() > 0 && !node.output(0).empty()) {
      values_.at(node.output(0)).flattened = true;
    }
  }

  // The dimensions a Reshape of `elements` values to `target` gives: 0 copies the input's
  // dimension (`input_dims`), -1 takes what is left.
  std::vector<std::int64_t> reshaped_dims(const onnx::NodeProto& node,
                                          const std::vector<std::int64_t>& input_dims,
                                          std::int64_t elements,
                                          std::vector<std::int64_t> target) const {
    std::int64_t known = 1;
    int inferred = -1;
    for (std::size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0 && attribute_int(node, "allowzero", 0) == 0) {
        if (i >= input_dims.size()) fail(node, "copies a dimension its input lacks");
        target[i] = input_dims[i];
      }
      if (target[i] == -1 && inferred < 0) {
        inferred = static_cast<int>(i);
      } else if (target[i] < 0 || __builtin_mul_overflow(known, target[i], &known)) {
        fail(node, "its target shape is invalid");
      }
    }
    if (inferred >= 0) {
      if (known == 0 || elements % known != 0) fail(node, "its target shape is invalid");
      target[static_cast<std::size_t>(inferred)] = elements / known;
      known = elements;
    }
    if (known != elements) fail(node, "its target shape does not hold its input's values");
    return target;
  }

  // Reshape: of a constant, its values under new dimensions; of a tensor, to N x (C H W) (a
  // flatten), to its own shape (nothing), or the first step of a channel shuffle
  // (N x g x C/g x H x W) and its last (back to N x C x H x W).
  void import_reshape(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    const std::vector<std::int64_t> target = integer_input(node, 1);
    if (v.kind == Value::Kind::kConstant) {
      Constant constant = v.constant;
      constant.dims = reshaped_dims(node, v.constant.dims,
                                    static_cast<std::int64_t>(v.constant.values.size()), target);
      define_constant(node, std::move(constant));
      return;
    }
    if (v.kind == Value::Kind::kShuffledView) {
      const Shape& shape = native_shape(v.tensor);
      if (target.size() == 4 && (target[1] == -1 || target[1] == shape.c) && target[2] == shape.h &&
          target[3] == shape.w) {
        Layer layer;
        layer.kind = LayerKind::kChannelShuffle;
        layer.groups = v.groups;
        emit(node, layer, {v.tensor});
        return;
      }
      fail(node, "a transposed channel grouping must be reshaped back to N x C x H x W");
    }
    if (v.kind != Value::Kind::kTensor || padded(v)) {
      fail(node, "input 1 is not a computed tensor");
    }
    const Shape& shape = native_shape(v.tensor);
    const std::int64_t per_image = static_cast<std::int64_t>(shape.c) * shape.h * shape.w;
    if (target.size() == 2 && (target[1] == per_image || (target[1] == -1 && target[0] > 0))) {
      Value flat = v;
      flat.flattened = true;
      define(node, flat);
      return;
    }
    if (target.size() == 4 && (target[1] == shape.c || target[1] == -1) && target[2] == shape.h &&
        target[3] == shape.w && !v.flattened) {
      define(node, v);
      return;
    }
    if (target.size() == 5 && target[1] > 1 && target[1] <= shape.c && shape.c % target[1] == 0 &&
        target[2] == shape.c / target[1] && target[3] == shape.h && target[4] == shape.w &&
        !v.flattened) {
      Value grouped = v;
      grouped.kind = Value::Kind::kGroupedView;
      grouped.groups = static_cast<int>(target[1]);
      define(node, grouped);
      return;
    }
    std::string dims;
    for (const std::int64_t d : target) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    fail(node, "reshape to [" + dims + "] is not supported (a flatten, or a channel shuffle)");
  }

  // Strides of a row-major tensor of these dimensions.
  static std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> strides(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
    return strides;
  }

  // Checks that a constant's dimensions hold its values (a Reshape of it, a Slice or Transpose).
  void expect_consistent(const onnx::NodeProto& node, const Constant& constant) const {
    const std::optional<std::int64_t> elements = element_count(constant.dims, kMaxConstantValues);
    if (!elements || *elements != static_cast<std::int64_t>(constant.values.size())) {
      fail(node, "its constant input's dimensions do not hold its values");
    }
  }

  // Transpose: of a constant (as PyTorch computes a Pad's pads), its values permuted; of a
  // grouped channel view, the middle step of a channel shuffle.
  void import_transpose(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    std::vector<std::int64_t> perm =
        attribute_ints(node, "perm").value_or(std::vector<std::int64_t>{});
    if (v.kind == Value::Kind::kConstant) {
      const Constant& in = v.constant;
      expect_consistent(node, in);
      const std::size_t rank = in.dims.size();
      if (perm.empty()) {
        for (std::size_t i = rank; i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
      }
      std::vector<std::int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      for (std::size_t i = 0; i < rank; ++i) {
        if (sorted.size() != rank || sorted[i] != static_cast<std::int64_t>(i)) {
          fail(node, "perm is not a permutation of its input's axes");
        }
      }
      if (perm.size() != rank) fail(node, "perm is not a permutation of its input's axes");
      Constant out;
      out.integer = in.integer;
      for (const std::int64_t axis : perm)
        out.dims.push_back(in.dims[static_cast<std::size_t>(axis)]);
      const std::vector<std::int64_t> in_strides = strides_of(in.dims);
      const std::vector<std::int64_t> out_strides = strides_of(out.dims);
      out.values.resize(in.values.size());
      for (std::size_t flat = 0; flat < out.values.size(); ++flat) {
        std::int64_t source = 0;
        for (std::size_t axis = 0; axis < rank; ++axis) {
          const std::int64_t index =
              static_cast<std::int64_t>(flat) / out_strides[axis] % out.dims[axis];
          source += index * in_strides[static_cast<std::size_t>(perm[axis])];
        }
        out.values[flat] = in.values[static_cast<std::size_t>(source)];
      }
      define_constant(node, std::move(out));
      return;
    }
    if (v.kind == Value::Kind::kGroupedView && perm == std::vector<std::int64_t>{0, 2, 1, 3, 4}) {
      Value shuffled = v;
      shuffled.kind = Value::Kind::kShuffledView;
      define(node, shuffled);
      return;
    }
    fail(node,
         "a transpose other than a channel shuffle's (perm 0, 2, 1, 3, 4 of N x g x C/g x H x W) "
         "is not supported");
  }

  void import_linear(const onnx::NodeProto& node) {
    const bool gemm = node.op_type() == "Gemm";
    const std::vector<std::int64_t>& w = weight_dims(node, 1);
    if (w.size() != 2 || w[0] < 1 || w[1] < 1 || w[0] > (1 << 24) || w[1] > (1 << 24)) {
      fail(node, "weight is not a 2-D matrix");
    }
    if (gemm && (attribute_int(node, "transA", 0) != 0 || attribute_float(node, "alpha", 1) != 1 ||
                 attribute_float(node, "beta", 1) != 1)) {
      fail(node, "only transA = 0, alpha = 1 and beta = 1 are supported");
    }
    const bool transposed = gemm && attribute_int(node, "transB", 0) != 0;
    Layer layer;
    layer.kind = LayerKind::kFullyConnected;
    layer.channels = static_cast<int>(transposed ? w[0] : w[1]);
    layer.fc_inputs = transposed ? w[1] : w[0];
    if (gemm && has_input(node, 2)) {
      expect_vector(node, 2, layer.channels, "its bias");
      layer.bias = true;
    }
    const int in = tensor_input(node, 0, true);
    const Shape& shape = native_shape(in);
    if (!input(node, 0).flattened && (shape.h != 1 || shape.w != 1)) {
      fail(node, "reads an image tensor (flatten it first)");
    }
    emit(node, layer, {in});
  }

  void import_concat(const onnx::NodeProto& node) {
    if (node.input_size() == 0) fail(node, "has no inputs");
    bool all_constant = true;
    for (int k = 0; k < node.input_size(); ++k) {
      all_constant = all_constant && input(node, k).kind == Value::Kind::kConstant;
    }
    if (all_constant) {  // shape arithmetic: 1-D constants joined
      Constant out;
      for (int k = 0; k < node.input_size(); ++k) {
        const Constant& part = input(node, k).constant;
        if (static_cast<std::int64_t>(out.values.size() + part.values.size()) >
            kMaxConstantValues) {
          fail(node, "computes a constant of more than " + std::to_string(kMaxConstantValues) +
                         " values at import");
        }
        out.integer = out.integer && part.integer;
        out.values.insert(out.values.end(), part.values.begin(), part.values.end());
      }
      out.dims = {static_cast<std::int64_t>(out.values.size())};
      define_constant(node, std::move(out));
      return;
    }
    std::int64_t axis = attribute_int(node, "axis", 1);
    if (axis < 0) axis += 4;
    if (axis != 1) fail(node, "only concatenation along channels (axis 1) is supported");
    std::vector<int> inputs;
    inputs.reserve(static_cast<std::size_t>(node.input_size()));
    for (int k = 0; k < node.input_size(); ++k) inputs.push_back(tensor_input(node, k));
    Layer layer;
    layer.kind = LayerKind::kConcat;
    emit(node, layer, std::move(inputs));
  }

  // Slice of a constant along any axes with any steps (shape arithmetic, a Pad's pads).
  void slice_constant(const onnx::NodeProto& node, const Constant& in,
                      const std::vector<std::int64_t>& starts,
                      const std::vector<std::int64_t>& ends, std::vector<std::int64_t> axes,
                      std::vector<std::int64_t> steps) {
    expect_consistent(node, in);
    const auto rank = static_cast<std::int64_t>(in.dims.size());
    if (axes.empty()) {
      for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size()) {
      fail(node, "starts, ends, axes and steps differ in length");
    }
    // Per axis: first index, step and count (ONNX's clamping rules).
    std::vector<std::int64_t> first(in.dims.size(), 0);
    std::vector<std::int64_t> step(in.dims.size(), 1);
    Constant out;
    out.integer = in.integer;
    out.dims = in.dims;
    std::vector<bool> seen(in.dims.size(), false);
    for (std::size_t i = 0; i < starts.size(); ++i) {
      std::int64_t axis = axes[i];
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank || seen[static_cast<std::size_t>(axis)]) {
        fail(node, "an axis is out of range or repeated");
      }
      const auto a = static_cast<std::size_t>(axis);
      seen[a] = true;
      const std::int64_t size = in.dims[a];
      if (steps[i] == 0) fail(node, "a step is 0");
      if (size == 0) continue;
      const auto clamp = [size](std::int64_t index, std::int64_t low, std::int64_t high) {
        if (index < 0) index += size;
        return std::clamp(index, low, high);
      };
      const bool forward = steps[i] > 0;
      const std::int64_t begin =
          forward ? clamp(starts[i], 0, size) : clamp(starts[i], 0, size - 1);
      const std::int64_t end = forward ? clamp(ends[i], 0, size) : clamp(ends[i], -1, size - 1);
      const std::int64_t magnitude = forward                          ? steps[i]
                                     : steps[i] < -kMaxConstantValues ? kMaxConstantValues
                                                                      : -steps[i];
      const std::int64_t span = forward ? end - begin : begin - end;
      first[a] = begin;
      step[a] = forward ? magnitude : -magnitude;
      out.dims[a] = span <= 0 ? 0 : 1 + (span - 1) / magnitude;
    }
    const std::vector<std::int64_t> in_strides = strides_of(in.dims);
    const std::vector<std::int64_t> out_strides = strides_of(out.dims);
    const std::int64_t count = *element_count(out.dims, kMaxConstantValues);
    for (std::int64_t flat = 0; flat < count; ++flat) {
      std::int64_t source = 0;
      for (std::size_t axis = 0; axis < in.dims.size(); ++axis) {
        const std::int64_t index = flat / out_strides[axis] % out.dims[axis];
        source += (first[axis] + index * step[axis]) * in_strides[axis];
      }
      out.values.push_back(in.values[static_cast<std::size_t>(source)]);
    }
    define_constant(node, std::move(out));
  }

  void import_slice(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    const std::vector<std::int64_t> starts = integer_input(node, 1);
    const std::vector<std::int64_t> ends = integer_input(node, 2);
    std::vector<std::int64_t> axes;
    if (has_input(node, 3)) axes = integer_input(node, 3);
    std::vector<std::int64_t> steps;
    if (has_input(node, 4)) steps = integer_input(node, 4);
    if (v.kind == Value::Kind::kConstant) {
      slice_constant(node, v.constant, starts, ends, std::move(axes), std::move(steps));
      return;
    }
    if (starts.size() != 1 || ends.size() != 1 || axes.size() > 1 ||
        (!steps.empty() && (steps.size() != 1 || steps[0] != 1))) {
      fail(node, "only a slice of one axis with step 1 is supported");
    }
    std::int64_t axis = axes.empty() ? 0 : axes[0];
    if (axis < 0) axis += 4;
    if (axis != 1) fail(node, "only slices of channels (axis 1) of a tensor are supported");
    const int tensor = tensor_input(node, 0);
    const std::int64_t channels = native_shape(tensor).c;
    const auto clamp = [channels](std::int64_t index) {
      if (index < 0) index = index < -channels ? 0 : index + channels;
      return std::clamp<std::int64_t>(index, 0, channels);
    };
    const std::int64_t begin = clamp(starts[0]);
    const std::int64_t end = clamp(ends[0]);
    if (end <= begin) fail(node, "takes no channels");
    Layer layer;
    layer.kind = LayerKind::kSlice;
    layer.begin = static_cast<int>(begin);
    layer.channels = static_cast<int>(end - begin);
    emit(node, layer, {tensor});
  }

  void import_pad(const onnx::NodeProto& node) {
    const std::string mode = attribute_string(node, "mode");
    if (!mode.empty() && mode != "constant") {
      fail(node, "only constant (zero) padding is supported");
    }
    std::vector<std::int64_t> pads;
    if (has_input(node, 1)) {
      pads = integer_input(node, 1);
    } else {
      pads = attribute_ints(node, "pads").value_or(std::vector<std::int64_t>{});
    }
    if (has_input(node, 2)) {
      const Constant& fill = constant_input(node, 2);
      if (fill.values.size() != 1 || fill.values[0] != 0) {
        fail(node, "only zero padding is supported");
      }
    }
    if (attribute_float(node, "value", 0) != 0) fail(node, "only zero padding is supported");
    Value v = input(node, 0);
    if (v.kind != Value::Kind::kTensor || v.flattened) fail(node, "input 1 is not an image tensor");
    // [N, C, H, W begins, N, C, H, W ends]
    if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0 ||
        pads[2] != pads[3] || pads[6] != pads[7] || pads[2] < 0 || pads[6] < 0 ||
        v.pad_before + pads[2] > kMaxPadding || v.pad_after + pads[6] > kMaxPadding) {
      fail(node, "only zero padding of H and W, equal in both, 0 to " +
                     std::to_string(kMaxPadding) + ", is supported");
    }
    v.pad_before += static_cast<int>(pads[2]);
    v.pad_after += static_cast<int>(pads[6]);
    define(node, v);
  }

  const std::string& path_;
  const ParsedModel& model_;
  Architecture architecture_;
  std::optional<NetworkBuilder> native_;  ///< the layers so far at the file's own size
  std::map<std::string, Value, std::less<>> values_;
  std::map<std::string, int, std::less<>> readers_;
  std::map<std::string, int, std::less<>> layer_of_output_;  ///< ONNX name -> layer index
  int node_index_ = 0;
};

}  // namespace

Architecture import_onnx_bytes(std::string_view bytes, const std::string& path) {
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw Error(ErrorCategory::kInput, path + ": larger than 2 GiB, which protobuf cannot parse");
  }
  if (bytes.empty()) {
    throw Error(ErrorCategory::kInput, path + ": an empty file, not an ONNX model");
  }
  const ParsedModel model = ModelReader(path, bytes).read();
  if (!model.has_graph) {
    throw Error(ErrorCategory::kInput, path + ": an ONNX model without a graph");
  }
  return Importer(path, model).run();
}

Architecture import_onnx(const std::string& path) {
  const MappedFile file(path);
  return import_onnx_bytes({static_cast<const char*>(file.data()), file.size()}, path);
}

Architecture import_model(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension != ".onnx") {
    throw Error(ErrorCategory::kInput, path + ": not a model file carb reads (ONNX, *.onnx)");
  }
  return import_onnx(path);
}

}  // namespace carb
