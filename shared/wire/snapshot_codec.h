// Snapshot payload: bit-packed entry, delta and exit records, each delta coded against a baseline
// state the client acknowledged, closed by an XXH32 checksum of the decoded content. Glenn
// Fiedler, "Snapshot Compression" (gafferongames.com, 2015: quantisation, smallest-three, delta
// against the acked baseline, relative encoding of small deltas); Unity Netcode for Entities
// (per-entity baselines, relevancy). The bit-by-bit format is docs/protocol_snapshot_section.md.
//
// The payload travels as Snapshot.data in one datagram with a packet sequence number; the client
// decodes it with SnapshotReceiver (this file) and the server writes it with
// server/net/snapshot_sender.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "impulse/schemas/impulse_generated.h"
#include "shared/math.h"
#include "shared/object_id.h"
#include "shared/wire/quantize.h"

namespace impulse::wire {

/// R: the client keeps the last R received states of every object it holds. The sender codes a
/// delta against a baseline only if it sent the object fewer than R times since that baseline,
/// so the baseline is surely still in the client's ring; otherwise it sends an entry. 32 covers
/// a round trip of about 530 ms at 60 snapshots/s for an object that changes every snapshot.
inline constexpr uint32_t kSnapshotBaselineWindow = 32;
/// Object indices must be below this (2^20). Bounds the client's memory against hostile input.
inline constexpr uint32_t kMaxSnapshotObjectIndex = 1u << 20;
/// Largest baseline distance (sequence - baseline sequence) a delta may carry (2^20 packets, 4.8
/// hours at 60 Hz); the sender sends an entry for an older baseline.
inline constexpr uint32_t kMaxBaselineDistance = 1u << 20;
/// Size of a payload without records [bytes]: the 32-bit checksum and a 4-bit record count of 0.
inline constexpr size_t kSnapshotHeaderBytes = 5;
/// With at least this budget [bytes] a payload always fits its header plus any one record. The
/// largest record is an entry in the widest config (26-bit positions, 16-bit velocities, 15-bit
/// orientation components) at an index near the limit with a generation near 2^32: gap 39 +
/// type 2 + generation 63 + description 118 (a hull's, with its 16-bit asset id) + state 222 =
/// 444 bits, 60 bytes with the 36-bit header. (The sender never writes a delta larger than the entry it could send instead.)
inline constexpr size_t kMinSnapshotBudgetBytes = 64;

/// Whether a shape kind is a world asset (a hull, protocol 8; a mesh or heightfield, protocol 9),
/// whose snapshot entry carries an asset id and which clients cannot create.
constexpr bool has_asset(ShapeKind k) {
  return k == ShapeKind::Hull || k == ShapeKind::Mesh || k == ShapeKind::HeightField;
}

/// What an entry record carries besides the id and state: the static description of the object.
struct ObjectDescription {
  BodyKind kind = BodyKind::Dynamic;
  ShapeKind shape = ShapeKind::Box;
  /// As CreateObject.dims [m]: sphere (r, r, r), box half extents, capsule and cylinder (radius,
  /// half_height, radius), plane (0, 0, 0). Sent as raw IEEE 754 binary32.
  impulse::Vec3 dims;
  bool sensor = false;
  /// Hull, Mesh, HeightField: the world's asset id (protocols 8 and 9; "Assets" in
  /// docs/PROTOCOL.md); 0 otherwise.
  uint16_t asset = 0;

