// A model's training domain (docs/model.md, "Training domain"): each feature's range over the
// rows it was fitted on, and those rows in a standardized space of summary features, searched
// with a k-d tree (nanoflann) for a candidate's nearest training row.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nanoflann.hpp>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>

#include "carb/error.hpp"
#include "carb/model.hpp"

namespace carb {

namespace {

using json = nlohmann::json;

/// The summary features the joint judgement measures distance in, where the schema has them:
/// the knobs and the network's size. The per-layer-class features are left out: they are
/// functions of these, and so many that they would outweigh them.
constexpr std::array<std::string_view, 12> kArchitectureDomainFeatures = {
    "bottleneck",      "depth",      "width_multiplier",    "early_downsample",
    "resolution",      "log_batch",  "precision_bytes",     "bf16",
    "widest_channels", "log_params", "log_flops_per_image", "log_peak_activation_bytes",
};

/// The quantile of the training rows' nearest-neighbour distances that is the threshold.
constexpr double kDistanceQuantile = 0.99;

}  // namespace

double DomainJudgement::widening() const {
  return std::max({1.0, distance_ratio, 1.0 + box_excess});
}

struct TrainingDomain::Impl {
  std::vector<FeatureRange> ranges;
  // The joint space: schema indices of its features, their centre and scale, the training rows'
  // standardized coordinates (row-major) and ids.
  std::vector<std::size_t> columns;
  std::vector<std::string> names;
  std::vector<float> center, scale;
  std::vector<float> points;
  std::vector<std::string> ids;
  double threshold = 0;
  std::vector<std::string> families;  // sorted; empty: unknown

  // nanoflann's dataset adaptor over `points`.
  std::size_t kdtree_get_point_count() const { return ids.size(); }
  float kdtree_get_pt(std::size_t row, std::size_t dim) const {
    return points[row * columns.size() + dim];
  }
  template <class Box>
  bool kdtree_get_bbox(Box&) const {
    return false;
  }
  using Tree = nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<float, Impl>, Impl,
                                                   -1, std::uint32_t>;
  std::unique_ptr<Tree> tree;

  void build() {
    if (ids.empty()) return;
    tree = std::make_unique<Tree>(static_cast<int>(columns.size()), *this,
                                  nanoflann::KDTreeSingleIndexAdaptorParams(10));
    tree->buildIndex();
  }

  // The standardized coordinates of a schema row.
  std::vector<float> coordinates(const float* row) const {
    std::vector<float> out(columns.size());
    for (std::size_t d = 0; d < columns.size(); ++d) {
      out[d] = (row[columns[d]] - center[d]) / scale[d];
    }
    return out;
  }

