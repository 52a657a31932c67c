// Frame-by-frame reading of a recording with size-prefix range checks and the FlatBuffers
// Verifier on every frame.
#include "server/record/reader.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "server/record/format.h"

namespace impulse::record {
namespace {

// Reads up to n bytes; returns how many arrived (less only at end of file or on error).
size_t read_fully(std::FILE* file, uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const size_t r = std::fread(out + got, 1, n - got, file);
    if (r == 0) break;
    got += r;
  }
  return got;
}

// Bounds of the Verifier: deep enough for Frame -> Tick -> Request, and a table count no valid
// frame comes near (a Tick holds at most a few thousand requests).
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
constexpr flatbuffers::uoffset_t kMaxTables = 1u << 20;

}  // namespace

RecordingReader::~RecordingReader() {
  if (owns_file_ && file_ != nullptr) std::fclose(file_);
}

bool RecordingReader::open(const std::string& path, std::string* error) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (error) *error = fmt::format("{}: cannot open: {}", path, std::strerror(errno));
    return false;
  }
  if (owns_file_ && file_ != nullptr) std::fclose(file_);
  file_ = file;
  owns_file_ = true;
  return seek(0, 0);
}

ReadStatus RecordingReader::fail(ReadStatus status, std::string message) {
  done_ = status;
  frame_ = nullptr;
  error_ = std::move(message);
  return status;
}

bool RecordingReader::seek(uint64_t offset, uint64_t frames_before) {
  if (file_ == nullptr || std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0) {
    fail(ReadStatus::Corrupt, fmt::format("cannot seek to byte {}", offset));
    return false;
  }
  offset_ = offset;
  frames_ = frames_before;
  frame_ = nullptr;
  truncated_bytes_ = 0;
  done_ = ReadStatus::Frame;
  error_.clear();
  return true;
}

ReadStatus RecordingReader::next() {
  if (done_ != ReadStatus::Frame) return done_;
  if (file_ == nullptr) return fail(ReadStatus::Corrupt, "no file is open");
  frame_ = nullptr;

  uint8_t prefix[sizeof(flatbuffers::uoffset_t)];
  const size_t got_prefix = read_fully(file_, prefix, sizeof prefix);
  if (got_prefix == 0) {
    if (std::ferror(file_)) return fail(ReadStatus::Corrupt, fmt::format("read error at byte {}", offset_));
    done_ = ReadStatus::End;
    return done_;
  }
  if (got_prefix < sizeof prefix) {
    truncated_bytes_ = got_prefix;
    return fail(ReadStatus::Truncated,
                fmt::format("frame {} at byte {}: the file ends inside its size prefix ({} of 4 bytes)", frames_,
                            offset_, got_prefix));
  }
  const uint32_t size = flatbuffers::ReadScalar<uint32_t>(prefix);
  if (size < kMinFrameBytes || size > kMaxFrameBytes) {
    return fail(ReadStatus::Corrupt,
                fmt::format("frame {} at byte {}: size prefix {} is outside [{}, {}]: not a recording frame", frames_,
                            offset_, size, kMinFrameBytes, kMaxFrameBytes));
  }
  // Grow in steps of what the file actually delivers, so a garbage prefix near kMaxFrameBytes in
  // a small file does not allocate a gigabyte.
  const size_t total = sizeof prefix + size;
  buffer_.resize(sizeof prefix);
  std::memcpy(buffer_.data(), prefix, sizeof prefix);
  size_t have = sizeof prefix;
  while (have < total) {
    const size_t chunk = std::min<size_t>(total - have, std::max<size_t>(have, 1u << 16));
    buffer_.resize(have + chunk);
    const size_t got = read_fully(file_, buffer_.data() + have, chunk);
    have += got;
    if (got < chunk) {
      if (std::ferror(file_)) return fail(ReadStatus::Corrupt, fmt::format("read error at byte {}", offset_ + have));
      truncated_bytes_ = have;
      return fail(ReadStatus::Truncated,
                  fmt::format("frame {} at byte {}: the file ends inside the frame ({} of {} bytes)", frames_,
                              offset_, have, total));
    }
  }

  flatbuffers::Verifier verifier(buffer_.data(), buffer_.size(), kMaxDepth, kMaxTables);
  if (!VerifySizePrefixedFrameBuffer(verifier)) {
    return fail(ReadStatus::Corrupt,
                fmt::format("frame {} at byte {}: {} bytes that do not verify as an IREC frame", frames_, offset_,
                            total));
  }
  const Frame* frame = GetSizePrefixedFrame(buffer_.data());
  if (frame->payload_type() == Payload::NONE || frame->payload_type() > Payload::MAX || frame->payload() == nullptr) {
    return fail(ReadStatus::Corrupt,
                fmt::format("frame {} at byte {}: unknown or empty payload (type {})", frames_, offset_,
                            static_cast<int>(frame->payload_type())));
  }
  frame_ = frame;
  frame_offset_ = offset_;
  offset_ += total;
  ++frames_;
  return ReadStatus::Frame;
}

}  // namespace impulse::record
