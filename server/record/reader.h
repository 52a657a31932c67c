// Sequential reader of a recording: reads one size-prefixed frame at a time, checks its size
// prefix against [kMinFrameBytes, kMaxFrameBytes] and the frame with the FlatBuffers Verifier.
// A file cut inside its last frame (crash, kill -9) ends with ReadStatus::Truncated after every
// complete frame; anything that is not a frame ends with ReadStatus::Corrupt and a message. Never
// asserts or throws on file data.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "impulse/schemas/recording_generated.h"

namespace impulse::record {

enum class ReadStatus : uint8_t {
  Frame,      ///< frame() holds the next verified frame
  End,        ///< the file ended cleanly after the last frame
  Truncated,  ///< the file ends inside a frame (only complete frames were returned)
  Corrupt,    ///< a size prefix or frame failed verification; error() says where and why
};

class RecordingReader {
 public:
  RecordingReader() = default;
  /// Reads from `file` (not owned; must outlive the reader), from its current position.
  explicit RecordingReader(std::FILE* file) : file_(file) {}
  ~RecordingReader();
  RecordingReader(const RecordingReader&) = delete;
  RecordingReader& operator=(const RecordingReader&) = delete;

  /// Opens `path` for reading. On failure returns false with *error naming the path and cause.
  bool open(const std::string& path, std::string* error);

  /// Reads and verifies the next frame. After End, Truncated or Corrupt every call returns the
  /// same status again.
  ReadStatus next();

  /// The frame of the last next() == Frame; valid until the next call to next() or seek().
  const Frame* frame() const { return frame_; }
  /// Byte offset of the frame() in the file.
  uint64_t frame_offset() const { return frame_offset_; }
  /// Bytes of complete frames read so far (the offset of the next frame).
  uint64_t offset() const { return offset_; }
  /// Complete frames returned so far.
  uint64_t frames() const { return frames_; }
  /// Bytes of the incomplete frame at the end (Truncated only).
  uint64_t truncated_bytes() const { return truncated_bytes_; }
  /// Why the last next() returned Truncated or Corrupt ("frame 12 at byte 4096: ...").
  const std::string& error() const { return error_; }

  /// Continues reading at `offset` (a frame_offset() or offset() seen before), counting frames
  /// from `frames_before`. Returns false (and sets error()) when the file cannot seek.
  bool seek(uint64_t offset, uint64_t frames_before);

 private:
  ReadStatus fail(ReadStatus status, std::string message);

  std::FILE* file_ = nullptr;
  bool owns_file_ = false;
  std::vector<uint8_t> buffer_;  // one frame with its size prefix; vector storage is 16-aligned
  const Frame* frame_ = nullptr;
  uint64_t frame_offset_ = 0;
  uint64_t offset_ = 0;
  uint64_t frames_ = 0;
  uint64_t truncated_bytes_ = 0;
  ReadStatus done_ = ReadStatus::Frame;  // Frame = not finished
  std::string error_;
};

}  // namespace impulse::record
