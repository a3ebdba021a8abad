// Shippable caches: pack -> unpack round trips (tar, zstd, gzip), a tampered
// archive refused entry by entry, members that would escape the cache folder,
// the manifest's version comparison, and the unpacked cache serving mode
// `require` without writing.
#include <archive.h>
#include <archive_entry.h>

#include "cache/archive.hpp"
#include "cache/entry_format.hpp"
#include "support/error_capture.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

namespace ar = cache::archive;

// Hand-made archives for the attacks pack() would never write.
class TarWriter {
 public:
  explicit TarWriter(const fs::path& path) : a_(archive_write_new()) {
    archive_write_set_format_pax_restricted(a_);
    REQUIRE(archive_write_open_filename(a_, path.c_str()) == ARCHIVE_OK);
  }
  ~TarWriter() { archive_write_free(a_); }
  void file(const std::string& name, const std::string& bytes) { add(name, bytes, AE_IFREG, ""); }
  void symlink(const std::string& name, const std::string& target) { add(name, "", AE_IFLNK, target); }
  void close() { REQUIRE(archive_write_close(a_) == ARCHIVE_OK); }

 private:
  void add(const std::string& name, const std::string& bytes, unsigned type, const std::string& link) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
    if (!link.empty()) archive_entry_set_symlink(e, link.c_str());
    REQUIRE(archive_write_header(a_, e) == ARCHIVE_OK);
    if (!bytes.empty()) REQUIRE(archive_write_data(a_, bytes.data(), bytes.size()) == la_ssize_t(bytes.size()));
    archive_entry_free(e);
  }
  struct archive* a_;
};

std::string member_name(const Entry& e) { return "entries/" + e.arch + "/" + e.key + ".cubin"; }

ar::LocalVersions same_as_entries() { return {"0.1.0", "12.4", {"sm_90a"}}; }

Entry entry_with_versions(const std::string& seed, const std::string& arch = "sm_90a") {
  Entry e = make_entry(seed, arch);
  e.metadata["nvrtc_version"] = "12.4";
  e.metadata["attnjit_version"] = "0.1.0";
  return e;
}

}  // namespace

TEST_CASE("pack takes only verified entries; unpack installs them, verified, under any compression",
          "[cache][archive]") {
  const char* name = GENERATE("cache.tar", "cache.tar.zst", "cache.tar.gz");
  TempDir src, dst, out;
  const Entry a = entry_with_versions("a"), b = entry_with_versions("b", "sm_80"),
              bad = entry_with_versions("bad");
  {
    DiskCache c(config_for(src.path()));
    REQUIRE((c.store(a) && c.store(b) && c.store(bad)));
    flip_byte(c.entry_path(bad.arch, bad.key), 300);
  }
  const fs::path archive = out.path() / name;
  const auto packed = ar::pack(src.path(), archive);
  CHECK(packed.manifest.entries == 2);
  CHECK(packed.skipped == 1);
  REQUIRE(packed.problems.size() == 1);
  CHECK(packed.problems[0].find(bad.key) != std::string::npos);
  CHECK(packed.manifest.archs == std::vector<std::string>{"sm_80", "sm_90a"});
  CHECK(packed.manifest.nvrtc_versions == std::vector<std::string>{"12.4"});
  CHECK(fs::exists(archive));
  CHECK(files_under(out.path()).size() == 1);  // no temporary left beside it

  DiskCache into(config_for(dst.path()));
  const auto r = ar::unpack(archive, into, same_as_entries());
  CHECK(r.installed == 2);
  CHECK(r.refused == 0);
  CHECK(r.warnings.size() == 1);  // sm_80 is not this (pretend) machine's arch
  CHECK(r.manifest.entries == 2);
  auto got_a = into.load(a.arch, a.key);
  auto got_b = into.load(b.arch, b.key);
  REQUIRE(got_a);
  REQUIRE(got_b);
  check_same(*got_a, a);
  check_same(*got_b, b);
  CHECK_FALSE(into.load(bad.arch, bad.key));

  // Again: everything is already there.
  const auto again = ar::unpack(archive, into, same_as_entries());
  CHECK(again.installed == 0);
  CHECK(again.present == 2);
}

TEST_CASE("pack --arch keeps one arch", "[cache][archive]") {
  TempDir src, out;
  DiskCache c(config_for(src.path()));
  REQUIRE((c.store(entry_with_versions("x")) && c.store(entry_with_versions("y", "sm_80"))));
  const auto r = ar::pack(src.path(), out.path() / "x.tar", "sm_80");
  CHECK(r.manifest.entries == 1);
  CHECK(r.manifest.archs == std::vector<std::string>{"sm_80"});
}

TEST_CASE("an unpacked cache serves mode require, and readonly, without writing", "[cache][archive]") {
  TempDir src, dst, out;
  const Entry e = entry_with_versions("fleet");
  REQUIRE(DiskCache(config_for(src.path())).store(e));
  ar::pack(src.path(), out.path() / "fleet.tar.zst");
  {
    DiskCache into(config_for(dst.path(), CacheMode::Require));
    REQUIRE(ar::unpack(out.path() / "fleet.tar.zst", into, same_as_entries()).installed == 1);
  }
  for (CacheMode mode : {CacheMode::Require, CacheMode::ReadOnly}) {
    DiskCache fleet(config_for(dst.path(), mode));
    auto [got, source] = fleet.get_or_produce(e.arch, e.key, "fleet kernel", []() -> Entry {
      FAIL("a shipped entry must not be compiled again");
      return {};
    });
    CHECK(source == DiskCache::Source::Disk);
    check_same(got, e);
  }
  // Unpacking into a cache that may not be written is refused up front.
  DiskCache ro(config_for(dst.path(), CacheMode::ReadOnly));
  const std::string msg = error_of([&] { ar::unpack(out.path() / "fleet.tar.zst", ro, {}); }, Status::CacheError);
  CHECK(msg.find("not writable") != std::string::npos);
}

