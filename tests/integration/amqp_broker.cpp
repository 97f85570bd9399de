// delivery::amqp_sink against a real RabbitMQ (tests/support/rabbitmq_server.hpp), read back by
// an independent client (pika, tests/support/amqp_tool.py): confirms, the properties and bytes a
// consumer sees, unroutable and refused publishes, the memory alarm (connection.blocked), a broker
// SIGKILLed with a window of unconfirmed publishes, and the window's throughput.

#include "delivery/amqp_sink.hpp"
#include "delivery/destination.hpp"
#include "tests/support/rabbitmq_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

namespace walhook::test {
namespace {

using namespace std::chrono_literals;
using delivery::amqp_sink;
using delivery::broker_message;
using delivery::broker_target;
using delivery::post_result;
using delivery::transport_errc;

broker_target target_of(const std::string& url) {
  auto d = delivery::parse_destination(url);
  REQUIRE(d.has_value());
  REQUIRE(d->kind == delivery::sink_kind::amqp);
  return d->broker;
}

broker_message message(const std::string& id, const std::string& key, std::string body = {}) {
  broker_message m;
  m.subject = key;
  m.message_id = id;
  m.body = body.empty() ? fmt::format(R"({{"id":"{}","type":"{}","data":{{"n":"é ✓ \u0000"}}}})", id, key) : body;
  m.headers = {{"webhook-id", id},
               {"webhook-timestamp", "1767225600"},
               {"webhook-signature", "v1,c2lnbmF0dXJl"},
               {"walhook-event-type", key},
               {"walhook-tenant-id", "t1"}};
  return m;
}

boost::asio::awaitable<void> publish_into(amqp_sink& sink, std::string key, broker_target t, broker_message m,
                                          std::chrono::milliseconds deadline, std::optional<post_result>& out,
                                          std::atomic<int>& done) {
  out = co_await sink.async_publish(key, t, m, deadline);
  ++done;
}

/// Publishes every message concurrently on `ioc` (run on this thread) and returns the outcomes in order.
std::vector<post_result> publish_all(boost::asio::io_context& ioc, amqp_sink& sink, const broker_target& t,
                                     const std::vector<broker_message>& msgs, std::chrono::milliseconds deadline = 5s,
                                     const std::string& pool_key = "ep1") {
  std::vector<std::optional<post_result>> out(msgs.size());
  std::atomic<int> done{0};
  for (std::size_t i = 0; i < msgs.size(); ++i)
    boost::asio::co_spawn(ioc, publish_into(sink, pool_key, t, msgs[i], deadline, out[i], done), boost::asio::detached);
  ioc.restart();
  ioc.run();
  std::vector<post_result> results;
  for (auto& o : out) {
    REQUIRE(o.has_value());
    results.push_back(std::move(*o));
  }
  return results;
}

std::string describe(const post_result& r) { return r ? fmt::format("status {}", r->status) : r.error().text(); }

delivery::broker_sink_options loopback() {
  delivery::broker_sink_options o;
  o.allow_private_networks = true;
  return o;
}

}  // namespace

TEST_CASE("a confirmed publish is status 200 and the consumer reads the same bytes, id and headers") {
  auto& rmq = rabbitmq();
  MESSAGE("rabbitmq-server started in " << rmq.startup_time().count() << " ms");
  rmq.declare("x.ok", "q.ok", "order.created");
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  const auto t = target_of(rmq.url("x.ok", "{event_type}"));
  auto m = message("evt_ok_1", "order.created");
  auto r = publish_all(ioc, sink, t, {m});
  REQUIRE_MESSAGE(r[0].has_value(), describe(r[0]));
  CHECK(r[0]->status == 200);
  const auto got = rmq.drain("q.ok");
  REQUIRE(got.size() == 1);
  CHECK(got[0].body == m.body);
  CHECK(got[0].message_id == "evt_ok_1");
  CHECK(got[0].content_type == "application/json");
  CHECK(got[0].delivery_mode == 2);
  CHECK(got[0].timestamp > 1'700'000'000);
  CHECK(got[0].routing_key == "order.created");
  CHECK(got[0].exchange == "x.ok");
  for (const auto& [k, v] : m.headers) CHECK_MESSAGE(got[0].header(k) == v, k);
}

TEST_CASE("an unroutable publish (no binding) is broker_unroutable, never a success") {
  auto& rmq = rabbitmq();
  rmq.declare("x.nobind");
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  auto r = publish_all(ioc, sink, target_of(rmq.url("x.nobind", "k")),
                       {message("evt_u_1", "k"), message("evt_u_2", "k")});
  for (const auto& x : r) {
    REQUIRE_FALSE(x.has_value());
    CHECK(x.error() == transport_errc::broker_unroutable);
    CHECK_MESSAGE(x.error().detail().find("312 NO_ROUTE") != std::string::npos, x.error().text());
    CHECK(x.error().detail().find("x.nobind") != std::string::npos);
  }
}

TEST_CASE("a missing exchange is broker_refused with the broker's words; the next publish works") {
  auto& rmq = rabbitmq();
  rmq.declare("x.there", "q.there", "k");
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  auto r = publish_all(ioc, sink, target_of(rmq.url("x.absent", "k")), {message("evt_m_1", "k")});
  REQUIRE_FALSE(r[0].has_value());
  CHECK(r[0].error() == transport_errc::broker_refused);
  CHECK_MESSAGE(r[0].error().detail().find("NOT_FOUND - no exchange 'x.absent'") != std::string::npos,
                r[0].error().text());
  // Same pool key: the closed channel is not reused.
  auto ok = publish_all(ioc, sink, target_of(rmq.url("x.there", "k")), {message("evt_m_2", "k")});
  CHECK_MESSAGE(ok[0].has_value(), describe(ok[0]));
  CHECK(rmq.drain("q.there").size() == 1);
}

TEST_CASE("refused login, no listener and the SSRF guard are told apart") {
  auto& rmq = rabbitmq();
  boost::asio::io_context ioc;
  {
    amqp_sink sink(ioc.get_executor(), loopback());
    auto url = rmq.url("x.ok", "k");
    url.replace(url.find("guest:guest"), 11, "guest:wrong");
    auto r = publish_all(ioc, sink, target_of(url), {message("evt_l_1", "k")});
    REQUIRE_FALSE(r[0].has_value());
    CHECK(r[0].error() == transport_errc::broker_refused);
    CHECK_MESSAGE(r[0].error().detail().find("ACCESS_REFUSED") != std::string::npos, r[0].error().text());
    CHECK(r[0].error().text().find("wrong") == std::string::npos);  // the password is never shown
  }
  {
    amqp_sink sink(ioc.get_executor(), loopback());
    auto t = target_of(rmq.url("x.ok", "k"));
    t.port = "1";  // nothing listens on port 1
    auto r = publish_all(ioc, sink, t, {message("evt_l_2", "k")});
    REQUIRE_FALSE(r[0].has_value());
    CHECK_MESSAGE(r[0].error() == transport_errc::connect_failed, r[0].error().text());
    CHECK(r[0].error().detail().find("127.0.0.1:1") != std::string::npos);
  }
  {
    amqp_sink sink(ioc.get_executor(), delivery::broker_sink_options{});
    auto r = publish_all(ioc, sink, target_of(rmq.url("x.ok", "k")), {message("evt_l_3", "k")});
    REQUIRE_FALSE(r[0].has_value());
    CHECK(r[0].error() == transport_errc::address_blocked);
  }
}

TEST_CASE("amqps: the broker's certificate is verified against the extra CA and the URL's host") {
  auto& rmq = rabbitmq();
  rmq.declare("x.tls", "q.tls", "k");
  boost::asio::io_context ioc;
  const auto url = [&](const std::string& host) {
    return fmt::format("amqps://guest:guest@{}:{}/%2F?exchange=x.tls&routing_key=k", host, rmq.tls_port());
  };
  {
    auto o = loopback();
    o.extra_ca_pem = rmq.ca_pem();
    amqp_sink sink(ioc.get_executor(), o);
    // localhost resolves to ::1 too, where nothing listens: the next address is tried.
    auto r = publish_all(ioc, sink, target_of(url("localhost")), {message("evt_t_1", "k")});
    CHECK_MESSAGE(r[0].has_value(), describe(r[0]));
    // The certificate names DNS:localhost only: 127.0.0.1 is not its host.
    auto mismatch = publish_all(ioc, sink, target_of(url("127.0.0.1")), {message("evt_t_2", "k")}, 5s, "ep2");
    REQUIRE_FALSE(mismatch[0].has_value());
    CHECK_MESSAGE(mismatch[0].error() == transport_errc::tls_hostname_mismatch, mismatch[0].error().text());
    MESSAGE("host mismatch: " << mismatch[0].error().text());
  }
  {
    amqp_sink sink(ioc.get_executor(), loopback());  // the test CA is not trusted
    auto r = publish_all(ioc, sink, target_of(url("localhost")), {message("evt_t_3", "k")});
    REQUIRE_FALSE(r[0].has_value());
    CHECK_MESSAGE(r[0].error() == transport_errc::tls_unknown_ca, r[0].error().text());
    MESSAGE("unknown CA: " << r[0].error().text());
  }
  std::set<std::string> read;
  for (const auto& m : rmq.drain("q.tls")) read.insert(m.message_id);
  CHECK(read == std::set<std::string>{"evt_t_1"});
}

TEST_CASE("1000 publishes share one pipelined window; a window of 1 is the round-trip baseline") {
  auto& rmq = rabbitmq();
  rmq.declare("x.window", "q.window", "k");
  boost::asio::io_context ioc;
  auto run = [&](int window, const std::string& prefix) {
    auto o = loopback();
    o.max_unconfirmed = window;
    amqp_sink sink(ioc.get_executor(), o);
    const auto t = target_of(rmq.url("x.window", "k"));
    (void)publish_all(ioc, sink, t, {message(prefix + "warm", "k")});  // connect and log in first
    std::vector<broker_message> msgs;
    for (int i = 0; i < 1000; ++i) msgs.push_back(message(fmt::format("{}{}", prefix, i), "k"));
    const auto t0 = std::chrono::steady_clock::now();
    auto r = publish_all(ioc, sink, t, msgs, 30s);
    const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    int ok = 0;
    for (const auto& x : r) ok += x && x->status == 200;
    CHECK(ok == 1000);
    MESSAGE("window " << window << ": 1000 confirmed publishes in " << ms << " ms (" << 1000.0 / ms * 1000 << "/s)");
  };
  run(1024, "evt_w_");
  run(1, "evt_w1_");
  const auto got = rmq.drain("q.window");
  std::set<std::string> ids;
  for (const auto& m : got) ids.insert(m.message_id);
  CHECK(ids.size() == 2002);
}

TEST_CASE("the memory alarm blocks publishes fast (broker_blocked); after it clears nothing is lost") {
  auto& rmq = rabbitmq();
  rmq.declare("x.alarm", "q.alarm", "k");
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  const auto t = target_of(rmq.url("x.alarm", "k"));
  REQUIRE(publish_all(ioc, sink, t, {message("evt_a_0", "k")})[0].has_value());  // connected before the alarm
  rmq.memory_alarm(true);
  std::vector<broker_message> msgs;
  for (int i = 1; i <= 20; ++i) msgs.push_back(message(fmt::format("evt_a_{}", i), "k"));
  // The notice may come a moment after the alarm: retry until a publish is refused so.
  std::vector<post_result> r;
  std::set<std::string> confirmed{"evt_a_0"};
  bool blocked = false;
  for (int round = 0; round < 20 && !blocked; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    r = publish_all(ioc, sink, t, msgs, 10s);
    const auto took = std::chrono::steady_clock::now() - t0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (r[i]) confirmed.insert(msgs[i].message_id);
      if (!r[i] && r[i].error() == transport_errc::broker_blocked) {
        blocked = true;
        CHECK(took < 5s);  // fast: not held until the deadline
        CHECK_MESSAGE(r[i].error().detail().find("memory") != std::string::npos, r[i].error().text());
      }
    }
  }
  CHECK(blocked);
  rmq.memory_alarm(false);
  // Retried after the alarm (as the engine does): every one is confirmed.
  bool all = false;
  for (int round = 0; round < 50 && !all; ++round) {
    std::vector<broker_message> left;
    for (const auto& m : msgs)
      if (!confirmed.contains(m.message_id)) left.push_back(m);
    if (left.empty()) break;
    auto again = publish_all(ioc, sink, t, left, 10s);
    for (std::size_t i = 0; i < left.size(); ++i)
      if (again[i]) confirmed.insert(left[i].message_id);
    all = confirmed.size() == msgs.size() + 1;
    if (!all) std::this_thread::sleep_for(200ms);
  }
  CHECK(confirmed.size() == msgs.size() + 1);
  std::set<std::string> read;
  for (const auto& m : rmq.drain("q.alarm")) read.insert(m.message_id);
  CHECK(read == confirmed);
}

TEST_CASE("a broker SIGKILLed with hundreds unconfirmed: every publish ends, every confirmed one survives") {
  auto& rmq = rabbitmq();
  rmq.declare("x.kill", "q.kill", "k");
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  const auto t = target_of(rmq.url("x.kill", "k"));
  REQUIRE(publish_all(ioc, sink, t, {message("evt_k_warm", "k")})[0].has_value());
  std::vector<broker_message> msgs;
  for (int i = 0; i < 3000; ++i) msgs.push_back(message(fmt::format("evt_k_{}", i), "k"));
  std::vector<std::optional<post_result>> out(msgs.size());
  std::atomic<int> done{0};
  for (std::size_t i = 0; i < msgs.size(); ++i)
    boost::asio::co_spawn(ioc, publish_into(sink, "ep1", t, msgs[i], 8s, out[i], done), boost::asio::detached);
  ioc.restart();
  std::thread io([&] { ioc.run(); });
  while (done.load() < 200) std::this_thread::sleep_for(1ms);
  const int done_at_kill = done.load();
  rmq.kill9();
  const auto t0 = std::chrono::steady_clock::now();
  io.join();  // returns only when every publish has an outcome
  const auto ended_in = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  CHECK(ended_in < 10s);
  std::set<std::string> confirmed{"evt_k_warm"};
  std::map<std::string, int> failures;
  for (std::size_t i = 0; i < out.size(); ++i) {
    REQUIRE(out[i].has_value());
    if (*out[i]) {
      confirmed.insert(msgs[i].message_id);
      continue;
    }
    const auto& e = out[i]->error();
    ++failures[e.message()];
    CHECK_MESSAGE((e == transport_errc::broker_closed || e == transport_errc::timeout ||
                   e == transport_errc::connect_failed),
                  e.text());
  }
  MESSAGE("killed with " << done_at_kill << " ended; " << confirmed.size() - 1 << " confirmed, "
                         << msgs.size() + 1 - confirmed.size() << " failed; all ended " << ended_in.count()
                         << " ms after the kill");
  CHECK(confirmed.size() < msgs.size() + 1);  // the kill did cut the stream
  rmq.start();
  MESSAGE("rabbitmq-server restarted in " << rmq.startup_time().count() << " ms");
  // A SIGKILL can lose the broker's newest metadata writes: the binding came back missing in CI
  // (312 NO_ROUTE) while the queue and its confirmed messages survived. Declare it again, as a
  // consumer does when it connects; what was confirmed is checked below all the same.
  rmq.declare("x.kill", "q.kill", "k");
  auto after = publish_all(ioc, sink, t, {message("evt_k_after", "k")}, 10s);
  CHECK_MESSAGE(after[0].has_value(), describe(after[0]));
  std::set<std::string> read;
  for (const auto& m : rmq.drain("q.kill")) read.insert(m.message_id);
  for (const auto& id : confirmed) CHECK_MESSAGE(read.contains(id), id << " was confirmed and is lost");
  CHECK(read.contains("evt_k_after"));
}

TEST_CASE("a queue that refuses more (reject-publish) makes the broker Nack: broker_nacked") {
  auto& rmq = rabbitmq();
  rmq.declare("x.full", "q.full", "k", "direct", 2);
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  const auto t = target_of(rmq.url("x.full", "k"));
  std::vector<broker_message> msgs;
  for (int i = 0; i < 5; ++i) msgs.push_back(message(fmt::format("evt_n_{}", i), "k"));
  int ok = 0, nacked = 0;
  for (const auto& m : msgs) {  // one at a time: which ones fit is then certain
    auto r = publish_all(ioc, sink, t, {m});
    if (r[0]) ++ok;
    else if (r[0].error() == transport_errc::broker_nacked) ++nacked;
    else FAIL_CHECK(r[0].error().text());
  }
  CHECK(ok == 2);
  CHECK(nacked == 3);
  CHECK(rmq.drain("q.full").size() == 2);
}

TEST_CASE("cancel_all ends every publish at once and the next one works; forget closes the connection") {
  auto& rmq = rabbitmq();
  rmq.declare("x.cancel", "q.cancel", "k");
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  const auto t = target_of(rmq.url("x.cancel", "k"));
  REQUIRE(publish_all(ioc, sink, t, {message("evt_c_warm", "k")})[0].has_value());
  std::vector<broker_message> msgs;
  for (int i = 0; i < 2000; ++i) msgs.push_back(message(fmt::format("evt_c_{}", i), "k"));
  std::vector<std::optional<post_result>> out(msgs.size());
  std::atomic<int> done{0};
  for (std::size_t i = 0; i < msgs.size(); ++i)
    boost::asio::co_spawn(ioc, publish_into(sink, "ep1", t, msgs[i], 8s, out[i], done), boost::asio::detached);
  ioc.restart();
  std::thread io([&] { ioc.run(); });
  while (done.load() < 10) std::this_thread::sleep_for(1ms);
  sink.cancel_all();
  const auto t0 = std::chrono::steady_clock::now();
  io.join();
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  int ok = 0, cancelled = 0;
  for (auto& o : out) {
    REQUIRE(o.has_value());
    if (*o) ++ok;
    else if (o->error() == transport_errc::cancelled) ++cancelled;
    else FAIL_CHECK(o->error().text());
  }
  MESSAGE("cancel_all with 2000 submitted: " << ok << " confirmed before it, " << cancelled << " cancelled");
  CHECK(cancelled > 0);
  CHECK(publish_all(ioc, sink, t, {message("evt_c_after", "k")})[0].has_value());
  sink.forget("ep1");
  CHECK(publish_all(ioc, sink, t, {message("evt_c_after_forget", "k")})[0].has_value());  // a new connection
  std::set<std::string> read;
  for (const auto& m : rmq.drain("q.cancel")) read.insert(m.message_id);
  CHECK(read.contains("evt_c_after"));
  CHECK(read.contains("evt_c_after_forget"));
}

TEST_CASE("shutdown ends pending publishes with cancelled, and later ones too") {
  auto& rmq = rabbitmq();
  rmq.declare("x.ok", "q.ok", "order.created");
  boost::asio::io_context ioc;
  amqp_sink sink(ioc.get_executor(), loopback());
  sink.shutdown();
  auto r = publish_all(ioc, sink, target_of(rmq.url("x.ok", "k")), {message("evt_s_1", "k")});
  REQUIRE_FALSE(r[0].has_value());
  CHECK(r[0].error() == transport_errc::cancelled);
}

}  // namespace walhook::test
