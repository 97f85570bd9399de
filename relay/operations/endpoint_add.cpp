// operations::add_endpoint: `walhook endpoint add` and POST /v1/endpoints insert the same way.

#include "delivery/signing.hpp"
#include "relay/operations/operations.hpp"

namespace walhook::relay::operations {

void check_new_endpoint(const new_endpoint& e) {
  check_url(e.url);
  if (e.max_concurrency < 1 || e.max_concurrency > 1000)
    throw invalid_input("--max-concurrency must be between 1 and 1000");
  if (e.ordering != "none" && e.ordering != "aggregate") throw invalid_input("--ordering must be 'none' or 'aggregate'");
  clean_event_types(e.event_types);
  if (!e.secret.empty() && !delivery::parse_secrets(e.secret))
    throw invalid_input("--secret must be whsec_ followed by base64 of a 16–64 byte key (several may be space-separated)");
  check_new(e.policies, e.url);
}

added_endpoint add_endpoint(blocking_db& db, const new_endpoint& e) {
  check_new_endpoint(e);
  const auto types = clean_event_types(e.event_types);
  const std::string secret = e.secret.empty() ? delivery::generate_secret() : e.secret;
  if (e.contact_endpoint_id) check_contact(db, *e.contact_endpoint_id, e.tenant);
  const auto maybe = [](const std::string& v) { return v.empty() ? std::nullopt : std::optional<std::string>(v); };
  pg::params p{e.tenant,
               e.url,
               secret,
               std::to_string(e.max_concurrency),
               types.empty() ? std::nullopt : std::optional<std::string>(pg_array_literal(types)),
               e.ordering,
               maybe(e.description),
               e.contact_endpoint_id ? std::optional<std::string>(std::to_string(*e.contact_endpoint_id)) : std::nullopt};
  for (auto& v : column_values(e.policies)) p.push_back(std::move(v));
  auto r = db.exec(
      "INSERT INTO walhook.endpoints (tenant_id, url, secret, max_concurrency, event_types, ordering, description, "
      "contact_endpoint_id, headers, secret_headers, filter, max_rate, rate_burst, oauth_token_url, oauth_client_id, "
      "oauth_client_secret, oauth_scope, proxy) VALUES ($1, $2, $3, $4::int, $5::text[], $6, $7, $8::bigint, "
      "$9::text[], $10::text[], $11, $12, $13::int, $14, $15, $16, $17, $18) RETURNING id",
      p);
  return {r.integer(0, 0), secret};
}

}  // namespace walhook::relay::operations
