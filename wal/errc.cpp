#include "wal/errc.hpp"

#include <string>

namespace walhook::wal {
namespace {

class wal_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "walhook.wal"; }

  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::truncated:
        return "message truncated: it ends before a field it announces";
      case errc::unknown_message_type:
        return "unknown message type";
      case errc::bad_tuple_kind:
        return "bad TupleData column kind (expected 'n', 'u', 't' or 'b')";
      case errc::bad_tuple_marker:
        return "bad tuple marker (expected 'K', 'O' or 'N')";
      case errc::trailing_bytes:
        return "trailing bytes after a complete message";
      case errc::unknown_relation:
        return "row for a relation OID with no prior Relation message";
      case errc::column_mismatch:
        return "tuple column count differs from its Relation message";
      case errc::server_error:
        return "the server refused a replication command";
      case errc::slot_in_use:
        return "replication slot is active for another process";
      case errc::not_logical:
        return "wal_level is not 'logical'";
      case errc::slot_missing:
        return "replication slot does not exist";
      case errc::slot_invalidated:
        return "replication slot was invalidated (wal_status 'lost')";
    }
    return "unknown walhook.wal error " + std::to_string(ev);
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const wal_category instance;
  return instance;
}

}  // namespace walhook::wal
