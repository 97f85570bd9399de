-- walhook schema, version 15: the tenant API of `walhook run --api-listen` (issue 23; docs/tenant-api.md).
--
--   * tenant_tokens: bearer tokens of the tenant API, one tenant each. Only the SHA-256 of a token
--     is kept (the token is printed once by `walhook tenant token create`); `scope` read allows
--     GET alone, manage every route. A revoked or expired token is refused; rows stay for the
--     audit trail.
--   * tenant_limits: what the operator lets a tenant do by itself: how many endpoints, and the
--     highest max_concurrency one may have. No row: the defaults of docs/tenant-api.md.
--   * tenant_audit: every change made through the tenant API, with the token's fingerprint.
--   * portal_codes, portal_sessions: the tenant portal (/portal/). `walhook tenant portal-link`
--     stores a one-time code's hash; the portal exchanges the code, once and before it expires,
--     for a session (its id's hash, a CSRF token's hash, an absolute expiry).
--
-- None of these is readable or writable by the application's role (sql/roles.sql grants them to
-- walhook_admin alone): a token row written by the application would open another tenant's data.

CREATE TABLE walhook.tenant_tokens (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id    text NOT NULL CHECK (octet_length(tenant_id) BETWEEN 1 AND 200),
  token_sha256 text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
  scope        text NOT NULL CHECK (scope IN ('read', 'manage')),
  description  text CHECK (octet_length(description) <= 500),
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz,
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX tenant_tokens_tenant ON walhook.tenant_tokens (tenant_id, created_at);

CREATE TABLE walhook.tenant_limits (
  tenant_id       text PRIMARY KEY,
  max_endpoints   integer NOT NULL CHECK (max_endpoints BETWEEN 0 AND 100000),
  max_concurrency integer NOT NULL CHECK (max_concurrency BETWEEN 1 AND 1000),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE walhook.tenant_audit (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT now(),
  tenant_id   text NOT NULL,
  token       text NOT NULL,  -- the token's fingerprint (sha256:…), never the token
  action      text NOT NULL,  -- endpoint.create, endpoint.update, endpoint.delete, endpoint.pause, …
  endpoint_id bigint,
  detail      jsonb,
  remote      text
);
CREATE INDEX tenant_audit_tenant_at ON walhook.tenant_audit (tenant_id, at);

CREATE TABLE walhook.portal_codes (
  code_sha256 text PRIMARY KEY CHECK (code_sha256 ~ '^[0-9a-f]{64}$'),
  tenant_id   text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);

CREATE TABLE walhook.portal_sessions (
  session_sha256 text PRIMARY KEY CHECK (session_sha256 ~ '^[0-9a-f]{64}$'),
  tenant_id      text NOT NULL,
  csrf_sha256    text NOT NULL CHECK (csrf_sha256 ~ '^[0-9a-f]{64}$'),
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz NOT NULL
);
CREATE INDEX portal_sessions_expires ON walhook.portal_sessions (expires_at);

-- GET /v1/events pages a tenant's events by (created_at, seq): this index serves the order and
-- the cursor's row comparison, so a page costs the same on the first day and on the thirtieth.
CREATE INDEX outbox_tenant_created_seq ON walhook.outbox (tenant_id, created_at, seq);
DROP INDEX walhook.outbox_tenant_created_at;

DO $grants$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_admin') THEN
    GRANT SELECT, INSERT, UPDATE ON walhook.tenant_tokens, walhook.tenant_limits TO walhook_admin;
    GRANT DELETE ON walhook.tenant_limits TO walhook_admin;
    GRANT INSERT (tenant_id, event_type, payload, endpoint_id, by_walhook) ON walhook.outbox TO walhook_admin;
    GRANT SELECT, INSERT ON walhook.tenant_audit TO walhook_admin;
    GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.portal_codes, walhook.portal_sessions TO walhook_admin;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA walhook TO walhook_admin;
  END IF;
END
$grants$;
