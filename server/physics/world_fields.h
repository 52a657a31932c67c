// The field lists of World's state: for each struct the step reads, its fields in one fixed order.
// One list drives save_state's writer, restore_state's checked reader (world_state.cpp) and the
// hash of world_hash and awake_hash (world_hash.cpp), so a field added here is saved, restored and
// hashed at once, and none of them can fall out of step with the others.
//
// `Io` is the visitor: it provides u8, u16, u32, i32, u64, f32, flag(b, what),
// enumeration(e, last, what) and expect(condition, what); `S` is the struct, const when saving or
// hashing. The readers check what they read (`what` names the field in their error messages).
#pragma once

#include <type_traits>

#include "server/physics/world.h"

namespace impulse::physics::detail {

// Vectors, quaternions and ids as their scalar fields (V is const when saving or hashing).
template <class Io, class V>
void io_vec(Io& io, V& v) {
  io.f32(v.x);
  io.f32(v.y);
  io.f32(v.z);
}
template <class Io, class Q>
void io_quat(Io& io, Q& q) {
  io.f32(q.x);
  io.f32(q.y);
  io.f32(q.z);
  io.f32(q.w);
}
template <class Io, class I>
void io_id(Io& io, I& id) {
  io.u32(id.index);
  io.u32(id.generation);
}

template <class Io, class S>
void io_settings(Io& io, S& s) {
  io_vec(io, s.gravity);
  io.f32(s.cell_size);
  io.u32(s.max_cells_per_body);
  io.f32(s.speculative_margin);
  io.i32(s.substeps);
  io.i32(s.relax_iterations);
  io.f32(s.contact_hertz);
  io.f32(s.contact_damping_ratio);
  io.f32(s.contact_push_max_speed);
  io.f32(s.linear_slop);
  io.f32(s.restitution_threshold);
  io.enumeration(s.friction_mix, MixRule::Multiply, "settings.friction_mix");
  io.enumeration(s.restitution_mix, MixRule::Multiply, "settings.restitution_mix");
  io.f32(s.sleep_speed);
  io.f32(s.sleep_time_s);
  io.flag(s.allow_sleep, "settings.allow_sleep");
  io.f32(s.max_coordinate);
  io.f32(s.max_speed);
  io.f32(s.max_angular_speed);
  io.f32(s.max_extent);
  io.f32(s.max_mass);
  io.u32(s.max_objects);
}

template <class Io, class S>
void io_pose(Io& io, S& p) {
  io_vec(io, p.position);
  io_quat(io, p.orientation);
  io_vec(io, p.aabb.min);
  io_vec(io, p.aabb.max);
}

template <class Io, class S>
void io_motion(Io& io, S& m) {
  io_vec(io, m.velocity);
  io_vec(io, m.angular_velocity);
  io_vec(io, m.force);
  io_vec(io, m.torque);
  io_vec(io, m.inv_inertia);
  io.f32(m.inv_mass);
  io.f32(m.linear_damping);
  io.f32(m.angular_damping);
}

// A hull body also holds its hull's index in the World's table; other kinds save and hash as
// before hulls existed.
template <class Io, class S>
void io_shape(Io& io, S& s) {
  io.enumeration(s.kind, ShapeKind::Cylinder, "shape kind");
  io.f32(s.radius);
  io_vec(io, s.half_extents);
  io.f32(s.half_height);
  if (s.kind == ShapeKind::Hull || is_triangle_surface(s.kind)) io.u32(s.data_id);
}

/// A count before an array: the reader's count() checks it against the bytes left (min_bytes each).
template <class Io>
uint32_t io_count(Io& io, size_t size, size_t min_bytes, const char* what) {
  if constexpr (requires { io.count(min_bytes, what); }) {
    return io.count(min_bytes, what);
  } else {
    io.u32(static_cast<uint32_t>(size));
    return static_cast<uint32_t>(size);
  }
}

/// Words a hull takes in the hash (HashWords::reserve), at most.
inline size_t hull_words(const ConvexHull& h) {
  return 4 + 3 * h.vertices.size() + 6 * h.faces.size() + h.face_vertices.size() + 4 * h.edges.size() + 16;
}

template <class Io, class H>
void io_hull(Io& io, H& h) {
  constexpr bool kReading = !std::is_const_v<H>;
  const uint32_t nv = io_count(io, h.vertices.size(), 12, "hull vertex");
  if constexpr (kReading) {
    if (!io.expect(nv <= kMaxHullVertices, "hull: more than kMaxHullVertices (64) vertices")) return;
    h.vertices.resize(nv);
  }
  for (auto& v : h.vertices) io_vec(io, v);
  const uint32_t nf = io_count(io, h.faces.size(), 20, "hull face");
  if constexpr (kReading) {
    if (!io.expect(nf <= 2 * kMaxHullVertices, "hull: too many faces")) return;
    h.faces.resize(nf);
    h.planes.resize(nf);
  }
  for (uint32_t f = 0; f < nf; ++f) {
    io.u16(h.faces[f].first);
    io.u16(h.faces[f].count);
    io_vec(io, h.planes[f].normal);
    io.f32(h.planes[f].offset);
  }
  const uint32_t nfv = io_count(io, h.face_vertices.size(), 1, "hull face vertex");
  if constexpr (kReading) {
    if (!io.expect(nfv <= 6 * kMaxHullVertices, "hull: too many face vertices")) return;
    h.face_vertices.resize(nfv);
  }
  for (auto& v : h.face_vertices) io.u8(v);
  const uint32_t ne = io_count(io, h.edges.size(), 4, "hull edge");
  if constexpr (kReading) {
    if (!io.expect(ne <= 3 * kMaxHullVertices, "hull: too many edges")) return;
    h.edges.resize(ne);
  }
  for (auto& e : h.edges) {
    io.u8(e.v0);
    io.u8(e.v1);
    io.u8(e.f0);
    io.u8(e.f1);
  }
  io.f32(h.volume);
  io_vec(io, h.unit_inertia);
  io.f32(h.radius);
  io.f32(h.inner_radius);
  io_vec(io, h.origin);
  io_quat(io, h.rotation);
}

/// A mesh's source data (format 12): V u32, V vertices 3 f32; I u32, I indices u32; M u32, M
/// material ids u8. The reader rebuilds the rest (check_mesh: it must be canonical).
template <class Io, class M>
void io_mesh(Io& io, M& m) {
  constexpr bool kReading = !std::is_const_v<M>;
  const uint32_t nv = io_count(io, m.vertices.size(), 12, "mesh vertex");
  if constexpr (kReading) {
    if (!io.expect(nv <= kMaxMeshVertices, "mesh: more than kMaxMeshVertices vertices")) return;
    m.vertices.resize(nv);
  }
  for (auto& v : m.vertices) io_vec(io, v);
  const uint32_t ni = io_count(io, m.indices.size(), 4, "mesh index");
  if constexpr (kReading) {
    if (!io.expect(ni % 3 == 0 && ni / 3 <= kMaxMeshTriangles, "mesh: index count not 3 per triangle or too many")) {
      return;
    }
    m.indices.resize(ni);
  }
  for (auto& i : m.indices) io.u32(i);
  const uint32_t nm = io_count(io, m.materials.size(), 1, "mesh material");
  if constexpr (kReading) {
    if (!io.expect(nm == 0 || nm == ni / 3, "mesh: material count neither 0 nor the triangle count")) return;
    m.materials.resize(nm);
  }
  for (auto& v : m.materials) io.u8(v);
}

/// A heightfield's stored data (format 12): count_x u32, count_z u32, spacing x and z f32, offset
/// f32, scale f32; N u32, N heights u16; M u32, M material ids u8. The reader recomputes the rest
/// (check_heightfield).
template <class Io, class H>
void io_heightfield(Io& io, H& h) {
  constexpr bool kReading = !std::is_const_v<H>;
  io.u32(h.count_x);
  io.u32(h.count_z);
  io.f32(h.spacing.x);
  io.f32(h.spacing.z);
  if constexpr (kReading) h.spacing.y = 0.0f;
  io.f32(h.offset);
  io.f32(h.scale);
  const uint32_t n = io_count(io, h.heights.size(), 2, "heightfield sample");
  if constexpr (kReading) {
    if (!io.expect(n <= kMaxHeightFieldSide * kMaxHeightFieldSide, "heightfield: too many samples")) return;
    h.heights.resize(n);
  }
  for (auto& q : h.heights) io.u16(q);
  const uint32_t m = io_count(io, h.materials.size(), 1, "heightfield material");
  if constexpr (kReading) h.materials.resize(m);
  for (auto& v : h.materials) io.u8(v);
}

template <class Io, class S>
void io_material(Io& io, S& m) {
  io.f32(m.restitution);
  io.f32(m.friction);
  io.u16(m.id);
}

// The sensor and bullet flags share one byte (bit 0 sensor, bit 1 bullet): a world without bullets
// saves and hashes exactly as before the bullet flag existed, so earlier states and pinned hashes
// stay valid. Readers check the byte and set both flags.
template <class Io, class S>
void io_body_flags(Io& io, S& i) {
  uint8_t bits = static_cast<uint8_t>((i.sensor ? 1u : 0u) | (i.bullet ? 2u : 0u));
  io.u8(bits);
  if constexpr (!std::is_const_v<S>) {
    if (!io.expect(bits <= 3u, "body flags: only bit 0 (sensor) and bit 1 (bullet) are defined")) return;
    i.sensor = (bits & 1u) != 0;
    i.bullet = (bits & 2u) != 0;
  }
}

template <class Io, class S>
void io_info(Io& io, S& i) {
  io.enumeration(i.kind, BodyKind::Kinematic, "body kind");
  io.flag(i.sleeping, "body sleeping flag");
  io_body_flags(io, i);
  io.f32(i.sleep_timer);
  io.f32(i.mass);
  io.f32(i.extent);
  io.u32(i.awake_index);
  io.u32(i.contact_count);
  io.u32(i.island);
  io.u32(i.filter.category);
  io.u32(i.filter.mask);
  io.i32(i.filter.group);
  io.u64(i.held_until);
}

template <class Io, class S>
void io_record(Io& io, S& r) {
  io_id(io, r.contact.a);
  io_id(io, r.contact.b);
  io_vec(io, r.contact.point);
  io_vec(io, r.contact.normal);
  io.f32(r.contact.depth);
  io.u8(r.point_count);
  // Bit 0 the sensor flag, bits 1-7 the manifold's sub (format 12; 0 before, so the state and
  // hash of a world without meshes are unchanged).
  if constexpr (std::is_const_v<S>) {
    io.u8(static_cast<uint8_t>((r.sensor ? 1u : 0u) | static_cast<uint32_t>(r.sub) << 1));
  } else {
    uint8_t bits = 0;
    io.u8(bits);
    if (!io.expect(bits >> 1 < kMaxMeshManifolds, "contact sub beyond kMaxMeshManifolds")) return;
    r.sensor = (bits & 1u) != 0;
    r.sub = static_cast<uint8_t>(bits >> 1);
  }
  io.flag(r.recovering, "contact recovering flag");
  if (!io.expect(r.point_count >= 1 && r.point_count <= kMaxManifoldPoints, "contact point_count outside [1, 4]")) {
    return;
  }
  for (int i = 0; i < r.point_count; ++i) {
    auto& p = r.points[i];
    io_vec(io, p.point);
    io.f32(p.separation);
    io.u32(p.feature);
    io.f32(p.normal_impulse);
    io_vec(io, p.friction_impulse);
    io.f32(p.pseudo_impulse);
  }
}

template <class Io, class S>
void io_event(Io& io, S& e) {
  io.enumeration(e.type, ContactEventType::End, "event type");
  io_id(io, e.a);
  io_id(io, e.b);
  io_vec(io, e.point);
  io_vec(io, e.normal);
}

// A material-pair override: its key (min id << 16 | max id) and the mixed values.
template <class Io, class S>
void io_material_pair(Io& io, S& entry) {
  io.u32(entry.first);
  io.f32(entry.second.friction);
  io.f32(entry.second.restitution);
}

// A joint slot (JointSlot, joint.h): its generation and liveness, then the joint (joint.h).
template <class Io, class S>
void io_joint(Io& io, S& slot) {
  io.u32(slot.generation);
  io.flag(slot.live, "joint live");
  auto& j = slot.joint;
  io.enumeration(j.kind, JointKind::SwingTwist, "joint kind");
  io_id(io, j.a);
  io_id(io, j.b);
  io_vec(io, j.local_a);
  io_vec(io, j.local_b);
  io_vec(io, j.axis_a);
  io_vec(io, j.axis_b);
  io_quat(io, j.relative);
  io.f32(j.length);
  io.f32(j.min_length);
  io.f32(j.max_length);
  io.f32(j.spring_hertz);
  io.f32(j.spring_damping_ratio);
  io.flag(j.collide_connected, "joint collide_connected");
  io_vec(io, j.ref_a);
  io_vec(io, j.ref_b);
  io.flag(j.enable_limit, "joint enable_limit");
  io.flag(j.enable_motor, "joint enable_motor");
  io.f32(j.lower);
  io.f32(j.upper);
  io.f32(j.motor_speed);
  io.f32(j.max_motor);
  io.f32(j.spring_target);
  io.f32(j.break_force);
  io.f32(j.break_torque);
  io.flag(j.position_motor, "joint position_motor");
  io.f32(j.motor_target);
  io.f32(j.cone);
  io_vec(io, j.linear_impulse);
  io_vec(io, j.angular_impulse);
  io.f32(j.axial_impulse);
  io.f32(j.lower_impulse);
  io.f32(j.upper_impulse);
  io.f32(j.motor_impulse);
}
inline constexpr size_t kJointBytes = 4 + 1 + 1 + 16 + 4 * 12 + 16 + 5 * 4 + 1 + 2 * 12 + 2 + 7 * 4 + 1 + 2 * 4 + 2 * 12 + 4 * 4;  // 210
inline constexpr size_t kWordsPerJoint = 2 + 1 + 4 + 12 + 4 + 5 + 1 + 6 + 2 + 7 + 3 + 6 + 4;  // 57

}  // namespace impulse::physics::detail
