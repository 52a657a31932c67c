// Per-client snapshot writer: relevance with hysteresis, per-object acked baselines, delta
// records, and a priority accumulator that fills a byte budget. Glenn Fiedler, "Snapshot
// Compression" and "State Synchronization" (gafferongames.com, 2015: delta against the acked
// baseline, priority accumulator); Unity Netcode for Entities (per-entity baselines, importance
// scaling, relevancy). The payload format is shared/wire/snapshot_codec.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/physics/world.h"
#include "shared/math.h"
#include "shared/object_id.h"
#include "shared/parallel.h"
#include "shared/wire/quantize.h"
#include "shared/wire/snapshot_codec.h"

namespace impulse::server {

/// The world at one snapshot tick, built once (build_snapshot_source) and shared by every
/// client's SnapshotSender. The row columns have one row per live object, in ascending id.index.
/// The index columns (filled by index_snapshot_source) let each sender visit only the objects
/// that changed since its previous write instead of every object: keep one SnapshotSource for
/// the server's lifetime and rebuild it in place each snapshot tick.
struct SnapshotSource {
  uint64_t tick = 0;
  std::vector<ObjectID> ids;                     ///< [n], ascending index
  std::vector<wire::QuantizedState> states;      ///< [n]
  std::vector<Vec3> positions;                   ///< [n] full precision [m], world frame (interest, priority)
  std::vector<float> speeds;                     ///< [n] |v| [m/s]
  std::vector<wire::ObjectDescription> descs;    ///< [n] kind, shape, dims, sensor (what an entry carries)
  std::vector<uint8_t> representable;            ///< [n] 1 = inside the world bound

  // --- Filled by index_snapshot_source ---------------------------------------------------------
  uint64_t lineage = 0;  ///< identifies this source object (0 until first indexed)
  uint64_t build = 0;    ///< incremented by every index_snapshot_source
  /// [m] by object index, m = 1 + the largest index ever seen: the row of the index, or kNoRow.
  std::vector<uint32_t> row_of_index;
  /// [m] by object index: the build at which the index's id, quantised state or representable
  /// flag last changed (creation and destruction included). A position change smaller than a
  /// quantisation step is not a change, so relevance may be re-evaluated up to one step late.
  std::vector<uint64_t> changed_build;
  // [m] the content at the previous build, to detect changes (not for readers).
  std::vector<ObjectID> previous_ids;
  std::vector<wire::QuantizedState> previous_states;
  std::vector<uint8_t> previous_representable;
  std::vector<uint32_t> scratch;                 ///< build_snapshot_source's sort permutation
  // --- Spatial index (index_snapshot_source) ---------------------------------------------------
  /// Edge of the square cells of the XZ grid that buckets the representable rows [m]. Senders
  /// with a Sphere or Box area look only at the cells their area (plus hysteresis) overlaps.
  static constexpr float kCellM = 16.0f;
  struct CellRow {
    uint64_t cell = 0;  ///< cell_key() of the row's position
    uint32_t row = 0;
    uint32_t index = 0;          ///< ids[row].index
    uint64_t changed_build = 0;  ///< changed_build[index]: a sender's scan of the cells reads no other column
  };
  /// Every representable row, sorted by (cell, row).
  std::vector<CellRow> cell_rows;
  /// The grid cell of an x or z coordinate [m], clamped so any finite float maps to a cell.
  static int32_t cell_of(float v);
  static uint64_t cell_key(int32_t cx, int32_t cz);

