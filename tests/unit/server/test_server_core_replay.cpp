// ServerCore in playback mode (impulse-replay serve) on the fake clock: spectators' world-changing
// requests are answered ReadOnly while Raycast and SetInterest work; Pause stops the ticks,
// SetSpeed scales them, Seek moves the snapshot ticks and the snapshot content is the world at
// the target (with acked baselines, objects that vanish exit and new ones enter); bad controls
// are refused with a code, exactly once; a live server refuses ReplayControl.
#include <cmath>
#include <limits>

#include "server/net/snapshot_sender.h"
#include "server/record/playback.h"
#include "unit/record/recording_writer.h"
#include "unit/server/core_fixture.h"

namespace impulse::server {
namespace {

using namespace core_test;
using record::test::RemoveOnExit;

constexpr uint64_t kRecordedTicks = 400;
constexpr uint32_t kKeyframeInterval = 50;

class ReplayCoreTest : public CoreTest {
 protected:
  ReplayCoreTest() : recording_(record::test::write_test_recording(kRecordedTicks, kKeyframeInterval, kTickHz, 30)) {
    ReplayOptions options;
    options.file = recording_.path;
    options.status_interval_s = 3600;
    options.anyone_controls = true;  // these tests are the audience; OnlyControllers... narrows it
    std::string error;
    started_ = core_.start_playback(options, &error);
    EXPECT_TRUE(started_) << error;
  }
  ~ReplayCoreTest() override {
    std::error_code ec;
    std::filesystem::remove(recording_.path, ec);
  }

  /// Sends one ReplayControl from `from` and returns the answers queued at once.
  std::vector<Sent> control(const Endpoint& from, wire::ReplayAction action, uint64_t tick = 0, float speed = 1.0f,
                            uint32_t request_id = 0) {
    const uint32_t id = request_id != 0 ? request_id : next_id(from);
    return receive(from, wire::build_replay_control(fbb_, id, action, tick, speed));
  }
  /// The code of the single RequestResult in `sent`.
  static ResultCode only_code(const std::vector<Sent>& sent) {
    const auto r = results(sent);
    if (r.size() != 1) {
      ADD_FAILURE() << "expected one RequestResult, got " << r.size();
      return ResultCode::Ok;
    }
    return r[0]->code();
  }
  /// The tick of the last Snapshot in `sent` (0: none).
  static uint64_t last_snapshot_tick(const std::vector<Sent>& sent) {
    uint64_t tick = 0;
    for (const Sent& s : sent) {
      if (const auto* snap = s.envelope()->message_as_Snapshot()) tick = snap->tick();
    }
    return tick;
  }
  /// Applies every snapshot of `sent` to its recipient's receiver and acks each applied one with
  /// an ack-only Ping, so the core codes later snapshots as deltas against those baselines.
  void apply_and_ack(const std::vector<Sent>& sent) {
    for (const Sent& s : sent) {
      const auto* snap = s.envelope()->message_as_Snapshot();
      const auto it = receivers_.find(s.to.port());
      if (snap == nullptr || it == receivers_.end()) continue;
      const uint32_t sequence = wire::header_of(*s.envelope()).sequence();
      const auto* data = snap->data();
      const wire::SnapshotError e =
          it->second.apply(sequence, snap->tick(), std::span<const uint8_t>(data->data(), data->size()));
      ASSERT_EQ(e, wire::SnapshotError::None) << wire::to_string(e);
      Bytes ping = copy(wire::build_ping(fbb_, 0));
      wire::stamp_header(ping, wire::PacketHeader(++client_sequence_, sequence, 0xFFFFFFFFu));
      EXPECT_TRUE(receive(s.to, ping).empty());
    }
  }
  /// Checks that `port`'s view holds exactly the world of a fresh playback seeked to `tick`.
  void expect_view_is_recorded_world(uint16_t port, uint64_t tick) {
    physics::World reference;
    record::Playback playback(reference);
    std::string error;
    ASSERT_TRUE(playback.open(recording_.path, &error)) << error;
    ASSERT_TRUE(playback.seek(tick, &error)) << error;
    ASSERT_EQ(reference.world_hash(), recording_.hashes[tick]);
    SnapshotSource source;
    build_snapshot_source(reference, SnapshotSenderConfig{}.quant, &source);
    const wire::SnapshotReceiver& view = receivers_.at(port);
    EXPECT_EQ(view.tick(), tick);
    ASSERT_EQ(view.objects().size(), source.ids.size()) << "at tick " << tick;
    for (size_t row = 0; row < source.ids.size(); ++row) {
      const wire::QuantizedState* state = view.find_state(source.ids[row]);
      ASSERT_NE(state, nullptr) << "object " << source.ids[row].index << "." << source.ids[row].generation;
      EXPECT_TRUE(*state == source.states[row]) << "object " << source.ids[row].index << " at tick " << tick;
    }
  }

