// Client-side prediction of the bodies a player drives (Impulse::predict; the thin client library
// stays free of physics). A local World holds the driven bodies, the static bodies around them
// and the other movable bodies near them, by zone of detail: simulated, stand-ins, or left out. Each input the player sends
// (ClientCore::send_input) is also applied here at once, so the player's own body answers in the
// same frame; each snapshot from the server reconciles: the local world restarts from the
// snapshot's tick and replays the inputs sent since, and the difference between the old and the
// new prediction becomes a correction that decays instead of a snap.
//
// Sources: Gambetta, "Fast-Paced Multiplayer, Part II: Client-Side Prediction and Server
// Reconciliation" (gabrielgambetta.com, 2014) for the replay of unacknowledged inputs; the Edyn
// design (seed 001 of this project) for decaying discontinuities and the zones of detail; Cone,
// "It IS Rocket Science! The Physics of Rocket League Detailed" (GDC 2018) for other players'
// last inputs fading to neutral.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "impulse/interpolation.h"
#include "impulse/types.h"

namespace impulse::predict {

/// Tuning of a Predictor.
struct PredictorConfig {
  Vec3 gravity{0.0f, -9.81f, 0.0f};  ///< the server's gravity [m/s^2] (the protocol does not carry it)
  uint16_t tick_hz = 60;             ///< the server's tick rate (ClientCore::tick_hz)
  /// Corrections halve in this time [s]: long enough that none shows as a jump, short enough
  /// that the player's body is where the server has it within a few tenths of a second.
  double correction_half_life_s = 0.1;
  /// Zones of detail (seed 001's three), by a movable body's distance from the nearest driven
  /// body at the snapshot:
  ///  1. extrapolation, within extrapolate_radius [m]: a body given with describe() (another
  ///     player's car, a prop) is simulated as a dynamic body from its snapshot state, and driven
  ///     by the input the server relayed for it (RelayedInput), fading to nothing over
  ///     input_fade_s. It pushes and is pushed by the driven bodies as on the server.
  ///  2. snapping, within neighbour_radius [m] (and undescribed bodies of zone 1): kinematic
  ///     stand-ins, moving at their snapshot velocity, snapped to each new snapshot.
  ///  3. beyond: left out (the game draws them from the client's interpolation).
  /// extrapolate_radius <= neighbour_radius; 0 turns zone 1 off.
  float extrapolate_radius = 6.0f;
  float neighbour_radius = 8.0f;
  /// A relayed input is applied at full strength on the first tick after its snapshot and fades
  /// linearly to nothing over this time [s]: the other player may have changed it since, and a
  /// stale input held too long overshoots (Rocket League fades over about 150 ms). The default is
  /// the server's own limit, 250 ms (it repeats a missing input for at most 15 ticks). On the
  /// virtual-clock test of a car driven in half-second bursts over a 100 ms round trip
  /// (Prediction.AnotherPlayersBodyFollowsItsRelayedInput) the mean error was 51/50/36 mm at
  /// 0.3 s, 70/68/51 mm at 0.15 s and 39/39/27 mm with no fade: inputs that change more often
  /// than that favour a shorter fade.
  double input_fade_s = 0.25;
  /// The most one reconciliation may take [s] of wall-clock time (rebuild and replay); past it
  /// the replay stops, the old prediction stays, and the next snapshot tries again.
  double reconcile_budget_s = 0.002;
  /// Inputs kept for replay [ticks]: beyond the round trip plus the margin (ClientCore's is at
  /// most 30 ticks), older ones are dropped.
  uint32_t max_replay_ticks = 64;
};

/// Counters of a Predictor.
struct PredictorStats {
  uint64_t reconciliations = 0;    ///< snapshots reconciled
  uint64_t ticks_replayed = 0;     ///< local steps run by reconciliations
  uint64_t over_budget = 0;        ///< reconciliations abandoned at the time budget
  double max_correction_m = 0;     ///< largest position correction a reconciliation started
  /// Snapshots whose driven body's state was older than the snapshot (ObjectState::tick: the
  /// server deferred it, or it was unchanged): reconciled from that state's own tick.
  uint64_t stale_states = 0;
  /// The zones at the last reconciliation: movable bodies simulated (zone 1; `proxies_driven` of
  /// them with a relayed input), kinematic stand-ins (zone 2) and left out (zone 3).
  uint32_t proxies = 0;
  uint32_t proxies_driven = 0;
  uint32_t stand_ins = 0;
  uint32_t left_out = 0;
};

class Predictor {
 public:
  explicit Predictor(const PredictorConfig& config = {});
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  /// Predicts body `id` (the client's own), created with `desc` (its shape, mass and material:
  /// the snapshot carries only its shape and state). From the next snapshot that holds it on.
  void drive(ObjectID id, const ObjectDesc& desc);
  /// The exact description of static body `id` (the game's own copy of its level). Snapshots
  /// carry static bodies too, but their orientations are quantised (about 0.27 degrees at the
  /// default 10 bits), which tilts a ground plane or box by as much: a body driven 10 m over it
  /// would drift centimetres from the server. Bodies given here replace their snapshot copies.
  void set_static(ObjectID id, const ObjectDesc& desc);
  /// The exact description of another movable body (another player's car, a prop: its shape,
  /// mass and material, which snapshots do not carry): within extrapolate_radius of a driven body
  /// it is simulated (zone 1) rather than moved as a stand-in. Its own position in `desc` is not
  /// used: snapshots place it. A second call replaces the description; a driven body's is
  /// ignored. Descriptions are kept for the Predictor's lifetime (a linear list: describe the
  /// bodies near play, not a whole level's).
  void describe(ObjectID id, const ObjectDesc& desc);
  /// The input the client sent for `tick` (ClientCore::send_input's arguments): kept for replay,
  /// and applied now, stepping the local world through `tick` (each skipped tick repeats a body's
  /// last input, as the server does). Ticks at or before the local world's are ignored.
  void input(ObjectID id, InputMode mode, Vec3 linear, Vec3 angular, uint64_t tick);
  /// Steps the local world through `tick` with the inputs known for those ticks (a tick without
  /// a new input repeats the last): call when the input tick advances without an input.
  void advance(uint64_t tick);
  /// Reconciles with the server's view at `snapshot_tick` (a completed snapshot:
  /// PollResult::objects_of): rebuilds the local world there and replays the inputs after it up
  /// to the local tick. A driven body the snapshot did not update (ObjectState::tick older, and
  /// awake) moves the restart back to its state's tick. `now` starts the decay of the correction
  /// this makes. Restarts at or before the last one, or older than the inputs kept
  /// (max_replay_ticks), are ignored. `inputs` are the other clients' inputs the snapshot relayed
  /// (PollResult::inputs_of): the bodies of zone 1 replay them.
  void reconcile(uint64_t snapshot_tick, std::span<const ObjectState> objects,
                 std::chrono::steady_clock::time_point now, std::span<const RelayedInput> inputs = {});

  /// The pose to draw for a driven body, or a described body simulated in zone 1, at `now`: the
  /// prediction at local_tick(), plus the decaying correction. nullopt before its first snapshot,
  /// or for a described body outside zone 1 at the last reconciliation.
  std::optional<Pose> pose(ObjectID id, std::chrono::steady_clock::time_point now) const;
  /// The prediction itself (no correction) and its velocity [m/s]: tests and tools.
  std::optional<ObjectState> predicted(ObjectID id) const;
  /// The tick the local world is at (the newest input's), 0 before the first snapshot.
  uint64_t local_tick() const;
  const PredictorStats& stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace impulse::predict
