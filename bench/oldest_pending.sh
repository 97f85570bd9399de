#!/usr/bin/env bash
# The oldest-pending-age query of /metrics (sql/statements/oldest_pending.sql) before and after
# it used the partial index deliveries_open_age (migration 006): a throwaway PostgreSQL cluster,
# `walhook migrate`, OPEN_ROWS open deliveries (pending and sending) over ENDPOINTS endpoints plus
# FINISHED_ROWS delivered ones, ANALYZE, then EXPLAIN (ANALYZE, BUFFERS) of each query and the
# median of RUNS timed executions in one session (psql's \timing: client round trip included).
#
#   bench/oldest_pending.sh [build/relay/walhook]      (OPEN_ROWS=200000 ENDPOINTS=100 FINISHED_ROWS=0 RUNS=21)
set -euo pipefail
cd "$(dirname "$0")/.."
walhook=${1:-build/relay/walhook}
open_rows=${OPEN_ROWS:-200000}
endpoints=${ENDPOINTS:-100}
finished_rows=${FINISHED_ROWS:-0}
runs=${RUNS:-21}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /tmp/walhook-oldest-pending.XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u postgres --); chown postgres "$dir"; fi
cleanup() { "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start \
  -o "-c listen_addresses='' -c unix_socket_directories=$dir -c wal_level=logical -c fsync=off" >/dev/null
url="postgresql:///postgres?host=$dir&user=postgres"
"$walhook" migrate --database-url "$url" --slot bench_oldest >/dev/null 2>&1
psql=(psql -X -q -v ON_ERROR_STOP=1 "$url")
"${psql[@]}" <<SQL
INSERT INTO walhook.endpoints (tenant_id, url, secret)
  SELECT 't' || (i % 10), 'http://127.0.0.1:1/' || i, 'whsec_x' FROM generate_series(1, $endpoints) i;
INSERT INTO walhook.deliveries (endpoint_id, event_id, status, event_created_at, next_attempt_at)
  SELECT 1 + i % $endpoints, gen_random_uuid(), CASE WHEN i % 50 = 0 THEN 'sending' ELSE 'pending' END,
         now() - (i || ' ms')::interval, now()
    FROM generate_series(1, $open_rows) i;
INSERT INTO walhook.deliveries (endpoint_id, event_id, status, event_created_at, delivered_at)
  SELECT 1 + i % $endpoints, gen_random_uuid(), 'delivered', now() - (i || ' ms')::interval, now()
    FROM generate_series(1, $finished_rows) i;
VACUUM ANALYZE walhook.deliveries;
VACUUM ANALYZE walhook.endpoints;
SQL
before="SELECT endpoint_id, extract(epoch FROM now() - min(event_created_at)) FROM walhook.deliveries
 WHERE status IN ('pending', 'sending') GROUP BY endpoint_id"
# The statement as embedded, $1 = 1 (one shard), $2 = 0.
after=$(grep -v '^--' sql/statements/oldest_pending.sql | sed 's/\$1/1/g; s/\$2/0/g')
echo "PostgreSQL: $("${psql[@]}" -Atc 'SHOW server_version')"
echo "rows: $open_rows open over $endpoints endpoints, $finished_rows finished"
# Same answer both ways, compared in one statement (one now()): rows of either not in the other.
"${psql[@]}" -Atc "SELECT count(*) FROM ((($before) EXCEPT ($after)) UNION ALL (($after) EXCEPT ($before))) x" \
  | sed 's/^/rows that differ between before and after: /'
for name in before after; do
  q=${!name}
  echo "== $name"
  "${psql[@]}" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) $q"
  # RUNS executions in one session (walhook keeps its connection), each timed by psql.
  { echo '\timing on'; for _ in $(seq "$runs"); do echo "$q;"; done; } | "${psql[@]}" -o /dev/null | grep '^Time:' \
    | awk '{print $2}' | sort -n \
    | awk '{a[NR]=$1} END {printf "median of %d runs in one session: %.3f ms (min %.3f, max %.3f)\n", NR, a[int((NR+1)/2)], a[1], a[NR]}'
done
