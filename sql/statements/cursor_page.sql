-- One page of the outbox rows a cursor owes its endpoint (relay/engine/cursors.hpp), in seq order.
-- $1 tenant, $2 covered (pg_snapshot), $3 also (xid8[]), $4 the window's snapshot, or NULL to
-- open a window at the current snapshot, $5 rows after this seq, $6 at most this many rows, $7 the
-- endpoint. Owed: the row's transaction is not covered (not visible in $2, not in $3), had
-- committed when the window's snapshot was taken, and the endpoint has no walhook.deliveries row
-- for the event (a row — the first failures of an outage, written in the transaction that entered
-- the cursor, or a dead letter — carries that event itself). A new window ($4 NULL) starts at the lowest seq a
-- transaction not visible in $2 inserted (found once, through outbox_xid: every such transaction
-- has xid >= $2's xmin); its pages walk the primary key from there, so a page costs the rows
-- between it and the previous one, not the whole backlog.
-- Every row also carries the window's snapshot, the WAL insert position read after it (each
-- transaction visible in the window wrote its commit record before that position), and the seq
-- the page started after.
WITH w AS MATERIALIZED (SELECT coalesce($4::pg_snapshot, pg_current_snapshot()) AS r),
     p AS MATERIALIZED (SELECT w.r, pg_current_wal_insert_lsn() AS insert_lsn FROM w),
     floor AS MATERIALIZED (
       SELECT CASE WHEN $4::pg_snapshot IS NOT NULL THEN $5::bigint
                   ELSE greatest($5::bigint, coalesce((SELECT min(x.seq) - 1 FROM walhook.outbox x
                                                        WHERE x.xid >= pg_snapshot_xmin($2::pg_snapshot)), $5::bigint))
              END AS after),
     page AS (
       SELECT o.* FROM walhook.outbox o, p, floor
        WHERE o.seq > floor.after AND o.tenant_id = $1::text
          AND pg_visible_in_snapshot(o.xid, p.r) AND NOT pg_visible_in_snapshot(o.xid, $2::pg_snapshot)
          AND o.xid <> ALL ($3::xid8[])
          AND NOT EXISTS (SELECT 1 FROM walhook.deliveries d WHERE d.endpoint_id = $7::bigint AND d.event_id = o.id)
        ORDER BY o.seq LIMIT $6::int)
SELECT p.r::text AS window_snapshot, p.insert_lsn::text AS insert_lsn, page.seq::text AS seq, page.xid::text AS xid,
       page.id::text AS id, page.tenant_id, page.event_type, page.aggregate_id, page.aggregate_type, page.merge_key,
       page.payload::text AS payload, page.created_at::text AS created_at, page.endpoint_id::text AS endpoint_id,
       page.stored_at::text AS stored_at, page.by_walhook::text AS by_walhook, page.rejected, page.traceparent
  FROM p LEFT JOIN page ON true
 ORDER BY page.seq
