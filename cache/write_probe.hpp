// "Can this process store entries in the cache folder?", answered by trying
// what a store does (create a file in the folder, write to it, remove it),
// not by reading permission bits: ACLs, read-only mounts, full disks, quotas,
// a path that is a regular file and `ulimit -f` all show up only when tried.
#pragma once
#include <filesystem>
#include <string>

namespace attnjit::cache {

struct WriteProbe {
  bool writable = false;
  bool exists = false;  // the folder exists (false: only its creation was tried)
  std::string reason;   // why not (empty when writable), naming the path and the errno text
};

// When `dir` is missing, the probe creates and removes a scratch folder in
// its nearest existing ancestor instead of creating `dir`, so commands that
// only look (`cache stats`, `info`) leave nothing behind.
WriteProbe probe_writable(const std::filesystem::path& dir);

// "yes", "not yet created (its parent ... is writable)" or "no: <reason>".
std::string describe(const WriteProbe& p);

}  // namespace attnjit::cache
