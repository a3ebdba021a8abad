// A private temporary folder that is removed when the scope ends, however it
// ends (an exception from a compile or a probe included), so commands that
// need scratch space never leave /tmp/attnjit-* folders behind.
#pragma once
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "attnjit/error.hpp"

namespace attnjit::cli {

class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw Error(Status::CacheError,
                  fmt::format("cannot create a temporary folder {}: {}", tmpl, std::strerror(errno)));
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace attnjit::cli
