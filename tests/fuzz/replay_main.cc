// Replays fuzz targets' seed corpora without libFuzzer, in the ordinary test build: every
// seed (the inputs that once crashed included) goes through its target on every
// `make test`, compiled by the compiler that builds the release. The fuzzing itself, with
// coverage feedback and sanitizers, runs in `make test-sanitize` (tests/fuzz/run.sh).
//
//   fuzz_replay TARGET DIR_OR_FILE...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_replay_table.h"  // generated: kTargets[] = {name, entry point}

namespace {

int run_one(int (*target)(const uint8_t*, size_t), const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "fuzz_replay: cannot read %s\n", file.c_str());
        return 1;
    }
    // A copy of exactly the input's size, as libFuzzer passes it, so that a read past
    // the end is not hidden by a terminating NUL.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    target(data.data(), data.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: fuzz_replay TARGET DIR_OR_FILE...\n");
        return 2;
    }
    int (*target)(const uint8_t*, size_t) = nullptr;
    for (const auto& t : kTargets)
        if (std::strcmp(t.name, argv[1]) == 0) target = t.entry;
    if (!target) {
        std::fprintf(stderr, "fuzz_replay: no target '%s'\n", argv[1]);
        return 2;
    }
    size_t count = 0;
    for (int i = 2; i < argc; ++i) {
        std::vector<std::filesystem::path> files;
        if (std::filesystem::is_directory(argv[i])) {
            for (const auto& e : std::filesystem::directory_iterator(argv[i]))
                if (e.is_regular_file()) files.push_back(e.path());
        } else {
            files.emplace_back(argv[i]);
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            if (run_one(target, f) != 0) return 1;
            ++count;
        }
    }
    if (count == 0) {
        std::fprintf(stderr, "fuzz_replay: %s: no inputs\n", argv[1]);
        return 1;
    }
    std::printf("fuzz_replay %s: %zu inputs, no crash\n", argv[1], count);
    return 0;
}
