#include "delivery/url.hpp"

#include "delivery/destination.hpp"
#include "delivery/transport.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <charconv>

namespace walhook::delivery {
namespace {

char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_host_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_';
}

const std::string& default_port(bool tls) {
  static const std::string https = "443";
  static const std::string plain = "80";
  return tls ? https : plain;
}

/// Appends `text`, percent-encoding bytes outside printable ASCII (no control characters or
/// invalid UTF-8 reach a log line or a terminal).
void append_shown(std::string& out, std::string_view text) {
  constexpr char hex[] = "0123456789ABCDEF";
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b > 0x20 && b < 0x7f) {
      out += c;
    } else {
      out += '%';
      out += hex[b >> 4];
      out += hex[b & 0xf];
    }
  }
}

std::string bounded_url(std::string shown) {
  if (shown.size() > max_shown_url) {
    shown.resize(max_shown_url - 3);
    shown += "...";
  }
  return shown;
}

/// A first path segment shown by redact_url: reads like a word ("services", "api", "v1",
/// "webhookb2"), not like an id or a token (a UUID, "T000AAAA", base64).
bool word_like(std::string_view segment) {
  if (segment.empty() || segment.size() > max_shown_segment) return false;
  std::size_t digits = 0;
  for (const char c : segment) {
    if (c >= '0' && c <= '9') ++digits;
    else if (!((c >= 'a' && c <= 'z') || c == '.' || c == '-' || c == '_')) return false;
  }
  return digits <= 2;
}

/// Appends a URL path as redact_url shows it: the first segment if it is word_like, and
/// "/…" for everything else (capability URLs carry their secret in the path).
void append_path(std::string& out, std::string_view path) {
  if (path.empty()) return;
  const auto end = path.find('/', 1);
  const auto first = path.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1);
  const auto rest = end == std::string_view::npos ? std::string_view{} : path.substr(end);
  if (path == "/") {
    out += '/';
  } else if (!word_like(first)) {
    out += "/\u2026";
  } else {
    out += '/';
    out += first;
    if (rest == "/") out += '/';
    else if (!rest.empty()) out += "/\u2026";
  }
}

/// Appends "host[:port]/path" (no userinfo, no query) as redact_url shows it.
void append_host_and_path(std::string& out, std::string_view text) {
  const auto slash = text.find('/');
  append_shown(out, text.substr(0, slash));
  if (slash != std::string_view::npos) append_path(out, text.substr(slash));
}

/// redact_url for text parse_url refuses (see the header). Over-redacting is cheap here: the
/// URL does not work anyway, and a password may hold any of '/', '?', '#', '@' unencoded.
std::string redact_unparsed(std::string_view url) {
  std::string out;
  std::string_view rest = url;
  if (const auto scheme_end = url.find("://"); scheme_end != std::string_view::npos && scheme_end < 32) {
    append_shown(out, url.substr(0, scheme_end + 3));
    rest = url.substr(scheme_end + 3);
  }
  const auto query = rest.find_first_of("?#");
  const auto last_at = rest.rfind('@');
  if (last_at != std::string_view::npos && query != std::string_view::npos && last_at > query) {
    // "user:pa?ss@host" or "host/?email=a@b": no telling where the host is; show none of it.
    out += "***";
    return out;
  }
  if (last_at != std::string_view::npos) {
    out += "***@";
    append_host_and_path(out, rest.substr(last_at + 1, query == std::string_view::npos ? query : query - last_at - 1));
  } else {
    append_host_and_path(out, rest.substr(0, query));
  }
  if (query != std::string_view::npos) {
    if (rest[query] == '?') out += "?***";
    if (rest.find('#', query) != std::string_view::npos) out += "#***";
  }
  return out;
}

}  // namespace

