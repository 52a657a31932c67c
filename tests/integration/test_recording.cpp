// Session recording end to end: a real Server records a scripted session of three real clients
// over loopback UDP (hundreds of requests of every kind); the recording verifies in-process and
// through the impulse-replay binary; tampering with one request is reported at exactly its tick;
// export at a tick rebuilds the world the server had; and a real impulse-server process killed
// with SIGKILL leaves a file that reads and verifies up to its last complete frame.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "integration/harness.h"
#include "server/app/scene.h"
#include "server/record/playback.h"
#include "server/record/reader.h"
#include "server/record/replay.h"

extern char** environ;

namespace impulse::test {
namespace {

using record::ReadStatus;
using record::RecordingReader;

constexpr int kClients = 3;
constexpr int kRounds = 30;
constexpr int kBodiesPerClient = 4;
/// Client 0 destroys one body and disconnects: the server destroys its other bodies (--on-disconnect
/// destroy), recorded as DestroyObject requests like any other.
constexpr int kDepartedBodies = kBodiesPerClient - 1;

std::string temp_path(std::string_view stem) {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          fmt::format("{}-{}-{}.irec", stem, ::getpid(), counter++))
      .string();
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// A recording test server: a keyframe every 30 ticks so a session has several; with `record_dir`,
/// `target` is a --record-dir directory rotated every 0.01 min (a new file every 36 ticks).
ServerOptions recording_options(const std::string& target, bool record_dir = false) {
  ServerOptions o;
  (record_dir ? o.record_dir : o.record_file) = target;
  if (record_dir) o.record_rotate_minutes = 0.01;
  o.keyframe_seconds = 0.5;
  return o;
}

/// Sends every request of one round for one client; returns the request ids sent.
std::vector<uint32_t> send_round(Client& client, std::span<const ObjectID> bodies, int round) {
  const float r = static_cast<float>(round);
  const ObjectID target = bodies[static_cast<size_t>(round) % bodies.size()];
  std::vector<uint32_t> ids;
  ids.push_back(client.apply_impulse(target, {0.5f, 1.0f + 0.01f * r, -0.25f}));
  ids.push_back(client.apply_force(target, {2.0f, 0.0f, 1.0f}, Vec3{0.0f, 0.1f * r, 0.0f}));
  ids.push_back(client.apply_torque(target, {0.0f, 0.3f, 0.1f}));
  ids.push_back(client.set_velocity(bodies[(static_cast<size_t>(round) + 1) % bodies.size()], {0.0f, 2.0f, 0.1f * r}));
  ids.push_back(client.set_angular_velocity(target, {0.0f, 1.0f, 0.0f}));
  ids.push_back(client.destroy(ObjectID{4000, 1}));  // stale: recorded with StaleId
  ids.push_back(client.raycast({0.0f, 10.0f, 0.0f}, {0.0f, -20.0f, 0.0f}));
  return ids;
}

class Recording : public ::testing::Test {
 protected:
  // One scripted session, recorded once for every test of the suite.
  static void SetUpTestSuite() {
    path_ = new std::string(temp_path("impulse-session"));
    RunningServer server(recording_options(*path_));
    ASSERT_TRUE(server.started()) << server.error();
    std::vector<std::unique_ptr<ClientDriver>> drivers;
    std::vector<std::vector<ObjectID>> bodies(kClients);
    for (int c = 0; c < kClients; ++c) {
      drivers.push_back(std::make_unique<ClientDriver>());
      std::string error;
      ASSERT_TRUE(drivers[c]->connect(server.port(), &error, fmt::format("recorded-{}", c))) << error;
      for (int b = 0; b < kBodiesPerClient; ++b) {
        const Vec3 at{-6.0f + 4.0f * static_cast<float>(c), 1.0f + 1.5f * static_cast<float>(b), 0.5f * static_cast<float>(b)};
        const ObjectID id = drivers[c]->create_ok(b % 2 ? make_box({0.4f, 0.3f, 0.5f}, at, 2.0f)
                                                        : make_sphere(0.45f, at, 1.0f, 0.3f));
        ASSERT_FALSE(id.is_null());
        bodies[c].push_back(id);
      }
    }
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::vector<uint32_t>> sent(kClients);
      for (int c = 0; c < kClients; ++c) sent[c] = send_round(drivers[c]->client, bodies[c], round);
      for (int c = 0; c < kClients; ++c) {
        ClientDriver& d = *drivers[c];
        const bool answered = d.poll_until([&] {
          for (size_t i = 0; i + 1 < sent[c].size(); ++i) {
            if (!d.find_result(sent[c][i])) return false;
          }
          for (const auto& ray : d.raycasts) {
            if (ray.result.request_id == sent[c].back()) return true;
          }
          return false;
        });
        ASSERT_TRUE(answered) << "client " << c << " round " << round;
      }
    }
    // Every client destroys one of its bodies; the first leaves, the others stay until shutdown.
    for (int c = 0; c < kClients; ++c) {
      const auto r = drivers[c]->wait_result(drivers[c]->client.destroy(bodies[c][0]));
      ASSERT_TRUE(r && r->ok());
    }
    drivers[0]->client.disconnect("done");
    // Let the bodies fall and settle for 80 more ticks, so the recording spans several keyframes.
    const uint64_t now_tick = drivers[1]->client.server_tick();
    ASSERT_NE(drivers[1]->wait_snapshot_after(now_tick + 80), 0u);
    server.stop();
  }

  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove(*path_, ec);
    delete path_;
    path_ = nullptr;
  }

