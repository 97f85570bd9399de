#include "wal/pgoutput.hpp"

#include "wal/cursor.hpp"
#include "wal/errc.hpp"

#include <algorithm>

// Field order and widths follow PostgreSQL 15 docs, 55.9 "Logical Replication Message Formats",
// for protocol version 1: no xid in row, Relation, Type or Message messages (those appear only
// in streamed transactions, protocol 2 and later, which walhook never requests).

namespace walhook::wal::pgoutput {
namespace {

using boost::system::result;

// Each decode_* reads the body after the type byte. They return early only on errors that are
// not truncation (bad kind, bad marker); truncation is left on the cursor and checked once
// by decode(), after the whole message was read.

begin decode_begin(cursor& c) {
  begin m;
  m.final_lsn = lsn{c.read_u64()};
  m.commit_time_us = c.read_i64();
  m.xid = c.read_u32();
  return m;
}

commit decode_commit(cursor& c) {
  commit m;
  m.flags = c.read_u8();
  m.commit_lsn = lsn{c.read_u64()};
  m.end_lsn = lsn{c.read_u64()};
  m.commit_time_us = c.read_i64();
  return m;
}

origin decode_origin(cursor& c) {
  origin m;
  m.commit_lsn = lsn{c.read_u64()};
  m.name = c.read_cstr();
  return m;
}

relation decode_relation(cursor& c) {
  relation m;
  m.oid = c.read_u32();
  m.schema = c.read_cstr();
  m.name = c.read_cstr();
  m.replica_identity = static_cast<char>(c.read_u8());
  std::uint16_t count = c.read_u16();
  for (std::uint16_t i = 0; i < count && c.ok(); ++i) {
    column col;
    col.flags = c.read_u8();
    col.name = c.read_cstr();
    col.type_oid = c.read_u32();
    col.type_modifier = c.read_i32();
    m.columns.push_back(std::move(col));
  }
  return m;
}

type decode_type(cursor& c) {
  type m;
  m.oid = c.read_u32();
  m.schema = c.read_cstr();
  m.name = c.read_cstr();
  return m;
}

// TupleData: Int16 column count, then per column a kind byte and, for 't' and 'b',
// Int32 length + that many bytes.
result<tuple> decode_tuple(cursor& c) {
  tuple t;
  std::uint16_t count = c.read_u16();
  for (std::uint16_t i = 0; i < count && c.ok(); ++i) {
    auto kind = static_cast<char>(c.read_u8());
    if (!c.ok()) break;
    tuple_value v;
    switch (kind) {
      case 'n':
        v.kind = value_kind::null;
        break;
      case 'u':
        v.kind = value_kind::unchanged_toast;
        break;
      case 't':
      case 'b':
        v.kind = kind == 't' ? value_kind::text : value_kind::binary;
        v.data = c.read_bytes(c.read_u32());
        break;
      default:
        return errc::bad_tuple_kind;
    }
    t.push_back(std::move(v));
  }
  return t;
}

// Reads a submessage marker byte. On a short read returns 0, which callers never accept as
// a marker, and the cursor then reports truncation.
char read_marker(cursor& c) { return static_cast<char>(c.read_u8()); }

// The error for a marker that is not one of the expected ones: a short read is truncation,
// anything else is a bad marker.
boost::system::error_code marker_error(const cursor& c) {
  return c.ok() ? errc::bad_tuple_marker : errc::truncated;
}

result<message> decode_insert(cursor& c) {
  insert m;
  m.relation_oid = c.read_u32();
  if (read_marker(c) != 'N') return marker_error(c);
  auto t = decode_tuple(c);
  if (!t) return t.error();
  m.new_tuple = std::move(*t);
  return m;
}

result<message> decode_update(cursor& c) {
  update m;
  m.relation_oid = c.read_u32();
  char marker = read_marker(c);
  if (marker == 'K' || marker == 'O') {
    auto old = decode_tuple(c);
    if (!old) return old.error();
    (marker == 'K' ? m.key_tuple : m.old_tuple) = std::move(*old);
    marker = read_marker(c);
  }
  if (marker != 'N') return marker_error(c);
  auto t = decode_tuple(c);
  if (!t) return t.error();
  m.new_tuple = std::move(*t);
  return m;
}

result<message> decode_delete(cursor& c) {
  delete_ m;
  m.relation_oid = c.read_u32();
  char marker = read_marker(c);
  if (marker != 'K' && marker != 'O') return marker_error(c);
  auto old = decode_tuple(c);
  if (!old) return old.error();
  (marker == 'K' ? m.key_tuple : m.old_tuple) = std::move(*old);
  return m;
}

truncate decode_truncate(cursor& c) {
  truncate m;
  std::uint32_t count = c.read_u32();
  m.options = c.read_u8();
  // The count comes from the wire: reserve no more than the bytes left can hold.
  m.relation_oids.reserve(std::min<std::size_t>(count, c.remaining() / 4));
  for (std::uint32_t i = 0; i < count && c.ok(); ++i) m.relation_oids.push_back(c.read_u32());
  return m;
}

logical_message decode_logical_message(cursor& c) {
  logical_message m;
  m.flags = c.read_u8();
  m.message_lsn = lsn{c.read_u64()};
  m.prefix = c.read_cstr();
  m.content = c.read_bytes(c.read_u32());
  return m;
}

result<message> decode_body(char type, cursor& c) {
  switch (type) {
    case 'B':
      return decode_begin(c);
    case 'C':
      return decode_commit(c);
    case 'O':
      return decode_origin(c);
    case 'R':
      return decode_relation(c);
    case 'Y':
      return decode_type(c);
    case 'I':
      return decode_insert(c);
    case 'U':
      return decode_update(c);
    case 'D':
      return decode_delete(c);
    case 'T':
      return decode_truncate(c);
    case 'M':
      return decode_logical_message(c);
    default:
      return errc::unknown_message_type;
  }
}

}  // namespace

boost::system::result<message> decode(std::span<const std::byte> bytes) {
  cursor c(bytes);
  auto type = static_cast<char>(c.read_u8());
  if (!c.ok()) return errc::truncated;
  auto m = decode_body(type, c);
  if (!m) return m.error();
  if (!c.ok()) return errc::truncated;
  if (!c.at_end()) return errc::trailing_bytes;
  return m;
}

}  // namespace walhook::wal::pgoutput
