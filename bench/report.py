"""The report: the targets of issue 7 evaluated over the figures, and latest.md with every
figure, its topocni/reference and topocni/floor ratios and a summary. Pure: reads only the
data it is given."""
import json


def ms(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def rx(r):
    return "–" if r is None else f"{r:.2f}x"


# ---------------------------------------------------------------- report

TARGETS = [
    ("ADD median ≤ 0.2x reference, every attachment", "add_vs_ref"),
    ("ADD median ≤ 1.5x floor (process start + kernel work)", "add_vs_floor"),
    ("dual-stack ADD median ≤ 1.2x IPv4 ADD median", "dual_vs_v4"),
    ("DEL median ≤ 1.1x kernel floor for removing the link", "del_vs_floor"),
    ("128 parallel ADDs: wall ≤ 0.25x reference, no failures, no duplicates", "burst"),
    ("ADD with 10,000 reservations ≤ 1.2x ADD with none", "scale"),
    ("peak RSS ≤ 0.5x reference", "rss"),
    ("placement validation adds ≤ 10% to ADD", "placement"),
]


def evaluate(d):
    """Each target: list of (subject, value, limit, ok)."""
    ev = {k: [] for _, k in TARGETS}
    lat = d["latency"]
    for name, L in lat.items():
        t_add, r_add = L["topocni"]["add"]["median"], L["ref"]["add"]["median"]
        if t_add is not None and r_add:
            ev["add_vs_ref"].append((name, t_add / r_add, 0.2))
        fl = L["floor"]["add_total_median"]
        if t_add is not None and fl:
            ev["add_vs_floor"].append((name, t_add / fl, 1.5))
        t_del, f_del = L["topocni"]["del"]["median"], L["floor"]["del"]["median"]
        if t_del is not None and f_del:
            ev["del_vs_floor"].append((name, t_del / f_del, 1.1))
        if name.endswith("-dual"):
            v4 = lat.get(name[:-5] + "-v4")
            if v4 and v4["topocni"]["add"]["median"] and t_add is not None:
                ev["dual_vs_v4"].append((name, t_add / v4["topocni"]["add"]["median"], 1.2))
    for name, B in d["bursts"].items():
        big = B.get(max(B)) if B else None
        if not big:
            continue
        t, r = big["topocni"], big["ref"]
        clean = t["add_fails"] == 0 and t["dups"] == 0 and t["store_mismatch"] == 0
        val = t["add_wall"] / r["add_wall"] if r["add_wall"] else None
        ev["burst"].append((f"{name} N={max(B)}", val, 0.25, clean))
    S = d["scale"].get("levels")
    if S:
        lo, hi = min(S), max(S)
        base = S[lo]["topocni"]["add"]["median"]
        if base:
            ev["scale"].append((f"topocni {hi} vs {lo}", S[hi]["topocni"]["add"]["median"] / base, 1.2))
    for name, R in d["rss"].items():
        t = max(R["topocni"]["add_kib"], R["topocni"]["del_kib"])
        r = max(R["ref"]["add_kib"], R["ref"]["del_kib"])
        if r:
            ev["rss"].append((name, t / r, 0.5))
    P = d["placement"]
    if P and P["plain"]["add"]["median"]:
        ev["placement"].append(("macvlan-v4", P["placement"]["add"]["median"] / P["plain"]["add"]["median"], 1.10))
    out = {}
    for k, rows in ev.items():
        res = []
        for row in rows:
            subject, val, limit = row[:3]
            clean = row[3] if len(row) > 3 else True
            res.append({"subject": subject, "value": val, "limit": limit, "ok": val is not None and val <= limit and clean,
                        "clean": clean})
        out[k] = res
    return out


def report(d, ev, meta):
    L = []
    w = L.append
    w("# topocni vs the reference CNI plugins")
    w("")
    w(f"Run {meta['when']} on {meta['host']} ({meta['cpus']} CPUs, kernel {meta['kernel']}), "
      f"{'quick mode, ' if meta['quick'] else ''}{meta['duration_s']:.0f} s. topocni `{meta['topocni']}`; reference "
      f"plugins Debian containernetworking-plugins {meta['ref_version']} from `{meta['ref_dir']}`; cniVersion 1.0.0 for both; "
      f"host-local IPAM on a /16 (and a /64 for dual stack). Times in ms; latency is per plugin process, spawned "
      f"inside a node netns and timed from spawn to reaped; rounds of topocni, reference and floor interleaved, each in "
      f"fresh namespaces. Ratios are from this run only: absolute times move with the machine's load "
      f"(1-min load average seen: {meta['load']}).")
    w("")
    w("## Targets")
    w("")
    w("| target | result | worst | met |")
    w("|---|---|---:|---|")
    for title, key in TARGETS:
        rows = ev.get(key, [])
        if not rows:
            w(f"| {title} | not measured | | |")
            continue
        worst = max(rows, key=lambda r: (r["value"] or 0) / r["limit"])
        detail = ", ".join(f"{r['subject']} {rx(r['value'])}" + ("" if r["clean"] else " (failures/duplicates)")
                           for r in rows)
        ok = all(r["ok"] for r in rows)
        w(f"| {title} | {detail} | {rx(worst['value'])} | {'yes' if ok else '**no**'} |")
    w("")
    w("## ADD and DEL latency")
    w("")
    w("floor ADD = exec of /bin/true + bench_floor's kernel work for the same attachment; floor DEL = bench_floor "
      "removing the same link (kernel only).")
    w("")
    w("| config | op | topocni median / p90 / p99 (n) | reference median / p90 / p99 (n) | floor median | "
      "topocni/ref | topocni/floor |")
    w("|---|---|---|---|---:|---:|---:|")
    for name, X in d["latency"].items():
        for op in ("add", "del"):
            t, r = X["topocni"][op], X["ref"][op]
            fl = X["floor"]["add_total_median"] if op == "add" else X["floor"]["del"]["median"]
            w(f"| {name} ({X['ref']['plugin']}) | {op.upper()} | {ms(t['median'])} / {ms(t['p90'])} / {ms(t['p99'])} "
              f"({t['n']}) | {ms(r['median'])} / {ms(r['p90'])} / {ms(r['p99'])} ({r['n']}) | {ms(fl)} | "
              f"{rx(ratio(t['median'], r['median']))} | {rx(ratio(t['median'], fl))} |")
    w("")
    w("### Floor")
    w("")
    w("| config | exec /bin/true | kernel ADD (bench_floor) | kernel DEL (bench_floor) | topocni VERSION | "
      "reference VERSION |")
    w("|---|---:|---:|---:|---:|---:|")
    for name, X in d["latency"].items():
        F = X["floor"]
        w(f"| {name} | {ms(F['true']['median'])} | {ms(F['add']['median'])} | {ms(F['del']['median'])} | "
          f"{ms(F['version_topocni']['median'])} | {ms(F['version_ref']['median'])} |")
    w("")
    w("### CPU time per operation")
    w("")
    w("User + system time of the plugin process (and, for the reference, of the host-local it runs), from wait4: "
      "steadier than wall time when the machine is shared.")
    w("")
    w("| config | topocni ADD / DEL | reference ADD / DEL | topocni/ref ADD | /bin/true | topocni VERSION |")
    w("|---|---:|---:|---:|---:|---:|")
    for name, X in d["latency"].items():
        t, r, F = X["topocni"], X["ref"], X["floor"]
        w(f"| {name} | {ms(t['add_cpu']['median'])} / {ms(t['del_cpu']['median'])} | {ms(r['add_cpu']['median'])} / "
          f"{ms(r['del_cpu']['median'])} | {rx(ratio(t['add_cpu']['median'], r['add_cpu']['median']))} | "
          f"{ms(F['true_cpu']['median'])} | {ms(F['version_topocni_cpu']['median'])} |")
    w("")
    w("## Bursts of parallel ADDs, then DELs")
    w("")
    w("Wall = first spawn to last reaped, median over repeats. Duplicates = an address in two results; mismatches = "
      "results vs store files; left = reservations, node links or pod links after the DELs.")
    w("")
    w("| config | N | plugin | ADD wall | ADD op median / p99 | DEL wall | fails ADD/DEL | IPs per repeat | dups | "
      "mismatches | left | topocni/ref ADD wall |")
    w("|---|---:|---|---:|---|---:|---|---|---:|---:|---:|---:|")
    for name, B in d["bursts"].items():
        for n, agg in B.items():
            for who in ("topocni", "ref"):
                a = agg[who]
                rr = rx(ratio(agg["topocni"]["add_wall"], agg["ref"]["add_wall"])) if who == "topocni" else ""
                w(f"| {name} | {n} | {who} | {ms(a['add_wall'], 0)} | {ms(a['add_op_median'], 1)} / "
                  f"{ms(a['add_op_p99'], 1)} | {ms(a['del_wall'], 0)} | {a['add_fails']}/{a['del_fails']} | "
                  f"{'/'.join(map(str, a['ips']))} | {a['dups']} | {a['store_mismatch']} | "
                  f"{a['store_left'] + a['links_left']} | {rr} |")
    w("")
    S = d["scale"]
    if S:
        w(f"## IPAM scale ({S['config']})")
        w("")
        w("The store is filled with N reservation files in host-local's format (`<id>\\r\\n<ifname>`) for the first N "
          "addresses of the range, with `last_reserved_ip.0` at the last one, as a plugin leaves it after N ADDs.")
        w("")
        w("| reservations | topocni ADD median / p90 (n) | reference ADD median / p90 (n) | topocni/ref | "
          "topocni vs 0 | reference vs 0 |")
        w("|---:|---|---|---:|---:|---:|")
        levels = S["levels"]
        base = levels[min(levels)]
        for lvl, X in levels.items():
            t, r = X["topocni"]["add"], X["ref"]["add"]
            w(f"| {lvl} | {ms(t['median'])} / {ms(t['p90'])} ({t['n']}) | {ms(r['median'])} / {ms(r['p90'])} ({r['n']}) | "
              f"{rx(ratio(t['median'], r['median']))} | {rx(ratio(t['median'], base['topocni']['add']['median']))} | "
              f"{rx(ratio(r['median'], base['ref']['add']['median']))} |")
        w("")
    P = d["placement"]
    if P:
        w("## Placement validation (topocni macvlan, IPv4)")
        w("")
        w(f"Constraints: `{json.dumps(P['constraints'])}`, labels from a file, a fake sysfs for the master and "
          f"cpu_manager_state for the pod.")
        w("")
        w("| ADD | median / p90 / p99 (n) | vs without |")
        w("|---|---|---:|")
        for who in ("plain", "placement"):
            a = P[who]["add"]
            w(f"| {'without constraints' if who == 'plain' else 'with nodeSelector + topology'} | {ms(a['median'])} / "
              f"{ms(a['p90'])} / {ms(a['p99'])} ({a['n']}) | "
              f"{rx(ratio(a['median'], P['plain']['add']['median']))} |")
        w("")
        R = P.get("refused")
        if R:
            w("A refused ADD (code 100, `nodeSelector`), the same pod refused again and again as kubelet retries it: "
              "without and with the pod's refusal record (`<stateDir>/refused/<ns>_<name>.json`, written when "
              "`CNI_ARGS` names the pod), interleaved.")
            w("")
            w("| refused ADD | median / p90 / p99 (n) | vs without record |")
            w("|---|---|---:|")
            for who in ("without record", "with record"):
                a = R[who]
                w(f"| {who} | {ms(a['median'])} / {ms(a['p90'])} / {ms(a['p99'])} ({a['n']}) | "
                  f"{rx(ratio(a['median'], R['without record']['median']))} |")
            w("")
    w("## Peak RSS and size")
    w("")
    w("Peak RSS: `/usr/bin/time -v`, max over samples; for the reference it covers the plugin and the host-local it "
      "runs. Binary sizes are the files on disk (the Go binaries link libc; topocni is static).")
    w("")
    w("| config | topocni ADD / DEL | reference ADD / DEL | topocni/ref |")
    w("|---|---|---|---:|")
    for name, R in d["rss"].items():
        t, r = R["topocni"], R["ref"]
        w(f"| {name} | {t['add_kib'] / 1024:.1f} / {t['del_kib'] / 1024:.1f} MiB | {r['add_kib'] / 1024:.1f} / "
          f"{r['del_kib'] / 1024:.1f} MiB | {rx(ratio(max(t.values()), max(r.values())))} |")
    Z = d["sizes"]
    if Z:
        w("")
        w(f"Sizes: topocni {Z['topocni']['bytes'] / 2**20:.2f} MiB ({Z['topocni']['shared_libs']} shared libraries); "
          + ", ".join(f"{k} {v['bytes'] / 2**20:.2f} MiB" for k, v in Z.items() if k != "topocni")
          + " (each reference attachment also runs host-local).")
    if d["notes"]:
        w("")
        w("## Notes")
        w("")
        for n in d["notes"]:
            w(f"- {n}")
    w("")
    w("## Summary")
    w("")
    w(summary_text(d, ev))
    w("")
    return "\n".join(L)


def summary_text(d, ev):
    lat = d["latency"]
    parts = []
    v = lat.get("veth-v4")
    if v and v["topocni"]["add"]["median"] and v["ref"]["add"]["median"]:
        t, r = v["topocni"]["add"]["median"], v["ref"]["add"]["median"]
        parts.append(f"On a 2-core VM, a topocni veth ADD takes {t:.1f} ms against {r:.1f} ms for the reference "
                     f"ptp + host-local ({t / r:.2f}x), {t / v['floor']['add_total_median']:.2f}x the floor of starting "
                     f"a process and doing the same kernel work in C.")
    vd = lat.get("veth-dual")
    if vd and vd["topocni"]["add"]["median"] and vd["ref"]["add"]["median"]:
        parts.append(f"Dual stack costs topocni {vd['topocni']['add']['median']:.1f} ms, while ptp waits "
                     f"{vd['ref']['add']['median'] / 1000:.1f} s for IPv6 duplicate-address detection.")
    if v and v["topocni"]["del"]["median"]:
        parts.append(f"DEL ({v['topocni']['del']['median']:.1f} ms) is dominated by the kernel removing the veth "
                     f"({v['floor']['del']['median']:.1f} ms from C).")
    b = d["bursts"].get("veth-v4", {})
    if b:
        n = max(b)
        parts.append(f"{n} parallel ADDs finish in {b[n]['topocni']['add_wall']:.0f} ms against "
                     f"{b[n]['ref']['add_wall']:.0f} ms, with no failures or duplicate addresses.")
    rs = d["rss"].get("veth-v4")
    if rs:
        parts.append(f"Peak RSS is {max(rs['topocni'].values()) / 1024:.1f} MiB against "
                     f"{max(rs['ref'].values()) / 1024:.1f} MiB.")
    missed = [title for title, key in TARGETS if ev.get(key) and not all(r["ok"] for r in ev[key])]
    parts.append("All targets of issue 7 were met in this run." if not missed else
                 "Missed in this run: " + "; ".join(missed) + " (see bench/results/latest.md).")
    return " ".join(parts)
