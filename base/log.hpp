// The library's one logger. spdlog is used header-only with fmt, and every
// symbol of both stays hidden inside libattnjit.so, so a host engine's own
// spdlog/fmt never clash with ours.
#pragma once
#include <spdlog/logger.h>

#include <memory>
#include <string_view>

namespace attnjit::log {

spdlog::logger& get();
// Applies ATTNJIT_LOG_LEVEL's value; unknown names throw Error(InvalidArgument).
void set_level(std::string_view level);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) { get().debug(f, std::forward<Args>(a)...); }
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... a) { get().info(f, std::forward<Args>(a)...); }
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... a) { get().warn(f, std::forward<Args>(a)...); }
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... a) { get().error(f, std::forward<Args>(a)...); }

}  // namespace attnjit::log