  record::test::WrittenRecording recording_;
  bool started_ = false;
  uint32_t client_sequence_ = 0;
};

TEST_F(ReplayCoreTest, SpectatorsAreReadOnlyButMayRaycastAndSetInterest) {
  ASSERT_TRUE(started_);
  const auto accepted = handshake(endpoint(6100), "late spectator");
  ASSERT_EQ(accepted.size(), 1u);
  const auto* m = accepted[0].envelope()->message_as_ConnectAccepted();
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->replay());
  EXPECT_EQ(m->replay_first_tick(), 0u);
  EXPECT_EQ(m->replay_last_tick(), kRecordedTicks);
  const Endpoint a = endpoint(6000);
  ASSERT_NE(connect(a, "spectator"), 0u);

  for (int i = 0; i < 20; ++i) advance(kStep);
  const ObjectID some{1, 1};
  wire::CreateJointArgs point_joint;
  point_joint.body_a = some;
  point_joint.anchor = {0, 1, 0};
  const std::vector<Bytes> writes = {
      copy(wire::build_create_object(fbb_, next_id(a), wire::CreateObjectArgs{})),
      copy(wire::build_destroy_object(fbb_, next_id(a), some)),
      copy(wire::build_apply_force(fbb_, next_id(a), some, {1, 0, 0})),
      copy(wire::build_apply_impulse(fbb_, next_id(a), some, {1, 0, 0})),
      copy(wire::build_set_velocity(fbb_, next_id(a), some, {1, 0, 0})),
      copy(wire::build_apply_torque(fbb_, next_id(a), some, {1, 0, 0})),
      copy(wire::build_set_angular_velocity(fbb_, next_id(a), some, {1, 0, 0})),
      copy(wire::build_set_filter(fbb_, next_id(a), some, 2, 1, 0)),
      copy(wire::build_move_kinematic(fbb_, next_id(a), some, {1, 0, 0}, Quat{})),
      copy(wire::build_create_joint(fbb_, next_id(a), point_joint)),
      copy(wire::build_destroy_joint(fbb_, next_id(a), ObjectID{0, 1})),
      copy(wire::build_set_joint_motor(fbb_, next_id(a), ObjectID{0, 1}, {})),
      copy(wire::build_set_state(fbb_, next_id(a), some, {1, 0, 0}, Quat{}, {}, {})),
  };
  const uint64_t hash = core_.world().world_hash();
  for (const Bytes& w : writes) {
    const auto sent = receive(a, w);  // answered at once, never queued
    const auto r = results(sent);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0]->code(), ResultCode::ReadOnly);
    ASSERT_NE(r[0]->message(), nullptr);
    EXPECT_NE(r[0]->message()->str().find("read-only"), std::string::npos);
  }
  // A fire-and-forget push (request id 0) is refused too, unanswered, and never queued.
  EXPECT_TRUE(receive(a, wire::build_apply_force(fbb_, 0, some, {1, 0, 0})).empty());
  EXPECT_EQ(core_.queued_requests(), 0u);
  EXPECT_EQ(core_.world().world_hash(), hash);
  EXPECT_GE(stats_.requests_rejected.load(), writes.size() + 1);

  // Paused, a raycast onto the ground is still answered, with the current recorded tick.
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Pause)), ResultCode::Ok);
  const uint64_t tick = core_.world().tick();
  EXPECT_TRUE(receive(a, wire::build_raycast(fbb_, next_id(a), {0, 10, 0}, {0, -20, 0}, false)).empty());
  const auto sent = advance(kStep);
  const auto rays = raycasts(sent);
  ASSERT_EQ(rays.size(), 1u);
  EXPECT_EQ(rays[0]->code(), ResultCode::Ok);
  EXPECT_EQ(rays[0]->tick(), tick);
  ASSERT_NE(rays[0]->hits(), nullptr);
  EXPECT_GE(rays[0]->hits()->size(), 1u);

  wire::InterestArgs sphere;
  sphere.kind = wire::InterestKind::Sphere;
  sphere.radius = 5;
  EXPECT_EQ(only_code(receive(a, wire::build_set_interest(fbb_, next_id(a), sphere))), ResultCode::Ok);
}

