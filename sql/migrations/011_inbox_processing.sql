-- walhook schema, version 11: processing the inbox (issue 21; docs/inbox.md, "Processing").
--
-- An inbox destination (an endpoint of tenant "inbox:{source}") has two policies of its own,
-- copied from its source by `walhook inbox source add|update`:
--   * deferral: an answer in defer_statuses (409, 425) means "not yet" — the event came before
--     its predecessor. It is tried again on a short schedule (1 s, 2 s, 4 s, … at most 60 s, or
--     the answer's Retry-After), does not count as a failure (no breaker, no give-up) until
--     max_deferrals, and then ends dead ("quarantined") with the reason. A deferred event steps
--     out of its key's line: the events after it are not held behind it (that is how the
--     predecessor it waits for gets through).
--   * retry schedule: any other failure is retried after retry_schedule_ms[1], [2], … and ends
--     dead ("quarantined") once the schedule is spent. NULL: walhook run's backoff (--max-attempts,
--     --max-age-s), as for every other endpoint.
-- Dead deliveries are the quarantine: `walhook replay` puts them back on the normal path.

-- 1. The policies, on the endpoints (what walhook run reads) and on the sources (what the CLI
-- copies onto each destination). NULL everywhere: no deferral, walhook's own backoff.
ALTER TABLE walhook.endpoints
  ADD COLUMN defer_statuses smallint[]
    CHECK (defer_statuses IS NULL OR (cardinality(defer_statuses) BETWEEN 1 AND 16
                                      AND 400 <= ALL (defer_statuses) AND 599 >= ALL (defer_statuses))),
  ADD COLUMN max_deferrals integer CHECK (max_deferrals IS NULL OR max_deferrals BETWEEN 0 AND 1000),
  ADD COLUMN retry_schedule_ms integer[]
    CHECK (retry_schedule_ms IS NULL OR (cardinality(retry_schedule_ms) BETWEEN 1 AND 32
                                         AND 100 <= ALL (retry_schedule_ms) AND 604800000 >= ALL (retry_schedule_ms)));

ALTER TABLE walhook.inbox_sources
  ADD COLUMN defer_statuses smallint[] NOT NULL DEFAULT '{409,425}'
    CHECK (cardinality(defer_statuses) <= 16 AND 400 <= ALL (defer_statuses) AND 599 >= ALL (defer_statuses)),
  ADD COLUMN max_deferrals integer NOT NULL DEFAULT 12 CHECK (max_deferrals BETWEEN 0 AND 1000),
  ADD COLUMN retry_schedule_ms integer[] NOT NULL DEFAULT '{60000,300000,900000}'
    CHECK (cardinality(retry_schedule_ms) BETWEEN 1 AND 32
           AND 100 <= ALL (retry_schedule_ms) AND 604800000 >= ALL (retry_schedule_ms));

-- 2. How many times a delivery was deferred (its attempts include them).
ALTER TABLE walhook.deliveries ADD COLUMN deferrals integer NOT NULL DEFAULT 0;
