-- A candidate delivered snapshot: the snapshot now, then the WAL insert position. Every
-- transaction visible in the snapshot wrote its commit record before that position, so once the
-- slot is acknowledged past it, all of them are handled.
SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text
