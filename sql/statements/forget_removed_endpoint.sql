-- walhook streamed the removal of endpoint $1 (NULL: a TRUNCATE, every endpoint) by transaction
-- $2 (the 32-bit xid of the Begin message), and the work routed to it before is done: its copy
-- in walhook.endpoints_removed has served. Delivery rows of a removed endpoint still pending
-- (written by walhook after the removal trigger ran) end dead, and a health row written since
-- goes — unless an endpoint with that id exists again.
WITH forgotten AS (
  DELETE FROM walhook.endpoints_removed
   WHERE ($1::bigint IS NULL OR id = $1::bigint)
     AND (removed_xid::text::numeric % 4294967296) = $2::numeric
  RETURNING id
), cursors AS (
  -- Its outbox cursor goes too (what it was owed goes with the endpoint).
  DELETE FROM walhook.endpoint_cursors c
   WHERE ($1::bigint IS NULL OR c.endpoint_id = $1::bigint)
     AND NOT EXISTS (SELECT 1 FROM walhook.endpoints e WHERE e.id = c.endpoint_id AND e.tenant_id = c.tenant_id)
  RETURNING c.endpoint_id
), stray AS (
  UPDATE walhook.deliveries d
     SET status = 'dead', last_error = 'endpoint removed', next_attempt_at = NULL, updated_at = now()
   WHERE d.status IN ('pending', 'sending') AND ($1::bigint IS NULL OR d.endpoint_id = $1::bigint)
     AND NOT EXISTS (SELECT 1 FROM walhook.endpoints e WHERE e.id = d.endpoint_id)
  RETURNING d.id
)
DELETE FROM walhook.endpoint_health h
 WHERE ($1::bigint IS NULL OR h.endpoint_id = $1::bigint)
   AND NOT EXISTS (SELECT 1 FROM walhook.endpoints e WHERE e.id = h.endpoint_id)
