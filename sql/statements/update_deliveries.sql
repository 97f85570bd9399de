-- Outcomes of attempts on persisted deliveries (sql::update_delivery), $1 = jsonb array of rows,
-- each by row id (claimed rows) or, with id null, by (endpoint, event) for a row this process
-- marked 'sending' while the attempt ran. A row going back to pending while another pending row
-- holds its merge key is superseded (deleted): the newer event carries the entity's state.
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
    ord int, id bigint, endpoint_id bigint, event_id uuid, status text, attempts int,
    next_attempt_in_ms bigint, last_attempt_at timestamptz, last_status int, last_error text,
    deferrals int)
), target AS (
  SELECT i.ord, d.id, d.endpoint_id, d.merge_key, d.commit_lsn, i.status
    FROM input i JOIN walhook.deliveries d ON d.id = i.id
   WHERE i.id IS NOT NULL AND d.status <> 'delivered'
  UNION ALL
  SELECT i.ord, d.id, d.endpoint_id, d.merge_key, d.commit_lsn, i.status
    FROM input i JOIN walhook.deliveries d ON d.endpoint_id = i.endpoint_id AND d.event_id = i.event_id
   WHERE i.id IS NULL AND (d.status = 'sending' OR (i.status = 'delivered' AND d.status <> 'delivered'))
), keep AS (
  -- Of the rows going back to pending with one (endpoint, merge key), the newest stays — unless a
  -- pending row outside this batch holds the key with an event at least as new.
  SELECT DISTINCT ON (t.endpoint_id, t.merge_key) t.id, t.endpoint_id, t.merge_key
    FROM target t
   WHERE t.status = 'pending' AND t.merge_key IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM walhook.deliveries p
                      WHERE p.endpoint_id = t.endpoint_id AND md5(p.merge_key) = md5(t.merge_key) AND p.merge_key = t.merge_key
                        AND p.status = 'pending' AND p.id NOT IN (SELECT id FROM target)
                        AND (p.commit_lsn IS NULL OR t.commit_lsn IS NULL OR p.commit_lsn >= t.commit_lsn))
   ORDER BY t.endpoint_id, t.merge_key, t.commit_lsn DESC NULLS LAST, t.id DESC
), doomed AS (
  -- Merged away: rows going back to pending that lost to a newer one, and pending rows older
  -- than a row that stays (the newer event carries the entity's state).
  SELECT t.id FROM target t
   WHERE t.status = 'pending' AND t.merge_key IS NOT NULL AND t.id NOT IN (SELECT id FROM keep)
  UNION
  SELECT p.id FROM keep k
    JOIN walhook.deliveries p ON p.endpoint_id = k.endpoint_id AND md5(p.merge_key) = md5(k.merge_key) AND p.merge_key = k.merge_key AND p.status = 'pending'
   WHERE p.id NOT IN (SELECT id FROM target)
), gone AS (
  DELETE FROM walhook.deliveries d WHERE d.id IN (SELECT id FROM doomed)
  RETURNING d.id
)
UPDATE walhook.deliveries d
   SET status = i.status, attempts = i.attempts, next_attempt_at = now() + make_interval(secs => i.next_attempt_in_ms / 1000.0),
       last_attempt_at = i.last_attempt_at, last_status = i.last_status, last_error = i.last_error,
       deferrals = coalesce(i.deferrals, d.deferrals),
       delivered_at = CASE WHEN i.status = 'delivered' THEN coalesce(i.last_attempt_at, now()) ELSE d.delivered_at END,
       updated_at = now()
  FROM target t JOIN input i ON i.ord = t.ord
 WHERE d.id = t.id AND d.id NOT IN (SELECT id FROM gone)
