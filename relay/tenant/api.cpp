// The tenant API's entry point: the token's form and rate, the route, then on the database
// worker the token's row, its scope and the handler. Nothing else happens here.

#include "relay/tenant/api.hpp"

#include "common/log.hpp"
#include "relay/admin/access.hpp"
#include "relay/admin/api.hpp"
#include "relay/admin/db_worker.hpp"
#include "relay/core/outcome_log.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/tenants.hpp"
#include "relay/admin/json_body.hpp"
#include "relay/tenant/handlers.hpp"
#include "relay/tenant/portal.hpp"
#include "relay/tenant/rate_limit.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>

namespace walhook::relay::tenant {
namespace asio = boost::asio;

namespace {

/// The token of "Authorization: Bearer <token>" (the scheme in any case, RFC 9110 §11.1); "" if
/// there is none.
std::string bearer_of(const std::string& header) {
  constexpr std::string_view scheme = "bearer ";
  if (header.size() <= scheme.size()) return {};
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i]) return {};
  auto token = header.substr(scheme.size());
  token.erase(0, token.find_first_not_of(' '));
  token.erase(token.find_last_not_of(' ') + 1);
  return token;
}

/// Content-Type is application/json (any case, parameters such as charset allowed; RFC 9110 §8.3.1).
bool is_json(std::string_view content_type) {
  auto type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  constexpr std::string_view json = "application/json";
  return type.size() == json.size() && std::equal(type.begin(), type.end(), json.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

api_response unauthorized(std::string_view why) {
  auto a = error_response(401, why);
  a.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"walhook\"");
  return a;
}

/// What the engine knows of an event in memory (GET /v1/events/{id}), read on its executor.
struct event_record {
  std::vector<outcome_entry> recent;
  record_window window;
};

/// The handler of `r` for `c`.
api_response dispatch(blocking_db& db, const caller& c, const route& r, const api_request& req, event_record record) {
  switch (r.kind) {
    case route_kind::events: return list_events(db, c, req);
    case route_kind::event: return get_event(db, c, r.event_id, std::move(record.recent), record.window);
    case route_kind::endpoints: return list_endpoints(db, c);
    case route_kind::create_endpoint: return create_endpoint(db, c, req);
    case route_kind::endpoint: return get_endpoint(db, c, r.endpoint_id);
    case route_kind::update_endpoint: return update_endpoint(db, c, r.endpoint_id, req);
    case route_kind::delete_endpoint: return delete_endpoint(db, c, r.endpoint_id);
    case route_kind::pause: return set_status(db, c, r.endpoint_id, "pause", req);
    case route_kind::resume: return set_status(db, c, r.endpoint_id, "resume", req);
    case route_kind::rotate_secret: return rotate_secret(db, c, r.endpoint_id, req);
    case route_kind::test_send: return test_send(db, c, r.endpoint_id, req);
    case route_kind::deliveries: return list_deliveries(db, c, r.endpoint_id, req);
    case route_kind::resend: return resend(db, c, r.endpoint_id, req);
    case route_kind::replay: return replay(db, c, r.endpoint_id, req);
  }
  return error_response(500, "unrouted route kind");  // not reached: the switch is exhaustive
}

class tenant_api final : public http_site, public std::enable_shared_from_this<tenant_api> {
 public:
  tenant_api(asio::any_io_executor ex, engine& e, api_settings s)
      : executor_(ex), engine_(e), settings_(std::move(s)), worker_(settings_.database_url), limiter_(settings_.rate, settings_.burst) {}

  asio::awaitable<api_response> handle(const api_request& req) override {
    auto self = shared_from_this();  // the worker's answer may come after stop()
    const std::string_view path = std::string_view(req.target).substr(0, req.target.find('?'));
    if (path == "/portal" || path.starts_with("/portal/")) co_return co_await portal(req, path);
    // A bearer token, or else the portal's session cookie with its CSRF token.
    credentials cred{.token = bearer_of(req.authorization), .session = {}};
    if (cred.token.empty()) cred.session = cookie_value(req.cookie, portal_cookie);
    if (cred.token.empty() && cred.session.empty()) {
      auto denied = unauthorized("give Authorization: Bearer <token> (walhook tenant token create)");
      co_return co_await refuse(req, std::move(denied));
    }
    if (!cred.session.empty() && req.csrf_token.empty())
      co_return error_response(403, "a portal session's request carries its X-CSRF-Token");
    if (auto refused = admit(req, cred.token.empty() ? cred.session : cred.token)) co_return std::move(*refused);
    auto routed = route_of(req.method, req.target);
    if (auto* answer = std::get_if<api_response>(&routed)) co_return std::move(*answer);
    const auto r = std::get<route>(routed);
    if (r.changes && !req.body.empty() && !is_json(req.content_type))
      co_return error_response(415, "send the body as Content-Type: application/json");
    const std::string secret = cred.token.empty() ? cred.session : cred.token;
    auto answer = co_await run(std::move(cred), r, req);
    co_return co_await finish(req, std::move(answer), secret);
  }

  void stop() override { worker_.stop(); }

 private:
  /// Who asks: a bearer token, or a portal session (its cookie; the CSRF token is the request's).
  struct credentials {
    std::string token;
    std::string session;
  };

  /// Before the database: a client whose credentials keep failing (a flood of invented tokens
  /// must not take the worker every tenant shares), then the rate of these credentials.
  std::optional<api_response> admit(const api_request& req, const std::string& secret) {
    const auto now = std::chrono::steady_clock::now();
    const auto key = operations::sha256_hex(secret);
    // Credentials that worked in the last minute pass the address's gate: behind a proxy every
    // customer shares one address, and a stranger's failures must not lock them out.
    const auto good = known_good_.find(key);
    const bool trusted = good != known_good_.end() && now - good->second < std::chrono::minutes{1};
    if (!trusted && failed_.exhausted(client_of(req), now)) {
      auto a = error_response(429, "too many requests with invalid tokens from this address");
      a.headers.emplace_back("Retry-After", "10");
      return a;
    }
    if (auto wait = limiter_.take(key, now)) {
      auto a = error_response(429, fmt::format("too many requests with this token: at most {} per second", settings_.rate));
      a.headers.emplace_back("Retry-After", std::to_string(wait->count()));
      return a;
    }
    return std::nullopt;
  }

  /// After the database: a 401 counted and delayed; a 5xx told no more than to come back (the
  /// worker logged what failed, admin.database_failed).
  asio::awaitable<api_response> finish(const api_request& req, api_response answer, const std::string& secret = {}) {
    if (!secret.empty() && answer.status != 401) {
      if (known_good_.size() >= 10000) known_good_.clear();  // bounded; they earn their place again
      known_good_[operations::sha256_hex(secret)] = std::chrono::steady_clock::now();
    }
    if (answer.status == 401) {
      failed_.take(client_of(req), std::chrono::steady_clock::now());
      co_return co_await refuse(req, std::move(answer));
    }
    if (answer.status >= 500) {
      answer = error_response(answer.status, "the service is unavailable now: try again shortly");
      answer.headers.emplace_back("Retry-After", "5");
    }
    co_return answer;
  }

  static std::string client_of(const api_request& req) { return req.remote.empty() ? std::string("-") : req.remote; }

  /// /portal/…: its files (GET), POST /portal/session {"code"} (a one-time code for a session),
  /// POST /portal/logout.
  asio::awaitable<api_response> portal(const api_request& req, std::string_view path) {
    const bool post = req.method == "POST";
    if (path != "/portal/session" && path != "/portal/logout") {
      if (req.method != "GET" && req.method != "HEAD") co_return error_response(405, "use GET here");
      co_return portal_file(path);
    }
    if (!post) co_return error_response(405, "use POST here");
    if (auto refused = admit(req, "portal:" + client_of(req))) co_return std::move(*refused);
    if (path == "/portal/logout") co_return co_await sign_out(req);
    if (!is_json(req.content_type)) co_return error_response(415, "send the body as Content-Type: application/json");
    auto answer = co_await sign_in(req);
    co_return co_await finish(req, std::move(answer));
  }

  /// POST /portal/logout: ends the session of the cookie if the request carries its CSRF token.
  /// Not a coroutine: GCC 12 destroyed a temporary lambda passed to db_worker::run inside a
  /// coroutine twice (a crash on every sign-out; db_worker.hpp).
  asio::awaitable<api_response> sign_out(const api_request& req) {
    return worker_.run([id = cookie_value(req.cookie, portal_cookie), csrf = req.csrf_token,
                        secure = settings_.tls](blocking_db& db) {
      operations::end_session(db, id, csrf);
      return session_ended(secure);
    });
  }

  /// POST /portal/session {"code"}: the one-time code for a session. Not a coroutine (as sign_out).
  asio::awaitable<api_response> sign_in(const api_request& req) {
    return worker_.run([&req, secure = settings_.tls](blocking_db& db) {
      json_body body(req.body);
      body.only({"code"});
      auto session = operations::exchange_portal_code(db, body.text("code").value_or(""));
      if (!session) return unauthorized("this link is used or expired: ask for a new one");
      log::info("tenant.portal_session", {{"tenant", session->tenant},
                                          {"session", "portal:" + operations::sha256_hex(session->id).substr(0, 12)},
                                          {"remote", req.remote.empty() ? std::string("-") : req.remote}});
      return session_started(*session, secure);
    });
  }

  /// The database part: the token's row (or the session's), its scope, the handler. Not a
  /// coroutine (db_worker::run).
  asio::awaitable<api_response> run(credentials cred, const route& r, const api_request& req) {
    event_record record;
    if (r.kind == route_kind::event) {
      const auto& log = engine_.recent_outcomes();
      record = {log.of_event(r.event_id), record_window{.kept = log.size(), .oldest = log.oldest()}};
    }
    return worker_.run([this, cred = std::move(cred), r, &req, record = std::move(record)](blocking_db& db) mutable
                       -> api_response {
      auto holder = cred.token.empty() ? operations::authenticate_session(db, cred.session, req.csrf_token)
                                       : operations::authenticate(db, cred.token);
      if (!holder || operations::is_closed_tenant(holder->tenant, settings_.operator_tenant))
        return unauthorized("unknown, revoked or expired token");
      if (r.changes && holder->scope != operations::token_scope::manage)
        return error_response(403, "this token's scope is read: changes need a token of scope manage");
      const caller c{.holder = std::move(*holder),
                     .remote = req.remote,
                     .slot_base = settings_.slot_base,
                     .operator_tenant = settings_.operator_tenant};
      return dispatch(db, c, r, req, std::move(record));
    });
  }

  /// A 401 after auth_failure_delay (guessing costs time), logged at most once per 10 s.
  asio::awaitable<api_response> refuse(const api_request& req, api_response answer) {
    if (const auto n = failures_.failed(std::chrono::steady_clock::now()); n > 0)
      log::warn("api.auth_failed", {{"remote", req.remote.empty() ? std::string("-") : req.remote},
                                    {"target", req.target.substr(0, std::min<std::size_t>(req.target.find('?'), 200))},
                                    {"failures", n}});
    asio::steady_timer delay(executor_, auth_failure_delay);
    co_await delay.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return answer;
  }

  asio::any_io_executor executor_;
  engine& engine_;
  api_settings settings_;
  db_worker worker_;
  rate_limiter limiter_;
  /// Failed authentications per client address: 1 a second, 20 at once; past that, 429 without
  /// a query.
  rate_limiter failed_{1.0, 20.0};
  /// Credentials (their hash) that authenticated, and when last.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> known_good_;
  auth_failure_log failures_;
};

}  // namespace

std::shared_ptr<http_site> make_api(asio::any_io_executor ex, engine& e, api_settings settings) {
  return std::make_shared<tenant_api>(ex, e, std::move(settings));
}

}  // namespace walhook::relay::tenant
