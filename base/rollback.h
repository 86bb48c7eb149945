// Undo stack: each step that acquires something registers how to release it, right
// away; the whole stack runs in reverse order unless the verb succeeds and dismisses it.
#pragma once
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "base/log.h"

namespace base {

class Rollback {
public:
    Rollback() = default;
    Rollback(const Rollback&) = delete;
    Rollback& operator=(const Rollback&) = delete;
    ~Rollback() { run(); }

    /// Registers an undo step. Undo bodies are best-effort: a failure is logged at warning
    /// level, naming `what`, and the rollback goes on, because a failed undo must not
    /// hide the error that triggered the rollback (nor keep the other steps from running).
    void add(std::string what, std::function<void()> undo) { steps_.push_back({std::move(what), std::move(undo)}); }
    /// Success: forget every undo step.
    void dismiss() noexcept { steps_.clear(); }
    /// Runs every undo step now, newest first.
    void run() noexcept {
        while (!steps_.empty()) {
            auto step = std::move(steps_.back());
            steps_.pop_back();
            try {
                step.undo();
            } catch (const std::exception& e) {
                log::warn("rollback: undoing " + step.what + " failed: " + e.what());
            } catch (...) {
                log::warn("rollback: undoing " + step.what + " failed");
            }
        }
    }

private:
    struct Step { std::string what; std::function<void()> undo; };
    std::vector<Step> steps_;
};

}  // namespace base
