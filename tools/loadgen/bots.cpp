// impulse-loadgen's bots: many non-blocking impulse::Client sessions per thread, paced by a token
// bucket per bot, moving through phases separated by a std::barrier whose completion step takes
// the measurements at the phase boundaries.
#include "tools/loadgen/bots.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "impulse/client.h"

namespace impulse::tools {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

constexpr float kBodyHalfExtent = 0.25f;  // [m]
constexpr float kBodyMass = 1.0f;         // [kg]
constexpr double kRequestBurst = 32;      // token bucket depth [requests]
constexpr double kTwoPi = 6.283185307179586;
constexpr Seconds kSampleEvery{1.0};      // server stats sampling (its stats window is 1 s)
constexpr Seconds kProgressEvery{5.0};

enum class Phase : int { Connect = 0, Spawn, Settle, Push, Destroy, Done };
enum class RequestKind : uint8_t { Create, Destroy, Push, Interest };

Clock::duration to_duration(double seconds) { return std::chrono::duration_cast<Clock::duration>(Seconds(seconds)); }

/// One bot: a session and the bodies it owns. Touched only by its thread (and by the barrier's
/// completion step, while every thread waits).
struct Bot {
  int index = 0;
  std::unique_ptr<Client> client;
  bool alive = false;            // connected and not closed by the server
  uint32_t target = 0;           // bodies to create
  uint32_t first_cell = 0;       // its first spawn grid cell
  uint32_t creates_sent = 0;
  std::vector<ObjectID> bodies;  // created (answered Ok)
  size_t destroys_sent = 0;
  struct Pending {
    RequestKind kind = RequestKind::Create;
    uint32_t cell = 0;  // a create's spawn grid cell
  };
  std::unordered_map<uint32_t, Pending> pending;  // request id -> what it asked
  std::vector<uint32_t> retry_cells;  // cells whose create was answered RateLimited: sent again
  size_t push_next = 0;
  Clock::duration push_step{};
  Clock::time_point next_push{}, next_ping{};
  uint64_t last_input_tick = 0;  // the newest tick an Input was sent for
  double credit = kRequestBurst;
  Clock::time_point credit_at{};
  uint64_t bytes_in_mark = 0, bytes_out_mark = 0, snapshots_mark = 0, relayed_mark = 0;
};

/// Per-thread tallies, merged after the threads end.
struct Tally {
  ErrorCounts errors{};
  uint64_t requests_sent = 0, pushes = 0, inputs = 0, disconnects = 0, create_retries = 0;
  int spawned = 0, destroyed = 0, connect_failures = 0;
  std::string first_connect_error;
  std::map<std::string, uint64_t> disconnect_reasons;
  std::vector<double> rtt_ms;
  double cpu_at_push_start = 0, cpu_push_s = 0;
  uint64_t bytes_in = 0, bytes_out = 0, snapshots = 0, snapshots_rejected = 0, relayed_inputs = 0;  // push phase
  uint64_t rng = 0;  // LCG state for push directions
};

/// The spawn grid cell `cell` of `total` cells: see LoadOptions::spacing.
Vec3 cell_position(const LoadOptions& o, uint32_t cell, uint32_t total) {
  const auto side = static_cast<uint32_t>(std::ceil(std::sqrt(static_cast<double>(std::max<uint32_t>(total, 1)))));
  const uint32_t ix = cell / side, iz = cell % side;
  return {o.spawn_x0 + static_cast<float>(ix) * o.spacing, o.spawn_height,
          (static_cast<float>(iz) - 0.5f * static_cast<float>(side - 1)) * o.spacing};
}

/// The nearest-rank percentile p in [0, 100] of `v` (sorted in place); 0 for none.
double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t k = rank < 1.0 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(k, v.size() - 1)];
}

std::array<uint64_t, 3> stage_ns(const server::ServerStats& st) {
  return {st.step_ns.load(std::memory_order_relaxed), st.events_ns.load(std::memory_order_relaxed),
          st.snapshots_ns.load(std::memory_order_relaxed)};
}

using TickHistogram = std::array<uint64_t, server::ServerStats::kTickHistogramBins>;

TickHistogram tick_histogram(const server::ServerStats& st) {
  TickHistogram h{};
  for (size_t i = 0; i < h.size(); ++i) h[i] = st.tick_histogram[i].load(std::memory_order_relaxed);
  return h;
}

/// Everything the threads share. Fields other than `phase` are written only before the threads
/// start, by the barrier's completion step (every thread waits meanwhile) or by a bot's own thread.
struct Shared {
  Shared(const LoadOptions& o, const InprocServer* s) : options(o), server(s) {}

