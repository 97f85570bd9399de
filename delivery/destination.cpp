#include "delivery/destination.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace walhook::delivery {
namespace {

constexpr std::array<std::string_view, 4> placeholders{"event_type", "tenant_id", "aggregate_id", "aggregate_type"};
constexpr std::string_view known_list = "{event_type}, {tenant_id}, {aggregate_id}, {aggregate_type}";

transport_error invalid(std::string detail) { return {transport_errc::invalid_url, std::move(detail)}; }

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

/// Braces are not allowed in a URI (RFC 3986), but templates use them: they are percent-encoded
/// before Boost.URL parses, and decoded back with the rest.
std::string escape_braces(std::string_view url) {
  std::string out;
  out.reserve(url.size() + 8);
  for (char c : url) {
    if (c == '{') out += "%7B";
    else if (c == '}') out += "%7D";
    else out += c;
  }
  return out;
}

/// The bytes of a checked template with each placeholder counted as one.
std::size_t fixed_length(std::string_view tmpl) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < tmpl.size(); ++i, ++n)
    if (tmpl[i] == '{') i = tmpl.find('}', i);
  return n;
}

/// Host, port and credentials of a broker URL.
boost::system::result<void, transport_error> split_authority(const boost::urls::url_view& u, broker_target& t,
                                                            std::string_view default_port) {
  if (!u.has_authority()) return invalid("the URL has no host");
  switch (u.host_type()) {
    case boost::urls::host_type::ipv4: t.host = u.host_ipv4_address().to_string(); break;
    case boost::urls::host_type::ipv6: t.host = u.host_ipv6_address().to_string(); break;
    case boost::urls::host_type::name: {
      t.host = u.host_name();
      auto ok = [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '-' || c == '_'; };
      if (t.host.empty() || !std::all_of(t.host.begin(), t.host.end(), ok)) return invalid("the host name is not valid");
      std::transform(t.host.begin(), t.host.end(), t.host.begin(), [](unsigned char c) { return std::tolower(c); });
      break;
    }
    default: return invalid("the URL has no host");
  }
  if (u.has_port() && !u.port().empty()) {
    const auto port = parse_port(u.port());
    if (!port) return invalid("the port must be 1 to 65535");
    t.port = std::to_string(*port);
  } else {
    t.port = default_port;
  }
  if (u.has_userinfo()) {
    t.user = u.user();
    t.password = u.password();
  }
  return {};
}

boost::system::result<destination, transport_error> parse_nats(const boost::urls::url_view& u, bool tls) {
  destination d;
  d.kind = sink_kind::nats;
  d.broker.kind = sink_kind::nats;
  d.broker.tls = tls;
  if (auto r = split_authority(u, d.broker, "4222"); !r) return r.error();
  if (u.has_query()) return invalid("a nats:// URL takes no query: the subject is the path (nats://host:4222/SUBJECT)");
  std::string path = u.path();
  if (!path.empty() && path.front() == '/') path.erase(0, 1);
  if (path.empty()) return invalid("the subject is missing: nats://host:4222/SUBJECT (e.g. /events.{event_type})");
  if (auto c = check_template(path); !c) return invalid("subject: " + c.error());
  // Placeholders' values are checked when rendered; the fixed text must already be a subject.
  std::string probe;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '{') {
      i = path.find('}', i);
      probe += 'x';
    } else {
      probe += path[i];
    }
  }
  if (probe.size() > 255)
    return invalid(fmt::format("the subject is {} bytes before its placeholders are filled; at most 255 are allowed",
                               probe.size()));
  if (!is_valid_subject(probe))
    return invalid(fmt::format("'{}' is not a NATS subject walhook can publish to: '.'-separated tokens, no spaces, "
                               "no wildcards ('*', '>')", path));
  d.broker.subject = std::move(path);
  return d;
}

