// A GPU grid test's tally: each case's o (relative L2) and lse (absolute,
// base 2) errors CHECKed against their tolerances, and the worst of each by
// group for the summary the test WARNs (cases within tolerance, then a row a
// group).
#pragma once
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

namespace attnjit::test {

class GridTally {
 public:
  // CHECKs both errors and counts the case under `group`; true when both are within tolerance.
  bool check(const std::string& group, double o_rel, double o_tol, double lse_abs, double lse_tol) {
    CHECK(o_rel <= o_tol);
    CHECK(lse_abs <= lse_tol);
    const bool ok = o_rel <= o_tol && lse_abs <= lse_tol;
    passed_ += ok;
    ++cases_;
    auto& w = worst_[group];
    w.o_rel = std::max(w.o_rel, o_rel);
    w.lse_abs = std::max(w.lse_abs, lse_abs);
    return ok;
  }

  // "<title>: <passed>/<cases> cases within tolerance<note>" and a row a group, its name `width` wide.
  std::string summary(const std::string& title, int width, const std::string& note = "") const {
    std::string table = fmt::format("{}: {}/{} cases within tolerance{}\n", title, passed_, cases_, note);
    for (const auto& [group, e] : worst_)
      table += fmt::format("  {:<{}} worst rel L2 err(o) {:.2e}  worst abs err(lse, base 2) {:.2e}\n", group, width,
                           e.o_rel, e.lse_abs);
    return table;
  }

 private:
  struct Worst {
    double o_rel = 0, lse_abs = 0;
  };
  std::map<std::string, Worst> worst_;
  size_t passed_ = 0, cases_ = 0;
};

}  // namespace attnjit::test
