-- Per endpoint: seconds since the oldest event still waiting in walhook.deliveries was created.
SELECT endpoint_id, extract(epoch FROM now() - min(event_created_at)) FROM walhook.deliveries
 WHERE status IN ('pending', 'sending') GROUP BY endpoint_id
