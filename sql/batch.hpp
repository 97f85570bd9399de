#pragma once
// Turns queued writes into the statements of one state-store batch (one transaction, one round
// trip in pipeline mode). Pure: no connection, no clock. Rows travel as one jsonb parameter per
// statement (jsonb_to_recordset), so a batch of 5,000 writes is a handful of statements.
//
// Within a batch:
//   * of several pending upserts with one (endpoint, merge key), only the newest (last queued,
//     i.e. commit order) is written: the others are merged into it;
//   * of several health writes of one endpoint, the last wins (and `disable` comes with it);
//   * of several progress writes of one (slot, system), the highest LSN wins, with the last
//     delivered snapshot given;
//   * statements run in a fixed order: upserts, updates, health, disable, published events,
//     progress — so an update by (endpoint, event) finds the row an upsert of the same batch
//     created; published events are inserted in the order they were queued.

#include "common/pg_connection.hpp"
#include "sql/writes.hpp"

#include <span>
#include <vector>

namespace walhook::sql {

/// The statements for `writes` (empty if there is nothing to write). Each statement's SQL is one
/// of sql/statements/*.sql; its single parameter is a jsonb array (disable: a bigint[] literal;
/// progress: slot, system id, LSN text, delivered snapshot or NULL; published events: a jsonb
/// array of outbox rows).
std::vector<pg::statement> build_batch(std::span<const write> writes);

}  // namespace walhook::sql
