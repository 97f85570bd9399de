-- The outbox cursors of this shard's endpoints (session start): $1/$2 shard count and index
-- (count <= 1: every endpoint). → (endpoint id, covered, also, window snapshot or NULL, window_after, tenant, routing or NULL)
SELECT c.endpoint_id, c.covered::text, c.also::text, c.window_snapshot::text, c.window_after, c.tenant_id, c.routing::text
  FROM walhook.endpoint_cursors c JOIN walhook.endpoints e ON e.id = c.endpoint_id AND e.tenant_id = c.tenant_id
 WHERE $1::int <= 1 OR (hashtext(e.tenant_id) & 2147483647) % $1::int = $2::int
