-- Secret rotation (walhook endpoint rotate-secret): once the grace period is over, only the new
-- secret (the first) signs. The UPDATE reaches walhook's endpoint directory through the stream,
-- like any operator's change. Returns the command tag count.
UPDATE walhook.endpoints
   SET secret = split_part(secret, ' ', 1), secret_grace_until = NULL, updated_at = now()
 WHERE secret_grace_until <= now()
