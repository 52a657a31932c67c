// Recorder: tick-side frame encoding into chunks, a byte-bounded hand-off queue, and a writer
// thread that writes and fflushes at least every kWriterPeriodMs (the tick never touches a file).
#include "server/record/recorder.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace impulse::record {
namespace {

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool damping_less(const BodyDamping& a, uint64_t id) { return a.id() < id; }

}  // namespace

std::string rotated_file_path(const std::string& dir, int64_t started_unix_ms, uint32_t part) {
  const std::time_t seconds = static_cast<std::time_t>(started_unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  std::string path = dir;
  if (!path.empty() && path.back() != '/') path += '/';
  return path + fmt::format("impulse-{}-{:03}.irec", stamp, part);
}

Recorder::Recorder(const RecordingConfig& config, std::string scene_name)
    : config_(config), scene_name_(std::move(scene_name)) {
  const double tick_hz = static_cast<double>(config.tick_hz);
  keyframe_interval_ = static_cast<uint32_t>(std::max(1.0, std::round(config.keyframe_seconds * tick_hz)));
  if (!config.record_dir.empty()) {
    rotate_bytes_ = static_cast<uint64_t>(config.record_rotate_mb * 1024.0 * 1024.0);
    rotate_ticks_ = static_cast<uint64_t>(std::round(config.record_rotate_minutes * 60.0 * tick_hz));
  }
  requests_.reserve(256);
  request_offsets_.reserve(256);
}

Recorder::~Recorder() { finish(); }

void Recorder::note_body(ObjectID id, const physics::BodyDesc& desc) {
  const uint64_t key = to_wire(id);
  auto it = std::lower_bound(dampings_.begin(), dampings_.end(), key, damping_less);
  const BodyDamping entry(key, desc.linear_damping, desc.angular_damping);
  if (it != dampings_.end() && it->id() == key) {
    *it = entry;
  } else {
    dampings_.insert(it, entry);
  }
}

std::vector<uint8_t> Recorder::take_buffer() {
  std::lock_guard lock(mutex_);
  if (free_buffers_.empty()) return {};
  std::vector<uint8_t> buffer = std::move(free_buffers_.back());
  free_buffers_.pop_back();
  buffer.clear();
  return buffer;
}

void Recorder::append(std::span<const uint8_t> frame) {
  if (failed_) {
    stats_.frames_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (outgoing_.empty()) outgoing_.push_back(Chunk{take_buffer(), {}});
  std::vector<uint8_t>& bytes = outgoing_.back().bytes;
  bytes.insert(bytes.end(), frame.begin(), frame.end());
  outgoing_bytes_ += frame.size();
  file_bytes_ += frame.size();
  stats_.frames_encoded.fetch_add(1, std::memory_order_relaxed);
  stats_.bytes_encoded.fetch_add(frame.size(), std::memory_order_relaxed);
}

void Recorder::encode_header(const physics::World& world) {
  state_.clear();
  world.save_state(state_);
  HeaderInfo info;
  info.config = &config_;
  info.scene_name = scene_name_;
  info.part = part_;
  info.started_unix_ms = unix_ms_now();
  info.keyframe_interval = keyframe_interval_;
  info.tick = world.tick();
  info.world_hash = world.world_hash();  // once per file
  append(record::encode_header(fbb_, info, world.settings(), state_, dampings_));
  file_start_tick_ = world.tick();
  // The size limit counts what follows the header: a header larger than the limit (a big world,
  // a small limit) must not start a new file every tick.
  file_bytes_ = 0;
}

bool Recorder::start(const physics::World& world, std::string* error) {
  if (started_) {
    if (error) *error = "the recorder is already started";
    return false;
  }
  started_unix_ms_ = unix_ms_now();
  path_ = config_.record_dir.empty() ? config_.record_file : rotated_file_path(config_.record_dir, started_unix_ms_, 0);
  if (!open_file(path_)) {
    if (error) {
      *error = fmt::format("cannot open the recording file {}: {} (check that the directory exists and is writable)",
                           path_, std::strerror(errno));
    }
    return false;
  }
  started_ = true;
  encode_header(world);
  writer_ = std::thread([this] { run_writer(); });
  spdlog::info("recording to {} (keyframe every {} ticks{})", path_, keyframe_interval_,
               config_.record_dir.empty()
                   ? std::string{}
                   : fmt::format(", new file every {} MB / {} min", config_.record_rotate_mb,
                                 config_.record_rotate_minutes));
  return true;
}

void Recorder::add_request(const server::PendingRequest& request, wire::ResultCode result, ObjectID id) {
  if (!started_ || finished_) return;
  requests_.push_back(RequestRecord{request, result, id});
  if (result != wire::ResultCode::Ok) return;
  if (request.type == wire::Message::CreateObject) {
    note_body(id, request.desc);
  } else if (request.type == wire::Message::DestroyObject) {
    const uint64_t key = to_wire(id);
    auto it = std::lower_bound(dampings_.begin(), dampings_.end(), key, damping_less);
    if (it != dampings_.end() && it->id() == key) dampings_.erase(it);
  }
}

void Recorder::end_tick(const physics::World& world) {
  if (!started_ || finished_) return;
  const uint64_t tick = world.tick();
  append(encode_tick(fbb_, tick, world.awake_hash(), requests_, request_offsets_));
  requests_.clear();
  if (tick % keyframe_interval_ == 0) {
    state_.clear();
    world.save_state(state_);
    append(encode_keyframe(fbb_, tick, world.world_hash(), state_));
  }
  const bool rotate_by_size = rotate_bytes_ > 0 && file_bytes_ >= rotate_bytes_;
  const bool rotate_by_time = rotate_ticks_ > 0 && tick - file_start_tick_ >= rotate_ticks_;
  if (rotate_by_size || rotate_by_time) rotate(world);
}

void Recorder::rotate(const physics::World& world) {
  ++part_;
  path_ = rotated_file_path(config_.record_dir, started_unix_ms_, part_);
  outgoing_.push_back(Chunk{take_buffer(), path_});
  encode_header(world);
  // The new file lists the sessions that are open, so each file reads on its own.
  for (const LiveClient& c : clients_) {
    append(encode_client_event(fbb_, ClientEventType::Connect, c.client_id, world.tick(), c.address, c.name));
  }
  spdlog::info("recording: continuing in {} at tick {}", path_, world.tick());
}

void Recorder::add_client_event(ClientEventType type, uint32_t client_id, uint64_t tick, std::string_view address,
                                std::string_view name) {
  if (!started_ || finished_) return;
  if (type == ClientEventType::Connect) {
    clients_.push_back(LiveClient{client_id, std::string(address), std::string(name)});
  } else {
    std::erase_if(clients_, [&](const LiveClient& c) { return c.client_id == client_id; });
  }
  append(encode_client_event(fbb_, type, client_id, tick, address, name));
}

void Recorder::hand_off() {
  if (!started_ || finished_ || outgoing_.empty()) return;
  {
    std::lock_guard lock(mutex_);
    if (queued_bytes_ + outgoing_bytes_ <= kMaxQueuedBytes || queued_bytes_ == 0) {
      for (Chunk& c : outgoing_) queue_.push_back(std::move(c));
      queued_bytes_ += outgoing_bytes_;
      outgoing_.clear();
      outgoing_bytes_ = 0;
      return;
    }
  }
  // The writer is behind (slow disk): keep the chunks and retry at the next wake-up.
  const uint64_t backlog = stats_.backlog_events.fetch_add(1, std::memory_order_relaxed) + 1;
  if (backlog >= last_backlog_log_ * 2 || last_backlog_log_ == 0) {
    last_backlog_log_ = backlog;
    spdlog::warn("recording: the disk is slower than the recording ({} MB kept on the tick side); deferred {} "
                 "hand-offs so far",
                 outgoing_bytes_ >> 20, backlog);
  }
  if (outgoing_bytes_ > kMaxBacklogBytes) {
    failed_ = true;
    outgoing_.clear();
    outgoing_bytes_ = 0;
    spdlog::error("recording stopped: more than {} MB waiting for the disk; {} stays readable up to its last "
                  "written frame",
                  kMaxBacklogBytes >> 20, path_);
  }
}

void Recorder::finish() {
  if (!started_ || finished_) return;
  hand_off();
  finished_ = true;
  {
    std::lock_guard lock(mutex_);
    // Whatever could not be handed off (writer behind) goes now: the tick loop is over.
    for (Chunk& c : outgoing_) {
      queued_bytes_ += c.bytes.size();
      queue_.push_back(std::move(c));
    }
    outgoing_.clear();
    stopping_ = true;
  }
  wake_.notify_one();
  if (writer_.joinable()) writer_.join();
  spdlog::info("recording finished: {} frames, {} bytes in {} file(s); last file {}{}",
               stats_.frames_encoded.load(), stats_.bytes_written.load(), stats_.files.load(), path_,
               stats_.write_errors.load() + stats_.frames_dropped.load() > 0
                   ? fmt::format(" ({} write errors, {} frames dropped)", stats_.write_errors.load(),
                                 stats_.frames_dropped.load())
                   : std::string{});
}

// --- Writer thread ----------------------------------------------------------------------------

bool Recorder::open_file(const std::string& path) {
  close_file();
  file_path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  file_failed_ = file_ == nullptr;
  if (file_ == nullptr) {
    stats_.write_errors.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  stats_.files.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Recorder::close_file() {
  if (file_ == nullptr) return;
  if (std::fflush(file_) != 0 || std::fclose(file_) != 0) {
    stats_.write_errors.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("recording: closing {} failed: {}", file_path_, std::strerror(errno));
  }
  file_ = nullptr;
}

void Recorder::run_writer() {
  std::deque<Chunk> batch;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(kWriterPeriodMs), [&] { return stopping_; });
      batch.swap(queue_);
      queued_bytes_ = 0;
      stopping = stopping_;
    }
    bool wrote = false;
    for (Chunk& c : batch) {
      if (!c.open_path.empty() && !open_file(c.open_path)) {
        spdlog::error("recording: cannot open {}: {}; frames are dropped until the next file", c.open_path,
                      std::strerror(errno));
      }
      if (file_ == nullptr || file_failed_ || c.bytes.empty()) continue;
      const size_t n = std::fwrite(c.bytes.data(), 1, c.bytes.size(), file_);
      stats_.bytes_written.fetch_add(n, std::memory_order_relaxed);
      wrote = true;
      if (n != c.bytes.size()) {
        file_failed_ = true;
        stats_.write_errors.fetch_add(1, std::memory_order_relaxed);
        spdlog::error("recording: writing {} failed after {} bytes: {} (disk full?); this file stays readable up to "
                      "its last complete frame, the server keeps serving",
                      file_path_, n, std::strerror(errno));
      }
    }
    if (wrote && file_ != nullptr && !file_failed_ && std::fflush(file_) != 0) {
      file_failed_ = true;
      stats_.write_errors.fetch_add(1, std::memory_order_relaxed);
      spdlog::error("recording: flushing {} failed: {} (disk full?)", file_path_, std::strerror(errno));
    }
    {
      std::lock_guard lock(mutex_);
      for (Chunk& c : batch) {
        if (free_buffers_.size() < 8) free_buffers_.push_back(std::move(c.bytes));
      }
    }
    batch.clear();
    if (stopping) {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) break;
    }
  }
  close_file();
}

}  // namespace impulse::record
