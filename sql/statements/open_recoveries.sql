-- Backfills to run or continue for slot $1, oldest first: id, state, reason, the slot range
-- (since/until snapshot text) or the operator's range (since/until time, tenant), and the new
-- slot's consistent point (slot incidents and reshards).
SELECT id, state, reason, since_snapshot::text, until_snapshot::text,
       to_char(since_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       to_char(until_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), tenant_id, slot_lsn::text
  FROM walhook.recoveries WHERE slot_name = $1 AND state IN ('creating_slot', 'pending') ORDER BY id
