// Replay of recordings: info (one pass over the frames), verify (restore the header's state,
// re-apply each tick's requests through server::apply_to_world, step, compare awake_hash; Box2D
// 3.2's recorded-call replay validated by a per-step hash) and export (nearest keyframe, then
// re-simulate to the tick, as Unreal replays scrub from checkpoints).
#include "server/record/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "server/record/playback.h"
#include "server/record/reader.h"

namespace impulse::record {
namespace {

using Clock = std::chrono::steady_clock;

bool damping_less(const BodyDamping& a, uint64_t id) { return a.id() < id; }

std::vector<BodyDamping> copy_dampings(const Header& h) {
  std::vector<BodyDamping> out;
  if (h.dampings()) {
    out.reserve(h.dampings()->size());
    for (const BodyDamping* d : *h.dampings()) out.push_back(*d);
  }
  std::sort(out.begin(), out.end(), [](const BodyDamping& a, const BodyDamping& b) { return a.id() < b.id(); });
  return out;
}

std::string describe_vec(impulse::Vec3 v) { return fmt::format("({:.9g}, {:.9g}, {:.9g})", v.x, v.y, v.z); }
std::string describe_quat(impulse::Quat q) { return fmt::format("({:.9g}, {:.9g}, {:.9g}, {:.9g})", q.x, q.y, q.z, q.w); }

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(impulse::Vec3 a, impulse::Vec3 b) { return same_bits(a.x, b.x) && same_bits(a.y, b.y) && same_bits(a.z, b.z); }
bool same_bits(impulse::Quat a, impulse::Quat b) {
  return same_bits(a.x, b.x) && same_bits(a.y, b.y) && same_bits(a.z, b.z) && same_bits(a.w, b.w);
}

/// Lists the objects whose state differs between the recorded (keyframe) and replayed worlds.
std::string diff_worlds(const physics::World& recorded, const physics::World& replayed, size_t max_lines) {
  std::vector<physics::BodyState> a, b;
  recorded.for_each_object([&](const physics::BodyState& s) { a.push_back(s); });
  replayed.for_each_object([&](const physics::BodyState& s) { b.push_back(s); });
  auto by_id = [](const physics::BodyState& x, const physics::BodyState& y) { return x.id < y.id; };
  std::sort(a.begin(), a.end(), by_id);
  std::sort(b.begin(), b.end(), by_id);
  std::string out;
  size_t lines = 0, differing = 0;
  auto line = [&](std::string text) {
    ++differing;
    if (lines++ < max_lines) out += "  " + text + "\n";
  };
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].id < b[j].id)) {
      line(fmt::format("object {}.{}: in the recording, missing on replay", a[i].id.index, a[i].id.generation));
      ++i;
      continue;
    }
    if (i == a.size() || b[j].id < a[i].id) {
      line(fmt::format("object {}.{}: on replay, missing in the recording", b[j].id.index, b[j].id.generation));
      ++j;
      continue;
    }
    const physics::BodyState& r = a[i];
    const physics::BodyState& p = b[j];
    std::string fields;
    if (!same_bits(r.position, p.position)) {
      fields += fmt::format(" position {} vs {}", describe_vec(r.position), describe_vec(p.position));
    }
    if (!same_bits(r.orientation, p.orientation)) {
      fields += fmt::format(" orientation {} vs {}", describe_quat(r.orientation), describe_quat(p.orientation));
    }
    if (!same_bits(r.velocity, p.velocity)) {
      fields += fmt::format(" velocity {} vs {}", describe_vec(r.velocity), describe_vec(p.velocity));
    }
    if (!same_bits(r.angular_velocity, p.angular_velocity)) {
      fields += fmt::format(" angular_velocity {} vs {}", describe_vec(r.angular_velocity),
                            describe_vec(p.angular_velocity));
    }
    if (r.sleeping != p.sleeping) fields += fmt::format(" sleeping {} vs {}", r.sleeping, p.sleeping);
    if (!fields.empty()) line(fmt::format("object {}.{} (recorded vs replayed):{}", r.id.index, r.id.generation, fields));
    ++i;
    ++j;
  }
  if (differing > max_lines) out += fmt::format("  ... and {} more objects\n", differing - max_lines);
  if (differing == 0) out += "  no object's pose, velocity or sleep state differs (the difference is in contacts, "
                             "forces or other hashed state)\n";
  return out;
}

