// The demo scene's joints, at z <= -12 (behind the towers and the pyramid, as the viewer's camera
// looks): a door on a hinge with limits, a chain with a wrecking ball, a plank bridge between two
// pillars, a car on four motor-driven hinge wheels, a ragdoll down a flight of stairs, and a sign
// on a breakable hook. Every body and joint is named.
#include <fmt/format.h>

#include "server/app/scene.h"

namespace impulse::server {

namespace {

void add_joint(Scene* scene, std::string name, int a, int b, const physics::JointDesc& desc) {
  scene->joints.push_back(SceneJoint{desc, a, b, std::move(name)});
}

physics::BodyDesc box(Vec3 position, Vec3 half_extents, float mass) {
  physics::BodyDesc d;
  d.shape = physics::make_box(half_extents);
  d.position = position;
  d.mass = mass;
  return d;
}

}  // namespace

void add_joint_showcase(Scene* scene) {
  constexpr float kDegrees = 3.14159265358979f / 180.0f;

  // A 20 kg door, 1 m wide and 2 m tall, hinged to the world along its left edge (+Y), pushed
  // open at 1.5 rad/s: it swings until its limit stops it at 80 degrees. The door is body A and
  // the world B, so the joint's angle is minus the door's: the limit is [-80, 80] degrees.
  {
    const Vec3 hinge{-9.0f, 1.05f, -12.0f};
    physics::BodyDesc door = box(hinge + Vec3{0.5f, 0.0f, 0.0f}, {0.5f, 1.0f, 0.05f}, 20.0f);
    constexpr float kRate = 1.5f;
    door.angular_velocity = {0.0f, kRate, 0.0f};
    door.velocity = {0.0f, 0.0f, -0.5f * kRate};  // its centre turning about the hinge
    const int d = add_named_body(scene, "door", door);
    physics::JointDesc j;
    j.kind = physics::JointKind::Hinge;
    j.anchor = hinge;
    j.axis = {0.0f, 1.0f, 0.0f};
    j.enable_limit = true;
    j.lower_angle = -80.0f * kDegrees;
    j.upper_angle = 80.0f * kDegrees;
    add_joint(scene, "door/hinge", d, -1, j);
  }

  // A chain of 20 capsule links (0.3 m, 0.5 kg each) from a point 9 m up, ending in a 20 kg
  // wrecking ball thrown sideways at 3 m/s: point joints at the links' ends.
  {
    const Vec3 top{-3.0f, 9.0f, -14.0f};
    constexpr int kLinks = 20;
    constexpr float kLink = 0.3f;  // end to end
    int previous = -1;
    for (int i = 0; i < kLinks; ++i) {
      physics::BodyDesc link;
      link.shape = physics::make_capsule(0.05f, 0.5f * kLink - 0.05f);
      link.position = top - Vec3{0.0f, kLink * (static_cast<float>(i) + 0.5f), 0.0f};
      link.mass = 0.5f;
      const int l = add_named_body(scene, fmt::format("chain/{}", i), link);
      physics::JointDesc j;
      j.anchor = top - Vec3{0.0f, kLink * static_cast<float>(i), 0.0f};
      add_joint(scene, fmt::format("chain/joint/{}", i), l, previous, j);
      previous = l;
    }
    physics::BodyDesc ball;
    ball.shape = physics::make_sphere(0.4f);
    const Vec3 end = top - Vec3{0.0f, kLink * kLinks, 0.0f};
    ball.position = end - Vec3{0.0f, 0.4f, 0.0f};
    ball.velocity = {3.0f, 0.0f, 0.0f};
    ball.mass = 20.0f;
    const int b = add_named_body(scene, "chain/ball", ball);
    physics::JointDesc j;
    j.anchor = end;
    add_joint(scene, "chain/joint/ball", b, previous, j);
  }

  // A bridge of 10 planks (2 kg) hinged end to end about +Z between two static pillars, with
  // two crates dropped onto it.
  {
    constexpr int kPlanks = 10;
    constexpr float kPlank = 0.9f;  // length along x
    constexpr float kDeck = 2.0f;   // the pillars' top
    physics::BodyDesc pillar = box({2.5f, 0.5f * kDeck, -16.0f}, {0.5f, 0.5f * kDeck, 0.8f}, 0.0f);
    pillar.kind = physics::BodyKind::Static;
    const int left = add_named_body(scene, "bridge/pillar/0", pillar);
    pillar.position.x = 3.0f + kPlank * kPlanks + 0.5f;
    const int right = add_named_body(scene, "bridge/pillar/1", pillar);
    physics::JointDesc j;
    j.kind = physics::JointKind::Hinge;
    j.axis = {0.0f, 0.0f, 1.0f};
    int previous = left;
    for (int i = 0; i < kPlanks; ++i) {
      const float x0 = 3.0f + kPlank * static_cast<float>(i);
      const int p = add_named_body(scene, fmt::format("bridge/plank/{}", i),
                             box({x0 + 0.5f * kPlank, kDeck - 0.05f, -16.0f}, {0.5f * kPlank - 0.01f, 0.05f, 0.6f}, 2.0f));
      j.anchor = {x0, kDeck - 0.05f, -16.0f};
      add_joint(scene, fmt::format("bridge/hinge/{}", i), p, previous, j);
      previous = p;
    }
    j.anchor = {3.0f + kPlank * kPlanks, kDeck - 0.05f, -16.0f};
    add_joint(scene, fmt::format("bridge/hinge/{}", kPlanks), previous, right, j);
    add_named_body(scene, "bridge/crate/0", box({5.5f, kDeck + 1.0f, -16.0f}, {0.3f, 0.3f, 0.3f}, 5.0f));
    add_named_body(scene, "bridge/crate/1", box({9.0f, kDeck + 2.0f, -15.8f}, {0.3f, 0.3f, 0.3f}, 5.0f));
  }

  // A car: a 40 kg chassis on four 2 kg sphere wheels, each on a hinge about +Z ("car/axle/<i>")
  // whose motor is off until a client drives it (SetJointMotor; impulse-client demo does).
  {
    const Vec3 centre{-7.0f, 0.8f, -20.0f};
    const int chassis = add_named_body(scene, "car/chassis", box(centre, {1.0f, 0.2f, 0.5f}, 40.0f));
    for (int i = 0; i < 4; ++i) {
      const Vec3 at{centre.x + (i < 2 ? -0.7f : 0.7f), 0.35f, centre.z + (i % 2 == 0 ? -0.65f : 0.65f)};
      physics::BodyDesc wheel;
      wheel.shape = physics::make_sphere(0.35f);
      wheel.position = at;
      wheel.mass = 2.0f;
      wheel.friction = 1.0f;
      const int w = add_named_body(scene, fmt::format("car/wheel/{}", i), wheel);
      physics::JointDesc j;
      j.kind = physics::JointKind::Hinge;
      j.anchor = at;
      j.axis = {0.0f, 0.0f, 1.0f};
      add_joint(scene, fmt::format("car/axle/{}", i), chassis, w, j);
    }
  }

  // A 15-body ragdoll on top of six steps, nudged forwards: it tumbles down them and comes to
  // rest. Swing-twist joints (cone, twist range, friction) at the spine, neck, shoulders and hips;
  // hinges at the elbows, knees and ankles.
  {
    constexpr float kStepX = 8.0f, kStepZ = -24.0f;
    for (int k = 0; k < 6; ++k) {
      const float height = 0.2f * static_cast<float>(6 - k);
      physics::BodyDesc step = box({kStepX, 0.5f * height, kStepZ + 0.4f * static_cast<float>(k)}, {1.0f, 0.5f * height, 0.2f}, 0.0f);
      step.kind = physics::BodyKind::Static;
      add_named_body(scene, fmt::format("stairs/{}", k), step);
    }
    const Vec3 base{kStepX, 1.25f, kStepZ - 0.1f};
    struct Part {
      const char* name;
      physics::Shape shape;
      Vec3 at;  // from the feet's base [m]
      float mass;
    };
    const Part parts[] = {
        {"pelvis", physics::make_box({0.15f, 0.08f, 0.1f}), {0, 1.0f, 0}, 10.0f},
        {"abdomen", physics::make_box({0.14f, 0.09f, 0.09f}), {0, 1.19f, 0}, 8.0f},
        {"chest", physics::make_box({0.17f, 0.12f, 0.1f}), {0, 1.42f, 0}, 12.0f},
        {"neck", physics::make_capsule(0.05f, 0.02f), {0, 1.6f, 0}, 1.0f},
        {"head", physics::make_sphere(0.1f), {0, 1.77f, 0}, 4.0f},
        {"arm/0", physics::make_capsule(0.045f, 0.1f), {-0.25f, 1.37f, 0}, 2.0f},
        {"forearm/0", physics::make_capsule(0.04f, 0.09f), {-0.25f, 1.1f, 0}, 1.5f},
        {"arm/1", physics::make_capsule(0.045f, 0.1f), {0.25f, 1.37f, 0}, 2.0f},
        {"forearm/1", physics::make_capsule(0.04f, 0.09f), {0.25f, 1.1f, 0}, 1.5f},
        {"thigh/0", physics::make_capsule(0.065f, 0.14f), {-0.09f, 0.7f, 0}, 7.0f},
        {"shin/0", physics::make_capsule(0.05f, 0.14f), {-0.09f, 0.3f, 0}, 4.0f},
        {"foot/0", physics::make_box({0.045f, 0.03f, 0.1f}), {-0.09f, 0.035f, 0.05f}, 1.0f},
        {"thigh/1", physics::make_capsule(0.065f, 0.14f), {0.09f, 0.7f, 0}, 7.0f},
        {"shin/1", physics::make_capsule(0.05f, 0.14f), {0.09f, 0.3f, 0}, 4.0f},
        {"foot/1", physics::make_box({0.045f, 0.03f, 0.1f}), {0.09f, 0.035f, 0.05f}, 1.0f},
    };
    const int first = static_cast<int>(scene->bodies.size());
    for (const Part& p : parts) {
      physics::BodyDesc d;
      d.shape = p.shape;
      d.position = base + p.at;
      d.mass = p.mass;
      d.velocity = {0.0f, 0.0f, 1.5f};
      d.friction = 0.6f;
      add_named_body(scene, fmt::format("ragdoll/{}", p.name), d);
    }
    struct Link {
      const char* name;
      int a, b;  // indices into parts
      Vec3 at;
      physics::JointKind kind;
      Vec3 axis;
      float cone, lower, upper, friction;
    };
    constexpr Vec3 kUp{0, 1, 0}, kDown{0, -1, 0}, kSide{1, 0, 0};
    constexpr auto kSwing = physics::JointKind::SwingTwist;
    constexpr auto kHinge = physics::JointKind::Hinge;
    const Link links[] = {
        {"waist", 0, 1, {0, 1.09f, 0}, kSwing, kUp, 0.35f, -0.3f, 0.3f, 2.0f},
        {"spine", 1, 2, {0, 1.29f, 0}, kSwing, kUp, 0.35f, -0.3f, 0.3f, 2.0f},
        {"neck", 2, 3, {0, 1.55f, 0}, kSwing, kUp, 0.6f, -0.5f, 0.5f, 0.5f},
        {"skull", 3, 4, {0, 1.66f, 0}, kSwing, kUp, 0.6f, -0.5f, 0.5f, 0.5f},
        {"shoulder/0", 2, 5, {-0.25f, 1.52f, 0}, kSwing, kDown, 1.2f, -0.8f, 0.8f, 1.0f},
        {"elbow/0", 5, 6, {-0.25f, 1.23f, 0}, kHinge, kSide, 0, -2.4f, 0.0f, 0},
        {"shoulder/1", 2, 7, {0.25f, 1.52f, 0}, kSwing, kDown, 1.2f, -0.8f, 0.8f, 1.0f},
        {"elbow/1", 7, 8, {0.25f, 1.23f, 0}, kHinge, kSide, 0, -2.4f, 0.0f, 0},
        {"hip/0", 0, 9, {-0.09f, 0.91f, 0}, kSwing, kDown, 0.9f, -0.4f, 0.4f, 2.0f},
        {"knee/0", 9, 10, {-0.09f, 0.5f, 0}, kHinge, kSide, 0, 0.0f, 2.4f, 0},
        {"ankle/0", 10, 11, {-0.09f, 0.08f, 0}, kHinge, kSide, 0, -0.5f, 0.5f, 0},
        {"hip/1", 0, 12, {0.09f, 0.91f, 0}, kSwing, kDown, 0.9f, -0.4f, 0.4f, 2.0f},
        {"knee/1", 12, 13, {0.09f, 0.5f, 0}, kHinge, kSide, 0, 0.0f, 2.4f, 0},
        {"ankle/1", 13, 14, {0.09f, 0.08f, 0}, kHinge, kSide, 0, -0.5f, 0.5f, 0},
    };
    for (const Link& l : links) {
      physics::JointDesc j;
      j.kind = l.kind;
      j.anchor = base + l.at;
      j.axis = l.axis;
      j.enable_limit = true;
      j.cone_angle = l.cone;
      j.lower_angle = l.lower;
      j.upper_angle = l.upper;
      j.friction_torque = l.friction;
      add_joint(scene, fmt::format("ragdoll/{}", l.name), first + l.a, first + l.b, j);
    }
  }

  // A 10 kg sign on a hook that breaks past 250 N (it holds its 98 N weight): a hard push
  // breaks it and every client hears JointRemoved{Broken}.
  {
    const int sign = add_named_body(scene, "sign", box({1.0f, 4.0f, -12.0f}, {0.6f, 0.3f, 0.05f}, 10.0f));
    physics::JointDesc j;
    j.anchor = {1.0f, 4.3f, -12.0f};
    j.break_force = 250.0f;
    add_joint(scene, "sign/hook", sign, -1, j);
  }
}

}  // namespace impulse::server
