// Recording format: every frame kind round-trips through encode -> RecordingReader bit-exactly
// (including -0.0 and denormals); a file cut at every byte reads exactly its complete frames and
// reports the cut as Truncated; garbage is rejected as Corrupt with a message, never a crash.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "server/record/format.h"
#include "server/record/reader.h"
#include "tests/support/rng.h"

namespace impulse::record {
namespace {

using Vec3 = ::impulse::Vec3;
using Quat = ::impulse::Quat;

// A FILE* over a byte range (fmemopen), closed on destruction. An empty range uses tmpfile(),
// since fmemopen rejects size 0 on some libcs.
class MemoryFile {
 public:
  explicit MemoryFile(std::span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {
    file_ = bytes_.empty() ? std::tmpfile() : fmemopen(bytes_.data(), bytes_.size(), "rb");
  }
  ~MemoryFile() {
    if (file_) std::fclose(file_);
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::FILE* get() const { return file_; }

 private:
  std::vector<uint8_t> bytes_;
  std::FILE* file_ = nullptr;
};

void append(std::vector<uint8_t>& out, std::span<const uint8_t> frame) { out.insert(out.end(), frame.begin(), frame.end()); }

RecordingConfig test_config() {
  RecordingConfig c;
  c.tick_hz = 60;
  c.snapshot_hz = 20;
  c.scene = "some/scene.json";
  return c;
}

bool bits_equal(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }
bool bits_equal(Vec3 a, Vec3 b) { return bits_equal(a.x, b.x) && bits_equal(a.y, b.y) && bits_equal(a.z, b.z); }

// One request of each world-changing type, with awkward floats (-0.0, a denormal).
std::vector<RequestRecord> sample_requests() {
  std::vector<RequestRecord> out;
  RequestRecord create;
  create.request.type = wire::Message::CreateObject;
  create.request.client_id = 7;
  create.request.request_id = 100;
  create.request.desc.kind = physics::BodyKind::Dynamic;
  create.request.desc.shape = physics::make_capsule(0.25f, 0.5f);
  create.request.desc.position = {-0.0f, 1.5f, std::numeric_limits<float>::denorm_min()};
  create.request.desc.orientation = normalize(Quat{0.1f, 0.2f, 0.3f, 0.9f});
  create.request.desc.velocity = {1.0f / 3.0f, -2.0f, 0.0f};
  create.request.desc.angular_velocity = {0.0f, 3.0f, -0.0f};
  create.request.desc.mass = 2.5f;
  create.request.desc.restitution = 0.25f;
  create.request.desc.friction = 0.7f;
  create.request.desc.linear_damping = 0.125f;
  create.request.desc.angular_damping = 0.05f;
  create.request.desc.material = 3;
  create.request.desc.sensor = true;
  create.request.desc.bullet = true;  // flags bit 2
  create.id = ObjectID{5, 2};
  out.push_back(create);

  RequestRecord force;
  force.request.type = wire::Message::ApplyForce;
  force.request.client_id = 8;
  force.request.request_id = 101;
  force.request.id = ObjectID{5, 2};
  force.request.vector = {-0.0f, 9.81f, 1e-20f};
  force.request.point = Vec3{0.5f, -0.0f, 0.25f};
  force.id = force.request.id;
  out.push_back(force);

  RequestRecord impulse = force;
  impulse.request.type = wire::Message::ApplyImpulse;
  impulse.request.point.reset();
  impulse.result = wire::ResultCode::InvalidArgument;
  out.push_back(impulse);

  RequestRecord destroy;
  destroy.request.type = wire::Message::DestroyObject;
  destroy.request.request_id = 102;
  destroy.request.id = ObjectID{9, 1};
  destroy.id = destroy.request.id;
  destroy.result = wire::ResultCode::StaleId;
  out.push_back(destroy);

  RequestRecord joint;  // every field set, -0.0 and a denormal among them
  joint.request.type = wire::Message::CreateJoint;
  joint.request.client_id = 7;
  joint.request.request_id = 103;
  physics::JointDesc& j = joint.request.joint;
  j.kind = physics::JointKind::Hinge;
  j.body_a = ObjectID{5, 2};
  j.body_b = ObjectID{6, 1};
  j.anchor = {-0.0f, 1.25f, std::numeric_limits<float>::denorm_min()};
  j.anchor_b = {0.5f, 2.0f, -3.0f};
  j.axis = {0.0f, 0.0f, 1.0f};
  j.min_length = 0.25f;
  j.max_length = 1.5f;
  j.spring_hertz = 4.0f;
  j.spring_damping_ratio = 0.7f;
  j.enable_limit = true;
  j.lower_angle = -0.5f;
  j.upper_angle = 1.0f / 3.0f;
  j.enable_motor = true;
  j.position_motor = true;
  j.motor_speed = 2.0f;
  j.max_motor_torque = 50.0f;
  j.target_angle = 0.125f;
  j.motor_target_angle = -0.75f;
  j.break_force = 1000.0f;
  j.break_torque = 400.0f;
  j.collide_connected = true;
  joint.id = ObjectID{0, 1};
  out.push_back(joint);

  RequestRecord motor;
  motor.request.type = wire::Message::SetJointMotor;
  motor.request.request_id = 104;
  motor.request.id = ObjectID{0, 1};
  motor.request.motor = physics::JointMotor{true, false, -1.5f, 0.0f, 20.0f};
  motor.id = motor.request.id;
  out.push_back(motor);

  RequestRecord unjoin;
  unjoin.request.type = wire::Message::DestroyJoint;
  unjoin.request.request_id = 105;
  unjoin.request.id = ObjectID{0, 1};
  unjoin.id = unjoin.request.id;
  out.push_back(unjoin);
  return out;
}

// A small recording: header, two ticks (one with requests), a keyframe, a client event.
std::vector<uint8_t> small_recording(std::vector<size_t>* frame_ends) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<Request>> scratch;
  std::vector<uint8_t> file;
  const RecordingConfig config = test_config();
  HeaderInfo info;
  info.config = &config;
  info.scene_name = "tiny";
  info.tick = 10;
  info.world_hash = 0x1234;
  const std::vector<uint8_t> state = {1, 2, 3, 4, 5, 6, 7};
  const BodyDamping damping(to_wire(ObjectID{1, 1}), 0.0f, 0.05f);
  physics::WorldSettings settings;
  settings.gravity = {0.0f, -1.62f, -0.0f};
  append(file, encode_header(fbb, info, settings, state, std::span(&damping, 1)));
  frame_ends->push_back(file.size());
  append(file, encode_client_event(fbb, ClientEventType::Connect, 7, 10, "127.0.0.1:5000", "alice"));
  frame_ends->push_back(file.size());
  const std::vector<RequestRecord> requests = sample_requests();
  append(file, encode_tick(fbb, 11, 0xabcdef, requests, scratch));
  frame_ends->push_back(file.size());
  append(file, encode_tick(fbb, 12, 0xabcdf0, {}, scratch));
  frame_ends->push_back(file.size());
  append(file, encode_keyframe(fbb, 12, 0xabcdf0, state));
  frame_ends->push_back(file.size());
  append(file, encode_client_event(fbb, ClientEventType::Timeout, 7, 12, "127.0.0.1:5000", {}));
  frame_ends->push_back(file.size());
  return file;
}

TEST(RecordingFormat, EveryFrameKindRoundTripsBitExactly) {
  std::vector<size_t> ends;
  const std::vector<uint8_t> file = small_recording(&ends);
  MemoryFile memory(file);
  RecordingReader reader(memory.get());

  ASSERT_EQ(reader.next(), ReadStatus::Frame) << reader.error();
  ASSERT_EQ(reader.frame()->payload_type(), Payload::Header);
  const Header& h = *reader.frame()->payload_as_Header();
  EXPECT_EQ(h.format_version(), kFormatVersion);
  EXPECT_STREQ(h.build_id()->c_str(), build_id());
  EXPECT_EQ(h.scene_name()->str(), "tiny");
  EXPECT_EQ(h.config()->tick_hz(), 60u);
  EXPECT_EQ(h.config()->snapshot_hz(), 20u);
  EXPECT_EQ(h.config()->scene()->str(), "some/scene.json");
  EXPECT_EQ(h.tick(), 10u);
  EXPECT_EQ(h.world_hash(), 0x1234u);
  EXPECT_EQ(std::vector<uint8_t>(h.state()->begin(), h.state()->end()), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(h.dampings()->size(), 1u);
  EXPECT_EQ(h.dampings()->Get(0)->angular(), 0.05f);
  const physics::WorldSettings settings = to_physics(*h.settings());
  EXPECT_TRUE(bits_equal(settings.gravity, Vec3{0.0f, -1.62f, -0.0f}));
  EXPECT_EQ(settings.substeps, physics::WorldSettings{}.substeps);

  ASSERT_EQ(reader.next(), ReadStatus::Frame);
  const ClientEvent& connect = *reader.frame()->payload_as_ClientEvent();
  EXPECT_EQ(connect.type(), ClientEventType::Connect);
  EXPECT_EQ(connect.client_id(), 7u);
  EXPECT_EQ(connect.name()->str(), "alice");
  EXPECT_EQ(connect.address()->str(), "127.0.0.1:5000");

  ASSERT_EQ(reader.next(), ReadStatus::Frame);
  const Tick& tick = *reader.frame()->payload_as_Tick();
  EXPECT_EQ(tick.tick(), 11u);
  EXPECT_EQ(tick.awake_hash(), 0xabcdefu);
  const std::vector<RequestRecord> expected = sample_requests();
  ASSERT_EQ(tick.requests()->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    const Request& r = *tick.requests()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const server::PendingRequest p = to_pending(r);
    const server::PendingRequest& e = expected[i].request;
    EXPECT_EQ(p.type, e.type);
    EXPECT_EQ(p.client_id, e.client_id);
    EXPECT_EQ(p.request_id, e.request_id);
    EXPECT_EQ(r.result(), static_cast<uint16_t>(expected[i].result));
    EXPECT_EQ(r.id(), to_wire(expected[i].id));
    EXPECT_TRUE(bits_equal(p.vector, e.vector));
    EXPECT_EQ(p.point.has_value(), e.point.has_value());
    if (p.point && e.point) {
      EXPECT_TRUE(bits_equal(*p.point, *e.point));
    }
    if (e.type == wire::Message::CreateObject) {
      EXPECT_TRUE(p.id.is_null()) << "a CreateObject's recorded id is its result, not an input";
      const physics::BodyDesc& d = p.desc;
      EXPECT_EQ(std::memcmp(&d.position, &e.desc.position, sizeof d.position), 0);
      EXPECT_EQ(std::memcmp(&d.orientation, &e.desc.orientation, sizeof d.orientation), 0);
      EXPECT_TRUE(bits_equal(d.velocity, e.desc.velocity));
      EXPECT_TRUE(bits_equal(d.angular_velocity, e.desc.angular_velocity));
      EXPECT_EQ(d.shape.kind, e.desc.shape.kind);
      EXPECT_TRUE(bits_equal(d.shape.half_extents, e.desc.shape.half_extents));
      EXPECT_TRUE(bits_equal(d.shape.radius, e.desc.shape.radius));
      EXPECT_TRUE(bits_equal(d.shape.half_height, e.desc.shape.half_height));
      EXPECT_EQ(d.kind, e.desc.kind);
      EXPECT_EQ(d.mass, e.desc.mass);
      EXPECT_EQ(d.restitution, e.desc.restitution);
      EXPECT_EQ(d.friction, e.desc.friction);
      EXPECT_EQ(d.linear_damping, e.desc.linear_damping);
      EXPECT_EQ(d.angular_damping, e.desc.angular_damping);
      EXPECT_EQ(d.material, e.desc.material);
      EXPECT_EQ(d.sensor, e.desc.sensor);
      EXPECT_EQ(d.bullet, e.desc.bullet);
    } else if (e.type == wire::Message::CreateJoint) {
      EXPECT_TRUE(p.id.is_null()) << "a CreateJoint's recorded id is its result, not an input";
      const physics::JointDesc& d = p.joint;
      const physics::JointDesc& x = e.joint;
      EXPECT_EQ(d.kind, x.kind);
      EXPECT_EQ(d.body_a, x.body_a);
      EXPECT_EQ(d.body_b, x.body_b);
      EXPECT_TRUE(bits_equal(d.anchor, x.anchor));
      EXPECT_TRUE(bits_equal(d.anchor_b, x.anchor_b));
      EXPECT_TRUE(bits_equal(d.axis, x.axis));
      for (const auto f : {&physics::JointDesc::min_length, &physics::JointDesc::max_length,
                           &physics::JointDesc::spring_hertz, &physics::JointDesc::spring_damping_ratio,
                           &physics::JointDesc::lower_angle, &physics::JointDesc::upper_angle,
                           &physics::JointDesc::motor_speed, &physics::JointDesc::max_motor_torque,
                           &physics::JointDesc::target_angle, &physics::JointDesc::motor_target_angle,
                           &physics::JointDesc::break_force, &physics::JointDesc::break_torque}) {
        EXPECT_TRUE(bits_equal(d.*f, x.*f));
      }
      EXPECT_EQ(d.enable_limit, x.enable_limit);
      EXPECT_EQ(d.enable_motor, x.enable_motor);
      EXPECT_EQ(d.position_motor, x.position_motor);
      EXPECT_EQ(d.collide_connected, x.collide_connected);
    } else {
      EXPECT_EQ(p.id, e.id);
      if (e.type == wire::Message::SetJointMotor) {
        EXPECT_EQ(p.motor.enable, e.motor.enable);
        EXPECT_EQ(p.motor.position, e.motor.position);
        EXPECT_TRUE(bits_equal(p.motor.speed, e.motor.speed));
        EXPECT_TRUE(bits_equal(p.motor.target, e.motor.target));
        EXPECT_TRUE(bits_equal(p.motor.max_force, e.motor.max_force));
      }
    }
  }

  ASSERT_EQ(reader.next(), ReadStatus::Frame);
  EXPECT_EQ(reader.frame()->payload_as_Tick()->requests(), nullptr);
  ASSERT_EQ(reader.next(), ReadStatus::Frame);
  EXPECT_EQ(reader.frame()->payload_as_Keyframe()->tick(), 12u);
  ASSERT_EQ(reader.next(), ReadStatus::Frame);
  EXPECT_EQ(reader.frame()->payload_as_ClientEvent()->type(), ClientEventType::Timeout);
  EXPECT_EQ(reader.next(), ReadStatus::End);
  EXPECT_EQ(reader.next(), ReadStatus::End) << "End is sticky";
  EXPECT_EQ(reader.frames(), ends.size());
  EXPECT_EQ(reader.offset(), file.size());
}

TEST(RecordingFormat, FramesKeepEightByteAlignmentWhenConcatenated) {
  std::vector<size_t> ends;
  small_recording(&ends);
  for (size_t end : ends) EXPECT_EQ(end % 8, 0u) << "a frame boundary at " << end;
}

TEST(RecordingFormat, FileCutAtEveryByteReadsItsCompleteFramesAndReportsTheCut) {
  std::vector<size_t> ends;
  const std::vector<uint8_t> file = small_recording(&ends);
  for (size_t cut = 0; cut <= file.size(); ++cut) {
    SCOPED_TRACE(cut);
    MemoryFile memory(std::span<const uint8_t>(file).first(cut));
    ASSERT_NE(memory.get(), nullptr);
    RecordingReader reader(memory.get());
    size_t complete = 0;
    while (complete < ends.size() && ends[complete] <= cut) ++complete;
    ReadStatus status;
    uint64_t frames = 0;
    while ((status = reader.next()) == ReadStatus::Frame) ++frames;
    ASSERT_EQ(frames, complete);
    const bool at_boundary = cut == 0 || (complete > 0 && ends[complete - 1] == cut);
    ASSERT_EQ(status, at_boundary ? ReadStatus::End : ReadStatus::Truncated) << reader.error();
    if (!at_boundary) {
      EXPECT_EQ(reader.truncated_bytes(), cut - (complete ? ends[complete - 1] : 0));
      EXPECT_NE(reader.error().find("ends inside"), std::string::npos) << reader.error();
    }
    EXPECT_EQ(reader.offset(), complete ? ends[complete - 1] : 0);
  }
}

TEST(RecordingFormat, GarbageIsRejectedWithAMessage) {
  // Text: its first four bytes make a size prefix far beyond kMaxFrameBytes.
  const std::string text = "this is not an Impulse recording, just some text that is long enough";
  {
    MemoryFile memory(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    RecordingReader reader(memory.get());
    EXPECT_EQ(reader.next(), ReadStatus::Corrupt);
    EXPECT_NE(reader.error().find("size prefix"), std::string::npos) << reader.error();
    EXPECT_EQ(reader.next(), ReadStatus::Corrupt) << "Corrupt is sticky";
  }
  // Random bytes behind a plausible size prefix: the Verifier (identifier, offsets) refuses them.
  test::Rng rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t size = 8 + rng.next() % 512;
    std::vector<uint8_t> bytes(4 + size);
    const auto prefix = static_cast<uint32_t>(size);
    std::memcpy(bytes.data(), &prefix, 4);
    for (size_t i = 4; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(rng.next());
    MemoryFile memory(bytes);
    RecordingReader reader(memory.get());
    ASSERT_EQ(reader.next(), ReadStatus::Corrupt) << "trial " << trial;
    EXPECT_FALSE(reader.error().empty());
  }
  // A valid file with one byte flipped in each frame's identifier, or a frame size too small.
  std::vector<size_t> ends;
  std::vector<uint8_t> file = small_recording(&ends);
  file[8] ^= 0xff;  // the first frame's "IREC"
  {
    MemoryFile memory(file);
    RecordingReader reader(memory.get());
    EXPECT_EQ(reader.next(), ReadStatus::Corrupt);
    EXPECT_NE(reader.error().find("frame 0 at byte 0"), std::string::npos) << reader.error();
  }
  const std::vector<uint8_t> tiny = {4, 0, 0, 0, 1, 2, 3, 4};
  MemoryFile memory(tiny);
  RecordingReader reader(memory.get());
  EXPECT_EQ(reader.next(), ReadStatus::Corrupt);
}

TEST(RecordingFormat, ReaderSeeksBackToAFrame) {
  std::vector<size_t> ends;
  const std::vector<uint8_t> file = small_recording(&ends);
  MemoryFile memory(file);
  RecordingReader reader(memory.get());
  while (reader.next() == ReadStatus::Frame) {
  }
  ASSERT_TRUE(reader.seek(ends[1], 2));
  ASSERT_EQ(reader.next(), ReadStatus::Frame);
  EXPECT_EQ(reader.frame()->payload_as_Tick()->tick(), 11u);
  EXPECT_EQ(reader.frame_offset(), ends[1]);
  EXPECT_EQ(reader.frames(), 3u);
}

}  // namespace
}  // namespace impulse::record
