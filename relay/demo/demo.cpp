// `walhook demo`: the embedded default. A throwaway PostgreSQL, a receiver that verifies
// signatures, three endpoints over two tenants, sample events committed one by one, and each
// delivery printed with its latency from COMMIT to receipt.

#include "relay/demo/demo.hpp"

#include "common/log.hpp"
#include "common/time.hpp"
#include "delivery/signing.hpp"
#include "relay/admin/access.hpp"
#include "relay/admin/api.hpp"
#include "relay/admin/server.hpp"
#include "relay/demo/embedded_postgres.hpp"
#include "relay/demo/receiver.hpp"
#include "relay/engine/engine.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/errors.hpp"
#include "relay/operations/schema.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

namespace walhook::relay {
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

struct demo_endpoint {
  std::string tenant;
  std::string path;
  std::vector<std::string> event_types;
  std::string secret;
  long long id = 0;
};

struct sample {
  std::string tenant;
  std::string type;
  std::string data;
};

std::vector<sample> samples(int n) {
  const sample base[] = {
      {"acme", "order.created", R"({"order_id": "A-1001", "total": 129.90, "currency": "EUR"})"},
      {"acme", "invoice.paid", R"({"invoice_id": "INV-77", "amount": 129.90})"},
      {"globex", "user.signed_up", R"({"user_id": 42, "plan": "pro"})"},
      {"acme", "order.shipped", R"({"order_id": "A-1001", "carrier": "DHL"})"},
      {"globex", "user.upgraded", R"({"user_id": 42, "plan": "enterprise"})"},
      {"acme", "invoice.paid", R"({"invoice_id": "INV-78", "amount": 12.00, "note": "unicode ok: déjà vu ✓"})"},
  };
  std::vector<sample> out;
  for (int i = 0; i < n; ++i) out.push_back(base[i % std::size(base)]);
  return out;
}

/// Creates the demo's endpoints in walhook.endpoints (ids and secrets filled in), each on a path
/// of the receiver that verifies its signatures, and prints them.
void create_endpoints(const std::string& database_url, receiver& rcv, std::vector<demo_endpoint>& eps) {
  blocking_db db(database_url);
  for (auto& e : eps) {
    e.secret = delivery::generate_secret();
    std::string types = "{";
    for (std::size_t i = 0; i < e.event_types.size(); ++i) types += (i ? "," : "") + e.event_types[i];
    types += "}";
    pg::params p{e.tenant, rcv.url(e.path), e.secret,
                 e.event_types.empty() ? std::nullopt : std::optional<std::string>(types)};
    auto r = db.exec(
        "INSERT INTO walhook.endpoints (tenant_id, url, secret, event_types) VALUES ($1, $2, $3, $4::text[]) RETURNING id",
        p);
    e.id = std::stoll(std::string(r.value(0, 0)));
    receiver_behaviour b;
    b.keys = *delivery::parse_secrets(e.secret);
    rcv.set_behaviour(e.path, b);
    std::cout << fmt::format("  endpoint {}  tenant {:<7} {:<34} {}\n", e.id, e.tenant, rcv.url(e.path),
                             e.event_types.empty() ? "all event types" : e.event_types[0]);
  }
}

/// The deliveries the samples make: one to each endpoint of the event's tenant subscribed to its type.
std::size_t expected_deliveries(const std::vector<sample>& events, const std::vector<demo_endpoint>& eps) {
  std::size_t expected = 0;
  for (const auto& s : events)
    for (const auto& e : eps)
      if (e.tenant == s.tenant && (e.event_types.empty() || std::find(e.event_types.begin(), e.event_types.end(), s.type) != e.event_types.end()))
        ++expected;
  return expected;
}

/// What the receiver got, shared by the receiver's executor and the sender thread (under `mutex`).
struct tally {
  std::mutex mutex;
  std::condition_variable cv;
  std::map<std::string, std::chrono::system_clock::time_point> committed_at;  ///< event id → COMMIT (sender's clock)
  std::vector<double> latencies_ms;  ///< COMMIT to receipt, of the requests whose COMMIT is known
  std::size_t valid = 0, received = 0;

