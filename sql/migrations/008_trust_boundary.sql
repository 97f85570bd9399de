-- walhook schema, version 8: only walhook speaks for walhook; retention never erases what is
-- still owed (docs/architecture.md, "Trust boundary").

-- 1. A contact endpoint is one of the same tenant's: walhook's notifications about an endpoint
-- carry its tenant's data, so they may only go to that tenant. Enforced by a composite foreign
-- key, whatever writes the row (the CLI, the admin API, plain SQL): a contact of another tenant
-- is refused, and so is moving a contact to another tenant while an endpoint names it.
-- Existing contacts of another tenant (or of no endpoint) are cleared first, with a notice.
ALTER TABLE walhook.endpoints ADD CONSTRAINT endpoints_tenant_id_id UNIQUE (tenant_id, id);
DO $contacts$
DECLARE
  cleared bigint;
BEGIN
  UPDATE walhook.endpoints e SET contact_endpoint_id = NULL, updated_at = now()
   WHERE e.contact_endpoint_id IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM walhook.endpoints c WHERE c.id = e.contact_endpoint_id AND c.tenant_id = e.tenant_id);
  GET DIAGNOSTICS cleared = ROW_COUNT;
  IF cleared > 0 THEN
    RAISE NOTICE 'walhook migration 8: cleared the contact endpoint of % endpoint(s): it was another tenant''s or gone', cleared;
  END IF;
END
$contacts$;
ALTER TABLE walhook.endpoints ADD CONSTRAINT endpoints_contact_same_tenant
  FOREIGN KEY (tenant_id, contact_endpoint_id) REFERENCES walhook.endpoints (tenant_id, id)
  ON DELETE SET NULL (contact_endpoint_id);

-- 2. walhook.* event types and merge keys are walhook's own. publish() refused the types
-- (migration 6); a direct INSERT did not. A row may carry them only if walhook wrote it:
-- by_walhook, a column only walhook's role may write (sql/roles.sql; the application's role has
-- no INSERT on it), so the application can neither forge one of walhook's notifications nor
-- merge a row into one. NOT VALID: rows written before are not checked again (walhook refuses
-- them when it reads them).
ALTER TABLE walhook.outbox ADD COLUMN by_walhook boolean NOT NULL DEFAULT false;
ALTER TABLE walhook.outbox ADD CONSTRAINT outbox_walhook_reserved
  CHECK (by_walhook OR (lower(event_type) NOT LIKE 'walhook.%' AND lower(coalesce(merge_key, '')) NOT LIKE 'walhook.%'))
  NOT VALID;

-- 3. walhook's own clock of an event. created_at is the application's (a backfill of old
-- business events carries old times): walhook measures an event's age
-- for retries (give-up) and retention from stored_at, the time of the inserting transaction,
-- which the application's role cannot write. Rows written before get this migration's time.
ALTER TABLE walhook.outbox ADD COLUMN stored_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX outbox_stored_at ON walhook.outbox (stored_at);
DROP INDEX IF EXISTS walhook.outbox_created_at;  -- retention's index until now

-- 4. Retention keeps an outbox row while a delivery that may still send it or replay it (pending,
-- sending, dead) names it: one probe per expiring row.
CREATE INDEX deliveries_open_event ON walhook.deliveries (event_id) WHERE status IN ('pending', 'sending', 'dead');

-- 5. An endpoint gets the events committed after it was created, whichever way they reach it
-- (the stream, a slot-loss backfill, `walhook recover`, a cursor): the snapshot of its creating
-- transaction tells which transactions had committed before it. NULL (endpoints created before
-- this migration): every event of its subscription.
ALTER TABLE walhook.endpoints ADD COLUMN created_snapshot pg_snapshot;
ALTER TABLE walhook.endpoints ALTER COLUMN created_snapshot SET DEFAULT pg_current_snapshot();

-- The application's role may not write stored_at (walhook's clock), by_walhook, nor endpoint_id
-- (migration 6); walhook's may write by_walhook.
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_app') THEN
    REVOKE INSERT ON walhook.outbox FROM walhook_app;
    GRANT INSERT (id, tenant_id, event_type, aggregate_id, merge_key, payload, created_at) ON walhook.outbox TO walhook_app;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    GRANT INSERT (tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id, by_walhook) ON walhook.outbox
      TO walhook_relay;
  END IF;
END
$grant$;
