#include "relay/inbox/ingest_metrics.hpp"

#include <fmt/format.h>

namespace walhook::relay::inbox {

std::string render_ingest_metrics(const request_counts& requests, const group_commit_stats& s) {
  std::string out =
      "# HELP walhook_inbox_requests_total Requests to POST /in/{source} by outcome (source \"\" for unknown names).\n"
      "# TYPE walhook_inbox_requests_total counter\n";
  for (const auto& [key, n] : requests)
    out += fmt::format("walhook_inbox_requests_total{{source=\"{}\",outcome=\"{}\"}} {}\n", key.first, key.second, n);
  out += fmt::format(
      "# HELP walhook_inbox_commit_batches_total Transactions the ingest server committed (group commit).\n"
      "# TYPE walhook_inbox_commit_batches_total counter\nwalhook_inbox_commit_batches_total {}\n"
      "# HELP walhook_inbox_commit_calls_total Requests written through those transactions.\n"
      "# TYPE walhook_inbox_commit_calls_total counter\nwalhook_inbox_commit_calls_total {}\n"
      "# HELP walhook_inbox_commit_queue Verified requests waiting for a commit now.\n"
      "# TYPE walhook_inbox_commit_queue gauge\nwalhook_inbox_commit_queue {}\n"
      "# HELP walhook_inbox_db_sessions_up PostgreSQL sessions of the ingest server that are connected.\n"
      "# TYPE walhook_inbox_db_sessions_up gauge\nwalhook_inbox_db_sessions_up {}\n",
      s.batches, s.calls, s.queued, s.sessions_up);
  return out;
}

}  // namespace walhook::relay::inbox