void print_progress(std::FILE* out, uint64_t offset, uint64_t file_bytes, uint64_t ticks, double seconds, bool final) {
  constexpr int kWidth = 30;
  const double fraction = file_bytes > 0 ? std::min(1.0, static_cast<double>(offset) / static_cast<double>(file_bytes)) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  const double rate = seconds > 0 ? static_cast<double>(ticks) / seconds : 0.0;
  std::fprintf(out, "\rverify [%.*s%*s] %3d%%  %llu ticks  %.0f ticks/s%s", filled,
               "##############################", kWidth - filled, "", static_cast<int>(fraction * 100.0),
               static_cast<unsigned long long>(ticks), rate, final ? "\n" : "");
  std::fflush(out);
}

uint64_t file_size(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fclose(f);
  return size > 0 ? static_cast<uint64_t>(size) : 0;
}

const char* event_reason(ClientEventType type) {
  switch (type) {
    case ClientEventType::Connect: return "connect";
    case ClientEventType::Disconnect: return "disconnect";
    case ClientEventType::Timeout: return "timeout";
    case ClientEventType::ServerShutdown: return "server shutdown";
  }
  return "unknown";
}

// A JSON string body: the scene name comes from the file, so quotes, backslashes and control
// characters are escaped.
std::string json_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out;
}

std::string json_number(float v) { return fmt::format("{}", v); }
std::string json_vec(impulse::Vec3 v) {
  return fmt::format("{{ \"x\": {}, \"y\": {}, \"z\": {} }}", json_number(v.x), json_number(v.y), json_number(v.z));
}

}  // namespace

// --- info --------------------------------------------------------------------------------------

bool read_info(const std::string& path, RecordingInfo* info, std::string* error) {
  RecordingReader reader;
  if (std::string problem = open_recording(path, reader); !problem.empty()) {
    if (error) *error = problem;
    return false;
  }
  RecordingInfo out;
  const Header& h = *reader.frame()->payload_as_Header();
  out.format_version = h.format_version();
  out.build_id = h.build_id() ? h.build_id()->str() : std::string{};
  out.started_unix_ms = h.started_unix_ms();
  out.part = h.part();
  out.scene_name = h.scene_name() ? h.scene_name()->str() : std::string{};
  if (const ServerConfig* c = h.config()) {
    out.scene_spec = c->scene() ? c->scene()->str() : std::string{};
    out.tick_hz = c->tick_hz();
    out.snapshot_hz = c->snapshot_hz();
    out.max_clients = c->max_clients();
  }
  out.keyframe_interval = h.keyframe_interval();
  if (h.settings()) out.settings = to_physics(*h.settings());
  out.start_tick = h.tick();
  out.last_tick = h.tick();
  out.state_bytes = h.state() ? h.state()->size() : 0;
  out.file_bytes = file_size(path);

  for (;;) {
    const ReadStatus status = reader.next();
    if (status == ReadStatus::End) break;
    if (status == ReadStatus::Truncated) {
      out.truncated = true;
      out.truncated_bytes = reader.truncated_bytes();
      break;
    }
    if (status == ReadStatus::Corrupt) {
      out.problem = reader.error();
      break;
    }
    const Frame& f = *reader.frame();
    const uint64_t frame_bytes = reader.offset() - reader.frame_offset();
    switch (f.payload_type()) {
      case Payload::Tick: {
        const Tick& t = *f.payload_as_Tick();
        if (out.ticks == 0) out.first_tick = t.tick();
        ++out.ticks;
        out.last_tick = t.tick();
        out.tick_bytes += frame_bytes;
        if (const auto* list = t.requests()) {
          for (const Request* r : *list) {
            ++out.requests;
            ++out.requests_by_type[request_type_name(r->type())];
            ++out.requests_by_result[result_code_name(r->result())];
          }
        }
        break;
      }
      case Payload::Keyframe:
        ++out.keyframes;
        out.keyframe_bytes += frame_bytes;
        break;
      case Payload::ClientEvent: {
        const ClientEvent& e = *f.payload_as_ClientEvent();
        if (e.type() == ClientEventType::Connect) {
          ClientSummary c;
          c.client_id = e.client_id();
          c.address = e.address() ? e.address()->str() : std::string{};
          c.name = e.name() ? e.name()->str() : std::string{};
          c.connect_tick = e.tick();
          out.clients.push_back(std::move(c));
        } else {
          for (ClientSummary& c : out.clients) {
            if (c.client_id == e.client_id() && !c.end_tick) {
              c.end_tick = e.tick();
              c.end_reason = event_reason(e.type());
            }
          }
        }
        break;
      }
      case Payload::Header:
        if (out.problem.empty()) out.problem = fmt::format("a second Header at byte {}", reader.frame_offset());
        break;
      default: break;
    }
  }
  out.frames = reader.frames();
  *info = std::move(out);
  return true;
}

