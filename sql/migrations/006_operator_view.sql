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

-- 4. walhook.* event types are walhook's own: publish() refuses them (walhook writes its
-- notifications with its own INSERT). The direct route (outbox.endpoint_id) is walhook's too:
-- the application role gets no INSERT on it.
CREATE OR REPLACE FUNCTION walhook.publish(tenant_id text, event_type text, payload jsonb,
                                           merge_key text DEFAULT NULL, aggregate_id text DEFAULT NULL)
RETURNS uuid LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  new_id uuid;
BEGIN
  IF octet_length(tenant_id) NOT BETWEEN 1 AND 256 THEN
    RAISE EXCEPTION 'walhook.publish: tenant_id must be 1 to 256 bytes (got %)', coalesce(octet_length(tenant_id), 0)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(event_type) NOT BETWEEN 1 AND 256 THEN
    RAISE EXCEPTION 'walhook.publish: event_type must be 1 to 256 bytes (got %)', coalesce(octet_length(event_type), 0)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- walhook.* is walhook's own (its notifications, README "Notifications"): an application
  -- cannot publish an event a receiver would take for one of walhook's.
  IF lower(publish.event_type) LIKE 'walhook.%' THEN
    RAISE EXCEPTION 'walhook.publish: event types walhook.* are reserved for walhook''s own notifications (got %)',
      publish.event_type USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(merge_key) > 1024 THEN
    RAISE EXCEPTION 'walhook.publish: merge_key is % bytes, at most 1024 are allowed', octet_length(merge_key)
      USING ERRCODE = 'invalid_parameter_value', HINT = 'Use an entity id, or a hash of a longer key.';
  END IF;
  IF octet_length(aggregate_id) > 1024 THEN
    RAISE EXCEPTION 'walhook.publish: aggregate_id is % bytes, at most 1024 are allowed', octet_length(aggregate_id)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, merge_key, aggregate_id)
  VALUES (publish.tenant_id, publish.event_type, publish.payload, publish.merge_key, publish.aggregate_id)
  RETURNING o.id INTO new_id;
  RETURN new_id;
END
$fn$;

-- 5. An endpoint removed by any means (migration 004's trigger) is nobody's contact any more.
CREATE OR REPLACE FUNCTION walhook.endpoint_removed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, walhook AS $fn$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN  -- a row removed, or its id changed
    INSERT INTO walhook.endpoints_removed (id, tenant_id, url, secret, event_types, max_concurrency, status, ordering)
    VALUES (OLD.id, OLD.tenant_id, OLD.url, OLD.secret, OLD.event_types, OLD.max_concurrency, OLD.status, OLD.ordering);
    UPDATE walhook.deliveries
       SET status = 'dead', last_error = 'endpoint removed', next_attempt_at = NULL, updated_at = now()
     WHERE endpoint_id = OLD.id AND status IN ('pending', 'sending');
    DELETE FROM walhook.endpoint_health WHERE endpoint_id = OLD.id;
    -- Endpoints that named it as their contact have none now: an id reused later (by another
    -- tenant, say) never receives their notifications.
    UPDATE walhook.endpoints SET contact_endpoint_id = NULL, updated_at = now() WHERE contact_endpoint_id = OLD.id;
    RETURN OLD;
  END IF;
  -- TRUNCATE (statement level, before: the rows are still there to copy).
  INSERT INTO walhook.endpoints_removed (id, tenant_id, url, secret, event_types, max_concurrency, status, ordering)
  SELECT e.id, e.tenant_id, e.url, e.secret, e.event_types, e.max_concurrency, e.status, e.ordering
    FROM walhook.endpoints e;
  UPDATE walhook.deliveries
     SET status = 'dead', last_error = 'endpoint removed', next_attempt_at = NULL, updated_at = now()
   WHERE status IN ('pending', 'sending');
  DELETE FROM walhook.endpoint_health;
  RETURN NULL;
END
$fn$;

-- The least-privilege roles of sql/roles.sql, if this database has them.
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    -- Notifications are outbox rows walhook writes itself; expired rotation secrets are dropped.
    GRANT INSERT (tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id) ON walhook.outbox TO walhook_relay;
    GRANT UPDATE (secret, secret_grace_until) ON walhook.endpoints TO walhook_relay;
  END IF;
END
$grant$;
