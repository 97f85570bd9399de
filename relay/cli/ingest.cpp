// `walhook ingest --listen HOST:PORT`: the inbox's ingest server (relay/inbox/ingest_server.hpp,
// docs/inbox.md) on one io_context thread until SIGTERM/SIGINT.

#include "common/log.hpp"
#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/inbox/ingest_server.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/schema.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include <csignal>
#include <functional>
#include <memory>

namespace walhook::relay::cli {
namespace asio = boost::asio;

namespace {

struct ingest_flags {
  inbox::ingest_options o;
  std::string listen;
  std::string metrics_listen;
};

/// "HOST:PORT", "[v6]:PORT" or ":PORT" (all addresses) → a numeric address and a port.
std::pair<std::string, unsigned short> resolve_listen(const std::string& text, const std::string& flag) {
  auto bad = [&](std::string_view why) {
    return cli_error(fmt::format("{} {}: {} (give HOST:PORT, e.g. 0.0.0.0:8088, [::]:8088 or localhost:8088)", flag,
                                 text, why));
  };
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) throw bad("no port");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  unsigned long port = 0;
  try {
    std::size_t used = 0;
    port = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || port > 65535) throw bad("the port is not 0–65535");
  } catch (const std::logic_error&) {
    throw bad("the port is not a number");
  }
  asio::io_context ioc;
  asio::ip::tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto found = resolver.resolve(host, "", ec);
  if (ec || found.empty()) throw bad(fmt::format("cannot resolve {}: {}", host, ec.message()));
  return {found.begin()->endpoint().address().to_string(), static_cast<unsigned short>(port)};
}

int ingest(ingest_flags& f) {
  {
    blocking_db db(f.o.database_url);  // a clear error now rather than retries in the log
    operations::require_schema(db);
  }
  std::tie(f.o.listen_address, f.o.listen_port) = resolve_listen(f.listen, "--listen");
  if (!f.metrics_listen.empty()) {
    auto [address, port] = resolve_listen(f.metrics_listen, "--metrics-listen");
    f.o.metrics_address = address;
    f.o.metrics_port = port;
  }
  asio::io_context ioc(1);
  std::unique_ptr<inbox::ingest_server> server;
  try {
    server = std::make_unique<inbox::ingest_server>(ioc.get_executor(), f.o);
  } catch (const std::exception& e) {
    throw cli_error(e.what());
  }
  log::info("ingest.listening", {{"address", f.o.listen_address}, {"port", static_cast<unsigned>(server->port())},
                                 {"tls", !f.o.tls_cert_file.empty()},
                                 {"metrics_port", static_cast<unsigned>(server->metrics_port().value_or(0))}});
  // SIGTERM/SIGINT: stop accepting, close idle connections, answer what is under way (its
  // commit, or 503 when its wait ends: at most shed-after + the statement timeout), then exit.
  // A second signal exits at once.
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                              int sig) {
    if (ec) return;
    static int received = 0;
    if (++received > 1) std::_Exit(130);
    log::info("signal.received", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
    asio::co_spawn(
        ioc, [&]() -> asio::awaitable<void> { co_await server->drain(std::chrono::seconds(8)); }(),
        [&](std::exception_ptr) { signals.cancel(); });  // the server stopped: run() returns once all ended
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  // run() returns when nothing is left to do; a task that does not end within 3 s of the drain
  // is not waited for (the process exits).
  ioc.run();
  server.reset();
  log::info("ingest.stopped");
  return 0;
}

}  // namespace

command add_ingest(CLI::App& app) {
  auto f = std::make_shared<ingest_flags>();
  auto* c = app.add_subcommand("ingest",
                               "Receive webhooks: POST /in/SOURCE, verified, written to walhook.inbox before the 2xx "
                               "(docs/inbox.md)");
  add_database_url(c, f->o.database_url);
  c->add_option("--listen", f->listen, "HOST:PORT to serve POST /in/SOURCE on, e.g. 0.0.0.0:8088")->required();
  c->add_option("--metrics-listen", f->metrics_listen,
                "HOST:PORT for GET /metrics (keep it private: it names the sources), e.g. 127.0.0.1:9188");
  c->add_option("--tls-cert", f->o.tls_cert_file, "PEM certificate chain: serve HTTPS (with --tls-key)");
  c->add_option("--tls-key", f->o.tls_key_file, "PEM private key of --tls-cert");
  c->add_option("--commit-sessions", f->o.commit.sessions, "PostgreSQL sessions that commit batches of requests")
      ->check(positive)
      ->capture_default_str();
  c->add_option("--max-batch", f->o.commit.max_batch, "Requests per transaction at most (group commit)")
      ->check(positive)
      ->capture_default_str();
  add_duration<std::chrono::microseconds>(c, "--commit-window-us", f->o.commit.window,
                                          "Extra wait for a batch to fill, microseconds (0: batches form while the "
                                          "previous commit runs)");
  add_duration<std::chrono::milliseconds>(c, "--shed-after-ms", f->o.commit.shed_after,
                                          "A request that waited this long for its commit is answered 503 with "
                                          "Retry-After instead");
  c->add_option("--max-queue", f->o.commit.max_queue, "Verified requests waiting for a commit at most; more get 503")
      ->check(positive)
      ->capture_default_str();
  c->add_option("--max-connections", f->o.max_connections, "Client connections at once; more wait to be accepted")
      ->check(positive)
      ->capture_default_str();
  c->add_option("--max-connections-per-client", f->o.max_connections_per_client,
                "Connections at once from one client IP address; more are closed at once (behind a proxy, every "
                "request comes from the proxy's address: raise it or put the limit in the proxy)")
      ->check(positive)
      ->capture_default_str();
  add_duration<std::chrono::seconds>(c, "--sources-refresh-s", f->o.sources_refresh,
                                     "walhook.inbox_sources is read again this often (a new source is found at "
                                     "once)")
      ->check(positive);
  return {c, [f] { return ingest(*f); }};
}

}  // namespace walhook::relay::cli
