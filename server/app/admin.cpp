// The admin endpoint: the metrics text from a published snapshot, health from atomics, and the
// routes that the HTTP front (admin_http.h) serves them on.
#include "server/app/admin.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "server/app/log_format.h"
#include "shared/version.h"
#include "shared/wire/codec.h"

namespace impulse::server {
namespace {

// What one hostile or broken scraper may cost (server/app/admin_http.h): 64 connections open
// (the oldest still reading is closed to admit a new one, so a probe always gets in), 8 KiB of
// request head each (512 KiB in all), and 2 s from accept to the last byte written. No body is
// ever read, and one thread serves every connection, so slow ones never hold a worker.
constexpr size_t kMaxConnections = 64;
constexpr size_t kMaxHeaderBytes = 8 * 1024;
constexpr std::chrono::milliseconds kRequestDeadline{2000};

constexpr const char* kPlainText = "text/plain; charset=utf-8";
constexpr const char* kJson = "application/json";

// GET /objects: how long a worker waits for the tick thread's answer (it comes within one
// wake-up, 1/tick_hz, unless the loop is stalled), and for its turn when another question is
// being answered (short, so two clicks never hold both workers and starve the probes).
constexpr std::chrono::milliseconds kObjectAnswerTimeout{500};
constexpr std::chrono::milliseconds kObjectTurnTimeout{100};


int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double seconds_of_ns(uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

// A decimal unsigned number making up all of `text`.
bool parse_u64(std::string_view text, uint64_t* value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

// --- Histograms and the snapshot hand-over -----------------------------------------------------

metrics::Histogram make_tick_histogram() {
  // 16.7 ms is one 60 Hz period: a wake-up above it makes the next one late.
  return metrics::Histogram{0.0005, 0.001, 0.002, 0.004, 0.006, 0.008, 0.010, 0.0125, 0.0167, 0.025, 0.033, 0.050, 0.100, 0.250, 1.0};
}

metrics::Histogram make_rtt_histogram() {
  return metrics::Histogram{0.001, 0.005, 0.010, 0.020, 0.040, 0.060, 0.080, 0.100, 0.150, 0.200, 0.300, 0.500, 1.0, 2.0};
}

bool MetricsExchange::publish(const MetricsSnapshot& s) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // a scrape is copying: the next wake-up publishes
  latest_ = s;
  return true;
}

MetricsSnapshot MetricsExchange::read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

// --- GET /clients ----------------------------------------------------------------------------------

std::string render_clients(std::span<const ClientFigures> clients, bool with_names) {
  std::string out = "[";
  for (size_t i = 0; i < clients.size(); ++i) {
    const ClientFigures& c = clients[i];
    out += i == 0 ? "\n  " : ",\n  ";
    out += fmt::format("{{\"client_id\":{}", c.client_id);
    if (with_names) {
      out += ",\"name\":\"";
      append_json_escaped(out, c.name);
      out += '"';
    }
    out += fmt::format(",\"connected_s\":{:.1f},\"rtt_ms\":{},\"received_bytes\":{},\"sent_bytes\":{}}}",
                       c.connected_s, c.rtt_ms < 0 ? std::string("null") : fmt::format("{:.2f}", c.rtt_ms),
                       c.received_bytes, c.sent_bytes);
  }
  out += clients.empty() ? "]\n" : "\n]\n";
  return out;
}

void ClientsExchange::publish(std::string document) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) document_.swap(document);
}

std::string ClientsExchange::read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return document_;
}

// --- Object queries (GET /objects/<id>) --------------------------------------------------------

