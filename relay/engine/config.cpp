#include "relay/engine/config.hpp"

namespace walhook::relay {

wal::stream_options stream_options_of(const run_options& o) {
  auto s = o.stream;
  s.conninfo = o.database_url;
  s.slot = o.slot;
  s.publications = shard_publications(o.shard);
  s.application_name = "walhook " + o.instance_name;
  s.clock = o.clock;
  s.create_slot = false;  // a missing slot is relay/engine/recovery.hpp's to create (an incident, or the first start)
  return s;
}

sql::state_store_options store_options_of(const run_options& o) {
  auto s = o.store;
  s.conninfo = o.database_url;
  s.reconnect_max = o.reconnect_max;
  s.application_name = "walhook-state " + o.instance_name;
  s.clock = o.clock;
  s.shard_count = o.shard.count;
  s.shard_index = o.shard.index;
  return s;
}

delivery::http_client_options http_options_of(const run_options& o) {
  auto h = o.http;
  h.clock = o.clock;
  return h;
}

delivery::broker_sink_options broker_options_of(const run_options& o) {
  delivery::broker_sink_options b;
  b.allow_private_networks = o.http.allow_private_networks;
  b.extra_ca_pem = o.http.extra_ca_pem;
  b.clock = o.clock;
  return b;
}

dispatcher_options dispatcher_options_of(const run_options& o, outcome_log* recent) {
  auto d = o.dispatch;
  d.recent_outcomes = recent;
  d.broker_deadline = o.http.total_deadline;
  return d;
}

}  // namespace walhook::relay