  const LoadOptions& options;
  const InprocServer* server;
  std::vector<Bot> bots;
  std::atomic<int> phase{static_cast<int>(Phase::Connect)};
  Clock::time_point deadline{};    // of the connect, spawn or destroy phase
  Clock::time_point started{}, spawn_start{}, settle_start{}, destroy_done{};
  Clock::time_point push_start{}, push_end{}, push_stopped{};
  double process_cpu_start = 0, process_cpu_end = 0;
  std::optional<MachineCpuTicks> machine_start, machine_end;
  std::optional<double> server_cpu_start, server_cpu_end;
  uint64_t steps_dropped_start = 0, steps_dropped_end = 0;
  std::array<uint64_t, 3> stage_ns_start{}, stage_ns_end{};  // ServerStats step_ns, events_ns, snapshots_ns
  TickHistogram ticks_start{}, ticks_end{};  // ServerStats::tick_histogram
  LoadReport* report = nullptr;
  size_t alive_count = 0;  // bots connected at the end of the connect phase

  // Barrier completion: the phase boundary's bookkeeping, on one thread while the others wait.
  void advance() {
    const Clock::time_point now = Clock::now();
    switch (static_cast<Phase>(phase.load())) {
      case Phase::Connect:
        spawn_start = now;
        assign_targets();
        deadline = now + to_duration(options.phase_timeout_s);
        phase.store(static_cast<int>(Phase::Spawn));
        return;
      case Phase::Spawn:
        settle_start = now;
        deadline = now + to_duration(options.settle_s);
        phase.store(static_cast<int>(Phase::Settle));
        return;
      case Phase::Settle:
        push_start = now;
        push_end = now + (alive_count > 0 ? to_duration(options.seconds) : Clock::duration{});  // nothing to measure
        process_cpu_start = process_cpu_seconds();
        machine_start = machine_cpu_ticks();
        if (server) {
          server_cpu_start = server->thread_cpu_seconds();
          steps_dropped_start = server->stats().steps_dropped.load(std::memory_order_relaxed);
          stage_ns_start = stage_ns(server->stats());
          ticks_start = tick_histogram(server->stats());
        }
        phase.store(static_cast<int>(Phase::Push));
        return;
      case Phase::Push:
        push_stopped = now;
        process_cpu_end = process_cpu_seconds();
        machine_end = machine_cpu_ticks();
        if (server) {
          server_cpu_end = server->thread_cpu_seconds();
          steps_dropped_end = server->stats().steps_dropped.load(std::memory_order_relaxed);
          stage_ns_end = stage_ns(server->stats());
          ticks_end = tick_histogram(server->stats());
          report->objects = server->stats().objects.load(std::memory_order_relaxed);
        }
        deadline = now + to_duration(options.phase_timeout_s);
        phase.store(static_cast<int>(Phase::Destroy));
        return;
      case Phase::Destroy:
      case Phase::Done:
        destroy_done = now;
        phase.store(static_cast<int>(Phase::Done));
        return;
    }
  }

  // Spreads the bodies over the connected bots within each one's quota (Client::max_objects).
  void assign_targets() {
    std::vector<Bot*> alive;
    uint32_t smallest_quota = 0;
    for (Bot& b : bots) {
      if (!b.alive) continue;
      alive.push_back(&b);
      const uint32_t q = b.client->max_objects();
      if (q != 0 && (smallest_quota == 0 || q < smallest_quota)) smallest_quota = q;
    }
    alive_count = alive.size();
    report->quota_per_client = smallest_quota;
    if (!alive.empty()) {
      report->tick_hz = alive.front()->client->tick_hz();
      report->snapshot_hz = alive.front()->client->snapshot_hz();
    }
    auto quota_of = [](const Bot& b) {
      const uint32_t q = b.client->max_objects();
      return q == 0 ? std::numeric_limits<uint32_t>::max() : q;
    };
    const auto wanted = static_cast<uint64_t>(std::max(options.bodies, 0));
    uint64_t assigned = 0;
    if (!alive.empty()) {
      const uint64_t share = wanted / alive.size(), extra = wanted % alive.size();
      for (size_t i = 0; i < alive.size(); ++i) {
        alive[i]->target = static_cast<uint32_t>(std::min<uint64_t>(share + (i < extra ? 1 : 0), quota_of(*alive[i])));
        assigned += alive[i]->target;
      }
      // What a full quota refused goes to bots with room left.
      for (Bot* b : alive) {
        if (assigned >= wanted) break;
        const uint64_t room = quota_of(*b) - b->target;
        const uint64_t more = std::min(room, wanted - assigned);
        b->target += static_cast<uint32_t>(more);
        assigned += more;
      }
    }
    uint32_t cell = 0;
    for (Bot* b : alive) {
      b->first_cell = cell;
      cell += b->target;
    }
    report->bodies_targeted = static_cast<int>(assigned);
    if (assigned < wanted) {
      report->shortfall = alive.empty()
                              ? "no client connected"
                              : "the " + std::to_string(alive.size()) + " connected clients may own at most " +
                                    std::to_string(smallest_quota) + " objects each (Client::max_objects)";
    }
  }
};

struct Advance {
  Shared* shared;
  void operator()() noexcept { shared->advance(); }
};

/// One thread's work: the bots i with i % threads == t.
class BotThread {
 public:
  BotThread(Shared& shared, std::barrier<Advance>& barrier, int t, Tally& tally)
      : s_(shared), o_(shared.options), barrier_(barrier), t_(t), tally_(tally) {
    tally_.rng = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(t + 1);
  }

