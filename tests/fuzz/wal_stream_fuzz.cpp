// libFuzzer entry point for the replication stream's pure core: see tests/fuzz/wal_stream.hpp.

#include "tests/fuzz/wal_stream.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  walhook::fuzz::run_wal_stream({reinterpret_cast<const std::byte*>(data), size});
  return 0;
}
