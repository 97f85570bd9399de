-- Forgets the recorded position of slot $1 (the slot was just created).
DELETE FROM walhook.slot_progress WHERE slot_name = $1
