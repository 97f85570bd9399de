-- Retention: one batch ($2 rows at most) of outbox rows older than $1 hours, of delivered or dead
-- deliveries that ended more than $1 hours ago, of old copies of removed endpoints, and of the
-- inbox's rows, reused-key evidence and claim_once marks older than $1 hours (migration 010).
-- Returns the largest of the counts.
-- Small batches keep locks and WAL bursts short; the outbox DELETEs are not published.
-- Ages are walhook's own (migration 008): an outbox row's stored_at, never the application's
-- created_at; a dead letter's from when it ended (updated_at), not from its event.
-- Retention never erases what is still owed: an outbox row an endpoint's cursor may owe (its
-- tenant's, its transaction at or above the cursor's covered xmin, migration 007) is kept, and so
-- is one a pending, sending or dead delivery names (its retry or its replay needs the payload).
WITH old_events AS (
  DELETE FROM walhook.outbox WHERE seq IN (
    SELECT o.seq FROM walhook.outbox o WHERE o.stored_at < now() - make_interval(hours => $1::int)
       AND NOT EXISTS (SELECT 1 FROM walhook.endpoint_cursors c
                        WHERE c.tenant_id = o.tenant_id AND o.xid >= pg_snapshot_xmin(c.covered))
       AND NOT EXISTS (SELECT 1 FROM walhook.deliveries d
                        WHERE d.event_id = o.id AND d.status IN ('pending', 'sending', 'dead'))
     ORDER BY o.stored_at LIMIT $2::int)
  RETURNING 1
), old_deliveries AS (
  DELETE FROM walhook.deliveries WHERE id IN (
    SELECT id FROM walhook.deliveries
     WHERE status IN ('delivered', 'dead') AND updated_at < now() - make_interval(hours => $1::int)
     LIMIT $2::int)
  RETURNING 1
), old_removals AS (
  -- Copies of removed endpoints whose removal was never streamed (a slot dropped meanwhile).
  DELETE FROM walhook.endpoints_removed WHERE removed_at < now() - make_interval(hours => $1::int)
  RETURNING 1
), old_inbox AS (
  -- An inbox row (the dedupe key of a received event) goes only once its event is gone from the
  -- outbox: delivered and past retention, never while a delivery of it is pending or dead. (The
  -- outbox rows this statement deletes are still seen here: their inbox rows go next time.)
  DELETE FROM walhook.inbox WHERE seq IN (
    SELECT i.seq FROM walhook.inbox i
     WHERE i.received_at < now() - make_interval(hours => $1::int)
       AND NOT EXISTS (SELECT 1 FROM walhook.outbox o WHERE o.id = i.outbox_id)
     ORDER BY i.received_at LIMIT $2::int)
  RETURNING 1
), old_reuse AS (
  DELETE FROM walhook.inbox_key_reuse WHERE id IN (
    SELECT id FROM walhook.inbox_key_reuse WHERE received_at < now() - make_interval(hours => $1::int)
     ORDER BY received_at LIMIT $2::int)
  RETURNING 1
), old_marks AS (
  DELETE FROM walhook.processed_events WHERE (consumer, event_id) IN (
    SELECT consumer, event_id FROM walhook.processed_events
     WHERE processed_at < now() - make_interval(hours => $1::int) ORDER BY processed_at LIMIT $2::int)
  RETURNING 1
)
SELECT greatest((SELECT count(*) FROM old_events), (SELECT count(*) FROM old_deliveries),
                (SELECT count(*) FROM old_removals), (SELECT count(*) FROM old_inbox),
                (SELECT count(*) FROM old_reuse), (SELECT count(*) FROM old_marks))
