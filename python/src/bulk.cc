// transfer_sync / transfer_async: descriptors as three uint64 columns (numpy
// arrays, borrowed without a copy, or lists), one Request built per row in C++
// with the GIL released. Per-descriptor Python objects were the cost NIXL-style
// users complained about; here there are none.
#include <optional>
#include <string>
#include <vector>

#include "engine.h"

namespace tent::python {

namespace {

struct Columns {
  U64Column local, remote, lengths;
  size_t rows = 0;
};

Columns toColumns(py::handle local_addrs, py::handle remote_addrs, py::handle lengths) {
  Columns c;
  c.local = toColumn(local_addrs, "local_addrs", /*allow_scalar=*/false);
  c.remote = toColumn(remote_addrs, "remote_addrs", /*allow_scalar=*/false);
  c.lengths = toColumn(lengths, "lengths", /*allow_scalar=*/true);
  c.rows = c.local.size;
  if (c.remote.size != c.rows || (!c.lengths.is_scalar && c.lengths.size != c.rows))
    raiseInvalid("local_addrs, remote_addrs and lengths differ in length (" +
                 std::to_string(c.rows) + ", " + std::to_string(c.remote.size) + ", " +
                 (c.lengths.is_scalar ? std::string("scalar") : std::to_string(c.lengths.size)) +
                 ")");
  return c;
}

std::vector<Request> buildRequests(const Columns& c, OpCode op, SegmentId target, IntentType intent,
                                   uint64_t deadline_ns) {
  std::vector<Request> reqs(c.rows);
  for (size_t i = 0; i < c.rows; ++i) {
    Request& r = reqs[i];
    r.opcode = op;
    r.source = reinterpret_cast<void*>(c.local.data[i]);
    r.target_id = target;
    r.target_offset = c.remote.data[i];
    r.length = c.lengths.at(i);
    r.deadline_ns = deadline_ns;
    r.intent_type = intent;
  }
  return reqs;
}

// A batch that holds the rows, submitted; on a failed submit the batch is freed.
// With `notify`, the batch carries it (sent once every row completed).
Result<BatchId> submitRows(TransferEngine& e, const Columns& c, OpCode op, SegmentId target,
                           IntentType intent, uint64_t deadline_ns,
                           const std::optional<std::string>& notify) {
  const std::vector<Request> reqs = buildRequests(c, op, target, intent, deadline_ns);
  Result<BatchId> batch = e.allocateBatch(reqs.size());
  if (!batch.ok()) return batch;
  Status s = notify ? e.submitTransfer(*batch, reqs, *notify) : e.submitTransfer(*batch, reqs);
  if (s.ok()) return batch;
  (void)e.freeBatch(*batch);
  return s;
}

StatusCode codeOf(TransferState state) {
  switch (state) {
    case TransferState::TIMEOUT:
      return StatusCode::kTimeout;
    case TransferState::CANCELED:
      return StatusCode::kCanceled;
    case TransferState::INVALID:
      return StatusCode::kInvalidArgument;
    case TransferState::FAILED:
      return StatusCode::kIoError;
    default:
      return StatusCode::kInternal;
  }
}

Status taskFailure(const WaitOutcome& w, size_t rows) {
  return Status(codeOf(w.state),
                "task " + std::to_string(w.first_failed) + " of " + std::to_string(rows) +
                    " ended " + std::string(toString(w.state)) + " (" + std::to_string(w.failed) +
                    " of " + std::to_string(rows) + " did not complete)");
}

}  // namespace

SegmentId Engine::resolveTarget(py::handle target) {
  if (isInteger(target)) return toU64(target, "target");
  if (!PyUnicode_Check(target.ptr()))
    raiseInvalid("target: expected a segment id (int) or a segment name (str), got " +
                 std::string(Py_TYPE(target.ptr())->tp_name));
  return openSegment(target);  // by name: the engine returns the id it already has
}

uint64_t Engine::transferSync(py::handle target, py::handle opcode, py::handle local_addrs,
                              py::handle remote_addrs, py::handle lengths, py::handle intent,
                              py::handle deadline_us, py::handle timeout_s, py::handle notify) {
  const uint64_t wait_deadline = deadlineAfter(toSeconds(timeout_s, "timeout_s"));
  const auto [batch, rows] =
      submitBulk(target, opcode, local_addrs, remote_addrs, lengths, intent, deadline_us, notify);
  auto u = use();
  const WaitOutcome w = waitTasks(*u, batch, 0, rows, wait_deadline, closed_);
  {
    py::gil_scoped_release nogil;
    // Tasks not waited for (timeout, Ctrl-C, close) are canceled; the engine keeps
    // a freed batch aside until their posted WRs drain.
    for (size_t i = w.done; i < rows; ++i) (void)u->cancelTransfer(batch, i);
    (void)u->freeBatch(batch);
  }
  if (w.interrupted) throw py::error_already_set();
  check(w.error);
  if (w.failed != 0) raise(taskFailure(w, rows));
  return w.bytes;
}

BatchId Engine::transferAsync(py::handle target, py::handle opcode, py::handle local_addrs,
                              py::handle remote_addrs, py::handle lengths, py::handle intent,
                              py::handle deadline_us, py::handle notify) {
  return submitBulk(target, opcode, local_addrs, remote_addrs, lengths, intent, deadline_us, notify)
      .first;
}

std::pair<BatchId, size_t> Engine::submitBulk(py::handle target, py::handle opcode,
                                              py::handle local_addrs, py::handle remote_addrs,
                                              py::handle lengths, py::handle intent,
                                              py::handle deadline_us, py::handle notify) {
  const uint64_t deadline_ns = deadlineFromNowUs(deadline_us);  // relative to the call
  std::optional<std::string> message;
  if (!notify.is_none()) message = toMessage(notify, "notify");
  const OpCode op = toOpCode(opcode);
  const IntentType in = toIntent(intent);
  const Columns c = toColumns(local_addrs, remote_addrs, lengths);
  const SegmentId seg = resolveTarget(target);
  const BatchId batch =
      call([&](TransferEngine& e) { return submitRows(e, c, op, seg, in, deadline_ns, message); });
  return {batch, c.rows};
}

}  // namespace tent::python
