#pragma once
// Operator actions on walhook's tables, shared by the CLI (relay/cli/) and the admin API
// (relay/admin/actions.cpp, `walhook run --admin-listen`): the same SQL, the same checks, the
// same answers. Each runs in one transaction on a blocking connection and returns what it
// changed; none prints. A user error throws its kind (relay/operations/errors.hpp) with a
// one-line message: not_found (no such endpoint or event), invalid_input (a bad URL, an empty
// range), conflict (an attempt in flight); the admin API answers it by kind, 4xx {"error": message}.
//
// Actions that make deliveries due tell a running walhook through the WAL
// (pg_logical_emit_message, prefix 'walhook': "wake:<id>" or "resume:<id>"), so it looks for
// them at once instead of at its next claim round.

#include "relay/operations/blocking_db.hpp"
#include "relay/operations/endpoint_policies.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::relay::operations {

/// What an action changed, for the CLI's line and the API's JSON answer.
struct change {
  std::int64_t endpoint_id = 0;
  std::string action;          ///< "paused", "resumed", "enabled", "disabled", "removed", "updated", ...
  std::int64_t deliveries = 0; ///< deliveries made due, replayed, resent or ended by the action
  std::string note;            ///< one sentence for the operator ("" if none), e.g. "endpoint is paused: they go out after resume"
};

/// A new endpoint, as `walhook endpoint add` and POST /v1/endpoints (the tenant API) give it.
struct new_endpoint {
  std::string tenant;
  std::string url;
  std::string secret;  ///< whsec_… (several space-separated); "" = generated
  int max_concurrency = 4;
  std::vector<std::string> event_types;  ///< empty: all types
  std::string ordering = "none";         ///< none | aggregate
  std::string description;
  std::optional<std::int64_t> contact_endpoint_id;
  endpoint_policies policies;
};
struct added_endpoint {
  std::int64_t id = 0;
  std::string secret;  ///< the secret it signs with (generated or given)
};
/// The checks of add_endpoint that need no database (all but the contact endpoint's). Throws
/// invalid_input naming the flag. Pure.
void check_new_endpoint(const new_endpoint& e);
/// Inserts the endpoint after the checks of `endpoint add`: the URL (check_url), max_concurrency
/// 1..1000, ordering, event types, the secret's form, the policies (check_new), the contact
/// endpoint (check_contact). One statement, in the caller's transaction if one is open. Throws
/// invalid_input naming the flag; the tenant's name is the caller's to check.
added_endpoint add_endpoint(blocking_db& db, const new_endpoint& e);

/// pause | resume | enable | disable. resume and enable also close the circuit breaker, clear the
/// disable reason and the last error (last_status, last_error of walhook.endpoint_health: the
/// cleared error is in the note) and make the endpoint's pending deliveries due now ("retry
/// pending now" is resume). Throws not_found("no endpoint with id N"), invalid_input for another action.
change set_status(blocking_db& db, std::int64_t endpoint_id, const std::string& action);

/// Deliveries of an endpoint still to do (pending or sending), for remove's confirmation.
/// Throws not_found("no endpoint with id N").
std::int64_t open_deliveries(blocking_db& db, std::int64_t endpoint_id);
/// Deletes the endpoint; its open deliveries end dead ("endpoint removed") and its rows go.
/// Throws not_found("no endpoint with id N").
change remove(blocking_db& db, std::int64_t endpoint_id);

struct endpoint_update {
  std::optional<std::string> url;                        ///< validated like endpoint add
  std::optional<std::vector<std::string>> event_types;   ///< empty vector: all types
  std::optional<int> max_concurrency;                    ///< 1..1000
  std::optional<std::string> description;
  std::optional<std::optional<std::int64_t>> contact_endpoint_id;  ///< nullopt inside: none
  endpoint_policies policies;  ///< headers, filter, rate (relay/operations/endpoint_policies.hpp)
};
/// Changes the given columns. Throws invalid_input on invalid values (a --contact-endpoint that
/// does not exist too) or if nothing is given, not_found if the endpoint does not exist.
change update(blocking_db& db, std::int64_t endpoint_id, const endpoint_update& u);

