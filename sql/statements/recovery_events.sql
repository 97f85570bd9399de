-- The outbox rows $1 (uuid[]) in insertion order, with the columns the stream sends (text);
-- aggregate_type and rejected (migration 009); endpoint_id too, so a backfilled direct route (a notification) goes where it went; the
-- transaction's 32-bit xid (0 if unknown), so an endpoint's outbox cursor can tell whether it owes it.
SELECT id::text AS id, tenant_id, event_type, aggregate_id, aggregate_type, merge_key, payload::text AS payload,
       created_at::text AS created_at, stored_at::text AS stored_at, endpoint_id::text AS endpoint_id,
       by_walhook::text AS by_walhook, rejected, traceparent,
       coalesce((xid::text::numeric % 4294967296)::bigint, 0)::text AS xid
  FROM walhook.outbox WHERE id = ANY ($1::uuid[]) ORDER BY seq
