// Publishing a file so that readers see either nothing or all of it: write a
// uniquely named temporary beside the final name, fsync it, rename it over
// the final name, fsync the folder. A crash at any point leaves at most a
// temporary (reaped later: at once when its writer is gone, else by age), never a half-written entry.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace attnjit::cache {

struct PublishResult {
  int err = 0;                  // 0 on success, else the errno of the failed step
  std::string step;             // "create folder", "create", "write", "fsync", "rename"
  std::filesystem::path where;  // the path that step worked on
  bool ok() const { return err == 0; }
};

// `temp_prefix` starts the temporary's name (".<key>.tmp."); the host, the pid
// and a random suffix follow (temp_files.hpp), so concurrent writers, even
// across hosts, never share one, and a dead writer's file can be recognized.
PublishResult publish_atomically(const std::filesystem::path& final_path, std::string_view bytes,
                                 const std::string& temp_prefix);

}  // namespace attnjit::cache
