// Session recorder: the tick thread encodes frames (schemas/recording.fbs) into in-memory chunks
// and hands them to a background writer thread once per wake-up; only the writer touches files.
// The hand-off is a short mutex section over a byte-bounded queue: when the writer falls behind,
// the tick keeps its chunks and retries next wake-up (logged and counted), and it never waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "server/physics/world.h"
#include "server/record/format.h"
#include "server/request/apply_request.h"

namespace impulse::record {

/// Bytes at most waiting for the writer; beyond it hand-offs are deferred (counted as backlog).
inline constexpr size_t kMaxQueuedBytes = 64u << 20;
/// Bytes at most the tick side keeps while the writer is behind; beyond it recording stops
/// (logged and counted as dropped frames). The file stays valid up to its last written frame.
inline constexpr size_t kMaxBacklogBytes = 256u << 20;
/// The writer wakes at least this often to write and fflush what was handed over [ms].
inline constexpr int kWriterPeriodMs = 100;

/// Counters of one Recorder. Written by the tick thread (encoded_*, backlog, dropped) or the
/// writer thread (written_*, files, write_errors); readable from any thread.
struct RecorderStats {
  std::atomic<uint64_t> frames_encoded{0};
  std::atomic<uint64_t> bytes_encoded{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> files{0};           ///< files opened
  std::atomic<uint64_t> backlog_events{0};  ///< hand-offs deferred because the writer was behind
  std::atomic<uint64_t> frames_dropped{0};  ///< frames lost after the backlog limit
  std::atomic<uint64_t> write_errors{0};    ///< open, write or flush failures
};

/// File name of part `part` of a run started at `started_unix_ms` in `--record-dir`:
/// "<dir>/impulse-YYYYmmdd-HHMMSS-NNN.irec" (UTC).
std::string rotated_file_path(const std::string& dir, int64_t started_unix_ms, uint32_t part);

class Recorder {
 public:
  /// @param config      record_file or record_dir set; copied
  /// @param scene_name  written into every header
  Recorder(const RecordingConfig& config, std::string scene_name);
  ~Recorder();  ///< finish()
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// Notes a body created outside requests (the scene), for the headers' damping table.
  void note_body(ObjectID id, const physics::BodyDesc& desc);

  /// Opens the first file (synchronously, before the server serves), encodes its header from
  /// `world` and starts the writer thread. On failure returns false with *error saying why; the
  /// recorder is then unusable and the caller serves without it.
  bool start(const physics::World& world, std::string* error);

  // --- Tick thread --------------------------------------------------------------------------------
  /// A request applied before the coming step, with the code answered and the created/addressed id.
  void add_request(const server::PendingRequest& request, wire::ResultCode result, ObjectID id);
  /// After each step: encodes the Tick frame (with the requests added since the last one), a
  /// Keyframe when the tick is a multiple of the keyframe interval, and rotates the file when
  /// --record-rotate-mb / --record-rotate-minutes say so.
  /// The Tick frame carries world.awake_hash() (O(awake + active contacts)); a Keyframe carries
  /// world.world_hash() (O(everything), once per keyframe interval).
  void end_tick(const physics::World& world);
  /// A session opened or closed at `tick`.
  void add_client_event(ClientEventType type, uint32_t client_id, uint64_t tick, std::string_view address,
                        std::string_view name);
  /// Once per wake-up: passes the encoded chunks to the writer (never waits for it).
  void hand_off();
  /// Hands off what is left, stops the writer after it has written and flushed everything, and
  /// logs a summary. Idempotent.
  void finish();

  /// Path of the file being written (the latest part with --record-dir).
  const std::string& path() const { return path_; }
  const RecorderStats& stats() const { return stats_; }
  /// Ticks between keyframes.
  uint32_t keyframe_interval() const { return keyframe_interval_; }

 private:
  struct Chunk {
    std::vector<uint8_t> bytes;
    std::string open_path;  // non-empty: the writer closes its file and opens this one first
  };
  void append(std::span<const uint8_t> frame);
  void encode_header(const physics::World& world);
  void rotate(const physics::World& world);
  std::vector<uint8_t> take_buffer();
  void run_writer();
  bool open_file(const std::string& path);
  void close_file();

  RecordingConfig config_;
  std::string scene_name_;
  int64_t started_unix_ms_ = 0;
  uint32_t keyframe_interval_ = 600;
  uint64_t rotate_bytes_ = 0;  // 0 = never
  uint64_t rotate_ticks_ = 0;  // 0 = never
  bool started_ = false;
  bool finished_ = false;
  bool failed_ = false;  // backlog limit hit: nothing more is recorded

  // Tick side.
  flatbuffers::FlatBufferBuilder fbb_{4096};
  std::vector<flatbuffers::Offset<Request>> request_offsets_;
  std::vector<RequestRecord> requests_;
  std::vector<uint8_t> state_;
  std::vector<BodyDamping> dampings_;  // live bodies, sorted by id
  struct LiveClient {
    uint32_t client_id;
    std::string address;
    std::string name;
  };
  std::vector<LiveClient> clients_;
  std::vector<Chunk> outgoing_;
  size_t outgoing_bytes_ = 0;
  uint32_t part_ = 0;
  uint64_t file_bytes_ = 0;
  uint64_t file_start_tick_ = 0;
  std::string path_;
  uint64_t last_backlog_log_ = 0;

  // Shared with the writer (under mutex_).
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Chunk> queue_;
  size_t queued_bytes_ = 0;
  std::vector<std::vector<uint8_t>> free_buffers_;
  bool stopping_ = false;

  // Writer side.
  std::thread writer_;
  std::FILE* file_ = nullptr;
  std::string file_path_;
  bool file_failed_ = false;

  RecorderStats stats_;
};

}  // namespace impulse::record
