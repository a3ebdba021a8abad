// The in-process half of "compile once": concurrent callers with one id share
// one run of the work. The first caller (the leader) runs it; the others block
// until it finishes and get a copy of its result, or of its exception (an
// attnjit::Error is re-created per waiter; other exceptions are rethrown).
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "attnjit/error.hpp"

namespace attnjit::cache {

template <typename T>
class SingleFlight {
 public:
  // Returns the result and whether this caller was the one that ran `work`.
  std::pair<T, bool> run(const std::string& id, const std::function<T()>& work) {
    std::shared_ptr<Flight> flight;
    bool leader = false;
    {
      std::lock_guard<std::mutex> g(mutex_);
      auto& slot = flights_[id];
      if (!slot) {
        slot = std::make_shared<Flight>();
        leader = true;
      }
      flight = slot;
    }
    if (!leader) {
      std::unique_lock<std::mutex> g(flight->mutex);
      flight->cv.wait(g, [&] { return flight->done; });
      // Each waiter throws an Error object of its own. Rethrowing the
      // leader's exception_ptr would hand one object to every thread at once,
      // its lifetime then hanging on a reference count inside libstdc++ that
      // ThreadSanitizer cannot see (it reported the last catch's free as a
      // race with the other threads' reads).
      if (flight->error_status) throw Error(*flight->error_status, flight->error_message);
      if (flight->error) std::rethrow_exception(flight->error);
      return {*flight->result, false};
    }

    std::optional<T> result;
    std::exception_ptr error;
    std::optional<Status> error_status;
    std::string error_message;
    try {
      result.emplace(work());
    } catch (const Error& e) {
      error = std::current_exception();
      error_status = e.status();
      error_message = e.what();
    } catch (...) {
      error = std::current_exception();
    }
    {
      // Retire the flight first, so callers arriving from now on start afresh
      // (and find the leader's published entry on disk).
      std::lock_guard<std::mutex> g(mutex_);
      flights_.erase(id);
    }
    {
      std::lock_guard<std::mutex> g(flight->mutex);
      flight->result = result;
      // An Error stays with this thread alone (the waiters get status and text).
      flight->error = error_status ? nullptr : error;
      flight->error_status = error_status;
      flight->error_message = error_message;
      flight->done = true;
    }
    flight->cv.notify_all();
    if (error) std::rethrow_exception(error);
    return {std::move(*result), true};
  }

 private:
  struct Flight {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    std::optional<T> result;
    std::exception_ptr error;           // what the leader threw, unless an attnjit::Error
    std::optional<Status> error_status;  // set when that was an attnjit::Error
    std::string error_message;
  };
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;
};

}  // namespace attnjit::cache
