#include "cache/temp_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "enum_names.hpp"

namespace attnjit::cache::temp_files {

const std::string& this_host() {
  static const std::string host = [] {
    char buf[HOST_NAME_MAX + 1] = {};
    std::string h;
    if (::gethostname(buf, sizeof buf - 1) == 0)
      for (const char* c = buf; *c; ++c)
        h += ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')) ? *c : '-';
    return h.empty() ? std::string("host") : h;
  }();
  return host;
}

std::string writer_tag() { return this_host() + "." + std::to_string(::getpid()) + "."; }

std::optional<Writer> writer_of(const std::string& name) {
  const auto tmp = name.find(".tmp.");
  if (tmp == std::string::npos) return std::nullopt;
  const std::string rest = name.substr(tmp + 5);  // "<host>.<pid>.<random>" or "<pid>.<random>"
  const auto last = rest.rfind('.');
  if (last == std::string::npos || last == 0) return std::nullopt;
  const std::string head = rest.substr(0, last);  // "<host>.<pid>" or "<pid>"
  const auto dot = head.rfind('.');
  Writer w;
  const std::string pid_text = dot == std::string::npos ? head : head.substr(dot + 1);
  if (dot != std::string::npos) w.host = head.substr(0, dot);
  if (pid_text.empty() || pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  w.pid = std::strtol(pid_text.c_str(), nullptr, 10);
  if (w.pid <= 0) return std::nullopt;
  return w;
}

WriterState writer_state(const std::string& name) {
  const auto w = writer_of(name);
  if (!w || w->host.empty() || w->host != this_host()) return WriterState::Unknown;
  if (::kill(static_cast<pid_t>(w->pid), 0) == 0 || errno == EPERM) return WriterState::Running;  // EPERM: another user's
  return errno == ESRCH ? WriterState::Gone : WriterState::Unknown;
}

const char* to_string(WriterState s) noexcept {
  static constexpr EnumName<WriterState> kNames[] = {
      {WriterState::Running, "running"}, {WriterState::Gone, "gone"}, {WriterState::Unknown, "unknown"}};
  return name_in(kNames, s);
}

}  // namespace attnjit::cache::temp_files
