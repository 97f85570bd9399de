#include "relay/demo/embedded_postgres.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace walhook::relay {
namespace fs = std::filesystem;

namespace {

bool is_root() { return ::geteuid() == 0; }

std::string find_bindir() {
  // Prefer a PATH that has initdb, else the newest /usr/lib/postgresql/<v>/bin.
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (!dir.empty() && ::access((dir + "/initdb").c_str(), X_OK) == 0 && ::access((dir + "/postgres").c_str(), X_OK) == 0)
        return dir;
    }
  }
  std::string best;
  int best_version = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int v = std::atoi(entry.path().filename().c_str());
    if (v > best_version && fs::exists(entry.path() / "bin" / "initdb")) {
      best_version = v;
      best = (entry.path() / "bin").string();
    }
  }
  if (best.empty()) throw std::runtime_error("PostgreSQL server binaries (initdb, postgres) not found in PATH or /usr/lib/postgresql");
  return best;
}

}  // namespace

int run_process(const std::vector<std::string>& argv, const std::string& user, std::string& output,
                const std::string& cwd) {
  char tmpl[] = "/tmp/walhook-run-XXXXXX";
  int out_fd = ::mkstemp(tmpl);
  if (out_fd < 0) return -1;
  ::unlink(tmpl);
  uid_t uid = 0;
  gid_t gid = 0;
  bool switch_user = !user.empty() && is_root();
  if (switch_user) {
    struct passwd* pw = ::getpwnam(user.c_str());
    if (!pw) {
      ::close(out_fd);
      output = "no such user: " + user;
      return -1;
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out_fd);
    return -1;
  }
  if (pid == 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(out_fd, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (switch_user) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) _exit(126);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::lseek(out_fd, 0, SEEK_SET);
  output.clear();
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out_fd, buf, sizeof buf)) > 0) output.append(buf, static_cast<std::size_t>(n));
  ::close(out_fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pid_t spawn_process(const std::vector<std::string>& argv, const std::string& log_path) {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(0);
    std::vector<char*> a;
    for (const auto& arg : argv) a.push_back(const_cast<char*>(arg.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    _exit(127);
  }
  return pid;
}

int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::string embedded_postgres::bin(const std::string& tool) const {
  std::string path = bindir_ + "/" + tool;
  if (fs::exists(path)) return path;
  // A PATH directory may link only some tools (initdb, postgres): the others (pg_basebackup)
  // are next to the binary initdb links to.
  std::error_code ec;
  auto real = fs::canonical(bindir_ + "/initdb", ec).parent_path() / tool;
  return !ec && fs::exists(real) ? real.string() : path;
}

std::vector<std::string> embedded_postgres::server_arguments() const {
  std::vector<std::string> args{bin("postgres"), "-D", dir_ + "/data"};
  std::vector<std::string> settings{
      "port=" + std::to_string(port_), "listen_addresses=127.0.0.1", "unix_socket_directories=" + dir_,
      "wal_level=logical", "max_wal_senders=16", "max_replication_slots=16", "fsync=off", "full_page_writes=off",
      "max_connections=200", "shared_buffers=128MB", "TimeZone=UTC"};
  settings.insert(settings.end(), options_.settings.begin(), options_.settings.end());
  for (const auto& s : settings) {
    args.push_back("-c");
    args.push_back(s);
  }
  return args;
}

embedded_postgres::embedded_postgres(embedded_postgres_options options) : options_(std::move(options)) {
  bindir_ = find_bindir();
  char tmpl[] = "/tmp/walhook-pg-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp failed: ") + std::strerror(errno));
  dir_ = tmpl;
  const std::string user = is_root() ? "postgres" : "";
  if (is_root()) {
    struct passwd* pw = ::getpwnam("postgres");
    if (!pw) throw std::runtime_error("running as root needs a 'postgres' user to run the server (initdb refuses root)");
    if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0)
      throw std::runtime_error("chown " + dir_ + " failed: " + std::strerror(errno));
  }
  std::string out;
  if (const auto* primary = options_.standby_of) {
    // A fast checkpoint so the copy starts at once; -R writes standby.signal and primary_conninfo.
    int rc = run_process({bin("pg_basebackup"), "-D", dir_ + "/data", "-h", "127.0.0.1", "-p",
                          std::to_string(primary->port()), "-U", "postgres", "-R", "-X", "stream", "-c", "fast",
                          "--no-sync"},
                         user, out, dir_);
    if (rc != 0) throw std::runtime_error("pg_basebackup failed: " + out);
  } else {
    int rc = run_process({bin("initdb"), "-D", dir_ + "/data", "-U", "postgres", "--auth=trust", "-E", "UTF8",
                          "--locale=C", "--no-sync"},
                         user, out, dir_);
    if (rc != 0) throw std::runtime_error("initdb failed: " + out);
  }
  port_ = free_tcp_port();
  if (!start()) {
    std::ifstream log(log_path());
    std::stringstream ss;
    ss << log.rdbuf();
    throw std::runtime_error("PostgreSQL did not start: " + ss.str());
  }
}

embedded_postgres::~embedded_postgres() {
  if (running_) stop("immediate");
  if (!options_.keep) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string embedded_postgres::url(const std::string& database) const {
  return fmt::format("postgresql://postgres@127.0.0.1:{}/{}", port_, database);
}

bool embedded_postgres::start() {
  if (running_) return true;
  uid_t uid = 0;
  gid_t gid = 0;
  if (is_root()) {
    struct passwd* pw = ::getpwnam("postgres");
    if (!pw) return false;
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  }
  auto args = server_arguments();
  std::string log = log_path();
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::setsid();  // a terminal's Ctrl-C reaches us, not the server directly
    if (is_root() && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) _exit(126);
    // After the user switch (which clears it): SIGQUIT the postmaster if we die.
    ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
    if (::getppid() != parent) _exit(0);
    if (::chdir(dir_.c_str()) != 0) _exit(126);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  // Ready when it accepts connections (PQping), or failed if it exited. Checked every 10 ms so
  // callers that time a restart (walhook-bench pg-restart) see the moment within 10 ms; a
  // refused or "starting up" ping costs next to nothing.
  std::string conninfo = fmt::format("host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=2", port_);
  for (int i = 0; i < 6000; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return false;
    }
    if (PQping(conninfo.c_str()) == PQPING_OK) {
      running_ = true;
      return true;
    }
    ::usleep(10 * 1000);
  }
  ::kill(pid_, SIGQUIT);
  ::waitpid(pid_, nullptr, 0);
  pid_ = 0;
  return false;
}

bool embedded_postgres::stop(const std::string& mode) {
  if (!pid_) return true;
  int sig = mode == "smart" ? SIGTERM : mode == "immediate" ? SIGQUIT : SIGINT;
  if (::kill(pid_, sig) != 0) return false;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = 0;
  running_ = false;
  return true;
}

bool embedded_postgres::promote() {
  try {
    return psql("SELECT pg_promote(true, 60)") == "t";
  } catch (const std::exception&) {
    return false;  // not a standby, or not running
  }
}

bool embedded_postgres::restart(const std::string& mode) {
  if (!stop(mode)) return false;
  return start();
}

std::string embedded_postgres::psql(const std::string& sql, const std::string& database) const {
  std::string out;
  std::string psql_bin = fs::exists(bin("psql")) ? bin("psql") : "psql";
  int rc = run_process({psql_bin, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url(database), "-c", sql}, "",
                       out);
  if (rc != 0) throw std::runtime_error("psql failed: " + out);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace walhook::relay
