// Linked into the static release binary only (CMakeLists.txt wraps these symbols): a
// static binary that called dlopen or glibc's NSS-backed lookups would load the build
// machine's shared objects from the node at run time, which breaks on any other glibc.
// Libraries linked in (OpenSSL's engine loader, c-ares's service lookup) still reference
// them on paths topocni never takes; these stand-ins make sure those paths fail cleanly
// instead of loading anything. Names are resolved by cni/resolve.cc (c-ares), TLS has no
// engines or providers to load, and openssl.cnf is never read.
#include <dlfcn.h>
#include <netdb.h>

extern "C" {

void* __wrap_dlopen(const char*, int) { return nullptr; }

int __wrap_getaddrinfo(const char*, const char*, const struct addrinfo*, struct addrinfo** res) {
    if (res) *res = nullptr;
    return EAI_FAIL;
}

struct hostent* __wrap_gethostbyname(const char*) { return nullptr; }

struct servent* __wrap_getservbyname(const char*, const char*) { return nullptr; }

int __wrap_getservbyport_r(int, const char*, struct servent*, char*, size_t, struct servent** result) {
    if (result) *result = nullptr;
    return 0;
}

}  // extern "C"
