-- walhook schema, version 6: the operator's view (console, notifications, secret rotation).

-- 1. Direct routing. An outbox row with endpoint_id set goes to that endpoint only (if it is of
-- the row's tenant), whatever its event types; NULL routes by tenant and type as before. walhook
-- publishes its own notifications this way to an endpoint's contact endpoint (walhook.endpoint.*).
ALTER TABLE walhook.outbox ADD COLUMN endpoint_id bigint;

-- 2. Per endpoint: where notifications about it go (another endpoint, usually of the same
-- tenant: the customer's technical contact), and secret rotation. `walhook endpoint
-- rotate-secret` puts the new secret first and keeps the old one after it until
-- secret_grace_until; walhook run then drops every secret but the first.
ALTER TABLE walhook.endpoints
  ADD COLUMN contact_endpoint_id bigint,
  ADD COLUMN secret_grace_until timestamptz;

-- 3. The age of the oldest open delivery per endpoint (/metrics on every scrape, the console's
-- sort): one index probe per endpoint instead of a scan of every open row.
CREATE INDEX deliveries_open_age ON walhook.deliveries (endpoint_id, event_created_at)
  WHERE status IN ('pending', 'sending');

-- The least-privilege roles of sql/roles.sql, if this database has them.
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    -- Notifications are outbox rows walhook writes itself; expired rotation secrets are dropped.
    GRANT INSERT (tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id) ON walhook.outbox TO walhook_relay;
    GRANT UPDATE (secret, secret_grace_until) ON walhook.endpoints TO walhook_relay;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_app') THEN
    GRANT INSERT (endpoint_id) ON walhook.outbox TO walhook_app;
  END IF;
END
$grant$;
