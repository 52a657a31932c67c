// Test helper: writes a recording straight from a World (no server, no threads) with the
// record::encode_* functions, the way the Recorder lays it out: Header, then per tick the
// requests applied through server::apply_to_world and the step's awake_hash, and a Keyframe
// after every keyframe_interval-th tick. Bodies are created, pushed and destroyed (so ids get new
// generations) and fall onto a ground box, so contacts and sleep are part of the state; hinges
// join some of them, get their motors changed and are destroyed, so joints are too.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "server/request/apply_request.h"
#include "server/app/server.h"
#include "server/physics/world.h"
#include "server/record/format.h"

namespace impulse::record::test {

struct WrittenRecording {
  std::string path;
  /// world_hash after each tick: hashes[t] for t in [0, ticks] (hashes[0] = the header's state).
  std::vector<uint64_t> hashes;
  uint64_t ticks = 0;
  uint32_t keyframe_interval = 0;
  /// Byte offset of the end of every complete frame, in file order.
  std::vector<uint64_t> frame_ends;
  uint32_t joints_created = 0;  ///< CreateJoint requests the World accepted
};

inline std::string temp_recording_path(std::string_view stem) {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() / fmt::format("{}-{}-{}.irec", stem, ::getpid(), counter++)).string();
}

/// Writes `ticks` ticks at `tick_hz` with a keyframe every `keyframe_interval` ticks into a new
/// temp file. The caller removes it (or uses RemoveOnExit).
inline WrittenRecording write_test_recording(uint64_t ticks, uint32_t keyframe_interval, int tick_hz = 60,
                                             int snapshot_hz = 60) {
  WrittenRecording out;
  out.path = temp_recording_path("impulse-playback");
  out.ticks = ticks;
  out.keyframe_interval = keyframe_interval;
  std::FILE* file = std::fopen(out.path.c_str(), "wb");
  if (file == nullptr) return out;
  uint64_t bytes = 0;
  auto write = [&](std::span<const uint8_t> frame) {
    std::fwrite(frame.data(), 1, frame.size(), file);
    bytes += frame.size();
    out.frame_ends.push_back(bytes);
  };

  physics::WorldSettings settings;
  settings.gravity = {0.0f, -9.81f, 0.0f};
  physics::World world(settings);
  physics::BodyDesc ground;
  ground.kind = physics::BodyKind::Static;
  ground.shape = physics::make_box({20.0f, 0.5f, 20.0f});
  ground.position = {0.0f, -0.5f, 0.0f};
  world.create_object(ground);

  RecordingConfig config;
  config.tick_hz = tick_hz;
  config.snapshot_hz = snapshot_hz;
  HeaderInfo info;
  info.config = &config;
  info.scene_name = "playback-test";
  info.keyframe_interval = keyframe_interval;
  info.tick = world.tick();
  info.world_hash = world.world_hash();
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<uint8_t> state;
  world.save_state(state);
  write(encode_header(fbb, info, world.settings(), state, {}));
  out.hashes.push_back(world.world_hash());

  const float dt = 1.0f / static_cast<float>(tick_hz);
  std::vector<ObjectID> live;
  std::vector<ObjectID> joints;
  std::vector<RequestRecord> requests;
  std::vector<flatbuffers::Offset<Request>> scratch;
  auto apply = [&](server::PendingRequest p) {
    p.client_id = 1;
    p.request_id = static_cast<uint32_t>(requests.size() + 1);
    const server::AppliedRequest a = server::apply_to_world(world, p, dt);
    requests.push_back(RequestRecord{p, server::to_result_code(a.error), a.id});
    return a;
  };
  for (uint64_t t = 1; t <= ticks; ++t) {
    requests.clear();
    const float f = static_cast<float>(t);
    if (t % 9 == 1) {  // a new sphere or box, dropped from 2..5 m
      server::PendingRequest p;
      p.type = wire::Message::CreateObject;
      p.desc.shape = t % 2 ? physics::make_sphere(0.4f) : physics::make_box({0.3f, 0.3f, 0.3f});
      p.desc.position = {-4.0f + static_cast<float>(t % 8), 2.0f + static_cast<float>(t % 4), 0.3f * static_cast<float>(t % 3)};
      p.desc.restitution = 0.2f;
      const server::AppliedRequest a = apply(p);
      if (!a.id.is_null()) live.push_back(a.id);
    }
    if (t % 7 == 3 && !live.empty()) {  // a push
      server::PendingRequest p;
      p.type = wire::Message::ApplyImpulse;
      p.id = live[t % live.size()];
      p.vector = {0.5f, 1.0f + 0.01f * f, -0.25f};
      apply(p);
    }
    if (t % 13 == 5 && live.size() >= 2) {  // a joint: a hinge between the two newest bodies, with a motor
      server::PendingRequest p;
      p.type = wire::Message::CreateJoint;
      p.joint.kind = physics::JointKind::Hinge;
      p.joint.body_a = live[live.size() - 1];
      p.joint.body_b = live[live.size() - 2];
      p.joint.anchor = world.get_object(p.joint.body_a)->position;
      p.joint.axis = {0.0f, 0.0f, 1.0f};
      p.joint.enable_motor = true;
      p.joint.motor_speed = 1.0f;
      p.joint.max_motor_torque = 5.0f;
      const server::AppliedRequest a = apply(p);
      if (!a.id.is_null()) {
        joints.push_back(a.id);
        ++out.joints_created;
      }
    }
    if (t % 17 == 8 && !joints.empty()) {  // its motor to a position target
      server::PendingRequest p;
      p.type = wire::Message::SetJointMotor;
      p.id = joints.back();
      p.motor = physics::JointMotor{true, true, 0.0f, 0.5f, 3.0f};
      apply(p);
    }
    if (t % 37 == 36 && !joints.empty()) {  // the oldest joint goes
      server::PendingRequest p;
      p.type = wire::Message::DestroyJoint;
      p.id = joints.front();
      apply(p);
      joints.erase(joints.begin());
    }
    if (t % 31 == 30 && live.size() > 2) {  // a destruction: its index is reused with a new generation
      server::PendingRequest p;
      p.type = wire::Message::DestroyObject;
      p.id = live.front();
      apply(p);
      live.erase(live.begin());
    }
    world.step(dt);
    const uint64_t hash = world.world_hash();
    out.hashes.push_back(hash);
    write(encode_tick(fbb, world.tick(), world.awake_hash(), requests, scratch));
    if (t % keyframe_interval == 0) {
      world.save_state(state);
      write(encode_keyframe(fbb, world.tick(), hash, state));
    }
  }
  std::fclose(file);
  return out;
}

/// Removes a file when the scope ends.
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

}  // namespace impulse::record::test
