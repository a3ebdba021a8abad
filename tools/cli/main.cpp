// attnjit: the command-line tool for operators: prewarm a kernel cache before
// a deployment, inspect and maintain it, explain what a problem compiles to,
// describe the machine, benchmark.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <csignal>
#include <cstdio>

#include "attnjit/error.hpp"
#include "attnjit/version.h"
#include "commands.hpp"
#include "exit_codes.hpp"

namespace {
std::string version_text() {
  return fmt::format("attnjit {}.{}.{}", ATTNJIT_VERSION_MAJOR, ATTNJIT_VERSION_MINOR, ATTNJIT_VERSION_PATCH);
}
}  // namespace

int main(int argc, char** argv) {
  // Past `ulimit -f` a write raises SIGXFSZ, whose default action kills the
  // process with no message (and leaves the temporary it was writing). Ignored,
  // the write fails with EFBIG instead, which the cache handles like a full
  // disk: the kernel is reported as not stored. Only the CLI does this: the
  // library never installs process-wide signal handlers.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"attnjit: JIT-compiled attention kernels: prewarm and inspect the kernel cache", "attnjit"};
  app.footer(attnjit::cli::kExitCodesHelp);
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  attnjit::cli::register_prewarm(app);
  attnjit::cli::register_cache(app);
  attnjit::cli::register_explain(app);
  attnjit::cli::register_info(app);
  attnjit::cli::register_bench(app);
  using namespace attnjit::cli;
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a subcommand that printed why its work failed
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fflush(stdout);
    fmt::print(stderr, "attnjit: error: {}\nRun 'attnjit --help' (or 'attnjit <command> --help') for usage.\n",
               e.what());
    return kExitUsage;
  } catch (const attnjit::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "attnjit: error: {}\n", e.what());
    return exit_code_for(e.status());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "attnjit: error: internal: {}\n", e.what());
    return kExitFailure;
  }
  return kExitOk;
}
