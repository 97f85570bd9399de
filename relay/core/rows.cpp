#include "relay/core/rows.hpp"

#include "common/time.hpp"
#include "relay/core/endpoint_policies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace walhook::relay {
namespace pgo = wal::pgoutput;

row_view::state row_view::get(std::string_view column, std::string_view& out) const {
  for (std::size_t i = 0; i < rel_.columns.size(); ++i) {
    if (rel_.columns[i].name != column) continue;
    if (i >= tuple_.size()) return state::absent;
    const auto& v = tuple_[i];
    switch (v.kind) {
      case pgo::value_kind::null: return state::null;
      case pgo::value_kind::unchanged_toast: return state::unchanged;
      case pgo::value_kind::text:
      case pgo::value_kind::binary:
        out = v.data;
        return state::value;
    }
  }
  return state::absent;
}

std::optional<std::string> row_view::text(std::string_view column) const {
  std::string_view v;
  if (get(column, v) != state::value) return std::nullopt;
  return std::string(v);
}

std::string rejected_reason(std::string_view rejected) {
  return "the outbox bridge could not map " + std::string(rejected);
}

bool reserved_name(std::string_view name) {
  constexpr std::string_view prefix = "walhook.";
  if (name.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(name[i])) != prefix[i]) return false;
  return true;
}

boost::system::result<delivery::event> event_from_row(const row_view& row, lsn commit_lsn, std::string& why) {
  why.clear();
  delivery::event ev;
  auto id = row.text("id");
  auto tenant = row.text("tenant_id");
  auto type = row.text("event_type");
  auto payload = row.text("payload");
  auto created = row.text("created_at");
  if (!id || id->empty()) why = "outbox row without id";
  else if (!tenant) why = "outbox row without tenant_id";
  else if (!type) why = "outbox row without event_type";
  else if (!payload) why = "outbox row without payload";
  if (!why.empty()) return std::make_error_code(std::errc::invalid_argument);
  ev.id = std::move(*id);
  ev.tenant_id = std::move(*tenant);
  ev.type = std::move(*type);
  ev.payload = std::move(*payload);
  ev.aggregate_id = row.text("aggregate_id");
  ev.aggregate_type = row.text("aggregate_type");  // absent before migration 009: none
  ev.merge_key = row.text("merge_key");
  ev.traceparent = row.text("traceparent");  // absent before migration 012: none
  ev.commit_lsn = commit_lsn;
  // Absent from a Relation of an older schema (before migration 006): no direct route.
  if (auto direct = row.text("endpoint_id")) {
    std::int64_t id = 0;
    auto [p, ec] = std::from_chars(direct->data(), direct->data() + direct->size(), id);
    if (ec != std::errc{} || p != direct->data() + direct->size()) {
      why = "outbox row with an endpoint_id that is not a number";
      return std::make_error_code(std::errc::invalid_argument);
    }
    ev.endpoint_id = id;
  }
  ev.stored_at = row.text("stored_at").value_or("");
  // walhook.* types and merge keys are walhook's own (migration 008): a row walhook did not write
  // is a forgery (written before the constraint, or by a role that bypasses it).
  const auto written = row.text("by_walhook");  // 't' in the stream, 'true' from a ::text cast
  const bool by_walhook = written && (*written == "t" || *written == "true");
  if (!by_walhook && (reserved_name(ev.type) || (ev.merge_key && reserved_name(*ev.merge_key))))
    why = "event type and merge key walhook.* are reserved for walhook's own notifications";
  // A row an outbox bridge could not map (migration 009): never an event, whatever else it holds.
  if (auto rejected = row.text("rejected")) why = rejected_reason(*rejected);
  if (created) {
    std::string created_why;
    auto iso = pg_timestamptz_to_iso8601(*created, &created_why);
    if (why.empty()) why = std::move(created_why);
    if (!iso) {
      ev.created_at = std::move(*created);
      return ev;
    }
    ev.created_at = std::move(*iso);
  } else {
    ev.created_at = format_iso8601(system_now());
  }
  ev.body = delivery::make_body(ev);
  return ev;
}

bool endpoint::exists_for(std::uint32_t xid) const {
  return xid == 0 || !created_snapshot || !created_snapshot->visible(created_snapshot->widen(xid));
}

std::string_view to_string(endpoint_status s) {
  switch (s) {
    case endpoint_status::active: return "active";
    case endpoint_status::paused: return "paused";
    case endpoint_status::disabled: return "disabled";
  }
  return "active";
}

