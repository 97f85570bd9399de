-- The recorded position of slot $1, the system identifier it belongs to, and whether a delivered
-- snapshot was recorded with it (a slot of this name existed: its loss is an incident), and that
-- snapshot (text, or NULL).
SELECT confirmed_lsn::text, coalesce(system_id, ''), delivered_snapshot IS NOT NULL, delivered_snapshot::text
  FROM walhook.slot_progress WHERE slot_name = $1
