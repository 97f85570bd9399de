-- walhook streamed the removal of endpoint $1 (NULL: a TRUNCATE, every endpoint) by transaction
-- $2 (the 32-bit xid of the Begin message): its copy in walhook.endpoints_removed has served.
DELETE FROM walhook.endpoints_removed
 WHERE ($1::bigint IS NULL OR id = $1::bigint)
   AND (removed_xid::text::numeric % 4294967296) = $2::numeric