TEST_F(ReplayCoreTest, PauseStopsTheTicksAndResumePlaysOn) {
  ASSERT_TRUE(started_);
  const Endpoint a = endpoint(6001);
  ASSERT_NE(connect(a), 0u);
  int steps = 0;
  for (int i = 0; i < 30; ++i) advance(kStep, &steps);
  EXPECT_EQ(core_.world().tick(), 30u);  // one recorded tick per tick period at speed 1
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Pause)), ResultCode::Ok);
  EXPECT_TRUE(core_.playback_paused());
  uint64_t snapshots = 0;
  for (int i = 0; i < 60; ++i) {
    const auto sent = advance(kStep, &steps);
    EXPECT_EQ(steps, 0);
    const uint64_t t = last_snapshot_tick(sent);
    if (t != 0) {
      ++snapshots;
      EXPECT_EQ(t, 30u);  // paused snapshots repeat the paused tick
    }
  }
  EXPECT_EQ(core_.world().tick(), 30u);
  EXPECT_GE(snapshots, 25u);  // about 30 per second while paused (late joiners, acks)
  EXPECT_LE(snapshots, 31u);
  EXPECT_EQ(core_.time_to_next_step(), kStep);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Resume)), ResultCode::Ok);
  for (int i = 0; i < 10; ++i) advance(kStep);
  EXPECT_EQ(core_.world().tick(), 40u);
}

TEST_F(ReplayCoreTest, SetSpeedScalesTheTicksPerSecondOfWallTime) {
  ASSERT_TRUE(started_);
  const Endpoint a = endpoint(6002);
  ASSERT_NE(connect(a), 0u);
  // One second of fake wall time per speed, in wake-ups a quarter tick period apart.
  auto ticks_in_one_second = [&] {
    const uint64_t before = core_.world().tick();
    for (int i = 0; i < kTickHz; ++i) {
      for (int k = 0; k < 3; ++k) advance(kStep / 4);
      advance(kStep - 3 * (kStep / 4));
    }
    return core_.world().tick() - before;
  };
  EXPECT_EQ(ticks_in_one_second(), 60u);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::SetSpeed, 0, 2.0f)), ResultCode::Ok);
  EXPECT_DOUBLE_EQ(core_.playback_speed(), 2.0);
  EXPECT_LE(core_.time_to_next_step(), kStep / 2 + std::chrono::nanoseconds(1));
  EXPECT_EQ(ticks_in_one_second(), 120u);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::SetSpeed, 0, 0.5f)), ResultCode::Ok);
  const uint64_t slow = ticks_in_one_second();
  EXPECT_GE(slow, 29u);
  EXPECT_LE(slow, 31u);
  // The world stays on the recorded trajectory whatever the speed.
  EXPECT_EQ(core_.world().world_hash(), recording_.hashes[core_.world().tick()]);
  EXPECT_EQ(core_.playback()->mismatches(), 0u) << core_.playback()->first_mismatch();
}

