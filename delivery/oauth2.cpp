#include "delivery/oauth2.hpp"

#include "delivery/signing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace walhook::delivery {

namespace asio = boost::asio;

namespace {

/// application/x-www-form-urlencoded for one value: everything but RFC 3986's unreserved
/// characters percent-encoded (a space as %20, which form decoding reads as a space too).
std::string form_encoded(std::string_view value) { return boost::urls::encode(value, boost::urls::unreserved_chars); }

/// At most 200 characters of `text` with anything but visible ASCII and spaces replaced by '?':
/// a hostile token endpoint's words end up in last_error and logs.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 200) out += "…";
  return out;
}

bool visible_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

/// expires_in as a number or a numeric string (some servers quote it); nullopt if neither.
std::optional<std::int64_t> seconds_of(simdjson::dom::element v) {
  if (std::int64_t n = 0; !v.get(n)) return n;
  if (double d = 0; !v.get(d)) return d >= 1 ? std::optional<std::int64_t>(d < 1e12 ? static_cast<std::int64_t>(d) : 1'000'000'000'000) : std::nullopt;
  std::string_view s;
  if (v.get(s)) return std::nullopt;
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return n;
}

using token_result = boost::system::result<oauth2_token, std::string>;
token_result refused(std::string why) { return token_result(boost::system::in_place_error, std::move(why)); }

/// `text` with the client secret, and the Basic credentials token_request makes of it, replaced
/// by "[redacted]": a token endpoint that echoes what it was sent must not put them in last_error.
std::string without_credentials(std::string text, const oauth2_client& client) {
  const std::string encoded = form_encoded(client.client_id) + ":" + form_encoded(client.client_secret);
  for (const std::string& secret : {base64_encode(encoded), encoded, form_encoded(client.client_secret), client.client_secret}) {
    if (secret.empty()) continue;
    for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at))
      text.replace(at, secret.size(), "[redacted]");
  }
  return text;
}

}  // namespace

http_request token_request(const oauth2_client& client) {
  http_request r;
  r.body = "grant_type=client_credentials";
  if (!client.scope.empty()) r.body += "&scope=" + form_encoded(client.scope);
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded"},
               {"Accept", "application/json"},
               {"Authorization",
                "Basic " + base64_encode(form_encoded(client.client_id) + ":" + form_encoded(client.client_secret))}};
  r.keep_body = true;
  return r;
}

boost::system::result<oauth2_token, std::string> parse_token_response(unsigned status, std::string_view body) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const simdjson::padded_string padded(body);
  const bool json = !parser.parse(padded).get(doc) && doc.is_object();
  if (status != 200) {
    std::string why = fmt::format("answered {}", status);
    std::string_view code, description;
    if (json && !doc["error"].get(code)) {
      why += ": " + printable(code);
      if (!doc["error_description"].get(description)) why += " (" + printable(description) + ")";
    }
    return refused(std::move(why));
  }
  if (!json) return refused("answered 200 without a JSON object");
  std::string_view token, type;
  if (doc["access_token"].get(token) || token.empty()) return refused("answered 200 without an access_token");
  if (token.size() > 8192 || !visible_ascii(token))
    return refused("answered an access_token walhook cannot send (longer than 8 KiB, or not visible ASCII)");
  if (doc["token_type"].get(type)) return refused("answered 200 without a token_type");
  if (!equal_ignoring_case(type, "bearer"))
    return refused(fmt::format("answered token_type {}: walhook sends Bearer tokens only", printable(type)));
  std::int64_t expires_in = 300;
  if (simdjson::dom::element v; !doc["expires_in"].get(v)) {
    auto n = seconds_of(v);
    if (!n || *n < 1) return refused("answered an expires_in that is not a positive number of seconds");
    expires_in = std::min<std::int64_t>(*n, 365LL * 24 * 3600);
  }
  return oauth2_token{std::string(token), std::chrono::seconds(expires_in)};
}

/// A token call under way: its waiters sleep on `timer` until the caller cancels it.
struct oauth2_tokens::fetch {
  explicit fetch(asio::any_io_executor ex) : timer(ex, steady_clock::time_point::max()) {}
  asio::steady_timer timer;
  std::optional<boost::system::result<std::string, transport_error>> result;
};

asio::awaitable<boost::system::result<std::string, transport_error>> oauth2_tokens::bearer(
    transport& transport, std::string key, oauth2_client client, std::chrono::milliseconds deadline,
    std::string rejected) {
  auto& e = (*entries_)[key];
  if (e.client != client) e = entry{client, {}, {}, nullptr};  // new credentials: nothing of the old ones is used
  if (!rejected.empty() && e.token == rejected) e.token.clear();  // never offered again, even if no new one comes
  if (!e.token.empty() && clock_.steady_now() < e.renew_at) co_return e.token;
  if (auto pending = e.pending) {
    co_await pending->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (pending->result) co_return *pending->result;
    co_return transport_error(transport_errc::cancelled);
  }
  co_return co_await fetch_token(transport, std::move(key), std::move(client), deadline);
}

asio::awaitable<boost::system::result<std::string, transport_error>> oauth2_tokens::fetch_token(
    transport& transport, std::string key, oauth2_client client, std::chrono::milliseconds deadline) {
  auto f = std::make_shared<fetch>(co_await asio::this_coro::executor);
  (*entries_)[key].pending = f;
  // However this call ends (an exception too), its waiters wake and the entry stops waiting for it.
  struct release_on_exit {
    std::weak_ptr<std::map<std::string, entry>> entries;
    std::string key;
    std::shared_ptr<fetch> f;
    ~release_on_exit() {
      if (auto map = entries.lock())
        if (auto it = map->find(key); it != map->end() && it->second.pending == f) it->second.pending.reset();
      if (!f->result) f->result = transport_error(transport_errc::auth_failed, "the token request was abandoned");
      f->timer.cancel();
    }
  } release{entries_, key, f};
  http_request request = token_request(client);
  request.deadline = deadline;
  const std::string pool_key = "oauth2:" + key;
  const http_target target = client.token_target;
  const auto started = clock_.steady_now();
  auto answer = co_await transport.async_post(pool_key, target, request);
  boost::system::result<std::string, transport_error> out = transport_error(transport_errc::auth_failed);
  std::optional<oauth2_token> token;
  if (!answer) {
    out = transport_error(transport_errc::auth_failed, fmt::format("token endpoint {}: {}", target.host, answer.error().text()));
  } else if (auto parsed = parse_token_response(
                 answer->status, answer->status == 200 ? answer->body : without_credentials(answer->body, client));
             !parsed) {
    out = transport_error(transport_errc::auth_failed, fmt::format("token endpoint {} {}", target.host, parsed.error()));
  } else {
    token = std::move(*parsed);
    out = token->access_token;
  }
  if (!out) out = transport_error(transport_errc::auth_failed, without_credentials(out.error().detail(), client));
  // Kept only for the credentials it was asked with, and only by the entry that asked.
  if (auto it = entries_->find(key); it != entries_->end() && it->second.pending == f && token && it->second.client == client) {
    it->second.token = token->access_token;
    it->second.renew_at = started + token->expires_in - std::min<std::chrono::seconds>(refresh_margin, token->expires_in / 2);
  }
  f->result = out;
  co_return out;
}

}  // namespace walhook::delivery
