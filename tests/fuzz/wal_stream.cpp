#include "tests/fuzz/wal_stream.hpp"

#include "wal/copy_both.hpp"
#include "wal/pgoutput.hpp"
#include "wal/relation_cache.hpp"

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <variant>

namespace walhook::fuzz {
namespace {

namespace pg = wal::pgoutput;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "wal_stream: invariant broken: %s\n", what);
  std::abort();
}

void check(bool ok, const char* what) {
  if (!ok) broken(what);
}

bool fits(const pg::relation& rel, const pg::tuple& t) { return t.size() == rel.columns.size(); }

// What the relay does with a row once the cache accepted it: reads each column by its name
// through the Relation (relay/core/rows.cpp). Every index must be in range.
std::size_t read_row(const pg::relation& rel, const pg::tuple& t) {
  check(fits(rel, t), "accepted tuple has its relation's column count");
  std::size_t bytes = 0;
  for (const auto& col : rel.columns) {
    auto i = wal::relation_cache::column_index(rel, col.name);
    check(i.has_value() && *i < t.size(), "column_index finds every column of the relation");
    check(rel.columns[*i].name == col.name, "column_index returns a column of that name");
    const auto& v = t[*i];
    if (v.kind != pg::value_kind::text && v.kind != pg::value_kind::binary) check(v.data.empty(), "null and unchanged-TOAST values carry no data");
    bytes += v.data.size();
  }
  return bytes;
}

// One pgoutput message through the cache, as relay/engine/stream_handler.cpp feeds it.
bool follow(wal::relation_cache& cache, std::span<const std::byte> data) {
  auto m = pg::decode(data);
  auto again = pg::decode(data);
  check(m.has_value() == again.has_value(), "decode is deterministic (success)");
  if (!m) {
    check(m.error() == again.error(), "decode is deterministic (error)");
    return false;
  }
  check(*m == *again, "decode is deterministic (value)");

  const std::size_t size_before = cache.size();
  auto ec = cache.observe(*m);
  if (ec) {
    check(cache.size() == size_before, "a rejected message leaves the cache unchanged");
    return true;
  }
  std::visit(
      [&](const auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, pg::relation>) {
          const pg::relation* rel = cache.find(msg.oid);
          check(rel != nullptr && *rel == msg, "an observed Relation is the cached one");
        } else if constexpr (std::is_same_v<T, pg::insert> || std::is_same_v<T, pg::update> ||
                             std::is_same_v<T, pg::delete_>) {
          const pg::relation* rel = cache.find(msg.relation_oid);
          check(rel != nullptr, "an accepted row has a cached relation");
          if constexpr (!std::is_same_v<T, pg::delete_>) read_row(*rel, msg.new_tuple);
          if constexpr (!std::is_same_v<T, pg::insert>) {
            if (msg.key_tuple) read_row(*rel, *msg.key_tuple);
            if (msg.old_tuple) read_row(*rel, *msg.old_tuple);
          }
        } else if constexpr (std::is_same_v<T, pg::truncate>) {
          for (auto oid : msg.relation_oids) check(cache.find(oid) != nullptr, "an accepted Truncate names cached relations");
        }
      },
      *m);
  return true;
}

}  // namespace

std::size_t run_wal_stream(std::span<const std::byte> input) {
  wal::relation_cache cache;
  std::size_t decoded = 0;
  std::size_t pos = 0;
  while (pos < input.size()) {
    std::size_t len = static_cast<std::size_t>(input[pos]) << 8;
    if (pos + 1 < input.size()) len |= static_cast<std::size_t>(input[pos + 1]);
    pos += 2;
    if (pos > input.size()) break;
    len = std::min(len, input.size() - pos);
    auto payload = input.subspan(pos, len);
    pos += len;

    // A reconnect clears the cache (the server resends Relation messages); a frame starting
    // with 'X' stands for one.
    if (!payload.empty() && payload[0] == std::byte{'X'}) {
      cache.clear();
      continue;
    }
    auto parsed = wal::parse_server_message(payload);
    if (!parsed) continue;
    if (const auto* x = std::get_if<wal::xlog_data>(&*parsed)) {
      check(x->data.empty() || (x->data.data() >= payload.data() && x->data.data() + x->data.size() == payload.data() + payload.size()),
            "XLogData's data is the tail of its frame");
      if (follow(cache, x->data)) ++decoded;
    } else {
      const auto& k = std::get<wal::primary_keepalive>(*parsed);
      auto reply = wal::standby_status_update(k.wal_end, k.wal_end, k.wal_end, k.send_time_us, false);
      check(reply[0] == std::byte{'r'}, "a standby status update starts with 'r'");
    }
  }
  return decoded;
}

std::vector<std::byte> frame(const std::vector<std::vector<std::byte>>& payloads) {
  std::vector<std::byte> out;
  for (const auto& p : payloads) {
    std::size_t n = std::min<std::size_t>(p.size(), 0xFFFF);
    out.push_back(static_cast<std::byte>(n >> 8));
    out.push_back(static_cast<std::byte>(n & 0xFF));
    out.insert(out.end(), p.begin(), p.begin() + static_cast<long>(n));
  }
  return out;
}

}  // namespace walhook::fuzz
