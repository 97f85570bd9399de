#pragma once
// The ingest server's /metrics (walhook ingest --metrics-listen; docs/inbox.md, "Metrics"):
// Prometheus text exposition format 0.0.4. Pure: the counts in, the text out.

#include "relay/inbox/group_commit.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace walhook::relay::inbox {

/// Requests by (source, outcome); source "" for names that are no source.
using request_counts = std::map<std::pair<std::string, std::string>, std::uint64_t>;

/// walhook_inbox_requests_total{source,outcome}, walhook_inbox_commit_batches_total,
/// walhook_inbox_commit_calls_total, walhook_inbox_commit_queue, walhook_inbox_db_sessions_up.
std::string render_ingest_metrics(const request_counts& requests, const group_commit_stats& commits);

}  // namespace walhook::relay::inbox
