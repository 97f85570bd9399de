#pragma once
// Interpreting pgoutput rows of walhook's tables by column name, against the Relation message
// they were sent with (never the live catalog).

#include "delivery/destination.hpp"
#include "delivery/http_client.hpp"
#include "delivery/job.hpp"
#include "delivery/oauth2.hpp"
#include "delivery/rate_limit.hpp"
#include "delivery/signing.hpp"
#include "relay/core/payload_filter.hpp"
#include "relay/core/snapshot.hpp"
#include "wal/pgoutput.hpp"

#include <boost/system/result.hpp>

#include <chrono>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay {

/// A row of a Relation, looked up by column name.
class row_view {
 public:
  row_view(const wal::pgoutput::relation& rel, const wal::pgoutput::tuple& tuple) : rel_(rel), tuple_(tuple) {}

  enum class state { absent, null, unchanged, value };
  /// The column's state; `out` is set for state::value (text format).
  state get(std::string_view column, std::string_view& out) const;
  /// The text value, or std::nullopt if absent, NULL or unchanged.
  std::optional<std::string> text(std::string_view column) const;

 private:
  const wal::pgoutput::relation& rel_;
  const wal::pgoutput::tuple& tuple_;
};

/// A whole-table read (column names, text rows with std::nullopt for NULL) in the stream's
/// shapes, so its rows decode exactly like the stream's: a Relation of those columns, and one
/// TupleData per row.
wal::pgoutput::relation relation_of_columns(const std::vector<std::string>& columns);
wal::pgoutput::tuple tuple_of_text(const std::vector<std::optional<std::string>>& row);

/// Builds an event from an Insert into walhook.outbox. Errors (std::errc::invalid_argument)
/// carry no detail; `why` says what is wrong (missing id, tenant, type or payload, an
/// endpoint_id that is not a number). endpoint_id (the direct route) absent — a Relation of a
/// schema before migration 006 — is NULL. A created_at
/// that RFC 3339 cannot express (infinite, BC, after 9999) is not an error: the event comes back
/// with created_at as PostgreSQL printed it, no body, and the reason in `why` — the caller
/// records its deliveries dead. So does a row with a reserved event type or merge key
/// (reserved_name) that walhook did not write (by_walhook): a forgery of its notifications, and
/// a row an outbox bridge wrote instead of one it could not map (rejected, migration 009).
/// aggregate_type (migration 009) absent from an older Relation is none.
boost::system::result<delivery::event> event_from_row(const row_view& row, lsn commit_lsn, std::string& why);

/// The reason of the dead deliveries of a row an outbox bridge could not map, from its
/// walhook.outbox.rejected ("app.outbox row 42: the payload is not JSON (…)", migration 009).
std::string rejected_reason(std::string_view rejected);

/// True if `name` starts with "walhook." (case-insensitive): event types and merge keys of
/// walhook's own notifications (migration 008 refuses them in rows walhook did not write).
bool reserved_name(std::string_view name);

enum class endpoint_status { active, paused, disabled };
std::string_view to_string(endpoint_status s);