TEST_F(ReplayCoreTest, SeekMovesTheSnapshotTicksAndTheViewIsTheRecordedWorld) {
  ASSERT_TRUE(started_);
  const Endpoint a = endpoint(6003);
  ASSERT_NE(connect(a), 0u);
  // Play to tick 120 with acked snapshots, so the sender holds baselines for every object.
  for (int i = 0; i < 120; ++i) apply_and_ack(advance(kStep));
  ASSERT_EQ(core_.world().tick(), 120u);
  expect_view_is_recorded_world(a.port(), 120);
  const size_t objects_at_120 = receivers_.at(a.port()).objects().size();

  // Paused seek backwards (before most objects were created): the next snapshot is exactly the
  // target tick and holds exactly its objects (the others exited).
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Pause)), ResultCode::Ok);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, 37)), ResultCode::Ok);
  EXPECT_EQ(core_.world().tick(), 37u);
  auto sent = advance(kStep);
  EXPECT_EQ(last_snapshot_tick(sent), 37u);
  apply_and_ack(sent);
  expect_view_is_recorded_world(a.port(), 37);
  EXPECT_LT(receivers_.at(a.port()).objects().size(), objects_at_120);

  // Seek forwards across keyframes (objects enter again; destroyed ids came back with new
  // generations), then play on: snapshots continue from the target.
  // A seek re-simulates at most a quarter tick period of wall time per wake-up (the seek-flood
  // bound), so under a sanitizer it may take several wake-ups. Meanwhile the spectators keep their
  // snapshot rate (ReplayServeSeekFlood), with the intermediate ticks the re-simulation passes
  // (331 of a seek to 333 in one sanitizer run): wait for the target's.
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, 333)), ResultCode::Ok);
  sent = advance(kStep);
  for (int i = 0; i < 1000 && last_snapshot_tick(sent) != 333; ++i) {
    apply_and_ack(sent);
    sent = advance(kStep);
  }
  EXPECT_EQ(last_snapshot_tick(sent), 333u);
  apply_and_ack(sent);
  expect_view_is_recorded_world(a.port(), 333);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Resume)), ResultCode::Ok);
  for (int i = 0; i < 10; ++i) apply_and_ack(advance(kStep));
  EXPECT_EQ(core_.world().tick(), 343u);
  expect_view_is_recorded_world(a.port(), 342);  // 30 Hz snapshots: the even ticks
  EXPECT_EQ(core_.playback()->mismatches(), 0u) << core_.playback()->first_mismatch();
}

TEST_F(ReplayCoreTest, BadControlsAreRefusedWithACodeExactlyOnce) {
  ASSERT_TRUE(started_);
  const Endpoint a = endpoint(6004);
  ASSERT_NE(connect(a), 0u);
  for (int i = 0; i < 10; ++i) advance(kStep);
  const float bad_speeds[] = {0.0f, 1.0f / 32.0f, 16.5f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity()};
  for (const float speed : bad_speeds) {
    const auto sent = control(a, wire::ReplayAction::SetSpeed, 0, speed);
    const auto r = results(sent);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0]->code(), ResultCode::InvalidArgument) << speed;
    ASSERT_NE(r[0]->message(), nullptr);
    EXPECT_NE(r[0]->message()->str().find("speed"), std::string::npos);
  }
  EXPECT_DOUBLE_EQ(core_.playback_speed(), 1.0);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, kRecordedTicks + 1)), ResultCode::InvalidArgument);
  EXPECT_EQ(core_.world().tick(), 10u);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::SetSpeed, 0, 1.0f / 16.0f)), ResultCode::Ok);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::SetSpeed, 0, 16.0f)), ResultCode::Ok);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::SetSpeed, 0, 1.0f)), ResultCode::Ok);

  // Exactly once: a resent Seek is answered again but not applied again.
  const uint32_t seek_id = next_id(a);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, 5, 1.0f, seek_id)), ResultCode::Ok);
  EXPECT_EQ(core_.world().tick(), 5u);
  for (int i = 0; i < 10; ++i) advance(kStep);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, 5, 1.0f, seek_id)), ResultCode::Ok);
  EXPECT_EQ(core_.world().tick(), 15u);
}

