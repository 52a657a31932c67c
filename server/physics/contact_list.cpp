// Sorted contact lists: binary-search lookups and the merge-diff that yields contact events.
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

void diff_contacts(std::span<const ContactRecord> prev, std::span<ContactRecord> cur,
                   std::vector<ContactEvent>& events) {
  size_t i = 0;
  size_t j = 0;
  while (i < prev.size() || j < cur.size()) {
    if (j == cur.size() || (i < prev.size() && record_less(prev[i], cur[j]))) {
      events.push_back(make_event(ContactEventType::End, prev[i++].contact));
    } else if (i == prev.size() || record_less(cur[j], prev[i])) {
      events.push_back(make_event(ContactEventType::Begin, cur[j++].contact));
    } else {
      // Touching in both steps: no event; carry the impulses over for warm starting.
      cur[j].normal_impulse = prev[i].normal_impulse;
      cur[j++].friction_impulse = prev[i++].friction_impulse;
    }
  }
}

void merge_records(std::span<const ContactRecord> x, std::span<const ContactRecord> y,
                   std::vector<ContactRecord>& out) {
  out.clear();
  std::merge(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out), record_less);
}

}  // namespace impulse::physics
