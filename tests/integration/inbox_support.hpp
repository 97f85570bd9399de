#pragma once
// What the inbox's integration tests share (it_inbox, it_inbox_processing): a blocking POST, a
// sender signing like walhook (Standard Webhooks), `walhook ingest` as a child process, and a
// scenario whose sources deliver to the test's receiver.

#include "delivery/signing.hpp"
#include "tests/harness/harness.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <regex>

#include <poll.h>

namespace walhook::test::inbox {

using namespace std::chrono_literals;
namespace http = boost::beast::http;

struct answer {
  unsigned status = 0;  ///< 0: no answer (connection refused or reset)
  std::string body;
};

/// One blocking POST to 127.0.0.1:port (5 s).
inline answer post(unsigned short port, const std::string& path, const std::vector<std::pair<std::string, std::string>>& headers,
            const std::string& body) {
  try {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    http::request<http::string_body> req{http::verb::post, path, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return {res.result_int(), res.body()};
  } catch (const std::exception& e) {
    return {0, e.what()};
  }
}

/// Writes `bytes` as they are to 127.0.0.1:port and returns the first line of what comes back
/// before the server closes ("" if nothing; reading gives up after 10 s): for requests no HTTP
/// client would send.
inline std::string raw_exchange(unsigned short port, const std::string& bytes) {
  try {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    boost::asio::write(socket, boost::asio::buffer(bytes));
    std::string got;
    boost::system::error_code ec;
    char chunk[4096];
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!ec) {
      // poll(2) first: a blocking read_some would wait past any socket timeout.
      pollfd readable{.fd = socket.native_handle(), .events = POLLIN, .revents = 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
      if (left.count() <= 0 || ::poll(&readable, 1, static_cast<int>(left.count())) <= 0) break;
      const auto n = socket.read_some(boost::asio::buffer(chunk), ec);
      got.append(chunk, n);
    }
    return got.substr(0, got.find("\r\n"));
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

/// A sender signing like walhook itself (Standard Webhooks).
struct sender {
  std::string secret = delivery::generate_secret();
  std::vector<std::pair<std::string, std::string>> headers(const std::string& id, const std::string& body,
                                                           std::int64_t at = 0) const {
    if (at == 0) at = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const auto keys = *delivery::parse_secrets(secret);
    return {{"webhook-id", id}, {"webhook-timestamp", std::to_string(at)},
            {"webhook-signature", delivery::signature_header(keys, id, at, body)}};
  }
};

inline std::string event_body(const std::string& type, const std::string& order, int n = 0) {
  return fmt::format(R"({{"type":"{}","data":{{"order":"{}","n":{}}}}})", type, order, n);
}

/// `walhook ingest` on this database, on a free port.
struct ingest_process {
  test::walhook_process p;
  explicit ingest_process(const std::string& url, std::vector<std::string> extra = {})
      : p(args(url, std::move(extra)), "ingest") {
    p.start();
  }
  static std::vector<std::string> args(const std::string& url, std::vector<std::string> extra) {
    std::vector<std::string> a{"ingest", "--database-url", url, "--listen", "127.0.0.1:0"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  unsigned short port() {
    unsigned short found = 0;
    test::eventually(
        [&] {
          std::smatch m;
          const auto text = p.log();
          if (!std::regex_search(text, m, std::regex(R"("ingest.listening".*"port":(\d+))"))) return false;
          found = static_cast<unsigned short>(std::stoi(m[1]));
          return true;
        },
        20s);
    return found;
  }
};

struct inbox_setup : test::scenario {
  explicit inbox_setup(const std::string& slot) : scenario(slot) {}
  sender partner;
  /// Adds source `name` (standard-webhooks) whose destination is the receiver's /handler.
  void add_source(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"inbox", "source", "add", "--database-url", url, "--name", name,
                               "--scheme", "standard-webhooks", "--secret", partner.secret, "--destination",
                               fmt::format("http://127.0.0.1:{}/{}", rcv->port(), name)};
    a.insert(a.end(), extra.begin(), extra.end());
    std::string out;
    const int rc = test::run_walhook(a, out);
    INFO(out);
    REQUIRE(rc == 0);
    REQUIRE(out.find("secret: whsec_") != std::string::npos);
  }
  long long count(const std::string& sql) { return std::stoll(value(sql)); }
};


}  // namespace walhook::test::inbox
