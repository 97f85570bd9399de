#include "tests/support/headless_browser.hpp"

#include "common/json_writer.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <fmt/format.h>
#include <simdjson.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace walhook::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using clock_type = std::chrono::steady_clock;

std::string find_chromium() {
  if (const char* env = std::getenv("WALHOOK_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    std::stringstream ss(dirs);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (dir.empty()) continue;
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

std::string js_string(std::string_view s) { return json_writer().string(s).take(); }

namespace {

std::string base64_decode(std::string_view in) {
  static constexpr auto table = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = i;
    return t;
  }();
  std::string out;
  out.reserve(in.size() / 4 * 3);
  unsigned buffer = 0;
  int bits = 0;
  for (char c : in) {
    int v = table[static_cast<unsigned char>(c)];
    if (v < 0) continue;  // '=' padding, line breaks
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

struct headless_browser::impl {
  options opts;
  std::filesystem::path profile;
  pid_t pid = 0;
  asio::io_context ioc;
  websocket::stream<beast::tcp_stream> ws{ioc};
  beast::flat_buffer buffer;
  simdjson::dom::parser parser;
  std::int64_t next_id = 1;
  std::string session_id;
  bool load_fired = false;
  std::vector<std::string> errors;

  std::string log() const { return read_file(profile / "chromium.log"); }

  void start() {
    char tmpl[] = "/tmp/walhook-chromium-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    profile = tmpl;

    std::vector<std::string> args{
        opts.binary,
        "--headless=new",
        "--no-sandbox",  // tests run as root in CI containers; the pages are our own
        "--remote-debugging-port=0",
        "--remote-debugging-address=127.0.0.1",
        "--user-data-dir=" + profile.string(),
        "--no-first-run",
        "--no-default-browser-check",
        "--no-proxy-server",  // loopback only; an http_proxy in the environment must not matter
        "--disable-gpu",
        "--disable-dev-shm-usage",  // containers have a small /dev/shm
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--mute-audio",
        "--hide-scrollbars",
        "--force-color-profile=srgb",
        "--lang=en-US",
        fmt::format("--window-size={},{}", opts.width, opts.height),
        "about:blank"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    std::string log_path = (profile / "chromium.log").string();
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group: the renderer, GPU and zygote processes go with it at the end.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int rc = ::posix_spawn(&pid, opts.binary.c_str(), &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      pid = 0;
      throw std::runtime_error(fmt::format("cannot start {}: {}", opts.binary, std::strerror(rc)));
    }

    // Chromium writes the port it bound and the browser target's path once it listens.
    auto deadline = clock_type::now() + opts.timeout;
    std::string port, path;
    for (;;) {
      std::ifstream f(profile / "DevToolsActivePort");
      if (f && std::getline(f, port) && std::getline(f, path) && !port.empty() && !path.empty()) break;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = 0;
        throw std::runtime_error("chromium exited before listening:\n" + log());
      }
      if (clock_type::now() > deadline) throw std::runtime_error("chromium did not listen in time:\n" + log());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }

    asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::stoi(port)));
    beast::get_lowest_layer(ws).expires_after(opts.timeout);
    beast::get_lowest_layer(ws).connect(ep);
    ws.read_message_max(64 * 1024 * 1024);  // full-page screenshots come base64 in one message
    ws.handshake("127.0.0.1:" + port, path);
    beast::get_lowest_layer(ws).expires_never();

    std::string target = send_and_wait("Target.createTarget", R"({"url":"about:blank"})", false);
    std::string target_id = std::string(parser.parse(target)["targetId"].get_string().value());
    std::string attached = send_and_wait(
        "Target.attachToTarget", json_writer().begin_object().field("targetId", target_id).field("flatten", true).end_object().take(),
        false);
    session_id = std::string(parser.parse(attached)["sessionId"].get_string().value());

    send_and_wait("Page.enable", "{}", true);
    send_and_wait("Runtime.enable", "{}", true);
    send_and_wait("Log.enable", "{}", true);
    send_and_wait("Emulation.setDeviceMetricsOverride",
                  fmt::format(R"({{"width":{},"height":{},"deviceScaleFactor":1,"mobile":false}})", opts.width, opts.height),
                  true);
  }

  /// Reads one message before the deadline; nullopt on timeout (the socket is then unusable).
  std::optional<std::string> read_one(clock_type::time_point deadline) {
    std::optional<boost::system::error_code> done;
    buffer.clear();
    ws.async_read(buffer, [&](boost::system::error_code ec, std::size_t) { done = ec; });
    ioc.restart();
    ioc.run_until(deadline);
    if (!done) {
      beast::get_lowest_layer(ws).cancel();
      ioc.restart();
      ioc.run();
      return std::nullopt;
    }
    if (*done) throw std::runtime_error("DevTools connection: " + done->message());
    return beast::buffers_to_string(buffer.data());
  }

  /// Records what an event tells the test (load, page errors); ignores the rest.
  void on_event(const simdjson::dom::element& msg) {
    std::string_view method;
    if (msg["method"].get(method)) return;
    if (method == "Page.loadEventFired") {
      load_fired = true;
    } else if (method == "Runtime.exceptionThrown") {
      auto details = msg["params"]["exceptionDetails"];
      std::string_view text;
      if (details["exception"]["description"].get(text) && details["text"].get(text)) text = "exception";
      errors.push_back("uncaught: " + std::string(text));
    } else if (method == "Runtime.consoleAPICalled") {
      std::string_view type;
      if (msg["params"]["type"].get(type) || type != "error") return;
      std::string line = "console.error:";
      simdjson::dom::array args;
      if (!msg["params"]["args"].get(args))
        for (auto a : args) {
          std::string_view v;
          if (!a["value"].get(v) || !a["description"].get(v)) line += " " + std::string(v);
          else line += " " + simdjson::to_string(a);
        }
      errors.push_back(line);
    } else if (method == "Log.entryAdded") {
      std::string_view level, text, url;
      if (msg["params"]["entry"]["level"].get(level) || level != "error") return;
      if (msg["params"]["entry"]["text"].get(text)) text = "";
      if (msg["params"]["entry"]["url"].get(url)) url = "";
      errors.push_back(fmt::format("log: {} {}", text, url));
    }
  }

  /// Sends a command (to the page's session if `in_session`) and returns its result's JSON.
  std::string send_and_wait(const std::string& method, const std::string& params, bool in_session) {
    std::int64_t id = next_id++;
    std::string msg = fmt::format(R"({{"id":{},"method":"{}","params":{})", id, method, params);
    if (in_session) msg += fmt::format(R"(,"sessionId":"{}")", session_id);
    msg += "}";
    ws.text(true);
    ws.write(asio::buffer(msg));
    auto deadline = clock_type::now() + opts.timeout;
    for (;;) {
      auto text = read_one(deadline);
      if (!text) throw std::runtime_error(fmt::format("no answer to {} within {} ms", method, opts.timeout.count()));
      simdjson::dom::element doc;
      if (parser.parse(*text).get(doc)) throw std::runtime_error("unparsable DevTools message: " + *text);
      std::int64_t got = 0;
      if (doc["id"].get(got)) {
        on_event(doc);
        continue;
      }
      if (got != id) continue;
      simdjson::dom::element error;
      if (!doc["error"].get(error)) throw std::runtime_error(fmt::format("{} failed: {}", method, simdjson::to_string(error)));
      simdjson::dom::element result;
      if (doc["result"].get(result)) return "{}";
      return simdjson::to_string(result);
    }
  }

  /// Reads messages until `flag` is set (by on_event) or the deadline.
  void wait_event(bool& flag, clock_type::time_point deadline, const char* what) {
    while (!flag) {
      auto text = read_one(deadline);
      if (!text) throw std::runtime_error(std::string("timed out waiting for ") + what);
      simdjson::dom::element doc;
      if (!parser.parse(*text).get(doc)) on_event(doc);
    }
  }

  void stop() {
    if (ws.is_open()) {
      try {
        opts.timeout = std::chrono::milliseconds(3000);
        send_and_wait("Browser.close", "{}", false);
      } catch (const std::exception&) {
        // It may close the socket before answering; the process check below is what counts.
      }
      boost::system::error_code ec;
      beast::get_lowest_layer(ws).socket().close(ec);
    }
    if (pid > 0) {
      // Wait for the browser to exit without reaping it, so its process group id stays ours
      // while what is left of the group (renderers, zygote) is killed.
      auto deadline = clock_type::now() + std::chrono::seconds(5);
      for (;;) {
        siginfo_t info{};
        int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
        if (rc == 0 && info.si_pid == pid) break;
        if (rc != 0 && errno != EINTR) break;
        if (clock_type::now() > deadline) {
          ::kill(pid, SIGKILL);
          deadline = clock_type::now() + std::chrono::seconds(10);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::kill(-pid, SIGKILL);
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      pid = 0;
    }
    if (!profile.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(profile, ec);
      // Chromium's helpers may still be writing for a moment after the kill.
      if (ec) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::filesystem::remove_all(profile, ec);
      }
      profile.clear();
    }
  }
};

headless_browser::headless_browser(options o) : impl_(std::make_unique<impl>()) {
  impl_->opts = std::move(o);
  try {
    impl_->start();
  } catch (...) {
    impl_->stop();
    throw;
  }
}

headless_browser::~headless_browser() { impl_->stop(); }

std::string headless_browser::call(const std::string& method, const std::string& params_json) {
  return impl_->send_and_wait(method, params_json, true);
}

void headless_browser::navigate(const std::string& url) {
  impl_->load_fired = false;
  auto deadline = clock_type::now() + impl_->opts.timeout;
  std::string result = call("Page.navigate", json_writer().begin_object().field("url", url).end_object().take());
  auto doc = impl_->parser.parse(result);
  std::string_view error_text;
  if (!doc["errorText"].get(error_text) && !error_text.empty())
    throw std::runtime_error(fmt::format("navigation to {} failed: {}", url, error_text));
  std::string_view loader;
  if (doc["loaderId"].get(loader)) return;  // same-document navigation: no load event
  impl_->wait_event(impl_->load_fired, deadline, "the page's load event");
}

std::string headless_browser::evaluate(const std::string& expression) {
  std::string result = call("Runtime.evaluate", json_writer()
                                                    .begin_object()
                                                    .field("expression", expression)
                                                    .field("awaitPromise", true)
                                                    .field("returnByValue", true)
                                                    .field("userGesture", true)
                                                    .end_object()
                                                    .take());
  auto doc = impl_->parser.parse(result);
  simdjson::dom::element details;
  if (!doc["exceptionDetails"].get(details)) {
    std::string_view text;
    if (details["exception"]["description"].get(text) && details["text"].get(text)) text = "exception";
    throw std::runtime_error(fmt::format("evaluating `{}` threw: {}", expression, text));
  }
  simdjson::dom::element value;
  if (doc["result"]["value"].get(value)) return "null";
  return simdjson::to_string(value);
}

bool headless_browser::evaluate_bool(const std::string& expression) { return evaluate(expression) == "true"; }

std::string headless_browser::evaluate_string(const std::string& expression) {
  std::string json = evaluate(expression);
  std::string_view s;
  if (impl_->parser.parse(json).get(s)) throw std::runtime_error(fmt::format("`{}` is not a string: {}", expression, json));
  return std::string(s);
}

bool headless_browser::wait_for(const std::string& expression, std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    bool ok = false;
    try {
      ok = evaluate_bool(expression);
    } catch (const std::runtime_error&) {
      ok = false;
    }
    if (ok) return true;
    if (clock_type::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string headless_browser::screenshot(bool full_page) {
  std::string params = R"({"format":"png"})";
  if (full_page) {
    auto metrics = impl_->parser.parse(call("Page.getLayoutMetrics"));
    double width = 0, height = 0;
    if (metrics["cssContentSize"]["width"].get(width) || metrics["cssContentSize"]["height"].get(height))
      throw std::runtime_error("Page.getLayoutMetrics: no cssContentSize");
    params = fmt::format(
        R"({{"format":"png","captureBeyondViewport":true,"clip":{{"x":0,"y":0,"width":{},"height":{},"scale":1}}}})",
        std::max(width, static_cast<double>(impl_->opts.width)), height);
  }
  auto doc = impl_->parser.parse(call("Page.captureScreenshot", params));
  std::string_view data;
  if (doc["data"].get(data)) throw std::runtime_error("Page.captureScreenshot: no data");
  return base64_decode(data);
}

const std::vector<std::string>& headless_browser::page_errors() const { return impl_->errors; }

std::string headless_browser::browser_log() const { return impl_->log(); }

}  // namespace walhook::test
