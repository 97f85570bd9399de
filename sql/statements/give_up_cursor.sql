-- An outbox cursor past the give-up age (relay/engine/cursors.hpp): what it owes ends dead as one
-- range. $1 endpoint id, $2 tenant, $3 covered, $4 also (xid8[]), $5 reason. In one statement:
-- the range up to the current snapshot is recorded in walhook.dead_ranges with its count of
-- outbox rows, and the cursor moves to that snapshot. → (the new covered snapshot, events, range id)
WITH now_snap AS MATERIALIZED (SELECT pg_current_snapshot() AS r),
owed AS (
  SELECT count(*) AS n FROM walhook.outbox o, now_snap
   WHERE o.tenant_id = $2::text
     AND o.xid >= pg_snapshot_xmin($3::pg_snapshot) AND o.xid < pg_snapshot_xmax(now_snap.r)
     AND pg_visible_in_snapshot(o.xid, now_snap.r) AND NOT pg_visible_in_snapshot(o.xid, $3::pg_snapshot)
     AND o.xid <> ALL ($4::xid8[])
), range AS (
  INSERT INTO walhook.dead_ranges (endpoint_id, tenant_id, covered, also, until_snapshot, events, reason)
  SELECT $1::bigint, $2::text, $3::pg_snapshot, $4::xid8[], now_snap.r, owed.n, $5::text FROM now_snap, owed
  RETURNING id
), moved AS (
  UPDATE walhook.endpoint_cursors c
     SET covered = now_snap.r, also = '{}', window_snapshot = NULL, window_after = 0, routing = NULL, covered_at = now(), updated_at = now()
    FROM now_snap
   WHERE c.endpoint_id = $1::bigint AND c.tenant_id = $2::text
  RETURNING 1
)
SELECT now_snap.r::text, owed.n, (SELECT id FROM range) FROM now_snap, owed
