// carb's entry point: the only place that catches errors and turns them into exit codes.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "carb/error.hpp"
#include "carb/version.hpp"
#include "errors.hpp"
#include "verbs.hpp"

int main(int argc, char** argv) {
  // Past a file size limit (ulimit -f, a batch system's RLIMIT_FSIZE) the kernel would kill carb
  // with SIGXFSZ in the middle of a database write; ignored, the write fails with EFBIG, the
  // transaction rolls back and carb says why.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "carb: predict and screen the inference cost (energy, latency, peak memory) of "
      "CNN design spaces, and measure it on real hardware"};
  app.set_version_flag("--version",
                       std::string("carb ") + carb::kVersion + " (" + carb::kGitCommit + ")");
  app.callback([&app] {
    if (app.get_subcommands().empty()) {
      throw carb::Error(carb::ErrorCategory::kUsage,
                        "give a verb, e.g. 'carb space count --spec F'");
    }
  });
  carb::cli::add_space_verb(app);
  carb::cli::add_profile_verbs(app);
  carb::cli::add_merge_verb(app);
  carb::cli::add_model_verbs(app);
  carb::cli::add_screen_verbs(app);
  carb::cli::add_report_verbs(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::Error& error) {
    std::cerr << "carb: error: " << error.what() << " (run with --help for usage)\n";
    return 2;
  } catch (const carb::Error& error) {
    std::cerr << "carb: error: " << carb::cli::error_message(error) << "\n";
    return error.exit_code();
  } catch (const std::exception& error) {
    std::cerr << "carb: internal error: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
