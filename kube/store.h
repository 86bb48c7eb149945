// What a LIST+WATCH keeps (reflector.h feeds it): the objects of one resource by
// "namespace/name", each with its resourceVersion, a count of changes and synced() once
// the first LIST is in, as client-go's informer store. Thread-safe: the reflector's thread
// writes, any number of request threads read; an object handed out is shared, never
// copied, and stays valid after the store moves on.
//
// A consumer that derives something from an object (a NAD's parsed config) does it once
// per resourceVersion with derived<T>(): a relist that hands back an unchanged object keeps
// what was derived from it.
#pragma once
#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/reflector.h"

namespace kube {

class Store {
public:
    /// For reflect(): replace on a LIST, event on each change.
    ReflectorHandlers handlers();
    void replace(const std::vector<nlohmann::json>& items);
    void event(const Event& e);

    /// The first LIST is in.
    bool synced() const;
    /// Goes up on every change (a consumer compares it with what it saw last).
    uint64_t changes() const;

    std::shared_ptr<const nlohmann::json> get(const std::string& key) const;
    std::vector<std::shared_ptr<const nlohmann::json>> list() const;

    /// What `derive` makes of the object at `key`, made once per resourceVersion and kept
    /// with it; nullptr when the store has no such object. `derive` runs without the
    /// store's lock held (it may be slow), and two threads may both run it the first time.
    template <class T>
    std::shared_ptr<const T> derived(const std::string& key, const std::function<T(const nlohmann::json&)>& derive) const {
        auto [object, cached] = lookup(key);
        if (!object) return nullptr;
        if (cached.has_value())
            if (auto* p = std::any_cast<std::shared_ptr<const T>>(&cached)) return *p;
        auto made = std::make_shared<const T>(derive(*object));
        remember(key, object, std::any(made));
        return made;
    }

    /// "namespace/name" ("/name" when cluster-scoped): the key every store and cache uses.
    static std::string key_of(const nlohmann::json& object);

private:
    struct Entry {
        std::shared_ptr<const nlohmann::json> object;
        std::string version;
        std::any derived;
    };
    std::pair<std::shared_ptr<const nlohmann::json>, std::any> lookup(const std::string& key) const;
    void remember(const std::string& key, const std::shared_ptr<const nlohmann::json>& object, std::any derived) const;

    mutable std::mutex mu_;
    mutable std::map<std::string, Entry> objects_;
    bool synced_ = false;
    uint64_t changes_ = 0;
};

}  // namespace kube
