-- The recorded position of slot $1 and the system identifier it belongs to.
SELECT confirmed_lsn::text, coalesce(system_id, '') FROM walhook.slot_progress WHERE slot_name = $1
