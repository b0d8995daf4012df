"""PNG plots of `hutch bench` results: python plots.py RESULTS_DIR. Prints the file names it wrote.

Reads the *-latest.json files the suites write; a suite without results is skipped. Runs in the
matplotlib venv scripts/bench-peers.sh makes (hutch bench all calls it).
"""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = pathlib.Path(sys.argv[1])
written = []
COLORS = {"hutch": "#1f77b4", "hutch-api": "#17becf", "hutch-lib": "#17becf", "docker": "#d62728",
          "podman": "#9467bd", "secure-exec": "#2ca02c"}


def load(suite):
    p = out / f"{suite}-latest.json"
    return json.loads(p.read_text()) if p.exists() else None


def save(fig, name):
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    written.append(name)


def cold_vs_warm():
    doc = load("runtimes")
    if not doc or not doc.get("results"):
        return
    rows = doc["results"]
    runtimes = list(dict.fromkeys(r["runtime"] for r in rows))
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    fig, axes = plt.subplots(1, len(runtimes), figsize=(4 * len(runtimes), 4), squeeze=False)
    for ax, rt in zip(axes[0], runtimes):
        xs, cold, warm = [], [], []
        for e in engines:
            r = next((r for r in rows if r["runtime"] == rt and r["engine"] == e), None)
            if r:
                xs.append(e)
                cold.append(r["cold"]["median"])
                warm.append(r["warm"]["median"])
        pos = range(len(xs))
        ax.bar([p - 0.2 for p in pos], cold, 0.4, label="cold (new sandbox)", color="#888")
        ax.bar([p + 0.2 for p in pos], warm, 0.4, label="warm (pool)", color="#1f77b4")
        ax.set_xticks(list(pos), xs)
        ax.set_yscale("log")
        ax.set_title(f"{rt}: hello world")
        ax.set_ylabel("p50 ms (log)")
    axes[0][0].legend()
    save(fig, "plot-cold-vs-warm.png")


def latency_vs_batch():
    doc = load("coldstart")
    if not doc or not doc.get("results"):
        return
    rows = doc["results"]
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for sc in dict.fromkeys(r["scenario"] for r in rows):
            pts = sorted((r["batchSize"], r["coldStart"]["median"]) for r in rows if r["scenario"] == sc and r["mode"] == mode)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{sc} cold", color=COLORS.get(sc))
            pts = sorted((r["batchSize"], r["warmStart"]["median"]) for r in rows if r["scenario"] == sc and r["mode"] == mode)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="x", linestyle="--", label=f"{sc} warm", color=COLORS.get(sc))
        ax.set_xscale("log")
        ax.set_yscale("log")
        sizes = sorted({r["batchSize"] for r in rows})
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.minorticks_off()
        ax.set_xlabel("batch size")
        ax.set_ylabel("p50 ms (log)")
        ax.set_title(f"cold start vs batch size ({mode})")
    axes[0][0].legend(fontsize=7)
    save(fig, "plot-latency-vs-batch.png")


def burst():
    doc = load("stress")
    if not doc or not doc.get("results"):
        return
    res = doc["results"]
    names = list(res)
    fig, ax = plt.subplots(figsize=(6, 4))
    walls = [res[n]["burst"]["wall_ms"] / 1000 for n in names]
    ax.bar(names, walls, color=[COLORS.get(n, "#888") for n in names])
    for i, n in enumerate(names):
        ax.text(i, walls[i], f'{res[n]["burst"]["ok"]}/{res[n]["burst"]["n"]} ok', ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("burst wall time, s")
    ax.set_title(f'{doc["config"]["burst"]} cold one-shot sandboxes at once')
    save(fig, "plot-burst.png")


def rss():
    doc = load("backends")
    if not doc or not doc.get("results"):
        return
    pts = [(n, r["rss_kib_per_sandbox"]) for n, r in doc["results"].items() if r.get("rss_kib_per_sandbox")]
    if not pts:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar([p[0] for p in pts], [p[1] / 1024 for p in pts], color=[COLORS.get(p[0].split(":")[0], "#888") for p in pts])
    ax.set_ylabel("host RSS per idle sandbox, MiB")
    ax.set_title("memory per live sandbox")
    save(fig, "plot-rss.png")


def throughput_vs_connections():
    # the gateway suite (the WebAssembly-vs-Docker study) writes gateway-latest.json with
    # rows [{variant, workload, connections, rps, rss_max_mib}]; one panel per workload, and the
    # gateway's RSS (its children included) against connections
    doc = load("gateway")
    rows = [dict(r, conns=r["connections"]) for r in (doc or {}).get("rows", []) if "connections" in r and "rps" in r]
    if not rows:
        return
    workloads = list(dict.fromkeys(r.get("workload", "?") for r in rows))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.5 * len(workloads), 4), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for v in dict.fromkeys(r.get("variant", "?") for r in rows):
            pts = sorted((r["conns"], r["rps"]) for r in rows if r.get("variant", "?") == v and r.get("workload", "?") == w)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=v)
        ax.set_xscale("log")
        ax.set_xlabel("connections")
        ax.set_ylabel("requests/s")
        ax.set_title(f"gateway: {w}")
    axes[0][0].legend(fontsize=7)
    save(fig, "plot-throughput-vs-connections.png")
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.5 * len(workloads), 4), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for v in dict.fromkeys(r.get("variant", "?") for r in rows):
            pts = sorted((r["conns"], r.get("rss_max_mib", 0)) for r in rows if r.get("variant") == v and r.get("workload") == w)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=v)
        ax.set_xscale("log")
        ax.set_xlabel("connections")
        ax.set_ylabel("gateway RSS (max), MiB")
        ax.set_title(f"gateway RSS: {w}")
    axes[0][0].legend(fontsize=7)
    save(fig, "plot-gateway-rss.png")


for f in (cold_vs_warm, latency_vs_batch, burst, rss, throughput_vs_connections):
    f()
print("\n".join(written))
