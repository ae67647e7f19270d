// carb space count|list|show|features
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "carb/space.hpp"
#include "output.hpp"
#include "select.hpp"
#include "verbs.hpp"

namespace carb::cli {

namespace {

struct SpaceOptions {
  std::string spec;
  std::uint64_t sample = 0;
  std::uint64_t seed = 0;
  std::string sampling = "random";
  std::string format = "table";
  std::string roofline;
  std::string key;
  bool layers = false;
  OnnxModel onnx;
};

void add_spec_options(CLI::App& command, SpaceOptions& options, bool sampling) {
  command.add_option("--spec", options.spec, "design-space spec (YAML)")->required();
  if (sampling) {
    command.add_option("--sample", options.sample,
                       "take N configurations instead of walking the whole space");
    command.add_option("--seed", options.seed, "seed of the sample (default 0)");
    command
        .add_option("--sampling", options.sampling,
                    "random (uniform) or stratified (every knob's values balanced)")
        ->check(CLI::IsMember({"random", "stratified"}));
  }
  command.add_option("--format", options.format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
}

// Calls `visit(index)` for every selected point that meets the space's constraints: the sample
// when one was asked for, otherwise the whole space in index order (streamed).
template <typename Visit>
void for_each_selected(const Space& space, SpaceFeatures& features, const SpaceOptions& options,
                       Visit visit) {
  if (options.sample == 0) {
    const IndexFilter accept = constraint_filter(space, features);
    for (std::uint64_t index = 0; index < space.size(); ++index) {
      if (!accept || accept(index)) visit(index);
    }
    return;
  }
  const auto indices = sample_points(space, features, options.sample, options.seed,
                                     *parse_sampling(options.sampling));
  if (indices.size() < options.sample) {
    std::cerr << "carb: note: the space has only " << indices.size()
              << " configurations that meet its constraints; taking all of them\n";
  }
  for (std::uint64_t index : indices) visit(index);
}

std::vector<Cell> row_cells(const Config& config, const Features& features,
                            const FeatureColumnOptions& options) {
  std::vector<Cell> cells;
  for_each_feature_column(config, features, options, [&](std::string_view, const auto& value) {
    cells.push_back(cell_of(value()));
  });
  return cells;
}

std::optional<RooflineDevice> roofline_of(const SpaceOptions& options) {
  if (options.roofline.empty()) return std::nullopt;
  return parse_roofline_device(options.roofline);
}

void run_count(const SpaceOptions& options) {
  const Space space = Space::from_file(options.spec);
  SpaceFeatures features(space);
  const std::optional<std::uint64_t> counted = count_points(space, features, kCountWalkLimit);
  const Cell points = counted ? Cell(static_cast<std::int64_t>(*counted))
                              : Cell(std::string("not counted (over 10^9 grid points to check)"));
  std::string constraints;
  for (const auto& constraint : space.constraints()) {
    constraints += (constraints.empty() ? "max_" : ", max_") + constraint.feature + "=" +
                   cell_text(constraint.max_value);
  }
  auto writer = make_row_writer(parse_format(options.format),
                                {"space", "grid_points", "constraints", "points"}, std::cout);
  writer->row({space.name(), static_cast<std::int64_t>(space.size()),
               constraints.empty() ? std::string("none") : constraints, points});
  writer->finish();
}

void run_list(const SpaceOptions& options) {
  const Space space = Space::from_file(options.spec);
  SpaceFeatures features(space);
  const FeatureColumnOptions knobs{.features = false};
  std::vector<std::string> columns = feature_column_names(knobs);
  columns.emplace_back("index");
  auto writer = make_row_writer(parse_format(options.format), columns, std::cout);
  for_each_selected(space, features, options, [&](std::uint64_t index) {
    std::vector<Cell> cells = row_cells(space.at(index), Features{}, knobs);
    cells.emplace_back(static_cast<std::int64_t>(index));
    writer->row(cells);
  });
  writer->finish();
}

void run_features(const SpaceOptions& options) {
  const Space space = Space::from_file(options.spec);
  const auto roofline = roofline_of(options);
  const FeatureColumnOptions columns_of{.roofline = roofline ? &*roofline : nullptr};
  SpaceFeatures features(space);
  std::vector<std::string> columns = feature_column_names(columns_of);
  columns.emplace_back("index");
  auto writer = make_row_writer(parse_format(options.format), columns, std::cout);
  for_each_selected(space, features, options, [&](std::uint64_t index) {
    std::vector<Cell> cells = row_cells(space.at(index), features.at(index), columns_of);
    cells.emplace_back(static_cast<std::int64_t>(index));
    writer->row(cells);
  });
  writer->finish();
}

// The configuration `carb space show` is asked for: a key, or a model file at a resolution,
// batch and precision.
Config shown_config(const SpaceOptions& options) {
  if (options.onnx.path.empty()) {
    if (options.key.empty()) {
      throw Error(ErrorCategory::kUsage, "carb space show: give a key or --onnx FILE", "key");
    }
    return parse_key(options.key);
  }
  if (!options.key.empty()) {
    throw Error(ErrorCategory::kUsage, "carb space show: give a key or --onnx FILE, not both",
                "onnx");
  }
  return onnx_config(options.onnx);
}

void run_show(const SpaceOptions& options) {
  const Config config = shown_config(options);
  const auto roofline = roofline_of(options);
  const Network network = build_network(config);
  const Features features = compute_features(network);
  const Format format = parse_format(options.format);
  if (!options.layers) {
    const FeatureColumnOptions columns_of{.roofline = roofline ? &*roofline : nullptr};
    auto writer = make_row_writer(format, feature_column_names(columns_of), std::cout);
    writer->row(row_cells(config, features, columns_of));
    writer->finish();
    return;
  }
  std::vector<std::string> columns;
  for_each_layer_column(network, network.layers.front(),
                        [&](std::string_view name, const auto&) { columns.emplace_back(name); });
  auto writer = make_row_writer(format, columns, std::cout);
  for (const Layer& layer : network.layers) {
    std::vector<Cell> cells;
    for_each_layer_column(network, layer, [&](std::string_view, const auto& value) {
      cells.push_back(cell_of(value()));
    });
    writer->row(cells);
  }
  writer->finish();
}

}  // namespace

void add_space_verb(CLI::App& app) {
  auto options = std::make_shared<SpaceOptions>();
  CLI::App* space = app.add_subcommand("space",
                                       "count, list, show and compute features of "
                                       "design spaces (no hardware needed)");
  space->callback([space] {
    if (space->get_subcommands().empty()) {
      throw Error(ErrorCategory::kUsage, "carb space: give a verb: count, list, show or features");
    }
  });

  CLI::App* count = space->add_subcommand("count", "number of configurations of a spec");
  add_spec_options(*count, *options, false);
  count->callback([options] { run_count(*options); });

  CLI::App* list = space->add_subcommand("list", "the configurations of a spec (or a sample)");
  add_spec_options(*list, *options, true);
  list->callback([options] { run_list(*options); });

  CLI::App* show = space->add_subcommand("show", "one configuration by key: features or layers");
  show->add_option("key", options->key, "configuration key, e.g. basic18_w1_ds_r224_b1_fp32");
  add_onnx_options(*show, options->onnx, "a key");
  show->add_flag("--layers", options->layers, "print the layer table instead of the features");
  show->add_option("--roofline", options->roofline,
                   "add a roofline time for a device given as TFLOPS:GBPS, e.g. 67:3350");
  show->add_option("--format", options->format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  show->callback([options] { run_show(*options); });

  CLI::App* features = space->add_subcommand(
      "features", "analytic features (MACs, FLOPs, params, bytes, ...) of a spec's points");
  add_spec_options(*features, *options, true);
  features->add_option("--roofline", options->roofline,
                       "add a roofline time for a device given as TFLOPS:GBPS, e.g. 67:3350");
  features->callback([options] { run_features(*options); });
}

}  // namespace carb::cli