  static constexpr uint32_t kNoRow = 0xFFFFFFFFu;
};

/// Fills *out with every live object of `world` (its buffers are reused: no allocation once they
/// have grown to the world), then indexes it (index_snapshot_source). With `pool`, the rows are
/// quantised on its threads, in chunks of rows each written by one thread (same result). Sleeping and static bodies
/// are at rest (velocities not sent); dims follow the wire convention (sphere (r, r, r), box half
/// extents, capsule (radius, half_height, radius), plane 0). Objects outside
/// config.world_bound_m, or with an index >= wire::kMaxSnapshotObjectIndex, get representable = 0
/// and are never relevant to any client. O(n + largest index), plus a sort when the world's
/// storage order is not index order. `config` must be valid.
void build_snapshot_source(const physics::World& world, const wire::QuantizationConfig& config, SnapshotSource* out,
                           const WorkerPool* pool = nullptr);

/// Fills the index columns of a source whose row columns were just rewritten (build_snapshot_source
/// calls it; call it yourself after filling the rows by hand). Rows must be in strictly ascending
/// index. O(rows log rows + largest index).
void index_snapshot_source(SnapshotSource* source);

/// A client's area of interest, world frame [m].
struct InterestArea {
  enum class Kind : uint8_t {
    All,     ///< every representable object (the default)
    Sphere,  ///< |position - center| <= radius
    Box,     ///< min <= position <= max per axis
  };
  Kind kind = Kind::All;
  Vec3 center;        ///< Sphere
  float radius = 0;   ///< Sphere, >= 0
  Vec3 min;           ///< Box
  Vec3 max;           ///< Box, >= min per axis

  static InterestArea all() { return {}; }
  static InterestArea sphere(Vec3 center, float radius);
  static InterestArea box(Vec3 min, Vec3 max);
};

/// True when the area's numbers are finite and consistent (radius >= 0, min <= max).
bool is_valid(const InterestArea& area);
/// Distance from `position` to the area [m]: 0 inside (and always 0 for All).
float distance_outside(const InterestArea& area, Vec3 position);

/// Tuning of one client's sender. See SnapshotSender for how each field is used.
struct SnapshotSenderConfig {
  wire::QuantizationConfig quant;
  /// An object becomes relevant when inside the area and stops being relevant only when farther
  /// than this outside it [m], so objects moving along the boundary do not flicker. >= 0.
  float hysteresis_m = 2.0f;
  /// Priority every waiting record gains per write, whatever it is: the time-since-sent term
  /// (priority accumulates while a record waits). > 0, so nothing starves.
  float priority_base = 1.0f;
  /// Extra priority per write per m/s of the object's speed (speed capped at quant.max_linear_speed).
  float priority_per_speed = 0.25f;
  /// Extra priority per write of an object at the area's focus (Sphere centre, Box centre); it
  /// halves at priority_distance_scale_m from the focus. Not used for All.
  float priority_near = 4.0f;
  float priority_distance_scale_m = 16.0f;  ///< > 0
  /// Visit every object index on every write instead of only the changed and pending ones. The
  /// payloads are identical either way (a test checks it); this is for tests and diagnostics.
  bool full_scan = false;

