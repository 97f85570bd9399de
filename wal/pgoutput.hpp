#pragma once
// Pure decoder for the pgoutput plugin's messages, protocol version 1.
// Source: PostgreSQL 15 docs, 55.9 "Logical Replication Message Formats"
// (src/backend/replication/logical/proto.c). Bytes in, values out: no I/O, no hidden state.
// Row messages are decoded into raw tuples; interpreting columns needs the Relation message,
// kept by relation_cache (wal/relation_cache.hpp).

#include "common/lsn.hpp"

#include <boost/system/result.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace walhook::wal::pgoutput {

/// 'B' Begin: final_lsn is the LSN of the commit record (equal to the Commit's commit_lsn),
/// commit_time in µs since 2000-01-01 UTC (the origin's timestamp for a transaction replayed under a
/// replication origin). PostgreSQL 15 sends Begin lazily, with the first published change, so
/// transactions that touch no published table produce no messages at all.
struct begin {
  lsn final_lsn;
  std::int64_t commit_time_us = 0;
  std::uint32_t xid = 0;
  bool operator==(const begin&) const = default;
};

/// 'C' Commit: end_lsn is the end of the transaction's commit record — the position walhook
/// acknowledges once every delivery of the transaction is done (docs/architecture.md, Pitfalls).
struct commit {
  std::uint8_t flags = 0;
  lsn commit_lsn;
  lsn end_lsn;
  std::int64_t commit_time_us = 0;
  bool operator==(const commit&) const = default;
};

/// 'O' Origin: the transaction was replicated from `name` (sent after Begin).
struct origin {
  lsn commit_lsn;
  std::string name;
  bool operator==(const origin&) const = default;
};

/// One column of a Relation message. flags bit 1 = part of the replica identity key.
struct column {
  std::uint8_t flags = 0;
  std::string name;
  std::uint32_t type_oid = 0;
  std::int32_t type_modifier = -1;
  bool is_key() const { return (flags & 1) != 0; }
  bool operator==(const column&) const = default;
};

/// 'R' Relation: the shape of a table, sent before the first row of it on a connection and
/// again whenever it changes. replica_identity: 'd' default, 'n' nothing, 'f' full, 'i' index.
struct relation {
  std::uint32_t oid = 0;
  std::string schema;  ///< namespace; "" means pg_catalog
  std::string name;
  char replica_identity = 'd';
  std::vector<column> columns;
  bool operator==(const relation&) const = default;
};

/// 'Y' Type: a non-built-in data type used by a relation's column (enum, domain, …), sent before
/// the Relation that uses it. For a domain, PostgreSQL 15 sends the domain's OID with the schema and
/// name of its *base* type (e.g. "" and "int4" for a domain over integer; proto.c, logicalrep_write_typ).
struct type {
  std::uint32_t oid = 0;
  std::string schema;
  std::string name;
  bool operator==(const type&) const = default;
};

/// One column of TupleData.
enum class value_kind : char {
  null = 'n',             ///< SQL NULL
  unchanged_toast = 'u',  ///< TOASTed value not changed by this UPDATE; not sent
  text = 't',             ///< text-format value in `data`
  binary = 'b',           ///< binary-format value in `data` (only with the binary option)
};

struct tuple_value {
  value_kind kind = value_kind::null;
  std::string data;
  bool operator==(const tuple_value&) const = default;
};

using tuple = std::vector<tuple_value>;

/// 'I' Insert: the new row.
struct insert {
  std::uint32_t relation_oid = 0;
  tuple new_tuple;
  bool operator==(const insert&) const = default;
};

/// 'U' Update: key ('K', replica identity changed) or old ('O', REPLICA IDENTITY FULL) tuple, then the new one.
struct update {
  std::uint32_t relation_oid = 0;
  std::optional<tuple> key_tuple;
  std::optional<tuple> old_tuple;
  tuple new_tuple;
  bool operator==(const update&) const = default;
};

/// 'D' Delete: key ('K') or old ('O') tuple, exactly one of them.
struct delete_ {
  std::uint32_t relation_oid = 0;
  std::optional<tuple> key_tuple;
  std::optional<tuple> old_tuple;
  bool operator==(const delete_&) const = default;
};

/// 'T' Truncate: options bit 1 = CASCADE, bit 2 = RESTART IDENTITY.
struct truncate {
  std::uint8_t options = 0;
  std::vector<std::uint32_t> relation_oids;
  bool operator==(const truncate&) const = default;
};

/// 'M' Message (pg_logical_emit_message; sent only with the `messages` option).
/// flags bit 1 = transactional.
struct logical_message {
  std::uint8_t flags = 0;
  lsn message_lsn;
  std::string prefix;
  std::string content;
  bool operator==(const logical_message&) const = default;
};

using message = std::variant<begin, commit, origin, relation, type, insert, update, delete_, truncate, logical_message>;

/// Decodes one pgoutput message (the payload of one XLogData). Errors (wal::errc): truncated,
/// unknown_message_type, bad_tuple_kind, bad_tuple_marker, trailing_bytes.
boost::system::result<message> decode(std::span<const std::byte> bytes);

}  // namespace walhook::wal::pgoutput
