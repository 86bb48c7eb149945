// The stop flag of a long-running command: SIGTERM (kubelet, a DaemonSet's rolling update)
// and SIGINT (an operator's Ctrl-C) set it, and the command's loops poll it and end cleanly.
// One flag per process, so every command shares one handler.
#pragma once
#include <atomic>

namespace base {

/// Installs the SIGTERM and SIGINT handlers (again: harmless) and returns the flag they set.
std::atomic<bool>& stop_on_signal();

}  // namespace base
