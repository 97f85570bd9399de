#pragma once
// The tenant API's route handlers (docs/tenant-api.md): each runs on the database worker with
// the authenticated caller and answers JSON. Every query names the caller's tenant: an id of
// another tenant's endpoint or event is answered exactly like one that does not exist (404).
// events.cpp: GET /v1/events[/{id}]; endpoints.cpp: the endpoint routes; actions.cpp: pause,
// resume, rotate-secret, test, deliveries, resend, replay. Changes write the audit log
// (walhook.tenant_audit: a creation in its transaction, the others as soon as the operation they
// share with the CLI has committed) and log tenant.action.

#include "relay/admin/request.hpp"
#include "relay/admin/verdict.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/tenants.hpp"
#include "relay/tenant/router.hpp"

#include <string>
#include <vector>

namespace walhook::relay::tenant {

/// Who asks, and what the handlers need of walhook run's settings.
struct caller {
  operations::token_holder holder;
  std::string remote;
  std::string slot_base;        ///< --slot without a shard's suffix (answer_event)
  std::string operator_tenant;  ///< --operator-tenant
};

api_response list_events(blocking_db& db, const caller& c, const api_request& req);
/// `recent`, `window`: this walhook's in-memory record of attempts of the event (a first-try
/// success leaves no row), read on the engine's executor before the job runs.
api_response get_event(blocking_db& db, const caller& c, const std::string& event_id, std::vector<outcome_entry> recent,
                       record_window window);

api_response list_endpoints(blocking_db& db, const caller& c);
api_response get_endpoint(blocking_db& db, const caller& c, std::int64_t id);
api_response create_endpoint(blocking_db& db, const caller& c, const api_request& req);
api_response update_endpoint(blocking_db& db, const caller& c, std::int64_t id, const api_request& req);
api_response delete_endpoint(blocking_db& db, const caller& c, std::int64_t id);

/// pause | resume.
api_response set_status(blocking_db& db, const caller& c, std::int64_t id, const std::string& action,
                        const api_request& req);
api_response rotate_secret(blocking_db& db, const caller& c, std::int64_t id, const api_request& req);
api_response test_send(blocking_db& db, const caller& c, std::int64_t id, const api_request& req);
api_response list_deliveries(blocking_db& db, const caller& c, std::int64_t id, const api_request& req);
api_response resend(blocking_db& db, const caller& c, std::int64_t id, const api_request& req);
api_response replay(blocking_db& db, const caller& c, std::int64_t id, const api_request& req);

/// Throws not_found("no endpoint with id N") unless endpoint `id` is the caller's tenant's (the
/// same answer as for an id nobody has).
void require_own_endpoint(blocking_db& db, const caller& c, std::int64_t id);
/// Writes the audit row and logs tenant.action (tenant, action, endpoint_id, token fingerprint, remote).
void audit(blocking_db& db, const caller& c, std::string_view action, std::optional<std::int64_t> endpoint_id,
           const std::string& detail_json = "{}");

}  // namespace walhook::relay::tenant
