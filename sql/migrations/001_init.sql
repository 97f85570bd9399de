-- walhook schema, version 1 (docs/architecture.md, Schema). Applied by `walhook migrate` inside one transaction.

CREATE SCHEMA IF NOT EXISTS walhook;

-- The outbox: written by the application in the same transaction as its business change,
-- read by walhook from the logical replication slot (INSERTs only). An event's identity is its
-- uuid `id`; `seq` may be reused after TRUNCATE ... RESTART IDENTITY.
CREATE TABLE walhook.outbox (
  seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id           uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
  tenant_id    text NOT NULL,
  event_type   text NOT NULL,
  aggregate_id text,
  merge_key    text,
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_created_at ON walhook.outbox (created_at);
CREATE INDEX outbox_tenant_created_at ON walhook.outbox (tenant_id, created_at);

-- Customer endpoints, owned by operators and the application. walhook follows this table
-- through the replication stream and writes only status = 'disabled' here.
CREATE TABLE walhook.endpoints (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id       text NOT NULL,
  url             text NOT NULL,
  secret          text NOT NULL,              -- one or more space-separated whsec_… secrets
  event_types     text[],                      -- NULL: every event type of the tenant
  max_concurrency integer NOT NULL DEFAULT 4 CHECK (max_concurrency BETWEEN 1 AND 1000),
  status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled')),
  ordering        text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'aggregate')),
  description     text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX endpoints_tenant ON walhook.endpoints (tenant_id);

-- Health of each endpoint, owned by walhook (kept apart so operators' writes never collide
-- with walhook's): circuit breaker and auto-disable state survive restarts here.
CREATE TABLE walhook.endpoint_health (
  endpoint_id          bigint PRIMARY KEY,
  consecutive_failures integer NOT NULL DEFAULT 0,
  first_failure_at     timestamptz,
  last_failure_at      timestamptz,
  last_success_at      timestamptz,
  paused_until         timestamptz,
  probe_rounds         integer NOT NULL DEFAULT 0,
  last_status          integer,
  last_error           text,
  disabled_at          timestamptz,
  disabled_reason      text,
  updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Delivery state written back by walhook, in batches, only for deliveries that did not succeed
-- at once (and for all with --record=all). One row per (endpoint, event).
CREATE TABLE walhook.deliveries (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id      bigint NOT NULL,
  event_id         uuid NOT NULL,
  aggregate_id     text,
  merge_key        text,
  status           text NOT NULL CHECK (status IN ('pending', 'sending', 'delivered', 'dead')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz,
  last_attempt_at  timestamptz,
  last_status      integer,
  last_error       text,
  merged_count     integer NOT NULL DEFAULT 0,
  event_created_at timestamptz NOT NULL,
  commit_lsn       pg_lsn,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz,
  UNIQUE (endpoint_id, event_id)
);
-- Merge (coalescing): at most one pending delivery per (endpoint, merge key).
CREATE UNIQUE INDEX deliveries_pending_merge_key ON walhook.deliveries (endpoint_id, merge_key)
  WHERE status = 'pending' AND merge_key IS NOT NULL;
-- Due work per endpoint, earliest first (claims and the retry timer).
CREATE INDEX deliveries_pending_due ON walhook.deliveries (endpoint_id, next_attempt_at)
  WHERE status = 'pending';
-- Stale 'sending' rows after a crash.
CREATE INDEX deliveries_sending ON walhook.deliveries (updated_at) WHERE status = 'sending';
-- Operators: a status overview and replay by endpoint and time.
CREATE INDEX deliveries_endpoint_status ON walhook.deliveries (endpoint_id, status, created_at);

-- The application's entry point: returns the new event's id.
CREATE FUNCTION walhook.publish(tenant_id text, event_type text, payload jsonb,
                                merge_key text DEFAULT NULL, aggregate_id text DEFAULT NULL)
RETURNS uuid LANGUAGE sql VOLATILE AS $fn$
  INSERT INTO walhook.outbox (tenant_id, event_type, payload, merge_key, aggregate_id)
  VALUES ($1, $2, $3, $4, $5)
  RETURNING id
$fn$;

-- Publications read by walhook's slot: outbox INSERTs (the events), and every change of the
-- endpoints table (so walhook follows endpoints without polling). The tables walhook writes
-- (deliveries, endpoint_health) are never published: walhook would read its own writes back.
CREATE PUBLICATION walhook FOR TABLE walhook.outbox WITH (publish = 'insert');
CREATE PUBLICATION walhook_endpoints FOR TABLE walhook.endpoints;
