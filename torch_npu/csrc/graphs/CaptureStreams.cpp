#include "graphs/CaptureStreams.h"

#include "runtime/DeviceTrace.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace vnpu::capture_streams {
namespace {

struct State {
  std::mutex mu;
  std::unordered_map<uintptr_t, uintptr_t> recorded_on;            // event -> the stream it was last recorded on
  std::unordered_map<uintptr_t, std::vector<uintptr_t>> captures;  // capture stream -> its streams (itself first)
};

State& state() {
  static auto* s = new State();
  return *s;
}

void follow(trace::Point point, uintptr_t event, uintptr_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.mu);
  switch (point) {
    case trace::Point::EventRecord: s.recorded_on[event] = stream; break;
    case trace::Point::EventDeletion: s.recorded_on.erase(event); break;
    case trace::Point::EventWait: {
      const auto found = s.recorded_on.find(event);
      if (found == s.recorded_on.end()) {
        break;
      }
      for (auto& [capture, streams] : s.captures) {
        const bool from_capture = std::find(streams.begin(), streams.end(), found->second) != streams.end();
        if (from_capture && std::find(streams.begin(), streams.end(), stream) == streams.end()) {
          streams.push_back(stream);
        }
      }
      break;
    }
    default: break;
  }
}

}  // namespace

void begin(const void* capture_stream) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.mu);
  const auto key = reinterpret_cast<uintptr_t>(capture_stream);
  s.captures[key] = {key};
  trace::set_handler(trace::Listener::GraphCapture, &follow);
}

void end(const void* capture_stream) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.mu);
  s.captures.erase(reinterpret_cast<uintptr_t>(capture_stream));
  if (s.captures.empty()) {
    trace::set_handler(trace::Listener::GraphCapture, nullptr);
    s.recorded_on.clear();
  }
}

bool joined(const void* capture_stream, const void* stream) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.mu);
  const auto found = s.captures.find(reinterpret_cast<uintptr_t>(capture_stream));
  if (found == s.captures.end()) {
    return false;
  }
  const auto& streams = found->second;
  return std::find(streams.begin(), streams.end(), reinterpret_cast<uintptr_t>(stream)) != streams.end();
}

}  // namespace vnpu::capture_streams