bool endpoint::subscribed(std::string_view event_type) const {
  if (!event_types) return true;
  return std::find(event_types->begin(), event_types->end(), event_type) != event_types->end();
}

namespace {

/// The oauth_* and proxy columns (migration 014): the endpoint's OAuth2 client and its target's
/// egress. Both are for HTTP endpoints; the token endpoint leaves the way the endpoint does.
template <class Fail>
void resolve_egress(endpoint& e, Fail& fail) {
  e.oauth.reset();
  const auto& p = e.policies;
  delivery::http_target* http = e.target && e.target->kind == delivery::sink_kind::http ? &e.target->http : nullptr;
  if (p.proxy) {
    std::string why;
    if (!http) {
      fail("invalid endpoint proxy: a proxy is for http(s) endpoints only");
    } else if (*p.proxy == "direct") {
      http->egress = delivery::egress_route::direct;
    } else if (auto proxy = delivery::parse_proxy_url(*p.proxy, &why)) {
      http->egress = delivery::egress_route::proxy;
      http->proxy = *proxy;
    } else {
      fail("invalid endpoint proxy: " + why);
    }
  }
  if (!p.oauth_token_url && !p.oauth_client_id && !p.oauth_client_secret) return;
  if (!p.oauth_token_url || !p.oauth_client_id || !p.oauth_client_secret)
    return fail("invalid endpoint OAuth2 settings: a token URL, a client id and a client secret go together");
  if (!http) return fail("invalid endpoint OAuth2 settings: OAuth2 is for http(s) endpoints only");
  auto token_target = delivery::parse_url(*p.oauth_token_url);
  if (!token_target) return fail("invalid endpoint OAuth2 token URL: " + delivery::redact_url(*p.oauth_token_url));
  const auto named = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [](const auto& h) {
      return std::equal(h.first.begin(), h.first.end(), std::string_view("authorization").begin(),
                        std::string_view("authorization").end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
    });
  };
  if (named(e.headers) || named(e.secret_headers))
    return fail("invalid endpoint OAuth2 settings: the endpoint also sets an Authorization header");
  token_target->private_network_allowed = http->private_network_allowed;
  token_target->egress = http->egress;
  token_target->proxy = http->proxy;
  e.oauth = delivery::oauth2_client{std::move(*token_target), *p.oauth_client_id, *p.oauth_client_secret,
                                    p.oauth_scope.value_or("")};
}

/// headers, secret_headers, filter, max_rate from e.policies; the first unusable one is the
/// endpoint's config_error (its deliveries end dead with it rather than go out without them).
void resolve_policies(endpoint& e) {
  e.headers.clear();
  e.secret_headers.clear();
  e.filter.reset();
  e.max_rate.reset();
  auto fail = [&](std::string why) {
    if (e.config_error.empty()) e.config_error = std::move(why);
  };
  auto headers = [&](const std::optional<std::string>& column, const char* what, auto& out) {
    if (!column) return;
    const auto items = parse_text_array(*column);
    std::string why;
    auto parsed = items ? headers_from_items(*items, &why) : boost::system::result<std::vector<header_field>>(
                                                                 std::make_error_code(std::errc::invalid_argument));
    if (parsed) out = std::move(*parsed);
    else fail(fmt::format("invalid endpoint {}: {}", what, why.empty() ? "not a text array" : why));
  };
  headers(e.policies.headers, "headers", e.headers);
  headers(e.policies.secret_headers, "secret headers", e.secret_headers);
  if (auto twice = repeated_name({&e.headers, &e.secret_headers})) {
    fail("invalid endpoint headers: header " + *twice + " is set twice (headers and secret headers)");
    e.headers.clear();
    e.secret_headers.clear();
  }
  if (e.policies.filter) {
    std::string why;
    if (auto f = payload_filter::compile(*e.policies.filter, &why)) e.filter = std::move(*f);
    else fail("invalid endpoint filter: " + why);
  }
  if (e.policies.max_rate) {
    if (auto r = delivery::parse_rate(*e.policies.max_rate)) e.max_rate = *r;
    else fail("invalid endpoint max_rate: " + *e.policies.max_rate);
  }
  resolve_egress(e, fail);
}

}  // namespace

bool is_inbox_tenant(std::string_view tenant_id) { return tenant_id.starts_with("inbox:") && tenant_id.size() > 6; }

