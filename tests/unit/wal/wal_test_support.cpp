#include "tests/unit/wal/wal_test_support.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace walhook::wal::test {

std::string fixture_dir() { return WALHOOK_SOURCE_DIR "/tests/fixtures/pgoutput/"; }

std::vector<fixture_message> load_fixture(std::string_view file) {
  std::string path = fixture_dir() + std::string(file);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open fixture " + path);
  std::vector<fixture_message> out;
  std::string line;
  std::string last_comment;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      last_comment = line.substr(line.find_first_not_of("# "));
      continue;
    }
    std::istringstream fields(line);
    std::string lsn_text;
    std::string hex;
    fields >> lsn_text >> hex;
    auto row_lsn = lsn::parse(lsn_text);
    if (!row_lsn || hex.empty()) throw std::runtime_error("malformed fixture line in " + path + ": " + line);
    out.push_back({*row_lsn, last_comment, from_hex(hex)});
  }
  return out;
}

std::vector<std::string> fixture_files() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir())) {
    if (entry.path().extension() == ".txt") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bytes from_hex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("not a hex digit");
  };
  if (hex.size() % 2 != 0) throw std::invalid_argument("odd hex length");
  bytes out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    out.push_back(static_cast<std::byte>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
  }
  return out;
}

builder& builder::u8(std::uint8_t v) {
  bytes_.push_back(static_cast<std::byte>(v));
  return *this;
}
builder& builder::u16(std::uint16_t v) { return u8(static_cast<std::uint8_t>(v >> 8)).u8(static_cast<std::uint8_t>(v)); }
builder& builder::u32(std::uint32_t v) {
  return u16(static_cast<std::uint16_t>(v >> 16)).u16(static_cast<std::uint16_t>(v));
}
builder& builder::u64(std::uint64_t v) {
  return u32(static_cast<std::uint32_t>(v >> 32)).u32(static_cast<std::uint32_t>(v));
}
builder& builder::cstr(std::string_view s) { return raw(s).u8(0); }
builder& builder::raw(std::string_view s) {
  for (char c : s) u8(static_cast<std::uint8_t>(c));
  return *this;
}

pgoutput::message decode_ok(const bytes& data) {
  auto r = pgoutput::decode(data);
  if (!r) throw std::runtime_error("decode failed: " + r.error().message());
  return *r;
}

}  // namespace walhook::wal::test

namespace walhook::wal {
std::ostream& operator<<(std::ostream& os, const lsn& l) { return os << l.to_string(); }
}  // namespace walhook::wal

namespace walhook::wal::pgoutput {

std::ostream& operator<<(std::ostream& os, const tuple_value& v) {
  os << static_cast<char>(v.kind);
  if (v.kind == value_kind::text) os << ":\"" << v.data << '"';
  if (v.kind == value_kind::binary) os << ":" << v.data.size() << " bytes";
  return os;
}

std::ostream& operator<<(std::ostream& os, const tuple& t) {
  os << '[';
  for (std::size_t i = 0; i < t.size(); ++i) os << (i ? ", " : "") << t[i];
  return os << ']';
}

std::ostream& operator<<(std::ostream& os, const column& c) {
  return os << "{flags " << int{c.flags} << ", " << c.name << ", oid " << c.type_oid << ", typmod " << c.type_modifier
            << '}';
}

}  // namespace walhook::wal::pgoutput
