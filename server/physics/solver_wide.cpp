// Wide contact sweeps: graph colouring, then kSolverLanes manifolds per SIMD lane group (Box2D v3,
// Catto 2024). See solver_wide.h; the scalar sweeps they mirror are in solver.cpp.
#include "server/physics/solver_wide.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace impulse::physics {
namespace {

using F = WideFloat;
using M = WideMask;

F splat(float v) { return F{v, v, v, v}; }

// a where mask, else b (bitwise: exact for every value, NaN and signed zeros included).
F select(M mask, F a, F b) {
  return std::bit_cast<F>((mask & std::bit_cast<M>(a)) | (~mask & std::bit_cast<M>(b)));
}
WideVec3 select(M mask, const WideVec3& a, const WideVec3& b) {
  return {select(mask, a.x, b.x), select(mask, a.y, b.y), select(mask, a.z, b.z)};
}

// The scalar math.h operations, lane by lane, in the same order.
WideVec3 operator+(const WideVec3& a, const WideVec3& b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
WideVec3 operator-(const WideVec3& a, const WideVec3& b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
WideVec3 operator*(const WideVec3& a, F s) { return {a.x * s, a.y * s, a.z * s}; }
F dot(const WideVec3& a, const WideVec3& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }

// std::max(a, b) is (a < b) ? b : a.
F max_of(F a, F b) { return select(a < b, b, a); }
F min_of(F a, F b) { return select(b < a, b, a); }  // std::min's operand order

// The movable state of kSolverLanes bodies.
struct WideBody {
  WideVec3 v, w, dp, da, vp, wp;
  F inv_mass;
};

WideBody gather(std::span<const SolverBody> bodies, const uint32_t (&index)[kSolverLanes], bool deltas,
                bool pseudo = false) {
  const SolverBody& b0 = bodies[index[0]];
  const SolverBody& b1 = bodies[index[1]];
  const SolverBody& b2 = bodies[index[2]];
  const SolverBody& b3 = bodies[index[3]];
  static_assert(kSolverLanes == 4);
  WideBody out;
  auto lanes = [&](auto field) {
    return WideVec3{F{(b0.*field).x, (b1.*field).x, (b2.*field).x, (b3.*field).x},
                    F{(b0.*field).y, (b1.*field).y, (b2.*field).y, (b3.*field).y},
                    F{(b0.*field).z, (b1.*field).z, (b2.*field).z, (b3.*field).z}};
  };
  out.v = lanes(&SolverBody::velocity);
  out.w = lanes(&SolverBody::angular_velocity);
  if (deltas) {
    out.dp = lanes(&SolverBody::delta_position);
    out.da = lanes(&SolverBody::delta_angle);
  }
  if (pseudo) {
    out.vp = lanes(&SolverBody::pseudo_velocity);
    out.wp = lanes(&SolverBody::pseudo_angular_velocity);
  }
  out.inv_mass = F{b0.inv_mass, b1.inv_mass, b2.inv_mass, b3.inv_mass};
  return out;
}

// Stores the velocities of the chunk's used lanes, except the immovable body's (which every row
// leaves at exactly zero, as in the scalar sweep).
void scatter(std::span<SolverBody> bodies, const uint32_t (&index)[kSolverLanes], int lanes, uint32_t movable,
             const WideBody& b, bool pseudo = false) {
  for (int j = 0; j < lanes; ++j) {
    if (index[j] >= movable) continue;
    SolverBody& body = bodies[index[j]];
    body.velocity = Vec3{b.v.x[j], b.v.y[j], b.v.z[j]};
    body.angular_velocity = Vec3{b.w.x[j], b.w.y[j], b.w.z[j]};
    if (pseudo) {
      body.pseudo_velocity = Vec3{b.vp.x[j], b.vp.y[j], b.vp.z[j]};
      body.pseudo_angular_velocity = Vec3{b.wp.x[j], b.wp.y[j], b.wp.z[j]};
    }
  }
}

// Lane j of a WideVec3 from a Vec3.
void set_lane(WideVec3& w, int j, Vec3 v) {
  w.x[j] = v.x;
  w.y[j] = v.y;
  w.z[j] = v.z;
}

void fill_lane(WideChunk& k, WidePoint* points, int j, const SolverManifold& m, uint32_t index,
               const Softness& soft, const Softness& static_soft) {
  k.body_a[j] = m.body_a;
  k.body_b[j] = m.body_b;
  k.manifold[j] = index;
  set_lane(k.normal, j, m.normal);
  set_lane(k.tangent[0], j, m.tangent[0]);
  set_lane(k.tangent[1], j, m.tangent[1]);
  k.friction[j] = m.friction;
  k.has_friction[j] = m.friction <= 0 ? 0 : -1;
  const Softness& s = m.immovable_partner ? static_soft : soft;
  k.bias_rate[j] = s.bias_rate;
  k.mass_scale[j] = s.mass_scale;
  k.impulse_scale[j] = s.impulse_scale;
  k.recovering[j] = m.recovering ? -1 : 0;
  k.any_recovering = k.any_recovering || m.recovering;
  for (int i = 0; i < m.point_count; ++i) {
    const SolverPoint& sp = m.points[i];
    WidePoint& p = points[i];
    set_lane(p.rn_a, j, sp.rn_a);
    set_lane(p.rn_b, j, sp.rn_b);
    set_lane(p.in_a, j, sp.in_a);
    set_lane(p.in_b, j, sp.in_b);
    for (int t = 0; t < 2; ++t) {
      set_lane(p.rt_a[t], j, sp.rt_a[t]);
      set_lane(p.rt_b[t], j, sp.rt_b[t]);
      set_lane(p.it_a[t], j, sp.it_a[t]);
      set_lane(p.it_b[t], j, sp.it_b[t]);
      p.tangent_mass[t][j] = sp.tangent_mass[t];
      p.tangent_impulse[t][j] = sp.tangent_impulse[t];
    }
    p.base_separation[j] = sp.base_separation;
    p.normal_mass[j] = sp.normal_mass;
    p.normal_impulse[j] = sp.normal_impulse;
    p.pseudo_impulse[j] = sp.pseudo_impulse;
    p.max_normal_impulse[j] = sp.max_normal_impulse;
    p.active[j] = -1;
  }
}

}  // namespace

void build_wide_contacts(std::span<const SolverManifold> manifolds, uint32_t movable, const Softness& soft,
                         const Softness& static_soft, bool wide, SolverScratch& s) {
  const auto n = static_cast<uint32_t>(manifolds.size());
  // Level colouring in span order: one above the colour of the last manifold of either movable
  // body (s.body_colors: that colour + 1, 0 for none), so every body meets its manifolds in span
  // order; past the last colour, the overflow (which keeps that order too).
  s.body_colors.assign(movable, 0);
  s.in_contact.assign(movable, 0);
  s.color_of.resize(n);
  s.color_begin.assign(kSolverColors + 2, 0);
  for (uint32_t m = 0; m < n; ++m) {
    const uint32_t a = manifolds[m].body_a;
    const uint32_t b = manifolds[m].body_b;
    const uint32_t level = std::max(a < movable ? s.body_colors[a] : 0u, b < movable ? s.body_colors[b] : 0u);
    const uint32_t color = std::min<uint32_t>(level, kSolverColors);
    if (a < movable) {
      s.body_colors[a] = color + 1;
      s.in_contact[a] = 1;
    }
    if (b < movable) {
      s.body_colors[b] = color + 1;
      s.in_contact[b] = 1;
    }
    s.color_of[m] = static_cast<uint8_t>(color);
    ++s.color_begin[static_cast<size_t>(color) + 1];
  }
  for (size_t c = 1; c < s.color_begin.size(); ++c) s.color_begin[c] += s.color_begin[c - 1];
  s.order.resize(n);
  {
    std::vector<uint32_t>& next = s.body_colors;  // reused as the counting sort's cursors
    next.assign(s.color_begin.begin(), s.color_begin.end() - 1);
    for (uint32_t m = 0; m < n; ++m) s.order[next[s.color_of[m]]++] = m;
  }

  s.chunks.clear();
  s.points.clear();
  s.overflow.clear();
  s.any_recovering = std::any_of(manifolds.begin(), manifolds.end(), [](const SolverManifold& m) { return m.recovering; });
  if (!wide) {  // the scalar reference: everything one at a time, in colour order
    s.overflow.assign(s.order.begin(), s.order.end());
    return;
  }
  size_t chunk_count = 0;
  for (int c = 0; c < kSolverColors; ++c) {
    const uint32_t size = s.color_begin[static_cast<size_t>(c) + 1] - s.color_begin[static_cast<size_t>(c)];
    chunk_count += (size + kSolverLanes - 1) / kSolverLanes;
  }
  s.chunks.resize(chunk_count);
  size_t k = 0;
  for (int c = 0; c < kSolverColors; ++c) {
    const uint32_t begin = s.color_begin[static_cast<size_t>(c)];
    const uint32_t end = s.color_begin[static_cast<size_t>(c) + 1];
    for (uint32_t first = begin; first < end; first += kSolverLanes, ++k) {
      WideChunk& chunk = s.chunks[k];
      chunk = WideChunk{};
      for (int j = 0; j < kSolverLanes; ++j) {
        chunk.body_a[j] = movable;
        chunk.body_b[j] = movable;
      }
      chunk.lanes = static_cast<int>(std::min<uint32_t>(kSolverLanes, end - first));
      for (int j = 0; j < chunk.lanes; ++j) {
        chunk.points = std::max(chunk.points, manifolds[s.order[first + static_cast<uint32_t>(j)]].point_count);
      }
      chunk.first_point = static_cast<uint32_t>(s.points.size());
      s.points.resize(s.points.size() + static_cast<size_t>(chunk.points));  // zero: no lane active
      WidePoint* points = s.points.data() + chunk.first_point;
      for (int j = 0; j < chunk.lanes; ++j) {
        const uint32_t m = s.order[first + static_cast<uint32_t>(j)];
        fill_lane(chunk, points, j, manifolds[m], m, soft, static_soft);
      }
      for (int i = 0; i < chunk.points; ++i) {
        bool full = true, friction = true;
        for (int j = 0; j < kSolverLanes; ++j) {
          full = full && points[i].active[j] != 0;
          friction = friction && chunk.has_friction[j] != 0;
        }
        chunk.full[i] = full;
        chunk.full_friction[i] = full && friction;
      }
    }
  }
  const uint32_t overflow_begin = s.color_begin[kSolverColors];
  s.overflow.assign(s.order.begin() + overflow_begin, s.order.end());
}

namespace {

// select(mask, a, b), or a alone where every lane is known to take it.
template <bool kMasked>
F pick(M mask, F a, F b) {
  if constexpr (kMasked) return select(mask, a, b);
  return a;
}
template <bool kMasked>
WideVec3 pick(M mask, const WideVec3& a, const WideVec3& b) {
  if constexpr (kMasked) return select(mask, a, b);
  return a;
}

template <bool kMasked>
void warm_start_point(const WideChunk& k, const WidePoint& p, WideBody& a, WideBody& b) {
  const WideVec3 linear =
      k.normal * p.normal_impulse + k.tangent[0] * p.tangent_impulse[0] + k.tangent[1] * p.tangent_impulse[1];
  a.v = pick<kMasked>(p.active, a.v - linear * a.inv_mass, a.v);
  a.w = pick<kMasked>(
      p.active, a.w - (p.in_a * p.normal_impulse + p.it_a[0] * p.tangent_impulse[0] + p.it_a[1] * p.tangent_impulse[1]),
      a.w);
  b.v = pick<kMasked>(p.active, b.v + linear * b.inv_mass, b.v);
  b.w = pick<kMasked>(
      p.active, b.w + (p.in_b * p.normal_impulse + p.it_b[0] * p.tangent_impulse[0] + p.it_b[1] * p.tangent_impulse[1]),
      b.w);
}

// solver.cpp's normal row of one point, lane by lane. kSplit (a biased sweep of a step with a
// recovering manifold): the recovering lanes' penetrating points push out on the pseudo
// velocities and their real rows stay rigid with bias 0; the other lanes are soft as always.
template <bool kMasked, bool kSplit>
void normal_row(WidePoint& p, const WideVec3& n, F dn, F bias_rate, F mass_scale_soft, F impulse_scale_soft,
                M recovering, bool use_bias, F inv_h, F min_bias, WideBody& a, WideBody& b) {
  const F zero = splat(0.0f);
  const F separation = dn + dot(b.da, p.rn_b) - dot(a.da, p.rn_a) + p.base_separation;
  const M speculative = separation > zero;
  M soft_on = use_bias ? ~speculative : M{0, 0, 0, 0};
  if constexpr (kSplit) {
    // A point with a gap releases its warm-started push-out (solver.cpp).
    const M push_on = p.active & recovering;
    const F push = select(speculative, separation * inv_h, max_of(bias_rate * separation, min_bias));
    const F push_mass_scale = select(speculative, splat(1.0f), mass_scale_soft);
    const F push_impulse_scale = select(speculative, zero, impulse_scale_soft);
    const F vpn = dot(n, b.vp - a.vp) + dot(b.wp, p.rn_b) - dot(a.wp, p.rn_a);
    const F pseudo = -p.normal_mass * push_mass_scale * (vpn + push) - push_impulse_scale * p.pseudo_impulse;
    const F pseudo_total = max_of(p.pseudo_impulse + pseudo, zero);
    const F pseudo_applied = pseudo_total - p.pseudo_impulse;
    p.pseudo_impulse = select(push_on, pseudo_total, p.pseudo_impulse);
    a.vp = select(push_on, a.vp - n * (pseudo_applied * a.inv_mass), a.vp);
    a.wp = select(push_on, a.wp - p.in_a * pseudo_applied, a.wp);
    b.vp = select(push_on, b.vp + n * (pseudo_applied * b.inv_mass), b.vp);
    b.wp = select(push_on, b.wp + p.in_b * pseudo_applied, b.wp);
    soft_on = soft_on & ~recovering;
  }
  const F bias = select(speculative, separation * inv_h, select(soft_on, max_of(bias_rate * separation, min_bias), zero));
  const F mass_scale = select(soft_on, mass_scale_soft, splat(1.0f));
  const F impulse_scale = select(soft_on, impulse_scale_soft, zero);
  const F vn = dot(n, b.v - a.v) + dot(b.w, p.rn_b) - dot(a.w, p.rn_a);
  const F impulse = -p.normal_mass * mass_scale * (vn + bias) - impulse_scale * p.normal_impulse;
  // Clamp the total, not the increment: the contact as a whole only ever pushes.
  F total = max_of(p.normal_impulse + impulse, zero);
  if (!use_bias) total = select(speculative, min_of(total, p.normal_impulse), total);  // relax: release only
  const F applied = total - p.normal_impulse;
  p.normal_impulse = pick<kMasked>(p.active, total, p.normal_impulse);
  p.max_normal_impulse = pick<kMasked>(p.active, max_of(p.max_normal_impulse, applied), p.max_normal_impulse);
  a.v = pick<kMasked>(p.active, a.v - n * (applied * a.inv_mass), a.v);
  a.w = pick<kMasked>(p.active, a.w - p.in_a * applied, a.w);
  b.v = pick<kMasked>(p.active, b.v + n * (applied * b.inv_mass), b.v);
  b.w = pick<kMasked>(p.active, b.w + p.in_b * applied, b.w);
}

template <bool kMasked>
void friction_row(WidePoint& p, const WideChunk& k, WideBody& a, WideBody& b) {
  const M on = p.active & k.has_friction;
  const F v0 = dot(k.tangent[0], b.v - a.v) + dot(b.w, p.rt_b[0]) - dot(a.w, p.rt_a[0]);
  const F v1 = dot(k.tangent[1], b.v - a.v) + dot(b.w, p.rt_b[1]) - dot(a.w, p.rt_a[1]);
  F t0 = p.tangent_impulse[0] - p.tangent_mass[0] * v0;
  F t1 = p.tangent_impulse[1] - p.tangent_mass[1] * v1;
  // Coulomb: the accumulated 2D vector stays inside the disc mu * lambda_n (solver.cpp's
  // clamp_to_disc, lane by lane where it scales).
  const F r = k.friction * p.normal_impulse;
  const F len_sq = t0 * t0 + t1 * t1;
  const M inside = len_sq <= r * r;
  for (int j = 0; j < kSolverLanes; ++j) {
    if (inside[j] != 0 || on[j] == 0) continue;
    const float scale = r[j] / std::sqrt(len_sq[j]);
    t0[j] *= scale;
    t1[j] *= scale;
  }
  const F d0 = t0 - p.tangent_impulse[0];
  const F d1 = t1 - p.tangent_impulse[1];
  p.tangent_impulse[0] = pick<kMasked>(on, t0, p.tangent_impulse[0]);
  p.tangent_impulse[1] = pick<kMasked>(on, t1, p.tangent_impulse[1]);
  const WideVec3 linear = k.tangent[0] * d0 + k.tangent[1] * d1;
  a.v = pick<kMasked>(on, a.v - linear * a.inv_mass, a.v);
  a.w = pick<kMasked>(on, a.w - (p.it_a[0] * d0 + p.it_a[1] * d1), a.w);
  b.v = pick<kMasked>(on, b.v + linear * b.inv_mass, b.v);
  b.w = pick<kMasked>(on, b.w + (p.it_b[0] * d0 + p.it_b[1] * d1), b.w);
}

}  // namespace

void warm_start_wide(SolverScratch& s, std::span<SolverBody> bodies, uint32_t movable) {
  for (WideChunk& k : s.chunks) {
    const WidePoint* points = s.points.data() + k.first_point;
    WideBody a = gather(bodies, k.body_a, false);
    WideBody b = gather(bodies, k.body_b, false);
    for (int i = 0; i < k.points; ++i) {
      if (k.full[i]) {
        warm_start_point<false>(k, points[i], a, b);
      } else {
        warm_start_point<true>(k, points[i], a, b);
      }
    }
    scatter(bodies, k.body_a, k.lanes, movable, a);
    scatter(bodies, k.body_b, k.lanes, movable, b);
  }
}

void solve_wide(SolverScratch& s, std::span<SolverBody> bodies, uint32_t movable, float inv_h,
                float push_max_speed, bool use_bias) {
  const F inv_h_w = splat(inv_h);
  const F min_bias = splat(-push_max_speed);
  for (WideChunk& k : s.chunks) {
    // Only a chunk with a recovering lane touches the pseudo velocities (the split rows of its
    // other lanes change nothing), so the rest skip them.
    const bool split = use_bias && k.any_recovering;
    WidePoint* points = s.points.data() + k.first_point;
    WideBody a = gather(bodies, k.body_a, true, split);
    WideBody b = gather(bodies, k.body_b, true, split);
    const F dn = dot(b.dp - a.dp, k.normal);
    // Non-penetration first, then (relax sweeps only, docs/ARCHITECTURE.md "Solver") friction
    // bounded by this substep's normal impulses.
    for (int i = 0; i < k.points; ++i) {
      WidePoint& p = points[i];
      const bool full = k.full[i];
      if (split) {
        if (full) normal_row<false, true>(p, k.normal, dn, k.bias_rate, k.mass_scale, k.impulse_scale, k.recovering, true, inv_h_w, min_bias, a, b);
        else normal_row<true, true>(p, k.normal, dn, k.bias_rate, k.mass_scale, k.impulse_scale, k.recovering, true, inv_h_w, min_bias, a, b);
      } else {
        if (full) normal_row<false, false>(p, k.normal, dn, k.bias_rate, k.mass_scale, k.impulse_scale, k.recovering, use_bias, inv_h_w, min_bias, a, b);
        else normal_row<true, false>(p, k.normal, dn, k.bias_rate, k.mass_scale, k.impulse_scale, k.recovering, use_bias, inv_h_w, min_bias, a, b);
      }
    }
    if (!use_bias) {
      for (int i = 0; i < k.points; ++i) {
        if (k.full_friction[i]) {
          friction_row<false>(points[i], k, a, b);
        } else {
          friction_row<true>(points[i], k, a, b);
        }
      }
    }
    scatter(bodies, k.body_a, k.lanes, movable, a, split);
    scatter(bodies, k.body_b, k.lanes, movable, b, split);
  }
}

void warm_start_pseudo(SolverScratch& s, std::span<SolverBody> bodies, uint32_t movable,
                       std::span<SolverManifold> manifolds) {
  for (WideChunk& k : s.chunks) {
    if (!k.any_recovering) continue;  // its pseudo impulses are all zero
    const WidePoint* points = s.points.data() + k.first_point;
    WideBody a = gather(bodies, k.body_a, false, true);
    WideBody b = gather(bodies, k.body_b, false, true);
    for (int i = 0; i < k.points; ++i) {
      const WidePoint& p = points[i];
      const F lambda = p.pseudo_impulse;  // zero on lanes without the point or not pushing
      a.vp = a.vp - k.normal * (lambda * a.inv_mass);
      a.wp = a.wp - p.in_a * lambda;
      b.vp = b.vp + k.normal * (lambda * b.inv_mass);
      b.wp = b.wp + p.in_b * lambda;
    }
    scatter(bodies, k.body_a, k.lanes, movable, a, true);
    scatter(bodies, k.body_b, k.lanes, movable, b, true);
  }
  for (const uint32_t index : s.overflow) {
    const SolverManifold& m = manifolds[index];
    if (!m.recovering) continue;
    SolverBody& a = bodies[m.body_a];
    SolverBody& b = bodies[m.body_b];
    for (int i = 0; i < m.point_count; ++i) {
      const SolverPoint& p = m.points[i];
      a.pseudo_velocity -= m.normal * (p.pseudo_impulse * a.inv_mass);
      a.pseudo_angular_velocity -= p.in_a * p.pseudo_impulse;
      b.pseudo_velocity += m.normal * (p.pseudo_impulse * b.inv_mass);
      b.pseudo_angular_velocity += p.in_b * p.pseudo_impulse;
    }
  }
}

void store_wide_impulses(const SolverScratch& s, std::span<SolverManifold> manifolds) {
  for (const WideChunk& k : s.chunks) {
    const WidePoint* points = s.points.data() + k.first_point;
    for (int j = 0; j < k.lanes; ++j) {
      SolverManifold& m = manifolds[k.manifold[j]];
      for (int i = 0; i < m.point_count; ++i) {
        const WidePoint& p = points[i];
        SolverPoint& sp = m.points[i];
        sp.normal_impulse = p.normal_impulse[j];
        sp.tangent_impulse[0] = p.tangent_impulse[0][j];
        sp.tangent_impulse[1] = p.tangent_impulse[1][j];
        sp.max_normal_impulse = p.max_normal_impulse[j];
        sp.pseudo_impulse = p.pseudo_impulse[j];
      }
    }
  }
}

}  // namespace impulse::physics
