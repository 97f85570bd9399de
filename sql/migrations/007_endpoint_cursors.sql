-- walhook schema, version 7: an endpoint that falls behind follows the outbox by cursor.
--
-- An endpoint that cannot take its events as they stream (down, paused by its breaker or an
-- operator, disabled, or slower than the stream) no longer costs a walhook.deliveries row per
-- event: walhook records where it is in the outbox and reads its events back from
-- walhook.outbox when it can take them (docs/decisions.md, "The outbox as a log").
--
-- A cursor says which transactions are handled for its endpoint — delivered, or written to
-- walhook.deliveries: those visible in `covered`, those in `also`, and, while a window is open,
-- the outbox rows of `window_snapshot` up to seq `window_after`. Every other committed outbox row
-- routed to the endpoint is owed to it. No row: the endpoint follows the stream.
CREATE TABLE walhook.endpoint_cursors (
  -- No foreign key: operators may TRUNCATE walhook.endpoints. A cursor belongs to the endpoint
  -- with this id *and* tenant; walhook deletes it when it streams the endpoint's removal.
  endpoint_id     bigint PRIMARY KEY,
  tenant_id       text NOT NULL,
  covered         pg_snapshot NOT NULL,
  also            xid8[] NOT NULL DEFAULT '{}',
  window_snapshot pg_snapshot,              -- the snapshot a paged read is bounded by; NULL: none open
  window_after    bigint NOT NULL DEFAULT 0,-- outbox.seq of the window's rows handled so far
  reason          text NOT NULL,            -- why it left the stream (the latest time)
  events_drained  bigint NOT NULL DEFAULT 0,-- deliveries read back from the outbox since it entered
  entered_at      timestamptz NOT NULL DEFAULT now(),
  covered_at      timestamptz NOT NULL DEFAULT now(),  -- when `covered` last moved (its lag: now() - this)
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Only walhook's relay writes cursors; the admin role reads them (status, console); the
-- application role has no access (sql/roles.sql).
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    GRANT SELECT, INSERT, UPDATE, DELETE ON walhook.endpoint_cursors TO walhook_relay;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_admin') THEN
    GRANT SELECT ON walhook.endpoint_cursors TO walhook_admin;
  END IF;
END
$grant$;

-- A cursor whose position is older than the give-up age (walhook run --give-up-after-h, 72 h)
-- ends what it owed dead in one step: a range, with a reason and a count — never a silent
-- deletion by retention. The range is the transactions not covered by `covered`/`also` and
-- visible in `until_snapshot`, of the endpoint's tenant.
CREATE TABLE walhook.dead_ranges (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id     bigint NOT NULL,
  tenant_id       text NOT NULL,
  covered         pg_snapshot NOT NULL,
  also            xid8[] NOT NULL,
  until_snapshot  pg_snapshot NOT NULL,
  events          bigint NOT NULL,   -- outbox rows of the tenant in the range when it was given up
  reason          text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_ranges_endpoint ON walhook.dead_ranges (endpoint_id, id);
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    GRANT SELECT, INSERT ON walhook.dead_ranges TO walhook_relay;
    GRANT USAGE ON SEQUENCE walhook.dead_ranges_id_seq TO walhook_relay;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_admin') THEN
    GRANT SELECT ON walhook.dead_ranges TO walhook_admin;
  END IF;
END
$grant$;
