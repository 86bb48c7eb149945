// Crash injection for tests. In a test build (TOPOCNI_FAILPOINTS), failpoint("x") kills
// the process with SIGKILL, no cleanup at all, when TOPOCNI_FAILPOINT=x is set. In a
// release build it compiles to nothing.
#pragma once

namespace base {

#ifdef TOPOCNI_FAILPOINTS
void failpoint(const char* name);
#else
inline void failpoint(const char*) {}
#endif

}  // namespace base
