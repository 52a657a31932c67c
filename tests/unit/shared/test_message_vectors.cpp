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

}  // namespace
}  // namespace impulse::wire
