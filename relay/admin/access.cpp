#include "relay/admin/access.hpp"

#include "common/json_writer.hpp"
#include "relay/engine/options.hpp"
#include "relay/operations/errors.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <fstream>

namespace walhook::relay {
namespace asio = boost::asio;

namespace {

std::string trimmed(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && space(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && space(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::array<unsigned char, SHA256_DIGEST_LENGTH> sha256(std::string_view text) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> d{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

/// The host part of "host:port", "[v6]:port", "host" (no brackets).
std::string host_of(const std::string& host_port) {
  if (!host_port.empty() && host_port.front() == '[') {
    auto close = host_port.find(']');
    return close == std::string::npos ? host_port : host_port.substr(1, close - 1);
  }
  auto colon = host_port.rfind(':');
  if (colon != std::string::npos && host_port.find(':') == colon) return host_port.substr(0, colon);
  return host_port;  // no port, or a bare IPv6 address
}

}  // namespace

std::string token_fingerprint(const std::string& token) {
  auto d = sha256(token);
  std::string out = "sha256:";
  for (std::size_t i = 0; i < 6; ++i) out += fmt::format("{:02x}", d[i]);
  return out;
}

bool is_loopback_host(const std::string& host_header) {
  std::string host = host_of(host_header);
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!host.empty() && host.back() == '.') host.pop_back();
  if (host == "localhost" || host.ends_with(".localhost")) return true;
  boost::system::error_code ec;
  auto a = asio::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}

listen_address split_listen(const std::string& listen) {
  auto needs = [&](std::string_view why) {
    return invalid_input(
        fmt::format("--admin-listen {}: {} (give HOST:PORT, e.g. localhost:9187, [::1]:9187 or :9187)", listen, why));
  };
  listen_address out;
  std::string_view port;
  if (!listen.empty() && listen.front() == '[') {
    const auto close = listen.find(']');
    if (close == std::string::npos) throw needs("an unclosed [");
    if (close + 1 >= listen.size() || listen[close + 1] != ':') throw needs("needs HOST:PORT, no port given");
    out.host = listen.substr(1, close - 1);
    port = std::string_view(listen).substr(close + 2);
  } else {
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos) throw needs("needs HOST:PORT, no port given");
    out.host = listen.substr(0, colon);
    if (out.host.find(':') != std::string::npos) throw needs("an IPv6 address needs brackets");
    port = std::string_view(listen).substr(colon + 1);
  }
  const bool digits = !port.empty() && port.size() <= 5 &&
                      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  unsigned value = 0;
  if (digits) std::from_chars(port.data(), port.data() + port.size(), value);
  if (!digits || value > 65535) throw needs(fmt::format("the port '{}' is not a number from 0 to 65535 (0: any free port)", port));
  out.port = static_cast<unsigned short>(value);
  return out;
}

admin_access check_admin_access(const run_options& o) {
  admin_access access;
  if (!o.admin_token_file.empty()) access.token = read_token_file(o.admin_token_file);  // as `walhook status` reads it
  if (o.admin_listen.empty()) return access;
  // Where the listener will bind (relay/admin_server.cpp resolves the same way).
  const std::string host = split_listen(o.admin_listen).host;
  if (host.empty()) {
    access.loopback_only = false;  // ":9187": every address
  } else {
    boost::system::error_code ec;
    auto a = asio::ip::make_address(host, ec);
    if (!ec) {
      access.loopback_only = a.is_loopback();
    } else {
      asio::io_context ioc;
      asio::ip::tcp::resolver resolver(ioc);
      auto found = resolver.resolve(host, "", ec);
      if (ec || found.empty())
        throw invalid_input(fmt::format("--admin-listen {}: cannot resolve {}", o.admin_listen, host));
      for (const auto& r : found) access.loopback_only = access.loopback_only && r.endpoint().address().is_loopback();
    }
  }
  if (!access.loopback_only && access.token.empty())
    throw invalid_input(fmt::format("--admin-listen {} is not a loopback address: the admin API needs a bearer token "
                                    "there (--admin-token-file FILE), or listen on localhost:PORT",
                                    o.admin_listen));
  return access;
}

std::optional<api_response> check_request(const admin_access& access, const api_request& req) {
  auto error = [](unsigned status, std::string_view message) {
    json_writer j;
    j.begin_object().field("error", message).end_object();
    return api_response{status, j.take()};
  };
  if (!access.token.empty()) {
    constexpr std::string_view bearer = "Bearer ";
    const bool has = req.authorization.size() > bearer.size() &&
                     std::equal(bearer.begin(), bearer.end(), req.authorization.begin(),
                                [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) ==
                                                            std::tolower(static_cast<unsigned char>(b)); });
    // Digests of equal length, compared in constant time: neither the token nor its length leaks.
    const auto want = sha256(access.token);
    const auto got = sha256(has ? trimmed(req.authorization.substr(bearer.size())) : std::string{});
    if (!has || CRYPTO_memcmp(want.data(), got.data(), want.size()) != 0)
      return error(401, "missing or wrong bearer token (Authorization: Bearer <the token of --admin-token-file>)");
  } else if (!is_loopback_host(req.host)) {
    // Without a token only loopback clients reach us: a foreign Host is a page that rebinds its
    // name to 127.0.0.1 (DNS rebinding).
    return error(403, "Host must name a loopback host (localhost, 127.0.0.1, [::1]) without --admin-token-file");
  }
  if (req.method == "POST") {
    std::string type = req.content_type.substr(0, req.content_type.find(';'));
    type = trimmed(type);
    std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
    if (type != "application/json") return error(415, "POST bodies must be Content-Type: application/json");
  }
  return std::nullopt;
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in) throw invalid_input(fmt::format("--admin-token-file {}: cannot read it", path));
  // A zero-byte file has no first line: it is empty, like a blank one.
  if (!std::getline(in, line)) {
    if (in.eof() && !in.bad()) throw invalid_input(fmt::format("--admin-token-file {}: the file is empty", path));
    throw invalid_input(fmt::format("--admin-token-file {}: cannot read it", path));
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t')) line.pop_back();
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.erase(line.begin());
  if (line.empty()) throw invalid_input(fmt::format("--admin-token-file {}: the file is empty", path));
  return line;
}

std::string operator_of(std::string_view header) {
  // Percent-decoding (the console sends encodeURIComponent(name): header values are ASCII).
  std::string decoded;
  for (std::size_t i = 0; i < header.size(); ++i) {
    unsigned v = 0;
    if (header[i] == '%' && i + 2 < header.size() &&
        std::from_chars(header.data() + i + 1, header.data() + i + 3, v, 16).ptr == header.data() + i + 3) {
      decoded += static_cast<char>(v);
      i += 2;
    } else {
      decoded += header[i];
    }
  }
  // At most 100 characters (UTF-8 sequences kept whole), control characters dropped.
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < decoded.size();) {
    const auto c = static_cast<unsigned char>(decoded[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    if (i + len > decoded.size()) len = 1;
    if (c < 0x20 || c == 0x7f) {
      i += 1;
      continue;
    }
    if (chars == 100) {
      out += "…";
      break;
    }
    out.append(decoded, i, len);
    i += len;
    ++chars;
  }
  return out;
}

}  // namespace walhook::relay
