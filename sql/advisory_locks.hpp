#pragma once
// walhook's PostgreSQL advisory locks (PostgreSQL docs, 9.27.10 Advisory Lock Functions): their
// key, named once.

#include <cstdint>

namespace walhook::sql {

/// The key of walhook's advisory locks, an arbitrary constant. Two locks use it, in PostgreSQL's
/// two key spaces (one bigint key, or two int4 keys), so they never block each other:
///  * migrations: pg_advisory_xact_lock(advisory_lock_class), one bigint key, held by the
///    transaction that applies a migration (sql/migrations.cpp);
///  * a slot's leadership: pg_advisory_lock(advisory_lock_class, hashtext(slot)), two int4 keys
///    (classid, objid), held by the active instance's session (relay/engine/leadership.hpp; `walhook
///    reshard` holds the old slots' while it works).
inline constexpr std::int32_t advisory_lock_class = 2003748971;

}  // namespace walhook::sql