void resolve_endpoint(endpoint& e) {
  e.config_error.clear();
  e.target.reset();
  e.keys.clear();
  auto target = delivery::parse_destination(e.url);
  if (!target) {
    e.config_error = "invalid endpoint URL: " + delivery::redact_url(e.url);
    if (delivery::names_broker(e.url)) e.config_error += " (" + target.error().detail() + ")";
  } else {
    e.target = std::move(*target);
    const bool own_handler = is_inbox_tenant(e.tenant_id);
    if (e.target->kind == delivery::sink_kind::http) e.target->http.private_network_allowed = own_handler;
    else e.target->broker.private_network_allowed = own_handler;
  }
  auto keys = delivery::parse_secrets(e.secret);
  if (!keys) {
    if (e.config_error.empty()) e.config_error = "invalid endpoint secret (expected whsec_<base64>)";
  } else {
    e.keys = std::move(*keys);
  }
  resolve_policies(e);
}

namespace {

/// The items of a PostgreSQL integer array ("{409,425}"); empty if any is not an integer.
std::vector<std::int64_t> int_array(std::optional<std::string_view> s) {
  std::vector<std::int64_t> out;
  const auto items = s ? parse_text_array(*s) : std::nullopt;
  if (!items) return out;
  for (const auto& item : *items) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc{} || p != item.data() + item.size()) return {};
    out.push_back(v);
  }
  return out;
}

/// The columns of migration 011 (an inbox destination's deferral and retry schedule); a value
/// walhook cannot read leaves that policy off. `take(column, assign)` as in endpoint_from_row.
template <class Take>
void take_processing_policies(Take& take, endpoint& e) {
  take("defer_statuses", [&](std::optional<std::string_view> s) {
    e.defer_statuses.clear();
    for (auto v : int_array(s)) e.defer_statuses.push_back(static_cast<int>(v));
  });
  take("max_deferrals", [&](std::optional<std::string_view> s) {
    int n = 0;
    if (s) std::from_chars(s->data(), s->data() + s->size(), n);
    e.max_deferrals = std::max(0, n);
  });
  take("retry_schedule_ms", [&](std::optional<std::string_view> s) {
    e.retry_schedule.clear();
    for (auto v : int_array(s)) e.retry_schedule.emplace_back(std::max<std::int64_t>(v, 0));
  });
}

/// The columns of migration 012 as stored (resolve_endpoint reads them). `take` as in endpoint_from_row.
template <class Take>
void take_endpoint_policies(Take& take, endpoint& e) {
  auto text = [](std::optional<std::string>& out) {
    return [&out](std::optional<std::string_view> s) { out = s ? std::optional<std::string>(*s) : std::nullopt; };
  };
  take("headers", text(e.policies.headers));
  take("secret_headers", text(e.policies.secret_headers));
  take("filter", text(e.policies.filter));
  take("max_rate", text(e.policies.max_rate));
  take("oauth_token_url", text(e.policies.oauth_token_url));
  take("oauth_client_id", text(e.policies.oauth_client_id));
  take("oauth_client_secret", text(e.policies.oauth_client_secret));
  take("oauth_scope", text(e.policies.oauth_scope));
  take("proxy", text(e.policies.proxy));
  take("rate_burst", [&](std::optional<std::string_view> s) {
    int n = 0;
    if (s) std::from_chars(s->data(), s->data() + s->size(), n);
    e.rate_burst = std::max(0, n);
  });
}

}  // namespace

