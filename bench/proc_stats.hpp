#pragma once
// What the benchmark reads from /proc: CPU seconds per process, per process tree (PostgreSQL:
// the postmaster and its backends) and per thread (the bench's own receiver, generator and
// in-process polling relay), resident memory, and a description of the machine.
//
// Linux only. Every reader returns 0 (or an empty value) when the process is gone.

#include <chrono>
#include <string>
#include <vector>

#include <pthread.h>
#include <sys/types.h>

namespace walhook::bench {

/// utime + stime of one process (all its threads), seconds. With `reaped_children`, the CPU of
/// children it has already waited for (cutime + cstime) is added.
double process_cpu_seconds(pid_t pid, bool reaped_children = false);

/// CPU of a process and all its live descendants plus the children it has reaped, seconds:
/// for PostgreSQL's postmaster this is the whole server, backends that came and went included.
double tree_cpu_seconds(pid_t root);

/// CPU of one thread of this process (pthread_getcpuclockid), seconds; 0 on error.
double thread_cpu_seconds(pthread_t thread);
/// CPU of the calling thread, seconds.
double this_thread_cpu_seconds();

/// Busy CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait).
double machine_busy_seconds();

/// VmHWM (peak resident set) of a process, KiB; 0 if unknown.
long peak_rss_kib(pid_t pid);

/// Memory of a process tree without double-counting shared memory, KiB: the sum of every
/// process's private RssAnon + RssFile, plus the largest RssShmem (PostgreSQL's shared buffers
/// are mapped by every backend).
long tree_rss_kib(pid_t root);

/// Live descendants of a process (any depth).
std::vector<pid_t> descendants(pid_t root);

/// The parent of a process, 0 if unknown.
pid_t parent_of(pid_t pid);

/// /proc/<pid>/comm, "" if gone.
std::string process_name(pid_t pid);

struct machine_description {
  unsigned cpus = 0;          ///< online CPUs (nproc)
  std::string cpu_model;      ///< /proc/cpuinfo "model name"
  long memory_mib = 0;        ///< MemTotal
  std::string kernel;         ///< uname -srm
  std::string load_average;   ///< /proc/loadavg, first three fields
};
machine_description describe_machine();

/// /proc/loadavg, first three fields.
std::string load_average();

}  // namespace walhook::bench
