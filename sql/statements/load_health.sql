-- Every walhook.endpoint_health row (breaker state at session start); times as epoch seconds,
-- except the pause: the milliseconds left of it by the server's clock (<= 0: over).
SELECT endpoint_id, consecutive_failures, extract(epoch FROM first_failure_at)::float8,
       extract(epoch FROM last_failure_at)::float8, extract(epoch FROM last_success_at)::float8,
       (extract(epoch FROM paused_until - now()) * 1000)::bigint, probe_rounds, last_status, last_error
  FROM walhook.endpoint_health
