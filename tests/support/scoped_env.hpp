// Sets (or, given nullptr, unsets) an environment variable for one scope and
// puts the old value back, for tests of what Config::from_env() reads.
#pragma once
#include <stdlib.h>

#include <optional>
#include <string>

namespace attnjit::test {

struct ScopedEnv {
  const char* name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = getenv(n)) old = v;
    if (value) setenv(n, value, 1);
    else unsetenv(n);
  }
  ~ScopedEnv() {
    if (old) setenv(name, old->c_str(), 1);
    else unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace attnjit::test
