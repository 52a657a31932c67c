// Exactly-once request window (see request_window.h).
#include "server/net/request_window.h"

namespace impulse::server {

Arrival RequestWindow::arrive(const PendingRequest& r, wire::ResultCode early_code, std::string_view early_message) {
  const uint32_t id = r.request_id;
  if (id == 0) return Arrival::Invalid;
  if (id < next_expected_) {
    const RequestSlot* s = find(id);
    if (s == nullptr) return Arrival::TooOld;
    return s->state == RequestSlot::State::Answered ? Arrival::AnsweredBefore : Arrival::Duplicate;
  }
  if (id - next_expected_ >= kRequestWindow) return Arrival::TooFarAhead;
  RequestSlot& s = slot_of(id);
  if (s.request_id == id) return Arrival::Duplicate;  // buffered ahead of a gap
  s = RequestSlot{};
  s.request_id = id;
  s.state = RequestSlot::State::Buffered;
  s.request = r;
  s.early_code = early_code;
  s.early_message = early_message;
  return Arrival::Accepted;
}

RequestSlot* RequestWindow::admit_next() {
  RequestSlot& s = slot_of(next_expected_);
  if (s.request_id != next_expected_ || s.state != RequestSlot::State::Buffered) return nullptr;
  s.state = RequestSlot::State::Queued;
  ++next_expected_;
  return &s;
}

void RequestWindow::answer(uint32_t id, wire::ResultCode code, ObjectID object, std::string_view message,
                           uint64_t tick) {
  RequestSlot& s = slot_of(id);
  if (s.request_id != id) return;
  s.state = RequestSlot::State::Answered;
  s.code = code;
  s.id = object;
  s.message.assign(message);
  s.tick = tick;
}

const RequestSlot* RequestWindow::find(uint32_t id) const {
  const RequestSlot& s = slots_[id % kRequestWindow];
  return s.request_id == id && s.state != RequestSlot::State::Empty ? &s : nullptr;
}

}  // namespace impulse::server