TEST_F(ReplayCoreTest, SeeksAreCoalescedAndStartAtMostFivePerSecond) {
  ASSERT_TRUE(started_);
  const Endpoint a = endpoint(6007);
  ASSERT_NE(connect(a), 0u);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Pause)), ResultCode::Ok);
  // Twenty seeks at one instant, each answered Ok: the first five start (the burst; short seeks
  // land at once), the other fifteen coalesce into the last one, which waits for a start.
  for (uint64_t i = 1; i <= 20; ++i) {
    EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, 10 * i)), ResultCode::Ok);
  }
  EXPECT_EQ(core_.world().tick(), 50u);
  // 5 starts per second: the next is due 200 ms later, and lands on the last target.
  size_t snapshots = 0;
  auto count = [&](const std::vector<Sent>& sent) {
    for (const Sent& s : sent) snapshots += s.type() == Message::Snapshot;
  };
  for (int i = 0; i < 11; ++i) count(advance(kStep));
  EXPECT_EQ(core_.world().tick(), 50u);
  for (int i = 0; i < 2; ++i) count(advance(kStep));
  EXPECT_EQ(core_.world().tick(), 200u);
  EXPECT_EQ(core_.world().world_hash(), recording_.hashes[200]);
  // Snapshots kept coming meanwhile (paused and seeking: one per 30 Hz period, and one on landing).
  EXPECT_GE(snapshots, 6u);
  EXPECT_TRUE(core_.playback_paused());
}

TEST_F(ReplayCoreTest, TheEndOfTheRecordingPausesOnItsLastTick) {
  ASSERT_TRUE(started_);
  const Endpoint a = endpoint(6005);
  ASSERT_NE(connect(a), 0u);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, kRecordedTicks - 5)), ResultCode::Ok);
  for (int i = 0; i < 20; ++i) advance(kStep);
  EXPECT_EQ(core_.world().tick(), kRecordedTicks);
  EXPECT_TRUE(core_.playback_paused());
  EXPECT_EQ(core_.world().world_hash(), recording_.hashes[kRecordedTicks]);
  // Resume at the end plays the recording again from its first tick.
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Resume)), ResultCode::Ok);
  EXPECT_EQ(core_.world().tick(), 0u);
  for (int i = 0; i < 3; ++i) advance(kStep);
  EXPECT_EQ(core_.world().tick(), 3u);
  EXPECT_EQ(core_.world().world_hash(), recording_.hashes[3]);
}

