#pragma once
// The fuzzed path of the replication stream, as one pure function (issue 9): CopyData frames →
// parse_server_message (wal/copy_both) → pgoutput::decode (wal/pgoutput) → relation_cache
// (wal/relation_cache), with the invariants the relay relies on checked after every message.
// Shared by the libFuzzer target (tests/fuzz/wal_stream_fuzz.cpp) and the unit test that
// replays saved crash inputs (tests/unit/wal/fuzz_regression_test.cpp).

#include <cstddef>
#include <span>
#include <vector>

namespace walhook::fuzz {

/// Input format: a sequence of frames, each a big-endian UInt16 length followed by that many
/// bytes of one CopyData payload ('w' XLogData, 'k' keepalive, anything else); a short last
/// frame takes what is left. Returns the number of pgoutput messages that decoded. A broken
/// invariant calls std::abort() (a crash for libFuzzer, a failed test for the replay).
std::size_t run_wal_stream(std::span<const std::byte> input);

/// Frames `payloads` in the input format above (the seed corpus is written with it).
std::vector<std::byte> frame(const std::vector<std::vector<std::byte>>& payloads);

}  // namespace walhook::fuzz
