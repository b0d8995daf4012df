// The secure-exec peer for `hutch bench coldstart`: secure-exec's own cold/warm definition
// (cold = a new NodeRuntime + its first exec, warm = a second exec in the same runtime) for a
// batch of runtimes, sequential or with a bounded concurrency. Prints one JSON line per sample.
// With {"resident": N}: one runtime, N measured execs (the resident runner).
// Usage: node secure-exec-peer.mjs '{"batch":10,"concurrency":4,"warmup":1,"code":"export const x = 1;"}'
// The package is loaded from HUTCH_BENCH_NPM_PREFIX (scripts/bench-peers.sh installs it there).
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const prefix = process.env.HUTCH_BENCH_NPM_PREFIX || "/var/cache/hutch-bench/npm";
const se = await import(pathToFileURL(join(prefix, "node_modules/secure-exec/dist/index.js")).href);
const cfg = JSON.parse(process.argv[2] || "{}");
const batch = cfg.batch ?? 1;
const concurrency = Math.max(1, cfg.concurrency ?? 1);
const code = cfg.code ?? "export const x = 1;";
const warmup = cfg.warmup ?? 1;

async function one() {
  const t0 = performance.now();
  const rt = new se.NodeRuntime({
    systemDriver: se.createNodeDriver(),
    runtimeDriverFactory: se.createNodeRuntimeDriverFactory(),
  });
  try {
    const a = await rt.exec(code);
    const t1 = performance.now();
    const b = await rt.exec(code);
    const t2 = performance.now();
    if (a.code !== 0 || b.code !== 0) throw new Error(`exec exit codes ${a.code}, ${b.code}`);
    return { cold_ms: t1 - t0, warm_ms: t2 - t1 };
  } finally {
    rt.dispose();
  }
}

if (cfg.resident) {
  // the resident runner: one live runtime, exec after exec
  const rt = new se.NodeRuntime({
    systemDriver: se.createNodeDriver(),
    runtimeDriverFactory: se.createNodeRuntimeDriverFactory(),
  });
  try {
    for (let i = 0; i < 3 + cfg.resident; i++) {
      const t = performance.now();
      const r = await rt.exec(code);
      const ms = performance.now() - t;
      if (r.code !== 0) throw new Error(`exec exit code ${r.code}`);
      if (i >= 3) console.log(JSON.stringify({ warm_ms: ms }));
    }
  } catch (e) {
    console.log(JSON.stringify({ error: String(e?.message ?? e) }));
  } finally {
    rt.dispose();
  }
  process.exit(0);
}

for (let i = 0; i < warmup; i++) await one(); // unmeasured, as secure-exec's BENCH_WARMUP

let next = 0;
async function worker() {
  while (next < batch) {
    next++;
    try {
      console.log(JSON.stringify(await one()));
    } catch (e) {
      console.log(JSON.stringify({ error: String(e?.message ?? e) }));
    }
  }
}
await Promise.all(Array.from({ length: Math.min(concurrency, batch) }, worker));
// the runtimes leave handles open after dispose(): without this the process lingers ~60 s
process.exit(0);
