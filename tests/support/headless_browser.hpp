#pragma once
// A headless Chromium driven over the Chrome DevTools Protocol (CDP), for the console's browser
// test and its screenshots. Protocol: https://chromedevtools.github.io/devtools-protocol/ —
// JSON messages {id, method, params, sessionId} over one WebSocket to the browser target, the
// page reached through Target.attachToTarget with flatten (one socket, commands carry the
// page's sessionId).
//
// Synchronous and single-threaded: every call blocks the calling thread until the answer or
// its deadline. Beast stays in the .cpp. The browser runs as its own process group with a
// throwaway profile directory; the destructor closes it, kills what is left of the group and
// removes the directory.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace walhook::test {

/// The Chromium binary to use: $WALHOOK_CHROMIUM if set, else the first of chromium,
/// chromium-browser, google-chrome on PATH; "" if none (the Debian package is `chromium`).
std::string find_chromium();

/// A JavaScript string literal of `s` (JSON's escaping), for building expressions to evaluate.
std::string js_string(std::string_view s);

class headless_browser {
 public:
  struct options {
    std::string binary;                          ///< from find_chromium()
    int width = 1400;                            ///< viewport, CSS pixels
    int height = 900;
    std::chrono::milliseconds timeout{30'000};   ///< per command, and for start-up
  };

  /// Starts Chromium (--headless=new --remote-debugging-port=0), reads the port it chose from
  /// <profile>/DevToolsActivePort, connects and opens a page. Throws std::runtime_error (with
  /// Chromium's output) if it does not come up within the timeout.
  explicit headless_browser(options o);
  ~headless_browser();
  headless_browser(const headless_browser&) = delete;
  headless_browser& operator=(const headless_browser&) = delete;

  /// Sends a command to the page's session; returns its "result" object as JSON text. Throws
  /// std::runtime_error on a protocol error answer or the timeout.
  std::string call(const std::string& method, const std::string& params_json = "{}");

  /// Page.navigate, then waits for the load event (not for a same-document navigation, e.g. a
  /// fragment change: there is none). Throws if the navigation fails.
  void navigate(const std::string& url);

  /// Runtime.evaluate of a JavaScript expression in the page, awaiting a returned promise, as a
  /// user gesture; returns the value as JSON text ("null" for undefined). Throws with the
  /// exception's description if it threw or the promise rejected.
  std::string evaluate(const std::string& expression);
  bool evaluate_bool(const std::string& expression);
  /// The value if it is a string; throws otherwise.
  std::string evaluate_string(const std::string& expression);

  /// Evaluates `expression` every 50 ms until it yields true or `timeout` passes; returns the
  /// last result. An exception in the expression counts as false.
  bool wait_for(const std::string& expression, std::chrono::milliseconds timeout);

  /// PNG bytes of the page: the whole document if full_page, else the viewport.
  std::string screenshot(bool full_page = true);

  /// What the page reported as errors so far: console.error calls, uncaught exceptions,
  /// failed loads (Log domain), one line each.
  const std::vector<std::string>& page_errors() const;

  /// Chromium's own stdout/stderr so far (for failure messages).
  std::string browser_log() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace walhook::test
