// The compiled part of `import carb`: errors as Python exceptions, and the parts' names.
#include "binding.hpp"

#include <limits>

#include "carb/error.hpp"
#include "carb/version.hpp"

namespace carb::python {

std::vector<Config> configs_of_keys(const std::vector<std::string>& keys) {
  std::vector<Config> configs;
  configs.reserve(keys.size());
  for (const std::string& key : keys) configs.push_back(parse_key(key));
  return configs;
}

void add_interval_columns(py::dict& columns, const TargetInfo& target,
                          const std::vector<TargetPrediction>& predictions,
                          const std::vector<std::size_t>* rows) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  const std::size_t n = rows != nullptr ? rows->size() : predictions.size();
  auto value = new_array<double>(n);
  auto low = new_array<double>(n);
  auto high = new_array<double>(n);
  double* v = value.mutable_data();
  double* l = low.mutable_data();
  double* h = high.mutable_data();
  for (std::size_t r = 0; r < n; ++r) {
    const TargetPrediction& p = predictions[rows != nullptr ? (*rows)[r] : r];
    v[r] = p.available ? p.value : kNan;
    l[r] = p.available ? p.low : kNan;
    h[r] = p.available ? p.high : kNan;
  }
  const std::string name = target.column();
  columns[py::str(name)] = value;
  columns[py::str(name + "_low")] = low;
  columns[py::str(name + "_high")] = high;
}

void bind_errors(py::module_& m) {
  // carb::Error's categories: usage and input are the caller's to fix (ValueError), runtime is
  // the environment's (RuntimeError). The message is the library's one line, as the command
  // line prints it after "carb: error: " (where the command line names a flag, the library
  // names the parameter: the exception's `subject`).
  static py::exception<Error> input_error(m, "InputError", PyExc_ValueError);
  static py::exception<Error> runtime_error(m, "CarbRuntimeError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const Error& error) {
      const py::exception<Error>& type =
          error.category() == ErrorCategory::kRuntime ? runtime_error : input_error;
      py::object exception = py::reinterpret_borrow<py::object>(type)(error.what());
      exception.attr("subject") = error.subject();
      exception.attr("exit_code") = error.exit_code();
      PyErr_SetObject(type.ptr(), exception.ptr());
    }
  });
}

}  // namespace carb::python

PYBIND11_MODULE(_carb, m) {
  namespace python = carb::python;
  m.doc() = "carb's libraries, bound for the carb package (import carb, not carb._carb)";
  m.attr("__version__") = carb::kVersion;
  m.attr("git_commit") = carb::kGitCommit;
  python::bind_errors(m);
  python::bind_space(m);
  python::bind_model(m);
  python::bind_screen(m);
  python::bind_store(m);
  python::bind_campaign(m);
  python::bind_report(m);
}