  friend bool operator==(const ObjectDescription&, const ObjectDescription&) = default;
};

enum class RecordKind : uint8_t {
  Delta = 0,  ///< index, baseline distance and per-field differences to that baseline
  Entry = 1,  ///< full id, description and full state; replaces whatever the client had at the index
  Exit = 2,   ///< the client drops whatever it has at the index (a no-op if it has nothing)
};

/// One record as the encoder takes it.
struct SnapshotRecord {
  RecordKind kind = RecordKind::Exit;
  ObjectID id;                     ///< entry, delta: the full id; exit: only id.index is used
  ObjectDescription desc;          ///< entry only
  QuantizedState state;            ///< entry, delta: the state sent
  QuantizedState baseline;         ///< delta only: the client's state at sequence - baseline_distance
  uint32_t baseline_distance = 0;  ///< delta only: in [1, kMaxBaselineDistance]
};

/// Size of a record after its index gap [bits], computed by the encoder itself (exact). The
/// states must be within `limits`.
uint32_t record_body_bits(const SnapshotRecord& record, const QuantizationLimits& limits);
/// record_body_bits of a delta, entry or exit record, from its fields (no SnapshotRecord to
/// build): the same encoder code counts them.
uint32_t delta_body_bits(uint32_t baseline_distance, const QuantizedState& baseline, const QuantizedState& state,
                         const QuantizationLimits& limits);
uint32_t entry_body_bits(uint32_t generation, const ObjectDescription& desc, const QuantizedState& state,
                         const QuantizationLimits& limits);
uint32_t exit_body_bits();
/// Size of the index gap code of a record whose index is previous + 1 + gap [bits].
uint32_t index_gap_bits(uint32_t gap);
/// Size of the header (checksum and record count) [bits]. A payload of H header bits and record
/// bits B is ceil((H + B) / 8) bytes.
uint32_t payload_header_bits(uint32_t record_count);

/// Encodes a payload into *out (cleared first). Records must have strictly ascending indices
/// below kMaxSnapshotObjectIndex, and their states (and delta baselines) must be within `limits`;
/// otherwise this returns false and *out is left empty (a caller bug, never wire data).
/// `checksum_scratch` holds the checksum input; it is reused so steady-state calls do not allocate.
bool encode_snapshot_payload(std::span<const SnapshotRecord> records, const QuantizationLimits& limits,
                             std::vector<uint8_t>* out, std::vector<uint8_t>* checksum_scratch);

/// Size of the same objects sent as plain floats with no compression [bytes]: per object, id 8 +
/// position 12 + orientation 16 + velocity 12 + angular velocity 12 + 1 flag byte = 61. The N1
/// benchmark reports it as the full-state rate (excluding envelope and packet headers).
constexpr size_t uncompressed_snapshot_bytes(size_t object_count) { return 61 * object_count; }

/// Why SnapshotReceiver::apply rejected a payload. Every rejection leaves the view unchanged.
enum class SnapshotError : uint8_t {
  None = 0,
  Stale,             ///< sequence <= the last applied one (serial arithmetic, RFC 1982); do not ack
  Truncated,         ///< the payload ends inside the header or a record
  BadHeader,         ///< record count impossible for the payload size, bits left after the last
                     ///< record, non-zero padding, or an unusable QuantizationConfig
  BadRecord,         ///< a value out of range: kind, shape, non-finite or negative dims, distance,
                     ///< a state outside the limits, or a non-canonical field encoding
  UnknownBaseline,   ///< a delta for an index the view does not hold, or whose baseline state is
                     ///< not in that object's ring
  BadOrder,          ///< never produced: gap-coded indices are strictly ascending by construction
  TooManyObjects,    ///< an index >= kMaxSnapshotObjectIndex
  ChecksumMismatch,  ///< the decoded content does not hash to the payload's checksum
  Count,
};
const char* to_string(SnapshotError error);

/// One object as the client sees it, dequantised. SI units, world frame.
struct SnapshotObject {
  ObjectID id;
  BodyKind kind = BodyKind::Dynamic;
  ShapeKind shape = ShapeKind::Box;
  impulse::Vec3 dims;              ///< as ObjectDescription::dims [m]
  bool sensor = false;
  uint16_t asset = 0;              ///< hull: the world's asset id (ObjectDescription::asset)
  impulse::Vec3 position;          ///< centre of mass [m]
  impulse::Quat orientation;       ///< unit, local to world
  impulse::Vec3 velocity;          ///< [m/s]; 0 when at_rest
  impulse::Vec3 angular_velocity;  ///< [rad/s]; 0 when at_rest
  bool at_rest = false;            ///< the body sleeps (or is static)
};

namespace detail {
/// A delta record's fields as read, before its baseline is known: SnapshotReceiver reads every
/// record of a payload first, then resolves the baselines it prefetched meanwhile.
struct RawDelta {
  static constexpr uint8_t kPosition = 1, kOrientation = 2, kSameLargest = 4, kLinear = 8, kAngular = 16;
  uint8_t at_rest = 0;
  uint8_t groups = 0;   ///< which groups changed (k* flags)
  uint8_t largest = 0;  ///< kOrientation without kSameLargest: the new largest component
  int32_t position[3] = {0, 0, 0};
  int32_t orientation[3] = {0, 0, 0};  ///< deltas with kSameLargest, else the new components
  int32_t linear[3] = {0, 0, 0};
  int32_t angular[3] = {0, 0, 0};
};
}  // namespace detail

/// The client side: decodes payloads into a view of the objects in the client's area of interest.
/// Keeps, per object, a ring of its last kSnapshotBaselineWindow received quantised states with
/// their sequences, the baselines deltas refer to.
///
/// The caller acks a packet's sequence only when apply() returned None for its snapshot: the
/// sender promotes the states of acked packets to baselines, so acking a payload that was not
/// applied (Stale included) would make it code deltas against states this view never had.
///
/// Memory: 1.3 KB per held object (ring of 32 x 36 bytes, its 16-byte reference and the
/// dequantised object); indices are below kMaxSnapshotObjectIndex, and a payload's records are
/// bounded by its size. Single-threaded.
class SnapshotReceiver {
 public:
  /// `config` must be the server's (ConnectAccepted) and valid: the client should check it with
  /// QuantizationConfig::validate and refuse the connection otherwise. With an invalid config,
  /// every apply() returns BadHeader.
  explicit SnapshotReceiver(const QuantizationConfig& config);

