// Multi-stream capture: a stream that waits on an event recorded on a capturing stream (a fork:
// side.wait_stream(capture_stream)) is captured with it until the capture ends, as ACL and CUDA graphs
// capture forked streams. Followed through the runtime's event record / wait trace points while a
// capture runs; streams are identified by their native handles.
#pragma once

namespace vnpu::capture_streams {

void begin(const void* capture_stream);
void end(const void* capture_stream);
// Whether `stream` has joined the capture of `capture_stream`.
bool joined(const void* capture_stream, const void* stream);

}  // namespace vnpu::capture_streams
