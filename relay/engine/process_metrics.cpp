#include "relay/engine/process_metrics.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/resource.h>
#include <unistd.h>

namespace walhook::relay {

std::optional<process_metrics> read_process_metrics() {
  std::ifstream stat_file("/proc/self/stat");
  std::ifstream machine("/proc/stat");
  if (!stat_file || !machine) return std::nullopt;
  std::stringstream stat;
  stat << stat_file.rdbuf();
  double boot_time_s = 0;
  for (std::string line; std::getline(machine, line);)
    if (line.starts_with("btime ")) boot_time_s = std::stod(line.substr(6));
  auto m = parse_proc_stat(stat.str(), ::sysconf(_SC_CLK_TCK), ::sysconf(_SC_PAGESIZE), boot_time_s);
  if (!m) return std::nullopt;
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  // The iterator's own descriptor is counted too, as client_golang's procfs does.
  if (!ec) m->open_fds = fds;
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    m->max_fds = static_cast<double>(nofile.rlim_cur);
  return m;
}

}  // namespace walhook::relay
