-- Every walhook.endpoint_health row (breaker state at session start); times as epoch seconds.
SELECT endpoint_id, consecutive_failures, extract(epoch FROM first_failure_at)::float8,
       extract(epoch FROM last_failure_at)::float8, extract(epoch FROM last_success_at)::float8,
       extract(epoch FROM paused_until)::float8, probe_rounds, last_status, last_error
  FROM walhook.endpoint_health
