// A recording file for a loopback test's server, checked by replaying it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>

#include "server/record/replay.h"

namespace impulse::test {

/// A path in the temp directory for ServerOptions::record_file, unique per process and object,
/// removed on destruction. After the server has stopped, expect_verifies() replays the recording
/// and fails the test unless every tick's world hash matches (record::verify_recording).
class TempRecording {
 public:
  explicit TempRecording(std::string_view stem) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("impulse-" + std::string(stem) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".irec"))
                .string();
  }
  ~TempRecording() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempRecording(const TempRecording&) = delete;
  TempRecording& operator=(const TempRecording&) = delete;

  const std::string& path() const { return path_; }

  void expect_verifies() const {
    const record::VerifyResult r = record::verify_recording(path_);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_TRUE(r.ok) << r.report << r.read_problem;
  }

 private:
  std::string path_;
};

}  // namespace impulse::test
