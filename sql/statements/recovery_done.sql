-- Backfill $1 is done: every delivery it made ($3 of them, from $2 outbox rows) is delivered or
-- in walhook.deliveries.
UPDATE walhook.recoveries SET state = 'done', events = $2, deliveries = $3, finished_at = now()
 WHERE id = $1 AND state = 'pending'