  /// Decodes the payload of the snapshot that came in packet `sequence`, all or nothing: it is
  /// fully decoded and checked into scratch buffers first, and only a payload that passes every
  /// check changes the view. Payloads with sequence <= the last applied one return Stale (the
  /// caller must then NOT ack that packet). Never throws or asserts on any bytes. A payload with
  /// several faults reports one of them, which one unspecified (every record is read before the
  /// deltas' baselines are looked up). O(payload + view size when objects enter or exit, else
  /// payload * log(view size)).
  SnapshotError apply(uint32_t sequence, uint64_t tick, std::span<const uint8_t> payload);

  /// The current view, sorted by id.index. Valid until the next apply() or reset().
  std::span<const SnapshotObject> objects() const { return objects_; }
  /// The object with exactly this id (index and generation), or nullptr. O(log n).
  const SnapshotObject* find(ObjectID id) const;
  /// The latest quantised state of the object with this id, or nullptr. O(log n).
  const QuantizedState* find_state(ObjectID id) const;
  /// Tick of the last applied payload, 0 before any.
  uint64_t tick() const { return tick_; }
  /// Sequence of the last applied payload; meaningful only when has_applied().
  uint32_t sequence() const { return sequence_; }
  bool has_applied() const { return has_applied_; }
  /// Ids that entered, exited, or got a new state (delta or repeated entry of a held object) in
  /// the last successful apply(), each sorted by index. An entry that replaces another object at
  /// the same index lists the old id in exited() and the new one in entered().
  std::span<const ObjectID> entered() const { return entered_; }
  std::span<const ObjectID> exited() const { return exited_; }
  std::span<const ObjectID> updated() const { return updated_; }
  /// Where each of updated() is in objects() (same order), so a caller mirroring the view
  /// position for position can refresh just those.
  std::span<const uint32_t> updated_positions() const { return updated_positions_; }
  const QuantizationConfig& config() const { return config_; }
  /// Forgets every object and the last sequence (a new connection).
  void reset();

 private:
  // A state and the packet it came in side by side: a baseline lookup reads one slot.
  struct RingSlot {
    uint32_t sequence = 0;
    QuantizedState state;
  };
  struct Ring {
    RingSlot slots[kSnapshotBaselineWindow];
  };
  // A held object's ring and where it stands, kept beside the view so that a lookup's
  // bookkeeping shares cache lines with its neighbours' (the records of a payload ascend).
  struct RingRef {
    uint32_t index = 0;       // the held object's id, as in objects_ (searched instead of it)
    uint32_t generation = 0;
    uint32_t ring = 0;   // index in rings_
    uint16_t head = 0;   // slot of the newest state
    uint16_t count = 0;  // states held, <= kSnapshotBaselineWindow
  };
  // One decoded record, checked but not applied.
  struct Decoded {
    RecordKind kind = RecordKind::Exit;
    ObjectID id;                 // entry: from the record; delta: the held object's; exit: index only
    ObjectDescription desc;      // entry only
    QuantizedState state;        // entry; delta once its baseline is resolved
    int32_t view = -1;           // position of the index in objects_, or -1 when not held
    uint32_t baseline_sequence = 0;  // delta only
    detail::RawDelta raw;            // delta only: its fields as read
  };

  SnapshotError decode(uint32_t sequence, std::span<const uint8_t> payload);
  void commit(uint32_t sequence);
  int32_t find_position(uint32_t index) const;  // position in objects_ or -1
  // The same for an index above the previous call's (the records of a payload ascend): gallops
  // from *from, the position after which the previous index would be, and updates it.
  int32_t find_position_from(uint32_t index, size_t* from) const;
  uint32_t allocate_ring();
  void push_state(RingRef& ref, uint32_t sequence, const QuantizedState& state);
  void set_object(SnapshotObject& object, const Decoded& record) const;

  QuantizationConfig config_;
  QuantizationLimits limits_;
  bool config_valid_ = false;
  bool has_applied_ = false;
  uint32_t sequence_ = 0;
  uint64_t tick_ = 0;

  // The view: objects_ sorted by index, ring_of_[i] the ring slot of objects_[i].
  std::vector<SnapshotObject> objects_;
  std::vector<RingRef> ring_of_;
  std::vector<Ring> rings_;
  std::vector<uint32_t> free_rings_;

  std::vector<ObjectID> entered_;
  std::vector<ObjectID> exited_;
  std::vector<ObjectID> updated_;
  std::vector<uint32_t> updated_positions_;

  // Scratch of apply(), reused.
  std::vector<Decoded> decoded_;
  std::vector<uint8_t> checksum_input_;
  std::vector<SnapshotObject> next_objects_;
  std::vector<RingRef> next_ring_of_;
};

}  // namespace impulse::wire
