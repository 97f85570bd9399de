-- Every endpoint as of the slot's position, with the columns walhook follows (the same names as
-- in the replication stream): the live rows, except that an endpoint removed by a transaction the
-- slot has not streamed yet is still the row it was before (the oldest copy kept for it): the
-- slot replays events committed before the removal, and the removal itself, in order. (A copy
-- has no contact endpoint: walhook announces nothing to a removed endpoint's contact; nor a
-- creation snapshot: every event it was owed before its removal still reaches it; and its
-- secret_grace_until: each of its secrets signs what is left for it; nor its inbox policies: it
-- gets one attempt per delivery, never a retry; nor a filter or a rate: what it was owed is
-- routed already, and it is sent at once. Its headers, OAuth2 client and proxy it keeps: a
-- receiver may check them.)
-- $1, $2: shard count and index (relay/core/shard.hpp; count <= 1: every endpoint), the endpoints of
-- this shard's tenants only.
WITH removed AS (
  SELECT DISTINCT ON (id) id, tenant_id, url, secret, event_types, max_concurrency, status, ordering,
         headers, secret_headers, oauth_token_url, oauth_client_id, oauth_client_secret, oauth_scope, proxy
    FROM walhook.endpoints_removed
   ORDER BY id, removal_id
)
SELECT id, tenant_id, url, secret, event_types, max_concurrency, status, ordering,
       NULL::bigint AS contact_endpoint_id, NULL::text AS created_snapshot, NULL::timestamptz AS secret_grace_until,
       NULL::smallint[] AS defer_statuses, NULL::integer AS max_deferrals, NULL::integer[] AS retry_schedule_ms,
       headers, secret_headers, NULL::text AS filter, NULL::text AS max_rate, NULL::integer AS rate_burst,
       oauth_token_url, oauth_client_id, oauth_client_secret, oauth_scope, proxy
  FROM removed
 WHERE $1::int <= 1 OR (hashtext(tenant_id) & 2147483647) % $1::int = $2::int
UNION ALL
SELECT e.id, e.tenant_id, e.url, e.secret, e.event_types, e.max_concurrency, e.status, e.ordering,
       e.contact_endpoint_id, e.created_snapshot::text AS created_snapshot, e.secret_grace_until,
       e.defer_statuses, e.max_deferrals, e.retry_schedule_ms,
       e.headers, e.secret_headers, e.filter, e.max_rate, e.rate_burst,
       e.oauth_token_url, e.oauth_client_id, e.oauth_client_secret, e.oauth_scope, e.proxy
  FROM walhook.endpoints e
 WHERE NOT EXISTS (SELECT 1 FROM removed r WHERE r.id = e.id)
   AND ($1::int <= 1 OR (hashtext(e.tenant_id) & 2147483647) % $1::int = $2::int)
