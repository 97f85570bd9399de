-- walhook schema, version 10: the inbox, the receiving half (issue 21; docs/inbox.md).
--
-- `walhook ingest` accepts signed webhooks from senders (Stripe, GitHub, another walhook, …) on
-- POST /in/{source}, verifies them, and answers 2xx only once a row of walhook.inbox is
-- committed. The same transaction writes the event into walhook.outbox for the source's
-- internal tenant, "inbox:{source}": `walhook run` then delivers it to the source's
-- destinations like any other event (per-key order, retries, dead letters, replay, console).

-- 1. Sources: who may send, how they sign, where their events go. Owned by operators
-- (`walhook inbox source add|update|remove|list`); the ingest server reads them.
CREATE TABLE walhook.inbox_sources (
  name               text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  scheme             text NOT NULL CHECK (scheme IN ('standard-webhooks', 'stripe', 'github', 'hmac-sha256')),
  -- One or more space-separated secrets, the newest first; during a rotation the older ones are
  -- accepted until secret_grace_until, then dropped (as endpoints.secret).
  secret             text NOT NULL CHECK (octet_length(secret) BETWEEN 1 AND 4096),
  secret_grace_until timestamptz,
  tolerance_s        integer NOT NULL DEFAULT 300 CHECK (tolerance_s BETWEEN 1 AND 86400),
  -- Where the sender's event id is: 'header:NAME' or a JSON pointer into the body ('/id').
  -- NULL: the scheme's own (webhook-id, the Stripe event's /id, X-GitHub-Delivery).
  id_from            text CHECK (id_from IS NULL OR id_from ~ '^(header:[^[:space:][:cntrl:]:]{1,128}|/.{0,255})$'),
  -- Where the event type is (same forms). NULL: the scheme's own (/type, X-GitHub-Event), or
  -- the source's name for hmac-sha256.
  type_from          text CHECK (type_from IS NULL OR type_from ~ '^(header:[^[:space:][:cntrl:]:]{1,128}|/.{0,255})$'),
  -- Where the ordering key is (same forms); events of one key are processed in order. NULL: none.
  order_key_from     text CHECK (order_key_from IS NULL OR order_key_from ~ '^(header:[^[:space:][:cntrl:]:]{1,128}|/.{0,255})$'),
  -- hmac-sha256 only: the signature header, its encoding, what is signed, the timestamp header.
  signature_header   text CHECK (signature_header IS NULL OR signature_header ~ '^[^[:space:][:cntrl:]:]{1,128}$'),
  signature_encoding text CHECK (signature_encoding IS NULL OR signature_encoding IN ('hex', 'base64')),
  signed_content     text CHECK (signed_content IS NULL OR signed_content IN ('body', 'timestamp.body')),
  timestamp_header   text CHECK (timestamp_header IS NULL OR timestamp_header ~ '^[^[:space:][:cntrl:]:]{1,128}$'),
  max_body_bytes     integer NOT NULL DEFAULT 1048576 CHECK (max_body_bytes BETWEEN 1 AND 16777216),
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);