std::string format_info(const RecordingInfo& i) {
  std::string out;
  auto add = [&out](std::string line) { out += line + "\n"; };
  char started[64] = "?";
  const std::time_t seconds = static_cast<std::time_t>(i.started_unix_ms / 1000);
  std::tm utc{};
  if (gmtime_r(&seconds, &utc)) std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S UTC", &utc);
  add(fmt::format("format:     version {}, part {}, started {}", i.format_version, i.part, started));
  add(fmt::format("build:      {}", i.build_id));
  add(fmt::format("scene:      \"{}\" (--scene {})", i.scene_name, i.scene_spec));
  add(fmt::format("config:     tick_hz={} snapshot_hz={} max_clients={} keyframe every {} ticks", i.tick_hz,
                  i.snapshot_hz, i.max_clients, i.keyframe_interval));
  add(fmt::format("world:      gravity {} m/s^2, {} substeps, sleep {}", describe_vec(i.settings.gravity),
                  i.settings.substeps, i.settings.allow_sleep ? "on" : "off"));
  const double hz = i.tick_hz > 0 ? static_cast<double>(i.tick_hz) : 1.0;
  add(fmt::format("ticks:      {} (ticks {}..{}), {:.2f} s of simulated time", i.ticks,
                  i.ticks ? i.first_tick : i.start_tick, i.last_tick,
                  static_cast<double>(i.last_tick - i.start_tick) / hz));
  std::string by_type, by_result;
  for (const auto& [name, n] : i.requests_by_type) by_type += fmt::format(" {}={}", name, n);
  for (const auto& [name, n] : i.requests_by_result) by_result += fmt::format(" {}={}", name, n);
  add(fmt::format("requests:   {}", i.requests));
  if (i.requests > 0) {
    add(fmt::format("  by type:  {}", by_type.substr(1)));
    add(fmt::format("  by result:{}", by_result));
  }
  add(fmt::format("clients:    {}", i.clients.size()));
  for (const ClientSummary& c : i.clients) {
    add(fmt::format("  client {} \"{}\" {}: connected at tick {}, {}", c.client_id, c.name, c.address, c.connect_tick,
                    c.end_tick ? fmt::format("{} at tick {}", c.end_reason, *c.end_tick) : "still connected"));
  }
  add(fmt::format("keyframes:  {} ({} bytes; initial state {} bytes)", i.keyframes, i.keyframe_bytes, i.state_bytes));
  add(fmt::format("size:       {} bytes in {} frames; {:.1f} bytes per tick (tick frames only)", i.file_bytes, i.frames,
                  i.ticks ? static_cast<double>(i.tick_bytes) / static_cast<double>(i.ticks) : 0.0));
  if (i.truncated) {
    add(fmt::format("tail:       truncated: {} bytes of an incomplete last frame (a crash?); {} complete frames "
                    "read",
                    i.truncated_bytes, i.frames));
  }
  if (!i.problem.empty()) add(fmt::format("problem:    {}", i.problem));
  return out;
}

// --- verify ------------------------------------------------------------------------------------

