// The message test vectors of docs/PROTOCOL.md (between the message-vectors markers): each is the
// plaintext datagram this codec builds (unstamped header), so a client in another language can
// check its reader against it, and the document cannot drift from the codec.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "shared/hex.h"
#include "shared/wire/codec.h"
#include "tests/support/doc_vectors.h"

namespace impulse::wire {
namespace {

std::map<std::string, std::string> vectors_in_doc() { return test::protocol_doc_vectors("message-vectors"); }

TEST(MessageVectors, MoveKinematicAndRaycastBackFacesMatchTheDocument) {
  const auto doc = vectors_in_doc();
  flatbuffers::FlatBufferBuilder fbb;
  // MoveKinematic{request_id 7, id {index 3, generation 1}, position (1.5, 2, -0.25),
  // orientation (0, 0.6, 0, 0.8)}: a 73.74-degree turn about +y.
  const auto move = build_move_kinematic(fbb, 7, ObjectID{3, 1}, {1.5f, 2.0f, -0.25f}, impulse::Quat{0, 0.6f, 0, 0.8f});
  const std::string move_hex = to_hex(move);
  const Verified v = verify_datagram(move, Direction::ClientToServer);
  ASSERT_EQ(v.reason, DropReason::None);
  const auto* m = v.envelope->message_as_MoveKinematic();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(static_cast<int>(v.envelope->message_type()), 23);
  EXPECT_EQ(m->id(), (uint64_t{1} << 32) | 3u);
  ASSERT_TRUE(doc.count("MoveKinematic")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n    MoveKinematic: "
                                          << move_hex;
  EXPECT_EQ(doc.at("MoveKinematic"), move_hex);

  // Raycast{request_id 8, origin (0, -0.5, 0), translation (0, 2, 0), back_faces true}.
  const auto ray = build_raycast(fbb, 8, {0.0f, -0.5f, 0.0f}, {0.0f, 2.0f, 0.0f}, false, std::nullopt, true);
  const std::string ray_hex = to_hex(ray);
  ASSERT_TRUE(doc.count("Raycast with back_faces")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n"
                                                    << "    Raycast with back_faces: " << ray_hex;
  EXPECT_EQ(doc.at("Raycast with back_faces"), ray_hex);
}

TEST(MessageVectors, JointRequestsMatchTheDocument) {
  const auto doc = vectors_in_doc();
  flatbuffers::FlatBufferBuilder fbb;
  // CreateJoint{request_id 9, Hinge, body_a {index 3, generation 1}, body_b 0 (the world), anchor
  // (0, 2, 0), axis (0, 0, 1), enable_limit, lower -0.5, upper 1.25 rad, Velocity motor at 2 rad/s
  // with at most 50 N·m, break_torque 400 N·m}.
  CreateJointArgs j;
  j.kind = JointKind::Hinge;
  j.body_a = ObjectID{3, 1};
  j.anchor = {0.0f, 2.0f, 0.0f};
  j.axis = impulse::Vec3{0.0f, 0.0f, 1.0f};
  j.enable_limit = true;
  j.lower_angle = -0.5f;
  j.upper_angle = 1.25f;
  j.motor_mode = JointMotorMode::Velocity;
  j.motor_speed = 2.0f;
  j.max_motor_torque = 50.0f;
  j.break_torque = 400.0f;
  const auto create = build_create_joint(fbb, 9, j);
  const std::string create_hex = to_hex(create);
  const Verified v = verify_datagram(create, Direction::ClientToServer);
  ASSERT_EQ(v.reason, DropReason::None);
  EXPECT_EQ(static_cast<int>(v.envelope->message_type()), 24);
  EXPECT_TRUE(check_request(*v.envelope->message_as_CreateJoint()).ok());
  ASSERT_TRUE(doc.count("CreateJoint")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n    CreateJoint: "
                                        << create_hex;
  EXPECT_EQ(doc.at("CreateJoint"), create_hex);

  // SetJointMotor{request_id 10, id {index 0, generation 1}, Position, target 0.75 rad, at most 20 N·m}.
  const auto motor = build_set_joint_motor(fbb, 10, ObjectID{0, 1}, {JointMotorMode::Position, 0.0f, 0.75f, 20.0f});
  const std::string motor_hex = to_hex(motor);
  ASSERT_TRUE(doc.count("SetJointMotor")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n    SetJointMotor: "
                                          << motor_hex;
  EXPECT_EQ(doc.at("SetJointMotor"), motor_hex);
}

TEST(MessageVectors, TickStampedMessagesMatchTheDocument) {
  const auto doc = vectors_in_doc();
  flatbuffers::FlatBufferBuilder fbb;
  // ApplyImpulse{request_id 11, id {index 3, generation 1}, impulse (0, 4, 0)} as an action for
  // tick 600: Envelope.apply_tick stamped in place.
  const auto built = build_apply_impulse(fbb, 11, ObjectID{3, 1}, {0.0f, 4.0f, 0.0f});
  std::vector<uint8_t> action(built.begin(), built.end());
  ASSERT_TRUE(stamp_apply_tick(action, 600));
  const Verified a = verify_datagram(action, Direction::ClientToServer);
  ASSERT_EQ(a.reason, DropReason::None);
  EXPECT_EQ(a.envelope->apply_tick(), 600u);
  const std::string action_hex = to_hex(action);
  ASSERT_TRUE(doc.count("ApplyImpulse at tick 600")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n"
                                                     << "    ApplyImpulse at tick 600: " << action_hex;
  EXPECT_EQ(doc.at("ApplyImpulse at tick 600"), action_hex);
  // A message that changes nothing has no slot to stamp.
  const auto ping = build_ping(fbb, 1);
  std::vector<uint8_t> ping_bytes(ping.begin(), ping.end());
  EXPECT_FALSE(stamp_apply_tick(ping_bytes, 600));

  // Input{id {index 3, generation 1}, Force, first_tick 598, frames: (10, 0, 0 | 0, 0, 0),
  // (10, 0, 0 | 0, 2, 0), (0, 0, 0 | 0, 2, 0)}.
  const std::vector<InputFrame> frames{InputFrame(Vec3(10, 0, 0), Vec3(0, 0, 0)), InputFrame(Vec3(10, 0, 0), Vec3(0, 2, 0)),
                                       InputFrame(Vec3(0, 0, 0), Vec3(0, 2, 0))};
  const auto input = build_input(fbb, ObjectID{3, 1}, InputMode::Force, 598, frames);
  const Verified i = verify_datagram(input, Direction::ClientToServer);
  ASSERT_EQ(i.reason, DropReason::None);
  EXPECT_EQ(static_cast<int>(i.envelope->message_type()), 27);
  EXPECT_TRUE(check_request(*i.envelope->message_as_Input()).ok());
  const std::string input_hex = to_hex(input);
  ASSERT_TRUE(doc.count("Input")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n    Input: " << input_hex;
  EXPECT_EQ(doc.at("Input"), input_hex);

  // Raycast{request_id 12, origin (2, 5, 0), translation (0, -10, 0), seen_tick 590, seen_fraction 0.25}.
  const auto ray = build_raycast(fbb, 12, {2.0f, 5.0f, 0.0f}, {0.0f, -10.0f, 0.0f}, false, std::nullopt, false, 590, 0.25f);
  const std::string ray_hex = to_hex(ray);
  ASSERT_TRUE(doc.count("Raycast at seen tick 590.25")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n"
                                                        << "    Raycast at seen tick 590.25: " << ray_hex;
  EXPECT_EQ(doc.at("Raycast at seen tick 590.25"), ray_hex);

  // SetState{request_id 13, id {index 3, generation 1}, position (1, 0.5, 0), orientation identity,
  // velocity (2, 0, 0), angular_velocity (0, 0, 0)}.
  const auto state = build_set_state(fbb, 13, ObjectID{3, 1}, {1.0f, 0.5f, 0.0f}, impulse::Quat{}, {2.0f, 0.0f, 0.0f},
                                     {0.0f, 0.0f, 0.0f});
  const Verified st = verify_datagram(state, Direction::ClientToServer);
  ASSERT_EQ(st.reason, DropReason::None);
  EXPECT_EQ(static_cast<int>(st.envelope->message_type()), 28);
  EXPECT_TRUE(check_request(*st.envelope->message_as_SetState()).ok());
  const std::string state_hex = to_hex(state);
  ASSERT_TRUE(doc.count("SetState")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n    SetState: " << state_hex;
  EXPECT_EQ(doc.at("SetState"), state_hex);
}

// A Snapshot relaying two other clients' inputs (Snapshot.inputs): the server's side, so a reader
// in another language can check its decoding of the vector of structs.
TEST(MessageVectors, SnapshotWithRelayedInputsMatchesTheDocument) {
  const auto doc = vectors_in_doc();
  flatbuffers::FlatBufferBuilder fbb;
  // Snapshot{tick 600, data 01 02 03 04, input_lead 2, inputs: {id {3, 1}, Force, (400, 0, 0),
  // (0, 5, 0), repeats 0}, {id {4, 1}, Velocity, (0, 0, -6), (0, 0, 0), repeats 2}}.
  const std::vector<uint8_t> data = {1, 2, 3, 4};
  const std::vector<RelayedInput> inputs = {
      RelayedInput(impulse::to_wire(ObjectID{3, 1}), InputFrame(Vec3(400, 0, 0), Vec3(0, 5, 0)), InputMode::Force, 0),
      RelayedInput(impulse::to_wire(ObjectID{4, 1}), InputFrame(Vec3(0, 0, -6), Vec3(0, 0, 0)), InputMode::Velocity,
                   2),
  };
  const auto snapshot = build_snapshot(fbb, 600, data, 2, 0, inputs);
  const Verified v = verify_datagram(snapshot, Direction::ServerToClient);
  ASSERT_EQ(v.reason, DropReason::None);
  const Snapshot* s = v.envelope->message_as_Snapshot();
  ASSERT_NE(s, nullptr);
  ASSERT_NE(s->inputs(), nullptr);
  ASSERT_EQ(s->inputs()->size(), 2u);
  EXPECT_EQ(s->inputs()->Get(1)->repeats(), 2);
  const std::string hex = to_hex(snapshot);
  ASSERT_TRUE(doc.count("Snapshot with relayed inputs")) << "docs/PROTOCOL.md lacks the vector; the codec builds\n"
                                                         << "    Snapshot with relayed inputs: " << hex;
  EXPECT_EQ(doc.at("Snapshot with relayed inputs"), hex);
}

}  // namespace
}  // namespace impulse::wire
