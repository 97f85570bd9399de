-- Claims due pending deliveries (status -> 'sending'), $1 = jsonb array of quotas
-- {endpoint_id, n, ordered}. For aggregate-ordered endpoints only the oldest delivery of each
-- aggregate, and none while another of that aggregate is being sent; a deferred delivery (migration
-- 011) has stepped out of its aggregate's line and holds back none of the later ones. Returns each claimed row
-- with its event (the outbox row may be gone: o.id IS NULL), its aggregate type and, for a row an
-- outbox bridge could not map, why (migration 009); its traceparent last (migration 012).
WITH quota AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(endpoint_id bigint, n int, ordered boolean)
), picked AS (
  SELECT p.id
    FROM quota q
    CROSS JOIN LATERAL (
      SELECT d.id FROM walhook.deliveries d
       WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending' AND d.next_attempt_at <= now()
         AND (NOT q.ordered OR d.aggregate_id IS NULL OR NOT EXISTS (
               SELECT 1 FROM walhook.deliveries e
                WHERE e.endpoint_id = d.endpoint_id AND e.aggregate_id = d.aggregate_id
                  AND e.id <> d.id
                  AND (e.status = 'sending'
                       OR (e.status = 'pending' AND e.deferrals = 0 AND (e.commit_lsn, e.id) < (d.commit_lsn, d.id)))))
       ORDER BY d.next_attempt_at
       LIMIT q.n
       FOR UPDATE SKIP LOCKED) p
), claimed AS (
  -- By primary key: the planner cannot know how few rows `picked` holds.
  UPDATE walhook.deliveries d SET status = 'sending', updated_at = now()
   WHERE d.id = ANY (ARRAY(SELECT id FROM picked))
  RETURNING d.id, d.endpoint_id, d.attempts, d.event_id, d.merge_key, d.aggregate_id, d.commit_lsn,
            d.next_attempt_at, d.deferrals
)
SELECT c.id, c.endpoint_id, c.attempts, c.event_id, c.merge_key, c.aggregate_id,
       coalesce(c.commit_lsn, '0/0'::pg_lsn)::text, o.id IS NULL, o.tenant_id, o.event_type,
       o.created_at, o.payload::text, o.stored_at, o.aggregate_type, o.rejected,
       c.deferrals, o.traceparent
  FROM claimed c
  LEFT JOIN LATERAL (SELECT * FROM walhook.outbox x WHERE x.id = c.event_id) o ON true
 ORDER BY c.endpoint_id, c.next_attempt_at, c.commit_lsn
