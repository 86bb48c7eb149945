// `topocni explain --pod NS/NAME`: the last refusal of a pod on this node, from the record
// the refused ADD left (placement/refusal_record.h). Reads one file; changes nothing.
#include <ctime>
#include <iostream>
#include <optional>

#include "cni/cli/cli.h"
#include "cni/error.h"
#include "placement/refusal_record.h"
#include "kube/events.h"

namespace cni {

int explain_pod_main(const std::string& pod, const std::string& state_dir) {
    auto slash = pod.find('/');
    std::string ns = slash == std::string::npos ? "" : pod.substr(0, slash);
    std::string name = slash == std::string::npos ? "" : pod.substr(slash + 1);
    auto file = placement::refusal_record::file_name(ns, name);
    if (!file) {
        std::cerr << "topocni explain: --pod '" << pod << "': expected NAMESPACE/NAME\n";
        return 2;
    }
    std::optional<placement::refusal_record::Record> r;
    try {
        r = placement::refusal_record::read(state_dir, *file);
    } catch (const base::Error& e) {
        std::cerr << "topocni explain: '" << placement::refusal_record::dir(state_dir) << "/" << *file << "': " << e.what() << "\n";
        return 2;
    }
    if (!r) {
        std::cout << "pod " << pod << ": no placement refusal recorded on this node (" << placement::refusal_record::dir(state_dir)
                  << ")\n";
        return 0;
    }
    std::cout << "pod " << pod << (r->pod_uid.empty() ? "" : " (uid " + r->pod_uid + ")") << ": refused "
              << r->count << (r->count == 1 ? " time" : " times") << " on node '" << r->node << "', first "
              << kube::rfc3339(r->first) << ", last " << kube::rfc3339(r->last) << "\n";
    std::cout << "network '" << r->network << "': placement constraint not met:";
    for (size_t i = 0; i < r->constraints.size(); ++i) std::cout << (i ? ", " : " ") << r->constraints[i];
    std::cout << "\n";
    // The evidence of each constraint, as the refusal's details gave it ("a: ... | b: ...").
    std::string ev = r->evidence;
    for (size_t start = 0;;) {
        size_t bar = ev.find(" | ", start);
        std::cout << "FAIL  " << ev.substr(start, bar == std::string::npos ? std::string::npos : bar - start) << "\n";
        if (bar == std::string::npos) break;
        start = bar + 3;
    }
    if (r->evict)
        std::cout << "onRefusal: evict after " << r->after << " refusals within " << r->window_seconds << "s ("
                  << placement::refusal_record::refusals_within(*r, std::time(nullptr)) << " within the last "
                  << r->window_seconds << "s now)\n";
    else
        std::cout << "onRefusal: wait (the pod stays; set \"onRefusal\": \"evict\" in the network to move it)\n";
    return 1;
}

}  // namespace cni
