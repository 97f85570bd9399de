-- Deliveries known only in memory (sql::upsert_delivery), $1 = jsonb array of rows. A due time
-- travels as a delay (next_attempt_in_ms) and is fixed by the server's clock.
-- Merge into a pending row with the same (endpoint, merge key) when there is one, else insert;
-- a redelivered event updates its existing row only while that row is pending (or to record a
-- success), so it never regresses a delivered row and never takes over a row being sent.
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
    ord int, endpoint_id bigint, event_id uuid, aggregate_id text, merge_key text, status text,
    attempts int, next_attempt_in_ms bigint, last_attempt_at timestamptz, last_status int,
    last_error text, event_created_at timestamptz, commit_lsn pg_lsn, deferrals int)
), merged AS (
  UPDATE walhook.deliveries d
     SET event_id = i.event_id, aggregate_id = i.aggregate_id, event_created_at = i.event_created_at,
         commit_lsn = i.commit_lsn, merged_count = d.merged_count + 1, updated_at = now()
    FROM input i
   WHERE i.status = 'pending' AND i.merge_key IS NOT NULL
     AND d.endpoint_id = i.endpoint_id AND md5(d.merge_key) = md5(i.merge_key) AND d.merge_key = i.merge_key AND d.status = 'pending'
     AND (d.commit_lsn IS NULL OR i.commit_lsn IS NULL OR i.commit_lsn >= d.commit_lsn)
     AND NOT EXISTS (SELECT 1 FROM walhook.deliveries x
                      WHERE x.endpoint_id = i.endpoint_id AND x.event_id = i.event_id)
  RETURNING i.ord
), superseded AS (
  -- An older event than the pending one holding its key (e.g. a failed attempt persisted after
  -- a newer event was spilled) is merged away: the newer one carries the entity's state.
  SELECT i.ord FROM input i
   WHERE i.status = 'pending' AND i.merge_key IS NOT NULL AND i.commit_lsn IS NOT NULL
     AND EXISTS (SELECT 1 FROM walhook.deliveries d
                  WHERE d.endpoint_id = i.endpoint_id AND md5(d.merge_key) = md5(i.merge_key) AND d.merge_key = i.merge_key AND d.status = 'pending'
                    AND d.commit_lsn > i.commit_lsn AND d.event_id <> i.event_id)
)
INSERT INTO walhook.deliveries AS d
  (endpoint_id, event_id, aggregate_id, merge_key, status, attempts, next_attempt_at,
   last_attempt_at, last_status, last_error, event_created_at, commit_lsn, delivered_at, deferrals)
SELECT endpoint_id, event_id, aggregate_id, merge_key, status, attempts,
       now() + make_interval(secs => next_attempt_in_ms / 1000.0), last_attempt_at, last_status, last_error, event_created_at, commit_lsn,
       CASE WHEN status = 'delivered' THEN coalesce(last_attempt_at, now()) END, coalesce(deferrals, 0)
  FROM input i
 WHERE i.ord NOT IN (SELECT ord FROM merged) AND i.ord NOT IN (SELECT ord FROM superseded)
ON CONFLICT (endpoint_id, event_id) DO UPDATE
   SET status = excluded.status, attempts = greatest(d.attempts, excluded.attempts),
       next_attempt_at = excluded.next_attempt_at, last_attempt_at = excluded.last_attempt_at,
       last_status = excluded.last_status, last_error = excluded.last_error,
       delivered_at = excluded.delivered_at, deferrals = greatest(d.deferrals, excluded.deferrals), updated_at = now()
 WHERE d.status = 'pending' OR (excluded.status = 'delivered' AND d.status <> 'delivered')
