#include "log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "attnjit/error.hpp"

namespace attnjit::log {

spdlog::logger& get() {
  // Not registered in spdlog's global registry: the host's registry is not ours.
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("attnjit", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[attnjit %L] %v");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return *logger;
}

void set_level(std::string_view level) {
  if (level.empty()) return;
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off")
    throw Error(Status::InvalidArgument,
                fmt::format("ATTNJIT_LOG_LEVEL='{}' is not a log level; allowed: trace, debug, info, warn, error, off", level));
  get().set_level(lvl);
}

}  // namespace attnjit::log
