// fuzz_make_corpus <dir>: writes the seed corpus of the libFuzzer targets, one directory per
// target under <dir>, from real datagrams: every client message built with the codec builders,
// the replies a real ServerCore sends to scripted sessions (ConnectAccepted, RequestResult,
// Snapshot, CollisionEvents, Pong, RaycastResult, ConnectRejected, Disconnect), real snapshot
// payloads, packed collision event blocks and datagrams, and PacketAcks traces recorded over a
// simulated lossy link. Generated at fuzz time (scripts/fuzz), never committed: the seeds follow
// the protocol as it changes.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>
#include <spdlog/spdlog.h>

#include "shared/net/link_simulator.h"
#include "shared/net/packet_acks.h"
#include "shared/wire/codec.h"
#include "shared/wire/event_codec.h"
#include "shared/wire/snapshot_codec.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_keys.h"
#include "tests/fuzz/fuzz_server_scene.h"
#include "tests/fuzz/packet_acks_ops.h"

namespace impulse::fuzz {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

Bytes copy(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

struct Seed {
  std::string name;
  Bytes bytes;
};

class CorpusWriter {
 public:
  explicit CorpusWriter(fs::path root) : root_(std::move(root)) {}
  bool write(const std::string& target, const Seed& seed) {
    const fs::path dir = root_ / target;
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::ofstream f(dir / seed.name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(seed.bytes.data()), static_cast<std::streamsize>(seed.bytes.size()));
    if (!f) {
      std::fprintf(stderr, "fuzz_make_corpus: cannot write %s\n", (dir / seed.name).c_str());
      return false;
    }
    ++counts_[target];
    return true;
  }
  const std::map<std::string, int>& counts() const { return counts_; }

 private:
  fs::path root_;
  std::map<std::string, int> counts_;
};

// --- Client datagrams: one of every message type and shape ----------------------------------------

std::vector<Seed> client_datagrams() {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<Seed> out;
  const auto add = [&out](const char* name, std::span<const uint8_t> bytes) { out.push_back({name, copy(bytes)}); };
  using wire::CreateObjectArgs;

  add("connect", wire::build_connect(fbb, "fuzz"));
  add("connect_version_1", wire::build_connect(fbb, "old", {}, {}, {}, 1));
  add("connect_forged_cookie", wire::build_connect(fbb, "forger", std::vector<uint8_t>(24, 0xA5)));
  wire::InterestArgs sphere_area;
  sphere_area.kind = wire::InterestKind::Sphere;
  sphere_area.center = {0, 0, 0};
  sphere_area.radius = 20;
  add("set_interest", wire::build_set_interest(fbb, 14, sphere_area));
  CreateObjectArgs sphere;
  sphere.position = {0, 3, 0};
  sphere.velocity = {1, 0, 0};
  sphere.restitution = 0.5f;
  add("create_sphere", wire::build_create_object(fbb, 1, sphere));
  CreateObjectArgs box;
  box.shape = wire::ShapeKind::Box;
  box.dims = {0.5f, 0.25f, 1};
  box.position = {1, 2, 0};
  box.orientation = Quat{0, 0.3826834f, 0, 0.9238795f};
  box.angular_velocity = {0, 1, 0};
  box.material = 2;
  add("create_box", wire::build_create_object(fbb, 2, box));
  CreateObjectArgs capsule;
  capsule.shape = wire::ShapeKind::Capsule;
  capsule.dims = {0.3f, 0.6f, 0};
  capsule.position = {-1, 4, 0};
  add("create_capsule", wire::build_create_object(fbb, 3, capsule));
  CreateObjectArgs plane;
  plane.kind = wire::BodyKind::Static;
  plane.shape = wire::ShapeKind::Plane;
  add("create_plane", wire::build_create_object(fbb, 4, plane));
  CreateObjectArgs sensor;
  sensor.kind = wire::BodyKind::Static;
  sensor.shape = wire::ShapeKind::Box;
  sensor.sensor = true;
  add("create_sensor", wire::build_create_object(fbb, 5, sensor));
  add("destroy", wire::build_destroy_object(fbb, 6, ObjectID{5, 1}));
  add("apply_force", wire::build_apply_force(fbb, 7, ObjectID{1, 1}, {0, 50, 0}, Vec3{0.1f, 0.5f, 0}));
  add("apply_impulse", wire::build_apply_impulse(fbb, 8, ObjectID{1, 1}, {3, 0, 0}));
  add("apply_torque", wire::build_apply_torque(fbb, 9, ObjectID{2, 1}, {0, 5, 0}));
  add("set_velocity", wire::build_set_velocity(fbb, 10, ObjectID{3, 1}, {0, 2, 1}));
  add("set_angular_velocity", wire::build_set_angular_velocity(fbb, 11, ObjectID{3, 1}, {1, 0, 0}));
  add("raycast_closest", wire::build_raycast(fbb, 12, {0, 5, 0}, {0, -10, 0}, false));
  add("raycast_all", wire::build_raycast(fbb, 13, {-5, 0.5f, 0}, {10, 0, 0}, true));
  add("raycast_back_faces", wire::build_raycast(fbb, 14, {0, -0.5f, 0}, {0, 2, 0}, false, std::nullopt, true));
  add("move_kinematic", wire::build_move_kinematic(fbb, 15, ObjectID{3, 1}, {0, 1, 0}, impulse::Quat{0, 0.6f, 0, 0.8f}));
  wire::CreateJointArgs hinge;
  hinge.kind = wire::JointKind::Hinge;
  hinge.body_a = ObjectID{3, 1};
  hinge.anchor = {0, 1, 0};
  hinge.axis = impulse::Vec3{0, 0, 1};
  hinge.enable_limit = true;
  hinge.lower_angle = -1.0f;
  hinge.upper_angle = 1.0f;
  hinge.motor_mode = wire::JointMotorMode::Position;
  hinge.max_motor_torque = 10.0f;
  add("create_joint", wire::build_create_joint(fbb, 16, hinge));
  add("destroy_joint", wire::build_destroy_joint(fbb, 17, ObjectID{0, 1}));
  add("set_joint_motor", wire::build_set_joint_motor(fbb, 18, ObjectID{0, 1}, {wire::JointMotorMode::Velocity, 2, 0, 5}));
  // Ticks (protocol 10): an action stamped for a later tick, inputs, a lag-compensated raycast.
  const auto jump = wire::build_apply_impulse(fbb, 19, ObjectID{1, 1}, {0, 4, 0});
  Bytes action(jump.begin(), jump.end());
  wire::stamp_apply_tick(action, 30);
  add("apply_impulse_at_tick", action);
  const std::vector<wire::InputFrame> frames(8, wire::InputFrame(wire::Vec3(10, 0, 0), wire::Vec3(0, 1, 0)));
  add("input_force", wire::build_input(fbb, ObjectID{1, 1}, wire::InputMode::Force, 5, frames));
  add("input_velocity", wire::build_input(fbb, ObjectID{1, 1}, wire::InputMode::Velocity, 1, std::span(frames).first(2)));
  add("set_state", wire::build_set_state(fbb, 21, ObjectID{1, 1}, {0, 1, 0}, impulse::Quat{}, {1, 0, 0}, {0, 0, 0}));
  add("raycast_seen", wire::build_raycast(fbb, 20, {0, 5, 0}, {0, -10, 0}, false, std::nullopt, false, 3, 0.5f));
  add("ping", wire::build_ping(fbb, 0x1234));
  add("disconnect", wire::build_disconnect(fbb, "bye"));
  return out;
}

const Bytes& datagram_named(const std::vector<Seed>& seeds, const char* name) {
  for (const Seed& s : seeds) {
    if (s.name == name) return s.bytes;
  }
  std::fprintf(stderr, "fuzz_make_corpus: no client datagram %s\n", name);
  std::abort();
}

// --- Server sessions in the split format of fuzz_server_datagram --------------------------------

/// One datagram of a scripted session: from endpoint `endpoint`, after `advance_ms` (< 64) of
/// fake time; an empty `datagram` name means the harness's own connect.
struct Step {
  unsigned endpoint;
  unsigned advance_ms;
  const char* datagram;
};

struct Script {
  const char* name;
  std::vector<Step> steps;
};

std::vector<Script> server_scripts() {
  return {
      {"session", {{0, 0, ""}, {0, 17, "create_sphere"}, {0, 0, "apply_impulse"}, {0, 17, "raycast_all"},
                   {0, 17, "ping"}, {0, 17, "destroy"}, {0, 17, "disconnect"}}},
      {"every_request", {{1, 0, ""}, {1, 0, "create_box"}, {1, 0, "create_capsule"}, {1, 0, "create_plane"},
                         {1, 17, "create_sensor"}, {1, 0, "apply_force"}, {1, 0, "apply_torque"},
                         {1, 0, "set_velocity"}, {1, 17, "set_angular_velocity"}, {1, 17, "raycast_closest"}}},
      {"two_clients", {{0, 0, ""}, {1, 0, ""}, {0, 17, "create_sphere"}, {1, 0, "destroy"},
                       {1, 17, "apply_impulse"}, {0, 33, "ping"}}},
      {"server_full", {{0, 0, ""}, {1, 0, ""}, {2, 0, ""}, {3, 0, ""}, {3, 17, "ping"}}},
      {"handshake", {{2, 0, "connect"}, {2, 0, "connect_forged_cookie"}, {2, 17, "ping"}}},
      {"not_connected", {{2, 0, "create_sphere"}, {2, 0, "ping"}, {2, 0, "connect_version_1"}, {2, 17, "disconnect"}}},
      {"timeout", {{0, 0, ""}, {0, 63, "ping"}, {1, 63, ""}, {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"},
                   {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"},
                   {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"},
                   {1, 63, "ping"}, {1, 63, "ping"}, {1, 63, "ping"}}},
  };
}

Bytes encode_script(const Script& script, const std::vector<Seed>& client) {
  Bytes out;
  for (const Step& s : script.steps) {
    const uint8_t control = static_cast<uint8_t>((s.advance_ms & 63u) << 2 | (s.endpoint & 3u));
    if (s.datagram[0] == '\0') {
      append_record(&out, control, {});
    } else {
      append_record(&out, control, datagram_named(client, s.datagram));
    }
  }
  return out;
}

/// Runs the scripts on a real ServerCore, the way fuzz_server_datagram does, and returns the
/// datagrams it sent: at most `per_type` of each message type, named by type.
std::vector<Seed> server_replies(const std::vector<Script>& scripts, const std::vector<Seed>& client, int per_type) {
  std::vector<Seed> out;
  std::map<wire::Message, int> seen;
  FuzzPeers peers;  // replaced per script below
  const auto collect = [&](server::Outbox& box) {
    for (const server::Outbox::Datagram& d : box.datagrams()) {
      // Seeds are plaintext: fuzz_client_datagram seals them itself.
      const Bytes bytes = copy(peers.incoming(d.to, box.bytes_of(d)));
      const wire::Verified v = wire::verify_datagram(bytes, wire::Direction::ServerToClient);
      if (!v.envelope) continue;
      const wire::Message type = v.envelope->message_type();
      int& n = seen[type];
      if (n >= per_type) continue;
      out.push_back({std::string("server_") + wire::EnumNameMessage(type) + "_" + std::to_string(n++), bytes});
    }
    box.clear();
  };
  for (const Script& script : scripts) {
    server::ServerStats stats;
    server::ServerCore core(fuzz_server_config(), {0, -9.81f, 0}, stats);
    std::string error;
    if (!add_fuzz_scene(core, &error)) {
      std::fprintf(stderr, "fuzz_make_corpus: scene: %s\n", error.c_str());
      std::abort();
    }
    server::TimePoint now = kFuzzStart;
    core.start(now);
    peers = FuzzPeers{};
    server::Outbox box;
    flatbuffers::FlatBufferBuilder fbb;
    for (const Step& s : script.steps) {
      if (s.advance_ms > 0) {
        now += std::chrono::milliseconds(s.advance_ms);
        core.update(now, box);
        collect(box);
      }
      if (s.datagram[0] == '\0') {
        connect_session(core, fuzz_endpoint(s.endpoint), now, fbb, box);
      } else {
        const Bytes datagram = copy(peers.outgoing(s.endpoint, datagram_named(client, s.datagram)));
        core.handle_datagram(fuzz_endpoint(s.endpoint), datagram, now, box);
      }
      collect(box);
    }
    for (int i = 0; i < 4; ++i) {
      now += 17ms;
      core.update(now, box);
      collect(box);
    }
    core.shut_down("fuzz corpus done", box);
    collect(box);
  }
  return out;
}

// --- Snapshot payloads ------------------------------------------------------------------------------

std::vector<Seed> snapshot_payloads() {
  const wire::QuantizationConfig config;
  const wire::QuantizationLimits limits = wire::derive_limits(config);
  const auto state = [&config](Vec3 p, Quat q, Vec3 v, Vec3 w, bool at_rest) {
    return wire::quantize_state(p, q, v, w, at_rest, config);
  };
  const auto entry = [](ObjectID id, wire::ShapeKind shape, Vec3 dims, const wire::QuantizedState& s) {
    wire::SnapshotRecord r;
    r.kind = wire::RecordKind::Entry;
    r.id = id;
    r.desc.shape = shape;
    r.desc.dims = dims;
    r.state = s;
    return r;
  };
  const auto delta = [](ObjectID id, const wire::QuantizedState& base, const wire::QuantizedState& s, uint32_t d) {
    wire::SnapshotRecord r;
    r.kind = wire::RecordKind::Delta;
    r.id = id;
    r.baseline = base;
    r.state = s;
    r.baseline_distance = d;
    return r;
  };
  const auto exit_record = [](ObjectID id) {
    wire::SnapshotRecord r;
    r.kind = wire::RecordKind::Exit;
    r.id = id;
    return r;
  };
  const wire::QuantizedState a0 = state({0, 0.5f, 0}, {}, {}, {}, true);
  const wire::QuantizedState b0 = state({2, 3, -1}, {0, 0.3826834f, 0, 0.9238795f}, {1, -2, 0}, {0, 1, 0}, false);
  const wire::QuantizedState b1 = state({2.02f, 2.97f, -1}, {0, 0.39f, 0, 0.9208f}, {1, -2.1f, 0}, {0, 1, 0}, false);
  const wire::QuantizedState c0 = state({-500, 10, 900}, {0.5f, 0.5f, 0.5f, 0.5f}, {60, 0, -60}, {30, -30, 0}, false);
  const ObjectID a{0, 1}, b{3, 1}, c{700, 9}, d{701, 1};

  const std::vector<std::pair<const char*, std::vector<wire::SnapshotRecord>>> payloads = {
      {"empty", {}},
      {"entries", {entry(a, wire::ShapeKind::Box, {20, 0.5f, 20}, a0), entry(b, wire::ShapeKind::Sphere, {0.5f, 0.5f, 0.5f}, b0),
                   entry(c, wire::ShapeKind::Capsule, {0.3f, 0.5f, 0.3f}, c0)}},
      {"deltas", {delta(b, b0, b1, 1), exit_record(c), entry(d, wire::ShapeKind::Box, {1, 1, 1}, a0)}},
      {"delta_unchanged", {delta(a, a0, a0, 2), delta(b, b1, b1, 1)}},
      {"exits", {exit_record(a), exit_record(b), exit_record(d)}},
  };
  std::vector<Seed> out;
  Bytes scratch;
  Bytes sequence;  // the payloads in order, split format, sequence + 1 each
  for (const auto& [name, records] : payloads) {
    Bytes payload;
    if (!wire::encode_snapshot_payload(records, limits, &payload, &scratch)) {
      std::fprintf(stderr, "fuzz_make_corpus: snapshot payload %s did not encode\n", name);
      std::abort();
    }
    out.push_back({std::string("payload_") + name, payload});
    append_record(&sequence, 1, payload);
  }
  out.push_back({"sequence_all", sequence});
  return out;
}

// --- Collision event blocks (protocol 4) ----------------------------------------------------------

/// Event batches as a server sends them (consecutive sequences, one tick, ground and cube-cube
/// contacts) and one that maximises every field, with the quantisation selector byte of
/// fuzz_event_block (0: the default config, 1: the widest position field).
/// A batch with a JointAdded (a hinge to the world) and a JointRemoved, and its joint column.
std::pair<std::vector<wire::CollisionEvent>, std::vector<wire::JointEventFields>> joint_batch() {
  using wire::ContactEventType;
  const uint64_t joint = to_wire(ObjectID{2, 1});
  return {{wire::CollisionEvent(7200, to_wire(ObjectID{17, 1}), 0, wire::Vec3(0.25f, 0, 0), wire::Vec3(0.25f, 3, 0), 5,
                                ContactEventType::JointAdded),
           wire::CollisionEvent(7260, to_wire(ObjectID{17, 1}), 0, wire::Vec3(0, 0, 0), wire::Vec3(0, 0, 0), 6,
                                ContactEventType::JointRemoved)},
          {{joint, 1}, {joint, 1}}};
}

std::vector<std::pair<std::string, std::vector<wire::CollisionEvent>>> event_batches() {
  const auto event = [](uint64_t tick, ObjectID a, ObjectID b, Vec3 p, Vec3 n, uint32_t sequence,
                        wire::ContactEventType type) {
    return wire::CollisionEvent(tick, to_wire(a), to_wire(b), wire::Vec3(p.x, p.y, p.z), wire::Vec3(n.x, n.y, n.z),
                                sequence, type);
  };
  using wire::ContactEventType;
  std::vector<std::pair<std::string, std::vector<wire::CollisionEvent>>> out;
  out.push_back({"one", {event(3600, {0, 1}, {417, 1}, {-4.1f, 0.0f, 2.3f}, {0, 1, 0}, 5000, ContactEventType::Begin)}});
  out.push_back({"batch",
                 {event(3600, {0, 1}, {417, 1}, {-4.1f, 0.0f, 2.3f}, {0, 1, 0}, 5000, ContactEventType::Begin),
                  event(3600, {12, 1}, {13, 1}, {-3.75f, 0.5f, 2.25f}, {0.6f, 0.0f, -0.8f}, 5001, ContactEventType::Begin),
                  event(3601, {13, 1}, {901, 1}, {-3.5f, 0.49f, 2.0f}, {-0.48f, 0.6f, 0.64f}, 5002, ContactEventType::End)}});
  std::vector<wire::CollisionEvent> worst;
  uint32_t sequence = 0xFFFFFFFFu;
  for (int i = 0; i < 16; ++i, sequence += 0x80000001u) {
    worst.push_back(event(i % 2 == 0 ? uint64_t{1} << 63 : 0, {0xFFFFFFFFu, 0}, {0x7FFFFFFFu, 0},
                          {-32768.0f, 32768.0f, -32768.0f}, {0.3f, -0.5f, -0.81f}, sequence, ContactEventType::End));
  }
  out.push_back({"worst", worst});
  out.push_back({"empty", {}});
  return out;
}

wire::QuantizationConfig event_config(uint8_t selector) {
  wire::QuantizationConfig c;
  if (selector == 1) c.world_bound_m = 32768.0f;  // fuzz_event_block's config 1
  return c;
}

/// fuzz_event_block seeds: the selector byte, then the block.
std::vector<Seed> event_blocks() {
  std::vector<Seed> out;
  for (const auto& [name, events] : event_batches()) {
    const uint8_t selector = name == "worst" ? 1 : 0;
    Bytes block;
    if (!wire::encode_collision_events(events, event_config(selector), &block)) {
      std::fprintf(stderr, "fuzz_make_corpus: event block %s did not encode\n", name.c_str());
      std::abort();
    }
    block.insert(block.begin(), selector);
    out.push_back({"block_" + name, block});
  }
  const auto [events, joints] = joint_batch();
  Bytes block;
  if (!wire::encode_collision_events(events, event_config(0), &block, joints)) {
    std::fprintf(stderr, "fuzz_make_corpus: the joint event block did not encode\n");
    std::abort();
  }
  block.insert(block.begin(), uint8_t{0});
  out.push_back({"block_joints", block});
  return out;
}

/// fuzz_client_datagram seeds: CollisionEvents datagrams with packed blocks in the client's
/// (default) quantisation, and a Snapshot with relayed inputs, stamped like session datagrams.
std::vector<Seed> event_datagrams() {
  std::vector<Seed> out;
  flatbuffers::FlatBufferBuilder fbb;
  uint32_t sequence = 2;
  for (const auto& [name, events] : event_batches()) {
    Bytes datagram = copy(wire::build_collision_events(fbb, events, wire::QuantizationConfig{}));
    wire::stamp_header(datagram, wire::PacketHeader(sequence++, 0, 0));
    out.push_back({"packed_events_" + name, datagram});
  }
  const auto [events, joints] = joint_batch();
  Bytes datagram = copy(wire::build_collision_events(fbb, events, wire::QuantizationConfig{}, joints));
  wire::stamp_header(datagram, wire::PacketHeader(sequence++, 0, 0));
  out.push_back({"packed_events_joints", datagram});
  // A Snapshot relaying other clients' inputs (an empty payload), one of them hostile (NaN).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<wire::RelayedInput> relayed = {
      wire::RelayedInput(impulse::to_wire(ObjectID{3, 1}), wire::InputFrame(wire::Vec3(400, 0, 0), wire::Vec3(0, 5, 0)),
                         wire::InputMode::Force, 0),
      wire::RelayedInput(impulse::to_wire(ObjectID{4, 1}), wire::InputFrame(wire::Vec3(nan, 0, 0), wire::Vec3()),
                         wire::InputMode::Velocity, 3),
  };
  Bytes snapshot = copy(wire::build_snapshot(fbb, 600, {}, 2, 0, relayed));
  wire::stamp_header(snapshot, wire::PacketHeader(sequence++, 0, 0));
  out.push_back({"snapshot_relayed_inputs", snapshot});
  return out;
}

// --- PacketAcks traces -----------------------------------------------------------------------------

void put_u16(Bytes* out, uint16_t v) {
  out->push_back(static_cast<uint8_t>(v));
  out->push_back(static_cast<uint8_t>(v >> 8));
}
void put_u32(Bytes* out, uint32_t v) {
  put_u16(out, static_cast<uint16_t>(v));
  put_u16(out, static_cast<uint16_t>(v >> 16));
}

/// Side A of a two-peer exchange over simulated links, recorded as an operation script: A sends
/// every 10 ms, B every 16 ms, and A's receptions become kReceive + kAcks with B's real fields.
Bytes packet_acks_trace(const net::LinkConditions& conditions, size_t max_bytes) {
  struct Header {
    uint32_t sequence;
    net::AckFields ack;
  };
  net::PacketAcks a, b;
  net::LinkConditions back = conditions;
  back.seed = conditions.seed + 1;
  net::LinkSimulator<int> to_b(conditions), to_a(back);
  const auto pack = [](const Header& h) {
    Bytes bytes(12);
    std::memcpy(bytes.data(), &h.sequence, 4);
    std::memcpy(bytes.data() + 4, &h.ack.ack, 4);
    std::memcpy(bytes.data() + 8, &h.ack.ack_bits, 4);
    return bytes;
  };
  const auto unpack = [](std::span<const uint8_t> bytes) {
    Header h{};
    std::memcpy(&h.sequence, bytes.data(), 4);
    std::memcpy(&h.ack.ack, bytes.data() + 4, 4);
    std::memcpy(&h.ack.ack_bits, bytes.data() + 8, 4);
    return h;
  };
  Bytes script;
  net::TimePoint now = kFuzzStart;
  net::TimePoint last_op = now;
  const auto advance_to = [&](net::TimePoint t) {
    const auto units = std::chrono::duration_cast<std::chrono::microseconds>(t - last_op).count() / 100;
    if (units <= 0) return;
    script.push_back(kAdvance);
    put_u16(&script, static_cast<uint16_t>(std::min<int64_t>(units, 0xFFFF)));
    last_op = t;
  };
  std::vector<uint32_t> scratch;
  for (int ms = 0; ms < 2000 && script.size() + 16 < max_bytes; ++ms, now += 1ms) {
    to_a.deliver_due(now, [&](int, std::span<const uint8_t> bytes) {
      const Header h = unpack(bytes);
      advance_to(now);
      script.push_back(kReceive);
      put_u32(&script, h.sequence);
      script.push_back(kAcks);
      put_u32(&script, h.ack.ack);
      put_u32(&script, h.ack.ack_bits);
      a.on_receive(h.sequence);
      a.on_acks(h.ack, now, &scratch);
    });
    to_b.deliver_due(now, [&](int, std::span<const uint8_t> bytes) {
      const Header h = unpack(bytes);
      b.on_receive(h.sequence);
      b.on_acks(h.ack, now, &scratch);
    });
    if (ms % 10 == 0) {
      advance_to(now);
      script.push_back(kSend);
      put_u16(&script, 100);
      const uint32_t s = a.on_send(now, 100);
      to_b.submit(0, pack({s, a.ack_fields()}), now);
    }
    if (ms % 16 == 5) to_a.submit(0, pack({b.on_send(now, 100), b.ack_fields()}), now);
  }
  return script;
}

std::vector<Seed> packet_acks_traces() {
  std::vector<Seed> out;
  net::LinkConditions clean;
  clean.latency_ms = 20;
  net::LinkConditions lossy;
  lossy.loss = 0.25;
  lossy.latency_ms = 50;
  lossy.jitter_ms = 25;
  lossy.duplicate = 0.05;
  lossy.reorder = 0.05;
  lossy.seed = 9;
  out.push_back({"trace_clean", packet_acks_trace(clean, 1200)});
  out.push_back({"trace_lossy", packet_acks_trace(lossy, 1200)});
  // A burst that wraps the 1024-entry sent buffer, then a late ack of the oldest sequences.
  Bytes wrap;
  for (int i = 0; i < 5; ++i) {
    wrap.push_back(kSendBurst);
    wrap.push_back(255);
  }
  wrap.push_back(kAcks);
  put_u32(&wrap, 1);
  put_u32(&wrap, 0);
  wrap.push_back(kAcksNear);
  wrap.push_back(2);
  put_u32(&wrap, 0xFFFFFFFF);
  out.push_back({"sent_buffer_wrap", wrap});
  return out;
}

}  // namespace
}  // namespace impulse::fuzz

int main(int argc, char** argv) {
  using namespace impulse::fuzz;
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus <dir>\n  writes <dir>/<fuzz target>/<seed> files\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::off);
  CorpusWriter writer{std::filesystem::path(argv[1])};

  const std::vector<Seed> client = client_datagrams();
  const std::vector<Script> scripts = server_scripts();
  const std::vector<Seed> server = server_replies(scripts, client, 3);
  bool ok = true;
  for (const Seed& s : client) {
    ok &= writer.write("fuzz_server_datagram", s);
    ok &= writer.write("fuzz_verify_datagram", {"client_" + s.name, s.bytes});
  }
  for (const Script& script : scripts) {
    ok &= writer.write("fuzz_server_datagram", {std::string("script_") + script.name, encode_script(script, client)});
  }
  for (const Seed& s : server) {
    ok &= writer.write("fuzz_verify_datagram", s);
    ok &= writer.write("fuzz_client_datagram", s);
  }
  for (const Seed& s : snapshot_payloads()) ok &= writer.write("fuzz_snapshot_payload", s);
  for (const Seed& s : event_blocks()) ok &= writer.write("fuzz_event_block", s);
  for (const Seed& s : event_datagrams()) {
    ok &= writer.write("fuzz_client_datagram", s);
    ok &= writer.write("fuzz_verify_datagram", s);
  }
  for (const Seed& s : packet_acks_traces()) ok &= writer.write("fuzz_packet_acks", s);
  // fuzz_unseal: real datagrams sealed with its fixed key (valid seals, so mutations start past
  // the tag), and the plaintexts themselves (its second half seals the input).
  uint32_t sequence = 1;
  for (const std::vector<Seed>* seeds : {&client, &server}) {
    for (const Seed& s : *seeds) {
      Bytes sealed(s.bytes.size() + impulse::net::kSealOverheadBytes);
      if (impulse::net::seal_packet(unseal_fuzz_key(), sequence++, s.bytes, sealed) == 0) continue;
      ok &= writer.write("fuzz_unseal", {"sealed_" + s.name, sealed});
      ok &= writer.write("fuzz_unseal", {"plain_" + s.name, s.bytes});
    }
  }

  // fuzz_convex_hull: a box's corners with an apex and an interior point (byte 0 even: points),
  // the saved world unedited (byte 0 odd: XOR edits over its payload), a mesh and a heightfield.
  {
    Bytes points{0};
    const float corners[] = {-0.5f, 0.5f};
    auto put = [&](float f) {
      uint32_t u;
      std::memcpy(&u, &f, sizeof u);
      for (int i = 0; i < 4; ++i) points.push_back(static_cast<uint8_t>(u >> (8 * i)));
    };
    for (int v = 0; v < 8; ++v) {
      put(corners[v & 1]);
      put(corners[(v >> 1) & 1]);
      put(corners[(v >> 2) & 1]);
    }
    for (const float f : {0.0f, 0.9f, 0.0f, 0.1f, 0.1f, 0.1f}) put(f);
    ok &= writer.write("fuzz_convex_hull", {"box_points", points});
    ok &= writer.write("fuzz_convex_hull", {"state_unedited", Bytes{1}});
    ok &= writer.write("fuzz_convex_hull", {"state_one_edit", Bytes{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4}});
    // A mesh (byte 0 = 2): 4 vertices of a unit square and its two triangles; a heightfield
    // (byte 0 = 6): 3 x 3 samples of a gentle bump.
    Bytes mesh{2, 4, 0};
    auto put_to = [](Bytes& out, float f) {
      uint32_t u;
      std::memcpy(&u, &f, sizeof u);
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
    };
    for (const float f : {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f}) put_to(mesh, f);
    for (const uint32_t i : {0u, 1u, 2u, 0u, 2u, 3u}) {
      for (int b = 0; b < 4; ++b) mesh.push_back(static_cast<uint8_t>(i >> (8 * b)));
    }
    ok &= writer.write("fuzz_convex_hull", {"mesh_square", mesh});
    Bytes field{6, 0x11};
    for (const float f : {0.0f, 0.1f, 0.0f, 0.1f, 0.3f, 0.1f, 0.0f, 0.1f, 0.0f}) put_to(field, f);
    ok &= writer.write("fuzz_convex_hull", {"heightfield_bump", field});
  }

  // fuzz_model_file: byte 0 picks the format (0 .obj, 1 .gltf); a quad-faced cube in OBJ, and a
  // glTF square (4 positions, 6 uint16 indices in a base64 data URI) under a turned node.
  {
    const std::string obj =
        "v -1 -1 -1\nv 1 -1 -1\nv 1 1 -1\nv -1 1 -1\nv -1 -1 1\nv 1 -1 1\nv 1 1 1\nv -1 1 1\n"
        "f 1 4 3 2\nf 5 6 7 8\nf 1 2 6 5\nf 4 8 7 3\nf 1 5 8 4\nf 2 3 7 6\n";
    const std::string gltf =
        R"({"asset":{"version":"2.0"},"scene":0,"scenes":[{"nodes":[0]}],"nodes":[{"mesh":0,"rotation":[0,0.7071,0,0.7071]}],)"
        R"("meshes":[{"primitives":[{"attributes":{"POSITION":0},"indices":1}]}],"buffers":[{"byteLength":60,)"
        R"("uri":"data:application/octet-stream;base64,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA/AACAPwAAAAAAAIA/AACAPwAAAAAAAAAAAAABAAIAAAACAAMA"}],)"
        R"("bufferViews":[{"buffer":0,"byteOffset":0,"byteLength":48},{"buffer":0,"byteOffset":48,"byteLength":12}],)"
        R"("accessors":[{"bufferView":0,"componentType":5126,"count":4,"type":"VEC3","min":[0,0,0],"max":[1,0,1]},)"
        R"({"bufferView":1,"componentType":5123,"count":6,"type":"SCALAR"}]})";
    Bytes cube{0};
    cube.insert(cube.end(), obj.begin(), obj.end());
    ok &= writer.write("fuzz_model_file", {"obj_cube", cube});
    Bytes square{1};
    square.insert(square.end(), gltf.begin(), gltf.end());
    ok &= writer.write("fuzz_model_file", {"gltf_square", square});
  }

  for (const auto& [target, n] : writer.counts()) std::printf("%-24s %3d seeds\n", target.c_str(), n);
  return ok ? 0 : 1;
}
