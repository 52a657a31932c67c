// The demo scene's joints, at z >= 12 (beyond the towers, pyramid and dominoes): a door on a
// hinge with limits, a chain with a wrecking ball, a plank bridge between two pillars, a car on
// four motor-driven hinge wheels, and a sign on a breakable hook. Every body and joint is named.
#include <fmt/format.h>

#include "server/app/scene.h"

namespace impulse::server {

namespace {

int add_body(Scene* scene, std::string name, const physics::BodyDesc& desc) {
  scene->bodies.push_back(desc);
  scene->body_names.push_back(std::move(name));
  return static_cast<int>(scene->bodies.size()) - 1;
}

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
    const Vec3 hinge{-9.0f, 1.05f, 12.0f};
    physics::BodyDesc door = box(hinge + Vec3{0.5f, 0.0f, 0.0f}, {0.5f, 1.0f, 0.05f}, 20.0f);
    constexpr float kRate = 1.5f;
    door.angular_velocity = {0.0f, kRate, 0.0f};
    door.velocity = {0.0f, 0.0f, -0.5f * kRate};  // its centre turning about the hinge
    const int d = add_body(scene, "door", door);
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
    const Vec3 top{-3.0f, 9.0f, 14.0f};
    constexpr int kLinks = 20;
    constexpr float kLink = 0.3f;  // end to end
    int previous = -1;
    for (int i = 0; i < kLinks; ++i) {
      physics::BodyDesc link;
      link.shape = physics::make_capsule(0.05f, 0.5f * kLink - 0.05f);
      link.position = top - Vec3{0.0f, kLink * (static_cast<float>(i) + 0.5f), 0.0f};
      link.mass = 0.5f;
      const int l = add_body(scene, fmt::format("chain/{}", i), link);
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
    const int b = add_body(scene, "chain/ball", ball);
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
    physics::BodyDesc pillar = box({2.5f, 0.5f * kDeck, 16.0f}, {0.5f, 0.5f * kDeck, 0.8f}, 0.0f);
    pillar.kind = physics::BodyKind::Static;
    const int left = add_body(scene, "bridge/pillar/0", pillar);
    pillar.position.x = 3.0f + kPlank * kPlanks + 0.5f;
    const int right = add_body(scene, "bridge/pillar/1", pillar);
    physics::JointDesc j;
    j.kind = physics::JointKind::Hinge;
    j.axis = {0.0f, 0.0f, 1.0f};
    int previous = left;
    for (int i = 0; i < kPlanks; ++i) {
      const float x0 = 3.0f + kPlank * static_cast<float>(i);
      const int p = add_body(scene, fmt::format("bridge/plank/{}", i),
                             box({x0 + 0.5f * kPlank, kDeck - 0.05f, 16.0f}, {0.5f * kPlank - 0.01f, 0.05f, 0.6f}, 2.0f));
      j.anchor = {x0, kDeck - 0.05f, 16.0f};
      add_joint(scene, fmt::format("bridge/hinge/{}", i), p, previous, j);
      previous = p;
    }
    j.anchor = {3.0f + kPlank * kPlanks, kDeck - 0.05f, 16.0f};
    add_joint(scene, fmt::format("bridge/hinge/{}", kPlanks), previous, right, j);
    add_body(scene, "bridge/crate/0", box({5.5f, kDeck + 1.0f, 16.0f}, {0.3f, 0.3f, 0.3f}, 5.0f));
    add_body(scene, "bridge/crate/1", box({9.0f, kDeck + 2.0f, 16.2f}, {0.3f, 0.3f, 0.3f}, 5.0f));
  }

  // A car: a 40 kg chassis on four 2 kg sphere wheels, each on a hinge about +Z ("car/axle/<i>")
  // whose motor is off until a client drives it (SetJointMotor; impulse-client demo does).
  {
    const Vec3 centre{-7.0f, 0.8f, 19.0f};
    const int chassis = add_body(scene, "car/chassis", box(centre, {1.0f, 0.2f, 0.5f}, 40.0f));
    for (int i = 0; i < 4; ++i) {
      const Vec3 at{centre.x + (i < 2 ? -0.7f : 0.7f), 0.35f, centre.z + (i % 2 == 0 ? -0.65f : 0.65f)};
      physics::BodyDesc wheel;
      wheel.shape = physics::make_sphere(0.35f);
      wheel.position = at;
      wheel.mass = 2.0f;
      wheel.friction = 1.0f;
      const int w = add_body(scene, fmt::format("car/wheel/{}", i), wheel);
      physics::JointDesc j;
      j.kind = physics::JointKind::Hinge;
      j.anchor = at;
      j.axis = {0.0f, 0.0f, 1.0f};
      add_joint(scene, fmt::format("car/axle/{}", i), chassis, w, j);
    }
  }

  // A 10 kg sign on a hook that breaks past 250 N (it holds its 98 N weight): a hard push
  // breaks it and every client hears JointRemoved{Broken}.
  {
    const int sign = add_body(scene, "sign", box({1.0f, 4.0f, 13.0f}, {0.6f, 0.3f, 0.05f}, 10.0f));
    physics::JointDesc j;
    j.anchor = {1.0f, 4.3f, 13.0f};
    j.break_force = 250.0f;
    add_joint(scene, "sign/hook", sign, -1, j);
  }
}

}  // namespace impulse::server
