-- walhook.endpoint_health rows (sql::health_write), $1 = jsonb array, one per endpoint. A pause
-- travels as its length (paused_for_ms) and ends by the server's clock.
INSERT INTO walhook.endpoint_health AS h
  (endpoint_id, consecutive_failures, first_failure_at, last_failure_at, last_success_at,
   paused_until, probe_rounds, last_status, last_error, disabled_at, disabled_reason, updated_at)
SELECT endpoint_id, consecutive_failures, first_failure_at, last_failure_at, last_success_at,
       now() + make_interval(secs => paused_for_ms / 1000.0), probe_rounds, last_status, last_error,
       CASE WHEN disable THEN now() END, disabled_reason, now()
  FROM jsonb_to_recordset($1::jsonb) AS x(
    endpoint_id bigint, consecutive_failures int, first_failure_at timestamptz,
    last_failure_at timestamptz, last_success_at timestamptz, paused_for_ms bigint,
    probe_rounds int, last_status int, last_error text, disable boolean, disabled_reason text)
ON CONFLICT (endpoint_id) DO UPDATE
   SET consecutive_failures = excluded.consecutive_failures,
       first_failure_at = excluded.first_failure_at, last_failure_at = excluded.last_failure_at,
       last_success_at = coalesce(excluded.last_success_at, h.last_success_at),
       paused_until = excluded.paused_until, probe_rounds = excluded.probe_rounds,
       last_status = excluded.last_status, last_error = excluded.last_error,
       disabled_at = coalesce(excluded.disabled_at, h.disabled_at),
       disabled_reason = coalesce(excluded.disabled_reason, h.disabled_reason), updated_at = now()
