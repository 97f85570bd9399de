-- walhook's own record of the acknowledged slot position (sql::progress_write).
-- $1 slot name, $2 system identifier, $3 LSN text, $4 delivered snapshot (pg_snapshot text, or
-- NULL to keep the recorded one), $5 the timeline it was acknowledged on (0: not known). A row of
-- another cluster is replaced. A write of another timeline than the one this server writes now
-- is not recorded: after a failover, a batch of the old primary retried on the promoted server
-- (same system identifier) carries a position and a snapshot of WAL this server never had — the
-- position can lie ahead of its own, and the snapshot's xids can be reused here. (The first 8 hex
-- digits of pg_walfile_name() are the timeline; pg_control_checkpoint() lags until a checkpoint.)
INSERT INTO walhook.slot_progress AS p (slot_name, system_id, confirmed_lsn, delivered_snapshot, updated_at)
SELECT $1::text, $2::text, $3::pg_lsn, $4::pg_snapshot, now()
 WHERE $5::int = 0 OR $5::int = ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::int
ON CONFLICT (slot_name) DO UPDATE
   SET confirmed_lsn = CASE WHEN p.system_id IS DISTINCT FROM excluded.system_id THEN excluded.confirmed_lsn
                            ELSE greatest(p.confirmed_lsn, excluded.confirmed_lsn) END,
       delivered_snapshot = CASE WHEN p.system_id IS DISTINCT FROM excluded.system_id THEN excluded.delivered_snapshot
                                 ELSE coalesce(excluded.delivered_snapshot, p.delivered_snapshot) END,
       system_id = excluded.system_id, updated_at = now()
