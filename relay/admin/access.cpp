#include "relay/admin/access.hpp"

#include "common/json_writer.hpp"
#include "common/log.hpp"
#include "relay/engine/options.hpp"
#include "relay/operations/errors.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <fstream>
#include <utility>

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

/// A valid UTF-8 sequence that is a control character: C0, DEL, C1 (U+0080..U+009F) or a
/// bidirectional control (U+202A..U+202E, U+2066..U+2069, the marks U+061C, U+200E, U+200F).
bool is_control(std::string_view seq) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(seq[i]); };
  if (seq.size() == 1) return b(0) < 0x20 || b(0) == 0x7f;
  if (seq.size() == 2) return b(0) == 0xC2 && b(1) <= 0x9F;  // U+0080..U+009F
  if (seq.size() != 3) return false;
  const unsigned cp = ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
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

namespace {

/// The token file may be read by its group or others: say so (the token is the API's only key).
void warn_if_readable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & (S_IRGRP | S_IROTH)) == 0) return;
  log::warn("admin.token_file_readable",
            {{"file", path},
             {"mode", fmt::format("{:04o}", st.st_mode & 07777)},
             {"hint", "the token file can be read by its group or others: chmod 600 it"}});
}

/// --admin-listen's host, resolved once: "" → every address (IPv6 "::", which takes IPv4 too);
/// an address as it is; a name → its first IPv4 address, else its first address.
asio::ip::address resolve_listen(const std::string& listen, const std::string& host,
                                 const char* flag = "--admin-listen") {
  if (host.empty()) return asio::ip::address_v6::any();
  boost::system::error_code ec;
  auto a = asio::ip::make_address(host, ec);
  if (!ec) return a;
  asio::io_context ioc;
  asio::ip::tcp::resolver resolver(ioc);
  auto found = resolver.resolve(host, "", ec);
  if (ec || found.empty()) throw invalid_input(fmt::format("{} {}: cannot resolve {}", flag, listen, host));
  for (const auto& r : found)
    if (r.endpoint().address().is_v4()) return r.endpoint().address();
  return found.begin()->endpoint().address();
}

/// A certificate chain and its key (--admin-tls-cert/--admin-tls-key, --api-tls-cert/--api-tls-key) loaded into a server context (TLS 1.2 or later).
std::shared_ptr<asio::ssl::context> load_tls(const std::string& cert, const std::string& key, const char* cert_flag,
                                             const char* key_flag) {
  if (cert.empty() && key.empty()) return nullptr;
  if (cert.empty() || key.empty())
    throw invalid_input(fmt::format("{} needs {} too: give both (the certificate chain and its private key) or neither",
                                    cert.empty() ? key_flag : cert_flag, cert.empty() ? cert_flag : key_flag));
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  // The key first: a certificate loaded after a key that is not its own drops the key, and the
  // check below names the mismatch (the other order fails in the key's loading, less clearly).
  boost::system::error_code ec;
  ctx->use_private_key_file(key, asio::ssl::context::pem, ec);
  if (ec) throw invalid_input(fmt::format("{} {}: cannot load it: {}", key_flag, key, ec.message()));
  ctx->use_certificate_chain_file(cert, ec);
  if (ec) throw invalid_input(fmt::format("{} {}: cannot load it: {}", cert_flag, cert, ec.message()));
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    throw invalid_input(fmt::format("{} {} is not the key of {} {}", key_flag, key, cert_flag, cert));
  return ctx;
}

}  // namespace

admin_access check_admin_access(const run_options& o) {
  admin_access access;
  if (!o.admin_token_file.empty()) {
    access.token = read_token_file(o.admin_token_file);  // as `walhook status` reads it
    if (access.token.size() < min_admin_token_bytes)
      throw invalid_input(fmt::format("--admin-token-file {}: the token has {} bytes, at least {} are needed "
                                      "(e.g. openssl rand -hex 32 > FILE)",
                                      o.admin_token_file, access.token.size(), min_admin_token_bytes));
    warn_if_readable(o.admin_token_file);
  }
  access.tls = load_tls(o.admin_tls_cert, o.admin_tls_key, "--admin-tls-cert", "--admin-tls-key");
  if (o.admin_listen.empty()) return access;
  const auto parts = split_listen(o.admin_listen);
  // The one resolution: the server binds exactly this address (relay/admin/server.cpp).
  const auto address = resolve_listen(o.admin_listen, parts.host);
  access.bind_address = address.to_string();
  access.port = parts.port;
  access.loopback_only = address.is_loopback();
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

std::uint64_t auth_failure_log::failed(std::chrono::steady_clock::time_point now) {
  ++unlogged_;
  if (last_line_ && now - *last_line_ < every_) return 0;
  last_line_ = now;
  return std::exchange(unlogged_, 0);
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
  // At most 100 characters (UTF-8 sequences kept whole, each checked: a byte that does not
  // start a valid one becomes U+FFFD), control characters dropped: C0, DEL, C1 and the
  // bidirectional controls, which would reorder what the log line shows.
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < decoded.size();) {
    const std::string_view rest = std::string_view(decoded).substr(i);
    const std::size_t len = log::utf8_sequence(rest);
    if (len != 0 && is_control(rest.substr(0, len))) {
      i += len;
      continue;
    }
    if (chars == 100) {
      out += "…";
      break;
    }
    if (len == 0) out += "\xEF\xBF\xBD";
    else out.append(rest.substr(0, len));
    i += len == 0 ? 1 : len;
    ++chars;
  }
  return out;
}

admin_access check_api_access(const run_options& o) {
  admin_access access;
  access.tls = load_tls(o.api_tls_cert, o.api_tls_key, "--api-tls-cert", "--api-tls-key");
  if (o.api_listen.empty()) {
    if (access.tls) throw invalid_input("--api-tls-cert and --api-tls-key need --api-listen");
    return access;
  }
  listen_address parts;
  try {
    parts = split_listen(o.api_listen);
  } catch (const invalid_input& e) {  // its message names --admin-listen
    std::string text = e.what();
    if (auto at = text.find("--admin-listen"); at != std::string::npos) text.replace(at, 14, "--api-listen");
    throw invalid_input(text);
  }
  const auto address = resolve_listen(o.api_listen, parts.host, "--api-listen");
  access.bind_address = address.to_string();
  access.port = parts.port;
  access.loopback_only = address.is_loopback();
  return access;
}

}  // namespace walhook::relay