  /// One request: counted, printed with its latency after COMMIT.
  void on_request(const received_request& r) {
    std::lock_guard lock(mutex);
    ++received;
    if (r.signature_valid) ++valid;
    auto at = std::chrono::system_clock::time_point{std::chrono::microseconds{r.received_at_us}};
    std::string latency = "?";
    auto c = committed_at.find(r.webhook_id);
    if (c != committed_at.end()) {
      double ms = std::chrono::duration<double, std::milli>(at - c->second).count();
      latencies_ms.push_back(ms);
      latency = fmt::format("{:.1f} ms", ms);
    }
    std::string type = "?";
    auto t = r.body.find("\"type\":\"");
    if (t != std::string::npos) type = r.body.substr(t + 8, r.body.find('"', t + 8) - t - 8);
    std::cout << fmt::format("  received  {:<15} {:<15} {}  signature {}  {:>9} after COMMIT\n", r.path.substr(1), type,
                             r.webhook_id.substr(0, 8), r.signature_valid ? "valid  " : "INVALID", latency)
              << std::flush;
    cv.notify_all();
  }
};

/// The sender thread: waits until walhook streams the slot, commits the sample events one by one
/// the way an application writes its outbox row in the same transaction as its business change,
/// waits for their deliveries (20 s at most) and prints the summary; with `hold`, then waits for
/// `stop`. Returns the exit code: 0 if every delivery arrived with a valid signature.
int send_samples(const std::string& database_url, const std::vector<sample>& events, std::size_t expected, bool hold,
                 tally& got, const std::atomic<bool>& stop) {
  int exit_code = 1;
  try {
    blocking_db db(database_url, "walhook-demo-app");
    for (int i = 0; i < 200 && !stop; ++i) {
      if (db.exec("SELECT active FROM pg_replication_slots WHERE slot_name = 'walhook'").value(0, 0) == "t") break;
      std::this_thread::sleep_for(50ms);
    }
    std::cout << "\n  walhook is streaming the slot; committing " << events.size() << " sample event"
              << (events.size() == 1 ? "" : "s") << " ...\n\n"
              << std::flush;
    for (const auto& s : events) {
      if (stop) break;
      db.exec("BEGIN");
      pg::params p{s.tenant, s.type, s.data};
      auto r = db.exec("SELECT walhook.publish($1, $2, $3::jsonb)", p);
      std::string id(r.value(0, 0));
      {
        std::lock_guard lock(got.mutex);
        got.committed_at[id] = std::chrono::system_clock::now();
      }
      db.exec("COMMIT");
      std::this_thread::sleep_for(150ms);
    }
    std::unique_lock lock(got.mutex);
    got.cv.wait_for(lock, 20s, [&] { return got.received >= expected || stop; });
    std::vector<double> sorted = got.latencies_ms;
    std::sort(sorted.begin(), sorted.end());
    double p50 = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    double max = sorted.empty() ? 0 : sorted.back();
    std::cout << fmt::format("\n  {} event{} committed → {} of {} deliver{} received, {} signature{} valid; "
                             "latency after COMMIT p50 {:.1f} ms, max {:.1f} ms\n",
                             events.size(), events.size() == 1 ? "" : "s", got.received, expected,
                             expected == 1 ? "y" : "ies", got.valid, got.valid == 1 ? "" : "s", p50, max);
    exit_code = (got.received >= expected && got.valid == got.received) ? 0 : 1;
    if (hold && !stop) {
      std::cout << fmt::format("\n  still running; publish more from another terminal, e.g.\n"
                               "    walhook send --database-url {} --tenant acme --type order.created --data '{{\"order_id\": \"A-2\"}}'\n"
                               "  Ctrl-C stops walhook and removes the database.\n",
                               database_url)
                << std::flush;
      got.cv.wait(lock, [&] { return stop.load(); });
    }
  } catch (const std::exception& e) {
    std::cerr << "walhook demo: " << e.what() << "\n";
  }
  return exit_code;
}

/// Where the console listens: --admin-listen, else localhost:9187 with --hold; "" for none.
/// Checked before anything starts: the demo has no token, so only loopback (access.hpp's rule
/// for a listener without --admin-token-file) — refused with the way out, never silently none.
std::string console_listen(const demo_args& a) {
  const std::string listen = a.admin_listen.empty() && a.hold ? "localhost:9187" : a.admin_listen;
  if (listen.empty() || listen == "off") return "";
  run_options probe;
  probe.admin_listen = listen;
  try {
    check_admin_access(probe);
  } catch (const invalid_input& e) {
    throw invalid_input(fmt::format("the demo's console: {} (walhook demo has no --admin-token-file: its console "
                                    "listens on loopback only)",
                                    e.what()));
  }
  return listen;
}

}  // namespace

