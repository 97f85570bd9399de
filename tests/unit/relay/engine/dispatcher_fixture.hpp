#pragma once
// The dispatcher with every seam faked: a manual clock, a store whose writes become durable when
// the test commits them, a transport whose attempts end when the test answers them. The test
// runs the io_context by hand (run()), so nothing sleeps and nothing depends on timing.

#include "common/log.hpp"
#include "delivery/signing.hpp"
#include "relay/engine/dispatcher.hpp"
#include "tests/support/fake_store.hpp"
#include "tests/support/fake_transport.hpp"
#include "tests/support/manual_clock.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace walhook::test {

struct dispatcher_fixture {
  explicit dispatcher_fixture(const std::function<void(relay::dispatcher_options&)>& tweak = {}) {
    log::set_level(log::level::error);
    options.seed = 42;
    options.outcomes.retry.backoff_base = std::chrono::seconds{30};
    // Tests that count writes see no notifications; those about notifications name a tenant.
    options.notifications.operator_tenant = "";
    if (tweak) tweak(options);
    d = std::make_unique<relay::dispatcher>(ioc.get_executor(), options, directory, tracker, store, transport, clock,
                                            relay::dispatcher::hooks{[this] { ++released; }, [this] { ++room; }});
    d->start_session({});
  }

  const relay::endpoint& add_endpoint(std::int64_t id, int max_concurrency = 4, bool aggregate_ordering = false,
                                      std::string tenant = "t") {
    relay::endpoint e;
    e.id = id;
    e.tenant_id = std::move(tenant);
    e.url = fmt::format("http://hooks.example/{}", id);
    e.secret = delivery::generate_secret();
    e.max_concurrency = max_concurrency;
    e.aggregate_ordering = aggregate_ordering;
    relay::resolve_endpoint(e);
    return apply(std::move(e));
  }
  /// Adds or replaces an endpoint, as a row of walhook.endpoints arriving on the stream would.
  const relay::endpoint& apply(relay::endpoint e) {
    std::int64_t id = e.id;
    d->endpoint_changed(directory.apply(std::move(e)));
    return *directory.find(id);
  }

  /// A committed transaction with one event delivered to each of `endpoints`; returns its end LSN.
  lsn transaction(const std::vector<std::int64_t>& endpoints, std::optional<std::string> merge_key = {},
                  std::optional<std::string> aggregate_id = {}) {
    auto ev = std::make_shared<delivery::event>();
    ev->id = fmt::format("00000000-0000-0000-0000-{:012}", ++events);
    ev->tenant_id = "t";
    ev->type = "order.paid";
    ev->created_at = format_iso8601(clock.system_now());
    ev->merge_key = std::move(merge_key);
    ev->aggregate_id = std::move(aggregate_id);
    ev->payload = "{}";
    next_end = lsn{next_end.value() + 0x100};
    ev->commit_lsn = next_end;
    ev->body = delivery::make_body(*ev);
    auto ticket = tracker.begin();
    for (auto id : endpoints) {
      delivery::job j;
      j.ev = ev;
      j.endpoint_id = id;
      j.ticket = ticket;
      tracker.hold(ticket);
      d->submit(std::move(j));
    }
    tracker.commit(ticket, next_end);
    return next_end;
  }

  /// A row claim_due() will hand out.
  sql::claimed_delivery claimable(std::int64_t endpoint, std::int64_t row_id, int attempts = 1) {
    sql::claimed_delivery c;
    c.row_id = row_id;
    c.endpoint_id = endpoint;
    c.attempts = attempts;
    c.event_id = fmt::format("00000000-0000-0000-0001-{:012}", row_id);
    c.tenant_id = "t";
    c.event_type = "order.paid";
    c.event_created_at = format_iso8601(clock.system_now());
    c.payload = "{}";
    return c;
  }

  /// Runs every handler that is ready (attempts starting, answers arriving), without waiting.
  void run() {
    ioc.poll();
    ioc.restart();
  }

  /// Runs one claim round to its end.
  std::chrono::steady_clock::time_point claim_round() {
    std::optional<std::chrono::steady_clock::time_point> next;
    boost::asio::co_spawn(ioc, d->claim_round(), [&](std::exception_ptr e, std::chrono::steady_clock::time_point t) {
      if (e) std::rethrow_exception(e);
      next = t;
    });
    for (int i = 0; i < 100 && !next; ++i) run();
    if (!next) throw std::runtime_error("claim round did not finish");
    return *next;
  }

  boost::asio::io_context ioc;
  manual_clock clock;
  fake_store store;
  fake_transport transport{ioc.get_executor()};
  relay::endpoint_directory directory;
  relay::lsn_tracker tracker;
  relay::dispatcher_options options;
  std::unique_ptr<relay::dispatcher> d;
  int released = 0, room = 0, events = 0;
  lsn next_end{0x1000000};
};

}  // namespace walhook::test
