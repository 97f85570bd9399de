-- walhook schema, version 14: an endpoint's OAuth2 client credentials and its own egress proxy
-- (issue 22; docs/endpoint-policies.md, "OAuth2 client credentials" and "Egress proxy").
--
--   * oauth_token_url, oauth_client_id, oauth_client_secret, oauth_scope: each attempt carries
--     `Authorization: Bearer <token>`, a token walhook gets from the token URL by the client
--     credentials grant (RFC 6749 §4.4) and keeps until shortly before it expires; a 401 from the
--     endpoint fetches a new one and repeats the attempt once. The first three go together; the
--     secret is kept like `secret` and shown only as a keyed fingerprint.
--   * proxy: how the endpoint's attempts (and its token requests) leave: 'direct' (never through
--     walhook run --proxy), or an http://host:port proxy of its own. NULL: as walhook run says.
--
-- A removed endpoint's copy keeps them: the attempts owed to it carry its token and take its way.

ALTER TABLE walhook.endpoints
  ADD COLUMN oauth_token_url text CHECK (octet_length(oauth_token_url) <= 2048),
  ADD COLUMN oauth_client_id text CHECK (octet_length(oauth_client_id) BETWEEN 1 AND 512),
  ADD COLUMN oauth_client_secret text CHECK (octet_length(oauth_client_secret) BETWEEN 1 AND 1024),
  ADD COLUMN oauth_scope text CHECK (octet_length(oauth_scope) <= 1024),
  ADD COLUMN proxy text CHECK (proxy = 'direct' OR (proxy ~* '^http://' AND octet_length(proxy) <= 512)),
  ADD CONSTRAINT endpoints_oauth_together CHECK (
    (oauth_token_url IS NULL) = (oauth_client_id IS NULL) AND (oauth_client_id IS NULL) = (oauth_client_secret IS NULL)
    AND (oauth_scope IS NULL OR oauth_token_url IS NOT NULL));

ALTER TABLE walhook.endpoints_removed
  ADD COLUMN oauth_token_url text,
  ADD COLUMN oauth_client_id text,
  ADD COLUMN oauth_client_secret text,
  ADD COLUMN oauth_scope text,
  ADD COLUMN proxy text;

-- Migration 012's trigger function, now also copying the OAuth2 settings and the proxy.
CREATE OR REPLACE FUNCTION walhook.endpoint_removed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, walhook AS $fn$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN  -- a row removed, or its id changed
    INSERT INTO walhook.endpoints_removed (id, tenant_id, url, secret, event_types, max_concurrency, status, ordering,
                                           headers, secret_headers, oauth_token_url, oauth_client_id,
                                           oauth_client_secret, oauth_scope, proxy)
    VALUES (OLD.id, OLD.tenant_id, OLD.url, OLD.secret, OLD.event_types, OLD.max_concurrency, OLD.status, OLD.ordering,
            OLD.headers, OLD.secret_headers, OLD.oauth_token_url, OLD.oauth_client_id, OLD.oauth_client_secret,
            OLD.oauth_scope, OLD.proxy);
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
                                         headers, secret_headers, oauth_token_url, oauth_client_id,
                                         oauth_client_secret, oauth_scope, proxy)
  SELECT e.id, e.tenant_id, e.url, e.secret, e.event_types, e.max_concurrency, e.status, e.ordering,
         e.headers, e.secret_headers, e.oauth_token_url, e.oauth_client_id, e.oauth_client_secret,
         e.oauth_scope, e.proxy
    FROM walhook.endpoints e;
  UPDATE walhook.deliveries
     SET status = 'dead', last_error = 'endpoint removed', next_attempt_at = NULL, updated_at = now()
   WHERE status IN ('pending', 'sending');
  DELETE FROM walhook.endpoint_health;
  RETURN NULL;
END
$fn$;
