// A damaged archive installs nothing: unpack reads the whole archive before
// it writes, so a tar cut anywhere (mid-member, or at a member boundary where
// tar itself sees a clean end) leaves the cache as it was and says so. A
// write that fails while installing reports how many entries went in before.
#include <catch2/catch.hpp>

#include <algorithm>

#include "cache/archive.hpp"
#include "support/cli_process.hpp"
#include "support/error_capture.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {
namespace {

namespace ar = cache::archive;

size_t entries_under(const fs::path& dir) {
  const auto files = files_under(dir);
  return static_cast<size_t>(
      std::count_if(files.begin(), files.end(), [](const fs::path& p) { return p.extension() == ".cubin"; }));
}

// A .tar of three 20 KB entries (members span many 512-byte blocks).
fs::path three_entry_archive(const fs::path& src, const fs::path& out) {
  DiskCache c(config_for(src));
  for (const char* seed : {"one", "two", "three"}) REQUIRE(c.store(make_entry(seed, "sm_90a", 20000)));
  const fs::path archive = out / "three.tar";
  REQUIRE(ar::pack(src, archive).manifest.entries == 3);
  return archive;
}

void write_prefix(const fs::path& from, const fs::path& to, size_t bytes) {
  write_bytes(to, read_bytes(from).substr(0, bytes));
}

}  // namespace

TEST_CASE("unpack of a truncated archive installs nothing and says so", "[cache][archive]") {
  TempDir src, out, work;
  const fs::path archive = three_entry_archive(src.path(), out.path());
  const size_t size = fs::file_size(archive);
  const fs::path cut = out.path() / "cut.tar";
  write_prefix(archive, cut, size * 3 / 5);  // two entries whole, the third cut
  DiskCache into(config_for(work.path() / "cache"));
  const std::string msg = error_of([&] { ar::unpack(cut, into, {}); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("IN='" + cut.string() + "' cannot be read as a tar archive"));
  CHECK_THAT(msg, Catch::Contains("nothing was installed"));
  CHECK(entries_under(work.path()) == 0);
}

TEST_CASE("unpack of an archive cut at any 512-byte block installs all of it or nothing", "[cache][archive]") {
  TempDir src, out, work;
  const fs::path archive = three_entry_archive(src.path(), out.path());
  const size_t size = fs::file_size(archive);
  const fs::path cut = out.path() / "cut.tar";
  size_t refused = 0, whole = 0;
  for (size_t bytes = 512; bytes < size; bytes += 512) {
    INFO("first " << bytes << " of " << size << " bytes");
    write_prefix(archive, cut, bytes);
    const fs::path dir = work.path() / std::to_string(bytes);
    DiskCache into(config_for(dir));
    try {
      const auto r = ar::unpack(cut, into, {});
      // Only the end-of-archive blocks are missing: every entry is there.
      CHECK(r.installed == 3);
      CHECK(entries_under(dir) == 3);
      ++whole;
    } catch (const Error& e) {
      CHECK(e.status() == Status::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains("nothing was installed"));
      CHECK(entries_under(dir) == 0);
      ++refused;
    }
  }
  CHECK(whole >= 1);                  // cuts in the zero blocks after the last member
  CHECK(refused >= 3 * 20000 / 512);  // every cut before the last member's end
}

TEST_CASE("unpack of an archive missing whole members that its manifest lists names the counts", "[cache][archive]") {
  TempDir src, out, work;
  const fs::path archive = three_entry_archive(src.path(), out.path());
  // Find the boundary after the second entry member: the largest cut that reads cleanly with fewer members.
  const fs::path cut = out.path() / "cut.tar";
  bool found = false;
  for (size_t bytes = fs::file_size(archive) - 1024; bytes >= 512 && !found; bytes -= 512) {
    write_prefix(archive, cut, bytes);
    DiskCache into(config_for(work.path() / std::to_string(bytes)));
    try {
      ar::unpack(cut, into, {});
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.find("is incomplete") == std::string::npos) continue;
      found = true;
      CHECK(e.status() == Status::InvalidArgument);
      CHECK_THAT(msg, Catch::Contains("its manifest lists 3 entries, it holds 2 (truncated?); nothing was installed"));
      CHECK(entries_under(work.path() / std::to_string(bytes)) == 0);
    }
  }
  CHECK(found);
}

TEST_CASE("unpack reports how many entries were installed when a write fails midway", "[cache][archive]") {
  TempDir src, out, work;
  const fs::path archive = three_entry_archive(src.path(), out.path());
  // Make the shard folder of one entry a regular file: that store fails (ENOTDIR), as a full disk would.
  const fs::path dir = work.path() / "cache";
  const Entry blocked = make_entry("two", "sm_90a", 20000);
  fs::create_directories(dir / "sm_90a");
  write_bytes(dir / "sm_90a" / blocked.key.substr(0, 2), "in the way");
  DiskCache into(config_for(dir));
  LogCapture log;
  const std::string msg = error_of([&] { ar::unpack(archive, into, {}); }, Status::CacheError);
  const size_t installed = entries_under(dir);
  CHECK(installed <= 2);
  CHECK_THAT(msg, Catch::Contains("cannot write entries/sm_90a/" + blocked.key + ".cubin"));
  CHECK_THAT(msg, Catch::Contains(std::to_string(installed) + " of the archive's 3 entries were installed and 0 "
                                  "already present before this"));
  for (const auto& f : files_under(dir)) CHECK(f.filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("CLI: cache unpack of a truncated .tar exits non-zero, installs nothing and says so", "[cli][archive]") {
  TempDir src, out, work;
  const fs::path archive = three_entry_archive(src.path(), out.path());
  const fs::path cut = out.path() / "cut.tar";
  write_prefix(archive, cut, fs::file_size(archive) * 3 / 5);
  const fs::path dir = work.path() / "cache";
  const CliResult r = run_cli("cache unpack " + shell_quote(cut.string()), dir);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.has("attnjit: error: IN='" + cut.string() + "' cannot be read as a tar archive"));
  CHECK(r.has("nothing was installed"));
  CHECK(entries_under(dir) == 0);

  // The whole archive then installs everything.
  const CliResult whole = run_cli("cache unpack " + shell_quote(archive.string()), dir);
  INFO(whole.output);
  CHECK(whole.status == 0);
  CHECK(whole.has("3 installed, 0 already present, 0 refused"));
}

}  // namespace attnjit::test
