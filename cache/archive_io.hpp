// Owning handles for libarchive's reader and writer, and its error text.
// Internal to the cache/archive*.cpp files.
#pragma once
#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <string>

namespace attnjit::cache::archive::io {

struct ReadFree { void operator()(struct archive* a) const { archive_read_free(a); } };
struct WriteFree { void operator()(struct archive* a) const { archive_write_free(a); } };
struct EntryFree { void operator()(struct archive_entry* e) const { archive_entry_free(e); } };
using Reader = std::unique_ptr<struct archive, ReadFree>;
using Writer = std::unique_ptr<struct archive, WriteFree>;
using EntryPtr = std::unique_ptr<struct archive_entry, EntryFree>;

inline std::string error_text(struct archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown libarchive error";
}

}  // namespace attnjit::cache::archive::io