boost::system::result<endpoint> endpoint_from_row(const row_view& row, const endpoint* previous,
                                                  const row_view* old_row, std::string* why) {
  endpoint e;
  if (previous) e = *previous;
  std::string_view v;
  std::string missing;
  auto take = [&](std::string_view col, auto&& assign) {
    auto state = row.get(col, v);
    if (state == row_view::state::unchanged && old_row) state = old_row->get(col, v);
    switch (state) {
      case row_view::state::value: assign(std::optional<std::string_view>(v)); break;
      case row_view::state::null: assign(std::optional<std::string_view>()); break;
      case row_view::state::unchanged:
        if (!previous) missing = col;  // neither the old tuple nor the cache has it
        break;
      case row_view::state::absent: break;  // keep the cached value
    }
  };
  bool has_id = false;
  take("id", [&](std::optional<std::string_view> s) {
    if (!s) return;
    std::int64_t id = 0;
    auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), id);
    if (ec == std::errc{} && p == s->data() + s->size()) {
      e.id = id;
      has_id = true;
    }
  });
  if (!has_id) return std::make_error_code(std::errc::invalid_argument);
  take("tenant_id", [&](auto s) { e.tenant_id = s ? std::string(*s) : ""; });
  take("url", [&](auto s) { e.url = s ? std::string(*s) : ""; });
  take("secret", [&](auto s) { e.secret = s ? std::string(*s) : ""; });
  take("event_types", [&](auto s) {
    if (!s) {
      e.event_types.reset();
    } else {
      e.event_types = parse_text_array(*s);
      if (!e.event_types) e.event_types = std::vector<std::string>{};  // unparseable: subscribe to nothing
    }
  });
  take("max_concurrency", [&](auto s) {
    int n = 4;
    if (s) std::from_chars(s->data(), s->data() + s->size(), n);
    e.max_concurrency = std::max(1, n);
  });
  take("status", [&](auto s) {
    if (s && *s == "paused") e.status = endpoint_status::paused;
    else if (s && *s == "disabled") e.status = endpoint_status::disabled;
    else e.status = endpoint_status::active;
  });
  take("ordering", [&](auto s) { e.aggregate_ordering = s && *s == "aggregate"; });
  take("created_snapshot", [&](auto s) {
    e.created_snapshot = s ? pg_snapshot::parse(*s) : std::nullopt;
  });
  take("secret_grace_until", [&](auto s) {
    // Not a timestamp walhook can read ('infinity', BC): no expiry it could act on. Clamped to
    // 1970–2199 (system_clock spans 1678–2262 only), which changes no decision.
    using namespace std::chrono;
    const auto t = s ? parse_pg_timestamptz(*s) : std::nullopt;
    if (t) e.secret_grace_until = time_point_cast<system_clock::duration>(std::clamp(*t, sys_micros{}, sys_micros{} + years{229}));
    else e.secret_grace_until.reset();
  });
  take("contact_endpoint_id", [&](auto s) {
    std::int64_t id = 0;
    if (s && std::from_chars(s->data(), s->data() + s->size(), id).ec == std::errc{}) e.contact_endpoint_id = id;
    else e.contact_endpoint_id.reset();
  });
  take_processing_policies(take, e);
  take_endpoint_policies(take, e);
  if (!missing.empty()) {
    if (why) *why = "column " + missing + " is unchanged in the stream and walhook has no earlier value of it";
    return std::make_error_code(std::errc::invalid_argument);
  }
  resolve_endpoint(e);
  return e;
}

std::optional<std::vector<std::string>> parse_text_array(std::string_view s) {
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') return std::nullopt;
  std::vector<std::string> out;
  std::size_t i = 1, end = s.size() - 1;
  if (i == end) return out;
  while (i <= end) {
    std::string item;
    bool quoted = false;
    if (i < end && s[i] == '"') {
      quoted = true;
      ++i;
      while (i < end && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < end) ++i;
        item += s[i++];
      }
      if (i >= end) return std::nullopt;  // unterminated quote
      ++i;                                // closing quote
    } else {
      while (i < end && s[i] != ',') {
        // Nested arrays are not text[] of one dimension; PostgreSQL quotes any element holding
        // braces or quotes.
        if (s[i] == '{' || s[i] == '}' || s[i] == '"') return std::nullopt;
        item += s[i++];
      }
      if (item.empty()) return std::nullopt;  // "{a,,b}": an empty element must be quoted ("")
    }
    if (quoted || item != "NULL") out.push_back(std::move(item));
    if (i == end) break;
    if (s[i] != ',') return std::nullopt;
    ++i;
    if (i == end) return std::nullopt;  // trailing comma
  }
  return out;
}

wal::pgoutput::relation relation_of_columns(const std::vector<std::string>& columns) {
  wal::pgoutput::relation rel;
  for (const auto& name : columns) rel.columns.push_back({0, name, 0, -1});
  return rel;
}

wal::pgoutput::tuple tuple_of_text(const std::vector<std::optional<std::string>>& row) {
  namespace pgo = wal::pgoutput;
  pgo::tuple t;
  for (const auto& v : row)
    t.push_back(v ? pgo::tuple_value{pgo::value_kind::text, *v} : pgo::tuple_value{pgo::value_kind::null, {}});
  return t;
}

std::vector<endpoint> endpoints_from_table(const std::vector<std::string>& columns,
                                           const std::vector<std::vector<std::optional<std::string>>>& rows) {
  const auto rel = relation_of_columns(columns);
  std::vector<endpoint> out;
  for (const auto& r : rows) {
    const auto t = tuple_of_text(r);
    if (auto e = endpoint_from_row(row_view(rel, t), nullptr)) out.push_back(std::move(*e));
  }
  return out;
}

}  // namespace walhook::relay
