-- For each endpoint id in $1 (bigint[]) that has pending deliveries: milliseconds until its
-- earliest one is due (<= 0: due now), by the server's clock.
SELECT e.id, (extract(epoch FROM d.next_attempt_at - now()) * 1000)::bigint
  FROM unnest($1::bigint[]) AS e(id)
  CROSS JOIN LATERAL (
    SELECT next_attempt_at FROM walhook.deliveries
     WHERE endpoint_id = e.id AND status = 'pending'
     ORDER BY next_attempt_at LIMIT 1) d
