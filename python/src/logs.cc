// tent's log lines into Python's `logging`: the C++ log sink queues each record, a
// Python thread (tent/_logging.py) drains the queue without the GIL held while it waits
// and hands the records to the logger "tent.<component>". The sink never takes the GIL,
// so a thread that logs while another holds the GIL and waits on the engine cannot
// deadlock. Only lines the level filter lets through reach the sink, and the datapath
// logs nothing above debug: no cost on the hot path.
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>

#include "binding.h"
#include "tent/log.h"
#include "tent/log_sink.h"

namespace tent::python {
namespace {

struct Record {
  log::Component component;
  log::Level level;
  std::string message;
  double created;  // seconds since the epoch, as logging.LogRecord.created
  int thread;      // kernel thread id
  int lcore;       // -1: not an lcore thread
};

// Bounded so a process that never drains (no Python thread running) cannot grow without
// end; the oldest records give way and are counted.
constexpr size_t kMaxQueued = 8192;

struct Queue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Record> records;
  uint64_t dropped = 0;
};

// Never destroyed: the drain thread may still wait on it while the interpreter exits.
Queue& queue() {
  static Queue* q = new Queue();
  return *q;
}

void sink(log::Component c, log::Level l, const char* message, size_t length) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Record r{c, l, std::string(message, length), now, static_cast<int>(gettid()), log::threadLcore()};
  Queue& q = queue();
  {
    std::lock_guard<std::mutex> lock(q.mu);
    if (q.records.size() >= kMaxQueued) {
      q.records.pop_front();
      ++q.dropped;
    }
    q.records.push_back(std::move(r));
  }
  q.cv.notify_one();
}

// Waits up to timeout_s (GIL released) until records are queued; takes none. The drain
// thread waits here without holding the lock flush() takes, then drains at once.
bool waitForRecords(double timeout_s) {
  py::gil_scoped_release release;
  Queue& q = queue();
  std::unique_lock<std::mutex> lock(q.mu);
  return q.cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                       [&] { return !q.records.empty() || q.dropped != 0; });
}

// Waits up to timeout_s for records (GIL released); returns (records, dropped since the
// last call). Each record: (component, level name, message, created, thread, lcore).
py::tuple drain(double timeout_s) {
  std::deque<Record> taken;
  uint64_t dropped = 0;
  {
    py::gil_scoped_release release;
    Queue& q = queue();
    std::unique_lock<std::mutex> lock(q.mu);
    q.cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                  [&] { return !q.records.empty(); });
    taken.swap(q.records);
    dropped = q.dropped;
    q.dropped = 0;
  }
  static constexpr const char* kLevelNames[] = {"trace", "debug", "info", "warn", "error", "off"};
  py::list out;
  for (const Record& r : taken) {
    out.append(py::make_tuple(
        std::string(log::componentName(r.component)), kLevelNames[static_cast<size_t>(r.level)],
        py::str(r.message.data(), r.message.size()), r.created, r.thread, r.lcore));
  }
  return py::make_tuple(out, dropped);
}

}  // namespace

void bindLogs(py::module_& m) {
  m.def(
      "_log_to_python", [](bool on) { log::setSink(on ? &sink : nullptr); }, py::arg("on"),
      "True: log lines go to the queue _log_drain empties; False: to stderr.");
  m.def("_log_drain", &drain, py::arg("timeout_s"));
  m.def("_log_wait", &waitForRecords, py::arg("timeout_s"),
        "Waits up to timeout_s until records are queued (takes none); True when some are.");
  m.def(
      "_log_emit_for_test",
      [](const std::string& component, const std::string& level, const std::string& message) {
        log::Component c{};
        log::Level l{};
        if (!log::parseComponent(component, &c) || !log::parseLevel(level, &l))
          raiseInvalid("unknown component or level");
        if (log::enabled(c, l)) log::write(c, l, "%s", message.c_str());
      },
      py::arg("component"), py::arg("level"), py::arg("message"));
}

}  // namespace tent::python
