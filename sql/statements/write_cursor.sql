-- An endpoint's outbox cursor (sql::cursor_write; sql/migrations/007_endpoint_cursors.sql).
-- $1 endpoint id, $2 covered (pg_snapshot text), $3 also (xid8[] text), $4 window snapshot or
-- NULL, $5 window_after (seq), $6 reason, $7 deliveries read back since the last write.
-- An endpoint removed meanwhile has no row to keep (the foreign key): nothing is written.
INSERT INTO walhook.endpoint_cursors AS c (endpoint_id, covered, also, window_snapshot, window_after, reason, events_drained)
SELECT $1::bigint, $2::pg_snapshot, $3::xid8[], $4::pg_snapshot, $5::bigint, $6::text, $7::bigint
 WHERE EXISTS (SELECT 1 FROM walhook.endpoints WHERE id = $1::bigint)
ON CONFLICT (endpoint_id) DO UPDATE
   SET covered = excluded.covered, also = excluded.also, window_snapshot = excluded.window_snapshot,
       window_after = excluded.window_after, reason = excluded.reason,
       events_drained = c.events_drained + excluded.events_drained, updated_at = now()