int cmd_demo(const demo_args& a) {
  const std::string listen = console_listen(a);
  if (!std::getenv("WALHOOK_LOG_LEVEL")) log::set_level(log::level::warn);
  std::cout << "walhook demo: outbox rows → logical replication (pgoutput) → signed webhooks\n\n";
  std::cout << "  starting a throwaway PostgreSQL (wal_level=logical) ..." << std::flush;
  embedded_postgres pg;
  std::cout << " " << pg.url() << "\n";
  operations::migrate_request migrate;
  migrate.database_url = pg.url();
  operations::migrate(migrate, [](const std::string&) {});  // its report is not the point here
  std::cout << "  schema migrated, replication slot \"walhook\" created\n";

  asio::io_context ioc(1);
  receiver rcv(ioc.get_executor());
  std::vector<demo_endpoint> eps{
      {"acme", "/acme/orders", {}, "", 0},
      {"acme", "/acme/billing", {"invoice.paid"}, "", 0},
      {"globex", "/globex/hooks", {}, "", 0},
  };
  create_endpoints(pg.url(), rcv, eps);

  run_options options;
  options.database_url = pg.url();
  options.http.allow_private_networks = true;  // the demo receiver is on loopback
  options.instance_name = "demo";
  engine relay(ioc.get_executor(), options);
  // The console on loopback (no token needed there): with --hold it is what to look at.
  std::unique_ptr<admin_server> admin;
  if (!listen.empty()) {
    try {
      options.admin_listen = listen;
      admin = std::make_unique<admin_server>(ioc.get_executor(), relay, check_admin_access(options));
      std::cout << fmt::format("  console   http://localhost:{}/console/  (metrics: /metrics)\n", admin->port());
    } catch (const std::exception& e) {
      std::cout << "  console   not started: " << e.what() << " (give --admin-listen localhost:PORT)\n";
    }
  }

  tally got;
  rcv.on_request([&got](const received_request& r) { got.on_request(r); });

  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) relay.request_stop();
  });
  int exit_code = 1;
  asio::co_spawn(ioc, relay.run(), [&](std::exception_ptr, int) {
    signals.cancel();
    if (admin) admin->stop();
    rcv.stop();
    ioc.stop();
  });

  std::atomic<bool> stop_sender{false};
  auto events = samples(a.events);
  const std::size_t expected = expected_deliveries(events, eps);
  std::thread sender([&] {
    exit_code = send_samples(pg.url(), events, expected, a.hold, got, stop_sender);
    asio::post(ioc, [&] { relay.request_stop(); });
  });

  ioc.run();
  stop_sender = true;
  got.cv.notify_all();
  sender.join();
  std::cout << "  walhook stopped; removing the throwaway PostgreSQL\n";
  return exit_code;
}

}  // namespace walhook::relay
