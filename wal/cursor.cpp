#include "wal/cursor.hpp"

#include <algorithm>

namespace walhook::wal {

bool cursor::need(std::size_t n) {
  if (failed_ || bytes_.size() - pos_ < n) {
    failed_ = true;
    return false;
  }
  return true;
}

std::uint8_t cursor::read_u8() {
  if (!need(1)) return 0;
  return std::to_integer<std::uint8_t>(bytes_[pos_++]);
}

std::uint16_t cursor::read_u16() {
  if (!need(2)) return 0;
  auto hi = std::to_integer<std::uint16_t>(bytes_[pos_]);
  auto lo = std::to_integer<std::uint16_t>(bytes_[pos_ + 1]);
  pos_ += 2;
  return static_cast<std::uint16_t>((hi << 8) | lo);
}

std::uint32_t cursor::read_u32() {
  if (!need(4)) return 0;
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | std::to_integer<std::uint8_t>(bytes_[pos_++]);
  return v;
}

std::uint64_t cursor::read_u64() {
  if (!need(8)) return 0;
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | std::to_integer<std::uint8_t>(bytes_[pos_++]);
  return v;
}

std::string cursor::read_cstr() {
  if (failed_) return {};
  auto rest = bytes_.subspan(pos_);
  auto nul = std::find(rest.begin(), rest.end(), std::byte{0});
  if (nul == rest.end()) {
    failed_ = true;
    return {};
  }
  auto len = static_cast<std::size_t>(nul - rest.begin());
  std::string s(reinterpret_cast<const char*>(rest.data()), len);
  pos_ += len + 1;
  return s;
}

std::string cursor::read_bytes(std::size_t n) {
  if (!need(n)) return {};
  std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
  pos_ += n;
  return s;
}

std::span<const std::byte> cursor::rest() {
  if (failed_) return {};
  auto r = bytes_.subspan(pos_);
  pos_ = bytes_.size();
  return r;
}

}  // namespace walhook::wal
