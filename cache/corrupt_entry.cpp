#include "cache/corrupt_entry.hpp"

#include <cerrno>

#include "log.hpp"

namespace attnjit::cache {

bool discard_corrupt_entry(const std::filesystem::path& path, const std::string& problem,
                           const posix::FileId& read, bool may_remove) {
  if (!may_remove) {
    log::warn("attnjit cache: corrupt entry {}: {}; left in place (cache not writable), treated as a miss",
              path.string(), problem);
    return false;
  }
  posix::FileId now;
  int err = posix::stat_id(path, now);
  if (err == ENOENT || (err == 0 && !(now == read))) {
    log::warn("attnjit cache: corrupt entry {}: {}; already replaced or removed by another writer",
              path.string(), problem);
    return true;
  }
  if (err == 0) err = posix::remove_file(path);
  if (err != 0) {
    log::warn("attnjit cache: corrupt entry {}: {}; could not remove it: {}; treated as a miss", path.string(),
              problem, posix::errno_text(err));
    return false;
  }
  log::warn("attnjit cache: corrupt entry {}: {}; removed, it will be recompiled", path.string(), problem);
  return true;
}

}  // namespace attnjit::cache
