-- The outbox rows $1 (uuid[]) in insertion order, with the columns the stream sends (text).
SELECT id::text AS id, tenant_id, event_type, aggregate_id, merge_key, payload::text AS payload,
       created_at::text AS created_at
  FROM walhook.outbox WHERE id = ANY ($1::uuid[]) ORDER BY seq
