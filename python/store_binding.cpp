// Databases: measurements as typed columns (NULL kept NULL); this machine's devices.
#include <limits>
#include <optional>

#include "binding.hpp"
#include "carb/backend.hpp"
#include "carb/measure.hpp"
#include "carb/store.hpp"

namespace carb::python {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// One column of an export, gathered as it streams: numbers with a NULL mask, or text.
struct ColumnValues {
  ExportColumn column;
  std::vector<std::int64_t> integers;
  std::vector<double> reals;
  std::vector<std::optional<std::string>> texts;
  std::vector<bool> null;
  bool any_null = false;

  void add(const ExportValue& value) {
    const bool is_null = std::holds_alternative<std::monostate>(value);
    null.push_back(is_null);
    any_null = any_null || is_null;
    switch (column.kind) {
      case ExportKind::kInteger:
      case ExportKind::kBoolean:
        integers.push_back(is_null ? 0 : std::get<std::int64_t>(value));
        break;
      case ExportKind::kReal:
        reals.push_back(is_null ? kNan : std::get<double>(value));
        break;
      case ExportKind::kText:
      case ExportKind::kJson:
        texts.push_back(is_null ? std::nullopt : std::optional(std::get<std::string>(value)));
        break;
    }
  }

  // NULL is NaN in a numeric column (integers become reals only where a NULL needs NaN) and
  // None in a text or boolean one; never 0.
  py::object to_python() const {
    const std::size_t n = null.size();
    switch (column.kind) {
      case ExportKind::kInteger: {
        if (!any_null)
          return py::array_t<std::int64_t>(static_cast<py::ssize_t>(n), integers.data());
        auto out = new_array<double>(n);
        for (std::size_t i = 0; i < n; ++i) {
          out.mutable_data()[i] = null[i] ? kNan : static_cast<double>(integers[i]);
        }
        return out;
      }
      case ExportKind::kReal:
        return py::array_t<double>(static_cast<py::ssize_t>(n), reals.data());
      case ExportKind::kBoolean: {
        if (!any_null) {
          auto out = new_array<bool>(n);
          for (std::size_t i = 0; i < n; ++i) out.mutable_data()[i] = integers[i] != 0;
          return out;
        }
        py::list out(n);
        for (std::size_t i = 0; i < n; ++i) {
          out[i] = null[i] ? py::none() : py::object(py::bool_(integers[i] != 0));
        }
        return out;
      }
      case ExportKind::kText:
      case ExportKind::kJson:
        return py::cast(texts);
    }
    return py::none();
  }
};

std::string kind_name(ExportKind kind) {
  switch (kind) {
    case ExportKind::kInteger:
      return "integer";
    case ExportKind::kReal:
      return "real";
    case ExportKind::kBoolean:
      return "boolean";
    case ExportKind::kJson:
      return "json";
    case ExportKind::kText:
      break;
  }
  return "text";
}

}  // namespace

void bind_store(py::module_& m) {
  m.def(
      "measurements",
      [](const std::string& db, bool ok_only) {
        std::vector<ColumnValues> columns;
        without_gil([&] {
          const Store store = Store::open(db);
          return store.export_rows(
              ok_only,
              [&](const std::vector<ExportColumn>& header) {
                for (const ExportColumn& column : header) {
                  columns.emplace_back().column = column;
                }
              },
              [&](const std::vector<ExportValue>& values) {
                for (std::size_t c = 0; c < values.size(); ++c) columns[c].add(values[c]);
              });
        });
        py::list names, kinds, data;
        for (const ColumnValues& column : columns) {
          names.append(column.column.name);
          kinds.append(kind_name(column.column.kind));
          data.append(column.to_python());
        }
        return py::make_tuple(names, kinds, data);
      },
      py::arg("db"), py::arg("ok_only") = false);

  m.def("devices", [] {
    py::list rows;
    for (const auto& backend : make_backends()) {
      for (const auto& device : backend->devices()) {
        const DeviceInfo& info = device->info();
        py::dict precisions;
        for (const PrecisionSupport& support : info.precisions) {
          precisions[py::str(std::string(to_string(support.precision)))] =
              support.supported ? py::object(py::none()) : py::object(py::str(support.reason));
        }
        const auto meter = open_energy_meter(info);
        rows.append(py::dict(
            py::arg("id") = info.id, py::arg("kind") = info.kind, py::arg("name") = info.name,
            py::arg("library") = info.library, py::arg("isa") = info.isa,
            py::arg("threads") = info.threads, py::arg("unsupported") = precisions,
            py::arg("energy") = meter->available() ? py::object(py::str(meter->name() + " (" +
                                                                        meter->sensor() + ")"))
                                                   : py::object(py::none()),
            py::arg("energy_unavailable") = meter->available()
                                                ? py::object(py::none())
                                                : py::object(py::str(meter->unavailable_reason())),
            py::arg("backend_unavailable") = py::none()));
      }
      if (backend->devices().empty()) {
        rows.append(py::dict(py::arg("id") = py::none(),
                             py::arg("kind") = std::string(backend->name()),
                             py::arg("backend_unavailable") = backend->unavailable_reason()));
      }
    }
    return rows;
  });
}

}  // namespace carb::python
