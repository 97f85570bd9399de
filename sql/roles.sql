-- Least-privilege roles for walhook (optional). Run with psql as a superuser, in the database
-- walhook uses:
--
--   psql -v ON_ERROR_STOP=1 -d app -f sql/roles.sql
--
-- Passwords are placeholders: set real ones (or use certificates) before use.
--
--   walhook_migrator : what `walhook migrate` and `walhook reshard` need — CREATE on the database
--                      (the schema walhook and the publications; it then owns walhook's tables,
--                      which later migrations alter) and REPLICATION (the slot). Not a superuser.
--                      To bridge an application's own outbox table (`walhook migrate
--                      --outbox-table`), the table's owner grants it TRIGGER on that table.
--   walhook_relay    : what `walhook run` needs — stream the slot (REPLICATION), read the outbox
--                      and endpoints, write delivery state and health, disable endpoints, expire
--                      old outbox rows, publish walhook's own notifications.
--   walhook_app      : what the application needs — publish events, nothing else.
--   walhook_admin    : what operators need for `walhook endpoint|status|replay|recover|events|event`
--                      and `walhook inbox source …`.
--   walhook_ingest   : what `walhook ingest` needs — read the inbox's sources, call
--                      walhook.inbox_accept() (which writes as walhook's own role). Nothing else.
--
-- Idempotent: run it before the first `walhook migrate` (it creates the roles, gives
-- walhook_migrator CREATE on the database and stops, the schema being absent), run `walhook
-- migrate` as walhook_migrator, then run it again for the grants — and again after an upgrade
-- whose migrations add tables. On a database already migrated by another role, one run does it
-- all; keep migrating as the role that owns schema walhook (a migration must own what it alters).
-- Roles belong to the cluster: a second database of the same cluster reuses them.

-- 1. The roles, and what the migrator needs before the schema exists.
DO $roles$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT * FROM (VALUES ('walhook_migrator', 'LOGIN REPLICATION'), ('walhook_relay', 'LOGIN REPLICATION'),
                                 ('walhook_app', 'LOGIN'), ('walhook_admin', 'LOGIN'),
                                 ('walhook_ingest', 'LOGIN')) AS v(name, options)
  LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.name) THEN
      EXECUTE format('CREATE ROLE %I %s PASSWORD %L', r.name, r.options, 'change-me');
    END IF;
  END LOOP;
  EXECUTE format('GRANT CREATE ON DATABASE %I TO walhook_migrator', current_database());
END
$roles$;

SELECT to_regnamespace('walhook') IS NULL AS walhook_not_migrated \gset
\if :walhook_not_migrated
\echo 'sql/roles.sql: the roles are ready. Run walhook migrate as walhook_migrator, then this file again.'
\quit
\endif

-- 2. What each role may do with the schema (after `walhook migrate`).
GRANT USAGE ON SCHEMA walhook TO walhook_relay;
GRANT SELECT ON walhook.outbox, walhook.endpoints TO walhook_relay;
GRANT DELETE ON walhook.outbox TO walhook_relay;  -- retention (30 days)
GRANT UPDATE (status, updated_at) ON walhook.endpoints TO walhook_relay;
GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.deliveries, walhook.endpoint_health, walhook.slot_progress
  TO walhook_relay;
GRANT SELECT, DELETE ON walhook.endpoints_removed TO walhook_relay;  -- copies of removed endpoints (migration 004)
GRANT SELECT, INSERT, UPDATE ON walhook.recoveries TO walhook_relay;  -- backfills after a slot loss (migration 005)
GRANT USAGE ON SEQUENCE walhook.recoveries_id_seq TO walhook_relay;
GRANT SELECT ON walhook.shard_layout TO walhook_relay;  -- how many shards (walhook reshard)
GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.endpoint_cursors TO walhook_relay;  -- outbox cursors (migration 007)
GRANT SELECT, INSERT ON walhook.dead_ranges TO walhook_relay;  -- what a cursor past the give-up age owed
GRANT USAGE ON SEQUENCE walhook.dead_ranges_id_seq TO walhook_relay;
-- Operator signals travel through the WAL as pg_logical_emit_message(true, 'walhook', ...), which
-- PostgreSQL lets every role call: only walhook's roles may (walhook also acts on a "resume" only
-- when its transaction changed the endpoint's row, which the application cannot). This revokes it
-- from PUBLIC in this database: grant it back to any other role of yours that emits messages.
-- Every signature (PostgreSQL 17 added a `flush` argument).
DO $emit$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.proname = 'pg_logical_emit_message'
             AND p.pronamespace = 'pg_catalog'::regnamespace LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO walhook_relay, walhook_admin', f);
  END LOOP;
END
$emit$;
-- Notifications are outbox rows walhook writes itself; expired rotation secrets are dropped (migration 006).
GRANT INSERT (tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id, by_walhook) ON walhook.outbox
  TO walhook_relay;
GRANT UPDATE (secret, secret_grace_until) ON walhook.endpoints TO walhook_relay;

GRANT USAGE ON SCHEMA walhook TO walhook_app;
-- Not xid: its default (the inserting transaction) is what lets walhook backfill after a slot loss.
-- Not endpoint_id: the direct route is walhook's own (its notifications to contact endpoints).
-- Not by_walhook: walhook.* event types and merge keys are walhook's own (migration 008).
-- Not stored_at: walhook's clock of the event (retention and give-up count from it).
-- Not rejected: only an outbox bridge's function writes it (migration 009).
GRANT INSERT (id, tenant_id, event_type, aggregate_id, aggregate_type, merge_key, payload, created_at, traceparent),
  SELECT (id) ON walhook.outbox TO walhook_app;  -- SELECT (id): publish() returns it
GRANT USAGE ON ALL SEQUENCES IN SCHEMA walhook TO walhook_app;
GRANT EXECUTE ON FUNCTION walhook.publish(text, text, jsonb, text, text, text, text) TO walhook_app;

GRANT USAGE ON SCHEMA walhook TO walhook_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.endpoints, walhook.deliveries, walhook.endpoint_health TO walhook_admin;
GRANT SELECT ON walhook.outbox TO walhook_admin;
GRANT SELECT, INSERT ON walhook.recoveries TO walhook_admin;  -- walhook recover
GRANT SELECT ON walhook.endpoint_cursors, walhook.dead_ranges TO walhook_admin;  -- status and console
-- walhook event (the delivered snapshot of the tenant's slot) and walhook recover (the layout).
GRANT SELECT ON walhook.slot_progress, walhook.shard_layout TO walhook_admin;
GRANT SELECT ON walhook.outbox_bridges TO walhook_admin;  -- the bridged outbox tables (migration 009)
GRANT USAGE ON ALL SEQUENCES IN SCHEMA walhook TO walhook_admin;
-- The tenant API (migration 015): `walhook run --api-database-url` connects as walhook_admin;
-- tokens, limits and the audit log are no other role's (a token row is access to a tenant).
GRANT SELECT, INSERT, UPDATE ON walhook.tenant_tokens, walhook.tenant_limits TO walhook_admin;
GRANT DELETE ON walhook.tenant_limits TO walhook_admin;
-- POST /v1/endpoints/{id}/test: a walhook.test event routed to that endpoint alone.
GRANT INSERT (tenant_id, event_type, payload, endpoint_id, by_walhook) ON walhook.outbox TO walhook_admin;
GRANT SELECT, INSERT ON walhook.tenant_audit TO walhook_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.portal_codes, walhook.portal_sessions TO walhook_admin;

-- The inbox (migration 010): the ingest server reads sources and calls inbox_accept, nothing
-- more; a consumer's SQL kit is the application's; sources are the operators'.
GRANT USAGE ON SCHEMA walhook TO walhook_ingest;
GRANT SELECT ON walhook.inbox_sources TO walhook_ingest;
GRANT EXECUTE ON FUNCTION walhook.inbox_accept(text, text, bytea, text, text, jsonb, text, boolean) TO walhook_ingest;
GRANT SELECT, INSERT ON walhook.processed_events TO walhook_app;
GRANT EXECUTE ON FUNCTION walhook.claim_once(text, text, bytea) TO walhook_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.inbox_sources TO walhook_admin;
GRANT SELECT ON walhook.inbox, walhook.inbox_key_reuse, walhook.processed_events TO walhook_admin;
GRANT DELETE ON walhook.inbox, walhook.inbox_key_reuse, walhook.processed_events TO walhook_relay;  -- retention
GRANT SELECT ON walhook.inbox TO walhook_relay;
-- Retention finds old rows by these columns; the console and /api/sources read the sources'
-- settings and counters. Never their secrets, nor a reused id's body: columns, not tables.
GRANT SELECT (id, source, event_id, received_at) ON walhook.inbox_key_reuse TO walhook_relay;
GRANT SELECT (consumer, event_id, processed_at) ON walhook.processed_events TO walhook_relay;
GRANT SELECT (name, scheme, tolerance_s, id_from, type_from, order_key_from, max_body_bytes, defer_statuses,
              max_deferrals, retry_schedule_ms, created_at, updated_at) ON walhook.inbox_sources TO walhook_relay;
