#pragma once
// Errors of the wal module (decoding and streaming).

#include <boost/system/error_code.hpp>

namespace walhook::wal {

enum class errc {
  truncated = 1,         ///< a message ended before a field it announces
  unknown_message_type,  ///< first byte is not a known pgoutput / CopyBoth message type
  bad_tuple_kind,        ///< a TupleData column kind other than 'n', 'u', 't', 'b'
  bad_tuple_marker,      ///< Update/Delete submessage marker other than 'K', 'O', 'N'
  trailing_bytes,        ///< bytes left after a complete message
  unknown_relation,      ///< a row message for a relation OID with no prior Relation message
  column_mismatch,       ///< a tuple's column count differs from its Relation message
  server_error,          ///< the server refused a replication command
  slot_in_use,           ///< the slot is active for another process (SQLSTATE 55006)
  not_logical,           ///< wal_level is not 'logical'
  slot_missing,          ///< the slot does not exist (and stream_options::create_slot is off)
  slot_invalidated,      ///< the slot exists but PostgreSQL invalidated it (wal_status 'lost')
};

const boost::system::error_category& category();
inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace walhook::wal

template <>
struct boost::system::is_error_code_enum<walhook::wal::errc> : std::true_type {};
