// Fuzzes the ONNX importer (carb space show --onnx; import_model reads a file's bytes into this
// same function): any bytes either import or throw carb::Error naming the file; an imported
// architecture reads back from its JSON text (what stores keep) with the same hash, and its
// network builds at its native resolution with features that are counts (not negative).
#include <nlohmann/json.hpp>

#include "carb/error.hpp"
#include "carb/graph.hpp"
#include "fuzz_support.hpp"
#include "network_internal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  carb::Architecture architecture;
  try {
    architecture = carb::import_onnx_bytes(carb_fuzz::text_of(data, size), "fuzz.onnx");
  } catch (const carb::Error& error) {
    const std::string what = error.what();
    carb_fuzz::require(what.rfind("fuzz.onnx: ", 0) == 0 && what.find('\n') == std::string::npos,
                       "an error that is not one line naming the file: " + what);
    return 0;
  }
  const std::string text = carb::architecture_to_json(architecture).dump();
  try {
    const carb::Architecture back =
        carb::architecture_from_json(nlohmann::json::parse(text), "fuzz.json");
    carb_fuzz::require(back.hash == architecture.hash,
                       "hash " + architecture.hash + " reads back as " + back.hash);
  } catch (const carb::Error& error) {
    carb_fuzz::require(false, std::string("its JSON does not read back: ") + error.what());
  }
  try {
    const carb::Features features = carb::compute_features(carb::instantiate_architecture(
        architecture, carb::imported_config(architecture, architecture.native_resolution, 1,
                                            carb::Precision::kFp32)));
    carb_fuzz::require(
        features.params >= 0 && features.macs >= 0 && features.peak_activation_bytes > 0,
        "negative or zero counts");
  } catch (const carb::Error& error) {
    carb_fuzz::require(false, std::string("imported but does not build: ") + error.what());
  }
  return 0;
}
