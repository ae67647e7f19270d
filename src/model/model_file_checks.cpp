// The model file's XGBoost checks (model_file_checks.hpp): every tree is checked before XGBoost
// sees it.
#include "model_file_checks.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

namespace carb::model_detail {

namespace {

// A number XGBoost writes as a string ("4"), as a whole number >= 0.
long long count_of(const nlohmann::json& params, const char* field) {
  const std::string text = params.at(field).get<std::string>();
  std::size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 0 || value > (1LL << 31)) {
    throw std::invalid_argument(std::string(field) + " '" + text + "'");
  }
  return value;
}

// XGBoost 1.7 trusts a model's trees: node arrays shorter than num_nodes corrupt its heap and a
// child pointing back up makes prediction loop forever (both found by fuzz/model_fuzz.cpp). So
// every tree of a model file is checked before XGBoost sees it; throws std::invalid_argument.
void check_tree(const nlohmann::json& tree) {
  const auto count = [&](const char* field) {
    return static_cast<std::size_t>(count_of(tree.at("tree_param"), field));
  };
  const std::size_t nodes = count("num_nodes");
  const std::size_t features = count("num_feature");
  if (nodes == 0) throw std::invalid_argument("a tree without nodes");
  // XGBoost indexes its categorical arrays by one another unchecked; carb's trees have no
  // categorical splits, no deleted nodes and scalar leaves.
  for (const char* field :
       {"categories", "categories_nodes", "categories_segments", "categories_sizes"}) {
    if (!tree.at(field).is_array() || !tree.at(field).empty()) {
      throw std::invalid_argument(std::string("a tree's ") + field + " is not empty");
    }
  }
  if (count("num_deleted") != 0 || count("size_leaf_vector") != 0) {
    throw std::invalid_argument("a tree with deleted nodes or leaf vectors");
  }
  for (const char* field :
       {"left_children", "right_children", "parents", "split_indices", "split_conditions",
        "split_type", "default_left", "base_weights", "loss_changes", "sum_hessian"}) {
    if (!tree.at(field).is_array() || tree.at(field).size() != nodes) {
      throw std::invalid_argument(std::string("a tree's ") + field + " does not have num_nodes (" +
                                  std::to_string(nodes) + ") entries");
    }
  }
  const nlohmann::json& left = tree.at("left_children");
  const nlohmann::json& right = tree.at("right_children");
  // XGBoost looks every node's parent up unchecked: each node's parent is the node that names it
  // as a child, the root's is XGBoost's "none" (2^31 - 1).
  std::vector<long long> parent_of(nodes, -1);
  parent_of[0] = (1LL << 31) - 1;
  for (std::size_t node = 0; node < nodes; ++node) {
    const auto child = [&](const nlohmann::json& children) {
      return integer_of<long long>(children[node]);
    };
    const long long l = child(left);
    const long long r = child(right);
    if (l == -1 && r == -1) continue;  // a leaf
    // Nodes are numbered as the tree grows, so a child always comes after its parent.
    if (l <= static_cast<long long>(node) || r <= static_cast<long long>(node) ||
        l >= static_cast<long long>(nodes) || r >= static_cast<long long>(nodes)) {
      throw std::invalid_argument("a tree node's children are not later nodes of the tree");
    }
    if (parent_of[static_cast<std::size_t>(l)] != -1 ||
        parent_of[static_cast<std::size_t>(r)] != -1 || l == r) {
      throw std::invalid_argument("a tree node with two parents");
    }
    parent_of[static_cast<std::size_t>(l)] = static_cast<long long>(node);
    parent_of[static_cast<std::size_t>(r)] = static_cast<long long>(node);
    if (integer_of<int>(tree.at("split_type")[node]) != 0) {
      throw std::invalid_argument("a categorical split (carb models have none)");
    }
    const long long feature = integer_of<long long>(tree.at("split_indices")[node]);
    if (feature < 0 || feature >= static_cast<long long>(std::max<std::size_t>(features, 1))) {
      throw std::invalid_argument("a split on feature " + std::to_string(feature) + " of " +
                                  std::to_string(features));
    }
  }
  for (std::size_t node = 0; node < nodes; ++node) {
    if (parent_of[node] == -1 ||
        integer_of<long long>(tree.at("parents")[node]) != parent_of[node]) {
      throw std::invalid_argument("a tree's parents do not match its children");
    }
  }
}

// XGBoost 1.7 loads a gbtree's trees in parallel, each into the slot its "id" names: two trees
// with one id are loaded into one slot by two threads at once, a double free (found by
// fuzz/model_fuzz.cpp). So ids are their positions, num_trees is the count, tree_info has one
// group (0: carb's models are single-output regressions) per tree, and forests divide evenly.
void check_gbtree(const nlohmann::json& model) {
  const nlohmann::json& trees = model.at("trees");
  if (!trees.is_array()) throw std::invalid_argument("a gbtree's trees are not an array");
  const nlohmann::json& params = model.at("gbtree_model_param");
  const auto n = static_cast<long long>(trees.size());
  if (count_of(params, "num_trees") != n) {
    throw std::invalid_argument("a gbtree's num_trees is not its number of trees");
  }
  const long long parallel = count_of(params, "num_parallel_tree");
  if (parallel < 1 || n % parallel != 0) {
    throw std::invalid_argument("a gbtree's num_parallel_tree does not divide its trees");
  }
  const nlohmann::json& info = model.at("tree_info");
  if (!info.is_array() || static_cast<long long>(info.size()) != n) {
    throw std::invalid_argument("a gbtree's tree_info does not have one entry per tree");
  }
  for (long long t = 0; t < n; ++t) {
    if (integer_of<long long>(trees[static_cast<std::size_t>(t)].at("id")) != t) {
      throw std::invalid_argument("a gbtree's tree ids are not 0, 1, 2, ... in order");
    }
    if (integer_of<long long>(info[static_cast<std::size_t>(t)]) != 0) {
      throw std::invalid_argument("a tree of an output group other than 0");
    }
  }
}

}  // namespace

xgb::Booster load_booster(const nlohmann::json& model, std::size_t cols) {
  if (static_cast<std::size_t>(
          count_of(model.at("learner").at("learner_model_param"), "num_feature")) != cols) {
    throw std::invalid_argument("an XGBoost model with the wrong number of features");
  }
  std::vector<const nlohmann::json*> stack = {&model};
  while (!stack.empty()) {
    const nlohmann::json* node = stack.back();
    stack.pop_back();
    if (node->is_object() && node->contains("tree_param")) {
      check_tree(*node);
      if (static_cast<std::size_t>(count_of(node->at("tree_param"), "num_feature")) != cols) {
        throw std::invalid_argument("a tree with the wrong number of features");
      }
      continue;
    }
    if (node->is_object() && node->contains("gbtree_model_param")) check_gbtree(*node);
    if (node->is_structured()) {
      for (const auto& child : *node) stack.push_back(&child);
    }
  }
  return xgb::Booster::from_json(model.dump());
}

}  // namespace carb::model_detail