ObjectQueryBox::Outcome ObjectQueryBox::ask(uint32_t index, uint32_t generation, bool has_generation,
                                            std::chrono::milliseconds timeout, Answer* out) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::timed_mutex> turn(askers_, std::defer_lock);
  if (!turn.try_lock_for(std::min(timeout, kObjectTurnTimeout))) return Outcome::Busy;
  // Holding the turn, the box is idle: every asker leaves it so, answered or not.
  index_ = index;
  generation_ = generation;
  has_generation_ = has_generation;
  state_.store(kAsked, std::memory_order_release);
  const auto deadline = start + timeout;
  // Bounded: until the deadline, then at most the few instructions of an answer being written.
  for (;;) {
    const uint32_t s = state_.load(std::memory_order_acquire);
    if (s == kAnswered) break;
    if (s == kAsked && std::chrono::steady_clock::now() >= deadline) {
      uint32_t expected = kAsked;
      // The tick thread may take it in the same instant: then its answer is awaited instead.
      if (state_.compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel)) return Outcome::Timeout;
      continue;
    }
    // Polling, not synchronisation: the tick thread may not wait on a condition variable's mutex.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *out = answer_;
  state_.store(kIdle, std::memory_order_release);
  return Outcome::Answered;
}

bool ObjectQueryBox::take(uint32_t* index, uint32_t* generation, bool* has_generation) {
  uint32_t expected = kAsked;
  if (state_.load(std::memory_order_relaxed) != kAsked ||
      !state_.compare_exchange_strong(expected, kAnswering, std::memory_order_acq_rel)) {
    return false;
  }
  *index = index_;
  *generation = generation_;
  *has_generation = has_generation_;
  return true;
}

void ObjectQueryBox::answer(const Answer& a) {
  answer_ = a;
  state_.store(kAnswered, std::memory_order_release);
}

bool parse_object_id(std::string_view text, uint32_t* index, uint32_t* generation, bool* has_generation) {
  const auto parse_u32 = [](std::string_view digits, uint32_t* value) {
    if (digits.empty() || digits.size() > 10) return false;
    for (const char c : digits) {
      if (c < '0' || c > '9') return false;
    }
    uint64_t v = 0;
    if (!parse_u64(digits, &v) || v > UINT32_MAX) return false;
    *value = static_cast<uint32_t>(v);
    return true;
  };
  const size_t colon = text.find(':');
  *has_generation = colon != std::string_view::npos;
  *generation = 0;
  if (!*has_generation) return parse_u32(text, index);
  return parse_u32(text.substr(0, colon), index) && parse_u32(text.substr(colon + 1), generation);
}

std::string render_object_json(const ObjectQueryBox::Answer& a) {
  std::string out = fmt::format(R"({{"id":"{}:{}","index":{},"generation":{},"owner":)", a.index, a.generation, a.index,
                                a.generation);
  if (a.owner == 0) {
    out += R"(null,"owner_name":null,"owner_connected":false)";
  } else {
    out += fmt::format(R"({},"owner_name":)", a.owner);
    if (a.owner_connected && a.owner_name_shown) {
      out += '"';
      append_json_escaped(out, a.owner_name);  // a client's name: control characters escaped
      out += '"';
    } else {
      out += "null";
    }
    out += a.owner_connected ? R"(,"owner_connected":true)" : R"(,"owner_connected":false)";
  }
  out += a.shared ? R"(,"shared":true})" : R"(,"shared":false})";
  out += '\n';
  return out;
}

// --- Health ------------------------------------------------------------------------------------

Verdict check_health(const HealthState& h, int64_t now_ns, double stall_seconds) {
  if (h.draining.load(std::memory_order_acquire)) return {200, "ok: draining (shutting down on purpose)"};
  const int64_t last = h.last_progress_ns.load(std::memory_order_acquire);
  if (last == 0) return {503, "stalled: the tick loop has not run yet"};
  const double age = static_cast<double>(now_ns - last) * 1e-9;
  if (age > stall_seconds) {
    return {503, fmt::format("stalled: the last tick completed {:.3f} s ago (threshold {:g} s, --health-stall-seconds)",
                             age, stall_seconds)};
  }
  return {200, fmt::format("ok: the last tick completed {:.3f} s ago", age < 0 ? 0.0 : age)};
}

Verdict check_ready(const HealthState& h) {
  if (h.draining.load(std::memory_order_acquire)) return {503, "not ready: draining (shutting down)"};
  if (!h.ready.load(std::memory_order_acquire)) return {503, "not ready: starting (scene, socket or tick loop not up yet)"};
  return {200, "ready"};
}

// --- Process figures ---------------------------------------------------------------------------

