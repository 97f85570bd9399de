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
// No loops: the failure of a delivery of a walhook.* event yields no failing and no dead notice
// (it is only logged); when it pauses or disables the endpoint (a contact or operator endpoint
// failing on walhook's own events), that transition is announced once, to the operator tenant
// only — never to a contact endpoint, so no notice about a contact reaches the contact itself or
// starts a chain. A contact endpoint that is the endpoint itself is ignored. (A success may end a
// streak that was announced: that streak's one walhook.endpoint.recovered.)
//
// A global budget: at most notification_policy::budget_per_minute notices a minute go to the
// operator tenant, whatever endpoint they are about; the rest of that minute's are counted, and
// one walhook.endpoints.digest (counts per type, a sample of endpoint ids) says so when the minute
// is over. Contact endpoints are not budgeted: each hears about its own endpoints (their per
// endpoint rate limits bound that), whatever the other tenants' endpoints do.
//
// Single-threaded.

#include "relay/core/decisions.hpp"
#include "relay/core/rows.hpp"
#include "sql/writes.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
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
/// The notices the global budget held back in one minute, summed up (one notice, no endpoint).
inline constexpr std::string_view digest = "walhook.endpoints.digest";
}  // namespace notification_types

/// The operator tenant's default name (`walhook run --operator-tenant`). Reserved: `walhook
/// endpoint add` adds an endpoint to it only with --operator, `walhook send` never publishes to it
/// (its endpoints get walhook's notifications about every tenant's endpoints).
inline constexpr std::string_view default_operator_tenant = "walhook-operator";

/// An event type walhook publishes itself (walhook.*): outcomes of its deliveries never notify.
bool is_notification_type(std::string_view event_type);

struct notification_policy {
  /// `walhook run --operator-tenant`: the tenant every notification is published to (routed like
  /// any of its events, to its endpoints subscribed to the type); "" = none.
  std::string operator_tenant = std::string(default_operator_tenant);
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
  /// `walhook run --notification-budget`: notices to the operator tenant per minute at most,
  /// across all endpoints; past it, the rest of the minute's are counted in one
  /// walhook.endpoints.digest at the minute's end.
  int budget_per_minute = 30;
  /// Endpoint ids a digest lists at most (its `endpoints` counts them all).
  std::size_t digest_sample = 20;
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
///   digest:    none of the above (endpoint_id 0): held_back per type, endpoints, sample_endpoint_ids
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
  /// Where it goes (rows_of() reads these). to_operator false: over the global budget, counted
  /// in the next digest instead. to_contact false: the endpoint failed on a walhook.* event, so
  /// only the operator tenant hears of it.
  bool to_operator = true;
  bool to_contact = true;
  /// digest only: the notices of its minute that went out (the budget) and those held back, per
  /// type (by type name), and the endpoints they were about — how many, and the first
  /// digest_sample ids, ascending.
  std::int64_t sent = 0;
  std::vector<std::pair<std::string, std::int64_t>> held_back;
  std::int64_t endpoints = 0;
  std::vector<std::int64_t> sample_endpoint_ids;
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
  /// was of a walhook.* event (the log line may come; no failing notice; a pause or disable is
  /// announced to the operator tenant only). `now` is monotonic (rate limits, the budget). In order:
  ///   disabling                          → disabled
  ///   consecutive failures 0 → 1         → failing (rate-limited, with the log line; not own_event)
  ///   the breaker just paused, the first time in this streak → paused (rate-limited)
  ///   a success closes a streak that was announced (failing or paused), or a breaker pause → recovered
  /// The notices come budgeted (to_operator), after the digest of a budget minute that is over.
  attempt_notices after_attempt(const endpoint& ep, const delivery::breaker_state& before, const decision& d,
                                bool disabling, bool own_event, steady_time now);
  /// A delivery to `ep` ended dead (`record`). The first after a quiet interval is a notice at
  /// once; the next ones within dead_interval are counted and come with due() or the next dead.
  /// Budgeted like after_attempt's (so a digest may come first); empty for own_event.
  std::vector<notice> dead(const endpoint& ep, const std::string& event_id, const sql::delivery_outcome& record,
                           bool own_event, steady_time now);
  /// The digest of a budget minute that is over, then the counted dead deliveries whose interval
  /// has passed (one notice per endpoint, budgeted); with `all`, every counted one and the
  /// digest of the minute under way (a graceful stop: both live only in memory).
  std::vector<notice> due(steady_time now, bool all = false);
  /// The endpoint is gone: its rate-limit state (and counted dead deliveries) too.
  void forget(std::int64_t endpoint_id) { state_.erase(endpoint_id); }

  const notification_policy& policy() const { return policy_; }

 private:
  struct endpoint_state {
    std::optional<steady_time> last_failing;      ///< the last failing notice
    std::optional<steady_time> last_failing_log;  ///< the last `endpoint.failing` log line
    std::optional<steady_time> last_paused;
    bool announced = false;     ///< a failing or paused notice went out in this streak
    bool contact_told = false;  ///< one of them went to the contact endpoint too
    std::optional<steady_time> last_dead;
    std::optional<notice> dead_counted;  ///< dead deliveries since the last dead notice
  };
  /// The operator tenant's budget: one minute from its first notice.
  struct budget_window {
    std::optional<steady_time> start;
    int sent = 0;
    std::map<std::string, std::int64_t> held_back;  ///< per type
    std::set<std::int64_t> endpoints;               ///< the held-back notices' endpoints
  };
  /// Ends the window if its minute is over (or `force`), appending its digest if it held any back.
  void roll(steady_time now, bool force, std::vector<notice>& out);
  /// Appends `n` to `out` budgeted (after the digest of a window that is over).
  void spend(notice n, steady_time now, std::vector<notice>& out);

  notification_policy policy_;
  std::unordered_map<std::int64_t, endpoint_state> state_;
  budget_window window_;
};

/// The outbox rows of a notice: one to the operator tenant (routed by tenant and type) unless
/// `operator_tenant` is "" or the notice is not to_operator; one to the contact endpoint
/// `contact` (found by the notice's contact_endpoint_id; nullptr if unknown) as a direct route in
/// the contact's tenant, if the notice is to_contact, unless it is the endpoint itself, retired,
/// or gets the operator tenant's row anyway. Payload (`data` of the webhook): endpoint_id,
/// tenant_id, url, last_status, last_error and the type's fields; never a secret. State notices
/// (failing, paused, recovered) of one endpoint share a merge key — a consumer that was down gets
/// the latest state — and all notices of one endpoint share an aggregate id (their order);
/// disabled and dead are facts (never merged). A digest goes to the operator tenant only (a
/// contact must not learn of other tenants' endpoints), a fact with aggregate id
/// `walhook.endpoints`.
std::vector<sql::publish_event> rows_of(const notice& n, std::string_view operator_tenant, const endpoint* contact);

}  // namespace walhook::relay
