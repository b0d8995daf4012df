//! `hutch bench` as a user runs it: bad suites and knobs fail at once with a clear message,
//! before anything is started; a small real run writes JSON, CSV and Markdown (needs root and
//! crun, opted into with `--include-ignored` as scripts/test.sh does).
use std::process::{Command, Output};

fn bench(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hutch"));
    c.arg("bench").args(args).env_remove("BENCH_BATCH_SIZES").env_remove("BENCH_SCENARIOS");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run hutch")
}

fn fails_with(o: &Output, must_contain: &[&str]) {
    assert!(!o.status.success(), "should fail: {o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    for m in must_contain {
        assert!(err.contains(m), "{err:?} lacks {m:?}");
    }
}

#[test]
fn an_unknown_suite_is_refused() {
    let o = bench(&["gatewey"], &[]);
    fails_with(&o, &["gatewey"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn no_suite_without_smoke_names_the_suites() {
    fails_with(&bench(&[], &[]), &["name a suite", "coldstart", "runtimes", "stress", "--smoke"]);
}

#[test]
fn a_bad_batch_size_names_the_knob_and_the_value() {
    let o = bench(&["coldstart", "--scenarios", "hutch"], &[("BENCH_BATCH_SIZES", "1,ten")]);
    fails_with(&o, &["BENCH_BATCH_SIZES", "\"ten\"", "example"]);
    let o = bench(&["coldstart", "--batch-sizes", "0"], &[]);
    fails_with(&o, &["at least 1"]);
}

#[test]
fn an_unknown_scenario_lists_the_known_ones() {
    let o = bench(&["coldstart"], &[("BENCH_SCENARIOS", "hutch,lxc")]);
    fails_with(&o, &["BENCH_SCENARIOS", "\"lxc\"", "docker", "secure-exec"]);
    fails_with(&bench(&["stress", "--engines", "docker,firecracker"], &[]), &["\"firecracker\""]);
    fails_with(&bench(&["runtimes", "--runtimes", "cobol"], &[]), &["\"cobol\"", "python"]);
    fails_with(&bench(&["--iterations", "many", "cold"], &[]), &["many"]);
}

#[test]
#[ignore = "needs root and crun: scripts/test.sh runs it"]
fn a_small_coldstart_run_writes_json_csv_and_markdown() {
    let out = std::env::temp_dir().join(format!("hutch-bench-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = bench(
        &[
            "--out",
            out.to_str().unwrap(),
            "--iterations",
            "1",
            "coldstart",
            "--scenarios",
            "hutch",
            "--batch-sizes",
            "1,2",
            "--modes",
            "sequential,concurrent",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("coldstart-latest.json")).unwrap()).unwrap();
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "2 sizes x 2 modes: {doc}");
    for r in results {
        assert_eq!(r["scenario"], "hutch");
        assert_eq!(r["coldStart"]["n"], r["batchSize"]);
        assert_eq!(r["warmStart"]["n"], r["batchSize"]);
        assert!(r["phases"]["runtime_create"]["n"].as_u64().unwrap() > 0, "{r}");
    }
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(doc["machine"]["engines"].get("crun").is_some());
    let csv = std::fs::read_to_string(
        out.join("coldstart-cold-start-matrix-echo-hello-secure-exec-s-shape.csv"),
    )
    .unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv.lines().nth(1).unwrap().starts_with("hutch,1,sequential,1,"), "{csv}");
    let md = std::fs::read_to_string(out.join("coldstart.md")).unwrap();
    assert!(md.contains("| hutch | 2 | concurrent | 2 |"), "{md}");
    std::fs::remove_dir_all(&out).unwrap();
}
