#include "cache/atomic_publish.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

#include "cache/posix_io.hpp"
#include "cache/temp_files.hpp"
#include "log.hpp"

namespace attnjit::cache {

namespace fs = std::filesystem;

namespace {

std::string random_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

}  // namespace

PublishResult publish_atomically(const fs::path& final_path, std::string_view bytes, const std::string& temp_prefix) {
  const fs::path folder = final_path.parent_path();
  if (int err = posix::make_dirs(folder)) return {err, "create folder", folder};

  fs::path temp;
  posix::Fd fd;
  for (int attempt = 0; !fd.valid(); ++attempt) {
    temp = folder / (temp_prefix + temp_files::writer_tag() + random_suffix());
    const int raw = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // the umask decides
    const int err = raw < 0 ? errno : 0;
    fd = posix::Fd(raw);
    if (raw < 0 && (err != EEXIST || attempt > 8)) return {err, "create", temp};
  }

  auto fail = [&](int err, const char* step) {
    fd.reset();
    posix::remove_file(temp);
    return PublishResult{err, step, temp};
  };
  if (int err = posix::write_all(fd.get(), bytes)) return fail(err, "write");
  if (::fsync(fd.get()) != 0) return fail(errno, "fsync");
  fd.reset();
  if (::rename(temp.c_str(), final_path.c_str()) != 0) return fail(errno, "rename");

  // The entry is complete and visible; a failed folder fsync only weakens
  // crash durability (the entry may vanish on power loss: a later miss), so
  // it is not a failure of the publish.
  if (int err = posix::fsync_dir(folder); err != 0 && err != EINVAL)
    log::warn("attnjit cache: fsync of folder {} failed: {}; the new entry may not survive a crash",
              folder.string(), posix::errno_text(err));
  return {};
}

}  // namespace attnjit::cache