/// An endpoint as walhook follows it. A bad URL or secret does not drop the endpoint: its
/// deliveries end dead with `config_error` as the reason.
struct endpoint {
  std::int64_t id = 0;
  std::string tenant_id;
  std::string url;
  std::string secret;  ///< kept to rebuild keys when only other columns change
  std::optional<delivery::destination> target;  ///< from url: an HTTP target or a broker's
  std::vector<delivery::signing_key> keys;  ///< in the column's order: the newest secret first
  /// walhook.endpoints.secret_grace_until (migration 006): a rotation's old secrets sign until
  /// then, the first alone after it (relay/core/secret_rotation.hpp). None: every key signs.
  std::optional<std::chrono::system_clock::time_point> secret_grace_until;
  std::optional<std::vector<std::string>> event_types;  ///< nullopt: all types
  int max_concurrency = 4;
  endpoint_status status = endpoint_status::active;
  bool aggregate_ordering = false;
  /// walhook.endpoints.contact_endpoint_id (migration 006): the endpoint walhook's notifications
  /// about this one go to (relay/core/notifications.hpp); empty: none.
  std::optional<std::int64_t> contact_endpoint_id;
  /// walhook.endpoints.created_snapshot (migration 008): the snapshot of the transaction that
  /// created it. An event whose transaction is visible in it had committed before the endpoint
  /// existed and is not routed to it (exists_for). Empty: created before migration 008.
  std::optional<pg_snapshot> created_snapshot;
  /// walhook.endpoints.defer_statuses / max_deferrals / retry_schedule_ms (migration 011; an inbox
  /// destination's, copied from its source): an answer with one of these statuses defers the
  /// delivery (relay/core/decisions.hpp, decide), at most max_deferrals times; other failures are
  /// retried after each retry schedule entry in turn, then end dead. Empty: none, walhook's backoff.
  std::vector<int> defer_statuses;
  int max_deferrals = 0;
  std::vector<std::chrono::milliseconds> retry_schedule;
  /// The columns of migrations 012 and 014 as stored (text; nullopt: NULL), from which
  /// resolve_endpoint derives headers, secret_headers, filter, max_rate, oauth and the target's egress.
  struct policy_columns {
    std::optional<std::string> headers, secret_headers, filter, max_rate;
    std::optional<std::string> oauth_token_url, oauth_client_id, oauth_client_secret, oauth_scope, proxy;
    bool operator==(const policy_columns&) const = default;
  } policies;
  /// walhook.endpoints.headers / secret_headers (migration 012): sent on every attempt after
  /// walhook's own headers, in order (relay/core/endpoint_policies.hpp checks them).
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::pair<std::string, std::string>> secret_headers;
  /// walhook.endpoints.filter (migration 012): an event whose body it does not match is not routed here.
  std::optional<payload_filter> filter;
  /// walhook.endpoints.max_rate / rate_burst (migration 012): attempts started at most at this rate.
  std::optional<delivery::rate> max_rate;
  int rate_burst = 0;  ///< 0: the whole rate at once
  /// walhook.endpoints.oauth_* (migration 014): each attempt carries a bearer token from this
  /// client's token endpoint (delivery/oauth2.hpp). HTTP endpoints only.
  std::optional<delivery::oauth2_client> oauth;
  std::string config_error;  ///< non-empty: URL, secret, headers or filter unusable
  /// Removed in the stream (DELETE, TRUNCATE, a changed id): nothing new is routed to it, and the
  /// work routed before the removal gets one attempt each — a failure ends dead, never retried.
  bool retired = false;

  bool subscribed(std::string_view event_type) const;
  /// False if the transaction `xid` (32-bit, of a pgoutput Begin; 0: unknown) had committed
  /// before this endpoint was created.
  bool exists_for(std::uint32_t xid) const;
};

/// Builds an endpoint from an Insert/Update of walhook.endpoints. A column pgoutput sends as
/// unchanged (a TOASTed value the UPDATE did not touch) is taken from `old_row` (the old tuple:
/// walhook.endpoints has REPLICA IDENTITY FULL), else from `previous` (the cached endpoint); a
/// value is never made up. Errors (std::errc::invalid_argument): the row has no id; or a column is
/// unchanged and neither gives it (`why` says which).
boost::system::result<endpoint> endpoint_from_row(const row_view& row, const endpoint* previous,
                                                  const row_view* old_row = nullptr, std::string* why = nullptr);

/// Endpoints from a whole-table read (column names and text rows, std::nullopt for NULL),
/// decoded exactly like the stream's rows; rows without an id are skipped.
std::vector<endpoint> endpoints_from_table(const std::vector<std::string>& columns,
                                           const std::vector<std::vector<std::optional<std::string>>>& rows);

/// Fills target/keys/config_error from url and secret, and headers/secret_headers/filter/
/// max_rate/oauth and the target's egress (the proxy column: "direct" or http://host:port) from
/// `policies` (a value walhook cannot use is a config_error too). The target of an inbox destination
/// (is_inbox_tenant) may reach private networks (private_network_allowed): its handler is the
/// operator's own, set by `walhook inbox source`; every other endpoint's is guarded.
void resolve_endpoint(endpoint& e);

/// Whether `tenant_id` is an inbox source's ("inbox:NAME", docs/inbox.md): events only walhook
/// writes (migration 010), delivered to the operator's own handlers. Pure.
bool is_inbox_tenant(std::string_view tenant_id);

/// Parses a one-dimensional PostgreSQL text[] literal ({a,"b c",NULL}); NULL elements are
/// skipped. std::nullopt if malformed.
std::optional<std::vector<std::string>> parse_text_array(std::string_view literal);

}  // namespace walhook::relay
