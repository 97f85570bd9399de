-- Per endpoint: seconds since the oldest event still waiting in walhook.deliveries was created.
-- Runs for /metrics, at most once a second however often it is scraped (relay/admin/
-- metrics_cache.hpp): one probe of the partial index deliveries_open_age (endpoint_id,
-- event_created_at) WHERE status IN ('pending', 'sending') per endpoint (its first entry is the
-- oldest), instead of reading every open row (bench/RESULTS.md, "oldest pending age").
-- $1, $2: shard count and index (relay/core/shard.hpp; count <= 1: every endpoint), as in load_endpoints.
SELECT e.id, extract(epoch FROM now() - o.event_created_at)
  FROM walhook.endpoints e
 CROSS JOIN LATERAL (
   SELECT d.event_created_at FROM walhook.deliveries d
    WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending')
    ORDER BY d.event_created_at
    LIMIT 1) o
 WHERE $1::int <= 1 OR (hashtext(e.tenant_id) & 2147483647) % $1::int = $2::int
