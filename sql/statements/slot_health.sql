-- How much WAL slot $1 retains and whether PostgreSQL guarantees it (pg_replication_slots):
-- wal_status (reserved, extended, unreserved, lost), safe_wal_size (bytes that can still be
-- written before the slot is at risk; NULL when max_slot_wal_keep_size = -1 or the slot is lost),
-- and the bytes of WAL kept for it (from restart_lsn to the current position).
SELECT coalesce(wal_status, ''), safe_wal_size,
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint
  FROM pg_replication_slots WHERE slot_name = $1