  /// True when every field is in range (including quant); otherwise false and one line in *error.
  bool validate(std::string* error) const;
};

/// What one write() did.
struct SnapshotWriteStats {
  uint32_t records = 0;   ///< entries + deltas + exits
  uint32_t entries = 0;
  uint32_t deltas = 0;
  uint32_t exits = 0;
  uint32_t deferred = 0;  ///< records due (relevant and changed, or pending exits) left out by the budget
  uint32_t bytes = 0;     ///< payload size
  /// Object indices this write visited (step 1 below): its cost, about 8 ns each on a 2-core
  /// machine when the tracks are out of cache (docs/BENCHMARKS.md, "Tick budget").
  uint32_t visits = 0;
};

/// Writes one client's snapshot payloads (one SnapshotSender per client) and learns from its acks.
///
/// Per write, for every object index it visits (see below):
///  - relevance: a representable object becomes relevant when inside the area and stays relevant
///    until it is more than hysteresis_m outside it. All = every representable object.
///  - an object the client may hold that is no longer relevant, was destroyed, or whose index now
///    has a new generation gets an exit, repeated until a packet carrying it is acked. Re-entry
///    cancels a pending exit. A new generation that is relevant gets an entry instead, which
///    replaces the old object on the client.
///  - a relevant object whose quantised state differs from its baseline (the newest state of it
///    the client acked) is due: as a delta against the baseline if the object was sent fewer than
///    kSnapshotBaselineWindow times since (so the client's ring still holds it) and the delta is
///    smaller than an entry; otherwise as an entry. Objects equal to their baseline cost nothing.
///  - every due record gains priority: priority_base + priority_per_speed * speed +
///    priority_near * scale / (scale + distance to the focus). Exits, and entries that replace
///    another object, come first; the rest in order of accumulated priority (ties: lower index).
///    Each is added if the payload still fits budget_bytes with it (exact sizes); the written ones
///    reset to zero and the others keep what they accumulated, so nothing starves.
/// A write visits only the indices whose source row changed since this sender's previous write,
/// those still due (pending records and exits) and those whose baseline an ack changed (an
/// unchanged object the client holds would visit to no effect); all of them on the first write,
/// after set_interest or reset, and when given another source. With the area All, finding the changed rows costs one 8-byte scan per index
/// (SnapshotSource::changed_build); with a Sphere or Box area only the rows in the grid cells the
/// area overlaps (plus hysteresis) are looked at, so a client's write costs O(objects near its
/// area + objects it holds), not O(world): the grid form of interest management.
/// Baselines are promoted in on_acked from a ring of the last kSentPacketHistory packets, each
/// holding the (object, state) pairs it carried. Deterministic: no unordered containers, ties
/// broken by index. No heap allocation once the buffers have grown to the scene. Memory: ~72
/// bytes per object index plus 48 bytes per record in the last 64 packets. Single-threaded.
class SnapshotSender {
 public:
  /// Sequence numbers remembered for on_acked (a ring indexed by sequence mod 64); an ack of a
  /// packet no longer remembered is ignored, which only delays baselines.
  static constexpr uint32_t kSentPacketHistory = 64;

  /// An invalid config (see SnapshotSenderConfig::validate) is replaced by the defaults; callers
  /// validate their configuration before (the client receives config.quant in ConnectAccepted).
  explicit SnapshotSender(const SnapshotSenderConfig& config);

  /// Sets the area of interest; takes effect at the next write(). An invalid area (see is_valid)
  /// is refused: returns false and keeps the previous one.
  bool set_interest(const InterestArea& area);
  const InterestArea& interest() const { return area_; }

  /// Writes the payload for the snapshot that will travel in packet `sequence` into *out (cleared
  /// first; at most budget_bytes). Sequences must increase (by any step, modulo 2^32) from one
  /// call to the next. `source` must be indexed (build_snapshot_source or index_snapshot_source);
  /// an unindexed source writes nothing. A budget below wire::kSnapshotHeaderBytes writes nothing
  /// (empty *out); from wire::kMinSnapshotBudgetBytes up, the first due record always fits (exits
  /// come first). Cost: O(largest index) for the change scan (8 bytes per index) plus O(visited
  /// + due log due) and O(chosen^2) 4-byte moves to keep the chosen records in index order.
  SnapshotWriteStats write(const SnapshotSource& source, uint32_t sequence, size_t budget_bytes,
                           std::vector<uint8_t>* out);

  /// The client acked packet `sequence` (call once per newly acked sequence; unknown, forgotten or
  /// repeated ones are ignored). Acks may arrive in any order.
  void on_acked(uint32_t sequence);

  /// Forgets everything about the client (as for a new connection); the area is kept.
  void reset();

  const SnapshotSenderConfig& config() const { return config_; }

