// The admin API's actions (docs/api.md, Actions): POST /api/endpoints/{id}/pause|resume|
// enable|disable|replay and /api/deliveries/resend. Each reads its JSON body, runs the
// operation shared with the CLI (relay/operations/operations.hpp), logs admin.action with who
// acted, and answers what changed.

#include "relay/admin/db_worker.hpp"
#include "relay/admin/json_body.hpp"
#include "relay/admin/routes.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/operations.hpp"

#include "common/json_writer.hpp"
#include "common/log.hpp"

namespace walhook::relay {
namespace asio = boost::asio;

namespace {

/// Who acts, for the admin.action log line (written on the worker: log lines are one write).
struct actor {
  std::string by, remote, token;
};

actor actor_of(const route_context& ctx, const api_request& req) {
  auto by = operator_of(req.operator_name);
  return {by.empty() ? "-" : by, req.remote, ctx.access.token.empty() ? "none" : token_fingerprint(ctx.access.token)};
}

void log_action(const actor& who, std::string_view action, std::int64_t endpoint_id, const std::string& event_id,
                std::int64_t deliveries) {
  log::info("admin.action", {{"action", action},
                             {"endpoint_id", endpoint_id},
                             {"event_id", event_id.empty() ? std::string_view("-") : std::string_view(event_id)},
                             {"deliveries", deliveries},
                             {"by", who.by},
                             {"remote", who.remote},
                             {"token", who.token}});
}

/// A change's fields: endpoint_id, action, deliveries, note (null if none).
void write_change(json_writer& j, const operations::change& c) {
  j.field("endpoint_id", c.endpoint_id).field("action", c.action).field("deliveries", c.deliveries).key("note");
  if (c.note.empty()) j.null();
  else j.string(c.note);
}

api_response change_view(const operations::change& c) {
  json_writer j;
  j.begin_object();
  write_change(j, c);
  j.end_object();
  return api_response{200, j.take()};
}

api_response replay_view(const std::vector<operations::change>& changes, std::int64_t replayed, bool dry_run = false) {
  json_writer j;
  j.begin_object().field("replayed", replayed).field("dry_run", dry_run).key("changes").begin_array();
  for (const auto& c : changes) {
    j.begin_object();
    write_change(j, c);
    j.end_object();
  }
  j.end_array().end_object();
  return api_response{200, j.take()};
}

}  // namespace

asio::awaitable<api_response> post_status(const route_context& ctx, std::int64_t id, const std::string& action,
                                          const api_request& req) {
  return ctx.worker.run([id, action, who = actor_of(ctx, req), body = req.body](blocking_db& db) {
    json_body(body).only({});  // validated, no member used
    auto c = operations::set_status(db, id, action);
    log_action(who, action, id, {}, c.deliveries);
    return change_view(c);
  });
}

asio::awaitable<api_response> post_replay(const route_context& ctx, std::int64_t id, const api_request& req) {
  return ctx.worker.run([id, who = actor_of(ctx, req), body = req.body](blocking_db& db) {
    json_body parsed(body);
    parsed.only({"since", "until", "event_type", "filter", "dry_run"});
    operations::replay_filter f;
    f.endpoint_id = id;
    f.since = parsed.text("since");
    f.until = parsed.text("until");
    f.event_type = parsed.text("event_type");
    f.payload_filter = parsed.object_text("filter");
    f.dry_run = parsed.boolean("dry_run").value_or(false);
    auto changes = operations::replay(db, f);
    std::int64_t n = 0;
    for (const auto& c : changes) n += c.deliveries;
    if (f.dry_run) return replay_view(changes, n, true);  // nothing changed: no audit line
    log::info("admin.action", {{"action", "replay"},
                               {"endpoint_id", id},
                               {"event_id", "-"},
                               {"since", f.since ? std::string_view(*f.since) : std::string_view("-")},
                               {"until", f.until ? std::string_view(*f.until) : std::string_view("-")},
                               {"event_type", f.event_type ? std::string_view(*f.event_type) : std::string_view("-")},
                               {"filter", f.payload_filter ? std::string_view(*f.payload_filter) : std::string_view("-")},
                               {"deliveries", n},
                               {"by", who.by},
                               {"remote", who.remote},
                               {"token", who.token}});
    return replay_view(changes, n);
  });
}

asio::awaitable<api_response> post_resend(const route_context& ctx, const api_request& req) {
  return ctx.worker.run([who = actor_of(ctx, req), body = req.body](blocking_db& db) {
    json_body parsed(body);
    parsed.only({"endpoint_id", "event_id"});
    auto endpoint_id = parsed.integer("endpoint_id");
    auto ev = parsed.text("event_id");
    if (!endpoint_id || !ev) throw invalid_input("give {\"endpoint_id\": N, \"event_id\": \"…\"}");
    auto c = operations::resend(db, *endpoint_id, *ev);
    log_action(who, "resend", c.endpoint_id, *ev, c.deliveries);
    return change_view(c);
  });
}

}  // namespace walhook::relay
