-- The tenant API's reconciliation page (GET /v1/events, relay/tenant/events.cpp) on a large
-- outbox: 1,000,000 events of 100 tenants over 29 days, then EXPLAIN ANALYZE of the first page
-- and of a page 9,500 events in (a cursor's row comparison). Run on a migrated, throwaway
-- database (it drops the outbox's publication of inserts to keep the WAL small):
--   psql -d DB -f bench/sql/tenant_events_page.sql
ALTER PUBLICATION walhook SET TABLE walhook.endpoints;
INSERT INTO walhook.outbox (tenant_id, event_type, payload, created_at)
SELECT 't' || (g % 100), 'order.paid', jsonb_build_object('n', g), now() - interval '29 days' + g * interval '2 seconds'
  FROM generate_series(1, 1000000) g;
ANALYZE walhook.outbox;
EXPLAIN (ANALYZE, BUFFERS)
SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox
 WHERE tenant_id = 't7' AND rejected IS NULL AND endpoint_id IS NULL
   AND created_at >= now() - interval '30 days' AND created_at < 'infinity'
 ORDER BY created_at, seq LIMIT 101;
SELECT created_at::text AS at, seq FROM walhook.outbox WHERE tenant_id = 't7' ORDER BY created_at, seq OFFSET 9500 LIMIT 1 \gset
EXPLAIN (ANALYZE, BUFFERS)
SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox
 WHERE tenant_id = 't7' AND rejected IS NULL AND endpoint_id IS NULL
   AND created_at >= now() - interval '30 days' AND created_at < 'infinity'
   AND (tenant_id, created_at, seq) > ('t7', :'at'::timestamptz, :seq::bigint)
 ORDER BY created_at, seq LIMIT 101;
