// Inputs the wal_stream fuzzer (tests/fuzz/) found crashing, replayed through the same path in
// every build: each file under tests/fuzz/regressions/ must run without breaking an invariant
// (std::abort) or, under scripts/test-sanitize, a sanitizer finding.

#include "tests/fuzz/wal_stream.hpp"
#include "tests/unit/wal/wal_test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

using walhook::wal::test::builder;
using walhook::wal::test::bytes;

TEST_CASE("the fuzzed path decodes every captured fixture, framed as the seed corpus is") {
  for (const auto& name : walhook::wal::test::fixture_files()) {
    CAPTURE(name);
    std::vector<bytes> payloads;
    auto messages = walhook::wal::test::load_fixture(name);
    for (const auto& m : messages) {
      auto p = builder{}.ch('w').u64(m.row_lsn.value()).u64(m.row_lsn.value()).u64(0).get();
      p.insert(p.end(), m.data.begin(), m.data.end());
      payloads.push_back(std::move(p));
    }
    CHECK(walhook::fuzz::run_wal_stream(walhook::fuzz::frame(payloads)) == messages.size());
  }
}

TEST_CASE("saved fuzzer crash inputs no longer crash") {
  std::filesystem::path dir = WALHOOK_SOURCE_DIR "/tests/fuzz/regressions";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename().string().starts_with('.') ||
        entry.path().extension() == ".md")
      continue;
    CAPTURE(entry.path().filename().string());
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes data(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) data[i] = static_cast<std::byte>(raw[i]);
    walhook::fuzz::run_wal_stream(data);
    ++n;
  }
  MESSAGE(n << " regression inputs replayed");
}
