-- walhook's own record of the acknowledged slot position (sql::progress_write).
-- $1 slot name, $2 system identifier, $3 LSN text, $4 delivered snapshot (pg_snapshot text, or
-- NULL to keep the recorded one). A row of another cluster is replaced.
INSERT INTO walhook.slot_progress AS p (slot_name, system_id, confirmed_lsn, delivered_snapshot, updated_at)
VALUES ($1, $2, $3::pg_lsn, $4::pg_snapshot, now())
ON CONFLICT (slot_name) DO UPDATE
   SET confirmed_lsn = CASE WHEN p.system_id IS DISTINCT FROM excluded.system_id THEN excluded.confirmed_lsn
                            ELSE greatest(p.confirmed_lsn, excluded.confirmed_lsn) END,
       delivered_snapshot = CASE WHEN p.system_id IS DISTINCT FROM excluded.system_id THEN excluded.delivered_snapshot
                                 ELSE coalesce(excluded.delivered_snapshot, p.delivered_snapshot) END,
       system_id = excluded.system_id, updated_at = now()