boost::system::result<destination, transport_error> parse_amqp(const boost::urls::url_view& u, bool tls) {
  destination d;
  d.kind = sink_kind::amqp;
  d.broker.kind = sink_kind::amqp;
  d.broker.tls = tls;
  if (auto r = split_authority(u, d.broker, tls ? "5671" : "5672"); !r) return r.error();
  if (!u.has_userinfo()) {
    d.broker.user = "guest";
    d.broker.password = "guest";
  }
  const auto segs = u.encoded_segments();
  if (segs.size() > 1) return invalid("an amqp:// URL's path is one segment, the vhost (%2F for \"/\")");
  d.broker.vhost = segs.empty() ? "/" : std::string((*segs.begin()).decode());
  if (d.broker.vhost.empty()) d.broker.vhost = "/";
  bool has_exchange = false, has_key = false;
  for (auto p : u.params()) {
    if (p.key == "exchange" && !has_exchange) {
      has_exchange = true;
      d.broker.exchange = p.value;
    } else if (p.key == "routing_key" && !has_key) {
      has_key = true;
      d.broker.subject = p.value;
    } else {
      return invalid(fmt::format("unknown or repeated query parameter '{}' (amqp:// takes exchange= and routing_key=)",
                                 std::string(p.key)));
    }
  }
  if (!has_key) return invalid("routing_key= is missing (e.g. ?exchange=walhook&routing_key={event_type})");
  if (d.broker.exchange.size() > 255) return invalid("the exchange name is over 255 bytes");
  if (auto c = check_template(d.broker.subject); !c) return invalid("routing_key: " + c.error());
  if (fixed_length(d.broker.subject) > 255)
    return invalid("the routing key is over 255 bytes before its placeholders are filled (AMQP's limit)");
  return d;
}

}  // namespace

std::string_view to_string(sink_kind k) {
  switch (k) {
    case sink_kind::http: return "http";
    case sink_kind::nats: return "nats";
    case sink_kind::amqp: return "amqp";
  }
  return "http";
}

bool names_broker(std::string_view url) {
  return starts_with_ci(url, "nats://") || starts_with_ci(url, "nats+tls://") || starts_with_ci(url, "amqp://") ||
         starts_with_ci(url, "amqps://");
}

boost::system::result<destination, transport_error> parse_destination(std::string_view url) {
  const bool nats = starts_with_ci(url, "nats://"), nats_tls = starts_with_ci(url, "nats+tls://");
  const bool amqp = starts_with_ci(url, "amqp://"), amqps = starts_with_ci(url, "amqps://");
  if (!nats && !nats_tls && !amqp && !amqps) {
    auto http = parse_url(url);
    if (!http) return invalid("need http://, https://, nats://, nats+tls://, amqp:// or amqps://, and a host");
    destination d;
    d.http = std::move(*http);
    return d;
  }
  const std::string escaped = escape_braces(url);
  const auto parsed = boost::urls::parse_uri(escaped);
  if (!parsed) return invalid("the URL does not parse (RFC 3986)");
  if (parsed->has_fragment()) return invalid("a broker URL takes no #fragment");
  if (nats || nats_tls) return parse_nats(*parsed, nats_tls);
  return parse_amqp(*parsed, amqps);
}

boost::system::result<void, std::string> check_template(std::string_view tmpl) {
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '}') return fmt::format("'}}' without '{{' at byte {}", i);
    if (tmpl[i] != '{') continue;
    const auto close = tmpl.find('}', i);
    if (close == std::string_view::npos) return fmt::format("'{{' without '}}' at byte {}", i);
    const auto name = tmpl.substr(i + 1, close - i - 1);
    if (std::find(placeholders.begin(), placeholders.end(), name) == placeholders.end())
      return fmt::format("unknown placeholder {{{}}}; known: {}", name, known_list);
    i = close;
  }
  return {};
}

boost::system::result<std::string, template_error> render_template(std::string_view tmpl, const template_values& v,
                                                                 bool nats_subject) {
  if (auto c = check_template(tmpl); !c) return template_error{c.error()};
  std::string out;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '{') {
      out += tmpl[i];
      continue;
    }
    const auto close = tmpl.find('}', i);
    const auto name = tmpl.substr(i + 1, close - i - 1);
    std::optional<std::string_view> value;
    if (name == "event_type") value = v.event_type;
    else if (name == "tenant_id") value = v.tenant_id;
    else if (name == "aggregate_id") value = v.aggregate_id;
    else value = v.aggregate_type;
    if (!value || value->empty())
      return template_error{fmt::format("the template needs {{{}}} and the event has none", name)};
    out += *value;
    i = close;
  }
  if (out.size() > 255) return template_error{fmt::format("the rendered name is {} bytes, at most 255 are allowed", out.size())};
  if (nats_subject && !is_valid_subject(out))
    return template_error{fmt::format(
        "'{}' is not a valid NATS subject (an event value holds a space, '*', '>' or an empty token)", out)};
  return {boost::system::in_place_value, std::move(out)};
}

bool is_valid_subject(std::string_view subject) {
  if (subject.empty() || subject.front() == '.' || subject.back() == '.') return false;
  char prev = 0;
  for (char c : subject) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '*' || c == '>') return false;
    if (c == '.' && prev == '.') return false;
    prev = c;
  }
  return true;
}

}  // namespace walhook::delivery
