-- Retention: one batch ($2 rows at most) of outbox rows older than $1 hours, and of delivered
-- or dead deliveries whose event is older than that, and old copies of removed endpoints.
-- Returns the largest of the counts.
-- Small batches keep locks and WAL bursts short; the outbox DELETEs are not published.
WITH old_events AS (
  DELETE FROM walhook.outbox WHERE seq IN (
    SELECT seq FROM walhook.outbox WHERE created_at < now() - make_interval(hours => $1::int)
     ORDER BY created_at LIMIT $2::int)
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