VerifyResult verify_recording(const std::string& path, const VerifyOptions& options) {
  VerifyResult result;
  const Clock::time_point t0 = Clock::now();
  RecordingReader reader;
  if (std::string problem = open_recording(path, reader); !problem.empty()) {
    result.error = problem;
    return result;
  }
  const Header& h = *reader.frame()->payload_as_Header();
  auto world = std::make_unique<physics::World>();
  float dt = 0;
  if (std::string problem = load_header(h, *world, &dt); !problem.empty()) {
    result.error = fmt::format("{}: {}", path, problem);
    return result;
  }
  result.start_tick = world->tick();
  result.last_tick = world->tick();
  const uint64_t total_bytes = options.progress ? file_size(path) : 0;
  Clock::time_point last_progress = t0;

  // After a divergence the replay runs on to the next keyframe to name the objects that differ.
  std::string first_mismatch;
  physics::World keyframe_world;
  bool done = false;
  while (!done) {
    const ReadStatus status = reader.next();
    if (status == ReadStatus::End) break;
    if (status == ReadStatus::Truncated) {
      result.truncated = true;
      break;
    }
    if (status == ReadStatus::Corrupt) {
      result.read_problem = reader.error();
      break;
    }
    const Frame& f = *reader.frame();
    switch (f.payload_type()) {
      case Payload::Tick: {
        std::string mismatch = replay_tick(*world, *f.payload_as_Tick(), dt, true, nullptr, &result.requests);
        ++result.ticks;
        result.last_tick = world->tick();
        if (!mismatch.empty() && first_mismatch.empty()) {
          first_mismatch = std::move(mismatch);
          result.diverged_tick = f.payload_as_Tick()->tick();
        }
        break;
      }
      case Payload::Keyframe: {
        const Keyframe& k = *f.payload_as_Keyframe();
        if (k.tick() != world->tick()) {
          if (first_mismatch.empty()) {
            first_mismatch = fmt::format("keyframe of tick {} follows tick {}", k.tick(), world->tick());
            result.diverged_tick = k.tick();
          }
          done = true;
          break;
        }
        ++result.keyframes;
        std::string error;
        if (!k.state() ||
            !keyframe_world.restore_state(std::span<const uint8_t>(k.state()->data(), k.state()->size()), &error)) {
          result.read_problem = fmt::format("keyframe of tick {} does not restore: {}", k.tick(), error);
          done = true;
          break;
        }
        const bool matches = keyframe_world.world_hash() == world->world_hash() &&
                             keyframe_world.world_hash() == k.world_hash();
        if (!matches && first_mismatch.empty()) {
          first_mismatch = fmt::format("keyframe of tick {}: state hashes {:016x} (recorded {:016x}), replay {:016x}",
                                       k.tick(), keyframe_world.world_hash(), k.world_hash(), world->world_hash());
          result.diverged_tick = k.tick();
        }
        if (!first_mismatch.empty()) {
          result.report = fmt::format("objects that differ at the keyframe of tick {}:\n{}", k.tick(),
                                      diff_worlds(keyframe_world, *world, 20));
          done = true;
        }
        break;
      }
      case Payload::ClientEvent: break;
      case Payload::Header:
        result.read_problem = fmt::format("a second Header at byte {}", reader.frame_offset());
        done = true;
        break;
      default: break;
    }
    if (options.progress && Clock::now() - last_progress > std::chrono::milliseconds(200)) {
      last_progress = Clock::now();
      print_progress(options.progress, reader.offset(), total_bytes, result.ticks,
                     std::chrono::duration<double>(last_progress - t0).count(), false);
    }
  }
  result.frames = reader.frames();
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (options.progress) print_progress(options.progress, reader.offset(), total_bytes, result.ticks, result.seconds, true);
  if (!first_mismatch.empty()) {
    std::string report = "first divergence: " + first_mismatch + "\n";
    report += result.report.empty() ? "no keyframe after the divergence to compare objects against (the recording "
                                      "ends first)\n"
                                    : result.report;
    result.report = std::move(report);
  }
  result.ok = first_mismatch.empty() && result.read_problem.empty();
  return result;
}

// --- export ------------------------------------------------------------------------------------

