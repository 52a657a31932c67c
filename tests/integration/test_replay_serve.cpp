// Spectators (docs/RECORDING.md, "Serving a recording"): a scripted session of two real clients
// is recorded by a real Server over loopback UDP, each client keeping the object states it
// received per snapshot tick. The
// recording is then served in-process (impulse-replay serve's Server in playback mode) to a
// spectator impulse::Client, whose states at every tick both saw must equal the recorded
// clients' bit for bit (same world, same quantisation). Then the controls over the real protocol:
// seek (the next snapshots are at the target and match the recorded view there), pause (the
// ticks stop), speed 2 (the tick rate roughly doubles), and writes answered ReadOnly.
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "integration/harness.h"
#include "server/record/replay.h"

namespace impulse::test {
namespace {

using Views = std::map<uint64_t, std::vector<ObjectState>>;  // tick -> objects, sorted by id

std::string temp_recording(std::string_view stem) {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() / fmt::format("{}-{}-{}.irec", stem, ::getpid(), counter++)).string();
}

bool same_bits(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

/// Compares the objects both views hold at one tick; returns how many were compared, and adds a
/// failure naming the first field that differs.
size_t compare_views(const std::vector<ObjectState>& recorded, const std::vector<ObjectState>& spectator,
                     uint64_t tick, std::string_view who) {
  size_t compared = 0;
  for (const ObjectState& r : recorded) {
    const ObjectState* s = find_in(spectator, r.id);
    if (s == nullptr) {
      ADD_FAILURE() << who << " saw object " << r.id.index << "." << r.id.generation << " at tick " << tick
                    << " but the spectator did not";
      continue;
    }
    ++compared;
    EXPECT_TRUE(same_bits(&r.position, &s->position, sizeof(Vec3))) << who << " tick " << tick << " position";
    EXPECT_TRUE(same_bits(&r.orientation, &s->orientation, sizeof(Quat))) << who << " tick " << tick << " orientation";
    EXPECT_TRUE(same_bits(&r.velocity, &s->velocity, sizeof(Vec3))) << who << " tick " << tick << " velocity";
    EXPECT_TRUE(same_bits(&r.angular_velocity, &s->angular_velocity, sizeof(Vec3)))
        << who << " tick " << tick << " angular velocity";
    EXPECT_EQ(r.sleeping, s->sleeping) << who << " tick " << tick;
  }
  EXPECT_EQ(recorded.size(), spectator.size()) << who << " tick " << tick;
  return compared;
}

/// impulse-replay serve in-process: a Server in playback mode on 127.0.0.1, on its own thread.
class RunningReplay {
 public:
  explicit RunningReplay(const std::string& file, double speed = 1.0, int snapshot_hz = 0)
      : RunningReplay(make_config(), make_replay(file, speed, snapshot_hz)) {}
  RunningReplay(const server::ServerConfig& config, const server::ReplayOptions& replay) : server_(config, replay) {
    started_ = server_.start(&error_);
    if (started_) thread_ = std::thread([this] { server_.run(); });
  }
  ~RunningReplay() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  bool started() const { return started_; }
  const std::string& error() const { return error_; }
  uint16_t port() const { return server_.local_port(); }

  // The defaults of these tests, for one that adjusts them.
  static server::ServerConfig make_config() {
    server::ServerConfig c;
    c.bind = "127.0.0.1";
    c.port = 0;
    c.log_level = "off";
    c.stats_interval_s = 3600;
    return c;
  }
  static server::ReplayOptions make_replay(const std::string& file, double speed, int snapshot_hz) {
    server::ReplayOptions r;
    r.file = file;
    r.speed = speed;
    r.snapshot_hz = snapshot_hz;
    r.status_interval_s = 3600;
    r.anyone_controls = true;  // these spectators are the audience; ATokenController... narrows it
    return r;
  }

 private:
  server::Server server_;
  bool started_ = false;
  std::string error_;
  std::thread thread_;
};

class ReplayServe : public ::testing::Test {
 protected:
  // One scripted session, recorded once: two clients create bodies and push them.
  static void SetUpTestSuite() {
    path_ = new std::string(temp_recording("impulse-serve"));
    views_ = new std::vector<Views>(2);
    ServerOptions options;
    options.record_file = *path_;
    options.keyframe_seconds = 0.5;  // several keyframes, so seeks restore one
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver drivers[2];
    std::vector<ObjectID> bodies[2];
    for (int c = 0; c < 2; ++c) {
      std::string error;
      ASSERT_TRUE(drivers[c].connect(server.port(), &error, fmt::format("recorded-{}", c))) << error;
    EXPECT_FALSE(drivers[c].client.replay_range().has_value()) << "a live server is no replay";
      for (int b = 0; b < 3; ++b) {
        const Vec3 at{-3.0f + 3.0f * static_cast<float>(c), 0.6f + 1.2f * static_cast<float>(b), 0.4f * static_cast<float>(b)};
        const ObjectID id = drivers[c].create_ok(b % 2 ? make_box({0.4f, 0.3f, 0.5f}, at, 2.0f) : make_sphere(0.45f, at));
        ASSERT_FALSE(id.is_null());
        bodies[c].push_back(id);
      }
    }
    for (int round = 0; round < 12; ++round) {
      uint32_t sent[2];
      for (int c = 0; c < 2; ++c) {
        const ObjectID target = bodies[c][static_cast<size_t>(round) % bodies[c].size()];
        sent[c] = drivers[c].client.apply_impulse(target, {0.3f * static_cast<float>(c + 1), 2.5f, -0.2f});
      }
      for (int c = 0; c < 2; ++c) ASSERT_TRUE(drivers[c].wait_result(sent[c]).has_value());
      const uint64_t now = drivers[0].client.server_tick();
      ASSERT_NE(drivers[0].wait_snapshot_after(now + 4), 0u);
    }
    const uint64_t end = drivers[0].client.server_tick() + 20;
    for (int c = 0; c < 2; ++c) ASSERT_NE(drivers[c].wait_snapshot_after(end), 0u);
    server.stop();
    for (int c = 0; c < 2; ++c) (*views_)[c] = drivers[c].snapshots;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove(*path_, ec);
    delete path_;
    delete views_;
  }

  static std::string* path_;
  static std::vector<Views>* views_;
};

std::string* ReplayServe::path_ = nullptr;
std::vector<Views>* ReplayServe::views_ = nullptr;

TEST_F(ReplayServe, SpectatorSeesWhatTheRecordedClientsSaw) {
  record::RecordingInfo info;
  std::string error;
  ASSERT_TRUE(record::read_info(*path_, &info, &error)) << error;
  // The live server spreads its clients' snapshots over the ticks between snapshot ticks, so the
  // spectator gets every tick. At the recorded rate: a late wake-up steps several ticks and
  // snapshots the last, so above speed 1 a loaded machine leaves fewer ticks in common.
  RunningReplay replay(*path_, 1.0, 60);
  ASSERT_TRUE(replay.started()) << replay.error();
  ClientDriver spectator;
  ASSERT_TRUE(spectator.connect(replay.port(), &error, "spectator")) << error;
  // The SDK tells a spectator that it watches a recording, and the ticks it may seek to
  // (ConnectAccepted; impulse-viewer's timeline).
  ASSERT_TRUE(spectator.client.replay_range().has_value());
  EXPECT_EQ(spectator.client.replay_range()->first_tick, info.start_tick);
  EXPECT_EQ(spectator.client.replay_range()->last_tick, info.last_tick);
  const auto play_time = std::chrono::milliseconds(
      static_cast<int64_t>(1000.0 * static_cast<double>(info.last_tick - info.start_tick) / 60.0));
  ASSERT_TRUE(spectator.poll_until([&] { return spectator.client.snapshot_tick() >= info.last_tick; },
                                   play_time + kWaitTimeout))
      << "the spectator's last snapshot tick is " << spectator.client.snapshot_tick() << " of " << info.last_tick;

  for (int c = 0; c < 2; ++c) {
    size_t common_ticks = 0, compared = 0;
    for (const auto& [tick, objects] : (*views_)[c]) {
      const auto it = spectator.snapshots.find(tick);
      if (it == spectator.snapshots.end()) continue;
      ++common_ticks;
      compared += compare_views(objects, it->second, tick, fmt::format("recorded client {}", c));
    }
    // About 85 snapshot ticks each; wake-ups that step two ticks on either side miss some.
    EXPECT_GE(common_ticks, 20u) << "recorded client " << c << " saw " << (*views_)[c].size() << " ticks";
    EXPECT_GE(compared, common_ticks * 6) << "six bodies (and the ground) in every view";
  }
}

TEST_F(ReplayServe, ControlsPauseSeekAndSpeedTheSharedTimeline) {
  record::RecordingInfo info;
  std::string error;
  ASSERT_TRUE(record::read_info(*path_, &info, &error)) << error;
  RunningReplay replay(*path_);
  ASSERT_TRUE(replay.started()) << replay.error();
  ClientDriver spectator;
  ASSERT_TRUE(spectator.connect(replay.port(), &error, "spectator")) << error;
  ASSERT_NE(spectator.wait_snapshot_after(0), 0u);

  // Writes are refused; reads work.
  const auto write = spectator.wait_result(spectator.client.create_object(make_sphere(0.5f, {0, 3, 0})));
  ASSERT_TRUE(write.has_value());
  EXPECT_EQ(write->code, ResultCode::ReadOnly);
  const auto ray = spectator.wait_raycast(spectator.client.raycast({0, 10, 0}, {0, -20, 0}));
  ASSERT_TRUE(ray.has_value());
  EXPECT_TRUE(ray->result.ok());
  EXPECT_FALSE(ray->hits.empty());

  // Seek to a tick the recorded client 0 saw: every later snapshot is at or after it, the first
  // exactly at it (paused first, so it stays there) and equal to the recorded view.
  const Views& recorded = (*views_)[0];
  auto pick = recorded.begin();
  std::advance(pick, static_cast<std::ptrdiff_t>(recorded.size() / 3));
  const uint64_t target = pick->first;
  auto control = [&](ReplayAction action, uint64_t tick = 0, float speed = 1.0f) {
    const auto r = spectator.wait_result(spectator.client.replay_control(action, tick, speed));
    EXPECT_TRUE(r.has_value() && r->ok()) << (r ? r->message : std::string("no answer"));
    spectator.snapshots.clear();  // anything older arrived before the answer
  };
  control(ReplayAction::Pause);
  control(ReplayAction::Seek, target);
  ASSERT_TRUE(spectator.poll_until([&] { return spectator.snapshots.count(target) == 1; }));
  EXPECT_EQ(spectator.snapshots.begin()->first, target);
  EXPECT_EQ(spectator.snapshots.rbegin()->first, target);  // paused: it stays there
  EXPECT_GE(compare_views(pick->second, spectator.snapshots.at(target), target, "after the seek"), 6u);

  // Paused: snapshots keep coming (about 30 per second) but their tick does not move.
  ASSERT_TRUE(spectator.poll_until([&] { return spectator.snapshots.size() >= 1 && spectator.client.stats().snapshots_completed >= 5; }));
  const uint64_t completed = spectator.client.stats().snapshots_completed;
  ASSERT_TRUE(spectator.poll_until([&] { return spectator.client.stats().snapshots_completed >= completed + 5; }));
  EXPECT_EQ(spectator.snapshots.size(), 1u);
  EXPECT_EQ(spectator.client.snapshot_tick(), target);

  // Speed: the recorded ticks per second of wall time, over a bounded window, at 1 and at 2.
  auto measure_rate = [&](float speed) {
    control(ReplayAction::Seek, info.start_tick);
    control(ReplayAction::SetSpeed, 0, speed);
    control(ReplayAction::Resume);
    EXPECT_NE(spectator.wait_snapshot_after(info.start_tick + 2), 0u);
    const uint64_t t0 = spectator.client.snapshot_tick();
    const Clock::time_point w0 = Clock::now();
    spectator.poll_until([&] { return spectator.client.snapshot_tick() >= t0 + 45; });
    const double seconds = std::chrono::duration<double>(Clock::now() - w0).count();
    control(ReplayAction::Pause);
    return static_cast<double>(spectator.client.snapshot_tick() - t0) / seconds;
  };
  const double rate1 = measure_rate(1.0f);
  const double rate2 = measure_rate(2.0f);
  EXPECT_GT(rate1, 40.0);
  EXPECT_LT(rate1, 80.0);
  EXPECT_GT(rate2 / rate1, 1.5) << rate1 << " vs " << rate2 << " ticks/s";
  EXPECT_LT(rate2 / rate1, 2.6) << rate1 << " vs " << rate2 << " ticks/s";

  // Out of range: refused with a code and a message.
  const auto bad = spectator.wait_result(spectator.client.replay_control(ReplayAction::Seek, info.last_tick + 1));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->code, ResultCode::InvalidArgument);
  EXPECT_FALSE(bad->message.empty());
}

// Row F of issue 16: one spectator sends 100 Seeks per second across a recording whose every
// seek re-simulates hundreds of ticks of a churning heap of spheres (no keyframe but the first); another
// spectator must keep at least 95 % of its snapshot rate, and the last seek must still land.
TEST(ReplayServeSeekFlood, OtherSpectatorsKeepTheirSnapshotRate) {
  const std::string path = temp_recording("impulse-seek-flood");
  struct RemoveAtEnd {
    std::string path;
    ~RemoveAtEnd() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } remove_at_end{path};
  {
    ServerOptions options;
    options.record_file = path;  // keyframes every 10 s: a seek to the end replays from the start
    options.snapshot_hz = 30;
    // One client builds the whole heap: 400 bodies and 4.5 m paddles are beyond the per-client
    // defaults (256 objects, --max-client-extent 4 m).
    options.configure = [](server::ServerConfig& c) {
      c.max_objects_per_client = 1024;
      c.max_client_extent = 0;
    };
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver maker;
    std::string error;
    ASSERT_TRUE(maker.connect(server.port(), &error, "heap")) << error;
    // Two kinematic paddles spinning through the heap keep it awake: every tick costs work.
    for (int p = 0; p < 2; ++p) {
      ObjectDesc paddle = make_box({4.5f, 0.3f, 0.3f}, {0.0f, 0.4f + 1.2f * static_cast<float>(p), 0.0f});
      paddle.kind = BodyKind::Kinematic;
      paddle.angular_velocity = {0.0f, p == 0 ? 2.0f : -2.0f, 0.0f};
      ASSERT_FALSE(maker.create_ok(paddle).is_null());
    }
    std::vector<uint32_t> pending;
    for (int i = 0; i < 400; ++i) {
      const Vec3 at{0.9f * static_cast<float>(i % 10) - 4.5f, 0.5f + static_cast<float>(i / 100),
                    0.9f * static_cast<float>((i / 10) % 10) - 4.5f};
      pending.push_back(maker.client.create_object(make_sphere(0.4f, at)));
      if (pending.size() == 100 || i == 399) {
        for (const uint32_t id : pending) {
          const auto r = maker.wait_result(id);
          ASSERT_TRUE(r && r->ok());
        }
        pending.clear();
      }
    }
    const uint64_t end = maker.client.server_tick() + 240;
    ASSERT_NE(maker.wait_snapshot_after(end, kWaitTimeout + milliseconds{4000}), 0u);
    server.stop();
  }
  record::RecordingInfo info;
  std::string error;
  ASSERT_TRUE(record::read_info(path, &info, &error)) << error;
  ASSERT_GE(info.last_tick - info.start_tick, 240u);

  RunningReplay replay(path, 1.0, 30);
  ASSERT_TRUE(replay.started()) << replay.error();
  ClientDriver watcher, seeker;
  ASSERT_TRUE(watcher.connect(replay.port(), &error, "watcher")) << error;
  ASSERT_TRUE(seeker.connect(replay.port(), &error, "seeker")) << error;
  ASSERT_NE(watcher.wait_snapshot_after(0), 0u);

  // One window of the watcher's snapshots; with `flood`, a Seek every 10 ms from the seeker,
  // alternately to the end (re-simulating the whole recording) and back to the start.
  constexpr milliseconds kWindow{2000};
  auto measure = [&](bool flood, int* seeks) {
    const uint64_t s0 = watcher.client.stats().snapshots_completed;
    const Clock::time_point start = Clock::now(), end = start + kWindow;
    Clock::time_point next_seek = start;
    for (int i = 0; i < kMaxIterations && Clock::now() < end; ++i) {
      if (flood && Clock::now() >= next_seek) {
        const uint64_t target = *seeks % 2 == 0 ? info.last_tick : info.start_tick + 1;
        if (seeker.client.replay_control(ReplayAction::Seek, target) != 0) ++*seeks;
        next_seek += milliseconds{10};  // a rate, not a synchronisation
      }
      watcher.poll_once(milliseconds{1});
      seeker.poll_once(milliseconds{0});
    }
    return watcher.client.stats().snapshots_completed - s0;
  };
  int seeks = 0;
  const uint64_t before = measure(false, &seeks);
  const uint64_t during = measure(true, &seeks);
  EXPECT_GE(seeks, 150) << "the flood sent too few seeks to mean anything";
  EXPECT_GE(during * 100, before * 95) << before << " -> " << during << " snapshots in " << kWindow.count() << " ms";
  std::printf("seek flood: %d seeks in %lld ms; the other spectator's snapshots %llu -> %llu\n", seeks,
              static_cast<long long>(kWindow.count()), static_cast<unsigned long long>(before),
              static_cast<unsigned long long>(during));

  // The last seek still lands: the world gets there and stays (paused at the end).
  const auto last = seeker.wait_result(seeker.client.replay_control(ReplayAction::Seek, info.last_tick));
  ASSERT_TRUE(last && last->ok());
  // Re-simulating to the end is the slow part under a sanitizer beside another test (ctest -j2).
  EXPECT_TRUE(watcher.poll_until([&] { return watcher.client.snapshot_tick() == info.last_tick; },
                                 kWaitTimeout + milliseconds{4000}))
      << "the watcher is at tick " << watcher.client.snapshot_tick() << ", the seek went to " << info.last_tick;
}

// Attack F over loopback: serve --token-key KEY --controller 7. Spectator 7 pauses and resumes
// the shared timeline; spectator 8 (a valid token too) gets NotController and changes nothing.
TEST_F(ReplayServe, ATokenControllerPausesAndAnotherTokenSpectatorCannot) {
  TempTokenKey key;
  server::ServerConfig config = RunningReplay::make_config();
  config.token_key_file = key.path;
  server::ReplayOptions options = RunningReplay::make_replay(*path_, 1.0, 0);
  options.anyone_controls = false;
  options.controllers = {7};
  options.loop = true;
  RunningReplay replay(config, options);
  ASSERT_TRUE(replay.started()) << replay.error();
  ClientDriver controller, other;
  std::string error;
  ASSERT_TRUE(controller.client.connect("127.0.0.1", replay.port(), milliseconds{2000}, &error, "seven",
                                        key.client_token(7)))
      << error;
  ASSERT_TRUE(other.client.connect("127.0.0.1", replay.port(), milliseconds{2000}, &error, "eight", key.client_token(8)))
      << error;
  ASSERT_NE(other.wait_snapshot_after(0), 0u);

  const auto refused = other.wait_result(other.client.replay_control(ReplayAction::Pause));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, ResultCode::NotController);
  EXPECT_NE(refused->message.find("--controller"), std::string::npos) << refused->message;
  // Still playing: the ticks advance for everyone.
  const uint64_t at = other.client.snapshot_tick();
  EXPECT_NE(other.wait_snapshot_after(at + 5), 0u);

  const auto paused = controller.wait_result(controller.client.replay_control(ReplayAction::Pause));
  ASSERT_TRUE(paused.has_value());
  EXPECT_EQ(paused->code, ResultCode::Ok);
  const auto resumed_by_other = other.wait_result(other.client.replay_control(ReplayAction::Resume));
  ASSERT_TRUE(resumed_by_other.has_value());
  EXPECT_EQ(resumed_by_other->code, ResultCode::NotController);
  const auto resumed = controller.wait_result(controller.client.replay_control(ReplayAction::Resume));
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->code, ResultCode::Ok);
}

TEST(ReplayServeLive, ALiveServerRefusesReplayControl) {
  RunningServer server;
  ASSERT_TRUE(server.started()) << server.error();
  ClientDriver client;
  std::string error;
  ASSERT_TRUE(client.connect(server.port(), &error)) << error;
  const auto r = client.wait_result(client.client.replay_control(ReplayAction::Pause));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, ResultCode::NotAReplay);
}

}  // namespace
}  // namespace impulse::test