ProcessFigures read_process_figures() {
  ProcessFigures p;
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
    p.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    p.cpu_ok = true;
  }
  const long page = sysconf(_SC_PAGESIZE);
  if (std::ifstream statm("/proc/self/statm"); statm && page > 0) {
    uint64_t size_pages = 0, resident_pages = 0;
    if (statm >> size_pages >> resident_pages) {
      p.virtual_bytes = size_pages * static_cast<uint64_t>(page);
      p.resident_bytes = resident_pages * static_cast<uint64_t>(page);
      p.memory_ok = true;
    }
  }
  // Start time: field 22 of /proc/self/stat (clock ticks after boot) plus btime of /proc/stat.
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  std::ifstream self_stat("/proc/self/stat");
  std::ifstream machine_stat("/proc/stat");
  if (self_stat && machine_stat && ticks_per_s > 0) {
    std::string line;
    std::getline(self_stat, line);
    const size_t comm_end = line.rfind(')');  // the command name may hold spaces and parentheses
    uint64_t start_ticks = 0;
    bool have_start = false;
    if (comm_end != std::string::npos) {
      std::istringstream fields(line.substr(comm_end + 1));
      std::string field;
      // After ")": field 3 (state) is the first; field 22 is the 20th.
      for (int i = 3; i <= 22 && (fields >> field); ++i) {
        if (i == 22) have_start = parse_u64(field, &start_ticks);
      }
    }
    uint64_t boot_time = 0;
    bool have_boot = false;
    while (!have_boot && std::getline(machine_stat, line)) {
      if (line.rfind("btime ", 0) == 0) have_boot = parse_u64(line.substr(6), &boot_time);
    }
    if (have_start && have_boot) {
      p.start_time_seconds = static_cast<double>(boot_time) + static_cast<double>(start_ticks) / static_cast<double>(ticks_per_s);
      p.start_ok = true;
    }
  }
  std::error_code ec;
  uint64_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  if (!ec) {
    p.open_fds = fds > 0 ? fds - 1 : 0;  // less the descriptor of the listing itself
    p.fds_ok = true;
  }
  return p;
}

// --- /metrics ------------------------------------------------------------------------------------

