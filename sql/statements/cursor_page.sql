-- One page of the outbox rows a cursor owes its endpoint (relay/engine/cursors.hpp), in seq order.
-- $1 tenant, $2 covered (pg_snapshot), $3 also (xid8[]), $4 the window's snapshot, or NULL to
-- open a window at the current snapshot, $5 rows after this seq, $6 at most this many rows.
-- Owed: the row's transaction is not covered (not visible in $2, not in $3) and had committed
-- when the window's snapshot was taken. The xid range bounds the scan of outbox_xid: a
-- transaction not visible in $2 has xid >= its xmin; one visible in the window, < its xmax.
-- Every row also carries the window's snapshot and the WAL insert position read after it (each
-- transaction visible in the window wrote its commit record before that position).
WITH w AS MATERIALIZED (SELECT coalesce($4::pg_snapshot, pg_current_snapshot()) AS r),
     p AS MATERIALIZED (SELECT w.r, pg_current_wal_insert_lsn() AS insert_lsn FROM w)
SELECT p.r::text AS window_snapshot, p.insert_lsn::text AS insert_lsn, o.seq::text AS seq, o.xid::text AS xid,
       o.id::text AS id, o.tenant_id, o.event_type, o.aggregate_id, o.merge_key, o.payload::text AS payload,
       o.created_at::text AS created_at, o.endpoint_id::text AS endpoint_id
  FROM p LEFT JOIN walhook.outbox o
    ON o.tenant_id = $1::text
   AND o.xid >= pg_snapshot_xmin($2::pg_snapshot) AND o.xid < pg_snapshot_xmax(p.r)
   AND pg_visible_in_snapshot(o.xid, p.r) AND NOT pg_visible_in_snapshot(o.xid, $2::pg_snapshot)
   AND o.xid <> ALL ($3::xid8[]) AND o.seq > $5::bigint
 ORDER BY o.seq LIMIT $6::int