bool replay_to_tick(const std::string& path, uint64_t tick, ReplayedWorld* out, std::string* error) {
  auto fail = [&](std::string text) {
    if (error) *error = std::move(text);
    return false;
  };
  auto world = std::make_unique<physics::World>();
  Playback playback(*world);
  if (!playback.open(path, error)) return false;
  if (tick < playback.first_tick()) {
    return fail(fmt::format("tick {} is before the recording starts (tick {})", tick, playback.first_tick()));
  }
  if (tick > playback.last_tick()) {
    return fail(fmt::format("tick {} is beyond the recording's last complete tick {}", tick, playback.last_tick()));
  }
  // Dampings are not part of the world state: follow them from the header through every recorded
  // creation and destruction up to `tick` (no simulation).
  RecordingReader reader;
  if (std::string problem = open_recording(path, reader); !problem.empty()) return fail(problem);
  std::vector<BodyDamping> dampings = copy_dampings(*reader.frame()->payload_as_Header());
  while (reader.next() == ReadStatus::Frame) {
    const Frame& f = *reader.frame();
    if (f.payload_type() != Payload::Tick) continue;
    const Tick& t = *f.payload_as_Tick();
    if (t.tick() > tick) break;
    if (const auto* list = t.requests()) {
      for (const Request* r : *list) update_dampings(*r, dampings);
    }
  }
  if (!playback.seek(tick, error)) return false;
  if (playback.mismatches() > 0) {
    return fail(fmt::format("the replay diverges from the recording ({}); run impulse-replay verify",
                            playback.first_mismatch()));
  }
  out->world = std::move(world);
  out->dampings = std::move(dampings);
  out->scene_name = playback.scene_name();
  out->keyframe_tick = playback.keyframe_at_or_before(tick);
  return true;
}

