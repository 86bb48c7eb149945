// Shared bits of the libFuzzer targets: every parser of outside input must either
// succeed or throw a topocni error (a base::Error, whatever the layer); anything else (a
// crash, a sanitizer report, another exception type escaping) is a bug.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "cni/error.h"

#define TOPOCNI_FUZZ_TARGET(body)                                                   \
    extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {       \
        std::string input(reinterpret_cast<const char*>(data), size);              \
        try {                                                                       \
            body;                                                                   \
        } catch (const base::Error&) {                                              \
        }                                                                           \
        return 0;                                                                   \
    }

// A scratch file or directory a target writes its input into, removed when the process
// exits (the replay in `make test` must leave nothing in /tmp; libFuzzer exits the same way).
struct FuzzScratch {
    std::string path;
    ~FuzzScratch() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};
