-- walhook schema, version 4: input that must not wedge walhook, and endpoints removed by any means.

-- 1. Merge keys of any length. A btree entry holds at most ~2,700 bytes: a pending delivery with a
-- longer merge key was refused (SQLSTATE 54000) and, retried forever, held the slot. The merge
-- index now holds the key's md5; statements compare md5(merge_key) and merge_key both.
DROP INDEX walhook.deliveries_pending_merge_key;
CREATE UNIQUE INDEX deliveries_pending_merge_key ON walhook.deliveries (endpoint_id, md5(merge_key))
  WHERE status = 'pending' AND merge_key IS NOT NULL;

-- Absurd values are refused where they are written, with a readable error (publish() and any
-- direct INSERT). NOT VALID: rows already in the outbox are not re-checked.
ALTER TABLE walhook.outbox
  ADD CONSTRAINT outbox_merge_key_length CHECK (octet_length(merge_key) <= 1024) NOT VALID,
  ADD CONSTRAINT outbox_aggregate_id_length CHECK (octet_length(aggregate_id) <= 1024) NOT VALID,
  ADD CONSTRAINT outbox_tenant_id_length CHECK (octet_length(tenant_id) BETWEEN 1 AND 256) NOT VALID,
  ADD CONSTRAINT outbox_event_type_length CHECK (octet_length(event_type) BETWEEN 1 AND 256) NOT VALID;

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

-- 2. Endpoints removed by any means (DELETE, TRUNCATE, `walhook endpoint remove`, a changed id).
--
-- Their undelivered work ends dead with the reason and their health row goes, so an id reused
-- later (TRUNCATE … RESTART IDENTITY) starts clean. A copy of the removed row is kept until
-- walhook has read the removal from its slot: walhook's start-up read of walhook.endpoints is of
-- *now*, while the slot replays older transactions — events committed before the removal are
-- still routed to the endpoint they were committed for. walhook deletes the copy (by endpoint and
-- the removing transaction's xid) once it has streamed the removal.
CREATE TABLE walhook.endpoints_removed (
  removal_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  removed_xid     xid8 NOT NULL DEFAULT pg_current_xact_id(),
  removed_at      timestamptz NOT NULL DEFAULT now(),
  id              bigint NOT NULL,
  tenant_id       text NOT NULL,
  url             text NOT NULL,
  secret          text NOT NULL,
  event_types     text[],
  max_concurrency integer NOT NULL,
  status          text NOT NULL,
  ordering        text NOT NULL
);
CREATE INDEX endpoints_removed_id ON walhook.endpoints_removed (id, removal_id);

-- SECURITY DEFINER: whoever may delete endpoints ends their deliveries, without needing rights
-- on walhook's own tables.
CREATE FUNCTION walhook.endpoint_removed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, walhook AS $fn$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN  -- a row removed, or its id changed
    INSERT INTO walhook.endpoints_removed (id, tenant_id, url, secret, event_types, max_concurrency, status, ordering)
    VALUES (OLD.id, OLD.tenant_id, OLD.url, OLD.secret, OLD.event_types, OLD.max_concurrency, OLD.status, OLD.ordering);
    UPDATE walhook.deliveries
       SET status = 'dead', last_error = 'endpoint removed', next_attempt_at = NULL, updated_at = now()
     WHERE endpoint_id = OLD.id AND status IN ('pending', 'sending');
    DELETE FROM walhook.endpoint_health WHERE endpoint_id = OLD.id;
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
CREATE TRIGGER endpoint_deleted AFTER DELETE ON walhook.endpoints
  FOR EACH ROW EXECUTE FUNCTION walhook.endpoint_removed();
CREATE TRIGGER endpoint_id_changed AFTER UPDATE OF id ON walhook.endpoints
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION walhook.endpoint_removed();
CREATE TRIGGER endpoints_truncated BEFORE TRUNCATE ON walhook.endpoints
  FOR EACH STATEMENT EXECUTE FUNCTION walhook.endpoint_removed();

-- 3. Updates of endpoints carry the whole old row. pgoutput sends a TOASTed column an UPDATE did
-- not change as "unchanged" in the new tuple; with the full old tuple walhook never has to make up
-- a value it has not seen (a long secret list, a long event_types array).
ALTER TABLE walhook.endpoints REPLICA IDENTITY FULL;

-- The least-privilege relay role of sql/roles.sql, if this database has it: walhook reads and
-- forgets the copies of removed endpoints.
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_relay') THEN
    GRANT SELECT, DELETE ON walhook.endpoints_removed TO walhook_relay;
  END IF;
END
$grant$;
