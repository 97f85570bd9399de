-- walhook schema, version 9: the application's own outbox table (issue 20; docs/decisions.md,
-- "Your own outbox table: a bridge, not a second source").
--
-- walhook keeps reading walhook.outbox only: its cursors, slot-loss backfills, `walhook
-- recover`, replay, resend, retention and the API's verdicts all need columns a table of the
-- application's does not have (xid, seq, stored_at, by_walhook, endpoint_id). `walhook migrate
-- --outbox-table SCHEMA.TABLE` installs a bridge instead: an AFTER INSERT trigger on that table
-- whose function copies each new row, mapped, into walhook.outbox in the same transaction.

-- 1. The kind of aggregate (Debezium's aggregatetype: "order", "customer"), beside its id. A
-- nullable column without a default: no rewrite. NOT VALID: nothing to check in existing rows.
ALTER TABLE walhook.outbox ADD COLUMN aggregate_type text;
ALTER TABLE walhook.outbox ADD CONSTRAINT outbox_aggregate_type_length CHECK (octet_length(aggregate_type) <= 256) NOT VALID;

-- 2. A row a bridge could not map (no id, no type, a payload that is not JSON, …): the bridge
-- never fails the application's INSERT; it writes this row instead, with the reason here, and
-- walhook ends every delivery of it dead with that reason (relay/core/rows.cpp, event_from_row;
-- a replay of it ends dead again). Written only by a bridge's function: no role of sql/roles.sql
-- gets INSERT on it.
ALTER TABLE walhook.outbox ADD COLUMN rejected text;

-- 3. publish() takes the aggregate's type too. A sixth parameter with a default beside the old
-- five-parameter function would make every call with fewer arguments ambiguous: the old one goes.
-- Calls by position or by name keep working unchanged.
DROP FUNCTION walhook.publish(text, text, jsonb, text, text);
CREATE FUNCTION walhook.publish(tenant_id text, event_type text, payload jsonb, merge_key text DEFAULT NULL,
                                aggregate_id text DEFAULT NULL, aggregate_type text DEFAULT NULL)
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
  -- Without an aggregate type the INSERT names the columns it always did: a role granted INSERT
  -- on those columns only (before this version) still publishes.
  IF publish.aggregate_type IS NULL THEN
    INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, merge_key, aggregate_id)
    VALUES (publish.tenant_id, publish.event_type, publish.payload, publish.merge_key, publish.aggregate_id)
    RETURNING o.id INTO new_id;
  ELSE
    INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, merge_key, aggregate_id, aggregate_type)
    VALUES (publish.tenant_id, publish.event_type, publish.payload, publish.merge_key, publish.aggregate_id,
            publish.aggregate_type)
    RETURNING o.id INTO new_id;
  END IF;
  RETURN new_id;
END
$fn$;

-- 4. The bridges, one row per bridged table: what `walhook status` and operators read.
CREATE TABLE walhook.outbox_bridges (
  source        text PRIMARY KEY,         -- the bridged table, schema-qualified, quoted as needed
  function_name text NOT NULL,            -- its trigger function, in schema walhook
  columns       jsonb NOT NULL,           -- the mapping: {"id": "id", "type": "event_type", …}
  tenant        text,                     -- the one tenant of every row (no tenant column); NULL: from the row
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);

-- 5. A bridge's pieces that do not depend on the mapping. Plain SQL expressions without a SET
-- clause, so the planner inlines them into the trigger function's own expressions (whose
-- search_path is pinned): no function call per row. They name only pg_catalog's functions.

-- The event id of a bridged row from its own id (text): a UUID as it is; anything else (an
-- integer, a string) a UUID derived from the table and the id — SHA-256, laid out as a version 8
-- UUID (RFC 9562) — so the same row always has the same webhook-id. NULL or empty: NULL.
CREATE FUNCTION walhook.outbox_bridge_derived_id(hash text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  -- 32 hex digits → version 8 (digit 13), variant 10xx (digit 17).
  SELECT overlay(overlay(hash PLACING '8' FROM 13 FOR 1)
                 PLACING substr('89ab', ((('x' || substr(hash, 17, 1))::bit(4)::int) & 3) + 1, 1) FROM 17 FOR 1)::uuid
$fn$;
CREATE FUNCTION walhook.outbox_bridge_id(source text, id text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT CASE
    WHEN id IS NULL OR id = '' THEN NULL
    WHEN id ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN id::uuid
    ELSE walhook.outbox_bridge_derived_id(substr(encode(sha256(convert_to(source || ':' || id, 'UTF8')), 'hex'), 1, 32))
  END
$fn$;

-- Why a mapped row cannot be an event (the limits of walhook.outbox's constraints and of
-- publish()), or NULL if it can.
CREATE FUNCTION walhook.outbox_bridge_fault(id uuid, tenant_id text, event_type text, payload jsonb,
                                            aggregate_id text, aggregate_type text, merge_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT CASE
    WHEN id IS NULL THEN 'the id is NULL or empty'
    WHEN tenant_id IS NULL THEN 'the tenant is NULL'
    WHEN octet_length(tenant_id) NOT BETWEEN 1 AND 256 THEN format('the tenant must be 1 to 256 bytes (got %s)', octet_length(tenant_id))
    WHEN event_type IS NULL THEN 'the event type is NULL'
    WHEN octet_length(event_type) NOT BETWEEN 1 AND 256 THEN format('the event type must be 1 to 256 bytes (got %s)', octet_length(event_type))
    WHEN lower(event_type) LIKE 'walhook.%' THEN format('event types walhook.* are reserved for walhook''s own notifications (got %s)', left(event_type, 64))
    WHEN payload IS NULL THEN 'the payload is NULL'
    WHEN octet_length(aggregate_id) > 1024 THEN format('the aggregate id is %s bytes, at most 1024 are allowed', octet_length(aggregate_id))
    WHEN octet_length(aggregate_type) > 256 THEN format('the aggregate type is %s bytes, at most 256 are allowed', octet_length(aggregate_type))
    WHEN octet_length(merge_key) > 1024 THEN format('the merge key is %s bytes, at most 1024 are allowed', octet_length(merge_key))
    WHEN lower(merge_key) LIKE 'walhook.%' THEN 'merge keys walhook.* are reserved for walhook''s own notifications'
  END
$fn$;

-- 6. Installs (or replaces) the bridge of `source` (SCHEMA.TABLE): `columns` maps walhook's
-- names (id, tenant, type, payload, aggregate, aggregate_type, merge_key, created_at) to the
-- table's columns; `tenant`, the one tenant of every row when there is no tenant column. Checks
-- the mapping against the catalog and raises invalid_parameter_value with a readable message.
-- Returns a one-line summary. Run by `walhook migrate --outbox-table` as the migrating role,
-- which needs USAGE on the table's schema and the TRIGGER privilege on the table (CREATE OR
-- REPLACE TRIGGER: a re-run needs no more); the trigger function it creates is owned by that role
-- (SECURITY DEFINER: it inserts into walhook.outbox for whoever inserts into the table).
CREATE FUNCTION walhook.bridge_outbox_table(source text, columns jsonb, tenant text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $installer$
DECLARE
  rel regclass := to_regclass(source);
  kind "char";
  qualified text;
  fn text;
  known constant text[] := ARRAY['id', 'tenant', 'type', 'payload', 'aggregate', 'aggregate_type', 'merge_key', 'created_at'];
  key text;
  col text;
  listing text;
  types jsonb := '{}';  -- mapping key → the column's base type name
  t text;
  expr jsonb := '{}';   -- mapping key → the SQL expression of its value, from NEW
  id_code text;
  payload_code text;
  created_code text;
  body text;
  typ oid;           -- the column's own type (a domain, or the base type)
  builtin boolean;   -- its base type is one of PostgreSQL's own (pg_catalog)
  guard text := 'true';  -- at run time: every mapped column still has the type it had here
BEGIN
  IF rel IS NULL THEN
    RAISE EXCEPTION 'table % does not exist (give it as SCHEMA.TABLE)', source USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT c.relkind, format('%I.%I', n.nspname, c.relname) INTO kind, qualified
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = rel;
  IF kind NOT IN ('r', 'p') THEN
    RAISE EXCEPTION '% is not a table', qualified USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF qualified LIKE 'walhook.%' THEN
    RAISE EXCEPTION '% is walhook''s own table: bridge a table of the application', qualified USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF jsonb_typeof(columns) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'the column mapping must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT string_agg(format('%s (%s)', quote_ident(a.attname), format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
    INTO listing FROM pg_attribute a WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped;
  FOR key, col IN SELECT e.key, e.value FROM jsonb_each_text(columns) e LOOP
    IF key <> ALL (known) THEN
      RAISE EXCEPTION 'unknown mapping "%": the mappings are %', key, array_to_string(known, ', ')
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    t := NULL;
    SELECT coalesce(bt.typname, ty.typname), a.atttypid,
           coalesce(bt.typnamespace, ty.typnamespace) = 'pg_catalog'::regnamespace
      INTO t, typ, builtin
      FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
      LEFT JOIN pg_type bt ON bt.oid = nullif(ty.typbasetype, 0)  -- a domain: its base type
     WHERE a.attrelid = rel AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF t IS NULL THEN
      RAISE EXCEPTION 'column "%" (mapped to %) does not exist in %; its columns: %', col, key, qualified, listing
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The bridge runs as its owner (SECURITY DEFINER) and converts the mapped columns: a type of
    -- the table owner's own (or one named like a built-in in another schema) would run the
    -- owner's cast functions with the bridge's rights. Only PostgreSQL's own types are taken,
    -- and the generated function checks each column's type again on every row (`guard`):
    -- a column altered to another type afterwards makes rejected rows, never a cast.
    IF NOT builtin THEN
      RAISE EXCEPTION 'column "%" (mapped to %) is of type %, not one of PostgreSQL''s own: the bridge converts only built-in types',
        col, key, format_type(typ, NULL) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    guard := guard || format(' AND pg_typeof(NEW.%I)::oid = %s', col, typ);
    types := types || jsonb_build_object(key, t);
    expr := expr || jsonb_build_object(key, format('NEW.%I', col));
  END LOOP;
  IF NOT types ? 'type' OR NOT types ? 'payload' THEN
    RAISE EXCEPTION 'the mapping needs the event type and the payload columns (type=COLUMN, payload=COLUMN)'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF (types ? 'tenant') = (tenant IS NOT NULL) THEN
    RAISE EXCEPTION 'give either a tenant column (tenant=COLUMN) or one tenant for every row (--tenant), not %',
      CASE WHEN tenant IS NULL THEN 'neither' ELSE 'both' END USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF tenant IS NOT NULL AND octet_length(tenant) NOT BETWEEN 1 AND 256 THEN
    RAISE EXCEPTION 'the tenant must be 1 to 256 bytes' USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- The id: a uuid as it is; text or an integer through outbox_bridge_id; none: a new uuid per row.
  t := types->>'id';
  IF t IS NULL THEN
    id_code := 'v_id := gen_random_uuid();';
  ELSIF t = 'uuid' THEN
    id_code := format('v_raw_id := %s::text; v_id := %1$s;', expr->>'id');
  ELSIF t IN ('text', 'varchar', 'bpchar', 'int2', 'int4', 'int8', 'numeric') THEN
    id_code := format('v_raw_id := %s::text; v_id := walhook.outbox_bridge_id(%L, v_raw_id);', expr->>'id', qualified);
  ELSE
    RAISE EXCEPTION 'the id column % is of type %: walhook takes uuid, text or an integer', columns->>'id', t
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- The payload: jsonb as it is; json, text and bytea (UTF-8) parsed, in a block of their own so a
  -- value that is not JSON makes a rejected row instead of an error (the block writes nothing:
  -- no subtransaction id is assigned, whatever the number of rows).
  t := types->>'payload';
  IF t = 'jsonb' THEN
    payload_code := format('v_payload := %s;', expr->>'payload');
  ELSIF t IN ('json', 'text', 'varchar', 'bpchar', 'bytea') THEN
    payload_code := format($c$BEGIN
    v_payload := %s::jsonb;
  EXCEPTION WHEN OTHERS THEN
    v_why := 'the payload is not JSON (' || SQLERRM || ')';
  END;$c$, CASE WHEN t = 'bytea' THEN format('convert_from(%s, ''UTF8'')', expr->>'payload')
                ELSE expr->>'payload' || '::text' END);
  ELSE
    RAISE EXCEPTION 'the payload column % is of type %: walhook takes jsonb, json, text or bytea (UTF-8 JSON)',
      columns->>'payload', t USING ERRCODE = 'invalid_parameter_value';
  END IF;
  t := types->>'created_at';
  IF t IS NULL THEN
    created_code := 'now()';
  ELSIF t = 'timestamptz' THEN
    created_code := format('coalesce(%s, now())', expr->>'created_at');
  ELSIF t = 'timestamp' THEN  -- without a time zone: read as UTC
    created_code := format('coalesce(%s AT TIME ZONE ''UTC'', now())', expr->>'created_at');
  ELSE
    RAISE EXCEPTION 'the created_at column % is of type %: walhook takes timestamptz or timestamp (read as UTC)',
      columns->>'created_at', t USING ERRCODE = 'invalid_parameter_value';
  END IF;

  fn := 'outbox_bridge_' || substr(encode(sha256(convert_to(qualified, 'UTF8')), 'hex'), 1, 16);
  body := format($gen$
-- The bridge of %1$s (walhook migrate --outbox-table): each inserted row, mapped, into
-- walhook.outbox. Generated by walhook.bridge_outbox_table(); never raises for the row's data.
CREATE OR REPLACE FUNCTION walhook.%2$I() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $bridge$
DECLARE
  v_raw_id text;
  v_id uuid;
  v_tenant text;
  v_type text;
  v_payload jsonb;
  v_aggregate text;
  v_aggregate_type text;
  v_merge_key text;
  v_why text;
BEGIN
  -- Nothing of the row is converted unless every mapped column has the type it had when the
  -- bridge was made (a type changed since could bring its owner's casts into this function).
  IF NOT (%12$s) THEN
    INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, rejected)
    VALUES ('(none)', '(none)', jsonb_build_object('source', %11$L),
            format('%%s: a mapped column''s type changed since the bridge was made; the row was not read '
                   '(run walhook migrate --outbox-table again)', %11$L));
    RETURN NULL;
  END IF;
  v_tenant := %3$s;
  v_type := %4$s;
  v_aggregate := %5$s;
  v_aggregate_type := %6$s;
  v_merge_key := %7$s;
  %8$s
  %9$s
  v_why := coalesce(v_why, walhook.outbox_bridge_fault(v_id, v_tenant, v_type, v_payload, v_aggregate, v_aggregate_type,
                                                       v_merge_key));
  IF v_why IS NULL THEN
    INSERT INTO walhook.outbox AS o (id, tenant_id, event_type, aggregate_id, aggregate_type, merge_key, payload, created_at)
    VALUES (v_id, v_tenant, v_type, v_aggregate, v_aggregate_type, v_merge_key, v_payload, %10$s)
    ON CONFLICT (id) DO NOTHING;
    IF FOUND THEN
      RETURN NULL;
    END IF;
    v_why := format('the id %%s is already in walhook.outbox (that event was published before)', v_id);
  END IF;
  -- Not an event: a row walhook ends dead with the reason (its tenant and type when they are
  -- usable, so the tenant's endpoints show it), and the row's table and id to find it by.
  INSERT INTO walhook.outbox AS o (tenant_id, event_type, payload, rejected)
  VALUES (CASE WHEN octet_length(v_tenant) BETWEEN 1 AND 256 THEN v_tenant ELSE '(none)' END,
          CASE WHEN octet_length(v_type) BETWEEN 1 AND 256 AND lower(v_type) NOT LIKE 'walhook.%%' THEN v_type
               ELSE '(none)' END,
          jsonb_build_object('source', %11$L, 'id', v_raw_id),
          format('%%s row %%s: %%s', %11$L, coalesce(v_raw_id, '(no id)'), v_why));
  RETURN NULL;
END
$bridge$;
REVOKE ALL ON FUNCTION walhook.%2$I() FROM PUBLIC;
CREATE OR REPLACE TRIGGER walhook_outbox_bridge AFTER INSERT ON %1$s FOR EACH ROW EXECUTE FUNCTION walhook.%2$I();
$gen$,
    qualified, fn,
    coalesce(expr->>'tenant' || '::text', quote_literal(tenant)),
    expr->>'type' || '::text',
    coalesce(expr->>'aggregate' || '::text', 'NULL'),
    coalesce(expr->>'aggregate_type' || '::text', 'NULL'),
    coalesce(expr->>'merge_key' || '::text', 'NULL'),
    id_code, payload_code, created_code, qualified, guard);
  EXECUTE body;
  INSERT INTO walhook.outbox_bridges AS b (source, function_name, columns, tenant)
  VALUES (qualified, fn, bridge_outbox_table.columns, bridge_outbox_table.tenant)
  ON CONFLICT ON CONSTRAINT outbox_bridges_pkey DO UPDATE
     SET function_name = excluded.function_name, columns = excluded.columns, tenant = excluded.tenant, updated_at = now();
  RETURN format('%s bridged to walhook.outbox (trigger walhook_outbox_bridge, function walhook.%s; %s)', qualified, fn,
                CASE WHEN tenant IS NULL THEN 'tenant from column ' || quote_ident(columns->>'tenant')
                     ELSE 'every row of tenant ' || tenant END);
END
$installer$;

-- Removes the bridge of `source`: its trigger (if the table is still there), its function, its
-- record. The table and the events already in walhook.outbox stay. Returns whether there was one.
-- Dropping a trigger takes the table's owner (PostgreSQL's rule): a migrating role that only has
-- TRIGGER on it gets "must be owner"; the owner drops the trigger first, and this finishes.
CREATE FUNCTION walhook.unbridge_outbox_table(source text) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  rel regclass := to_regclass(source);
  qualified text := source;
  b walhook.outbox_bridges;
BEGIN
  IF rel IS NOT NULL THEN
    SELECT format('%I.%I', n.nspname, c.relname) INTO qualified
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = rel;
  END IF;
  SELECT * INTO b FROM walhook.outbox_bridges WHERE outbox_bridges.source = qualified;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = rel AND tgname = 'walhook_outbox_bridge') THEN
    EXECUTE format('DROP TRIGGER walhook_outbox_bridge ON %s', qualified);
  END IF;
  EXECUTE format('DROP FUNCTION IF EXISTS walhook.%I()', b.function_name);
  DELETE FROM walhook.outbox_bridges WHERE outbox_bridges.source = qualified;
  RETURN true;
END
$fn$;
REVOKE ALL ON FUNCTION walhook.bridge_outbox_table(text, jsonb, text), walhook.unbridge_outbox_table(text) FROM PUBLIC;

-- The least-privilege roles of sql/roles.sql, if this database has them: the application may
-- publish an aggregate type (and runs the new publish()); operators see the bridges.
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_app') THEN
    GRANT INSERT (aggregate_type) ON walhook.outbox TO walhook_app;
    GRANT EXECUTE ON FUNCTION walhook.publish(text, text, jsonb, text, text, text) TO walhook_app;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walhook_admin') THEN
    GRANT SELECT ON walhook.outbox_bridges TO walhook_admin;
  END IF;
END
$grant$;
