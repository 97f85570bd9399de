-- walhook schema, version 2: walhook's own record of how far its slot is acknowledged.
--
-- PostgreSQL 15 keeps a logical slot's confirmed_flush_lsn in memory and writes it to disk only
-- when the slot is saved for another reason, so after a server restart (even a clean one) the
-- slot can go back by many seconds of transactions. walhook writes the position it acknowledged
-- here (every 200 ms at most, only when it moved) and resumes streaming from the greater
-- of the two, which keeps redeliveries after a PostgreSQL restart within that fraction of a second.
CREATE TABLE walhook.slot_progress (
  slot_name     text PRIMARY KEY,
  confirmed_lsn pg_lsn NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now()
);
