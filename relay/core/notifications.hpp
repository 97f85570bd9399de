#pragma once
// walhook's operational notifications, published as walhook events (issue 11): an endpoint
// starts failing, the circuit breaker pauses it, it is disabled, it recovers, its deliveries end
// dead. Pure (STYLE: "a pure core returns the caller's action"): the notifier reads an attempt's
// decision (relay/core/decisions.hpp) or a dead record, the endpoint and its own rate-limit state, and
// answers which notices to publish; rows_of() turns a notice into the outbox rows walhook writes
// (sql::publish_event) — to the operator tenant, and directly to the endpoint's contact endpoint.
// The dispatcher queues those rows right after the health write that caused them, so they commit
// in its transaction and come back through the slot like any event (delivered, signed, retried,
// merged). README "Notifications" is the contract; tests/unit/relay/core/notifications_test.cpp has
// the rules as tables.
//
// No loops: the failure of a delivery of a walhook.* event never yields a notice (it is only
// logged), and a contact endpoint that is the endpoint itself is ignored. (Its success may end a
// streak that other events' failures announced: that streak's one walhook.endpoint.recovered.)
//
// Single-threaded.

#include "relay/core/decisions.hpp"
#include "relay/core/rows.hpp"
#include "sql/writes.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace walhook::relay {

using steady_time = std::chrono::steady_clock::time_point;

/// The event types walhook publishes.
namespace notification_types {
inline constexpr std::string_view failing = "walhook.endpoint.failing";
inline constexpr std::string_view paused = "walhook.endpoint.paused";
inline constexpr std::string_view disabled = "walhook.endpoint.disabled";
inline constexpr std::string_view recovered = "walhook.endpoint.recovered";
inline constexpr std::string_view dead = "walhook.delivery.dead";
}  // namespace notification_types

/// An event type walhook publishes itself (walhook.*): outcomes of its deliveries never notify.
bool is_notification_type(std::string_view event_type);

struct notification_policy {
  /// `walhook run --operator-tenant`: the tenant every notification is published to (routed like
  /// any of its events, to its endpoints subscribed to the type); "" = none.
  std::string operator_tenant = "walhook-operator";
  /// Notifications to an endpoint's contact endpoint (walhook.endpoints.contact_endpoint_id).
  bool contacts = true;
  /// walhook.endpoint.failing (and the `endpoint.failing` warn log line): at most one per
  /// endpoint this often, and one per failure streak.
  std::chrono::seconds failing_interval{600};
  /// walhook.endpoint.paused: at most one per endpoint this often, and one per failure streak.
  std::chrono::seconds paused_interval{600};
  /// walhook.delivery.dead: at most one per endpoint this often, counting the deliveries that
  /// ended dead since the previous one.
  std::chrono::seconds dead_interval{60};
};

/// One notification about one endpoint, before it is addressed. Which fields a type carries:
///   all:       endpoint (id, tenant, redacted URL, contact), last_status, last_error
///   failing:   consecutive_failures, failing_since
///   paused:    consecutive_failures, failing_since, paused_until, reason ("circuit breaker" or
///              "Retry-After")
///   disabled:  consecutive_failures, failing_since, reason ("HTTP 410 Gone", "failing continuously since …")
///   recovered: (nothing more)
///   dead:      dead_count (ended dead since the previous walhook.delivery.dead of the endpoint),
///              last_event_id and reason (the last one's)
struct notice {
  std::string type;  ///< one of notification_types
  std::int64_t endpoint_id = 0;
  std::string tenant_id;
  std::string url;  ///< delivery::redact_url of the endpoint's URL
  std::optional<std::int64_t> contact_endpoint_id;
  std::optional<int> last_status;
  std::optional<std::string> last_error;
  int consecutive_failures = 0;
  std::optional<sys_time> failing_since;
  std::optional<sys_time> paused_until;
  std::optional<std::string> reason;
  std::int64_t dead_count = 0;
  std::optional<std::string> last_event_id;
  bool operator==(const notice&) const = default;
};

class notifier {
 public:
  explicit notifier(notification_policy policy = {}) : policy_(std::move(policy)) {}

  struct attempt_notices {
    bool log_failing = false;  ///< log `endpoint.failing` at warn (same rate limit as the notice)
    std::vector<notice> notices;
  };

  /// After an attempt on `ep` whose decision is `d`; `before`: the endpoint's breaker before it.
  /// `disabling`: `d` disables an endpoint that was not disabled yet. `own_event`: the delivery
  /// was of a walhook.* event (the log line may come; no notice but the end of an announced
  /// streak). `now` is monotonic (rate limits). In order:
  ///   disabling                          → disabled
  ///   the breaker just paused, the first time in this streak → paused (rate-limited)
  ///   consecutive failures 0 → 1         → failing (rate-limited, with the log line)
  ///   a success closes a streak that was announced (failing or paused), or a breaker pause → recovered
  attempt_notices after_attempt(const endpoint& ep, const delivery::breaker_state& before, const decision& d,
                                bool disabling, bool own_event, steady_time now);
  /// A delivery to `ep` ended dead (`record`). The first after a quiet interval is a notice at
  /// once; the next ones within dead_interval are counted and come with due() or the next dead.
  std::optional<notice> dead(const endpoint& ep, const std::string& event_id, const sql::delivery_outcome& record,
                             bool own_event, steady_time now);
  /// The counted dead deliveries whose interval has passed, one notice per endpoint; with
  /// `all`, every counted one (a graceful stop: the count lives only in memory).
  std::vector<notice> due(steady_time now, bool all = false);
  /// The endpoint is gone: its rate-limit state (and counted dead deliveries) too.
  void forget(std::int64_t endpoint_id) { state_.erase(endpoint_id); }

  const notification_policy& policy() const { return policy_; }

 private:
  struct endpoint_state {
    std::optional<steady_time> last_failing;      ///< the last failing notice
    std::optional<steady_time> last_failing_log;  ///< the last `endpoint.failing` log line
    std::optional<steady_time> last_paused;
    bool announced = false;  ///< a failing or paused notice went out in this streak
    std::optional<steady_time> last_dead;
    std::optional<notice> dead_counted;  ///< dead deliveries since the last dead notice
  };
  notification_policy policy_;
  std::unordered_map<std::int64_t, endpoint_state> state_;
};

/// The outbox rows of a notice: one to the operator tenant (routed by tenant and type) unless
/// `operator_tenant` is ""; one to the contact endpoint `contact` (found by the notice's
/// contact_endpoint_id; nullptr if unknown) as a direct route in the contact's tenant, unless it
/// is the endpoint itself or retired. Payload (`data` of the webhook): endpoint_id, tenant_id,
/// url, last_status, last_error and the type's fields; never a secret. State notices (failing,
/// paused, recovered) of one endpoint share a merge key — a consumer that was down gets the
/// latest state — and all notices of one endpoint share an aggregate id (their order); disabled
/// and dead are facts (never merged).
std::vector<sql::publish_event> rows_of(const notice& n, std::string_view operator_tenant, const endpoint* contact);

}  // namespace walhook::relay
