#include "relay/engine/stream_handler.hpp"

#include "common/log.hpp"
#include "wal/errc.hpp"

#include <algorithm>

namespace walhook::relay {
namespace pgo = wal::pgoutput;

std::optional<std::int64_t> endpoint_id_of(const row_view& row) {
  std::string_view text;
  if (row.get("id", text) != row_view::state::value) return std::nullopt;
  try {
    return std::stoll(std::string(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void stream_handler::reset() {
  relations_.clear();
  outbox_oid_.reset();
  endpoints_oid_.reset();
  current_ticket_ = 0;
  open_since_.clear();
}

double stream_handler::lag_seconds() {
  auto oldest = tracker_.oldest_open();
  while (!open_since_.empty() && (oldest == 0 || open_since_.front().first < oldest)) open_since_.pop_front();
  if (oldest == 0 || open_since_.empty()) return 0;
  return std::chrono::duration<double>(clock_.steady_now() - open_since_.front().second).count();
}

boost::system::error_code stream_handler::handle(const wal::stream_event& ev) {
  if (auto* k = std::get_if<wal::keepalive>(&ev)) {
    tracker_.keepalive(k->wal_end);
    if (streamed_ && current_ticket_ == 0) streamed_(0, nullptr, k->wal_end);
    return {};
  }
  const auto& ch = std::get<wal::change>(ev);
  // Rows are checked against their Relation message (unknown OID, column count) first.
  if (auto ec = relations_.observe(ch.message)) return ec;
  return std::visit([&](const auto& m) { return on_message(m); }, ch.message);
}

std::size_t stream_handler::deliver_row(const row_view& row, lsn commit_lsn, lsn_tracker::ticket ticket,
                                        std::uint32_t xid) {
  ++events_;
  std::string why;
  auto ev = event_from_row(row, commit_lsn, why);
  if (!ev) {  // no id, tenant or type: there is no delivery to record (the schema makes this rare)
    ++malformed_rows_;
    log::error("outbox.malformed_row", {{"reason", why}});
    return 0;
  }
  if (!why.empty()) {
    ++malformed_rows_;
    log::error("outbox.malformed_row", {{"event_id", ev->id}, {"reason", why}});
  }
  ev->xid = xid;
  if (xid != 0 && ticket == current_ticket_) current_tenant_ = !current_tenant_ || *current_tenant_ == ev->tenant_id ? ev->tenant_id : std::string();
  auto shared = deliveries_.track(std::move(*ev));
  // A row walhook could not read whole is delivered dead with its reason wherever its tenant and
  // type send it: a filter never hides it.
  endpoint_directory::filtering filtering;
  const auto body = why.empty() ? std::optional<std::string_view>(shared->body) : std::nullopt;
  const auto routes = directory_.route(shared->tenant_id, shared->type, shared->endpoint_id, xid, body, &filtering);
  if (!filtering.filtered.empty()) deliveries_.count_filtered(filtering.filtered);
  auto route = [&](std::int64_t id, const std::string& dead) {
    delivery::job j;
    j.ev = shared;
    j.endpoint_id = id;
    j.ticket = ticket;
    tracker_.hold(ticket);
    if (dead.empty()) deliveries_.submit(std::move(j));
    else deliveries_.submit_dead(std::move(j), dead);  // recorded with its reason, never skipped
  };
  for (std::int64_t id : routes) route(id, why);
  // A body a filter cannot read (an integer beyond 64 bits): neither dropped nor sent unfiltered.
  for (const auto& [id, reason] : filtering.unreadable) route(id, reason);
  return routes.size() + filtering.unreadable.size();
}

void stream_handler::apply_endpoint(const row_view& row, const row_view* old_row) {
  auto id = endpoint_id_of(row);
  const endpoint* previous = id ? directory_.find(*id) : nullptr;
  std::string why;
  auto e = endpoint_from_row(row, previous, old_row, &why);
  if (!e) {
    if (!why.empty()) log::error("endpoint.incomplete_row", {{"endpoint_id", id.value_or(0)}, {"error", why}});
    return;
  }
  if (current_ticket_ != 0) changed_endpoints_.push_back(e->id);
  if (!e->config_error.empty()) log::warn("endpoint.invalid", {{"endpoint_id", e->id}, {"error", e->config_error}});
  bool news = !previous || previous->status != e->status || previous->url != e->url;
  log::emit(news ? log::level::info : log::level::debug, "endpoint.updated",
            {{"endpoint_id", e->id}, {"tenant_id", e->tenant_id}, {"status", std::string(to_string(e->status))}});
  // Events committed before this change were routed with what it had: its outbox cursor keeps that.
  std::optional<endpoint> before;
  if (previous && routing_changed_ && previous->tenant_id == e->tenant_id &&
      (previous->event_types != e->event_types || previous->policies.filter != e->policies.filter))
    before = *previous;
  deliveries_.endpoint_changed(directory_.apply(std::move(*e)));
  if (before) routing_changed_(*before);
}

void stream_handler::remove_endpoint(const row_view& row) {
  if (auto id = endpoint_id_of(row)) deliveries_.removal_streamed({*id}, *id, current_xid_, current_ticket_);
}

boost::system::error_code stream_handler::on_message(const pgo::begin& b) {
  current_ticket_ = tracker_.begin();
  open_since_.emplace_back(current_ticket_, clock_.steady_now());
  current_final_lsn_ = b.final_lsn;
  current_xid_ = b.xid;
  current_tenant_.reset();
  changed_endpoints_.clear();
  return {};
}

boost::system::error_code stream_handler::on_message(const pgo::commit& c) {
  tracker_.commit(current_ticket_, c.end_lsn);
  current_ticket_ = 0;
  changed_endpoints_.clear();  // a message outside a transaction proves nothing
  if (streamed_) streamed_(current_xid_, current_tenant_ ? &*current_tenant_ : nullptr, c.end_lsn);
  current_tenant_.reset();
  return {};
}

boost::system::error_code stream_handler::on_message(const pgo::relation& r) {
  if (r.schema == "walhook" && r.name == "outbox") outbox_oid_ = r.oid;
  if (r.schema == "walhook" && r.name == "endpoints") endpoints_oid_ = r.oid;
  return {};
}

boost::system::error_code stream_handler::on_message(const pgo::insert& m) {
  const auto* rel = relations_.find(m.relation_oid);
  if (!rel) return wal::errc::unknown_relation;
  if (m.relation_oid == outbox_oid_)
    deliver_row(row_view(*rel, m.new_tuple), current_final_lsn_, current_ticket_, current_xid_);
  else if (m.relation_oid == endpoints_oid_) apply_endpoint(row_view(*rel, m.new_tuple));
  return {};
}

boost::system::error_code stream_handler::on_message(const pgo::update& m) {
  const auto* rel = relations_.find(m.relation_oid);
  if (!rel) return wal::errc::unknown_relation;
  if (m.relation_oid != endpoints_oid_) return {};
  // walhook.endpoints has REPLICA IDENTITY FULL: the old row comes with every update (older
  // schemas send only a changed key). A changed id is a removal of the old one.
  const auto* old = m.old_tuple ? &*m.old_tuple : m.key_tuple ? &*m.key_tuple : nullptr;
  std::optional<row_view> old_row;
  if (old) old_row.emplace(*rel, *old);
  const row_view new_row(*rel, m.new_tuple);
  if (old_row && endpoint_id_of(*old_row) != endpoint_id_of(new_row)) remove_endpoint(*old_row);
  apply_endpoint(new_row, old_row ? &*old_row : nullptr);
  return {};
}

boost::system::error_code stream_handler::on_message(const pgo::delete_& m) {
  const auto* rel = relations_.find(m.relation_oid);
  if (!rel) return wal::errc::unknown_relation;
  if (m.relation_oid == endpoints_oid_) remove_endpoint(row_view(*rel, m.key_tuple ? *m.key_tuple : *m.old_tuple));
  return {};
}

boost::system::error_code stream_handler::on_message(const pgo::truncate& m) {
  for (auto oid : m.relation_oids)
    if (oid == endpoints_oid_) deliveries_.removal_streamed(directory_.ids(), std::nullopt, current_xid_, current_ticket_);
  return {};
}

/// Operator signals travel through the WAL, in order with the data: `walhook replay` and
/// `walhook endpoint enable|resume` emit pg_logical_emit_message(true, 'walhook', …):
/// "wake:<id>" (pending deliveries are due) or "resume:<id>" (its breaker closes too).
/// Any role may call pg_logical_emit_message (unless sql/roles.sql revoked it): a "resume" closes
/// the breaker only if its transaction also changed that endpoint's row in walhook.endpoints, as
/// `walhook endpoint resume|enable` does and the application's role cannot. A wake is harmless
/// (walhook looks for due rows) and needs no proof.
boost::system::error_code stream_handler::on_message(const pgo::logical_message& m) {
  if (m.prefix != "walhook") return {};
  bool resume = m.content.starts_with("resume:");
  if (!resume && !m.content.starts_with("wake:")) return {};
  std::int64_t id = 0;
  try {
    id = std::stoll(m.content.substr(m.content.find(':') + 1));
  } catch (const std::exception&) {
    return {};
  }
  if (resume && std::find(changed_endpoints_.begin(), changed_endpoints_.end(), id) == changed_endpoints_.end()) {
    log::warn("control.unconfirmed", {{"endpoint_id", id},
                                      {"message", "resume"},
                                      {"reason", "its transaction did not change the endpoint's row: the breaker stays as it is"}});
    resume = false;
  }
  deliveries_.wake(id, resume);
  return {};
}

}  // namespace walhook::relay