  static std::string* path_;
};

std::string* Recording::path_ = nullptr;

TEST_F(Recording, InfoCountsTheScriptedSession) {
  record::RecordingInfo info;
  std::string error;
  ASSERT_TRUE(record::read_info(*path_, &info, &error)) << error;
  EXPECT_TRUE(info.problem.empty()) << info.problem;
  EXPECT_FALSE(info.truncated);
  EXPECT_EQ(info.format_version, record::kFormatVersion);
  EXPECT_EQ(info.scene_name, "integration-ground");
  EXPECT_EQ(info.tick_hz, 60u);
  EXPECT_EQ(info.keyframe_interval, 30u);
  // Raycasts only read the world and are not recorded: 6 world requests per client and round,
  // and the server's destroys of the bodies client 0 left behind (--on-disconnect destroy).
  const uint64_t expected = kClients * (kBodiesPerClient + 6 * kRounds + 1) + kDepartedBodies;
  EXPECT_EQ(info.requests, expected);
  EXPECT_EQ(info.requests_by_type["CreateObject"], static_cast<uint64_t>(kClients * kBodiesPerClient));
  EXPECT_EQ(info.requests_by_type["ApplyImpulse"], static_cast<uint64_t>(kClients * kRounds));
  EXPECT_EQ(info.requests_by_result["StaleId"], static_cast<uint64_t>(kClients * kRounds));
  EXPECT_EQ(info.requests_by_result["Ok"], expected - kClients * kRounds);
  ASSERT_EQ(info.clients.size(), static_cast<size_t>(kClients));
  EXPECT_EQ(info.clients[0].end_reason, "disconnect");
  EXPECT_EQ(info.clients[1].end_reason, "server shutdown");
  EXPECT_EQ(info.ticks, info.last_tick - info.start_tick);
  EXPECT_GE(info.keyframes, info.ticks / 30);
  EXPECT_EQ(info.file_bytes, std::filesystem::file_size(*path_));
}

TEST_F(Recording, VerifyReplaysEveryTickBitExactly) {
  const record::VerifyResult r = record::verify_recording(*path_);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.ok) << r.report << r.read_problem;
  EXPECT_FALSE(r.diverged_tick.has_value());
  EXPECT_GT(r.ticks, 30u);
  EXPECT_EQ(r.requests, static_cast<uint64_t>(kClients * (kBodiesPerClient + 6 * kRounds + 1) + kDepartedBodies));
  EXPECT_GE(r.keyframes, 1u);
  EXPECT_FALSE(r.truncated);
}

TEST_F(Recording, ReplayBinaryVerifiesAndPrintsInfo) {
  const std::string bin = IMPULSE_BIN_DIR "/impulse-replay";
  const int verify = std::system(fmt::format("'{}' verify '{}' > /dev/null", bin, *path_).c_str());
  ASSERT_TRUE(WIFEXITED(verify));
  EXPECT_EQ(WEXITSTATUS(verify), 0);
  const int info = std::system(fmt::format("'{}' info '{}' > /dev/null", bin, *path_).c_str());
  ASSERT_TRUE(WIFEXITED(info));
  EXPECT_EQ(WEXITSTATUS(info), 0);
}

