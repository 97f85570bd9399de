// Writes the seed corpus of the wal_stream fuzzer from the captured pgoutput fixtures
// (tests/fixtures/pgoutput/*.txt): per fixture, one input with a keepalive and every message
// as XLogData, in the order captured, and one that repeats the stream after a reconnect ('X').
// Usage: make_seed_corpus <output dir>

#include "tests/fuzz/wal_stream.hpp"
#include "tests/unit/wal/wal_test_support.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace {

using walhook::wal::test::builder;
using walhook::wal::test::bytes;

void write_file(const std::filesystem::path& path, const bytes& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  int written = 0;
  for (const auto& name : walhook::wal::test::fixture_files()) {
    std::vector<bytes> payloads;
    payloads.push_back(builder{}.ch('k').u64(0x1000000).u64(757479845678901ULL).u8(1).get());
    for (const auto& m : walhook::wal::test::load_fixture(name)) {
      auto p = builder{}.ch('w').u64(m.row_lsn.value()).u64(m.row_lsn.value() + 0x100).u64(757479845678901ULL).get();
      p.insert(p.end(), m.data.begin(), m.data.end());
      payloads.push_back(std::move(p));
    }
    std::string stem = std::filesystem::path(name).stem().string();
    write_file(dir / stem, walhook::fuzz::frame(payloads));
    auto twice = payloads;
    twice.push_back(builder{}.ch('X').get());
    twice.insert(twice.end(), payloads.begin(), payloads.end());
    write_file(dir / (stem + "-reconnect"), walhook::fuzz::frame(twice));
    written += 2;
  }
  std::printf("%d seeds in %s\n", written, dir.c_str());
  return written > 0 ? 0 : 1;
}
