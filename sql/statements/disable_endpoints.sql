-- The one write walhook makes to walhook.endpoints: status 'disabled' (410 Gone, or failing for
-- days). $1 = bigint[] of endpoint ids.
UPDATE walhook.endpoints SET status = 'disabled', updated_at = now()
 WHERE id = ANY($1::bigint[]) AND status <> 'disabled'
