-- A new slot starts streaming now: no removal before it will ever be streamed, so the copies of
-- removed endpoints kept for replays have nothing left to serve.
DELETE FROM walhook.endpoints_removed
