// Builds small ONNX models node by node with the ONNX protobuf classes (libonnx-dev), for tests
// of the importer: well-formed graphs of each operator and fusion, and malformed ones.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

namespace carb_test {

class OnnxBuilder {
 public:
  /// A model of one float input "input", 1 x `channels` x `resolution` x `resolution`.
  explicit OnnxBuilder(int channels = 3, int resolution = 8, int opset = 13) {
    model_.set_ir_version(7);
    model_.set_producer_name("carb tests");
    onnx::OperatorSetIdProto* op_set = model_.add_opset_import();
    op_set->set_domain("");
    op_set->set_version(opset);
    graph()->set_name("test");
    onnx::ValueInfoProto* input = graph()->add_input();
    input->set_name("input");
    onnx::TypeProto_Tensor* type = input->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    for (const std::int64_t dim : {1, channels, resolution, resolution}) {
      type->mutable_shape()->add_dim()->set_dim_value(dim);
    }
  }

  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }

  /// Adds a node; its name is `name`, else its first output's.
  onnx::NodeProto& node(const std::string& op, std::initializer_list<std::string> inputs,
                        std::initializer_list<std::string> outputs, const std::string& name = "") {
    onnx::NodeProto* node = graph()->add_node();
    node->set_op_type(op);
    for (const std::string& input : inputs) node->add_input(input);
    for (const std::string& output : outputs) node->add_output(output);
    node->set_name(name.empty() && outputs.size() > 0 ? *outputs.begin() : name);
    return *node;
  }

  /// A float weight of these dimensions, its values left out (the importer reads dimensions).
  std::string weight(const std::string& name, std::initializer_list<std::int64_t> dims) {
    onnx::TensorProto* tensor = graph()->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    for (const std::int64_t dim : dims) tensor->add_dims(dim);
    return name;
  }

  /// An INT64 initializer holding `values` (1-D, or a scalar when `scalar`).
  std::string ints(const std::string& name, const std::vector<std::int64_t>& values,
                   bool scalar = false) {
    onnx::TensorProto* tensor = graph()->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) tensor->add_dims(static_cast<std::int64_t>(values.size()));
    for (const std::int64_t v : values) tensor->add_int64_data(v);
    return name;
  }

  /// A FLOAT scalar initializer.
  std::string scalar(const std::string& name, float value) {
    onnx::TensorProto* tensor = graph()->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    tensor->add_float_data(value);
    return name;
  }

  static void attribute(onnx::NodeProto& node, const std::string& name, std::int64_t value) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void attribute(onnx::NodeProto& node, const std::string& name,
                        const std::vector<std::int64_t>& values) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (const std::int64_t v : values) a->add_ints(v);
  }
  static void attribute_float(onnx::NodeProto& node, const std::string& name, float value) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
  }

  /// A conv node with a weight out x in/groups x k x k, pads p on every side.
  onnx::NodeProto& conv(const std::string& input, const std::string& output, int in, int out,
                        int kernel, int stride = 1, int pad = 0, int groups = 1,
                        bool bias = false) {
    const std::string w = weight(output + ".weight", {out, in / groups, kernel, kernel});
    onnx::NodeProto& node =
        bias ? this->node("Conv", {input, w, weight(output + ".bias", {out})}, {output})
             : this->node("Conv", {input, w}, {output});
    attribute(node, "kernel_shape", std::vector<std::int64_t>{kernel, kernel});
    attribute(node, "strides", std::vector<std::int64_t>{stride, stride});
    attribute(node, "pads", std::vector<std::int64_t>{pad, pad, pad, pad});
    attribute(node, "group", std::int64_t{groups});
    return node;
  }

  /// The graph's output.
  void output(const std::string& name) {
    onnx::ValueInfoProto* out = graph()->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }

  std::string bytes() const { return model_.SerializeAsString(); }

  /// Writes the model to `path` and returns the path.
  std::string write(const std::string& path) const {
    std::ofstream(path, std::ios::binary) << bytes();
    return path;
  }

 private:
  onnx::ModelProto model_;
};

}  // namespace carb_test