TEST_F(Recording, TamperedRequestIsReportedAtItsTick) {
  std::vector<uint8_t> bytes = read_file(*path_);
  // Walk the frames in memory and find an ApplyImpulse answered Ok after the first keyframe.
  uint64_t tampered_tick = 0;
  bool after_keyframe = false;
  for (size_t offset = 0; offset + 4 <= bytes.size() && tampered_tick == 0;) {
    uint32_t size = 0;
    std::memcpy(&size, bytes.data() + offset, 4);
    const record::Frame* frame = record::GetSizePrefixedFrame(bytes.data() + offset);
    if (frame->payload_type() == record::Payload::Keyframe) after_keyframe = true;
    if (after_keyframe && frame->payload_type() == record::Payload::Tick && frame->payload_as_Tick()->requests()) {
      for (const record::Request* r : *frame->payload_as_Tick()->requests()) {
        if (r->type() == static_cast<uint8_t>(wire::Message::ApplyImpulse) && r->result() == 0 && r->vector()) {
          // Flip the sign of the impulse's x component in the file's bytes.
          const auto at = static_cast<size_t>(reinterpret_cast<const uint8_t*>(r->vector()) - bytes.data());
          bytes[at + 3] ^= 0x80;  // little-endian float: byte 3 holds the sign bit
          tampered_tick = frame->payload_as_Tick()->tick();
          break;
        }
      }
    }
    offset += 4 + size;
  }
  ASSERT_NE(tampered_tick, 0u);
  const std::string tampered = temp_path("impulse-tampered");
  write_file(tampered, bytes);
  const record::VerifyResult r = record::verify_recording(tampered);
  std::filesystem::remove(tampered);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.diverged_tick.has_value());
  EXPECT_EQ(*r.diverged_tick, tampered_tick);
  EXPECT_NE(r.report.find(fmt::format("tick {}", tampered_tick)), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("object"), std::string::npos) << "names the objects that differ: " << r.report;
}

// The recorded awake_hash of every Tick frame, by tick.
std::map<uint64_t, uint64_t> recorded_hashes(const std::string& path) {
  std::map<uint64_t, uint64_t> out;
  RecordingReader reader;
  std::string error;
  if (!reader.open(path, &error)) return out;
  while (reader.next() == ReadStatus::Frame) {
    if (reader.frame()->payload_type() == record::Payload::Tick) {
      out[reader.frame()->payload_as_Tick()->tick()] = reader.frame()->payload_as_Tick()->awake_hash();
    }
  }
  return out;
}

TEST_F(Recording, SeekingToAnyTickGivesTheRecordedState) {
  const std::map<uint64_t, uint64_t> hashes = recorded_hashes(*path_);
  ASSERT_GT(hashes.size(), 60u);
  // Ticks just before, at and after keyframes (every 30), the first and the last.
  std::set<uint64_t> ticks = {hashes.begin()->first, hashes.rbegin()->first, 29, 30, 31, 59, 60, 61, 75};
  // The whole state at those ticks, played from the start without seeking (the recording holds
  // only each tick's awake_hash).
  std::map<uint64_t, uint64_t> played;
  {
    physics::World world;
    record::Playback playback(world);
    std::string error;
    ASSERT_TRUE(playback.open(*path_, &error)) << error;
    while (playback.advance() == record::AdvanceStatus::Ticked) {
      if (ticks.count(playback.tick())) played[playback.tick()] = world.world_hash();
    }
    ASSERT_EQ(playback.mismatches(), 0u) << playback.first_mismatch();
  }
  for (uint64_t tick : ticks) {
    if (!hashes.count(tick)) continue;
    SCOPED_TRACE(tick);
    record::ReplayedWorld replayed;
    std::string error;
    ASSERT_TRUE(record::replay_to_tick(*path_, tick, &replayed, &error)) << error;
    EXPECT_EQ(replayed.world->tick(), tick);
    EXPECT_EQ(replayed.world->awake_hash(), hashes.at(tick));
    EXPECT_EQ(replayed.world->world_hash(), played.at(tick));
    EXPECT_EQ(replayed.keyframe_tick, tick / 30 * 30) << "the nearest keyframe at or before the tick (0 = header)";
  }
  record::ReplayedWorld replayed;
  std::string error;
  EXPECT_FALSE(record::replay_to_tick(*path_, hashes.rbegin()->first + 1, &replayed, &error));
  EXPECT_NE(error.find("beyond"), std::string::npos) << error;
}

