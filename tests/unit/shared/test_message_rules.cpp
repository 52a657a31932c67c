// The message table (shared/wire/messages.h): every row is consistent with what the server does
// with it, and the request path applies exactly the rows that change the world.
#include <gtest/gtest.h>

#include "server/physics/world.h"
#include "server/request/apply_request.h"
#include "shared/wire/messages.h"

namespace impulse::wire {
namespace {

TEST(MessageRules, EveryRowIsConsistent) {
  size_t requests = 0, world = 0;
  for (size_t i = 0; i < kMessageRules.size(); ++i) {
    const MessageRule& rule = kMessageRules[i];
    const char* name = EnumNameMessage(rule.type);
    EXPECT_EQ(static_cast<size_t>(rule.type), i) << name;
    EXPECT_EQ(rule.from_client && rule.from_server, rule.type == Message::Disconnect)
        << name << ": one direction only, but either side may say goodbye";
    EXPECT_EQ(&rule_of(rule.type), &rule) << name;
    const bool request = rule.kind == ClientMessageKind::Request;
    EXPECT_EQ(request || rule.kind == ClientMessageKind::Handshake || rule.kind == ClientMessageKind::Control,
              rule.from_client)
        << name << ": a client's message has a kind, a server's has none";
    // The columns below mean something only for requests the server admits.
    if (!request) {
      EXPECT_FALSE(rule.addresses_object || rule.fire_and_forget || rule.answered_at_admission || rule.changes_world)
          << name;
    }
    EXPECT_FALSE(rule.answered_at_admission && rule.changes_world)
        << name << ": answered at admission means never queued for a tick";
    EXPECT_FALSE(rule.fire_and_forget && rule.answered_at_admission) << name << ": nothing to answer";
    requests += request ? 1 : 0;
    world += request && rule.changes_world ? 1 : 0;
  }
  EXPECT_EQ(rule_of(static_cast<Message>(250)).type, Message::NONE) << "a value outside the enum reads as NONE";
  EXPECT_GT(requests, world);
  EXPECT_GE(world, 10u);
}

TEST(MessageRules, TheWorldIsChangedOnlyByRequestsThatSaySo) {
  // apply_to_world on a world with one dynamic box: a type that does not change the world is
  // refused whatever it carries, and each world-changing type reaches the World (a valid
  // argument gives Ok, or at worst the World's own refusal of the empty request).
  for (size_t i = 0; i < kMessageRules.size(); ++i) {
    const MessageRule& rule = kMessageRules[i];
    physics::World world;
    physics::BodyDesc box;
    box.shape = physics::make_box({0.5f, 0.5f, 0.5f});
    const physics::CreateResult created = world.create_object(box);
    ASSERT_EQ(created.error, physics::Error::Ok);
    server::PendingRequest r;
    r.type = rule.type;
    r.id = created.id;
    r.desc = box;
    const server::AppliedRequest applied = server::apply_to_world(world, r, 1.0f / 60.0f);
    if (!(rule.kind == ClientMessageKind::Request && rule.changes_world)) {
      EXPECT_EQ(applied.error, physics::Error::InvalidArgument) << EnumNameMessage(rule.type);
    }
  }
  // The world-changing ones that need nothing beyond a live body apply.
  for (const Message type : {Message::DestroyObject, Message::ApplyForce, Message::ApplyImpulse, Message::SetVelocity,
                             Message::ApplyTorque, Message::SetAngularVelocity, Message::CreateObject}) {
    physics::World world;
    physics::BodyDesc box;
    box.shape = physics::make_box({0.5f, 0.5f, 0.5f});
    const physics::CreateResult created = world.create_object(box);
    server::PendingRequest r;
    r.type = type;
    r.id = created.id;
    r.desc = box;
    r.desc.position = {3, 0, 0};
    EXPECT_EQ(server::apply_to_world(world, r, 1.0f / 60.0f).error, physics::Error::Ok) << EnumNameMessage(type);
  }
}

}  // namespace
}  // namespace impulse::wire
