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

// OpenSSL runs OPENSSL_cpuid_setup as a constructor of every program it is linked into:
// about ten CPUID instructions, each a VM exit (5 us here), 0.05 ms on every plugin run,
// VERSION and DEL included, while only a node-label lookup ever uses TLS. This definition
// comes before libcrypto.a on the link line, so the library's own is never linked; it
// does nothing until cni/https.cc sets topocni_tls_wanted, and OPENSSL_init_ssl then
// calls it (from ossl_init_base) before any cipher is chosen. Same steps as OpenSSL's
// crypto/cpuid.c (without its OPENSSL_ia32cap override from the environment).
#if defined(__x86_64__)
unsigned long long OPENSSL_ia32_cpuid(unsigned int* cap);   // libcrypto's x86_64cpuid.o
extern unsigned int OPENSSL_ia32cap_P[];

int topocni_tls_wanted = 0;

void OPENSSL_cpuid_setup(void) {
    static int done = 0;
    if (done || !topocni_tls_wanted) return;
    done = 1;
    unsigned long long vec = OPENSSL_ia32_cpuid(OPENSSL_ia32cap_P);
    OPENSSL_ia32cap_P[0] = static_cast<unsigned int>(vec) | (1u << 10);
    OPENSSL_ia32cap_P[1] = static_cast<unsigned int>(vec >> 32);
}
#endif

}  // extern "C"
