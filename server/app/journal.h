// Journal: the one way ServerCore reports what a session recording needs (scene bodies, applied
// requests, the end of each step, session changes). With no recorder attached every call does
// nothing, so the core states what happened without asking whether anyone records it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "server/record/recorder.h"
#include "server/request/apply_request.h"

namespace impulse::server {

class Journal {
 public:
  /// Records into `recorder` from now on (null: records nothing). Not owned; must outlive the
  /// journal's use.
  void attach(record::Recorder* recorder) { recorder_ = recorder; }
  bool recording() const { return recorder_ != nullptr; }

  /// A body created outside requests (the scene).
  void scene_body(ObjectID id, const physics::BodyDesc& desc) {
    if (recorder_) recorder_->note_body(id, desc);
  }
  /// A request applied before the next step, with the server's answer.
  void applied(const PendingRequest& request, wire::ResultCode result, ObjectID id) {
    if (recorder_) recorder_->add_request(request, result, id);
  }
  /// The world after one step. Returns the time it took [ns] (hashing and encoding).
  uint64_t stepped(const physics::World& world) {
    if (!recorder_) return 0;
    const auto t0 = std::chrono::steady_clock::now();
    recorder_->end_tick(world);
    return static_cast<uint64_t>(std::chrono::nanoseconds(std::chrono::steady_clock::now() - t0).count());
  }
  /// A session began or ended (connect, disconnect, timeout, server shutdown).
  void session(record::ClientEventType type, uint32_t client_id, uint64_t tick, std::string_view address,
               std::string_view name) {
    if (recorder_) recorder_->add_client_event(type, client_id, tick, address, name);
  }

 private:
  record::Recorder* recorder_ = nullptr;
};

}  // namespace impulse::server