std::string to_scene_json(const physics::World& world, std::span<const BodyDamping> dampings,
                          std::string_view scene_name, uint32_t* skipped) {
  if (skipped) *skipped = 0;
  static const char* const kKinds[] = {"Dynamic", "Static", "Kinematic"};
  static const char* const kShapes[] = {"Sphere", "Box", "Capsule", "Plane", "Hull", "Mesh", "HeightField", "Cylinder"};
  std::string out = fmt::format("{{\n  \"name\": \"{} at tick {}\",\n  \"gravity\": {},\n  \"bodies\": [\n",
                                json_escape(scene_name), world.tick(), json_vec(world.settings().gravity));
  bool first = true;
  world.for_each_object([&](const physics::BodyState& s) {
    // A scene holds only finite numbers (the server refuses "-nan" as a scene): a body whose
    // state is not finite is left out and counted. The World's guard removes such bodies at the
    // next step, so only a world restored from an old recording could still hold one.
    const auto damping_it = std::lower_bound(dampings.begin(), dampings.end(), to_wire(s.id), damping_less);
    const bool damping_finite = damping_it == dampings.end() || damping_it->id() != to_wire(s.id) ||
                                std::isfinite(damping_it->angular());
    if (!is_finite(s.position) || !is_finite(s.orientation) || !is_finite(s.velocity) ||
        !is_finite(s.angular_velocity) || !std::isfinite(s.mass) || !std::isfinite(s.restitution) ||
        !std::isfinite(s.friction) || !std::isfinite(s.shape.radius) || !is_finite(s.shape.half_extents) ||
        !std::isfinite(s.shape.half_height) || !damping_finite) {
      if (skipped) ++*skipped;
      return;
    }
    std::string body = fmt::format("    {{ \"name\": \"object/{}.{}\", \"kind\": \"{}\", \"shape\": \"{}\"", s.id.index,
                                   s.id.generation, kKinds[static_cast<int>(s.kind) % 3],
                                   kShapes[static_cast<int>(s.shape.kind) % 8]);
    switch (s.shape.kind) {
      case physics::ShapeKind::Sphere: body += ", \"dims\": " + json_vec({s.shape.radius, 0.0f, 0.0f}); break;
      case physics::ShapeKind::Box: body += ", \"dims\": " + json_vec(s.shape.half_extents); break;
      case physics::ShapeKind::Capsule:
      case physics::ShapeKind::Cylinder:
        body += ", \"dims\": " + json_vec({s.shape.radius, s.shape.half_height, 0.0f});
        break;
      case physics::ShapeKind::Hull: {  // its vertices in its own (principal) frame: the pose as is
        body += ", \"points\": [";
        for (size_t i = 0; i < s.shape.hull->vertices.size(); ++i) body += (i ? ", " : "") + json_vec(s.shape.hull->vertices[i]);
        body += "]";
        break;
      }
      case physics::ShapeKind::Mesh: {  // its vertices and triangles in the body's frame
        const physics::TriangleMesh& m = *s.shape.mesh;
        body += ", \"points\": [";
        for (size_t i = 0; i < m.vertices.size(); ++i) body += (i ? ", " : "") + json_vec(m.vertices[i]);
        body += "], \"triangles\": [";
        for (size_t i = 0; i < m.indices.size(); ++i) body += fmt::format("{}{}", i ? ", " : "", m.indices[i]);
        body += "]";
        if (!m.materials.empty()) {
          body += ", \"materials\": [";
          for (size_t i = 0; i < m.materials.size(); ++i) body += fmt::format("{}{}", i ? ", " : "", m.materials[i]);
          body += "]";
        }
        break;
      }
      case physics::ShapeKind::HeightField: {  // the samples as heights again (holes listed apart)
        const physics::HeightField& f = *s.shape.heightfield;
        body += fmt::format(", \"samples_x\": {}, \"samples_z\": {}, \"spacing\": {}, \"heights\": [", f.count_x,
                            f.count_z, json_vec({f.spacing.x, 0.0f, f.spacing.z}));
        std::string holes;
        for (uint32_t k = 0; k < f.heights.size(); ++k) {
          const bool hole = f.heights[k] == physics::kHeightFieldHole;
          body += (k ? ", " : "") + json_number(hole ? f.offset : f.offset + f.scale * static_cast<float>(f.heights[k]));
          if (hole) holes += fmt::format("{}{}", holes.empty() ? "" : ", ", k);
        }
        body += "]";
        if (!holes.empty()) body += ", \"holes\": [" + holes + "]";
        if (!f.materials.empty()) {
          body += ", \"materials\": [";
          for (size_t i = 0; i < f.materials.size(); ++i) body += fmt::format("{}{}", i ? ", " : "", f.materials[i]);
          body += "]";
        }
        break;
      }
      default: break;
    }
    body += ", \"position\": " + json_vec(s.position);
    // Orientation as axis-angle: angle = 2 atan2(|v|, w), axis = v / |v|.
    const impulse::Vec3 v{s.orientation.x, s.orientation.y, s.orientation.z};
    const float sin_half = length(v);
    if (sin_half > 0.0f) {
      constexpr double kDegrees = 180.0 / 3.14159265358979323846;
      const double angle = 2.0 * std::atan2(static_cast<double>(sin_half), static_cast<double>(s.orientation.w));
      body += fmt::format(", \"rotation\": {{ \"axis\": {}, \"degrees\": {} }}", json_vec(v * (1.0f / sin_half)),
                          json_number(static_cast<float>(angle * kDegrees)));
    }
    if (s.kind != physics::BodyKind::Static) {
      body += ", \"velocity\": " + json_vec(s.velocity);
      body += ", \"angular_velocity\": " + json_vec(s.angular_velocity);
    }
    if (s.kind == physics::BodyKind::Dynamic) body += ", \"mass\": " + json_number(s.mass);
    body += fmt::format(", \"restitution\": {}, \"friction\": {}", json_number(s.restitution), json_number(s.friction));
    const uint64_t key = to_wire(s.id);
    auto it = std::lower_bound(dampings.begin(), dampings.end(), key, damping_less);
    if (it != dampings.end() && it->id() == key) body += ", \"angular_damping\": " + json_number(it->angular());
    if (s.material != 0) body += fmt::format(", \"material\": {}", s.material);
    if (s.sensor) body += ", \"sensor\": true";
    if (s.filter != physics::Filter{}) {
      body += fmt::format(", \"category\": {}, \"mask\": {}, \"group\": {}", s.filter.category, s.filter.mask,
                          s.filter.group);
    }
    body += " }";
    out += (first ? "" : ",\n") + body;
    first = false;
  });
  out += "\n  ]";
  // The material-pair table, so a scene exported from a recording collides as the world did.
  if (!world.material_pairs().empty()) {
    out += ",\n  \"material_pairs\": [\n";
    bool first_pair = true;
    for (const auto& [key, pair] : world.material_pairs()) {
      out += fmt::format("{}    {{ \"a\": {}, \"b\": {}, \"friction\": {}, \"restitution\": {} }}", first_pair ? "" : ",\n",
                         key >> 16, key & 0xffffu, json_number(pair.friction), json_number(pair.restitution));
      first_pair = false;
    }
    out += "\n  ]";
  }
  out += "\n}\n";
  return out;
}

}  // namespace impulse::record