std::string render_metrics(const MetricsSnapshot& s, const ProcessFigures& p) {
  metrics::ExpositionWriter w;
  w.family("impulse_build_info", "gauge", "Always 1: the server's version, git revision and protocol, as labels.");
  const std::string protocol = std::to_string(wire::kProtocolVersion);
  w.sample("impulse_build_info", {{"version", IMPULSE_VERSION}, {"git", IMPULSE_GIT_DESCRIBE}, {"protocol", protocol}},
           1.0);
  w.histogram("impulse_tick_duration_seconds",
              "Wall time of each server wake-up that ran steps: apply requests, step, events, snapshots, sends.",
              s.tick_seconds);
  w.counter("impulse_ticks_total", "Physics steps taken (in replay serving: recorded ticks played).", s.steps);
  w.gauge("impulse_world_tick", "The world's current tick.", static_cast<double>(s.world_tick));
  w.counter("impulse_dropped_steps_total",
            "Steps discarded because a wake-up was due more than --max-steps-per-frame steps (the server fell behind).",
            s.steps_dropped);
  w.family("impulse_tick_stage_seconds_total", "counter", "Wall time of the server thread spent per stage of the tick.");
  w.sample("impulse_tick_stage_seconds_total", {{"stage", "steps"}}, seconds_of_ns(s.step_ns - std::min(s.record_ns, s.step_ns)));
  w.sample("impulse_tick_stage_seconds_total", {{"stage", "record"}}, seconds_of_ns(s.record_ns));
  w.sample("impulse_tick_stage_seconds_total", {{"stage", "events"}}, seconds_of_ns(s.events_ns));
  w.sample("impulse_tick_stage_seconds_total", {{"stage", "snapshots"}}, seconds_of_ns(s.snapshots_ns));

  w.gauge("impulse_clients", "Client sessions.", s.clients);
  w.gauge("impulse_max_clients", "Sessions at most (--max-clients).", s.max_clients);
  w.gauge("impulse_bodies", "Bodies in the world, static ones included.", s.bodies);
  w.gauge("impulse_awake_bodies", "Awake (simulated) bodies.", s.awake);
  w.counter("impulse_bodies_removed_non_finite_total", "Bodies the step's guard removed because their state was not finite.",
            s.bodies_removed_non_finite);
  w.counter("impulse_bodies_restored_non_finite_total",
            "Bodies the step put back where it found them (with their contact group) because their solve was not finite.",
            s.bodies_restored_non_finite);
  w.counter("impulse_snapshots_held_silent_total",
            "Snapshots not sent because their session had sent nothing for 2 s (they resume with its next datagram).",
            s.snapshots_held_silent);
  w.counter("impulse_snapshots_held_throttled_total",
            "Snapshots not sent because their session's sends were reduced: its account was over its share of the tick (7 of every 8), "
            "or its snapshots cost more than its share of a wake-up over 75% of the tick (up to 7 of every 8).",
            s.snapshots_held_throttled);
  w.counter("impulse_bodies_put_to_sleep_over_budget_total",
            "Bodies put to sleep because their owner's bodies cost more than its share of a step over --tick-budget-ms.",
            s.bodies_put_to_sleep_over_budget);

  w.counter("impulse_datagrams_received_total", "UDP datagrams received.", s.datagrams_in);
  w.counter("impulse_received_bytes_total", "UDP payload bytes received.", s.bytes_in);
  w.counter("impulse_datagrams_sent_total", "UDP datagrams sent.", s.datagrams_out);
  w.counter("impulse_sent_bytes_total", "UDP payload bytes sent.", s.bytes_out);
  w.counter("impulse_datagrams_invalid_total", "Received datagrams that failed verification (size, identifier, schema, version, direction).",
            s.datagrams_invalid);
  w.counter("impulse_datagrams_unauthenticated_total",
            "Received datagrams that failed authentication (bad seal, replayed, unsealed at a session's address, sealed without a session).",
            s.datagrams_unauthenticated);
  w.family("impulse_drops_total", "counter",
           "Input refused or dropped, and internal drops (events over the cap, send errors), by reason.");
  for (size_t i = 0; i < s.drops.size(); ++i) {
    w.sample("impulse_drops_total", {{"reason", name_of(static_cast<RejectReason>(i))}}, s.drops[i]);
  }

  w.family("impulse_request_results_total", "counter", "Requests answered, by result code (Ok or the refusal).");
  for (size_t i = 0; i < s.results.size(); ++i) {
    w.sample("impulse_request_results_total", {{"code", wire::EnumNameResultCode(static_cast<wire::ResultCode>(i))}},
             s.results[i]);
  }
  w.counter("impulse_requests_duplicate_total", "Resent requests deduplicated by the exactly-once window.", s.requests_duplicate);
  w.counter("impulse_requests_unsequenced_total", "Fire-and-forget pushes (request id 0) queued.", s.requests_unsequenced);
  w.counter("impulse_input_frames_applied_total", "Input frames applied at their own tick.", s.input_frames_applied);
  w.counter("impulse_input_frames_repeated_total",
            "Ticks whose Input frame had not arrived, given the body's last frame again.", s.input_frames_repeated);
  w.counter("impulse_inputs_relayed_total",
            "Other clients' inputs sent in snapshots (Snapshot.inputs), for bodies in each client's area.",
            s.inputs_relayed);
  w.counter("impulse_input_frames_late_total", "Input frames that arrived after their tick (never applied).",
            s.input_frames_late);
  w.counter("impulse_inputs_refused_total",
            "Input datagrams refused: out of range, too far ahead, not the client's body, or no free input channel.",
            s.inputs_refused);
  w.counter("impulse_input_buffered_ticks_total",
            "Over the applied Input frames: ticks of input buffered beyond the one applied (divide by "
            "impulse_input_frames_applied_total for the mean input buffer).",
            s.input_buffered_ticks);
  w.counter("impulse_actions_held_total", "Actions (requests with an apply_tick) held for a later tick.", s.actions_held);
  w.counter("impulse_actions_late_total", "Actions applied after the tick they were stamped for.", s.actions_late);
  w.counter("impulse_raycasts_compensated_total", "Raycasts answered against a past tick (seen_tick).",
            s.raycasts_compensated);
  w.gauge("impulse_lag_compensation_bytes", "Memory of the lag-compensation pose history (--lag-compensation-ms).",
          static_cast<double>(s.lag_compensation_bytes));
  w.counter("impulse_snapshot_bytes_total", "Snapshot datagram bytes sent, all clients (before sealing).", s.snapshot_bytes);
  w.counter("impulse_event_bytes_total", "Collision-event datagram bytes sent, all clients (before sealing).", s.event_bytes);
  w.counter("impulse_events_queued_total", "Collision events queued for delivery, all clients.", s.events_queued);
  w.histogram("impulse_client_rtt_seconds",
              "Each session's smoothed round-trip time from its acks, sampled once per second per session. An ack "
              "leaves with the server's next datagram to that client, so this includes up to a snapshot interval "
              "of waiting (9-21 ms on loopback at 30 Hz snapshots): the network's own round trip is what a "
              "client's Ping/Pong measures.",
              s.rtt_seconds);

  w.gauge("impulse_recording_active", "1 while the server records the session (--record, --record-dir).", s.recording ? 1.0 : 0.0);
  if (s.recording) {
    w.counter("impulse_recording_encoded_bytes_total", "Recording bytes encoded by the tick thread.", s.record_bytes_encoded);
    w.counter("impulse_recording_written_bytes_total", "Recording bytes written to disk by the writer thread.", s.record_bytes_written);
    w.gauge("impulse_recording_lag_bytes", "Recording bytes encoded but not yet written (the writer's lag).",
            static_cast<double>(s.record_bytes_encoded - std::min(s.record_bytes_written, s.record_bytes_encoded)));
    w.counter("impulse_recording_frames_encoded_total", "Recording frames encoded.", s.record_frames_encoded);
    w.counter("impulse_recording_frames_dropped_total", "Recording frames lost after the writer's backlog limit.",
              s.record_frames_dropped);
    w.counter("impulse_recording_backlog_events_total", "Hand-offs deferred because the recording writer was behind.",
              s.record_backlog_events);
    w.counter("impulse_recording_write_errors_total", "Recording open, write or flush failures.", s.record_write_errors);
    w.counter("impulse_recording_files_total", "Recording files opened.", s.record_files);
  }

  if (p.cpu_ok) {
    w.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    w.sample("process_cpu_seconds_total", p.cpu_seconds);
  }
  if (p.memory_ok) {
    w.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", static_cast<double>(p.resident_bytes));
    w.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", static_cast<double>(p.virtual_bytes));
  }
  if (p.start_ok) w.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", p.start_time_seconds);
  if (p.fds_ok) w.gauge("process_open_fds", "Number of open file descriptors.", static_cast<double>(p.open_fds));
  return w.take();
}

