// ONNX model files as carb architectures (docs/onnx.md). The file is parsed by Debian's ONNX
// protobuf library; each node becomes an IR layer, after the import resolves what a CNN export
// computes statically: shape arithmetic (Shape, Gather, Add, Div, ...) to constants, Identity,
// Dropout and Flatten to the tensor they pass on, a Pad into the window that reads it, and the
// patterns PyTorch splits one module into back into that module: x * sigmoid(x) (SiLU),
// x * hardsigmoid(x) (hard swish), reshape-transpose-reshape (channel shuffle), MatMul + Add (a
// linear layer with its bias).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <variant>

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
  ModelReader(const std::string& path, const MappedFile& file) : path_(path), file_(file) {}

  ParsedModel read() {
    ParsedModel model;
    CodedInputStream in(static_cast<const std::uint8_t*>(file_.data()),
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
    const auto* base = static_cast<const char*>(file_.data());
    if (!in.Skip(static_cast<int>(length))) malformed();
    return {base + position, length};
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
    const auto* base = static_cast<const char*>(file_.data());
    const std::size_t offset = static_cast<std::size_t>(bytes.data() - base);
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
      const char* data = base + offset + position;
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
        if (!in.ReadVarint32(&length)) malformed();
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
    return tensor;
  }

  const std::string& path_;
  const MappedFile& file_;
};

