// `walhook tenant token create|list|revoke`, `walhook tenant limits`, `walhook tenant portal-link` and
// `walhook tenant portal-logout`: the tenant API's tokens
// and what a tenant may do by itself (relay/operations/tenants.hpp, docs/tenant-api.md).

#include "relay/cli/commands.hpp"
#include "relay/cli/flags.hpp"
#include "relay/core/notifications.hpp"
#include "relay/operations/blocking_db.hpp"
#include "relay/operations/schema.hpp"
#include "relay/operations/status.hpp"
#include "relay/operations/tenants.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace walhook::relay::cli {

namespace {

struct create_args {
  std::string database_url;
  std::string tenant;
  std::string scope;
  std::string expires = "90d";
  std::string description;
  std::string operator_tenant = std::string(default_operator_tenant);
};

/// Prints "token: wht_…" (once: only its hash is kept), then its id, fingerprint and expiry.
int create(const create_args& a) {
  const auto scope = operations::parse_scope(a.scope);
  if (!scope) throw cli_error("--scope must be read or manage");
  const auto lifetime =
      a.expires == "never" ? std::nullopt : std::optional<std::chrono::seconds>(parse_duration(a.expires, "--expires"));
  operations::check_tenant_name(a.tenant, a.operator_tenant);
  blocking_db db(a.database_url);
  operations::require_schema(db);
  const auto t = operations::create_token(db, a.tenant, *scope, lifetime, a.description, a.operator_tenant);
  std::cout << "token: " << t.token << "\n"
            << fmt::format("id: {}\nfingerprint: {}\ntenant: {}\nscope: {}\nexpires: {}\n", t.id, t.fingerprint,
                           a.tenant, a.scope, t.expires_at.empty() ? "never" : t.expires_at)
            << "note: the token is shown this once; walhook keeps only its SHA-256\n";
  return 0;
}

command add_create(CLI::App* token) {
  auto a = std::make_shared<create_args>();
  auto* c = token->add_subcommand("create", "Create a tenant API token; prints it once (token: …)");
  add_database_url(c, a->database_url);
  c->add_option("--tenant", a->tenant, "The tenant whose data the token reaches (and no other)")->required();
  c->add_option("--scope", a->scope, "read (GET routes only) or manage (every route)")
      ->required()
      ->check(CLI::IsMember({"read", "manage"}));
  c->add_option("--expires", a->expires, "Lifetime, e.g. 90d, 12h, 30m, or never")->capture_default_str();
  c->add_option("--description", a->description, "Free text, e.g. who holds it");
  c->add_option("--operator-tenant", a->operator_tenant,
                "The operator tenant of walhook run (it gets no token)")->capture_default_str();
  return {c, [a] { return create(*a); }};
}

command add_list(CLI::App* token) {
  struct state {
    std::string database_url;
    std::string tenant;
  };
  auto s = std::make_shared<state>();
  auto* c = token->add_subcommand("list", "List tenant API tokens (fingerprints, never the tokens)");
  add_database_url(c, s->database_url);
  c->add_option("--tenant", s->tenant, "Only this tenant's");
  return {c, [s] {
            blocking_db db(s->database_url);
            operations::require_schema(db);
            const auto rows = operations::list_tokens(db, s->tenant);
            std::cout << fmt::format("{:>5}  {:<20}  {:<20}  {:<6}  {:<20}  {:<20}  {:<20}  {}\n", "ID", "TENANT",
                                     "FINGERPRINT", "SCOPE", "CREATED", "EXPIRES", "LAST USED", "STATE");
            const auto second = [](const std::string& t) { return t.empty() ? std::string("-") : operations::to_the_second(t); };
            for (const auto& t : rows)
              std::cout << fmt::format("{:>5}  {:<20}  {:<20}  {:<6}  {:<20}  {:<20}  {:<20}  {}\n", t.id, t.tenant,
                                       t.fingerprint, t.scope, second(t.created_at),
                                       t.expires_at.empty() ? std::string("never") : second(t.expires_at),
                                       second(t.last_used_at),
                                       !t.revoked_at.empty() ? "revoked " + second(t.revoked_at)
                                       : t.expired           ? std::string("expired")
                                                             : std::string("active"));
            return 0;
          }};
}

command add_revoke(CLI::App* token) {
  struct state {
    std::string database_url;
    std::string which;
  };
  auto s = std::make_shared<state>();
  auto* c = token->add_subcommand("revoke", "Revoke a tenant API token: refused from its next request on");
  add_database_url(c, s->database_url);
  c->add_option("token", s->which, "Its id or fingerprint (sha256:…), as list shows them")->required();
  return {c, [s] {
            blocking_db db(s->database_url);
            operations::require_schema(db);
            const auto t = operations::revoke_token(db, s->which);
            std::cout << fmt::format("token {} ({}) of tenant {}: revoked\n", t.id, t.fingerprint, t.tenant);
            return 0;
          }};
}

command add_portal_link(CLI::App* tenant) {
  struct state {
    std::string database_url;
    std::string tenant;
    std::string expires = "15m";
    std::string base_url = "http://localhost:8443";
    std::string operator_tenant = std::string(default_operator_tenant);
  };
  auto s = std::make_shared<state>();
  auto* c = tenant->add_subcommand("portal-link",
                                   "Mint a one-time link to the tenant portal (/portal/ of walhook run --api-listen)");
  add_database_url(c, s->database_url);
  c->add_option("--tenant", s->tenant, "The tenant whose portal it opens")->required();
  c->add_option("--expires", s->expires, "How long the link can be opened (at most 24h); the session then lasts 1h")
      ->capture_default_str();
  c->add_option("--base-url", s->base_url, "Where customers reach --api-listen (scheme, host, port)")
      ->capture_default_str();
  c->add_option("--operator-tenant", s->operator_tenant, "The operator tenant of walhook run (it gets no link)")
      ->capture_default_str();
  return {c, [s] {
            const auto lifetime = parse_duration(s->expires, "--expires");
            operations::check_tenant_name(s->tenant, s->operator_tenant);
            std::string base = s->base_url;
            while (!base.empty() && base.back() == '/') base.pop_back();
            if (!base.starts_with("http://") && !base.starts_with("https://"))
              throw cli_error("--base-url must start with http:// or https://");
            blocking_db db(s->database_url);
            operations::require_schema(db);
            const auto code = operations::create_portal_code(db, s->tenant, lifetime, s->operator_tenant);
            std::cout << fmt::format("link: {}/portal/#code={}\nexpires: {}\n", base, code.code, code.expires_at)
                      << "note: the link opens the portal once; send it to the customer over a channel you trust\n";
            return 0;
          }};
}

command add_portal_logout(CLI::App* tenant) {
  struct state {
    std::string database_url;
    std::string tenant;
  };
  auto s = std::make_shared<state>();
  auto* c = tenant->add_subcommand("portal-logout", "End every portal session of a tenant (a link that leaked)");
  add_database_url(c, s->database_url);
  c->add_option("--tenant", s->tenant, "The tenant")->required();
  return {c, [s] {
            blocking_db db(s->database_url);
            operations::require_schema(db);
            std::cout << fmt::format("tenant {}: {} portal sessions ended\n", s->tenant,
                                     operations::end_sessions(db, s->tenant));
            return 0;
          }};
}

command add_limits(CLI::App* tenant) {
  struct state {
    std::string database_url;
    std::string tenant;
    std::optional<int> max_endpoints, max_concurrency;
  };
  auto s = std::make_shared<state>();
  auto* c = tenant->add_subcommand("limits", "Show or set what a tenant may do through the tenant API");
  add_database_url(c, s->database_url);
  c->add_option("--tenant", s->tenant, "The tenant")->required();
  c->add_option("--max-endpoints", s->max_endpoints, "Endpoints it may have (default 20)");
  c->add_option("--max-concurrency", s->max_concurrency, "The highest max_concurrency of its endpoints (default 10)");
  return {c, [s] {
            blocking_db db(s->database_url);
            operations::require_schema(db);
            const auto l = (s->max_endpoints || s->max_concurrency)
                               ? operations::set_limits(db, s->tenant, s->max_endpoints, s->max_concurrency)
                               : operations::limits_of(db, s->tenant);
            std::cout << fmt::format("tenant {}: max endpoints {}, max concurrency {}\n", s->tenant, l.max_endpoints,
                                     l.max_concurrency);
            return 0;
          }};
}

}  // namespace

command add_tenant(CLI::App& app) {
  auto* c = app.add_subcommand("tenant", "Tenant API tokens and limits (docs/tenant-api.md)");
  c->require_subcommand(1);
  auto* token = c->add_subcommand("token", "Create, list and revoke tenant API tokens");
  token->require_subcommand(1);
  std::vector<command> verbs{add_create(token), add_list(token), add_revoke(token), add_limits(c), add_portal_link(c), add_portal_logout(c)};
  return {c, [verbs] {
            for (const auto& v : verbs)
              if (v.app->parsed()) return v.run();
            return 0;
          }};
}

}  // namespace walhook::relay::cli
