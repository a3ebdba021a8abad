// What happens to an entry that fails verification: a warning naming the file
// and the problem, and (where the cache may be written) its removal, so the
// caller's miss recompiles and republishes it.
#pragma once
#include <filesystem>
#include <string>

#include "cache/posix_io.hpp"

namespace attnjit::cache {

// `read` is the inode that was read and found bad. The file is removed only
// if its name still refers to that inode: a concurrent writer may already
// have renamed a good entry over it. Returns true when the bad file is gone.
bool discard_corrupt_entry(const std::filesystem::path& path, const std::string& problem,
                           const posix::FileId& read, bool may_remove);

}  // namespace attnjit::cache
