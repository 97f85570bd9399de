-- How many shards the database is split into (walhook.shard_layout; no row: 1).
SELECT coalesce((SELECT shards FROM walhook.shard_layout), 1)