-- 2. What was received: one row per (source, sender's event id), written before the 2xx. The
-- body itself is the outbox row's payload (written once); this row keeps what dedupe needs.
CREATE TABLE walhook.inbox (
  seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  source      text NOT NULL,
  event_id    text NOT NULL CHECK (octet_length(event_id) BETWEEN 1 AND 256),
  fingerprint bytea NOT NULL CHECK (octet_length(fingerprint) = 32),  -- SHA-256 of the raw body
  outbox_id   uuid NOT NULL,                                          -- walhook.outbox.id of the event
  headers     jsonb NOT NULL DEFAULT '{}',                            -- the headers that matter
  duplicates  integer NOT NULL DEFAULT 0,                             -- same id, same body, again
  received_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (source, event_id)
);
CREATE INDEX inbox_received_at ON walhook.inbox (received_at);

-- 3. The same id with another body: a sender bug or an attack, never a duplicate. Kept aside
-- (the 409's evidence) and counted.
CREATE TABLE walhook.inbox_key_reuse (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  source      text NOT NULL,
  event_id    text NOT NULL,
  fingerprint bytea NOT NULL,
  body        text NOT NULL,
  headers     jsonb NOT NULL DEFAULT '{}',
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_key_reuse_source ON walhook.inbox_key_reuse (source, received_at);

-- 4. Inbox events are walhook's: a row of an inbox tenant ("inbox:…") may only be written by
-- walhook (by_walhook, which the application's role cannot write: migration 8), so the
-- application cannot inject a "received webhook" its handlers would trust as verified.
ALTER TABLE walhook.outbox ADD CONSTRAINT outbox_inbox_reserved
  CHECK (by_walhook OR lower(tenant_id) NOT LIKE 'inbox:%') NOT VALID;

-- 5. Accepts one verified request, in the caller's transaction (the ingest server's group
-- commit: many calls, one COMMIT, then the answers). Returns 'accepted' (new: inbox row and
-- outbox event written), 'duplicate' (same id, same fingerprint: counted), 'conflict' (same
-- id, another fingerprint: kept in inbox_key_reuse) or 'unknown_source' (removed meanwhile:
-- nothing written). Concurrent calls for one id serialize on the unique index: the second waits
-- for the first's transaction, then sees its row. body_is_text: the body is JSON that jsonb
-- refuses (a \u0000, a number beyond numeric's range): it is kept as a string, body_text,
-- rather than lost. It checks its arguments itself (the reserved walhook.* types, lengths): its
-- caller is trusted, but what it writes is walhook's.
CREATE FUNCTION walhook.inbox_accept(source text, event_id text, fingerprint bytea, event_type text,
                                     order_key text, headers jsonb, body text, body_is_text boolean DEFAULT false)
RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  new_seq bigint;
  new_id  uuid := gen_random_uuid();
  known   bytea;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM walhook.inbox_sources s WHERE s.name = inbox_accept.source) THEN
    RETURN 'unknown_source';
  END IF;
  IF lower(inbox_accept.event_type) LIKE 'walhook.%' OR octet_length(inbox_accept.event_type) NOT BETWEEN 1 AND 256
     OR octet_length(inbox_accept.order_key) > 1024 THEN
    RAISE EXCEPTION 'walhook.inbox_accept: event type % or order key out of bounds', inbox_accept.event_type
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO walhook.inbox AS i (source, event_id, fingerprint, outbox_id, headers)
  VALUES (inbox_accept.source, inbox_accept.event_id, inbox_accept.fingerprint, new_id, inbox_accept.headers)
  ON CONFLICT ON CONSTRAINT inbox_source_event_id_key DO NOTHING
  RETURNING i.seq INTO new_seq;
  IF new_seq IS NOT NULL THEN
    INSERT INTO walhook.outbox (id, tenant_id, event_type, aggregate_id, payload, by_walhook)
    VALUES (new_id, 'inbox:' || inbox_accept.source, inbox_accept.event_type, inbox_accept.order_key,
            CASE WHEN inbox_accept.body_is_text
                 THEN jsonb_build_object('source', inbox_accept.source, 'event_id', inbox_accept.event_id,
                                         'body_text', inbox_accept.body)
                 ELSE jsonb_build_object('source', inbox_accept.source, 'event_id', inbox_accept.event_id,
                                         'body', inbox_accept.body::jsonb) END,
            true);
    RETURN 'accepted';
  END IF;
  SELECT i.fingerprint INTO known FROM walhook.inbox i
   WHERE i.source = inbox_accept.source AND i.event_id = inbox_accept.event_id;
  IF known = inbox_accept.fingerprint THEN
    UPDATE walhook.inbox i SET duplicates = i.duplicates + 1, last_seen_at = now()
     WHERE i.source = inbox_accept.source AND i.event_id = inbox_accept.event_id;
    RETURN 'duplicate';
  END IF;
  INSERT INTO walhook.inbox_key_reuse (source, event_id, fingerprint, body, headers)
  VALUES (inbox_accept.source, inbox_accept.event_id, inbox_accept.fingerprint, inbox_accept.body,
          inbox_accept.headers);
  RETURN 'conflict';
END
$fn$;
-- SECURITY DEFINER: it writes as walhook's own role (the owner of the schema), so the ingest
-- server's role needs nothing but EXECUTE on it (sql/roles.sql, walhook_ingest) — no INSERT on
-- walhook.outbox, where it could otherwise write anything. Nobody else may call it.
REVOKE EXECUTE ON FUNCTION walhook.inbox_accept(text, text, bytea, text, text, jsonb, text, boolean) FROM PUBLIC;

-- 6. The SQL kit, for consumers that apply an event inside PostgreSQL: call claim_once in the
-- transaction that applies the effect; the mark commits or rolls back with it.
--   'first'     : apply the effect now
--   'duplicate' : already applied (same fingerprint): do nothing, answer success
--   'conflict'  : this id was applied with another body: do not apply, investigate
-- A concurrent caller of the same (consumer, event_id) waits for the first's transaction: if
-- it commits, the second gets 'duplicate'; if it rolls back, the second gets 'first'.
CREATE TABLE walhook.processed_events (
  consumer     text NOT NULL CHECK (octet_length(consumer) BETWEEN 1 AND 256),
  event_id     text NOT NULL CHECK (octet_length(event_id) BETWEEN 1 AND 256),
  fingerprint  bytea,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, event_id)
);
CREATE INDEX processed_events_processed_at ON walhook.processed_events (processed_at);

CREATE FUNCTION walhook.claim_once(consumer text, event_id text, fingerprint bytea DEFAULT NULL)
RETURNS text LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  claimed boolean;
  known   bytea;
BEGIN
  INSERT INTO walhook.processed_events AS p (consumer, event_id, fingerprint)
  VALUES (claim_once.consumer, claim_once.event_id, claim_once.fingerprint)
  ON CONFLICT ON CONSTRAINT processed_events_pkey DO NOTHING
  RETURNING true INTO claimed;
  IF claimed THEN
    RETURN 'first';
  END IF;
  SELECT p.fingerprint INTO known FROM walhook.processed_events p
   WHERE p.consumer = claim_once.consumer AND p.event_id = claim_once.event_id;
  IF known IS NOT DISTINCT FROM claim_once.fingerprint OR known IS NULL OR claim_once.fingerprint IS NULL THEN
    RETURN 'duplicate';
  END IF;
  RETURN 'conflict';
END
$fn$;

-- 7. Retention of the inbox (rows and dedupe keys), its reuse evidence and the SQL kit's marks:
-- `walhook run` deletes them after --retention-days (30) in small batches
-- (sql/statements/delete_expired.sql); an inbox row only once its event has left the outbox.
