-- walhook schema, version 3: slot progress belongs to one cluster.
--
-- A restored or upgraded database carries walhook.slot_progress from another cluster, whose
-- WAL positions mean nothing here. walhook records the cluster's system identifier
-- (IDENTIFY_SYSTEM) with the position and ignores a row from another system.
ALTER TABLE walhook.slot_progress ADD COLUMN system_id text;
