// `attnjit cache pack|unpack` and `cache stats --json`, run as the operator
// runs them: a separate process, its exit status and its output. The cache is
// filled through DiskCache (no NVRTC needed).
#include <sys/wait.h>

#include <cstdio>

#include "cache/entry_format.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

struct Run {
  int status = -1;
  std::string output;
};

// `attnjit <args>` with ATTNJIT_CACHE_DIR=cache and a clean cache mode; stdout and stderr together.
Run attnjit_cli(const std::string& args, const fs::path& cache) {
  const std::string binary = ATTNJIT_TEST_BINARY_DIR "/attnjit";
  if (!fs::exists(binary)) FAIL("the attnjit binary is missing at " << binary << ": build the attnjit_cli target");
  const std::string cmd = "ATTNJIT_CACHE_DIR='" + cache.string() + "' ATTNJIT_CACHE_MODE=readwrite '" + binary +
                          "' " + args + " 2>&1";
  Run r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("attnjit cache pack and unpack move verified entries; a tampered archive exits 1", "[cli][archive]") {
  TempDir tmp;
  const fs::path src = tmp.path() / "src", dst = tmp.path() / "dst", archive = tmp.path() / "c.tar";
  Entry a = make_entry("cli a"), b = make_entry("cli b");
  {
    DiskCache c(config_for(src));
    REQUIRE((c.store(a) && c.store(b)));
  }
  const Run pack = attnjit_cli("cache pack '" + archive.string() + "'", src);
  INFO(pack.output);
  REQUIRE(pack.status == 0);
  CHECK(has(pack.output, "packed 2 entries"));

  const Run unpack = attnjit_cli("cache unpack '" + archive.string() + "'", dst);
  INFO(unpack.output);
  CHECK(unpack.status == 0);
  CHECK(has(unpack.output, "2 installed, 0 already present, 0 refused"));

  const Run stats = attnjit_cli("cache stats --json", dst);
  INFO(stats.output);
  CHECK(stats.status == 0);
  const auto j = nlohmann::json::parse(stats.output);
  CHECK(j["entries"] == 2);
  CHECK(j["dir"] == dst.string());
  CHECK(j["mode"] == "readwrite");
  CHECK(j["writable"] == "yes");

  // The same archive with one entry's header changed, repacked by hand with
  // tar (which adds folder members: those are skipped, not refused).
  const fs::path work = tmp.path() / "work", bad = tmp.path() / "bad.tar";
  fs::create_directories(work);
  REQUIRE(std::system(("tar -xf '" + archive.string() + "' -C '" + work.string() + "'").c_str()) == 0);
  flip_byte(work / "entries" / a.arch / (a.key + ".cubin"), 200);
  REQUIRE(std::system(("tar -cf '" + bad.string() + "' -C '" + work.string() + "' manifest.json entries").c_str()) == 0);
  const Run refused = attnjit_cli("cache unpack '" + bad.string() + "'", tmp.path() / "fresh");
  INFO(refused.output);
  CHECK(refused.status == 1);
  CHECK(has(refused.output, "1 installed, 0 already present, 1 refused"));
  CHECK(has(refused.output, "refused: entries/" + a.arch + "/" + a.key + ".cubin"));
}

}  // namespace attnjit::test
