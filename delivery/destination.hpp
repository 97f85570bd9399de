#pragma once
// Where an endpoint's deliveries go: its URL picks the sink (docs/brokers.md).
//
//   http://… https://…                                   a signed HTTP POST (delivery/http_client.hpp)
//   nats://[user:pass@]host[:port]/SUBJECT               a JetStream publish (nats+tls:// for TLS)
//   amqp://[user:pass@]host[:port]/VHOST?exchange=X&routing_key=K
//                                                        an AMQP 0-9-1 publish with confirms (amqps://)
//
// Subjects and routing keys may be templates: {event_type}, {tenant_id}, {aggregate_id} and
// {aggregate_type} are replaced by the event's values when a message is built (render_template).

#include "delivery/transport.hpp"
#include "delivery/url.hpp"

#include <boost/system/result.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace walhook::delivery {

/// The kind of destination an endpoint URL names; /metrics labels attempts with it.
enum class sink_kind { http, nats, amqp };
/// "http", "nats", "amqp".
std::string_view to_string(sink_kind k);

/// A broker destination, split from its URL. Credentials are secrets: never logged or shown
/// (redact_url hides them, as it hides an HTTP URL's).
struct broker_target {
  sink_kind kind = sink_kind::nats;
  bool tls = false;      ///< nats+tls:// or amqps://
  std::string host;      ///< registered name (lower-cased) or IP literal (IPv6 without brackets)
  std::string port;      ///< decimal; default 4222 (NATS), 5672 (AMQP), 5671 (AMQPS)
  std::string user;      ///< percent-decoded; AMQP default "guest", NATS default "" (no auth)
  std::string password;  ///< percent-decoded
  std::string vhost;     ///< AMQP: the path's one segment, percent-decoded ("%2F" is "/"); default "/"
  std::string exchange;  ///< AMQP: ?exchange= ("" is the default exchange)
  /// NATS: the subject (the path after '/'); AMQP: ?routing_key=. A template (render_template).
  std::string subject;
  /// As http_target::private_network_allowed: set by walhook for an inbox destination only.
  bool private_network_allowed = false;
  bool operator==(const broker_target&) const = default;
};

/// A parsed endpoint URL: an HTTP target or a broker target, by `kind`.
struct destination {
  sink_kind kind = sink_kind::http;
  http_target http;      ///< kind == http
  broker_target broker;  ///< kind == nats or amqp
  bool operator==(const destination&) const = default;
};

/// Parses any endpoint URL. Errors carry transport_errc::invalid_url and, in detail(), what is
/// wrong in words a person can act on ("unknown placeholder {foo} in the subject; known:
/// {event_type}, {tenant_id}, {aggregate_id}, {aggregate_type}"). HTTP URLs follow parse_url
/// exactly. NATS: a host, an optional port, a subject of '.'-separated tokens without spaces
/// or wildcards ('*', '>'), no query. AMQP: a host, an optional port, at most one path segment
/// (the vhost), the query keys `exchange` and `routing_key` only, each at most once.
boost::system::result<destination, transport_error> parse_destination(std::string_view url);

/// True if `url` starts with a broker scheme (nats://, nats+tls://, amqp://, amqps://; any case).
bool names_broker(std::string_view url);

/// The values a template may use; std::nullopt: the event has none.
struct template_values {
  std::string_view event_type;
  std::string_view tenant_id;
  std::optional<std::string_view> aggregate_id;
  std::optional<std::string_view> aggregate_type;
};

/// The placeholders a template names, checked: an unknown one or an unclosed brace is an error
/// (the message names it and lists the known ones).
boost::system::result<void, std::string> check_template(std::string_view tmpl);

/// Why a template could not be rendered (a person reads `message`).
struct template_error {
  std::string message;
};

/// `tmpl` with each placeholder replaced. Errors (the message says which): a placeholder whose
/// value the event does not have (no aggregate_id); for `nats_subject`, a result that is not a
/// valid NATS subject (empty token, whitespace, '*' or '>'); a result over 255 bytes (AMQP's
/// shortstr). Pure.
boost::system::result<std::string, template_error> render_template(std::string_view tmpl, const template_values& v,
                                                                 bool nats_subject);

/// True if `subject` is a NATS subject walhook may publish to: non-empty '.'-separated tokens
/// of printable ASCII without spaces, '*' or '>'.
bool is_valid_subject(std::string_view subject);

}  // namespace walhook::delivery
