// Sorted contact lists: binary-search lookups, the merge-diff that yields contact events (a merge
// join, Knuth TAOCP vol. 3 §5.2.4) and point matching by feature id for warm starting.
#include "server/physics/contact_list.h"

#include <algorithm>
#include <iterator>

namespace impulse::physics {

const ContactRecord* find_record(std::span<const ContactRecord> sorted, ObjectID a, ObjectID b) {
  const auto it = std::lower_bound(sorted.begin(), sorted.end(), 0, [&](const ContactRecord& r, int) {
    return pair_less(r.contact.a, r.contact.b, a, b);
  });
  if (it == sorted.end() || it->contact.a != a || it->contact.b != b) return nullptr;
  return &*it;
}

std::span<const Contact> find_contacts_with_a(std::span<const Contact> sorted, ObjectID id) {
  const auto first = std::lower_bound(sorted.begin(), sorted.end(), id,
                                      [](const Contact& c, ObjectID key) { return c.a < key; });
  const auto last =
      std::upper_bound(first, sorted.end(), id, [](ObjectID key, const Contact& c) { return key < c.a; });
  return {first, last};
}

void match_points(const ContactRecord& prev, ContactRecord& cur, float match_distance) {
  bool used[kMaxManifoldPoints] = {};
  bool matched[kMaxManifoldPoints] = {};
  for (int i = 0; i < cur.point_count; ++i) {
    for (int j = 0; j < prev.point_count; ++j) {
      if (!used[j] && prev.points[j].feature == cur.points[i].feature) {
        cur.points[i].normal_impulse = prev.points[j].normal_impulse;
        cur.points[i].friction_impulse = prev.points[j].friction_impulse;
        cur.points[i].pseudo_impulse = prev.points[j].pseudo_impulse;
        used[j] = matched[i] = true;
        break;
      }
    }
  }
  const float limit_sq = match_distance * match_distance;
  for (int i = 0; i < cur.point_count; ++i) {
    if (matched[i]) continue;
    int best = -1;
    float best_sq = limit_sq;
    for (int j = 0; j < prev.point_count; ++j) {
      if (used[j]) continue;
      const float d_sq = length_squared(prev.points[j].point - cur.points[i].point);
      if (d_sq <= best_sq) {
        best_sq = d_sq;
        best = j;
      }
    }
    if (best < 0) continue;
    cur.points[i].normal_impulse = prev.points[best].normal_impulse;
    cur.points[i].friction_impulse = prev.points[best].friction_impulse;
    cur.points[i].pseudo_impulse = prev.points[best].pseudo_impulse;
    used[best] = true;
  }
}

void diff_contacts(std::span<const ContactRecord> prev, std::span<ContactRecord> cur,
                   std::vector<ContactEvent>& events, float match_distance, float recover_depth) {
  const float recovered_depth = 0.2f * recover_depth;
  constexpr float kMatchNormalCos = 0.95f;
  size_t i = 0;
  size_t j = 0;
  while (i < prev.size() || j < cur.size()) {
    if (j == cur.size() || (i < prev.size() && contact_less(prev[i].contact, cur[j].contact))) {
      events.push_back(make_event(ContactEventType::End, prev[i].contact));
      const size_t first = i;
      while (i < prev.size() && same_pair(prev[i], prev[first])) ++i;
      continue;
    }
    size_t j_end = j + 1;
    while (j_end < cur.size() && same_pair(cur[j_end], cur[j])) ++j_end;
    if (i == prev.size() || contact_less(cur[j].contact, prev[i].contact)) {
      events.push_back(make_event(ContactEventType::Begin, cur[j].contact));
      for (; j < j_end; ++j) cur[j].recovering = cur[j].contact.depth > recover_depth;
      continue;
    }
    // Touching in both steps: no event; carry the impulses over for warm starting.
    size_t i_end = i + 1;
    while (i_end < prev.size() && same_pair(prev[i_end], prev[i])) ++i_end;
    const bool one_each = i_end - i == 1 && j_end - j == 1;  // every pair but some mesh pairs
    for (; j < j_end; ++j) {
      const ContactRecord* match = nullptr;
      if (one_each && prev[i].sub == cur[j].sub) {
        match = &prev[i];
      } else {
        float best = kMatchNormalCos;
        for (size_t k = i; k < i_end; ++k) {
          const float c = dot(prev[k].contact.normal, cur[j].contact.normal);
          if (c > best) {
            best = c;
            match = &prev[k];
          }
        }
      }
      if (match == nullptr) {
        cur[j].recovering = cur[j].contact.depth > recover_depth;
        continue;
      }
      cur[j].recovering = cur[j].contact.depth > (match->recovering ? recovered_depth : recover_depth);
      match_points(*match, cur[j], match_distance);
    }
    i = i_end;
  }
}

void merge_records(std::span<const ContactRecord> x, std::span<const ContactRecord> y,
                   std::vector<ContactRecord>& out) {
  out.clear();
  std::merge(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out), record_less);
}

}  // namespace impulse::physics