 private:
  // What this client has been told about one object index: one cache line (a write visits a few
  // hundred tracks of an array far larger than the cache). The index is the track's own, so ids
  // are kept as generations (0: none; live objects have generations >= 1).
  struct alignas(64) Track {
    wire::QuantizedState baseline;     // newest acked state, if baseline_valid
    uint32_t generation = 0;           // of the live object at this index when last seen (0: none)
    uint32_t held_generation = 0;      // of the last entry written here, while the client may hold
                                       // it (0 once an exit is acked)
    uint32_t baseline_sequence = 0;
    uint32_t epoch_sequence = 0;       // acks of packets before this cannot be baselines (exit / new id)
    uint32_t exit_sequence = 0;        // first packet the pending exit may travel in
    uint32_t sends = 0;                // entries and deltas written for this index
    float priority = 0;
    uint16_t sends_since_baseline = 0; // sends after the baseline's packet, saturating at 0xFFFF
    uint8_t relevant : 1 = 0;
    uint8_t baseline_valid : 1 = 0;
    uint8_t exit_pending : 1 = 0;      // the client must drop what it holds here; resent until acked
  };
  static_assert(sizeof(Track) == 64);
  struct SentItem {
    uint32_t index = 0;
    uint32_t generation = 0;
    uint32_t sends = 0;                // Track::sends after this write (entries and deltas)
    wire::RecordKind kind = wire::RecordKind::Exit;
    wire::QuantizedState state;
  };
  struct SentPacket {
    uint32_t sequence = 0;
    bool pending = false;              // written and not yet acked
    std::vector<SentItem> items;
  };
  struct Candidate {
    uint32_t index = 0;
    uint32_t row = 0;                  // row in the source (state records)
    float priority = 0;
    uint8_t urgent = 0;                // exits and replacing entries: before everything else
    wire::RecordKind kind = wire::RecordKind::Exit;
  };

  void begin_exit(Track& track, uint32_t sequence);
  /// Updates one index's track for this write and queues its due record, if any. Returns true
  /// when the index needs a visit next write too (it has a due record or exit).
  bool visit(const SnapshotSource& source, uint32_t index, uint32_t sequence);
  // True unless every send of `index` after its baseline's packet carried the baseline state, so
  // the client holds exactly the baseline whichever of those packets arrived.
  bool sent_other_than_baseline(const Track& t, uint32_t index) const;
  /// Fills visits_ for a Sphere or Box area from the grid cells it overlaps plus pending_,
  /// acked_ and held_ (sorted, unique). False when the area covers too many cells to be worth it.
  bool collect_nearby_visits(const SnapshotSource& source);
  float priority_gain(const SnapshotSource& source, uint32_t row) const;
  wire::SnapshotRecord make_record(const SnapshotSource& source, const Candidate& c, uint32_t sequence) const;

  SnapshotSenderConfig config_;
  wire::QuantizationLimits limits_;
  InterestArea area_;
  std::vector<Track> tracks_;  // by object index
  SentPacket sent_[kSentPacketHistory];

  // Which indices the next write must visit (besides those whose source row changed).
  bool visit_all_ = true;            // first write, new area, reset, or another source
  uint64_t seen_lineage_ = 0;        // the source and build of the previous write
  uint64_t seen_build_ = 0;
  std::vector<uint32_t> pending_;    // indices with a due record or exit, ascending
  std::vector<uint32_t> acked_;      // indices whose baseline on_acked changed (unsorted)
  std::vector<uint32_t> held_;       // indices relevant, held or exiting, ascending: visited when changed

  // Scratch of write(), reused.
  std::vector<uint32_t> visits_;
  std::vector<uint64_t> visit_bits_;  // collect_nearby_visits: one bit per object index
  std::vector<uint32_t> next_pending_;
  std::vector<uint32_t> next_held_;
  std::vector<Candidate> candidates_;
  std::vector<uint32_t> chosen_;  // positions in candidates_, sorted by index
  std::vector<wire::SnapshotRecord> records_;
  std::vector<uint8_t> checksum_scratch_;
};

}  // namespace impulse::server
