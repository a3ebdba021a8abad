// attnjit: the command-line tool for operators: prewarm a kernel cache before
// a deployment, inspect and maintain it, explain what a problem compiles to,
// describe the machine, benchmark.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "attnjit/error.hpp"
#include "attnjit/version.h"
#include "commands.hpp"

namespace {
std::string version_text() {
  return fmt::format("attnjit {}.{}.{}", ATTNJIT_VERSION_MAJOR, ATTNJIT_VERSION_MINOR, ATTNJIT_VERSION_PATCH);
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attnjit: JIT-compiled attention kernels: prewarm and inspect the kernel cache", "attnjit"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  attnjit::cli::register_prewarm(app);
  attnjit::cli::register_cache(app);
  attnjit::cli::register_explain(app);
  attnjit::cli::register_info(app);
  attnjit::cli::register_bench(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // usage errors, --help, --version, and a subcommand's CLI::RuntimeError(code)
  } catch (const attnjit::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "attnjit: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "attnjit: error: internal: {}\n", e.what());
    return 2;
  }
  return 0;
}