  void run() {
    if (o_.bot_nice > 0) {
      // Per thread on Linux (who = this thread's id). A failure only means the bots compete with
      // the server as equals, which the report's CPU figures show.
      errno = 0;
      if (setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), o_.bot_nice) != 0) {
        std::fprintf(stderr, "[impulse-loadgen] warning: cannot lower the bot threads' priority: %s\n",
                     std::strerror(errno));
      }
    }
    connect_all();
    await_phase(Phase::Spawn);  // targets assigned
    start_spawn();
    run_frames([this](Bot& b, Clock::time_point now) { spawn(b, now); }, s_.deadline,
               [this] {
                 return all_bots([](const Bot& b) {
                   return b.creates_sent == b.target && b.retry_cells.empty() && b.pending.empty();
                 });
               });
    await_phase(Phase::Settle);
    // The spawned bodies land and fall asleep before the measurement: it is of the steady state
    // of pushing, not of 5,000 bodies landing at once. An in-process server says when they sleep.
    run_frames([](Bot&, Clock::time_point) {}, s_.deadline, [this] {
      if (s_.server == nullptr) return false;
      const server::ServerStats& st = s_.server->stats();
      return st.awake.load(std::memory_order_relaxed) * 100 <= st.objects.load(std::memory_order_relaxed);
    });
    await_phase(Phase::Push);  // measurement starts
    start_push();
    run_frames([this](Bot& b, Clock::time_point now) { push(b, now); }, s_.push_end, [] { return false; });
    end_push();
    await_phase(Phase::Destroy);  // measurement ends
    run_frames([this](Bot& b, Clock::time_point now) { destroy(b, now); }, s_.deadline, [this] {
      return all_bots([](const Bot& b) { return b.destroys_sent == b.bodies.size() && b.pending.empty(); });
    });
    await_phase(Phase::Done);
    for_mine([](Bot& b) {
      if (b.alive) b.client->disconnect("loadgen done");
    });
  }

 private:
  template <class Fn>
  void for_mine(Fn&& fn) {
    for (size_t i = static_cast<size_t>(t_); i < s_.bots.size(); i += static_cast<size_t>(o_.threads)) fn(s_.bots[i]);
  }

  template <class Pred>
  bool all_bots(Pred&& pred) {
    bool all = true;
    for_mine([&](Bot& b) { all = all && (!b.alive || pred(b)); });
    return all;
  }

  // Arrives at the phase barrier, then keeps polling this thread's bots (so their sessions stay
  // alive: poll() sends the keepalive) until the last thread has arrived and the phase changed.
  void await_phase(Phase next) {
    auto token = barrier_.arrive();
    while (s_.phase.load() != static_cast<int>(next)) {
      const Clock::time_point frame_start = Clock::now();
      for_mine([this](Bot& b) {
        if (b.alive) receive(b);
      });
      std::this_thread::sleep_until(frame_start + o_.frame);
    }
    barrier_.wait(std::move(token));  // returns at once: the phase has completed
  }

  void connect_all() {
    for_mine([this](Bot& b) {
      // Keep the bots connected so far alive while this one connects (a connect may take seconds).
      for_mine([this](Bot& other) {
        if (other.alive) receive(other);
      });
      b.client = std::make_unique<Client>();
      // A bot renders nothing: no interpolation buffer, so its CPU goes to what every client
      // must do (decode, ack) and the measurement is of the server.
      ClientConfig headless;
      headless.interpolation = false;
      headless.snapshot_views = false;
      b.client->set_config(headless, nullptr);
      if (Clock::now() >= s_.deadline) {
        note_connect_failure("the connect phase's deadline passed before this bot's turn");
        return;
      }
      std::string error;
      const std::string name = "loadgen-" + std::to_string(b.index);
      if (b.client->connect(o_.host, o_.port, o_.connect_timeout, &error, name)) {
        b.alive = true;
      } else {
        note_connect_failure(error);
      }
    });
  }

  void note_connect_failure(const std::string& error) {
    if (tally_.connect_failures++ == 0) tally_.first_connect_error = error;
  }

  // Sweeps the bots once per frame until `deadline` or `done()`: each bot's arrivals, then `act`.
  template <class Act, class Done>
  void run_frames(Act&& act, Clock::time_point deadline, Done&& done) {
    for (;;) {
      const Clock::time_point frame_start = Clock::now();
      if (frame_start >= deadline || done()) return;
      for_mine([&](Bot& b) {
        if (!b.alive) return;
        receive(b);
        if (!b.alive) return;
        refill(b, frame_start);
        act(b, frame_start);
      });
      std::this_thread::sleep_until(frame_start + o_.frame);
    }
  }

  void receive(Bot& b) {
    const PollResult& r = b.client->poll();
    for (const RequestResult& result : r.results) {
      const auto it = b.pending.find(result.request_id);
      if (it == b.pending.end()) continue;
      const Bot::Pending asked = it->second;
      const RequestKind kind = asked.kind;
      b.pending.erase(it);
      if (kind == RequestKind::Create && result.code == ResultCode::RateLimited) {
        b.retry_cells.push_back(asked.cell);  // the server shed load: back off (the pacing) and send it again
        ++tally_.create_retries;
        continue;
      }
      if (!result.ok()) {
        const auto code = static_cast<size_t>(result.code);
        ++tally_.errors[std::min(code, tally_.errors.size() - 1)];
        continue;
      }
      if (kind == RequestKind::Create) {
        b.bodies.push_back(result.id);
        ++tally_.spawned;
      } else if (kind == RequestKind::Destroy) {
        ++tally_.destroyed;
      }
    }
    if (in_push_) {
      for (const PongInfo& p : r.pongs) tally_.rtt_ms.push_back(std::chrono::duration<double, std::milli>(p.rtt).count());
    }
    if (r.server_disconnected) {
      b.alive = false;
      ++tally_.disconnects;
      ++tally_.disconnect_reasons["server: " + r.disconnect_reason];
    }
  }

  void refill(Bot& b, Clock::time_point now) {
    if (b.credit_at != Clock::time_point{}) {
      b.credit = std::min(kRequestBurst, b.credit + o_.max_requests_per_second * Seconds(now - b.credit_at).count());
    }
    b.credit_at = now;
  }

  // Records a sent request (id 0: the client has no session any more).
  void sent(Bot& b, uint32_t request_id, RequestKind kind, uint32_t cell = 0) {
    b.credit -= 1.0;
    if (request_id == 0) {
      b.alive = false;
      ++tally_.disconnects;
      ++tally_.disconnect_reasons["the client had no session when sending"];
      return;
    }
    b.pending.emplace(request_id, Bot::Pending{kind, cell});
    ++tally_.requests_sent;
  }

  void start_spawn() {
    if (o_.interest_radius <= 0) return;
    const auto total = static_cast<uint32_t>(std::max(s_.report->bodies_targeted, 1));
    for_mine([&](Bot& b) {
      if (!b.alive || b.target == 0) return;
      Vec3 sum;
      for (uint32_t i = 0; i < b.target; ++i) sum += cell_position(o_, b.first_cell + i, total);
      sent(b, b.client->set_interest_sphere(sum * (1.0f / static_cast<float>(b.target)), o_.interest_radius),
           RequestKind::Interest);
    });
  }

  void spawn(Bot& b, Clock::time_point) {
    const auto total = static_cast<uint32_t>(std::max(s_.report->bodies_targeted, 1));
    while (b.alive && b.credit >= 1.0 && (!b.retry_cells.empty() || b.creates_sent < b.target)) {
      uint32_t cell;
      if (!b.retry_cells.empty()) {
        cell = b.retry_cells.back();
        b.retry_cells.pop_back();
      } else {
        cell = b.first_cell + b.creates_sent++;
      }
      ObjectDesc desc;
      desc.kind = BodyKind::Dynamic;
      desc.shape = ShapeKind::Box;
      desc.dims = {kBodyHalfExtent, kBodyHalfExtent, kBodyHalfExtent};
      desc.position = cell_position(o_, cell, total);
      desc.mass = kBodyMass;
      sent(b, b.client->create_object(desc), RequestKind::Create, cell);
    }
  }

  void start_push() {
    in_push_ = true;
    tally_.cpu_at_push_start = this_thread_cpu_seconds();
    for_mine([this](Bot& b) {
      const ClientStats& st = b.client->stats();
      b.bytes_in_mark = st.bytes_in;
      b.bytes_out_mark = st.bytes_out;
      b.snapshots_mark = st.snapshots_completed;
      b.relayed_mark = st.relayed_inputs;
      if (b.bodies.empty()) return;
      // Every body once per interval, the bots' schedules staggered across the first step.
      b.push_step = to_duration(o_.push_interval_s / static_cast<double>(b.bodies.size()));
      b.next_push = s_.push_start + b.push_step * (b.index % 64) / 64;
      b.next_ping = s_.push_start + to_duration(o_.ping_interval_s * (b.index % 64) / 64.0);
    });
  }

  void push(Bot& b, Clock::time_point now) {
    if (now >= b.next_ping) {
      b.client->ping();
      b.next_ping += to_duration(o_.ping_interval_s);
    }
    if (b.bodies.empty()) return;
    if (o_.inputs) {
      const std::optional<uint64_t> tick = b.client->input_tick(now);
      if (tick && *tick > b.last_input_tick) {
        const float a = static_cast<float>(b.index) * 2.3999632f;  // the golden angle: spread directions
        b.client->send_input(b.bodies.front(), InputMode::Force, Vec3{std::cos(a), 0.0f, std::sin(a)} * 0.5f, {}, *tick);
        b.last_input_tick = *tick;
        ++tally_.inputs;
      }
    }
    // A bot that fell more than an interval behind skips ahead rather than bursting.
    if (now - b.next_push > to_duration(o_.push_interval_s)) b.next_push = now;
    while (b.alive && now >= b.next_push && b.credit >= 1.0) {
      const ObjectID id = b.bodies[b.push_next];
      b.push_next = (b.push_next + 1) % b.bodies.size();
      b.next_push += b.push_step;
      tally_.rng = tally_.rng * 6364136223846793005ull + 1442695040888963407ull;
      const double angle = kTwoPi * static_cast<double>(tally_.rng >> 11) * 0x1.0p-53;
      const float dv = o_.push_speed;
      const Vec3 impulse = Vec3{static_cast<float>(std::cos(angle)), 0.0f, static_cast<float>(std::sin(angle))} *
                           (dv * kBodyMass);
      sent(b, b.client->apply_impulse(id, impulse), RequestKind::Push);
      ++tally_.pushes;
    }
  }

  void end_push() {
    in_push_ = false;
    tally_.cpu_push_s = this_thread_cpu_seconds() - tally_.cpu_at_push_start;
    for_mine([this](Bot& b) {
      const ClientStats& st = b.client->stats();
      tally_.bytes_in += st.bytes_in - b.bytes_in_mark;
      tally_.bytes_out += st.bytes_out - b.bytes_out_mark;
      tally_.snapshots += st.snapshots_completed - b.snapshots_mark;
      tally_.relayed_inputs += st.relayed_inputs - b.relayed_mark;
      tally_.snapshots_rejected += st.snapshots_rejected;
    });
  }

  void destroy(Bot& b, Clock::time_point) {
    while (b.alive && b.credit >= 1.0 && b.destroys_sent < b.bodies.size()) {
      sent(b, b.client->destroy(b.bodies[b.destroys_sent++]), RequestKind::Destroy);
    }
  }

  Shared& s_;
  const LoadOptions& o_;
  std::barrier<Advance>& barrier_;
  int t_;
  Tally& tally_;
  bool in_push_ = false;
};

}  // namespace