TEST_F(Recording, ExportedSceneRebuildsTheWorldAtTheTick) {
  const std::map<uint64_t, uint64_t> hashes = recorded_hashes(*path_);
  ASSERT_FALSE(hashes.empty());
  const uint64_t tick = hashes.rbegin()->first - 7;  // between keyframes
  record::ReplayedWorld replayed;
  std::string error;
  ASSERT_TRUE(record::replay_to_tick(*path_, tick, &replayed, &error)) << error;
  const std::string json = record::to_scene_json(*replayed.world, replayed.dampings, replayed.scene_name);

  server::Scene scene;
  ASSERT_TRUE(server::parse_scene_json(json, "exported.json", &scene, &error)) << error << "\n" << json;
  ASSERT_EQ(scene.bodies.size(), replayed.world->object_count());
  physics::WorldSettings settings;
  settings.gravity = scene.gravity;
  physics::World rebuilt(settings);
  for (const physics::BodyDesc& desc : scene.bodies) ASSERT_EQ(rebuilt.create_object(desc).error, physics::Error::Ok);

  std::vector<physics::BodyState> original, copy;
  replayed.world->for_each_object([&](const physics::BodyState& s) { original.push_back(s); });
  rebuilt.for_each_object([&](const physics::BodyState& s) { copy.push_back(s); });
  ASSERT_EQ(original.size(), copy.size());
  int dynamic = 0;
  for (size_t i = 0; i < original.size(); ++i) {
    SCOPED_TRACE(i);
    const physics::BodyState& a = original[i];
    const physics::BodyState& b = copy[i];
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.shape.kind, b.shape.kind);
    EXPECT_EQ(a.shape.half_extents, b.shape.half_extents);
    // Positions and velocities are printed with round-trip precision: exact.
    EXPECT_EQ(a.position, b.position);
    EXPECT_EQ(a.velocity, b.velocity);
    EXPECT_EQ(a.angular_velocity, b.angular_velocity);
    EXPECT_EQ(a.mass, b.mass);
    EXPECT_EQ(a.friction, b.friction);
    EXPECT_EQ(a.restitution, b.restitution);
    // Orientation goes through axis-angle degrees: exact to float rounding of the trig.
    const float dot_q = std::fabs(a.orientation.x * b.orientation.x + a.orientation.y * b.orientation.y +
                                  a.orientation.z * b.orientation.z + a.orientation.w * b.orientation.w);
    EXPECT_NEAR(dot_q, 1.0f, 2e-6f);
    dynamic += a.kind == physics::BodyKind::Dynamic;
  }
  EXPECT_EQ(dynamic, kClients * (kBodiesPerClient - 1) - kDepartedBodies);  // client 0's left with it
}

TEST(RecordingRotation, EveryPartStartsWhereTheLastEndedAndVerifiesOnItsOwn) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("impulse-rotate-{}", ::getpid());
  std::filesystem::create_directories(dir);
  {
    RunningServer server(recording_options(dir.string(), true));
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver driver;
    std::string error;
    ASSERT_TRUE(driver.connect(server.port(), &error, "rotating")) << error;
    const ObjectID id = driver.create_ok(make_sphere(0.5f, {0.0f, 2.0f, 0.0f}));
    ASSERT_FALSE(id.is_null());
    // Run past 110 ticks: at least three parts of 36 ticks.
    ASSERT_NE(driver.wait_snapshot_after(110), 0u);
    ASSERT_TRUE(driver.wait_result(driver.client.apply_impulse(id, {0.0f, 1.0f, 0.0f})).has_value());
    server.stop();
  }
  std::vector<std::string> parts;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) parts.push_back(entry.path().string());
  std::sort(parts.begin(), parts.end());  // names end in the part number
  ASSERT_GE(parts.size(), 3u);
  uint64_t next_start = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    SCOPED_TRACE(parts[i]);
    record::RecordingInfo info;
    std::string error;
    ASSERT_TRUE(record::read_info(parts[i], &info, &error)) << error;
    EXPECT_EQ(info.part, i);
    EXPECT_EQ(info.start_tick, next_start) << "a part starts at the tick the previous one ended";
    EXPECT_EQ(info.clients.size(), 1u) << "each part lists the open session";
    next_start = info.last_tick;
    const record::VerifyResult r = record::verify_recording(parts[i]);
    EXPECT_TRUE(r.ok) << r.error << r.report << r.read_problem;
    if (i + 1 < parts.size()) {
      EXPECT_EQ(r.ticks, 36u);
    }
  }
  std::filesystem::remove_all(dir);
}

