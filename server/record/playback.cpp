// Playback of recordings: re-apply each tick's recorded requests through server::apply_to_world
// and step (Box2D 3.2's recorded-call replay validated by a per-step hash), and seek by
// restoring the nearest keyframe at or before the target and re-simulating (Unreal's replay
// checkpoints; bit-exact here because the step is deterministic).
#include "server/record/playback.h"

#include <algorithm>

#include <fmt/format.h>

#include "shared/wire/messages.h"

namespace impulse::record {
namespace {

bool damping_less(const BodyDamping& a, uint64_t id) { return a.id() < id; }

}  // namespace

void update_dampings(const Request& r, std::vector<BodyDamping>& dampings) {
  if (r.result() != static_cast<uint16_t>(wire::ResultCode::Ok)) return;
  const uint64_t key = r.id();
  auto it = std::lower_bound(dampings.begin(), dampings.end(), key, damping_less);
  const bool found = it != dampings.end() && it->id() == key;
  if (r.type() == static_cast<uint8_t>(wire::Message::CreateObject) && r.body()) {
    const BodyDamping entry(key, r.body()->linear_damping(), r.body()->angular_damping());
    if (found) {
      *it = entry;
    } else {
      dampings.insert(it, entry);
    }
  } else if (r.type() == static_cast<uint8_t>(wire::Message::DestroyObject) && found) {
    dampings.erase(it);
  }
}

std::string open_recording(const std::string& path, RecordingReader& reader) {
  std::string error;
  if (!reader.open(path, &error)) return error;
  switch (reader.next()) {
    case ReadStatus::Frame: break;
    case ReadStatus::End: return fmt::format("{}: empty file: no header frame", path);
    case ReadStatus::Truncated:
    case ReadStatus::Corrupt: return fmt::format("{}: {}", path, reader.error());
  }
  if (reader.frame()->payload_type() != Payload::Header) {
    return fmt::format("{}: the first frame is a {}, not a Header", path,
                       EnumNamePayload(reader.frame()->payload_type()));
  }
  return {};
}

std::string load_header(const Header& h, physics::World& world, float* dt) {
  if (h.format_version() != kFormatVersion) {
    return fmt::format("format version {} is not this build's {}: replay it with a matching impulse-replay",
                       h.format_version(), kFormatVersion);
  }
  if (!h.config() || h.config()->tick_hz() < 1 || h.config()->tick_hz() > 1000) {
    return "the header's server config is missing or its tick_hz is not in 1..1000";
  }
  if (!h.state()) return "the header has no initial world state";
  // restore_state replaces the settings too; the header's own copy is only for `info`.
  std::string error;
  if (!world.restore_state(std::span<const uint8_t>(h.state()->data(), h.state()->size()), &error)) {
    return fmt::format("the header's initial state does not restore: {}", error);
  }
  if (world.tick() != h.tick()) {
    return fmt::format("the header's state is at tick {} but the header says {}", world.tick(), h.tick());
  }
  if (world.world_hash() != h.world_hash()) {
    return fmt::format("the restored initial state hashes to {:016x}, the header recorded {:016x} (a build with a "
                       "different state layout or hashing?)",
                       world.world_hash(), h.world_hash());
  }
  *dt = 1.0f / static_cast<float>(h.config()->tick_hz());
  return {};
}

std::string replay_tick(physics::World& world, const Tick& t, float dt, bool check_hash,
                        std::vector<BodyDamping>* dampings, uint64_t* requests) {
  std::string mismatch;
  if (t.tick() != world.tick() + 1) {
    return fmt::format("tick {}: the frame follows tick {} (a gap or reordering in the file)", t.tick(), world.tick());
  }
  if (const auto* list = t.requests()) {
    for (flatbuffers::uoffset_t i = 0; i < list->size(); ++i) {
      const Request& r = *list->Get(i);
      const server::PendingRequest p = to_pending(r);
      if (dampings) update_dampings(r, *dampings);
      ++*requests;
      if (!server::changes_world_recorded(p.type)) {
        if (mismatch.empty()) {
          mismatch = fmt::format("tick {}: request #{} has type {}, which does not change the world", t.tick(), i,
                                 request_type_name(r.type()));
        }
        continue;
      }
      const server::AppliedRequest applied = server::apply_to_world(world, p, dt);
      const auto code = static_cast<uint16_t>(server::to_result_code(applied.error));
      const bool id_differs = p.type == wire::Message::CreateObject && to_wire(applied.id) != r.id();
      if ((code != r.result() || id_differs) && mismatch.empty()) {
        mismatch = fmt::format(
            "tick {}: request #{} (client {}, {} request_id={} id={}.{}) was answered {} (id {:#x}) when recorded "
            "but {} (id {:#x}) on replay",
            t.tick(), i, r.client_id(), request_type_name(r.type()), r.request_id(), from_wire(r.id()).index,
            from_wire(r.id()).generation, result_code_name(r.result()), r.id(), result_code_name(code),
            to_wire(applied.id));
      }
    }
  }
  world.step(dt);
  if (check_hash && mismatch.empty()) {
    if (const uint64_t h = world.awake_hash(); h != t.awake_hash()) {
      mismatch = fmt::format("tick {}: awake_hash {:016x} on replay, {:016x} recorded", t.tick(), h, t.awake_hash());
    }
  }
  return mismatch;
}

// --- Playback ----------------------------------------------------------------------------------

bool Playback::open(const std::string& path, std::string* error) {
  auto fail = [&](std::string text) {
    if (error) *error = std::move(text);
    return false;
  };
  path_ = path;
  keyframes_.clear();
  truncated_ = false;
  problem_.clear();
  error_.clear();
  mismatches_ = 0;
  first_mismatch_.clear();
  requests_ = 0;
  if (std::string problem = open_recording(path, reader_); !problem.empty()) return fail(problem);
  const Header& h = *reader_.frame()->payload_as_Header();
  if (std::string problem = load_header(h, *world_, &dt_); !problem.empty()) {
    return fail(fmt::format("{}: {}", path, problem));
  }
  // Everything needed from the header is copied now: the reader's buffer is reused by next().
  tick_hz_ = h.config()->tick_hz();
  snapshot_hz_ = h.config()->snapshot_hz();
  scene_name_ = h.scene_name() ? h.scene_name()->str() : std::string{};
  header_state_.assign(h.state()->begin(), h.state()->end());
  first_tick_ = h.tick();
  last_tick_ = first_tick_;
  after_header_offset_ = reader_.offset();

  // Index pass, no simulation: keyframes and the last tick of an unbroken run of Tick frames.
  for (bool done = false; !done;) {
    switch (reader_.next()) {
      case ReadStatus::Frame: break;
      case ReadStatus::End: done = true; continue;
      case ReadStatus::Truncated: truncated_ = true; done = true; continue;
      case ReadStatus::Corrupt: problem_ = reader_.error(); done = true; continue;
    }
    const Frame& f = *reader_.frame();
    switch (f.payload_type()) {
      case Payload::Tick: {
        const uint64_t t = f.payload_as_Tick()->tick();
        if (t != last_tick_ + 1) {
          problem_ = fmt::format("frame {} at byte {}: tick {} follows tick {}", reader_.frames() - 1,
                                 reader_.frame_offset(), t, last_tick_);
          done = true;
          break;
        }
        last_tick_ = t;
        break;
      }
      case Payload::Keyframe: {
        const uint64_t t = f.payload_as_Keyframe()->tick();
        if (t != last_tick_) {
          problem_ = fmt::format("frame {} at byte {}: a keyframe of tick {} after tick {}", reader_.frames() - 1,
                                 reader_.frame_offset(), t, last_tick_);
          done = true;
          break;
        }
        keyframes_.push_back(KeyframeEntry{t, reader_.frame_offset(), reader_.frames() - 1});
        break;
      }
      case Payload::Header:
        problem_ = fmt::format("a second Header at byte {}", reader_.frame_offset());
        done = true;
        break;
      default: break;  // ClientEvent: nothing to replay
    }
  }
  if (!reader_.seek(after_header_offset_, 1)) return fail(fmt::format("{}: {}", path, reader_.error()));
  return true;
}

bool Playback::rewind(std::string* error) {
  std::string restore_error;
  if (!world_->restore_state(header_state_, &restore_error)) {
    if (error) *error = fmt::format("{}: the header's state no longer restores: {}", path_, restore_error);
    return false;
  }
  if (!reader_.seek(after_header_offset_, 1)) {
    if (error) *error = fmt::format("{}: {}", path_, reader_.error());
    return false;
  }
  return true;
}

const Tick* Playback::next_tick_frame() {
  for (;;) {
    const ReadStatus status = reader_.next();
    if (status != ReadStatus::Frame) {
      error_ = fmt::format("{}: no Tick frame after tick {}: {}", path_, world_->tick(),
                           status == ReadStatus::End ? "the file ends" : reader_.error());
      return nullptr;
    }
    if (reader_.frame()->payload_type() == Payload::Tick) return reader_.frame()->payload_as_Tick();
  }
}

AdvanceStatus Playback::advance() {
  if (world_->tick() >= last_tick_) return AdvanceStatus::End;
  const Tick* t = next_tick_frame();
  if (t == nullptr) return AdvanceStatus::Error;
  std::string mismatch = replay_tick(*world_, *t, dt_, check_hashes_, nullptr, &requests_);
  if (!mismatch.empty()) {
    if (world_->tick() != t->tick()) {  // a gap: the world did not step
      error_ = std::move(mismatch);
      return AdvanceStatus::Error;
    }
    ++mismatches_;
    if (first_mismatch_.empty()) first_mismatch_ = std::move(mismatch);
  }
  return AdvanceStatus::Ticked;
}

uint64_t Playback::keyframe_at_or_before(uint64_t tick) const {
  const auto after = std::upper_bound(keyframes_.begin(), keyframes_.end(), tick,
                                      [](uint64_t t, const KeyframeEntry& k) { return t < k.tick; });
  return after == keyframes_.begin() ? first_tick_ : (after - 1)->tick;
}

bool Playback::seek(uint64_t tick, std::string* error) {
  if (!seek_start(tick, error)) return false;
  while (world_->tick() < tick) {
    if (advance() != AdvanceStatus::Ticked) {
      error_ = fmt::format("seek to tick {} stopped at tick {}: {}", tick, world_->tick(), error_);
      if (error) *error = error_;
      return false;
    }
  }
  return true;
}

bool Playback::seek_start(uint64_t tick, std::string* error) {
  auto fail = [&](std::string text) {
    error_ = text;
    if (error) *error = std::move(text);
    return false;
  };
  if (tick < first_tick_ || tick > last_tick_) {
    return fail(fmt::format("tick {} is outside the recording's ticks {}..{}", tick, first_tick_, last_tick_));
  }
  // The last keyframe at or before `tick`; none = the header's state.
  const auto after = std::upper_bound(keyframes_.begin(), keyframes_.end(), tick,
                                      [](uint64_t t, const KeyframeEntry& k) { return t < k.tick; });
  const KeyframeEntry* keyframe = after == keyframes_.begin() ? nullptr : &*(after - 1);
  const uint64_t base = keyframe ? keyframe->tick : first_tick_;
  const uint64_t now = world_->tick();
  if (tick < now || base > now) {
    std::string problem;
    if (keyframe == nullptr) {
      if (!rewind(&problem)) return fail(problem);
    } else {
      std::string restore_error;
      const bool read = reader_.seek(keyframe->offset, keyframe->frames) && reader_.next() == ReadStatus::Frame &&
                        reader_.frame()->payload_type() == Payload::Keyframe;
      const Keyframe* k = read ? reader_.frame()->payload_as_Keyframe() : nullptr;
      if (k == nullptr || !k->state() ||
          !world_->restore_state(std::span<const uint8_t>(k->state()->data(), k->state()->size()), &restore_error)) {
        std::string text = fmt::format("{}: the keyframe of tick {} cannot be restored: {}", path_, keyframe->tick,
                                       k ? restore_error : reader_.error());
        rewind(nullptr);  // leave the world at a valid tick
        return fail(std::move(text));
      }
    }
  }
  return true;
}

}  // namespace impulse::record
