-- Retention: one batch ($2 rows at most) of outbox rows older than $1 hours, and of delivered
-- or dead deliveries whose event is older than that, and old copies of removed endpoints.
-- Returns the largest of the counts.
-- Small batches keep locks and WAL bursts short; the outbox DELETEs are not published.
-- An outbox row an endpoint's cursor may still owe (its tenant's, its transaction at or above the
-- cursor's covered xmin) is kept: retention never erases what is still owed (migration 007).
WITH old_events AS (
  DELETE FROM walhook.outbox WHERE seq IN (
    SELECT o.seq FROM walhook.outbox o WHERE o.created_at < now() - make_interval(hours => $1::int)
       AND NOT EXISTS (SELECT 1 FROM walhook.endpoint_cursors c
                        WHERE c.tenant_id = o.tenant_id AND o.xid >= pg_snapshot_xmin(c.covered))
     ORDER BY o.created_at LIMIT $2::int)
  RETURNING 1
), old_deliveries AS (
  DELETE FROM walhook.deliveries WHERE id IN (
    SELECT id FROM walhook.deliveries
     WHERE status IN ('delivered', 'dead') AND event_created_at < now() - make_interval(hours => $1::int)
     LIMIT $2::int)
  RETURNING 1
), old_removals AS (
  -- Copies of removed endpoints whose removal was never streamed (a slot dropped meanwhile).
  DELETE FROM walhook.endpoints_removed WHERE removed_at < now() - make_interval(hours => $1::int)
  RETURNING 1
)
SELECT greatest((SELECT count(*) FROM old_events), (SELECT count(*) FROM old_deliveries),
                (SELECT count(*) FROM old_removals))