// --- The tick budget's sleeps ---------------------------------------------------------------------

// The tick budget changes the world outside any client request: an account over its share has its
// bodies put to sleep. Those sleeps travel through the journal (ServerSleep), so the recording of a
// session in which they happen still replays bit-exactly. Here every step counts as over budget
// (a 1 ns budget), and one client sends 150 spheres into one pile: over the 256-unit floor.
TEST(RecordingTickBudget, ThrottledBodiesAreRecordedAndReplayBitExactly) {
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("impulse-budget-{}.irec", ::getpid())).string();
  {
    ServerOptions options = recording_options(path);
    options.configure = [](server::ServerConfig& c) {
      c.tick_budget_ms = 1e-6;
      c.tick_budget_min_work = 10;
    };
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver heavy, light;
    std::string error;
    ASSERT_TRUE(heavy.connect(server.port(), &error, "heavy")) << error;
    ASSERT_TRUE(light.connect(server.port(), &error, "light")) << error;
    ASSERT_FALSE(light.create_ok(make_sphere(0.5f, {40.0f, 0.5f, 0.0f})).is_null());
    std::vector<uint32_t> creates;
    for (int k = 0; k < 150; ++k) {
      const Vec3 at{1.25f * static_cast<float>(k % 5) - 2.5f, 1.0f + 1.25f * static_cast<float>(k / 25),
                    1.25f * static_cast<float>((k / 5) % 5) - 2.5f};
      creates.push_back(heavy.client.create_object(make_sphere(0.5f, at)));
    }
    std::vector<ObjectID> bodies;
    for (const uint32_t id : creates) {
      const std::optional<RequestResult> r = heavy.wait_result(id);
      ASSERT_TRUE(r.has_value());
      if (r->ok()) bodies.push_back(r->id);
    }
    ASSERT_GE(bodies.size(), 100u);
    for (const ObjectID id : bodies) heavy.client.set_velocity(id, {0.0f, -5.0f, 0.0f});
    ASSERT_TRUE(heavy.poll_until([&] { return server.stats().bodies_put_to_sleep_over_budget.load() > 0; },
                                 milliseconds{5000}));
    ASSERT_NE(heavy.wait_snapshot_after(heavy.client.server_tick() + 10), 0u);
    server.stop();
  }
  record::RecordingInfo info;
  std::string error;
  ASSERT_TRUE(record::read_info(path, &info, &error)) << error;
  EXPECT_GT(info.requests_by_type["ServerSleep"], 0u);
  const record::VerifyResult r = record::verify_recording(path);
  EXPECT_TRUE(r.ok) << r.error << r.report << r.read_problem;
  EXPECT_FALSE(r.diverged_tick.has_value());
  std::filesystem::remove(path);
}