// Attack F: one spectator paused the shared timeline for everyone. Only the operator's choice
// may control it: nobody by default, every spectator with anyone_controls, or the connect-token
// client ids in `controllers` (an anonymous session's id is the server's numbering: never one).
TEST_F(ReplayCoreTest, OnlyControllersMayControlTheTimeline) {
  ASSERT_TRUE(started_);
  ReplayOptions options;
  options.file = recording_.path;
  options.status_interval_s = 3600;
  std::string error;
  ASSERT_TRUE(core_.start_playback(options, &error)) << error;  // nobody controls
  const Endpoint a = endpoint(6400);
  const uint32_t a_id = connect(a);
  ASSERT_NE(a_id, 0u);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Pause)), ResultCode::NotController);
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Seek, 100)), ResultCode::NotController);
  EXPECT_FALSE(core_.playback_paused());
  EXPECT_EQ(core_.rejects().count(RejectReason::NotController), 2u);

  // Token client id 7 is a controller; 8 is not; nor is the anonymous session whose number is
  // listed too (it proves nothing).
  options.controllers = {7, a_id};
  ASSERT_TRUE(core_.start_playback(options, &error)) << error;
  EXPECT_EQ(only_code(control(a, wire::ReplayAction::Pause)), ResultCode::NotController);
  receive(a, wire::build_disconnect(fbb_, "bye"));  // a slot for the two token spectators
  const security::TokenKey key = security::make_token_key();
  core_.set_token_key(key);
  core_.set_unix_time_source([] { return uint64_t{1'800'000'000}; });
  const auto token_session = [&](const Endpoint& from, uint64_t client_id) {
    const security::Token token = security::seal_token(key, security::TokenClaims{client_id, 1'800'000'100, 0});
    binding_[from.port()] = security::token_session_secret(key, token);
    const auto challenge = receive(from, build_connect("spectator", {}, token));
    const auto* cookie = challenge.at(0).envelope()->message_as_Challenge()->cookie();
    const auto accepted = receive(from, build_connect("spectator", Bytes(cookie->begin(), cookie->end()), token));
    EXPECT_EQ(accepted.at(0).type(), Message::ConnectAccepted);
    receive(from, wire::build_ping(fbb_, 0));  // confirmed
  };
  const Endpoint seven = endpoint(6420), eight = endpoint(6421);
  token_session(seven, 7);
  token_session(eight, 8);
  EXPECT_EQ(only_code(control(eight, wire::ReplayAction::Pause)), ResultCode::NotController);
  EXPECT_FALSE(core_.playback_paused());
  EXPECT_EQ(only_code(control(seven, wire::ReplayAction::Pause)), ResultCode::Ok);
  EXPECT_TRUE(core_.playback_paused());
  EXPECT_EQ(only_code(control(eight, wire::ReplayAction::Resume)), ResultCode::NotController);
  EXPECT_TRUE(core_.playback_paused());
  EXPECT_EQ(only_code(control(seven, wire::ReplayAction::Resume)), ResultCode::Ok);
  EXPECT_FALSE(core_.playback_paused());
}

TEST_F(CoreTest, ALiveServerRefusesReplayControl) {
  const Endpoint a = endpoint(6006);
  ASSERT_NE(connect(a), 0u);
  const auto sent = receive(a, wire::build_replay_control(fbb_, next_id(a), wire::ReplayAction::Pause));
  const auto r = results(sent);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]->code(), ResultCode::NotAReplay);
  ASSERT_NE(r[0]->message(), nullptr);
  EXPECT_NE(r[0]->message()->str().find("live"), std::string::npos);
  const auto live = handshake(endpoint(6106));
  ASSERT_EQ(live.size(), 1u);
  const auto* accepted = live[0].envelope()->message_as_ConnectAccepted();
  ASSERT_NE(accepted, nullptr);
  EXPECT_FALSE(accepted->replay());
}

TEST(ReplayCoreStart, BadOptionsAreRefusedWithAReason) {
  ServerConfig config;
  ServerStats stats;
  ServerCore core(config, {0, -9.81f, 0}, stats);
  ReplayOptions options;
  options.file = "/nonexistent/recording.irec";
  std::string error;
  EXPECT_FALSE(core.start_playback(options, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;

  const auto rec = record::test::write_test_recording(30, 10);
  RemoveOnExit remove{rec.path};
  options.file = rec.path;
  options.from_tick = 31;
  EXPECT_FALSE(core.start_playback(options, &error));
  EXPECT_NE(error.find("--from"), std::string::npos) << error;
  options.from_tick = 12;
  options.speed = 20;
  EXPECT_FALSE(core.start_playback(options, &error));
  EXPECT_NE(error.find("--speed"), std::string::npos) << error;
  options.speed = 2;
  ASSERT_TRUE(core.start_playback(options, &error)) << error;
  EXPECT_EQ(core.world().tick(), 12u);
  EXPECT_EQ(core.world().world_hash(), rec.hashes[12]);
  EXPECT_EQ(core.config().snapshot_hz, 60);  // the recording's rate
}

}  // namespace
}  // namespace impulse::server
