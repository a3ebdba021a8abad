#include "telemetry.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>

#include "log.hpp"

namespace attnjit::telemetry {

namespace {

struct Sinks {
  std::mutex mutex;
  std::map<std::string, int> fds;  // target -> fd (-1: opening failed, warned once)
};

Sinks& sinks() {
  static Sinks* s = new Sinks;  // never destroyed: kernels may load during static destruction
  return *s;
}

}  // namespace

std::string iso_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void emit(const std::string& target, nlohmann::json event) {
  if (target.empty()) return;
  try {
    event["time"] = iso_now();
    event["pid"] = static_cast<long>(::getpid());
    const std::string line = event.dump() + "\n";
    Sinks& s = sinks();
    std::lock_guard<std::mutex> lock(s.mutex);
    int fd = STDERR_FILENO;
    if (target != "stderr") {
      auto it = s.fds.find(target);
      if (it == s.fds.end()) {
        const int opened = ::open(target.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (opened < 0)
          log::warn("ATTNJIT_TELEMETRY={}: cannot open it ({}); telemetry is off for this process", target,
                    std::strerror(errno));
        it = s.fds.emplace(target, opened).first;
      }
      fd = it->second;
      if (fd < 0) return;
    }
    // One write per line: with O_APPEND, lines of concurrent processes stay whole.
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()) && target != "stderr") {
      log::warn("ATTNJIT_TELEMETRY={}: write failed ({}); telemetry is off for this process", target,
                std::strerror(errno));
      ::close(fd);
      s.fds[target] = -1;
    }
  } catch (...) {
    // Telemetry must never fail the caller (e.g. a bad_alloc or a JSON encoding error).
  }
}

}  // namespace attnjit::telemetry
