-- Events walhook publishes itself (sql::publish_event: its notifications), $1 = jsonb array of
-- outbox rows, inserted in the order they were queued (ord). endpoint_id set: a direct route
-- (migration 006). They come back through the slot like any event.
INSERT INTO walhook.outbox (tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id)
SELECT tenant_id, event_type, aggregate_id, merge_key, payload, endpoint_id
  FROM jsonb_to_recordset($1::jsonb) AS x(
    ord bigint, tenant_id text, event_type text, aggregate_id text, merge_key text, payload jsonb, endpoint_id bigint)
 ORDER BY ord
