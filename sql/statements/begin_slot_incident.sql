-- The slot $1 (of system $3) is missing or invalidated ($2 says which): records the incident
-- before the slot is replaced, with the last delivered snapshot as the backfill's lower bound.
-- An incident whose replacement was interrupted (state creating_slot) is continued instead.
-- Returns the incident's id, whether it has a lower bound, and whether it was recorded now.
WITH open AS (
  SELECT id, since_snapshot IS NOT NULL AS bounded FROM walhook.recoveries
   WHERE slot_name = $1 AND state = 'creating_slot' ORDER BY id LIMIT 1
), added AS (
  INSERT INTO walhook.recoveries (slot_name, reason, state, since_snapshot)
  SELECT $1, $2, 'creating_slot',
         (SELECT delivered_snapshot FROM walhook.slot_progress WHERE slot_name = $1 AND system_id = $3)
   WHERE NOT EXISTS (SELECT 1 FROM open)
  RETURNING id, since_snapshot IS NOT NULL AS bounded
)
SELECT id, bounded, false FROM open UNION ALL SELECT id, bounded, true FROM added
