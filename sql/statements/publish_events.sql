-- Events walhook publishes itself (sql::publish_event: its notifications), $1 = jsonb array of
-- outbox rows, inserted in the order they were queued (ord). endpoint_id set: a direct route
-- (migration 006). They come back through the slot like any event. by_walhook: only walhook may
-- write walhook.* event types and merge keys (migration 008).
INSERT INTO walhook.outbox (tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id, by_walhook)
SELECT tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id, true
  FROM jsonb_to_recordset($1::jsonb) AS x(
    ord bigint, tenant_id text, event_type text, aggregate_id text, merge_key text, payload jsonb, endpoint_id bigint)
 ORDER BY ord
