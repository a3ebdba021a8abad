// Runs the attnjit CLI binary as a separate process with a chosen environment
// and captures its exit status and output, for tests of what a user sees.
#pragma once
#include <catch2/catch.hpp>
#include <stdio.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

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

// A command and what its user must see: the exit status and texts the output
// holds (`shows`) and must not hold (`hides`); `env` for this command only.
struct CliExpect {
  std::string args;
  int status = 0;
  std::vector<std::string> shows, hides = {};
  std::string env = "";
};

// Each of `args` with the same expectation.
inline std::vector<CliExpect> each_expecting(const std::vector<std::string>& args, int status,
                                             const std::vector<std::string>& shows,
                                             const std::vector<std::string>& hides = {}) {
  std::vector<CliExpect> out;
  for (const auto& a : args) out.push_back({a, status, shows, hides});
  return out;
}

// Runs each command in turn (run_cli with `cache_dir`, `env` and `prefix`) and
// CHECKs its status and texts, its output in the report; returns the results.
inline std::vector<CliResult> expect_cli(const std::filesystem::path& cache_dir, const std::vector<CliExpect>& commands,
                                         const std::string& env = "", const std::string& prefix = "") {
  std::vector<CliResult> results;
  for (const CliExpect& c : commands) {
    const CliResult r = run_cli(c.args, cache_dir, env + " " + c.env, prefix);
    INFO(c.env << " attnjit " << c.args << "\n" << r.output);
    CHECK(r.status == c.status);
    for (const auto& s : c.shows) {
      INFO("shows: " << s);
      CHECK(r.has(s));
    }
    for (const auto& s : c.hides) {
      INFO("hides: " << s);
      CHECK_FALSE(r.has(s));
    }
    results.push_back(r);
  }
  return results;
}

}  // namespace attnjit::test
