// Each verb registers its subcommand on the root CLI11 app; its callback does the work.
#pragma once

#include <CLI/CLI.hpp>

namespace carb::cli {

void add_space_verb(CLI::App& app);
void add_profile_verbs(CLI::App& app);
void add_merge_verb(CLI::App& app);
void add_model_verbs(CLI::App& app);
void add_screen_verbs(CLI::App& app);
void add_report_verbs(CLI::App& app);

}  // namespace carb::cli
