-- The outbox rows backfill $1 covers: (seq, id), in insertion order. A slot incident: rows whose
-- transaction is visible in the new slot's snapshot and not in the last delivered one (the xid
-- range bounds the index scan: a transaction not visible in since_snapshot has xid >= its xmin;
-- one visible in until_snapshot has xid < its xmax). An operator's: created_at in the range.
-- $2, $3: shard count and index (count <= 1: every tenant), this shard's tenants only.
-- $4, $5: a page — rows after seq $4, at most $5 of them.
SELECT o.seq, o.id::text
  FROM walhook.recoveries r
  JOIN walhook.outbox o
    ON r.until_snapshot IS NOT NULL AND r.since_snapshot IS NOT NULL
   AND o.xid >= pg_snapshot_xmin(r.since_snapshot) AND o.xid < pg_snapshot_xmax(r.until_snapshot)
   AND pg_visible_in_snapshot(o.xid, r.until_snapshot) AND NOT pg_visible_in_snapshot(o.xid, r.since_snapshot)
 WHERE r.id = $1 AND ($2::int <= 1 OR (hashtext(o.tenant_id) & 2147483647) % $2::int = $3::int) AND o.seq > $4::bigint
UNION ALL
SELECT o.seq, o.id::text
  FROM walhook.recoveries r
  JOIN walhook.outbox o
    ON r.since_time IS NOT NULL AND o.created_at >= r.since_time
   AND (r.until_time IS NULL OR o.created_at < r.until_time)
   AND (r.tenant_id IS NULL OR o.tenant_id = r.tenant_id)
 WHERE r.id = $1 AND ($2::int <= 1 OR (hashtext(o.tenant_id) & 2147483647) % $2::int = $3::int) AND o.seq > $4::bigint
 ORDER BY 1 LIMIT $5::int
