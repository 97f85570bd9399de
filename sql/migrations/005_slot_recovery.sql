-- walhook schema, version 5: nothing lost when the replication slot is lost.
--
-- A slot can vanish (dropped, or not on a promoted standby) or be invalidated
-- (max_slot_wal_keep_size). A new slot only holds what commits after it is created; the outbox
-- still holds every event. To know which outbox rows a new slot misses and walhook has not
-- handled, walhook keeps two things (docs/decisions.md, "Slot loss"):
--
--   * each outbox row's inserting transaction (xid, top-level even from a subtransaction);
--   * with its slot progress, a snapshot (pg_current_snapshot) every transaction visible in which
--     walhook has handled: delivered, or written to walhook.deliveries. It is taken while
--     streaming and kept only once the acknowledged position has passed the WAL insert position
--     read right after it.
--
-- After a loss, the rows to backfill are those whose transaction is not visible in that snapshot
-- but is visible in the snapshot the new slot exports at its consistent point.

-- Added without a default first, so existing rows are not rewritten (they stay NULL: rows from
-- before this version are never backfilled automatically; `walhook recover --since` can).
ALTER TABLE walhook.outbox ADD COLUMN xid xid8;
ALTER TABLE walhook.outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
ALTER TABLE walhook.outbox ADD CONSTRAINT outbox_xid_set CHECK (xid IS NOT NULL) NOT VALID;
CREATE INDEX outbox_xid ON walhook.outbox (xid);

-- Every transaction visible in it is handled (see above); NULL until walhook recorded one.
ALTER TABLE walhook.slot_progress ADD COLUMN delivered_snapshot pg_snapshot;

-- Backfills: one row per slot incident (walhook's own) or operator request (`walhook recover`).
-- A slot incident's range is (since_snapshot, until_snapshot]: transactions visible in the new
-- slot's exported snapshot and not in the last delivered snapshot. An operator's is created_at
-- in [since_time, until_time), optionally for one tenant. The walhook streaming `slot_name`
-- runs it through its normal delivery path and marks it done once every delivery it made is
-- delivered or written to walhook.deliveries; a crash before that runs it again.
CREATE TABLE walhook.recoveries (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  slot_name      text NOT NULL,
  reason         text NOT NULL,       -- 'slot missing', 'slot invalidated', 'operator: …'
  -- creating_slot: the slot is being replaced (a crash here drops and creates it again);
  -- pending: to be backfilled; done; skipped: nothing can be backfilled (no snapshot recorded).
  state          text NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('creating_slot', 'pending', 'done', 'skipped')),
  since_snapshot pg_snapshot,
  until_snapshot pg_snapshot,
  slot_lsn       pg_lsn,              -- the new slot's consistent point
  since_time     timestamptz,
  until_time     timestamptz,
  tenant_id      text,
  requested_by   text,
  events         bigint,              -- outbox rows backfilled (when done)
  deliveries     bigint,              -- deliveries they made
  created_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz
);
CREATE INDEX recoveries_open ON walhook.recoveries (slot_name, id) WHERE state IN ('creating_slot', 'pending');

-- The least-privilege roles of sql/roles.sql, if this database has them. The application may no
-- longer write xid itself (column privileges without it): the default is what makes it true.
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    GRANT SELECT, INSERT, UPDATE ON walhook.recoveries TO walhook_relay;
    GRANT USAGE ON SEQUENCE walhook.recoveries_id_seq TO walhook_relay;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_admin') THEN
    GRANT SELECT, INSERT ON walhook.recoveries TO walhook_admin;
    GRANT USAGE ON SEQUENCE walhook.recoveries_id_seq TO walhook_admin;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_app') THEN
    REVOKE INSERT ON walhook.outbox FROM walhook_app;
    GRANT INSERT (id, tenant_id, event_type, aggregate_id, merge_key, payload, created_at) ON walhook.outbox TO walhook_app;
  END IF;
END
$grant$;

-- Shards (`walhook run --shard K/N`, relay/shard.hpp): how many the database is split into, so
-- a walhook started with another count (say, an old one after `walhook reshard`) refuses to run
-- instead of delivering a second time what the current shards deliver. No row: one walhook.
CREATE TABLE walhook.shard_layout (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  shards     integer NOT NULL CHECK (shards BETWEEN 1 AND 64),
  changed_at timestamptz NOT NULL DEFAULT now()
);
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    GRANT SELECT ON walhook.shard_layout TO walhook_relay;
  END IF;
END
$grant$;
