#include "delivery/proxy.hpp"

#include "delivery/url.hpp"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <cctype>

namespace walhook::delivery {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}
}  // namespace

boost::system::result<http_proxy> parse_proxy_url(std::string_view url, std::string* why) {
  const auto fail = [&](std::string what) -> boost::system::result<http_proxy> {
    if (why) *why = std::move(what);
    return boost::system::error_code(std::make_error_code(std::errc::invalid_argument));
  };
  const auto u = boost::urls::parse_absolute_uri(url);
  if (!u) return fail("not an absolute URL (http://host:port)");
  if (lower(u->scheme()) != "http")
    return fail("the proxy's scheme must be http, not " + lower(u->scheme()) + " (https and SOCKS proxies are not supported)");
  if (u->has_userinfo()) return fail("credentials in the proxy URL are not supported");
  if (!u->encoded_path().empty() && u->encoded_path() != "/") return fail("a proxy URL has no path");
  if (u->has_query() || u->has_fragment()) return fail("a proxy URL has no query or fragment");
  // The rest as an endpoint URL would be (host syntax, port range).
  auto t = parse_url(std::string("http://") + std::string(u->encoded_authority()) + "/");
  if (!t || t->host.empty()) return fail("no usable host and port");
  return http_proxy{t->host, t->port};
}

bool bypasses_proxy(const std::vector<std::string>& no_proxy, std::string_view host) {
  const std::string h = lower(host);
  // An IP literal matches only an equal entry: ".1" is no domain of 127.0.0.1.
  const bool literal = h.find(':') != std::string::npos ||
                       std::all_of(h.begin(), h.end(), [](char c) { return c == '.' || std::isdigit(static_cast<unsigned char>(c)); });
  for (const auto& raw : no_proxy) {
    std::string entry = lower(raw);
    const auto first = entry.find_first_not_of(" \t");  // "a.com, b.com" as NO_PROXY is written
    entry = first == std::string::npos ? "" : entry.substr(first, entry.find_last_not_of(" \t") - first + 1);
    if (entry == "*") return true;
    if (entry.size() > 2 && entry.front() == '[' && entry.back() == ']') entry = entry.substr(1, entry.size() - 2);
    if (!literal && !entry.empty() && entry.front() == '.') entry.erase(0, 1);
    if (entry.empty()) continue;
    if (h == entry) return true;
    if (!literal && h.size() > entry.size() && h.ends_with(entry) && h[h.size() - entry.size() - 1] == '.') return true;
  }
  return false;
}

std::string authority_of(std::string_view address, std::string_view port) {
  const bool v6 = address.find(':') != std::string_view::npos;
  return (v6 ? "[" : "") + std::string(address) + (v6 ? "]:" : ":") + std::string(port);
}

}  // namespace walhook::delivery