// A statically known value: a tensor of integers or reals, flattened, with its dimensions.
struct Constant {
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  bool integer = true;
};

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
      if (small_enough(initializer)) {
        if (auto constant = constant_of(initializer)) {
          value.kind = Value::Kind::kConstant;
          value.constant = std::move(*constant);
        }
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
    const Value& out = value(model_.outputs[0].name(), "the graph's output");
    if (out.kind != Value::Kind::kTensor || out.pad_before + out.pad_after > 0) {
      fail_file("its output '" + model_.outputs[0].name() + "' is not a computed tensor");
    }
    architecture_.output = out.tensor;
    if (architecture_.layers.empty()) fail_file("computes nothing: it has no layers");
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
    throw Error(ErrorCategory::kInput,
                path_ + ": node '" + node_name(node) + "' (" + node.op_type() + "): " + message);
  }

  std::string node_name(const onnx::NodeProto& node) const {
    return node.name().empty() ? "#" + std::to_string(node_index_) : node.name();
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

  static bool small_enough(const onnx::TensorProto& tensor) {
    std::int64_t elements = 1;
    for (std::int64_t dim : tensor.dims()) elements *= std::max<std::int64_t>(dim, 0);
    return elements <= 64;
  }

  // The values of a small tensor (shapes, pads, clip bounds), or nullopt for a type carb does
  // not read.
  static std::optional<Constant> constant_of(const onnx::TensorProto& tensor) {
    Constant constant;
    constant.dims.assign(tensor.dims().begin(), tensor.dims().end());
    std::int64_t elements = 1;
    for (std::int64_t dim : constant.dims) elements *= dim;
    const std::string& raw = tensor.raw_data();
    const auto from_raw = [&]<typename T>(T) {
      if (raw.size() != static_cast<std::size_t>(elements) * sizeof(T)) return false;
      for (std::int64_t i = 0; i < elements; ++i) {
        T item;
        std::memcpy(&item, raw.data() + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
        constant.values.push_back(static_cast<double>(item));
      }
      return true;
    };
    switch (tensor.data_type()) {
      case onnx::TensorProto::INT64:
        constant.integer = true;
        if (!raw.empty()) {
          if (!from_raw(std::int64_t{})) return std::nullopt;
        } else {
          for (std::int64_t v : tensor.int64_data())
            constant.values.push_back(static_cast<double>(v));
        }
        break;
      case onnx::TensorProto::INT32:
        constant.integer = true;
        if (!raw.empty()) {
          if (!from_raw(std::int32_t{})) return std::nullopt;
        } else {
          for (std::int32_t v : tensor.int32_data()) constant.values.push_back(v);
        }
        break;
      case onnx::TensorProto::FLOAT:
        constant.integer = false;
        if (!raw.empty()) {
          if (!from_raw(float{})) return std::nullopt;
        } else {
          for (float v : tensor.float_data()) constant.values.push_back(v);
        }
        break;
      case onnx::TensorProto::DOUBLE:
        constant.integer = false;
        if (!raw.empty()) {
          if (!from_raw(double{})) return std::nullopt;
        } else {
          for (double v : tensor.double_data()) constant.values.push_back(v);
        }
        break;
      default:
        return std::nullopt;
    }
    if (static_cast<std::int64_t>(constant.values.size()) != elements) return std::nullopt;
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
    const onnx::TensorShapeProto& shape = input.type().tensor_type().shape();
    const auto dim = [&](int i) -> std::int64_t {
      return shape.dim(i).has_dim_value() ? shape.dim(i).dim_value() : -1;
    };
    if (shape.dim_size() != 4 || dim(1) < 1 || dim(2) < 1 || dim(3) < 1) {
      fail_file("its input '" + input.name() + "' is not N x C x H x W with C, H and W fixed");
    }
    if (dim(2) != dim(3)) {
      fail_file("its input '" + input.name() + "' is " + std::to_string(dim(2)) + "x" +
                std::to_string(dim(3)) + "; carb takes square inputs (a resolution)");
    }
    if (dim(1) > (1 << 16) || dim(2) > 8192) fail_file("its input is implausibly large");
    architecture_.input_channels = static_cast<int>(dim(1));
    architecture_.native_resolution = static_cast<int>(dim(2));
    native_batch_ = dim(0) > 0 ? static_cast<int>(std::min<std::int64_t>(dim(0), 4096)) : 1;
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

  const Value& value(const std::string& name, const std::string& what) const {
    const auto found = values_.find(name);
    if (found == values_.end()) {
      fail_file(what + " reads '" + name + "', which nothing before it defines");
    }
    return found->second;
  }

  const Value& input(const onnx::NodeProto& node, int k) const {
    if (k >= node.input_size() || node.input(k).empty()) {
      fail(node, "lacks input " + std::to_string(k + 1));
    }
    const auto found = values_.find(node.input(k));
    if (found == values_.end()) {
      fail(node, "reads '" + node.input(k) + "', which nothing before it defines");
    }
    return found->second;
  }

  bool has_input(const onnx::NodeProto& node, int k) const {
    return k < node.input_size() && !node.input(k).empty();
  }

  // A computed tensor input, neither flattened nor padded unless allowed.
  int tensor_input(const onnx::NodeProto& node, int k, bool flattened_ok = false) const {
    const Value& v = input(node, k);
    if (v.kind != Value::Kind::kTensor)
      fail(node, "input " + std::to_string(k + 1) + " is not a computed tensor");
    if (v.flattened && !flattened_ok) fail(node, "reads a flattened tensor as an image");
    if (v.pad_before + v.pad_after > 0) {
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

  const std::vector<std::int64_t>& weight_dims(const onnx::NodeProto& node, int k) const {
    const Value& v = input(node, k);
    if (v.kind == Value::Kind::kWeight) return v.weight.dims;
    if (v.kind == Value::Kind::kConstant) return v.constant.dims;
    fail(node, "input " + std::to_string(k + 1) + " is not a weight (an initializer)");
  }

  void define(const onnx::NodeProto& node, Value value, int k = 0) {
    if (k >= node.output_size() || node.output(k).empty()) return;
    values_[node.output(k)] = std::move(value);
  }

  void define_constant(const onnx::NodeProto& node, Constant constant) {
    Value value;
    value.kind = Value::Kind::kConstant;
    value.constant = std::move(constant);
    define(node, std::move(value));
  }

  // Appends a layer reading `inputs`; its output becomes the node's first output.
  Layer& emit(const onnx::NodeProto& node, Layer layer, std::vector<int> inputs) {
    if (architecture_.layers.size() >= 100000) fail(node, "the network has too many layers");
    layer.name = node_name(node);
    layer.inputs = std::move(inputs);
    layer.output = static_cast<int>(architecture_.layers.size()) + 1;
    architecture_.layers.push_back(std::move(layer));
    Value value;
    value.tensor = architecture_.layers.back().output;
    define(node, value);
    layer_of_output_[node.output_size() > 0 ? node.output(0) : std::string()] =
        static_cast<int>(architecture_.layers.size()) - 1;
    return architecture_.layers.back();
  }

  // The shape of a tensor at the file's own input size.
  Shape native_shape(const onnx::NodeProto& node, int tensor) {
    Architecture partial = architecture_;
    partial.output = tensor;
    partial.hash = "0000000000000000";  // never registered: any well-formed hash builds it
    Config config =
        imported_config(partial, architecture_.native_resolution, native_batch_, Precision::kFp32);
    try {
      const Network network = instantiate_architecture(partial, config);
      return network.tensors[static_cast<std::size_t>(tensor)];
    } catch (const Error& error) {
      fail(node, std::string("shapes before it do not fit: ") + error.what());
    }
  }

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
  // and W separately. `extra_before`/`extra_after` come from a Pad folded into it.
  void window_attributes(const onnx::NodeProto& node, Layer& layer,
                         const std::vector<std::int64_t>& kernel_dims) {
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
      fail(node, "auto_pad " + auto_pad + " is not supported; export with explicit pads");
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
      if (pads->size() != 4 || (*pads)[0] != (*pads)[1] || (*pads)[2] != (*pads)[3] ||
          (*pads)[0] < 0 || (*pads)[2] < 0 || (*pads)[0] > 4096 || (*pads)[2] > 4096) {
        fail(node, "pads must be [t, l, b, r] with t = l and b = r, 0 to 4096");
      }
      layer.padding = static_cast<int>((*pads)[0]);
      layer.padding_after = static_cast<int>((*pads)[2]);
    }
  }

  // The window layer's input, with a preceding Pad's padding folded into the layer.
  int padded_input(const onnx::NodeProto& node, Layer& layer) {
    const Value& v = input(node, 0);
    if (v.kind != Value::Kind::kTensor || v.flattened) {
      fail(node, "input 1 is not a computed image tensor");
    }
    layer.padding += v.pad_before;
    layer.padding_after += v.pad_after;
    if (v.pad_before + v.pad_after > 0) layer.count_include_pad = true;
    return v.tensor;
  }

  void import_node(const onnx::NodeProto& node) {
    const std::string& op = node.op_type();
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      fail(node, "operator of domain '" + node.domain() + "' is not supported");
    }
    if (!supported_operators().contains(op)) {
      fail(node, "operator " + op + " is not supported (docs/onnx.md lists those that are)");
    }
    if (op == "Identity" || op == "Dropout") {
      define(node, input(node, 0));
    } else if (op == "Constant") {
      import_constant(node);
    } else if (op == "Shape") {
      import_shape(node);
    } else if (op == "Gather") {
      import_gather(node);
    } else if (op == "Cast" || op == "Squeeze" || op == "Unsqueeze") {
      import_reshaped_constant(node);
    } else if (op == "Conv") {
      import_conv(node);
    } else if (op == "BatchNormalization") {
      Layer layer;
      layer.kind = LayerKind::kBatchNorm;
      for (int k = 1; k <= 4; ++k) (void)weight_dims(node, k);
      emit(node, layer, {tensor_input(node, 0)});
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
      if (v.kind != Value::Kind::kTensor) fail(node, "input 1 is not a computed tensor");
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
    } else if (op == "Pad") {
      import_pad(node);
    } else {
      fail(node, "operator " + op + " is not supported");
    }
  }

  void import_constant(const onnx::NodeProto& node) {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == "value") {
        if (small_enough(a.t())) {
          if (auto constant = constant_of(a.t())) {
            define_constant(node, std::move(*constant));
            return;
          }
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
        for (std::int64_t v : a.ints()) constant.values.push_back(static_cast<double>(v));
        for (float v : a.floats()) constant.values.push_back(v);
        if (a.name().ends_with('s')) {
          constant.dims = {static_cast<std::int64_t>(constant.values.size())};
        }
        define_constant(node, std::move(constant));
        return;
      }
    }
    fail(node, "has no value carb reads (value, value_int(s) or value_float(s))");
  }

  void import_shape(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    Constant constant;
    constant.dims = {0};
    if (v.kind == Value::Kind::kTensor && !v.flattened) {
      const Shape shape = native_shape(node, v.tensor);
      constant.values = {static_cast<double>(shape.n), static_cast<double>(shape.c),
                         static_cast<double>(shape.h), static_cast<double>(shape.w)};
    } else if (v.kind == Value::Kind::kConstant) {
      for (std::int64_t dim : v.constant.dims) constant.values.push_back(static_cast<double>(dim));
    } else if (v.kind == Value::Kind::kWeight) {
      for (std::int64_t dim : v.weight.dims) constant.values.push_back(static_cast<double>(dim));
    } else {
      fail(node, "the shape of its input is not known at import");
    }
    constant.dims[0] = static_cast<std::int64_t>(constant.values.size());
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
    for (double index : indices.values) {
      auto i = static_cast<std::int64_t>(index);
      const auto n = static_cast<std::int64_t>(data.values.size());
      if (i < 0) i += n;
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
    if (w.size() != 4)
      fail(node, "weight is not 4-D (out, in / groups, kH, kW): 2-D convolutions only");
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
    if (kernel != std::vector<std::int64_t>{w[2], w[3]})
      fail(node, "kernel_shape differs from its weight's");
    window_attributes(node, layer, kernel);
    if (has_input(node, 2)) {
      const std::vector<std::int64_t>& b = weight_dims(node, 2);
      if (b.size() != 1 || b[0] != w[0]) fail(node, "bias is not one value per output channel");
      layer.bias = true;
    }
    const int in = padded_input(node, layer);
    layer.count_include_pad = false;
    Layer& emitted = emit(node, layer, {in});
    const Shape shape = native_shape(node, in);
    if (shape.c != w[1] * groups) {
      fail(node, "its weight takes " + std::to_string(w[1] * groups) +
                     " input channels, its input has " + std::to_string(shape.c));
    }
    (void)emitted;
  }

  void import_clip(const onnx::NodeProto& node) {
    Layer layer;
    layer.kind = LayerKind::kClip;
    layer.lower = -std::numeric_limits<float>::infinity();
    layer.upper = std::numeric_limits<float>::infinity();
    for (int k = 1; k <= 2; ++k) {  // opset 11 on: the bounds are inputs; before, attributes
      if (!has_input(node, k)) continue;
      const Constant& bound = constant_input(node, k);
      if (bound.values.size() != 1) fail(node, "bounds must be scalars");
      (k == 1 ? layer.lower : layer.upper) = static_cast<float>(bound.values[0]);
    }
    layer.lower = attribute_float(node, "min", layer.lower);
    layer.upper = attribute_float(node, "max", layer.upper);
    if (!(layer.lower <= layer.upper)) fail(node, "its lower bound is above its upper bound");
    if (layer.lower == 0 && std::isinf(layer.upper) && layer.upper > 0) {
      layer.kind = LayerKind::kRelu;
    }
    emit(node, layer, {tensor_input(node, 0)});
  }

  static Constant arithmetic(const Constant& a, const Constant& b, const std::string& op,
                             const std::function<void(const std::string&)>& fail_with) {
    const std::size_t n = std::max(a.values.size(), b.values.size());
    if (!(a.values.size() == b.values.size() || a.values.size() == 1 || b.values.size() == 1)) {
      fail_with("constants of " + std::to_string(a.values.size()) + " and " +
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
        if (y == 0) fail_with("divides by zero");
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
      define_constant(node, arithmetic(a.constant, b.constant, op,
                                       [&](const std::string& why) { fail(node, why); }));
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
      const Value& tensor = a.kind == Kind::kTensor ? a : b;
      const std::string& tensor_name = a.kind == Kind::kTensor ? node.input(0) : node.input(1);
      const auto layer = layer_of_output_.find(tensor_name);
      const std::vector<std::int64_t>& dims = weight_dims(node, a.kind == Kind::kTensor ? 1 : 0);
      if (layer != layer_of_output_.end()) {
        Layer& fc = architecture_.layers[static_cast<std::size_t>(layer->second)];
        if (fc.kind == LayerKind::kFullyConnected && !fc.bias && fc.output == tensor.tensor &&
            readers(tensor_name) == 1 && dims.size() == 1 && dims[0] == fc.channels) {
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
      const std::string& other_name = node.input(1 - k);
      const auto found = layer_of_output_.find(activation_name);
      if (found == layer_of_output_.end() || readers(activation_name) != 1) continue;
      Layer& activation = architecture_.layers[static_cast<std::size_t>(found->second)];
      const Value& other = values_.at(other_name);
      if (other.kind != Value::Kind::kTensor || other.flattened || activation.inputs.size() != 1 ||
          activation.inputs[0] != other.tensor) {
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
      define(node, values_.at(activation_name));
      return;
    }
    int first = tensor_input(node, 0);
    int second = tensor_input(node, 1);
    const Shape a = native_shape(node, first);
    const Shape b = native_shape(node, second);
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
    if (attribute_int(node, "storage_order", 0) != 0)
      fail(node, "storage_order 1 is not supported");
    if (node.output_size() > 1 && !node.output(1).empty())
      fail(node, "its indices output is not supported");
    layer.ceil_mode = attribute_int(node, "ceil_mode", 0) != 0;
    layer.count_include_pad = attribute_int(node, "count_include_pad", 0) != 0;
    if (layer.kind == LayerKind::kMaxPool) {
      layer.count_include_pad = false;
      const Value& v = input(node, 0);
      if (v.pad_before + v.pad_after > 0) fail(node, "a Pad before MaxPool is not supported");
      emit(node, layer, {tensor_input(node, 0)});
      return;
    }
    // A folded Pad's zeros count in the average; the node's own padding does only when it says
    // so: both at once cannot be one window.
    const Value& padded = input(node, 0);
    const bool folded = padded.pad_before + padded.pad_after > 0;
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
      if (axes.empty() && has_input(node, 1)) {
        for (double a : constant_input(node, 1).values)
          axes.push_back(static_cast<std::int64_t>(a));
      }
      for (std::int64_t& a : axes) a = a < 0 ? a + 4 : a;
      std::sort(axes.begin(), axes.end());
      if (axes != std::vector<std::int64_t>{2, 3}) {
        fail(node, "only a mean over H and W (axes 2, 3) is supported");
      }
    }
    Layer layer;
    layer.kind = LayerKind::kGlobalAvgPool;
    emit(node, layer, {tensor_input(node, 0)});
    if (node.op_type() == "ReduceMean" && attribute_int(node, "keepdims", 1) == 0) {
      values_[node.output(0)].flattened = true;
    }
  }

  static std::vector<std::int64_t> integers(const Constant& constant) {
    std::vector<std::int64_t> out;
    out.reserve(constant.values.size());
    for (double v : constant.values) out.push_back(static_cast<std::int64_t>(v));
    return out;
  }

  // Reshape: to N x (C H W) (a flatten), to its own shape (nothing), or the first step of a
  // channel shuffle (N x g x C/g x H x W) and its last (back to N x C x H x W).
  void import_reshape(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    const std::vector<std::int64_t> target = integers(constant_input(node, 1));
    if (v.kind == Value::Kind::kConstant) {
      Constant constant = v.constant;
      constant.dims = target;
      define_constant(node, std::move(constant));
      return;
    }
    if (v.kind == Value::Kind::kShuffledView) {
      const Shape shape = native_shape(node, v.tensor);
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
    if (v.kind != Value::Kind::kTensor || v.pad_before + v.pad_after > 0) {
      fail(node, "input 1 is not a computed tensor");
    }
    const Shape shape = native_shape(node, v.tensor);
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
    if (target.size() == 5 && target[1] > 1 && target[1] * target[2] == shape.c &&
        target[3] == shape.h && target[4] == shape.w && !v.flattened) {
      Value grouped = v;
      grouped.kind = Value::Kind::kGroupedView;
      grouped.groups = static_cast<int>(target[1]);
      define(node, grouped);
      return;
    }
    std::string dims;
    for (std::int64_t d : target) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    fail(node, "reshape to [" + dims + "] is not supported (a flatten, or a channel shuffle)");
  }

  void import_transpose(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    const auto perm = attribute_ints(node, "perm");
    if (v.kind == Value::Kind::kGroupedView && perm &&
        *perm == std::vector<std::int64_t>{0, 2, 1, 3, 4}) {
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
      const std::vector<std::int64_t>& b = weight_dims(node, 2);
      std::int64_t elements = 1;
      for (std::int64_t d : b) elements *= d;
      if (elements != layer.channels) fail(node, "bias is not one value per output");
      layer.bias = true;
    }
    const int in = tensor_input(node, 0, true);
    const Shape shape = native_shape(node, in);
    const Value& v = input(node, 0);
    if (!v.flattened && (shape.h != 1 || shape.w != 1)) {
      fail(node, "reads an image tensor (flatten it first)");
    }
    emit(node, layer, {in});
  }

  void import_concat(const onnx::NodeProto& node) {
    bool all_constant = true;
    for (int k = 0; k < node.input_size(); ++k) {
      all_constant = all_constant && input(node, k).kind == Value::Kind::kConstant;
    }
    if (all_constant) {
      Constant out;
      for (int k = 0; k < node.input_size(); ++k) {
        const Constant& part = input(node, k).constant;
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
    for (int k = 0; k < node.input_size(); ++k) inputs.push_back(tensor_input(node, k));
    if (inputs.empty()) fail(node, "has no inputs");
    Layer layer;
    layer.kind = LayerKind::kConcat;
    emit(node, layer, std::move(inputs));
  }

  void import_slice(const onnx::NodeProto& node) {
    const Value& v = input(node, 0);
    const std::vector<std::int64_t> starts = integers(constant_input(node, 1));
    const std::vector<std::int64_t> ends = integers(constant_input(node, 2));
    std::vector<std::int64_t> axes;
    if (has_input(node, 3)) axes = integers(constant_input(node, 3));
    std::vector<std::int64_t> steps;
    if (has_input(node, 4)) steps = integers(constant_input(node, 4));
    if (starts.size() != 1 || ends.size() != 1 || axes.size() > 1 ||
        (!steps.empty() && (steps.size() != 1 || steps[0] != 1))) {
      fail(node, "only a slice of one axis with step 1 is supported");
    }
    const auto clamp = [](std::int64_t index, std::int64_t size) {
      if (index < 0) index += size;
      return std::clamp<std::int64_t>(index, 0, size);
    };
    if (v.kind == Value::Kind::kConstant) {
      const auto size = static_cast<std::int64_t>(v.constant.values.size());
      if (v.constant.dims.size() > 1 || (!axes.empty() && axes[0] != 0 && axes[0] != -1)) {
        fail(node, "only slices of 1-D constants are supported");
      }
      Constant out = v.constant;
      out.values.assign(
          v.constant.values.begin() + clamp(starts[0], size),
          v.constant.values.begin() + std::max(clamp(starts[0], size), clamp(ends[0], size)));
      out.dims = {static_cast<std::int64_t>(out.values.size())};
      define_constant(node, std::move(out));
      return;
    }
    std::int64_t axis = axes.empty() ? 0 : axes[0];
    if (axis < 0) axis += 4;
    if (axis != 1) fail(node, "only slices of channels (axis 1) of a tensor are supported");
    const int tensor = tensor_input(node, 0);
    const Shape shape = native_shape(node, tensor);
    const std::int64_t begin = clamp(starts[0], shape.c);
    const std::int64_t end = clamp(ends[0], shape.c);
    if (end <= begin) fail(node, "takes no channels");
    Layer layer;
    layer.kind = LayerKind::kSlice;
    layer.begin = static_cast<int>(begin);
    layer.channels = static_cast<int>(end - begin);
    emit(node, layer, {tensor});
  }

  void import_pad(const onnx::NodeProto& node) {
    const std::string mode = attribute_string(node, "mode");
    if (!mode.empty() && mode != "constant")
      fail(node, "only constant (zero) padding is supported");
    std::vector<std::int64_t> pads;
    if (has_input(node, 1)) {
      pads = integers(constant_input(node, 1));
    } else {
      pads = attribute_ints(node, "pads").value_or(std::vector<std::int64_t>{});
    }
    if (has_input(node, 2)) {
      const Constant& fill = constant_input(node, 2);
      if (fill.values.size() != 1 || fill.values[0] != 0)
        fail(node, "only zero padding is supported");
    }
    if (attribute_float(node, "value", 0) != 0) fail(node, "only zero padding is supported");
    // [N, C, H, W begins, N, C, H, W ends]
    if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0 ||
        pads[2] != pads[3] || pads[6] != pads[7] || pads[2] < 0 || pads[6] < 0 || pads[2] > 4096 ||
        pads[6] > 4096) {
      fail(node, "only zero padding of H and W, equal in both, is supported");
    }
    Value v = input(node, 0);
    if (v.kind != Value::Kind::kTensor || v.flattened) fail(node, "input 1 is not an image tensor");
    v.pad_before += static_cast<int>(pads[2]);
    v.pad_after += static_cast<int>(pads[6]);
    define(node, v);
  }

  const std::string& path_;
  const ParsedModel& model_;
  Architecture architecture_;
  std::map<std::string, Value, std::less<>> values_;
  std::map<std::string, int, std::less<>> readers_;
  std::map<std::string, int, std::less<>> layer_of_output_;  ///< ONNX name -> layer index
  int node_index_ = 0;
  int native_batch_ = 1;
};

}  // namespace

Architecture import_onnx(const std::string& path) {
  const MappedFile file(path);
  if (file.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw Error(ErrorCategory::kInput, path + ": larger than 2 GiB, which protobuf cannot parse");
  }
  if (file.size() == 0)
    throw Error(ErrorCategory::kInput, path + ": an empty file, not an ONNX model");
  const ParsedModel model = ModelReader(path, file).read();
  if (!model.has_graph)
    throw Error(ErrorCategory::kInput, path + ": an ONNX model without a graph");
  return Importer(path, model).run();
}

Architecture import_model(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension != ".onnx") {
    throw Error(ErrorCategory::kInput, path + ": not a model file carb reads (ONNX, *.onnx)");
  }
  return import_onnx(path);
}

}  // namespace carb
