// Runs the attnjit CLI binary as a separate process with a chosen environment
// and captures its exit status and output, for tests of what a user sees.
#pragma once
#include <catch2/catch.hpp>
#include <stdio.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>

namespace attnjit::test {

struct CliResult {
  int status = -1;     // exit status; 128+N when killed by signal N
  std::string output;  // stdout and stderr together
  bool has(const std::string& s) const { return output.find(s) != std::string::npos; }
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline const std::string& cli_binary() {
  static const std::string path = ATTNJIT_TEST_BINARY_DIR "/attnjit";
  return path;
}

// `env` and `prefix` go before the binary ("VAR=x ...", or e.g. "ulimit -f 1;").
// The cache folder is `cache_dir` in mode readwrite unless `env` says otherwise.
inline CliResult run_cli(const std::string& args, const std::filesystem::path& cache_dir, const std::string& env = "",
                         const std::string& prefix = "") {
  if (!std::filesystem::exists(cli_binary())) FAIL("the attnjit binary is missing at " << cli_binary());
  const std::string cmd = prefix + " ATTNJIT_CACHE_DIR=" + shell_quote(cache_dir.string()) +
                          " ATTNJIT_CACHE_MODE=readwrite ATTNJIT_LOG_LEVEL=warn " + env + " " +
                          shell_quote(cli_binary()) + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = ::popen(("sh -c " + shell_quote(cmd) + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  // sh reports a child killed by signal N as exit status 128+N.
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace attnjit::test