std::string redact_url(std::string_view url) {
  // A broker URL that parse_destination accepts is shown whole but for its credentials
  // ("nats://***@host:4222/events.{event_type}", "amqp://***@host:5672/%2F?exchange=x&routing_key=k"):
  // its subject, vhost, exchange and routing key are names, not secrets, and an operator must
  // see where an endpoint publishes.
  if (names_broker(url))
    if (auto d = parse_destination(url)) {
      const broker_target& b = d->broker;
      std::string out = b.kind == sink_kind::nats ? (b.tls ? "nats+tls://" : "nats://") : (b.tls ? "amqps://" : "amqp://");
      if (url.find('@') != std::string_view::npos) out += "***@";
      append_shown(out, b.host.find(':') != std::string::npos ? "[" + b.host + "]" : b.host);
      out += ":" + b.port + "/";
      if (b.kind == sink_kind::nats) {
        append_shown(out, b.subject);
      } else {
        append_shown(out, b.vhost == "/" ? "%2F" : b.vhost);
        out += "?exchange=";
        append_shown(out, b.exchange);
        out += "&routing_key=";
        append_shown(out, b.subject);
      }
      return bounded_url(std::move(out));
    }
  const auto parsed = parse_url(url);
  if (!parsed) return bounded_url(redact_unparsed(url));
  const auto& t = *parsed;
  std::string out = t.tls ? "https://" : "http://";
  append_shown(out, host_header(t));
  const auto query = t.target.find('?');
  append_path(out, std::string_view(t.target).substr(0, query));
  if (query != std::string::npos) out += "?***";
  if (url.find('#') != std::string_view::npos) out += "#***";
  return bounded_url(std::move(out));
}

std::string cap_text(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  if (max_bytes < 3) return std::string(max_bytes, '.');
  std::size_t keep = max_bytes - 3;
  // Back up to the start of a UTF-8 sequence (continuation bytes are 10xxxxxx).
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return std::string(text.substr(0, keep)) + "...";
}

bool is_valid_target(std::string_view t) {
  return !t.empty() && t.front() == '/' &&
         std::all_of(t.begin(), t.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

std::string host_header(const http_target& t) {
  std::string h = t.host.find(':') != std::string::npos ? "[" + t.host + "]" : t.host;
  if (t.port != default_port(t.tls)) h += ":" + t.port;
  return h;
}

boost::system::result<http_target> parse_url(std::string_view url) {
  const boost::system::error_code invalid = transport_errc::invalid_url;
  const auto parsed = boost::urls::parse_uri(url);
  if (!parsed) return invalid;
  const boost::urls::url_view& u = *parsed;

  http_target t;
  switch (u.scheme_id()) {
    case boost::urls::scheme::http:
      t.tls = false;
      break;
    case boost::urls::scheme::https:
      t.tls = true;
      break;
    default:
      return invalid;
  }
  if (!u.has_authority() || u.has_userinfo()) return invalid;

  switch (u.host_type()) {
    case boost::urls::host_type::ipv4:
      t.host = u.host_ipv4_address().to_string();
      break;
    case boost::urls::host_type::ipv6:
      t.host = u.host_ipv6_address().to_string();
      break;
    case boost::urls::host_type::name: {
      t.host = u.host_name();
      if (t.host.empty() || !std::all_of(t.host.begin(), t.host.end(), is_host_name_char)) return invalid;
      std::transform(t.host.begin(), t.host.end(), t.host.begin(), to_lower);
      break;
    }
    default:
      return invalid;  // no host, or IPvFuture
  }

  if (u.has_port() && !u.port().empty()) {
    const auto port = parse_port(u.port());
    if (!port) return invalid;
    t.port = std::to_string(*port);
  } else {
    t.port = default_port(t.tls);
  }

  t.target = u.encoded_path();
  if (t.target.empty()) t.target = "/";
  if (u.has_query()) {
    t.target += '?';
    t.target += u.encoded_query();
  }
  if (!is_valid_target(t.target)) return invalid;
  return t;
}

}  // namespace walhook::delivery
