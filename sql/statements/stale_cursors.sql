-- Outbox cursors whose position is older than $1 hours (the give-up age) → endpoint ids.
SELECT endpoint_id FROM walhook.endpoint_cursors WHERE covered_at < now() - make_interval(hours => $1::int)
