#include "bench/proc_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/utsname.h>
#include <unistd.h>

namespace walhook::bench {
namespace {

double ticks_per_second() {
  static const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return hz > 0 ? hz : 100.0;
}

/// Fields of /proc/<pid>/stat after the command name (which may contain spaces and parentheses):
/// index 0 is field 3 ("state") of proc(5).
std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  std::getline(in, text);
  auto close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> out;
  std::string f;
  while (rest >> f) out.push_back(f);
  return out;
}

double field_seconds(const std::vector<std::string>& f, std::size_t i) {
  return i < f.size() ? std::strtod(f[i].c_str(), nullptr) / ticks_per_second() : 0.0;
}

long status_kib(pid_t pid, const char* key) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  std::string prefix = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return std::strtol(line.c_str() + prefix.size(), nullptr, 10);
  return 0;
}

}  // namespace

// proc(5): utime is field 14, stime 15, cutime 16, cstime 17; index = field − 3.
double process_cpu_seconds(pid_t pid, bool reaped_children) {
  auto f = stat_fields(pid);
  double s = field_seconds(f, 11) + field_seconds(f, 12);
  if (reaped_children) s += field_seconds(f, 13) + field_seconds(f, 14);
  return s;
}

pid_t parent_of(pid_t pid) {
  auto f = stat_fields(pid);
  return f.size() > 1 ? static_cast<pid_t>(std::strtol(f[1].c_str(), nullptr, 10)) : 0;
}

std::string process_name(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(in, name);
  return name;
}

std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> all;  // (pid, ppid)
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    pid_t pid = static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10));
    all.emplace_back(pid, parent_of(pid));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty()) {
    pid_t p = frontier.back();
    frontier.pop_back();
    for (auto [pid, ppid] : all)
      if (ppid == p) {
        out.push_back(pid);
        frontier.push_back(pid);
      }
  }
  return out;
}

double tree_cpu_seconds(pid_t root) {
  if (root <= 0) return 0;
  // The root's reaped children are in its cutime/cstime; live ones are read one by one (their
  // own reaped children included, so nothing that ran is missed).
  double s = process_cpu_seconds(root, true);
  for (pid_t p : descendants(root)) s += process_cpu_seconds(p, true);
  return s;
}

double thread_cpu_seconds(pthread_t thread) {
  clockid_t id;
  if (::pthread_getcpuclockid(thread, &id) != 0) return 0;
  timespec ts{};
  if (::clock_gettime(id, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double this_thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;  // "cpu": the sum over all CPUs
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  double v[8] = {};
  for (double& x : v) in >> x;
  return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / ticks_per_second();
}

long peak_rss_kib(pid_t pid) { return pid > 0 ? status_kib(pid, "VmHWM") : 0; }

long tree_rss_kib(pid_t root) {
  if (root <= 0) return 0;
  auto pids = descendants(root);
  pids.push_back(root);
  long priv = 0, shmem = 0;
  for (pid_t p : pids) {
    priv += status_kib(p, "RssAnon") + status_kib(p, "RssFile");
    shmem = std::max(shmem, status_kib(p, "RssShmem"));
  }
  return priv + shmem;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

machine_description describe_machine() {
  machine_description m;
  m.cpus = std::thread::hardware_concurrency();
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) m.cpu_model = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line))
    if (line.rfind("MemTotal:", 0) == 0) m.memory_mib = std::strtol(line.c_str() + 9, nullptr, 10) / 1024;
  utsname u{};
  if (::uname(&u) == 0) m.kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  m.load_average = load_average();
  return m;
}

}  // namespace walhook::bench