LoadReport run_load(const LoadOptions& options, const InprocServer* server) {
  LoadReport report;
  report.server = server ? "inproc" : options.host + ":" + std::to_string(options.port);
  report.clients = options.clients;
  report.threads = options.threads;
  report.bodies_requested = options.bodies;
  report.interest_radius = options.interest_radius;
  report.frame_ms = options.frame.count();
  report.bot_nice = options.bot_nice;

  Shared shared(options, server);
  shared.report = &report;
  shared.bots.resize(static_cast<size_t>(std::max(options.clients, 0)));
  for (size_t i = 0; i < shared.bots.size(); ++i) shared.bots[i].index = static_cast<int>(i);
  shared.started = Clock::now();
  shared.deadline = shared.started + to_duration(options.phase_timeout_s);

  const int threads = std::max(1, options.threads);
  std::barrier<Advance> barrier(threads, Advance{&shared});
  std::vector<Tally> tallies(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  workers.reserve(tallies.size());
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&shared, &barrier, &tallies, t] { BotThread(shared, barrier, t, tallies[static_cast<size_t>(t)]).run(); });
  }

  // This thread samples the in-process server's stats during the push phase and prints progress.
  std::vector<double> tick_p50, tick_p99, awake;
  Clock::time_point next_sample{}, next_progress{};
  bool sampling = false;
  while (shared.phase.load() != static_cast<int>(Phase::Done)) {
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
    const Clock::time_point now = Clock::now();
    const int phase = shared.phase.load();
    if (phase != static_cast<int>(Phase::Push)) {
      if (phase > static_cast<int>(Phase::Push)) sampling = false;
      continue;
    }
    if (!sampling) {
      sampling = true;
      // Skip the stats window that straddles the spawn phase.
      next_sample = shared.push_start + std::chrono::duration_cast<Clock::duration>(kSampleEvery * 1.5);
      next_progress = shared.push_start + std::chrono::duration_cast<Clock::duration>(kProgressEvery);
    }
    if (server && now >= next_sample && now < shared.push_end) {
      const server::ServerStats& st = server->stats();
      if (const uint64_t p50 = st.tick_ns_p50.load(std::memory_order_relaxed)) tick_p50.push_back(1e-6 * static_cast<double>(p50));
      if (const uint64_t p99 = st.tick_ns_p99.load(std::memory_order_relaxed)) tick_p99.push_back(1e-6 * static_cast<double>(p99));
      awake.push_back(static_cast<double>(st.awake.load(std::memory_order_relaxed)));
      next_sample += std::chrono::duration_cast<Clock::duration>(kSampleEvery);
    }
    if (options.progress && now >= next_progress && now < shared.push_end) {
      const double t = Seconds(now - shared.push_start).count();
      if (server) {
        const server::ServerStats& st = server->stats();
        std::fprintf(stderr, "[impulse-loadgen] %5.1f s: server tick p50 %.2f ms p99 %.2f ms, %u objects, %u awake, %u clients\n",
                     t, 1e-6 * static_cast<double>(st.tick_ns_p50.load()), 1e-6 * static_cast<double>(st.tick_ns_p99.load()),
                     st.objects.load(), st.awake.load(), st.clients.load());
      } else {
        std::fprintf(stderr, "[impulse-loadgen] %5.1f s of %.0f s\n", t, options.seconds);
      }
      next_progress += std::chrono::duration_cast<Clock::duration>(kProgressEvery);
    }
  }
  for (std::thread& w : workers) w.join();

  // Merge.
  std::vector<double> rtt;
  for (const Tally& t : tallies) {
    for (size_t i = 0; i < report.errors.size(); ++i) report.errors[i] += t.errors[i];
    report.requests_sent += t.requests_sent;
    report.pushes += t.pushes;
    report.inputs += t.inputs;
    report.create_retries += t.create_retries;
    report.disconnects += t.disconnects;
    report.bodies_spawned += t.spawned;
    report.bodies_destroyed += t.destroyed;
    report.connect_failures += t.connect_failures;
    if (report.first_connect_error.empty()) report.first_connect_error = t.first_connect_error;
    rtt.insert(rtt.end(), t.rtt_ms.begin(), t.rtt_ms.end());
    for (const auto& [reason, n] : t.disconnect_reasons) report.disconnect_reasons[reason] += n;
    report.bots_cpu_s += t.cpu_push_s;
    report.bytes_in_per_client_per_s += static_cast<double>(t.bytes_in);
    report.bytes_out_per_client_per_s += static_cast<double>(t.bytes_out);
    report.snapshots += t.snapshots;
    report.relayed_inputs += t.relayed_inputs;
    report.snapshots_rejected += t.snapshots_rejected;
  }
  for (const uint64_t n : report.errors) report.error_total += n;
  report.clients_connected = report.clients - report.connect_failures;
  report.seconds = Seconds(shared.push_stopped - shared.push_start).count();
  report.connect_s = Seconds(shared.spawn_start - shared.started).count();
  report.spawn_s = Seconds(shared.settle_start - shared.spawn_start).count();
  report.settle_s = Seconds(shared.push_start - shared.settle_start).count();
  report.destroy_s = Seconds(shared.destroy_done - shared.push_stopped).count();
  const double client_seconds = static_cast<double>(std::max(report.clients_connected, 1)) * std::max(report.seconds, 1e-9);
  report.bytes_in_per_client_per_s /= client_seconds;
  report.bytes_out_per_client_per_s /= client_seconds;
  report.rtt_samples = rtt.size();
  report.rtt_ms_p50 = percentile(rtt, 50);
  report.rtt_ms_p99 = percentile(rtt, 99);
  report.process_cpu_s = shared.process_cpu_end - shared.process_cpu_start;
  if (shared.machine_start && shared.machine_end && shared.machine_end->total > shared.machine_start->total) {
    report.steal_percent = 100.0 * static_cast<double>(shared.machine_end->steal - shared.machine_start->steal) /
                           static_cast<double>(shared.machine_end->total - shared.machine_start->total);
  }
  if (server) {
    if (shared.server_cpu_start && shared.server_cpu_end) {
      report.server_thread_cpu_s = *shared.server_cpu_end - *shared.server_cpu_start;
    }
    // The server's tick thread and its worker pool: everything in the process but the bots.
    report.server_cpu_s = std::max(0.0, report.process_cpu_s - report.bots_cpu_s);
    // Every wake-up of the push phase pooled (the histogram's difference across it).
    TickHistogram ticks{};
    for (size_t i = 0; i < ticks.size(); ++i) ticks[i] = shared.ticks_end[i] - shared.ticks_start[i];
    report.server_tick_ms_p50 = server::tick_time_quantile(ticks, 0.50);
    report.server_tick_ms_p99 = server::tick_time_quantile(ticks, 0.99);
    report.server_tick_ms_max = server::tick_time_quantile(ticks, 1.0);
    for (const uint64_t c : ticks) report.server_wakeups += c;
    report.server_tick_ms_p99_median = percentile(tick_p99, 50);
    report.server_tick_ms_p99_worst_window = tick_p99.empty() ? 0.0 : *std::max_element(tick_p99.begin(), tick_p99.end());
    report.server_steps_dropped = shared.steps_dropped_end - shared.steps_dropped_start;
    const double ms_per_s = 1e-6 / std::max(report.seconds, 1e-9);
    report.server_step_ms_per_s = static_cast<double>(shared.stage_ns_end[0] - shared.stage_ns_start[0]) * ms_per_s;
    report.server_events_ms_per_s = static_cast<double>(shared.stage_ns_end[1] - shared.stage_ns_start[1]) * ms_per_s;
    report.server_snapshots_ms_per_s = static_cast<double>(shared.stage_ns_end[2] - shared.stage_ns_start[2]) * ms_per_s;
    double sum = 0;
    for (const double a : awake) sum += a;
    report.awake_avg = awake.empty() ? 0.0 : sum / static_cast<double>(awake.size());
  }
  return report;
}

