-- Before walhook forgets the copy of a removed endpoint: waits until the removing transaction has
-- ended for every session. Its Commit can reach the slot a moment before other sessions see the
-- transaction as committed, and its copy in walhook.endpoints_removed would not be visible yet.
-- $1 = the endpoint (a DELETE), or NULL (a TRUNCATE: every row). FOR KEY SHARE waits for a
-- transaction deleting the row, and its table lock for one truncating the table; a row already
-- gone is skipped. The next statement of the batch then has a snapshot that sees the copy.
SELECT id FROM walhook.endpoints WHERE $1::bigint IS NULL OR id = $1::bigint FOR KEY SHARE
