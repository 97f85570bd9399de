-- Every endpoint's state, worst first: `walhook status` and the admin API's /api/endpoints
-- (relay/operations/status.hpp reads it into typed rows). $1: one endpoint id, or NULL for all.
-- A page: $5 NULL for the first, else the rows after the sort key ($2 since_us, $3 failures,
-- $4 dead, $5 id) of the previous page's last row; $6 rows at most (NULL: all).
-- Columns: id, tenant_id, url, status, max_concurrency, breaker holds (paused_until > now()),
-- paused_until (past or future), pending, sending, dead, oldest pending age (seconds, float8: of
-- its pending rows, or since its outbox cursor's position was current if it follows the outbox),
-- consecutive_failures, last_status, last_error, disabled_reason, secret, event_types (JSON
-- text), ordering, description, contact_endpoint_id, secret_grace_until, following the outbox
-- since (its cursor's entered_at, or NULL), events read back by its cursor, and the outbox rows its
-- cursor owes it now (committed, routed to it, not covered; counted up to 100,000), and the sort
-- key's first member: the oldest pending age's start in microseconds since 1970 (the largest
-- bigint if none), which, unlike the age, stays the same from one page to the next; then the
-- headers (JSON array text), the secret headers (text[]: only their fingerprints are shown),
-- filter (JSON text), max_rate and rate_burst (migration 012); then oauth_token_url,
-- oauth_client_id, oauth_client_secret (only its fingerprint is shown), oauth_scope and proxy (014).
-- Counts and age leave out rows older than the endpoint: a removed endpoint's that had the same id.
SELECT e.id, e.tenant_id, e.url, e.status, e.max_concurrency,
       coalesce(h.paused_until > now(), false), h.paused_until,
       coalesce(c.pending, 0), coalesce(c.sending, 0), coalesce(c.dead, 0),
       extract(epoch FROM now() - least(o.oldest, cur.covered_at))::float8,
       coalesce(h.consecutive_failures, 0), h.last_status, h.last_error, h.disabled_reason, e.secret,
       array_to_json(e.event_types)::text, e.ordering, e.description, e.contact_endpoint_id, e.secret_grace_until,
       cur.entered_at, coalesce(cur.events_drained, 0), coalesce(owed.n, 0), k.since_us,
       array_to_json(e.headers)::text, e.secret_headers, e.filter::text, e.max_rate, e.rate_burst,
       e.oauth_token_url, e.oauth_client_id, e.oauth_client_secret, e.oauth_scope, e.proxy
  FROM walhook.endpoints e
  LEFT JOIN walhook.endpoint_cursors cur ON cur.endpoint_id = e.id AND cur.tenant_id = e.tenant_id
  LEFT JOIN walhook.endpoint_health h ON h.endpoint_id = e.id
  LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE d.status = 'pending') AS pending,
           count(*) FILTER (WHERE d.status = 'sending') AS sending,
           count(*) FILTER (WHERE d.status = 'dead') AS dead
      FROM walhook.deliveries d
     WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending', 'dead')
       AND d.created_at >= e.created_at) c ON true
  LEFT JOIN LATERAL (
    SELECT min(d.event_created_at) AS oldest FROM walhook.deliveries d
     WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending') AND d.created_at >= e.created_at) o ON true
  CROSS JOIN LATERAL (
    SELECT coalesce((extract(epoch FROM least(o.oldest, cur.covered_at)) * 1000000)::bigint, 9223372036854775807)
           AS since_us) k
  LEFT JOIN LATERAL (
    SELECT count(*) AS n FROM (
      SELECT 1 FROM walhook.outbox o
       WHERE cur.endpoint_id IS NOT NULL AND o.tenant_id = e.tenant_id
         AND o.xid >= pg_snapshot_xmin(cur.covered) AND NOT pg_visible_in_snapshot(o.xid, cur.covered)
         AND o.xid <> ALL (cur.also) AND pg_visible_in_snapshot(o.xid, pg_current_snapshot())
         AND (o.endpoint_id = e.id OR (o.endpoint_id IS NULL AND (e.event_types IS NULL OR o.event_type = ANY (e.event_types))))
       LIMIT 100000) x) owed ON true
 WHERE ($1::bigint IS NULL OR e.id = $1::bigint)
   AND ($5::bigint IS NULL OR (k.since_us, -coalesce(h.consecutive_failures, 0), -coalesce(c.dead, 0), e.id) >
                              ($2::bigint, -$3::bigint, -$4::bigint, $5::bigint))
  -- Worst first: oldest pending age (the oldest start first, none last), failures in a row, then
  -- dead letters (an endpoint whose deliveries die unattempted, e.g. an invalid URL, has neither
  -- of the first two), then id: the order of the row comparison above.
 ORDER BY k.since_us, 12 DESC, 10 DESC, e.id
 LIMIT $6::bigint
