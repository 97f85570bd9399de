-- 'sending' rows not touched for $1 seconds go back to 'pending' (their attempt's process
-- died), except those this process still owns: $2 = jsonb array of {endpoint_id, event_id}.
-- A row whose merge key another pending row holds is merged away instead. Returns nothing;
-- the command tag counts the rows. $3, $4: shard count and index (count <= 1: all rows), the
-- rows of this shard's endpoints only (another shard's attempts are its own).
WITH owned AS (
  SELECT * FROM jsonb_to_recordset($2::jsonb) AS x(endpoint_id bigint, event_id uuid)
), stale AS (
  SELECT d.id, d.endpoint_id, d.merge_key, d.commit_lsn FROM walhook.deliveries d
   WHERE d.status = 'sending' AND d.updated_at <= now() - make_interval(secs => $1::int)
     AND NOT EXISTS (SELECT 1 FROM owned o WHERE o.endpoint_id = d.endpoint_id AND o.event_id = d.event_id)
     AND ($3::int <= 1 OR d.endpoint_id IN (SELECT e.id FROM walhook.endpoints e
                                             WHERE (hashtext(e.tenant_id) & 2147483647) % $3::int = $4::int))
   FOR UPDATE OF d SKIP LOCKED
), keep AS (
  -- Of the stale rows with one (endpoint, merge key), the newest goes back to pending — unless a
  -- pending row holds the key with an event at least as new.
  SELECT DISTINCT ON (s.endpoint_id, s.merge_key) s.id, s.endpoint_id, s.merge_key FROM stale s
   WHERE s.merge_key IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM walhook.deliveries p
                      WHERE p.endpoint_id = s.endpoint_id AND md5(p.merge_key) = md5(s.merge_key) AND p.merge_key = s.merge_key AND p.status = 'pending'
                        AND (p.commit_lsn IS NULL OR s.commit_lsn IS NULL OR p.commit_lsn >= s.commit_lsn))
   ORDER BY s.endpoint_id, s.merge_key, s.commit_lsn DESC NULLS LAST, s.id DESC
), doomed AS (
  -- Merged away: stale rows that lost to a newer one, and pending rows older than one that stays.
  SELECT s.id FROM stale s WHERE s.merge_key IS NOT NULL AND s.id NOT IN (SELECT id FROM keep)
  UNION
  SELECT p.id FROM keep k
    JOIN walhook.deliveries p ON p.endpoint_id = k.endpoint_id AND md5(p.merge_key) = md5(k.merge_key) AND p.merge_key = k.merge_key AND p.status = 'pending'
), gone AS (
  DELETE FROM walhook.deliveries d WHERE d.id IN (SELECT id FROM doomed)
  RETURNING d.id
)
UPDATE walhook.deliveries d SET status = 'pending', updated_at = now()
  FROM stale s WHERE d.id = s.id AND d.id NOT IN (SELECT id FROM gone)
