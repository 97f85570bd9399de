-- A slot $1 (of system $2) was created: its consistent point $3 and the snapshot it exported $4
-- (pg_snapshot text). The incident $5 (or NULL: the first slot) now knows its backfill's upper
-- bound and is pending (skipped without a lower bound); the slot's progress starts over at the
-- consistent point, with that snapshot as delivered (what it holds is backfilled or was before
-- walhook's time).
WITH incident AS (
  UPDATE walhook.recoveries
     SET state = CASE WHEN since_snapshot IS NULL THEN 'skipped' ELSE 'pending' END,
         until_snapshot = $4::pg_snapshot, slot_lsn = $3::pg_lsn,
         finished_at = CASE WHEN since_snapshot IS NULL THEN now() END
   WHERE id = $5::bigint AND state = 'creating_slot'
  RETURNING id
)
INSERT INTO walhook.slot_progress AS p (slot_name, system_id, confirmed_lsn, delivered_snapshot, updated_at)
VALUES ($1, $2, $3::pg_lsn, $4::pg_snapshot, now())
ON CONFLICT (slot_name) DO UPDATE
   SET system_id = excluded.system_id, confirmed_lsn = excluded.confirmed_lsn,
       delivered_snapshot = excluded.delivered_snapshot, updated_at = now()