namespace {

std::string code_name(size_t code) {
  if (code + 1 < ErrorCounts{}.size()) {
    const std::string name = to_string(static_cast<ResultCode>(code));
    if (name != "unknown") return name;
  }
  return "unknown";
}

template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

std::string to_json_line(const LoadReport& r) {
  nlohmann::ordered_json j;
  j["server"] = r.server;
  j["clients"] = r.clients;
  j["clients_connected"] = r.clients_connected;
  j["connect_failures"] = r.connect_failures;
  if (!r.first_connect_error.empty()) j["first_connect_error"] = r.first_connect_error;
  j["bodies_requested"] = r.bodies_requested;
  j["bodies_targeted"] = r.bodies_targeted;
  j["bodies_spawned"] = r.bodies_spawned;
  j["bodies_destroyed"] = r.bodies_destroyed;
  j["quota_per_client"] = r.quota_per_client;
  if (!r.shortfall.empty()) j["shortfall"] = r.shortfall;
  j["seconds"] = r.seconds;
  j["connect_s"] = r.connect_s;
  j["spawn_s"] = r.spawn_s;
  j["settle_s"] = r.settle_s;
  j["destroy_s"] = r.destroy_s;
  j["tick_hz"] = r.tick_hz;
  j["snapshot_hz"] = r.snapshot_hz;
  j["interest_radius"] = r.interest_radius;
  j["threads"] = r.threads;
  j["server_tick_ms_p50"] = or_null(r.server_tick_ms_p50);
  j["server_tick_ms_p99"] = or_null(r.server_tick_ms_p99);
  j["server_tick_ms_p99_median"] = or_null(r.server_tick_ms_p99_median);
  j["server_tick_ms_p99_worst_window"] = or_null(r.server_tick_ms_p99_worst_window);
  j["server_tick_ms_max"] = or_null(r.server_tick_ms_max);
  j["server_wakeups"] = r.server_wakeups;
  j["server_steps_dropped"] = or_null(r.server_steps_dropped);
  j["server_cpu_s"] = or_null(r.server_cpu_s);
  j["server_thread_cpu_s"] = or_null(r.server_thread_cpu_s);
  j["server_step_ms_per_s"] = or_null(r.server_step_ms_per_s);
  j["server_events_ms_per_s"] = or_null(r.server_events_ms_per_s);
  j["server_snapshots_ms_per_s"] = or_null(r.server_snapshots_ms_per_s);
  const double seconds = std::max(r.seconds, 1e-9);
  const double clients = static_cast<double>(std::max(r.clients_connected, 1));
  j["server_cpu_cores"] = r.server_cpu_s ? nlohmann::ordered_json(*r.server_cpu_s / seconds) : nlohmann::ordered_json(nullptr);
  j["server_cpu_ms_per_client_per_s"] =
      r.server_cpu_s ? nlohmann::ordered_json(1000.0 * *r.server_cpu_s / seconds / clients) : nlohmann::ordered_json(nullptr);
  j["bots_cpu_cores"] = r.bots_cpu_s / seconds;
  j["process_cpu_cores"] = r.process_cpu_s / seconds;
  j["cpu_method"] = r.server_cpu_s ? "server: process minus bots (its tick thread and worker pool; server_thread_cpu_s: "
                                     "the tick thread's clock, pthread_getcpuclockid); bots: their threads' "
                                     "CLOCK_THREAD_CPUTIME_ID; process: getrusage(RUSAGE_SELF)"
                                   : "external server: not measured here; bots: their threads' CLOCK_THREAD_CPUTIME_ID";
  j["bytes_in_per_client_per_s"] = r.bytes_in_per_client_per_s;
  j["bytes_out_per_client_per_s"] = r.bytes_out_per_client_per_s;
  j["bytes_counted"] = "UDP payload, without IP/UDP headers";
  j["rtt_ms_p50"] = r.rtt_ms_p50;
  j["rtt_ms_p99"] = r.rtt_ms_p99;
  j["rtt_samples"] = r.rtt_samples;
  j["bot_frame_ms"] = r.frame_ms;
  j["bot_nice"] = r.bot_nice;
  j["steal_percent"] = or_null(r.steal_percent);
  j["requests_sent"] = r.requests_sent;
  j["pushes"] = r.pushes;
  j["inputs"] = r.inputs;
  j["relayed_inputs"] = r.relayed_inputs;
  j["create_retries"] = r.create_retries;
  j["snapshots_per_client_per_s"] = static_cast<double>(r.snapshots) / clients / seconds;
  j["snapshots_rejected"] = r.snapshots_rejected;
  j["disconnects"] = r.disconnects;
  j["disconnect_reasons"] = r.disconnect_reasons;
  j["error_total"] = r.error_total;
  nlohmann::ordered_json errors = nlohmann::ordered_json::object();
  for (size_t i = 0; i < r.errors.size(); ++i) {
    if (r.errors[i] != 0) errors[code_name(i)] = r.errors[i];
  }
  j["errors"] = std::move(errors);
  j["awake_avg"] = or_null(r.awake_avg);
  j["objects"] = or_null(r.objects);
  if (r.server_tick_ms_p99) j["target_tick_p99_met"] = *r.server_tick_ms_p99 <= 1000.0 / 60.0;
  return j.dump();
}

void print_human(std::FILE* out, const LoadReport& r) {
  const double seconds = std::max(r.seconds, 1e-9);
  const double clients = static_cast<double>(std::max(r.clients_connected, 1));
  std::fprintf(out, "impulse-loadgen against %s: %d/%d clients connected (%d threads), %d/%d bodies spawned, %.1f s measured\n",
               r.server.c_str(), r.clients_connected, r.clients, r.threads, r.bodies_spawned, r.bodies_requested, r.seconds);
  std::fprintf(out, "  phases: connect %.1f s, spawn %.1f s, settle %.1f s, push %.1f s, destroy %.1f s (%d destroyed)\n",
               r.connect_s, r.spawn_s, r.settle_s, r.seconds, r.destroy_s, r.bodies_destroyed);
  if (!r.shortfall.empty()) std::fprintf(out, "  bodies requested cannot be reached: %s\n", r.shortfall.c_str());
  if (r.connect_failures > 0) {
    std::fprintf(out, "  %d connect failures; the first: %s\n", r.connect_failures, r.first_connect_error.c_str());
  }
  std::fprintf(out, "  server: %d Hz ticks, %d Hz snapshots; interest %s\n", r.tick_hz, r.snapshot_hz,
               r.interest_radius > 0 ? ("sphere r = " + std::to_string(r.interest_radius) + " m").c_str() : "whole world");
  if (r.server_tick_ms_p50) {
    std::fprintf(out, "  server tick over %llu wake-ups: p50 %.2f ms, p99 %.2f ms, max %.2f ms (1 s windows' p99: median %.3f ms, "
                 "worst %.3f ms), %llu steps dropped; %.1f awake of %u objects on average\n",
                 static_cast<unsigned long long>(r.server_wakeups), r.server_tick_ms_p50.value_or(0.0), *r.server_tick_ms_p99,
                 r.server_tick_ms_max.value_or(0.0), r.server_tick_ms_p99_median.value_or(0.0),
                 r.server_tick_ms_p99_worst_window.value_or(0.0),
                 static_cast<unsigned long long>(*r.server_steps_dropped), *r.awake_avg, *r.objects);
    std::fprintf(out, "  target p99 tick <= 16.6 ms: %s\n", *r.server_tick_ms_p99 <= 1000.0 / 60.0 ? "met" : "NOT met");
    std::fprintf(out, "  server thread per second: steps %.1f ms, events %.1f ms, snapshots %.1f ms\n",
                 *r.server_step_ms_per_s, *r.server_events_ms_per_s, *r.server_snapshots_ms_per_s);
  } else {
    std::fprintf(out, "  server tick: not visible from a client (run with --server inproc for tick and CPU figures)\n");
  }
  if (r.server_cpu_s) {
    std::fprintf(out, "  server CPU (process minus bots: tick thread and worker pool): %.3f cores, %.3f ms per client per "
                 "second; tick thread alone %.3f cores\n", *r.server_cpu_s / seconds, 1000.0 * *r.server_cpu_s / seconds / clients,
                 r.server_thread_cpu_s.value_or(0.0) / seconds);
  }
  std::fprintf(out, "  bots CPU: %.3f cores (nice %d); whole process: %.3f cores\n", r.bots_cpu_s / seconds, r.bot_nice,
               r.process_cpu_s / seconds);
  if (r.steal_percent) {
    std::fprintf(out, "  machine: %.1f %% of its CPU time stolen by the hypervisor during the push phase (/proc/stat)\n",
                 *r.steal_percent);
  }
  std::fprintf(out, "  per client (UDP payload, no IP/UDP headers): in %.0f B/s (%.1f kbit/s), out %.0f B/s (%.1f kbit/s); "
               "%.1f snapshots/s\n",
               r.bytes_in_per_client_per_s, 8e-3 * r.bytes_in_per_client_per_s, r.bytes_out_per_client_per_s,
               8e-3 * r.bytes_out_per_client_per_s, static_cast<double>(r.snapshots) / clients / seconds);
  std::fprintf(out, "  RTT (pings, including up to one bot frame of %lld ms before the pong is read): p50 %.3f ms, "
               "p99 %.3f ms over %llu samples\n",
               static_cast<long long>(r.frame_ms), r.rtt_ms_p50, r.rtt_ms_p99, static_cast<unsigned long long>(r.rtt_samples));
  std::fprintf(out, "  requests %llu (pushes %llu); inputs %llu (others' relayed to the bots %llu); errors %llu",
               static_cast<unsigned long long>(r.requests_sent), static_cast<unsigned long long>(r.pushes),
               static_cast<unsigned long long>(r.inputs), static_cast<unsigned long long>(r.relayed_inputs),
               static_cast<unsigned long long>(r.error_total));
  for (size_t i = 0; i < r.errors.size(); ++i) {
    if (r.errors[i] != 0) std::fprintf(out, " %s=%llu", code_name(i).c_str(), static_cast<unsigned long long>(r.errors[i]));
  }
  std::fprintf(out, "; creates retried after RateLimited %llu; sessions lost %llu; snapshots rejected %llu\n",
               static_cast<unsigned long long>(r.create_retries), static_cast<unsigned long long>(r.disconnects),
               static_cast<unsigned long long>(r.snapshots_rejected));
  for (const auto& [reason, n] : r.disconnect_reasons) {
    std::fprintf(out, "    %llu x %s\n", static_cast<unsigned long long>(n), reason.c_str());
  }
}

}  // namespace impulse::tools
