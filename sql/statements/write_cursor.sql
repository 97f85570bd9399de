-- An endpoint's outbox cursor (sql::cursor_write; sql/migrations/007_endpoint_cursors.sql).
-- $1 endpoint id, $2 covered (pg_snapshot text), $3 also (xid8[] text), $4 window snapshot or
-- NULL, $5 window_after (seq), $6 reason, $7 deliveries read back since the last write, $8 the
-- endpoint's tenant, $9 the routing before changes (JSON, relay/core/routing_epoch.hpp) or NULL. An endpoint removed meanwhile (or its id reused) gets no row.
INSERT INTO walhook.endpoint_cursors AS c
  (endpoint_id, tenant_id, covered, also, window_snapshot, window_after, reason, events_drained, routing)
SELECT $1::bigint, $8::text, $2::pg_snapshot, $3::xid8[], $4::pg_snapshot, $5::bigint, $6::text, $7::bigint, $9::jsonb
 WHERE EXISTS (SELECT 1 FROM walhook.endpoints WHERE id = $1::bigint AND tenant_id = $8::text)
ON CONFLICT (endpoint_id) DO UPDATE
   SET tenant_id = excluded.tenant_id, covered = excluded.covered,
       covered_at = CASE WHEN c.covered::text = excluded.covered::text THEN c.covered_at ELSE now() END, also = excluded.also, window_snapshot = excluded.window_snapshot,
       window_after = excluded.window_after, reason = excluded.reason, routing = excluded.routing,
       events_drained = CASE WHEN c.tenant_id = excluded.tenant_id THEN c.events_drained ELSE 0 END + excluded.events_drained,
       updated_at = now()
