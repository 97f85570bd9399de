#pragma once
// The tenant portal's HTTP pieces (docs/tenant-api.md, "The portal"): its files, the session
// cookie, and the answers of POST /portal/session and /portal/logout. The sessions themselves
// are relay/operations/tenants.hpp's; relay/tenant/api.cpp routes /portal/ here.

#include "relay/admin/request.hpp"
#include "relay/operations/tenants.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace walhook::relay::tenant {

/// The session cookie's name.
inline constexpr std::string_view portal_cookie = "walhook_portal";

/// GET /portal/… : the portal's file at `path` ("/portal/" is index.html; "/portal" redirects
/// there), or 404.
api_response portal_file(std::string_view path);

/// The value of cookie `name` in a Cookie header ("a=1; walhook_portal=xyz"), "" if absent (or
/// given twice: neither is taken). RFC 6265 §5.4. Pure.
std::string cookie_value(std::string_view header, std::string_view name);

/// 200 {"tenant", "csrf", "expires_at"} with the session cookie: HttpOnly (no script reads it),
/// SameSite=Strict (no other site's page sends it), Path=/, Max-Age the session's lifetime, and
/// Secure when the listener speaks TLS.
api_response session_started(const operations::portal_session& s, bool secure);
/// 200 {"signed_out": true} with the cookie cleared.
api_response session_ended(bool secure);

}  // namespace walhook::relay::tenant