  // The nearest `k` training rows of a point: (index, distance), nearest first.
  std::vector<std::pair<std::size_t, double>> nearest(const float* point, std::size_t k) const {
    k = std::min(k, ids.size());
    std::vector<std::uint32_t> index(k);
    std::vector<float> squared(k);
    const std::size_t found = tree->knnSearch(point, k, index.data(), squared.data());
    std::vector<std::pair<std::size_t, double>> out;
    for (std::size_t i = 0; i < found; ++i) {
      out.emplace_back(index[i], std::sqrt(static_cast<double>(squared[i])));
    }
    return out;
  }
};

TrainingDomain::TrainingDomain() : impl_(std::make_shared<Impl>()) {}

TrainingDomain TrainingDomain::of(const Dataset& data) {
  auto impl = std::make_shared<Impl>();
  if (data.rows() == 0) {
    TrainingDomain domain;
    domain.impl_ = impl;
    return domain;
  }
  impl->families = data.family;
  std::sort(impl->families.begin(), impl->families.end());
  impl->families.erase(std::unique(impl->families.begin(), impl->families.end()),
                       impl->families.end());
  impl->ranges.assign(data.cols(), {std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity()});
  for (std::size_t i = 0; i < data.rows(); ++i) {
    for (std::size_t f = 0; f < data.cols(); ++f) {
      impl->ranges[f].min = std::min(impl->ranges[f].min, data.row(i)[f]);
      impl->ranges[f].max = std::max(impl->ranges[f].max, data.row(i)[f]);
    }
  }
  // The joint space: the summary features for carb's schema, every feature for a table.
  for (std::size_t f = 0; f < data.cols(); ++f) {
    const std::string& name = data.feature_names[f];
    const bool summary =
        std::find(kArchitectureDomainFeatures.begin(), kArchitectureDomainFeatures.end(), name) !=
        kArchitectureDomainFeatures.end();
    if (data.schema != kArchitectureSchema || summary) {
      impl->columns.push_back(f);
      impl->names.push_back(name);
    }
  }
  const double n = static_cast<double>(data.rows());
  for (std::size_t column : impl->columns) {
    double sum = 0, squares = 0;
    for (std::size_t i = 0; i < data.rows(); ++i) sum += data.row(i)[column];
    const double mean = sum / n;
    for (std::size_t i = 0; i < data.rows(); ++i) {
      squares += (data.row(i)[column] - mean) * (data.row(i)[column] - mean);
    }
    const double sd = std::sqrt(squares / n);
    impl->center.push_back(static_cast<float>(mean));
    // A feature without spread: any other value is outside the box already; unit scale.
    impl->scale.push_back(sd > 0 ? static_cast<float>(sd) : 1.0F);
  }
  for (std::size_t i = 0; i < data.rows(); ++i) {
    const std::vector<float> point = impl->coordinates(data.row(i));
    impl->points.insert(impl->points.end(), point.begin(), point.end());
    impl->ids.push_back(data.ids[i]);
  }
  impl->build();
  // The threshold: the kDistanceQuantile quantile of each training row's distance to its
  // nearest other training row (leave one out), ranked as a conformal quantile. A new
  // configuration drawn like the training rows is as far from its nearest one as they are, so
  // about 1% of such configurations fall beyond it.
  std::vector<double> distances;
  const std::size_t d = impl->columns.size();
  for (std::size_t i = 0; i < data.rows(); ++i) {
    const auto nearest = impl->nearest(impl->points.data() + i * d, 2);
    double other = 0;
    for (const auto& [index, distance] : nearest) {
      if (index != i) {
        other = distance;
        break;
      }
    }
    distances.push_back(other);
  }
  std::sort(distances.begin(), distances.end());
  const auto rank = static_cast<std::size_t>(std::ceil((n + 1) * kDistanceQuantile));
  impl->threshold = distances[std::min(rank, distances.size()) - 1];
  TrainingDomain domain;
  domain.impl_ = std::move(impl);
  return domain;
}

TrainingDomain TrainingDomain::extended(const Dataset& more) const {
  if (empty() || more.rows() == 0) return *this;
  auto impl = std::make_shared<Impl>();
  impl->ranges = impl_->ranges;
  impl->columns = impl_->columns;
  impl->names = impl_->names;
  impl->center = impl_->center;
  impl->scale = impl_->scale;
  impl->points = impl_->points;
  impl->ids = impl_->ids;
  impl->threshold = impl_->threshold;
  impl->families = impl_->families;
  for (std::size_t i = 0; i < more.rows(); ++i) {
    for (std::size_t f = 0; f < impl->ranges.size(); ++f) {
      impl->ranges[f].min = std::min(impl->ranges[f].min, more.row(i)[f]);
      impl->ranges[f].max = std::max(impl->ranges[f].max, more.row(i)[f]);
    }
    if (joint()) {
      const std::vector<float> point = impl->coordinates(more.row(i));
      impl->points.insert(impl->points.end(), point.begin(), point.end());
      impl->ids.push_back(more.ids[i]);
    }
  }
  if (!impl->families.empty()) {
    impl->families.insert(impl->families.end(), more.family.begin(), more.family.end());
    std::sort(impl->families.begin(), impl->families.end());
    impl->families.erase(std::unique(impl->families.begin(), impl->families.end()),
                         impl->families.end());
  }
  impl->build();
  TrainingDomain domain;
  domain.impl_ = std::move(impl);
  return domain;
}

bool TrainingDomain::empty() const { return impl_->ranges.empty(); }
bool TrainingDomain::joint() const { return !impl_->ids.empty(); }
const std::vector<FeatureRange>& TrainingDomain::ranges() const { return impl_->ranges; }
const std::vector<std::string>& TrainingDomain::features() const { return impl_->names; }
double TrainingDomain::threshold() const { return impl_->threshold; }
std::size_t TrainingDomain::rows() const { return impl_->ids.size(); }
const std::string& TrainingDomain::id(std::size_t row) const { return impl_->ids.at(row); }
const std::vector<std::string>& TrainingDomain::families() const { return impl_->families; }

bool TrainingDomain::new_family(const std::string& family) const {
  const std::vector<std::string>& known = impl_->families;
  return !known.empty() && !std::binary_search(known.begin(), known.end(), family);
}

DomainJudgement TrainingDomain::judge(const float* row, const std::string& family) const {
  DomainJudgement judgement = judge(row);
  if (new_family(family)) {
    judgement.new_family = true;
    judgement.inside = false;
  }
  return judgement;
}

DomainJudgement TrainingDomain::judge(const float* row) const {
  DomainJudgement judgement;
  const Impl& self = *impl_;
  for (std::size_t f = 0; f < self.ranges.size(); ++f) {
    const FeatureRange& range = self.ranges[f];
    const float value = row[f];
    if (value >= range.min && value <= range.max) continue;
    const double width = static_cast<double>(range.max) - range.min;
    const double beyond = std::isnan(value)   ? std::numeric_limits<double>::infinity()
                          : value < range.min ? static_cast<double>(range.min) - value
                                              : static_cast<double>(value) - range.max;
    // In ranges; a feature without spread counts one range per unit of its own scale.
    const double excess = beyond / (width > 0 ? width : std::max(1.0, std::abs(double{range.max})));
    if (judgement.outside_feature == kNoFeature) judgement.outside_feature = f;
    judgement.box_excess = std::max(judgement.box_excess, excess);
  }
  if (joint()) {
    // The nearest training row, without allocating: judge() runs for every candidate of a space.
    thread_local std::vector<float> point;
    point.resize(self.columns.size());
    for (std::size_t d = 0; d < self.columns.size(); ++d) {
      point[d] = (row[self.columns[d]] - self.center[d]) / self.scale[d];
    }
    std::uint32_t index = 0;
    float squared = 0;
    nanoflann::KNNResultSet<float, std::uint32_t> result(1);
    result.init(&index, &squared);
    self.tree->findNeighbors(result, point.data(), nanoflann::SearchParams());
    judgement.nearest = index;
    const double distance = std::sqrt(static_cast<double>(squared));
    judgement.distance_ratio = self.threshold > 0 ? distance / self.threshold
                               : distance > 0     ? std::numeric_limits<double>::infinity()
                                                  : 0;
  }
  judgement.inside = judgement.outside_feature == kNoFeature && judgement.distance_ratio <= 1;
  return judgement;
}

json TrainingDomain::to_json() const {
  const Impl& self = *impl_;
  json low = json::array(), high = json::array();
  for (const FeatureRange& range : self.ranges) {
    low.push_back(range.min);
    high.push_back(range.max);
  }
  json out = {{"min", low}, {"max", high}};
  if (!self.families.empty()) out["families"] = self.families;
  if (joint()) {
    out["joint"] = {{"features", self.names},      {"center", self.center},
                    {"scale", self.scale},         {"quantile", kDistanceQuantile},
                    {"threshold", self.threshold}, {"ids", self.ids},
                    {"points", self.points}};
  }
  return out;
}

TrainingDomain TrainingDomain::from_json(const json& j,
                                         const std::vector<std::string>& feature_names,
                                         const std::string& origin) {
  auto impl = std::make_shared<Impl>();
  const auto bad = [&](const std::string& what) {
    return Error(ErrorCategory::kInput, origin + ": its training domain " + what);
  };
  const auto low = j.at("min").get<std::vector<float>>();
  const auto high = j.at("max").get<std::vector<float>>();
  if (high.size() != low.size() || (!low.empty() && low.size() != feature_names.size())) {
    throw bad("does not match its features");
  }
  for (std::size_t f = 0; f < low.size(); ++f) impl->ranges.push_back({low[f], high[f]});
  if (const auto families = j.find("families"); families != j.end()) {
    impl->families = families->get<std::vector<std::string>>();
    if (!std::is_sorted(impl->families.begin(), impl->families.end()) ||
        std::any_of(impl->families.begin(), impl->families.end(),
                    [](const std::string& family) { return family.empty(); })) {
      throw bad("lists its network families out of order, or an empty one");
    }
  }
  if (const auto joint = j.find("joint"); joint != j.end()) {
    impl->names = joint->at("features").get<std::vector<std::string>>();
    for (const std::string& name : impl->names) {
      const std::optional<std::size_t> column = feature_column(feature_names, name);
      if (!column) throw bad("names a feature it does not have: " + name);
      impl->columns.push_back(*column);
    }
    impl->center = joint->at("center").get<std::vector<float>>();
    impl->scale = joint->at("scale").get<std::vector<float>>();
    impl->threshold = joint->at("threshold").get<double>();
    impl->ids = joint->at("ids").get<std::vector<std::string>>();
    impl->points = joint->at("points").get<std::vector<float>>();
    const std::size_t d = impl->columns.size();
    if (d == 0 || impl->center.size() != d || impl->scale.size() != d ||
        impl->points.size() != d * impl->ids.size() || impl->ids.empty()) {
      throw bad("holds training rows that do not match its features");
    }
    const auto finite = [](float v) { return std::isfinite(v); };
    if (!std::all_of(impl->center.begin(), impl->center.end(), finite) ||
        !std::all_of(impl->points.begin(), impl->points.end(), finite) ||
        !std::all_of(impl->scale.begin(), impl->scale.end(), [](float v) { return v > 0; }) ||
        !(impl->threshold >= 0) || !std::isfinite(impl->threshold)) {
      throw bad("holds a value that is not finite (or a scale that is not positive)");
    }
    impl->build();
  }
  TrainingDomain domain;
  domain.impl_ = std::move(impl);
  return domain;
}

std::string domain_text(const TrainingDomain& domain, const DomainJudgement& judgement,
                        const float* row, const std::vector<std::string>& feature_names,
                        const std::string& family) {
  if (judgement.inside) return "";
  const auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", value);
    return std::string(text);
  };
  if (judgement.new_family) {
    std::string known;
    for (const std::string& seen : domain.families()) {
      known += (known.empty() ? "" : ", ") + seen;
    }
    return (family.empty() ? std::string("of a family") : "whose family " + family) +
           " the model never saw (it saw " + known + ")";
  }
  if (judgement.outside_feature != kNoFeature) {
    const std::size_t f = judgement.outside_feature;
    const FeatureRange& range = domain.ranges()[f];
    return "whose " + feature_names.at(f) + " is " + number(row[f]) + ", fitted on " +
           number(range.min) + " to " + number(range.max);
  }
  return number(judgement.distance_ratio) + "x farther from the nearest fitted configuration (" +
         domain.id(judgement.nearest) + ") than 99% of those are from theirs";
}

}  // namespace carb
