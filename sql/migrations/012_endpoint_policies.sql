-- walhook schema, version 12: what operators set per endpoint (issue 22; docs/endpoint-policies.md),
-- and the trace context an event carries.
--
--   * headers: static request headers, each "Name: value" (an API key, a routing hint), sent on
--     every attempt after walhook's own; names are RFC 9110 tokens, never one walhook or HTTP
--     framing owns (Host, Content-Length, webhook-*, …: the CLI refuses them, and walhook run
--     leaves an endpoint with one unusable rather than send it).
--   * secret_headers: the same, for values that are secrets (Authorization: Bearer …). Kept like
--     `secret`: shown nowhere but as keyed fingerprints (the admin API, the console).
--   * filter: a JSON match expression on the webhook body (docs/endpoint-policies.md); an event it
--     does not match is not routed to the endpoint (no delivery, counted). NULL: every event. Kept
--     as the text given (not jsonb, which would rewrite numbers and drop a repeated name): what
--     walhook run evaluates is what the CLI checked.
--   * max_rate: attempts started at most per second or per minute ("20/s", "600/m"), over any
--     window of that length; rate_burst: at most that many at once (NULL: the whole rate).
--
-- A removed endpoint's copy keeps its headers: the attempts owed to it before the removal carry
-- them (an API key the receiver checks).

ALTER TABLE walhook.endpoints
  ADD COLUMN headers text[] CHECK (headers IS NULL OR cardinality(headers) <= 32),
  ADD COLUMN secret_headers text[] CHECK (secret_headers IS NULL OR cardinality(secret_headers) <= 32),
  ADD COLUMN filter text CHECK (filter IS NULL OR (octet_length(filter) <= 4096 AND jsonb_typeof(filter::jsonb) = 'object')),
  ADD COLUMN max_rate text CHECK (max_rate IS NULL OR (max_rate ~ '^[1-9][0-9]{0,5}/[sm]$'
                                                      AND split_part(max_rate, '/', 1)::int <= 100000)),
  ADD COLUMN rate_burst integer CHECK (rate_burst IS NULL OR rate_burst BETWEEN 1 AND 100000);

ALTER TABLE walhook.endpoints_removed
  ADD COLUMN headers text[],
  ADD COLUMN secret_headers text[];

-- Migration 006's trigger function, now also copying the headers.
CREATE OR REPLACE FUNCTION walhook.endpoint_removed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, walhook AS $fn$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN  -- a row removed, or its id changed
    INSERT INTO walhook.endpoints_removed (id, tenant_id, url, secret, event_types, max_concurrency, status, ordering,
                                           headers, secret_headers)
    VALUES (OLD.id, OLD.tenant_id, OLD.url, OLD.secret, OLD.event_types, OLD.max_concurrency, OLD.status, OLD.ordering,
            OLD.headers, OLD.secret_headers);
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
  INSERT INTO walhook.endpoints_removed (id, tenant_id, url, secret, event_types, max_concurrency, status, ordering,
                                         headers, secret_headers)
  SELECT e.id, e.tenant_id, e.url, e.secret, e.event_types, e.max_concurrency, e.status, e.ordering,
         e.headers, e.secret_headers
    FROM walhook.endpoints e;
  UPDATE walhook.deliveries
     SET status = 'dead', last_error = 'endpoint removed', next_attempt_at = NULL, updated_at = now()
   WHERE status IN ('pending', 'sending');
  DELETE FROM walhook.endpoint_health;
  RETURN NULL;
END
$fn$;

-- The trace of the transaction that produced an event (W3C Trace Context's traceparent header,
-- as the application had it): each attempt sends it on as a child — the same trace id, a span id
-- of walhook's own — in the traceparent header (and a broker message's headers). A value that is
-- not a valid traceparent is kept but never sent (delivery/trace_context.hpp). NOT VALID: nothing
-- to check in existing rows.
ALTER TABLE walhook.outbox ADD COLUMN traceparent text;
ALTER TABLE walhook.outbox ADD CONSTRAINT outbox_traceparent_length CHECK (octet_length(traceparent) <= 256) NOT VALID;

-- publish() takes it too; as in migration 009, the old function goes (a seventh parameter with a
-- default beside it would make shorter calls ambiguous). Calls by position or name still work.
DROP FUNCTION walhook.publish(text, text, jsonb, text, text, text);
CREATE FUNCTION walhook.publish(tenant_id text, event_type text, payload jsonb, merge_key text DEFAULT NULL,
                                aggregate_id text DEFAULT NULL, aggregate_type text DEFAULT NULL,
                                traceparent text DEFAULT NULL)
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
  -- walhook.* is walhook's own (its notifications, README "Notifications").
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
  IF octet_length(aggregate_type) > 256 THEN
    RAISE EXCEPTION 'walhook.publish: aggregate_type is % bytes, at most 256 are allowed', octet_length(aggregate_type)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(publish.traceparent) > 256 THEN
    RAISE EXCEPTION 'walhook.publish: traceparent is % bytes, at most 256 are allowed', octet_length(publish.traceparent)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- The INSERT names only the columns given: a role granted INSERT on the older columns only
  -- still publishes without an aggregate type or a traceparent.
  IF publish.aggregate_type IS NULL AND publish.traceparent IS NULL THEN
    INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, merge_key, aggregate_id)
    VALUES (publish.tenant_id, publish.event_type, publish.payload, publish.merge_key, publish.aggregate_id)
    RETURNING o.id INTO new_id;
  ELSIF publish.traceparent IS NULL THEN
    INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, merge_key, aggregate_id, aggregate_type)
    VALUES (publish.tenant_id, publish.event_type, publish.payload, publish.merge_key, publish.aggregate_id,
            publish.aggregate_type)
    RETURNING o.id INTO new_id;
  ELSE
    INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, merge_key, aggregate_id, aggregate_type, traceparent)
    VALUES (publish.tenant_id, publish.event_type, publish.payload, publish.merge_key, publish.aggregate_id,
            publish.aggregate_type, publish.traceparent)
    RETURNING o.id INTO new_id;
  END IF;
  RETURN new_id;
END
$fn$;

-- The least-privilege roles of sql/roles.sql, if this database has them: the application may
-- publish a traceparent (and runs the new publish()).
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_app') THEN
    GRANT INSERT (traceparent) ON walhook.outbox TO walhook_app;
    GRANT EXECUTE ON FUNCTION walhook.publish(text, text, jsonb, text, text, text, text) TO walhook_app;
  END IF;
END
$grant$;
