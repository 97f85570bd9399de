#include "delivery/url.hpp"

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

}  // namespace

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
