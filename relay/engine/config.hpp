#pragma once
// One config that turns the options of a run (relay/engine/options.hpp) into every component's
// settings: each component gets the settings run_options embeds for it, completed with what
// the components share (the database URL, the slot, the shard, the instance name, the reconnect
// cap, the clock). Pure: no I/O; the engine calls these once, when it starts.

#include "delivery/amqp_sink.hpp"
#include "delivery/broker_sink.hpp"
#include "delivery/http_client.hpp"
#include "delivery/sink_router.hpp"
#include "relay/engine/dispatcher.hpp"
#include "relay/engine/options.hpp"
#include "sql/state_store.hpp"
#include "wal/replication_stream.hpp"

namespace walhook::relay {

class outcome_log;

/// The replication stream's settings: run_options::stream with the database URL, the slot, the
/// shard's publications, application_name "walhook <instance>" and the clock; create_slot off
/// (a missing slot is an incident for relay/engine/recovery.hpp, or a first start).
wal::stream_options stream_options_of(const run_options& o);

/// The state store's settings: run_options::store with the database URL, the reconnect cap,
/// application_name "walhook-state <instance>", the shard and the clock.
sql::state_store_options store_options_of(const run_options& o);

/// The HTTP client's settings: run_options::http with the clock.
delivery::http_client_options http_options_of(const run_options& o);

/// The broker sinks' settings: the SSRF guard's switch and the extra CAs of run_options::http,
/// the clock.
delivery::broker_sink_options broker_options_of(const run_options& o);

/// The dispatcher's settings: run_options::dispatch, noting finished attempts in `recent` (not
/// owned; nullptr: nowhere).
dispatcher_options dispatcher_options_of(const run_options& o, outcome_log* recent);

}  // namespace walhook::relay