struct rotated_secret {
  std::string secret;       ///< the new whsec_… (shown once, to the CLI only)
  std::string grace_until;  ///< RFC 3339 UTC: the old secret(s) stop signing then; "" = at once (grace 0)
};
/// New secret first; the current ones stay valid (signed with as well) for `grace` (default
/// 24 h); after it walhook run signs with the new one alone and drops them. A grace of 0
/// replaces them at once (the next attempt walhook makes after reading the change is signed with
/// the new secret alone). `secret` empty: generated. Throws invalid_input (a negative grace, a
/// malformed secret, one the endpoint holds already), not_found.
rotated_secret rotate_secret(blocking_db& db, std::int64_t endpoint_id, std::chrono::seconds grace,
                             const std::string& secret = "");

/// A note for an endpoint that follows walhook.outbox by cursor (sql/migrations/007): what it
/// is owed is not in walhook.deliveries, and is sent when it can take it. nullopt otherwise.
std::optional<std::string> cursor_note(blocking_db& db, std::int64_t endpoint_id);

struct replay_filter {
  std::optional<std::int64_t> delivery_id;
  std::optional<std::int64_t> endpoint_id;
  std::optional<std::string> since;  ///< timestamptz text: events created at or after
  std::optional<std::string> until;  ///< events created before
  std::optional<std::string> event_type;  ///< only events of this type
  /// Only events whose webhook body this payload filter matches (relay/core/payload_filter.hpp);
  /// a dead letter whose event has left the outbox (retention) cannot be matched and stays.
  std::optional<std::string> payload_filter;
  bool dry_run = false;  ///< count what would be replayed; change nothing
};
/// Dead letters (and a disabled endpoint's pending deliveries) start over with fresh counters;
/// of several with one merge key only the newest, none where a newer one is pending. Returns
/// one change per endpoint touched (deliveries = how many replayed, or would be with dry_run:
/// action "would replay"); a note if the endpoint is not active, or if a payload filter could
/// not read some. Throws invalid_input (no delivery or endpoint given, an empty range, a filter
/// that does not compile), not_found (the endpoint), pg_error of class 22 (a since/until
/// PostgreSQL cannot parse).
std::vector<change> replay(blocking_db& db, const replay_filter& f);

/// Resend one event to one endpoint, whatever happened before (delivered, dead, or no row: a
/// first-try success with --record failed leaves none): its delivery becomes pending and due
/// now, with the same webhook-id (the event id). Throws not_found if the endpoint or the event
/// (outbox row) is missing; conflict if an attempt is in flight now, or if another state of the
/// same merge key is pending (a newer one carries the entity's latest state); invalid_input for
/// an id that is not a UUID or an event of another tenant.
change resend(blocking_db& db, std::int64_t endpoint_id, const std::string& event_id);

/// True for a UUID in its 8-4-4-4-12 hex text form, either case (walhook.outbox.id, webhook-id).
bool is_uuid(std::string_view s);

/// The whsec_ secrets' public fingerprints (never the secrets): "sha256:" + the first 12 hex
/// digits of SHA-256 of each decoded key, space-separated, in the column's order; "" if the
/// column does not parse.
std::string secret_fingerprints(const std::string& secrets);

/// Checks an endpoint URL like endpoint add (absolute http(s), no credentials). Throws
/// invalid_input naming --url, with the URL redacted.
void check_url(const std::string& url);
/// Event types with blanks trimmed. Throws invalid_input on an empty one.
std::vector<std::string> clean_event_types(const std::vector<std::string>& types);
/// Checks that endpoint `contact_id` can receive the notifications about an endpoint of
/// `tenant_id`: it exists and is of the same tenant (migration 008's foreign key says the same;
/// this says it readably). Throws invalid_input naming --contact-endpoint.
void check_contact(blocking_db& db, std::int64_t contact_id, const std::string& tenant_id);
/// A PostgreSQL text[] literal of the items ('{"a","b"}').
std::string pg_array_literal(const std::vector<std::string>& items);

}  // namespace walhook::relay::operations
