// The attnjit CLI's subcommands. Each lives in its own file and adds itself to
// the root app through one function declared here; main.cpp calls them all.
// A new subcommand is a new tools/cli/<name>.cpp defining
// attnjit::cli::register_<name>()
// plus one line here and one in main.cpp.
//
// Conventions every subcommand follows (main.cpp relies on them):
//  * the subcommand's callback does the work; a failed outcome that is not an
//    error of the caller's making (a kernel failed to compile, a corrupt cache
//    entry) ends with `throw CLI::RuntimeError(1)` after printing why;
//  * errors throw attnjit::Error, which main prints as "attnjit: error:
//    <message>" and turns into an exit status by its Status (exit_codes.hpp:
//    2 for bad input, 1 for failed work);
//  * CLI11's usage errors print the same way and exit 2.
#pragma once

namespace CLI { class App; }

namespace attnjit::cli {

void register_prewarm(CLI::App& app);   // prewarm.cpp
void register_cache(CLI::App& app);     // cache_cmd.cpp
void register_explain(CLI::App& app);   // explain.cpp
void register_info(CLI::App& app);      // info.cpp
void register_bench(CLI::App& app);     // bench.cpp

}  // namespace attnjit::cli