// Ticks (protocol 10): inputs become pushes at their tick and actions wait for theirs; both go
// through the journal where they are applied, so a session driven by them replays bit-exactly,
// and so does a temporary owner's SetState.
TEST(RecordingTicks, InputsAndActionsAreRecordedAndReplayBitExactly) {
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("impulse-ticks-{}.irec", ::getpid())).string();
  {
    ServerOptions options = recording_options(path);
    options.configure = [](server::ServerConfig& c) { c.temporary_ownership = true; };
    RunningServer server(options);
    ASSERT_TRUE(server.started()) << server.error();
    ClientDriver driver;
    std::string error;
    ASSERT_TRUE(driver.connect(server.port(), &error, "driver")) << error;
    const ObjectID car = driver.create_ok(make_sphere(0.5f, {40.0f, 0.5f, 0.0f}));
    // Temporary ownership: the client's own state of its lone body, recorded as a SetState.
    const std::optional<RequestResult> state =
        driver.wait_result(driver.client.set_state(car, {40.05f, 0.5f, 0.0f}, Quat{}, {}, {}));
    ASSERT_TRUE(state.has_value());
    EXPECT_TRUE(state->ok()) << state->message;
    ASSERT_FALSE(car.is_null());
    ASSERT_TRUE(driver.poll_until([&] { return driver.client.input_tick(ClientCore::Clock::now()).has_value(); }));
    const uint64_t jump_tick = *driver.client.input_tick(ClientCore::Clock::now()) + 10;
    driver.client.set_action_tick(jump_tick);
    const uint32_t jump = driver.client.apply_impulse(car, {0.0f, 2.0f, 0.0f});
    uint64_t last = 0;
    int sent = 0;
    driver.poll_until(
        [&] {
          const std::optional<uint64_t> tick = driver.client.input_tick(ClientCore::Clock::now());
          if (tick && *tick > last) {
            last = *tick;
            driver.client.send_input(car, InputMode::Force, {20.0f, 0.0f, 0.0f}, {0.0f, 0.0f, -5.0f}, *tick);
            ++sent;
          }
          return sent >= 60;
        },
        milliseconds{5000});
    EXPECT_GE(sent, 60);
    const std::optional<RequestResult> r = driver.wait_result(jump);
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->ok()) << r->message;
    // Never before its tick. (On time is the virtual-clock tests' to show: on a loaded machine a
    // real socket may deliver it after its 167 ms of lead, and it then applies at once.)
    EXPECT_GE(r->tick, jump_tick);
    ASSERT_NE(driver.wait_snapshot_after(driver.client.server_tick() + 20), 0u);
    EXPECT_GT(server.stats().input_frames_applied.load(), 30u);
    server.stop();
  }
  record::RecordingInfo info;
  std::string error;
  ASSERT_TRUE(record::read_info(path, &info, &error)) << error;
  EXPECT_GT(info.requests_by_type["ApplyForce"], 30u) << "the inputs' forces are journaled as pushes";
  EXPECT_GT(info.requests_by_type["ApplyTorque"], 30u);
  EXPECT_EQ(info.requests_by_type["ApplyImpulse"], 1u);
  EXPECT_EQ(info.requests_by_type["SetState"], 1u);
  const record::VerifyResult v = record::verify_recording(path);
  EXPECT_TRUE(v.ok) << v.error << v.report << v.read_problem;
  EXPECT_FALSE(v.diverged_tick.has_value());
  std::filesystem::remove(path);
}

// --- SIGKILL ----------------------------------------------------------------------------------

uint16_t free_udp_port() {
  RawSocket probe;  // bound to an ephemeral loopback port; closed on return, so the port is free
  return probe.port();
}

TEST(RecordingCrash, SigkilledServerLeavesAFileThatVerifiesUpToItsLastFrame) {
  TempFile scene("impulse-kill-scene", kGroundScene);
  const std::string path = temp_path("impulse-killed");
  const uint16_t port = free_udp_port();
  const std::string bin = IMPULSE_BIN_DIR "/impulse-server";
  const std::string port_text = std::to_string(port);
  const std::string scene_path = scene.path();
  std::vector<const char*> argv = {bin.c_str(), "--bind", "127.0.0.1", "--port", port_text.c_str(), "--scene",
                                   scene_path.c_str(), "--record", path.c_str(), "--keyframe-seconds", "0.5",
                                   "--log-level", "warn", nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), nullptr, nullptr, const_cast<char* const*>(argv.data()), environ), 0);

  ClientDriver driver;
  std::string error;
  // The server needs a moment to start; connect() resends Connect until the deadline.
  const bool connected = driver.client.connect("127.0.0.1", port, milliseconds{5000}, &error, "doomed");
  ObjectID id;
  if (connected) id = driver.create_ok(make_sphere(0.5f, {0.0f, 3.0f, 0.0f}));
  // Keep sending requests until the file holds at least 90 ticks (1.5 s) and a keyframe.
  uint64_t ticks = 0;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  for (int i = 0; connected && i < kMaxIterations && Clock::now() < deadline && ticks < 90; ++i) {
    driver.client.apply_impulse(id, {0.0f, 0.5f, 0.1f});
    driver.poll_once(milliseconds{10});
    RecordingReader reader;
    ticks = 0;
    if (reader.open(path, &error)) {
      while (reader.next() == ReadStatus::Frame) ticks += reader.frame()->payload_type() == record::Payload::Tick;
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_TRUE(connected) << error;
  ASSERT_GE(ticks, 90u) << "the recording did not grow to 90 ticks within 10 s";

  RecordingReader reader;
  ASSERT_TRUE(reader.open(path, &error)) << error;
  ReadStatus end;
  while ((end = reader.next()) == ReadStatus::Frame) {
  }
  EXPECT_NE(end, ReadStatus::Corrupt) << reader.error();
  const record::VerifyResult r = record::verify_recording(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.ok) << r.report << r.read_problem;
  EXPECT_GE(r.ticks, 90u);
  EXPECT_GT(r.requests, 1u);
  EXPECT_GE(r.keyframes, 2u);
}

}  // namespace
}  // namespace impulse::test
