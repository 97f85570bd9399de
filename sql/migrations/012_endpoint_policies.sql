-- walhook schema, version 12: what operators set per endpoint (issue 22; docs/endpoint-policies.md).
--
--   * headers: static request headers, each "Name: value" (an API key, a routing hint), sent on
--     every attempt after walhook's own; names are RFC 9110 tokens, never one walhook or HTTP
--     framing owns (Host, Content-Length, webhook-*, …: the CLI refuses them, and walhook run
--     leaves an endpoint with one unusable rather than send it).
--   * secret_headers: the same, for values that are secrets (Authorization: Bearer …). Kept like
--     `secret`: shown nowhere but as fingerprints (status, console, API).
--   * filter: a JSON match expression on the webhook body (docs/endpoint-policies.md); an event it
--     does not match is not routed to the endpoint (no delivery, counted). NULL: every event.
--   * max_rate: attempts started at most per second or per minute ("20/s", "600/m"), over any
--     window of that length; rate_burst: at most that many at once (NULL: the whole rate).
--
-- A removed endpoint's copy keeps its headers: the attempts owed to it before the removal carry
-- them (an API key the receiver checks).

ALTER TABLE walhook.endpoints
  ADD COLUMN headers text[] CHECK (headers IS NULL OR cardinality(headers) <= 32),
  ADD COLUMN secret_headers text[] CHECK (secret_headers IS NULL OR cardinality(secret_headers) <= 32),
  ADD COLUMN filter jsonb CHECK (filter IS NULL OR jsonb_typeof(filter) = 'object'),
  ADD COLUMN max_rate text CHECK (max_rate IS NULL OR max_rate ~ '^[1-9][0-9]{0,5}/[sm]$'),
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
