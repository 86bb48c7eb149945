// Linked into the static release binary only (CMakeLists.txt wraps these symbols): a
// static binary that called dlopen or glibc's NSS-backed lookups would load the build
// machine's shared objects from the node at run time, which breaks on any other glibc.
// Libraries linked in (OpenSSL's engine loader, c-ares's service lookup, libnl's protocol
// names) still reference
// them on paths topocni never takes; these stand-ins make sure those paths fail cleanly
// instead of loading anything. Names are resolved by kube/resolve.cc (c-ares), TLS has no
// engines or providers to load, and openssl.cnf is never read.
#include <dlfcn.h>
#include <netdb.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

void* __wrap_dlopen(const char*, int) { return nullptr; }

int __wrap_getaddrinfo(const char*, const char*, const struct addrinfo*, struct addrinfo** res) {
    if (res) *res = nullptr;
    return EAI_FAIL;
}

struct hostent* __wrap_gethostbyname(const char*) { return nullptr; }

struct servent* __wrap_getservbyname(const char*, const char*) { return nullptr; }

// libnl's protocol-name helpers (only for printing objects, which topocni never does).
struct protoent* __wrap_getprotobyname(const char*) { return nullptr; }
struct protoent* __wrap_getprotobynumber(int) { return nullptr; }

int __wrap_getservbyport_r(int, const char*, struct servent*, char*, size_t, struct servent** result) {
    if (result) *result = nullptr;
    return 0;
}

// libnl-route's classid.o has a constructor that looks for /etc/libnl/classid (a stat and
// an open) in every process it is linked into, VERSION and DEL included. Only its two
// handle formatters are referenced by the objects topocni links (tc.o and u32.o use them
// to print objects); defined here, before the archive on the link line, classid.o is never
// pulled in, and neither is its constructor. Same output as libnl for the names topocni
// never prints anyway: "root", "ingress", "none", "maj:min" in hex.
char* rtnl_tc_handle2str(uint32_t handle, char* buf, size_t len) {
    if (handle == 0xffffffffu) std::snprintf(buf, len, "root");
    else if (handle == 0xfffffff1u) std::snprintf(buf, len, "ingress");
    else if (handle == 0) std::snprintf(buf, len, "none");
    else if ((handle & 0xffffu) == 0) std::snprintf(buf, len, "%x:", handle >> 16);
    else std::snprintf(buf, len, "%x:%x", handle >> 16, handle & 0xffffu);
    return buf;
}

int rtnl_tc_str2handle(const char* name, uint32_t* res) {
    if (!std::strcmp(name, "root")) { *res = 0xffffffffu; return 0; }
    if (!std::strcmp(name, "ingress")) { *res = 0xfffffff1u; return 0; }
    if (!std::strcmp(name, "none")) { *res = 0; return 0; }
    unsigned maj = 0, min = 0;
    char colon = 0;
    int n = std::sscanf(name, "%x%c%x", &maj, &colon, &min);
    if (n < 2 || colon != ':' || maj > 0xffff || min > 0xffff) return -8;   // -NLE_INVAL
    *res = (maj << 16) | min;
    return 0;
}

// libnl registers its object types from constructors (qdisc, class, classifier, action,
// link caches, and the tbf, u32 and mirred modules), and unregisters them from
// destructors: each touches its own object's code and data, a dozen pages faulted in on
// every run, ~0.4 MiB of RSS, for the few runs that shape traffic. The (un)registration
// calls cross object files, so they are wrapped (CMakeLists.txt): at start-up they are
// only remembered, and netns/tc.cc replays them (topocni_nl_replay) before its first
// libnl call. Unregistering what was never registered is skipped.
int __real_rtnl_tc_type_register(void*);
int __real_rtnl_tc_register(void*);
int __real_nl_cache_mngt_register(void*);
void __real_rtnl_tc_type_unregister(void*);
void __real_rtnl_tc_unregister(void*);
int __real_nl_cache_mngt_unregister(void*);

namespace {
enum class NlReg { TcType, Tc, Cache };
struct { NlReg kind; void* ops; } nl_pending[64];
int nl_count = 0;
bool nl_replayed = false;

int remember(NlReg kind, void* ops) {
    // 8 today; a libnl that registers far more must not lose one silently.
    if (nl_count == 64) std::abort();
    nl_pending[nl_count++] = {kind, ops};
    return 0;
}
}  // namespace

int __wrap_rtnl_tc_type_register(void* ops) { return nl_replayed ? __real_rtnl_tc_type_register(ops) : remember(NlReg::TcType, ops); }
int __wrap_rtnl_tc_register(void* ops) { return nl_replayed ? __real_rtnl_tc_register(ops) : remember(NlReg::Tc, ops); }
int __wrap_nl_cache_mngt_register(void* ops) { return nl_replayed ? __real_nl_cache_mngt_register(ops) : remember(NlReg::Cache, ops); }
void __wrap_rtnl_tc_type_unregister(void* ops) { if (nl_replayed) __real_rtnl_tc_type_unregister(ops); }
void __wrap_rtnl_tc_unregister(void* ops) { if (nl_replayed) __real_rtnl_tc_unregister(ops); }
int __wrap_nl_cache_mngt_unregister(void* ops) { return nl_replayed ? __real_nl_cache_mngt_unregister(ops) : 0; }

void topocni_nl_replay() {
    if (nl_replayed) return;
    nl_replayed = true;
    for (int i = 0; i < nl_count; ++i) {
        switch (nl_pending[i].kind) {
            case NlReg::TcType: __real_rtnl_tc_type_register(nl_pending[i].ops); break;
            case NlReg::Tc: __real_rtnl_tc_register(nl_pending[i].ops); break;
            case NlReg::Cache: __real_nl_cache_mngt_register(nl_pending[i].ops); break;
        }
    }
}

// OpenSSL runs OPENSSL_cpuid_setup as a constructor of every program it is linked into:
// about ten CPUID instructions, each a VM exit (5 us here), 0.05 ms on every plugin run,
// VERSION and DEL included, while only a node-label lookup ever uses TLS. This definition
// comes before libcrypto.a on the link line, so the library's own is never linked; it
// does nothing until kube/https.cc sets topocni_tls_wanted, and OPENSSL_init_ssl then
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
