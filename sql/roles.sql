-- Least-privilege roles for walhook (optional; run once as a superuser after `walhook migrate`).
-- Passwords are placeholders: set real ones (or use certificates) before use.
--
--   walhook_relay : what `walhook run` needs — stream the slot (REPLICATION), read the outbox
--                   and endpoints, write delivery state and health, disable endpoints, expire
--                   old outbox rows.
--   walhook_app   : what the application needs — publish events, nothing else.
--   walhook_admin : what operators need for `walhook endpoint|status|replay|events`.

CREATE ROLE walhook_relay LOGIN REPLICATION PASSWORD 'change-me';
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
GRANT INSERT (tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id) ON walhook.outbox TO walhook_relay;  -- notifications (migration 006)
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO walhook_relay;

CREATE ROLE walhook_app LOGIN PASSWORD 'change-me';
GRANT USAGE ON SCHEMA walhook TO walhook_app;
-- Not xid: its default (the inserting transaction) is what lets walhook backfill after a slot loss.
GRANT INSERT (id, tenant_id, event_type, aggregate_id, merge_key, payload, created_at), SELECT (id)
  ON walhook.outbox TO walhook_app;  -- SELECT (id): publish() returns it
GRANT USAGE ON ALL SEQUENCES IN SCHEMA walhook TO walhook_app;
GRANT EXECUTE ON FUNCTION walhook.publish(text, text, jsonb, text, text) TO walhook_app;

CREATE ROLE walhook_admin LOGIN PASSWORD 'change-me';
GRANT USAGE ON SCHEMA walhook TO walhook_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.endpoints, walhook.deliveries, walhook.endpoint_health TO walhook_admin;
GRANT SELECT ON walhook.outbox TO walhook_admin;
GRANT SELECT, INSERT ON walhook.recoveries TO walhook_admin;  -- walhook recover
GRANT USAGE ON ALL SEQUENCES IN SCHEMA walhook TO walhook_admin;
GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO walhook_admin;
