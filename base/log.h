// One log line per event: "<RFC3339 time> <level> <verb> <containerID> <ifname>: <message>".
// Never on stdout (stdout carries only the result or the error JSON). Until the config
// is read, and when logFile cannot be opened, lines go to stderr; a log problem never
// fails the verb.
#pragma once
#include <string>

namespace base::log {

enum class Level { Error = 0, Warning = 1, Info = 2, Debug = 3 };

/// Sets the context printed on every line and where lines go. `level` is the config's
/// logLevel string; `file` empty means stderr.
void configure(const std::string& level, const std::string& file);
void set_context(const std::string& verb, const std::string& container_id, const std::string& ifname);

void write(Level level, const std::string& message);
inline void error(const std::string& m) { write(Level::Error, m); }
inline void warn(const std::string& m) { write(Level::Warning, m); }
inline void info(const std::string& m) { write(Level::Info, m); }
inline void debug(const std::string& m) { write(Level::Debug, m); }

}  // namespace base::log
