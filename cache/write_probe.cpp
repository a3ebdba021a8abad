#include "cache/write_probe.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "cache/posix_io.hpp"

namespace attnjit::cache {

namespace fs = std::filesystem;

namespace {

std::string failed(const char* step, const fs::path& where, int err) {
  return fmt::format("cannot {} {}: {}", step, where.string(), posix::errno_text(err));
}

// Creates, writes one byte to and removes a scratch file in an existing folder.
std::string try_file(const fs::path& folder) {
  std::string name = (folder / ".attnjit-write-probe.XXXXXX").string();
  const int raw = ::mkstemp(name.data());
  if (raw < 0) return failed("create a file in", folder, errno);
  posix::Fd fd(raw);
  const int werr = posix::write_all(fd.get(), "x");
  const int serr = werr == 0 && ::fsync(fd.get()) != 0 ? errno : 0;
  fd.reset();
  ::unlink(name.c_str());
  if (werr) return failed("write to a file in", folder, werr);
  if (serr) return failed("fsync a file in", folder, serr);
  return {};
}

}  // namespace

WriteProbe probe_writable(const fs::path& dir) {
  WriteProbe p;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    p.exists = true;
    if (!S_ISDIR(st.st_mode)) {
      p.reason = fmt::format("{} exists but is not a folder", dir.string());
      return p;
    }
    p.reason = try_file(dir);
    p.writable = p.reason.empty();
    return p;
  }
  if (errno != ENOENT) {
    p.reason = failed("look at", dir, errno);
    return p;
  }
  // Missing: would creating it work? Try a scratch folder in the nearest existing ancestor.
  fs::path parent = dir.parent_path();
  while (!parent.empty() && ::stat(parent.c_str(), &st) != 0 && errno == ENOENT && parent != parent.parent_path())
    parent = parent.parent_path();
  if (parent.empty()) parent = ".";
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    p.reason = fmt::format("cannot create {}: {} is not a folder", dir.string(), parent.string());
    return p;
  }
  std::string scratch = (parent / ".attnjit-write-probe.XXXXXX").string();
  if (::mkdtemp(scratch.data()) == nullptr) {
    p.reason = fmt::format("cannot create {}: {}", dir.string(), failed("create a folder in", parent, errno));
    return p;
  }
  p.reason = try_file(scratch);
  ::rmdir(scratch.c_str());
  p.writable = p.reason.empty();
  if (!p.writable) p.reason = fmt::format("cannot create {}: {}", dir.string(), p.reason);
  return p;
}

std::string describe(const WriteProbe& p) {
  if (!p.writable) return "no: " + p.reason;
  return p.exists ? "yes" : "not yet created (creating it and storing there works)";
}

}  // namespace attnjit::cache
