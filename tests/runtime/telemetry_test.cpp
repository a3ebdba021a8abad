// ATTNJIT_TELEMETRY: JSON lines per compile and per miss, for fleet
// dashboards. The engine cases use a kernel planted in the disk cache under
// the key the engine computes (NVRTC is asked for its version only), so no
// compile runs.
#include <stdlib.h>
#include <unistd.h>  // getpid

#include <fstream>

#include "engine.hpp"
#include "support/error_capture.hpp"
#include "support/scoped_env.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "telemetry.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

std::vector<nlohmann::json> lines_of(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

KernelSpec decode_spec() {
  SingleDecodeProblem p;
  p.num_qo_heads = 8;
  p.num_kv_heads = 8;
  p.head_dim = 64;
  p.kv_len = 100;
  return ops::single_decode_kernels(p).at(0);
}


}  // namespace

TEST_CASE("telemetry appends one JSON object per line, with time and pid", "[telemetry]") {
  TempDir dir;
  const fs::path log = dir.path() / "events.jsonl";
  telemetry::emit(log.string(), {{"event", "compile"}, {"spec", "a"}, {"seconds", 1.5}});
  telemetry::emit(log.string(), {{"event", "miss"}, {"spec", "b"}});
  telemetry::emit("", {{"event", "nowhere"}});
  const auto lines = lines_of(log);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["event"] == "compile");
  CHECK(lines[0]["seconds"] == 1.5);
  CHECK(lines[1]["spec"] == "b");
  CHECK(lines[1]["pid"].get<long>() == static_cast<long>(::getpid()));
  CHECK(lines[1]["time"].get<std::string>().size() == 20);  // 2025-01-31T14:02:11Z
}

TEST_CASE("ATTNJIT_TELEMETRY takes stderr, off or a path, and names itself when malformed", "[telemetry][config]") {
  {
    ScopedEnv e("ATTNJIT_TELEMETRY", "stderr");
    CHECK(Config::from_env().telemetry == "stderr");
  }
  {
    ScopedEnv e("ATTNJIT_TELEMETRY", "off");
    CHECK(Config::from_env().telemetry.empty());
  }
  {
    ScopedEnv e("ATTNJIT_TELEMETRY", "./events.jsonl");
    CHECK(Config::from_env().telemetry == "./events.jsonl");
  }
  ScopedEnv e("ATTNJIT_TELEMETRY", "1");
  const std::string msg = error_of([] { Config::from_env(); }, Status::InvalidArgument);
  CHECK(msg.find("ATTNJIT_TELEMETRY='1'") != std::string::npos);
  CHECK(msg.find("stderr") != std::string::npos);
}

TEST_CASE("the engine reports a miss served from disk, and a miss that mode require refuses", "[telemetry]") {
  TempDir dir;
  const fs::path log = dir.path() / "events.jsonl";
  Config config;
  config.cache = config_for(dir.path() / "cache");
  config.telemetry = log.string();
  const KernelSpec spec = decode_spec();
  std::string key;
  {
    detail::Engine engine(config);
    key = engine.key_for(spec, "sm_80");
    Entry planted = make_entry("planted", "sm_80");
    planted.key = key;
    REQUIRE(engine.disk_cache().store(planted));
    CHECK(engine.prepare(spec, "sm_80").origin == detail::Origin::Disk);
    CHECK(engine.prepare(spec, "sm_80").origin == detail::Origin::Memory);  // no line for memory hits
  }
  {
    config.cache.mode = CacheMode::Require;
    detail::Engine engine(config);
    error_of([&] { engine.prepare(spec, "sm_90a"); }, Status::CacheMiss);
  }
  const auto lines = lines_of(log);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["event"] == "miss");
  CHECK(lines[0]["from"] == "disk");
  CHECK(lines[0]["key"] == key);
  CHECK(lines[0]["spec"] == spec.name());
  CHECK(lines[0]["arch"] == "sm_80");
  CHECK(lines[0]["seconds"].get<double>() >= 0);
  CHECK(lines[1]["from"] == "error");
  CHECK(lines[1]["arch"] == "sm_90a");
  CHECK(lines[1]["error"].get<std::string>().find("require") != std::string::npos);
}

}  // namespace attnjit::test
