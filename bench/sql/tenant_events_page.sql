-- The tenant API's reconciliation pages (GET /v1/events, relay/tenant/events.cpp) on a large
-- outbox: 1,000,000 events of 100 tenants over 29 days, then EXPLAIN ANALYZE of the first page,
-- of a page 9,500 events in (a cursor's row comparison), of a resume (the events of 10
-- transactions committed after the view a resume_cursor follows), and of a page 990,000 events
-- into a tenant of its own with 1,000,000. Run on a migrated, throwaway database (it drops the
-- outbox's publication of inserts to keep the WAL small):
--   psql -d DB -f bench/sql/tenant_events_page.sql
ALTER PUBLICATION walhook SET TABLE walhook.endpoints;
INSERT INTO walhook.outbox (tenant_id, event_type, payload, created_at)
SELECT 't' || (g % 100), 'order.paid', jsonb_build_object('n', g), now() - interval '29 days' + g * interval '2 seconds'
  FROM generate_series(1, 1000000) g;
ANALYZE walhook.outbox;
SELECT pg_current_snapshot()::text AS u \gset
EXPLAIN (ANALYZE, BUFFERS)
SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox
 WHERE tenant_id = 't7' AND rejected IS NULL AND endpoint_id IS NULL
   AND created_at >= now() - interval '30 days' AND created_at < 'infinity'
   AND (xid IS NULL OR pg_visible_in_snapshot(xid, :'u'::pg_snapshot))
 ORDER BY created_at, seq LIMIT 101;
SELECT created_at::text AS at, seq FROM walhook.outbox WHERE tenant_id = 't7' ORDER BY created_at, seq OFFSET 9500 LIMIT 1 \gset
EXPLAIN (ANALYZE, BUFFERS)
SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox
 WHERE tenant_id = 't7' AND rejected IS NULL AND endpoint_id IS NULL
   AND created_at < 'infinity'
   AND (xid IS NULL OR xid >= (SELECT pg_snapshot_xmax(pg_current_snapshot())) OR pg_visible_in_snapshot(xid, :'u'::pg_snapshot))
   AND (created_at, seq) > (:'at'::timestamptz, :seq::bigint)
 ORDER BY created_at, seq LIMIT 101;
-- A resume: 10 transactions of 100 events (all tenants) commit after the view :u.
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
INSERT INTO walhook.outbox (tenant_id, event_type, payload) SELECT 't' || (g % 100), 'order.late', '{}' FROM generate_series(1, 100) g;
SELECT pg_current_snapshot()::text AS u2 \gset
SELECT split_part(:'u2', ':', 2) AS now_xmax, split_part(:'u', ':', 2) AS lower_xmax,
       '{' || split_part(:'u', ':', 3) || '}' AS lower_xip \gset
EXPLAIN (ANALYZE, BUFFERS)
SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox
 WHERE tenant_id = 't7' AND rejected IS NULL AND endpoint_id IS NULL
   AND created_at < 'infinity'
   AND (xid IS NULL OR xid >= (SELECT pg_snapshot_xmax(pg_current_snapshot())) OR pg_visible_in_snapshot(xid, :'u2'::pg_snapshot))
   AND xid < :'now_xmax'::xid8 AND (xid >= :'lower_xmax'::xid8 OR xid = ANY (:'lower_xip'::xid8[]))
   AND created_at >= now() - interval '30 days'
 ORDER BY created_at, seq LIMIT 101;
-- A deep page: 990,000 events into a tenant with 1,000,000 (limit 1000). The row comparison is
-- where the index scan starts; with since as a second lower bound it would start at since.
INSERT INTO walhook.outbox (tenant_id, event_type, payload, created_at)
SELECT 'big', 'order.paid', jsonb_build_object('n', g), now() - interval '29 days' + g * interval '2 seconds'
  FROM generate_series(1, 1000000) g;
ANALYZE walhook.outbox;
SELECT pg_current_snapshot()::text AS u3 \gset
SELECT created_at::text AS at, seq FROM walhook.outbox WHERE tenant_id = 'big' ORDER BY created_at, seq OFFSET 990000 LIMIT 1 \gset
EXPLAIN (ANALYZE, BUFFERS)
SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox
 WHERE tenant_id = 'big' AND rejected IS NULL AND endpoint_id IS NULL
   AND created_at < 'infinity'
   AND (xid IS NULL OR xid >= (SELECT pg_snapshot_xmax(pg_current_snapshot())) OR pg_visible_in_snapshot(xid, :'u3'::pg_snapshot))
   AND (created_at, seq) > (:'at'::timestamptz, :seq::bigint)
 ORDER BY created_at, seq LIMIT 1001;
-- The same page with since kept as well (walhook before this: the scan starts at since).
EXPLAIN (ANALYZE, BUFFERS)
SELECT id, event_type, created_at, payload::text, created_at::text AS position, seq FROM walhook.outbox
 WHERE tenant_id = 'big' AND rejected IS NULL AND endpoint_id IS NULL
   AND created_at >= now() - interval '30 days' AND created_at < 'infinity'
   AND (xid IS NULL OR xid >= (SELECT pg_snapshot_xmax(pg_current_snapshot())) OR pg_visible_in_snapshot(xid, :'u3'::pg_snapshot))
   AND (tenant_id, created_at, seq) > ('big', :'at'::timestamptz, :seq::bigint)
 ORDER BY created_at, seq LIMIT 1001;
