#pragma once
// OAuth 2.0 client credentials (RFC 6749 §4.4) for an endpoint that wants a bearer token besides
// the signature (walhook.endpoints.oauth_*, migration 014; docs/endpoint-policies.md, "OAuth2").
//
// walhook asks the endpoint's token URL for an access token, authenticating with the client id and
// secret by HTTP Basic (§2.3.1), keeps it until shortly before it expires (expires_in, §5.1), and
// sends it as `Authorization: Bearer <token>` (RFC 6750 §2.1). An endpoint that answers 401 gets
// a new token and the attempt is repeated once with it. Concurrent attempts share one token
// request (single flight). The token request goes through the same transport as the attempts:
// the SSRF guard, the total deadline and the egress proxy apply to it.

#include "common/time.hpp"
#include "delivery/transport.hpp"
#include "delivery/url.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace walhook::delivery {

/// An endpoint's client credentials, as walhook.endpoints stores them.
struct oauth2_client {
  http_target token_target;   ///< the token URL, parsed (parse_url; the endpoint's egress and SSRF exemption)
  std::string client_id;      ///< client_id (RFC 6749 §2.2)
  std::string client_secret;  ///< client_secret (§2.3.1): a secret, never logged or shown
  std::string scope;          ///< space-separated scopes (§3.3); "" asks for none
  bool operator==(const oauth2_client&) const = default;
};

/// The token request (§4.4.2): `grant_type=client_credentials` (and `scope=…`) as
/// application/x-www-form-urlencoded, the client authenticated by HTTP Basic with the
/// form-encoded id and secret (§2.3.1), Accept: application/json; the body is kept.
http_request token_request(const oauth2_client& client);

/// A token the endpoint's authorization server issued.
struct oauth2_token {
  std::string access_token;  ///< sent as is after "Bearer "
  std::chrono::seconds expires_in{0};
};

/// Reads a token response: 200 with a JSON object holding a string access_token of visible ASCII
/// (RFC 6750 §2.1 b64token and its kin; at most 8 KiB), token_type "Bearer" (any case; §7.1: a
/// client must not use a type it does not know) and expires_in (seconds, a number or a numeric
/// string; 300 if absent; at least 1). Errors: a sentence for last_error — with an error
/// response (§5.2), its `error` code and the start of its `error_description`, printable only.
boost::system::result<oauth2_token, std::string> parse_token_response(unsigned status, std::string_view body);

/// Tokens per endpoint, each used until `refresh_margin` before it expires (or half its lifetime,
/// if shorter), on the transport's executor only.
class oauth2_tokens {
 public:
  static constexpr std::chrono::seconds refresh_margin{30};

  explicit oauth2_tokens(const clock_source& clock) : clock_(clock) {}

  /// The access token for endpoint `key` with `client`'s credentials: the cached one, unless it
  /// expires soon, was issued for other credentials, or is `rejected` (the endpoint answered 401
  /// to it); otherwise one fetched with `transport` (a call already under way is joined, not
  /// repeated). Errors: transport_errc::auth_failed, detail "token endpoint <host>: <why>" (the
  /// token call's transport error, or what parse_token_response says). A failure is not cached.
  /// The token call gets `deadline` (what is left of the attempt). `client` must be the
  /// endpoint's credentials of now: other ones replace the cached entry. `transport` must outlive
  /// the awaitable. The client secret, and the Basic credentials made of it, never appear in an
  /// error (a token endpoint may echo them).
  boost::asio::awaitable<boost::system::result<std::string, transport_error>> bearer(
      transport& transport, std::string key, oauth2_client client, std::chrono::milliseconds deadline,
      std::string rejected = {});

  /// Drops endpoint `key`'s token (removed, or its credentials changed).
  void forget(const std::string& key) { entries_->erase(key); }

 private:
  struct fetch;
  struct entry {
    oauth2_client client;
    std::string token;
    steady_clock::time_point renew_at{};
    std::shared_ptr<fetch> pending;  ///< the token call under way, if any
  };
  boost::asio::awaitable<boost::system::result<std::string, transport_error>> fetch_token(
      transport& transport, std::string key, oauth2_client client, std::chrono::milliseconds deadline);
  const clock_source& clock_;
  /// Shared with the token calls under way: a call's frame may be destroyed after this object
  /// (a shutdown destroys suspended coroutines), and must then leave the entries alone.
  std::shared_ptr<std::map<std::string, entry>> entries_ = std::make_shared<std::map<std::string, entry>>();
};

}  // namespace walhook::delivery
