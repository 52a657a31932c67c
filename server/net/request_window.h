// Exactly-once, in-order request admission per session: a sliding window over the client's
// request sequence (request_id). Out-of-order arrivals wait in their slot until the gap fills;
// answered requests keep their result so a resent duplicate is answered again, never re-applied.
// The receive side of Fiedler's "Reliable Ordered Messages" (gafferongames.com, 2016), with the
// result cache of an idempotent RPC layer on top.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "impulse/schemas/impulse_generated.h"
#include "server/request/apply_request.h"
#include "shared/object_id.h"

namespace impulse::server {

/// Requests at most in flight per client: ids >= next_expected + kRequestWindow are dropped
/// (the client library never has more outstanding), ids < next_expected - kRequestWindow are
/// answered RequestTooOld.
inline constexpr uint32_t kRequestWindow = 256;

/// One request's slot in the window.
struct RequestSlot {
  enum class State : uint8_t {
    Empty,     ///< never used
    Buffered,  ///< arrived ahead of a gap; waits for the earlier ids
    Queued,    ///< admitted: in the tick queue, answered at the next tick boundary
    Answered,  ///< result below is final
  };
  uint32_t request_id = 0;  ///< 0 = empty
  State state = State::Empty;
  PendingRequest request;   ///< the decoded request (Buffered, Queued; kept after for Raycast reruns)
  /// A range-check failure found at decode time: answered at admission, never queued.
  wire::ResultCode early_code = wire::ResultCode::Ok;
  std::string_view early_message;  ///< static string
  // Answered:
  wire::ResultCode code = wire::ResultCode::Ok;
  ObjectID id;
  /// Owned: refusals are formatted (they name the limit and its value) into buffers that the
  /// next refusal overwrites, and a duplicate of this request is answered with the same text.
  /// Assigned into the slot's own storage, which keeps its capacity across reuse.
  std::string message;
  uint64_t tick = 0;  ///< the tick whose step it was applied before (RequestResult.tick); 0: not applied
};

/// What to do with an arriving request.
enum class Arrival : uint8_t {
  Accepted,        ///< stored; call admit_ready() to move what became contiguous into the queue
  Duplicate,       ///< already buffered or queued: ignore (its answer is coming)
  AnsweredBefore,  ///< already answered: resend slot(id)'s result
  TooOld,          ///< below the window: answer RequestTooOld
  TooFarAhead,     ///< beyond the window: drop (count it)
  Invalid,         ///< request_id 0
};

/// The exactly-once window of one session. Memory: kRequestWindow slots, allocated once.
class RequestWindow {
 public:
  RequestWindow() : slots_(kRequestWindow) {}

  /// Classifies request `r` (r.request_id is the client's sequence) and stores it when new.
  /// `early_code`/`early_message`: the result of the wire range check (Ok when it passed).
  Arrival arrive(const PendingRequest& r, wire::ResultCode early_code, std::string_view early_message);

  /// The next id to admit (every id below it was admitted in order).
  uint32_t next_expected() const { return next_expected_; }

  /// Pops the next contiguous stored request in sequence order, or null when the next id has not
  /// arrived. The slot becomes Queued; the caller answers it (answer()) now or at the tick.
  RequestSlot* admit_next();

  /// Records the final result of request `id` (a slot that is Queued, or was just admitted).
  void answer(uint32_t id, wire::ResultCode code, ObjectID object, std::string_view message, uint64_t tick = 0);

  /// The slot of `id`, or null when the window no longer (or never) held it.
  const RequestSlot* find(uint32_t id) const;

 private:
  RequestSlot& slot_of(uint32_t id) { return slots_[id % kRequestWindow]; }
  std::vector<RequestSlot> slots_;
  uint32_t next_expected_ = 1;
};

}  // namespace impulse::server
