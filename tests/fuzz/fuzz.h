// Shared bits of the libFuzzer targets: every parser of outside input must either
// succeed or throw a topocni error (a base::Error, whatever the layer); anything else (a
// crash, a sanitizer report, another exception type escaping) is a bug.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

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