TEST_CASE("a tampered archive is refused entry by entry, and no member escapes the cache folder",
          "[cache][archive]") {
  TempDir dst, out;
  const Entry good = entry_with_versions("good"), flipped = entry_with_versions("flipped"),
              renamed = entry_with_versions("renamed");
  std::string flipped_bytes = cache::entry_format::serialize(flipped);
  flipped_bytes[flipped_bytes.size() - 10] ^= 0x01;  // a payload bit
  ar::Manifest m;
  m.entries = 3;
  const fs::path archive = out.path() / "tampered.tar";
  {
    TarWriter w(archive);
    w.file(ar::kManifestName, m.to_json().dump());
    w.file(member_name(good), cache::entry_format::serialize(good));
    w.file(member_name(flipped), flipped_bytes);
    // A sound entry under another key's name: the header's key disagrees.
    w.file("entries/sm_90a/" + key_for("someone else") + ".cubin", cache::entry_format::serialize(renamed));
    w.file("../escaped.cubin", "x");
    w.file("/tmp/absolute.cubin", "x");
    w.file("entries/sm_90a/../../../escaped2.cubin", "x");
    w.file("entries/../" + good.key + ".cubin", "x");
    w.symlink(member_name(renamed), "/etc/passwd");
    w.close();
  }
  DiskCache into(config_for(dst.path() / "cache"));
  const auto r = ar::unpack(archive, into, same_as_entries());
  CHECK(r.installed == 1);
  CHECK(r.refused == 7);
  REQUIRE(r.problems.size() == 7);
  CHECK(r.problems[0].find(member_name(flipped)) != std::string::npos);
  CHECK(into.load(good.arch, good.key));
  CHECK_FALSE(into.load(flipped.arch, flipped.key));
  CHECK_FALSE(into.load(renamed.arch, renamed.key));
  // Only the one good entry (and its shard folder) exists, all inside the cache folder.
  const auto files = files_under(dst.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0] == into.entry_path(good.arch, good.key));
  CHECK_FALSE(fs::exists(out.path().parent_path() / "escaped.cubin"));
  CHECK_FALSE(fs::exists("/tmp/absolute.cubin"));
}

TEST_CASE("unpack warns when the archive's versions or archs differ from this machine's", "[cache][archive]") {
  TempDir src, dst, out;
  REQUIRE(DiskCache(config_for(src.path())).store(entry_with_versions("v")));
  ar::pack(src.path(), out.path() / "v.tar");
  DiskCache into(config_for(dst.path()));
  const auto r = ar::unpack(out.path() / "v.tar", into, {"0.2.0", "13.0", {"sm_100a"}});
  REQUIRE(r.warnings.size() == 3);
  CHECK(r.warnings[0].find("attnjit 0.1.0, this is attnjit 0.2.0") != std::string::npos);
  CHECK(r.warnings[1].find("NVRTC 12.4, this machine has NVRTC 13.0") != std::string::npos);
  CHECK(r.warnings[2].find("sm_90a, this machine's GPUs are sm_100a") != std::string::npos);
  CHECK(r.installed == 1);  // a warning, not a refusal: the operator decides
  // Nothing to compare (no NVRTC, no GPU here): no warning.
  DiskCache again(config_for(dst.path()));
  CHECK(ar::unpack(out.path() / "v.tar", again, {"0.1.0", "", {}}).warnings.empty());
}

TEST_CASE("unpack refuses what is not an attnjit cache archive, naming it", "[cache][archive]") {
  TempDir dst, out;
  DiskCache into(config_for(dst.path()));
  const fs::path text = out.path() / "notes.tar";
  write_bytes(text, "this is not a tar file at all, just some words that go on for a while......");
  std::string msg = error_of([&] { ar::unpack(text, into, {}); }, Status::InvalidArgument);
  CHECK(msg.find(text.string()) != std::string::npos);

  const fs::path no_manifest = out.path() / "plain.tar";
  {
    TarWriter w(no_manifest);
    w.file("README", "hello");
    w.close();
  }
  msg = error_of([&] { ar::unpack(no_manifest, into, {}); }, Status::InvalidArgument);
  CHECK(msg.find("no manifest.json as its first member") != std::string::npos);
  CHECK(files_under(dst.path()).empty());
}

TEST_CASE("archive names must say their format", "[cache][archive]") {
  CHECK(ar::compression_for("a/b.tar.zst", "OUT") == ar::Compression::Zstd);
  CHECK(ar::compression_for("b.tgz", "OUT") == ar::Compression::Gzip);
  CHECK(ar::compression_for("b.tar", "OUT") == ar::Compression::None);
  const std::string msg = error_of([] { ar::compression_for("cache.zip", "OUT"); }, Status::InvalidArgument);
  CHECK(msg.find("OUT='cache.zip'") != std::string::npos);
  CHECK(msg.find(".tar.zst") != std::string::npos);
}

}  // namespace attnjit::test
