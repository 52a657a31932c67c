// The car of `impulse-client drive` and `impulse-viewer --drive`: a box the client creates and
// steers with tick-stamped Velocity inputs (docs/PROTOCOL.md, "Ticks"), predicted locally
// (Impulse::predict) or not. Transport-free: the caller polls its client, hands the snapshots
// here, asks input() for each new input tick and sends what it returns, so the same car runs over
// a socket (impulse::Client) and on the tests' virtual clock (ClientCore).
//
// What an input means is the game's (docs/PROTOCOL.md): here the throttle changes a commanded
// forward speed within an acceleration limit, the steering turns the car about +Y at a rate that
// grows with its speed, and the vertical velocity is left to gravity and contacts (the input
// carries the car's own, so it neither floats nor is pressed down).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include "impulse/predict.h"
#include "impulse/types.h"

namespace impulse::drive {

/// The player's controls at one instant, each in [-1, 1] (values outside are clamped, NaN is 0).
struct Controls {
  float throttle = 0;  ///< +1 full ahead, -1 full reverse (or brake while moving ahead)
  float steer = 0;     ///< +1 full left, -1 full right
};

/// The car and its handling.
struct CarConfig {
  /// Centre at creation [m]: the demo scene's open ground, 8 m beyond its dominoes.
  Vec3 spawn{0.0f, 0.36f, 12.0f};
  /// Heading at creation [rad] about +Y; 0 faces -Z (into the demo scene), the default pi faces
  /// +Z, away from it: the scene's light props would stop the prediction's car, whose stand-ins
  /// for other bodies are kinematic (their masses are not in snapshots), while the server's
  /// 1200 kg car pushes them aside.
  float yaw = 3.14159265f;
  Vec3 half_extents{0.9f, 0.35f, 2.0f};  ///< [m]
  float mass = 1200.0f;             ///< [kg]
  float max_speed = 15.0f;          ///< commanded forward speed limit [m/s] (reverse: a third)
  float acceleration = 6.0f;        ///< [m/s^2] under full throttle
  float braking = 14.0f;            ///< [m/s^2] with the throttle against the motion
  float coasting = 2.0f;            ///< [m/s^2] with no throttle
  float max_yaw_rate = 1.2f;        ///< [rad/s] at full steer, reached from 3 m/s up
  bool predict = true;              ///< simulate the car locally (Impulse::predict)
  /// The level's ground, the plane y = ground_y with normal +Y (the demo scene's): the snapshot's
  /// copy of that plane is replaced by this exact one in the local world (snapshot orientations
  /// are quantised; predictor.h, set_static). nullopt: use the snapshot's copies as they are.
  std::optional<float> ground_y = 0.0f;
  predict::PredictorConfig predictor;
};

/// What the car has seen and done.
struct CarStats {
  uint64_t inputs = 0;              ///< input ticks produced
  uint64_t snapshots = 0;           ///< snapshots that held the car
  double distance_m = 0;            ///< path length of the server's car between snapshots
};

class Car {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit Car(const CarConfig& config = {});

  /// The car to create (create_object): a dynamic box at the spawn pose.
  ObjectDesc desc() const;
  /// The server created it as `id`: from now on snapshots are searched for it.
  void created(ObjectID id);
  /// The exact description of a static body of the level (Predictor::set_static), for levels
  /// whose ground is not the ground_y plane.
  void set_static(ObjectID id, const ObjectDesc& desc) { predictor_.set_static(id, desc); }
  ObjectID id() const { return id_; }

  /// A completed snapshot (PollResult::objects_of, inputs_of): reconciles the prediction and
  /// keeps the server's car state. A body another player drives (it has a relayed input) is taken
  /// for a car like this one, with the snapshot's shape, and predicted near the car with its
  /// input (Predictor::describe).
  void snapshot(uint64_t tick, std::span<const ObjectState> objects, TimePoint now,
                std::span<const RelayedInput> inputs = {});

  /// The input for `tick` (ClientCore::input_tick) under `controls`, or nullopt when `tick` is
  /// not newer than the last one or the car's heading is not known yet (no snapshot of it). A
  /// tick skipped since the last input advances the commanded speed through each tick between,
  /// so the speed is a function of the inputs alone. With prediction on, the input is applied to
  /// the local world too (the caller sends it: send_input(id(), InputMode::Velocity, ...)).
  struct Input {
    Vec3 linear;   ///< velocity [m/s], world frame
    Vec3 angular;  ///< angular velocity [rad/s], world frame
    uint64_t tick = 0;
  };
  std::optional<Input> input(uint64_t tick, Controls controls);

  /// The predicted pose to draw at `now` (prediction plus the decaying correction); nullopt with
  /// prediction off or before the first snapshot of the car.
  std::optional<Pose> predicted_pose(TimePoint now) const;
  /// The car in the newest snapshot (the server's word, one-way latency old); nullopt before.
  const std::optional<ObjectState>& server_state() const { return server_; }
  /// The forward speed the inputs command now [m/s].
  float commanded_speed() const { return speed_; }
  bool predicting() const { return config_.predict; }
  const CarStats& stats() const { return stats_; }
  /// Prediction's counters (reconciliations, corrections); all zero with prediction off.
  const predict::PredictorStats& predictor_stats() const { return predictor_.stats(); }

 private:
  CarConfig config_;
  predict::Predictor predictor_;
  ObjectID id_;
  std::optional<ObjectState> server_;
  uint64_t server_tick_ = 0;
  uint64_t last_tick_ = 0;
  float speed_ = 0;  // commanded forward speed [m/s]
  bool ground_pinned_ = false;
  CarStats stats_;
};

/// The car's heading in the ground plane: its local -Z turned by `orientation` and flattened,
/// unit length (-Z when the car points straight up or down).
Vec3 forward_of(Quat orientation);

}  // namespace impulse::drive