// --- The HTTP server -------------------------------------------------------------------------------

struct AdminServer::Http {
  // The /objects worker: ObjectQueryBox::ask waits (up to kObjectAnswerTimeout) for the tick
  // thread, which the HTTP thread must never do. One question at a time, as the box allows.
  asio::thread_pool query_worker{1};
  std::atomic<bool> query_busy{false};
  std::unique_ptr<HttpFront> front;  // destroyed first (see ~AdminServer)
};

namespace {

HttpReply plain(int status, std::string body) { return HttpReply{status, kPlainText, std::move(body)}; }

HttpReply json_error(int status, std::string_view why) {
  std::string body = R"({"error":")";
  append_json_escaped(body, why);
  body += "\"}\n";
  return HttpReply{status, kJson, std::move(body)};
}

}  // namespace

std::unique_ptr<AdminServer> AdminServer::start(const Options& options, const MetricsExchange& exchange,
                                                const HealthState& health, ObjectQueryBox& objects,
                                                const ClientsExchange& clients, std::string* error) {
  std::unique_ptr<AdminServer> admin(new AdminServer());
  admin->http_ = std::make_unique<Http>();
  Http* http = admin->http_.get();
  const double stall_seconds = options.stall_seconds;
  auto assets = std::make_shared<const AssetDocuments>(options.assets);
  // Runs on the HTTP thread: everything but /objects answers at once from atomics or a copy.
  HttpRoute route = [&exchange, &health, &objects, &clients, http, stall_seconds, assets](std::string_view path,
                                                                                          HttpRespond respond) {
    if (path == "/metrics") {
      const MetricsSnapshot snapshot = exchange.read();
      return respond(HttpReply{200, std::string(metrics::kContentType), render_metrics(snapshot, read_process_figures())});
    }
    if (path == "/healthz" || path == "/readyz") {
      const Verdict v = path == "/healthz" ? check_health(health, steady_now_ns(), stall_seconds) : check_ready(health);
      return respond(plain(v.status, v.body + "\n"));
    }
    if (path == "/clients") return respond(HttpReply{200, kJson, clients.read()});
    if (path == "/assets") return respond(HttpReply{200, kJson, assets->list.empty() ? "[]\n" : assets->list});
    constexpr std::string_view kAssets = "/assets/";
    if (path.substr(0, kAssets.size()) == kAssets) {
      uint32_t id = 0, unused = 0;
      bool has_generation = false;
      if (!parse_object_id(path.substr(kAssets.size()), &id, &unused, &has_generation) || has_generation) {
        return respond(json_error(400, "bad asset id: use /assets/<id> (decimal)"));
      }
      if (id >= assets->assets.size()) return respond(json_error(404, "no such asset: see /assets for the list"));
      return respond(HttpReply{200, kJson, assets->assets[id]});
    }
    constexpr std::string_view kObjects = "/objects/";
    if (path.substr(0, kObjects.size()) != kObjects) {
      return respond(plain(404, "not found: the admin endpoint serves /metrics, /healthz, /readyz, /clients, "
                                "/objects/<index>[:<generation>], /assets and /assets/<id>\n"));
    }
    uint32_t index = 0, generation = 0;
    bool has_generation = false;
    if (!parse_object_id(path.substr(kObjects.size()), &index, &generation, &has_generation)) {
      return respond(json_error(400, "bad object id: use /objects/<index> or /objects/<index>:<generation> (decimal, 32-bit each)"));
    }
    if (http->query_busy.exchange(true, std::memory_order_acq_rel)) {
      return respond(json_error(503, "busy: another object query is being answered; retry"));
    }
    asio::post(http->query_worker, [&objects, http, index, generation, has_generation, respond = std::move(respond)] {
      ObjectQueryBox::Answer a;
      const ObjectQueryBox::Outcome outcome = objects.ask(index, generation, has_generation, kObjectAnswerTimeout, &a);
      http->query_busy.store(false, std::memory_order_release);
      switch (outcome) {
        case ObjectQueryBox::Outcome::Busy: return respond(json_error(503, "busy: another object query is being answered; retry"));
        case ObjectQueryBox::Outcome::Timeout:
          return respond(json_error(503, "the tick loop did not answer in time (stalled?); retry"));
        case ObjectQueryBox::Outcome::Answered: break;
      }
      if (!a.found) return respond(json_error(404, "no such object: the id is unknown or stale (destroyed)"));
      respond(HttpReply{200, kJson, render_object_json(a)});
    });
  };

  HttpFront::Options front;
  front.bind = options.bind;
  front.port = std::max(0, options.port);
  front.max_connections = kMaxConnections;
  front.max_header_bytes = kMaxHeaderBytes;
  front.request_deadline = kRequestDeadline;
  std::string why;
  http->front = HttpFront::start(front, std::move(route), &why);
  if (!http->front) {
    if (error) {
      *error = fmt::format("cannot listen for admin HTTP on {}:{} ({}): the port is in use or the address is not local; "
                           "pick another with --admin-port or --admin-bind (or --admin-port 0 to turn it off)",
                           options.bind, options.port, why);
    }
    return nullptr;
  }
  admin->port_ = http->front->port();
  return admin;
}

AdminServer::~AdminServer() {
  if (!http_) return;
  // The query worker's replies are posted to the front's thread: let the worker finish (within
  // kObjectAnswerTimeout) before the front goes.
  http_->query_worker.join();
  http_->front.reset();
}

HttpFrontStats AdminServer::front_stats() const { return http_->front->stats(); }

}  // namespace impulse::server
