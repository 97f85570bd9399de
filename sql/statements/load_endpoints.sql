-- Every endpoint, with the columns walhook follows (the same names as in the replication stream).
SELECT id, tenant_id, url, secret, event_types, max_concurrency, status, ordering FROM walhook.endpoints
