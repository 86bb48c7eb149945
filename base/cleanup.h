// Undo stack: each step that acquires something registers how to release it, right
// away; the whole stack runs in reverse order unless the verb succeeds and dismisses it.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace base {

class Rollback {
public:
    Rollback() = default;
    Rollback(const Rollback&) = delete;
    Rollback& operator=(const Rollback&) = delete;
    ~Rollback() { run(); }

    /// Registers an undo step. Undo bodies are best-effort: exceptions are swallowed,
    /// because a failed undo must not hide the error that triggered the rollback.
    void add(std::string what, std::function<void()> undo) { steps_.push_back({std::move(what), std::move(undo)}); }
    /// Success: forget every undo step.
    void dismiss() noexcept { steps_.clear(); }
    /// Runs every undo step now, newest first.
    void run() noexcept {
        while (!steps_.empty()) {
            auto step = std::move(steps_.back());
            steps_.pop_back();
            try { step.undo(); } catch (...) {}
        }
    }

private:
    struct Step { std::string what; std::function<void()> undo; };
    std::vector<Step> steps_;
};

}  // namespace base
