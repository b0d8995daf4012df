//! Use-case tests for the sandbox table: the state machine, its guards under concurrency,
//! eviction, idleness, expiry, listing and the on-disk database.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Barrier;

use super::*;
use SandboxState::*;

fn store() -> Store {
    Store::open_in_memory().expect("in-memory store")
}

fn add(store: &Store, id: &str, state: SandboxState, last_used_at: i64) {
    let mut row = SandboxRow::new(id, state, "process", r#"{"image":"host"}"#, last_used_at);
    if state == Stopped {
        row.stopped_at = Some(last_used_at);
    }
    store.insert_sandbox(&row).expect("insert");
}

fn state_of(store: &Store, id: &str) -> SandboxState {
    store.get(id).expect("get").expect("row exists").state
}

#[test]
fn store_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
}

#[test]
fn insert_get_round_trip() -> Result<()> {
    let store = store();
    let mut row = SandboxRow::new("sb1", Warm, "container", r#"{"image":"host"}"#, 100);
    row.pool = Some("py".into());
    row.owner_key = Some("k1".into());
    row.metadata = BTreeMap::from([("team".into(), "infra".into()), ("ci".into(), "1".into())]);
    row.expires_at = Some(5000);
    store.insert_sandbox(&row)?;
    assert_eq!(store.get("sb1")?, Some(row.clone()));
    assert_eq!(store.get("nope")?, None);
    assert!(
        matches!(store.insert_sandbox(&row), Err(StoreError::Duplicate(m)) if m.contains("sb1"))
    );
    Ok(())
}

#[test]
fn corrupt_rows_are_reported_not_unwrapped() -> Result<()> {
    let store = store();
    add(&store, "sb1", Warm, 1);
    store.conn().execute("UPDATE sandboxes SET metadata_json = '[1,' WHERE id = 'sb1'", [])?;
    assert!(matches!(store.get("sb1"), Err(StoreError::Corrupt(m)) if m.contains("sb1")));
    assert!(matches!(store.list(&ListFilter::default()), Err(StoreError::Corrupt(_))));
    Ok(())
}

/// Every (from, to) pair against the real SQL: allowed exactly when the state machine says so.
#[test]
fn state_machine_matches_the_database() -> Result<()> {
    let store = store();
    for from in SandboxState::ALL {
        for to in SandboxState::ALL {
            let id = format!("{from}-to-{to}");
            add(&store, &id, from, 10);
            let result = store.set_state(&id, to, 20);
            let row = store.get(&id)?.expect("row");
            if SandboxState::can_transition(from, to) {
                assert!(result.is_ok(), "{from} -> {to} should be allowed: {result:?}");
                assert_eq!(row.state, to);
                if to == Stopped {
                    assert_eq!((row.stopped_at, row.last_used_at), (Some(20), 10));
                } else {
                    assert_eq!(row.last_used_at, 20);
                }
            } else {
                match result {
                    Err(StoreError::InvalidTransition { id: got, from: f, to: t }) => {
                        assert_eq!((got.as_str(), f, t), (id.as_str(), from, to));
                    }
                    other => panic!("{from} -> {to} should be refused, got {other:?}"),
                }
                assert_eq!(row.state, from, "a refused transition changes nothing");
                assert_eq!(row.last_used_at, 10);
            }
        }
    }
    Ok(())
}

#[test]
fn transitions_on_a_missing_row_are_not_found() {
    let store = store();
    for to in SandboxState::ALL {
        let result = store.set_state("ghost", to, 1);
        assert!(matches!(result, Err(StoreError::NotFound(id)) if id == "ghost"));
    }
    assert!(matches!(store.mark_running("ghost", 1), Err(StoreError::NotFound(_))));
    assert!(matches!(store.mark_waiting("ghost", 1), Err(StoreError::NotFound(_))));
    assert!(matches!(store.mark_stopped("ghost", "x", 1), Err(StoreError::NotFound(_))));
    assert!(matches!(store.touch("ghost", 1), Err(StoreError::NotFound(_))));
    assert!(matches!(store.set_expiry("ghost", Some(1)), Err(StoreError::NotFound(_))));
}

#[test]
fn the_invalid_transition_message_names_both_states() {
    let store = store();
    add(&store, "sb1", Cold, 1);
    let err = store.mark_running("sb1", 2).err().map(|e| e.to_string());
    assert_eq!(err.as_deref(), Some("sandbox sb1 cannot go from cold to running"));
}

#[test]
fn mark_running_and_waiting_follow_the_helpers_rules() -> Result<()> {
    let store = store();
    for from in SandboxState::ALL {
        add(&store, &format!("r-{from}"), from, 1);
        add(&store, &format!("w-{from}"), from, 1);
    }
    for from in SandboxState::ALL {
        let ok = store.mark_running(&format!("r-{from}"), 7).is_ok();
        assert_eq!(ok, matches!(from, Warm | Waiting), "mark_running from {from}");
        let ok = store.mark_waiting(&format!("w-{from}"), 7).is_ok();
        assert_eq!(ok, matches!(from, Running | Warming | Warm), "mark_waiting from {from}");
    }
    assert_eq!(store.get("r-waiting")?.map(|r| (r.state, r.last_used_at)), Some((Running, 7)));
    assert_eq!(store.get("w-running")?.map(|r| (r.state, r.last_used_at)), Some((Waiting, 7)));
    Ok(())
}

#[test]
fn mark_stopped_records_why_and_only_once() -> Result<()> {
    let store = store();
    add(&store, "sb1", Running, 1);
    store.mark_stopped("sb1", "client", 9)?;
    let row = store.get("sb1")?.expect("row");
    assert_eq!(
        (row.state, row.stopped_at, row.stop_reason.as_deref()),
        (Stopped, Some(9), Some("client"))
    );
    assert!(matches!(
        store.mark_stopped("sb1", "again", 10),
        Err(StoreError::InvalidTransition { from: Stopped, to: Stopped, .. })
    ));
    assert_eq!(store.get("sb1")?.and_then(|r| r.stop_reason), Some("client".into()));
    Ok(())
}

#[test]
fn touch_moves_last_used_of_live_rows_only() -> Result<()> {
    let store = store();
    add(&store, "live", Waiting, 1);
    add(&store, "dead", Stopped, 1);
    store.touch("live", 50)?;
    assert_eq!(store.get("live")?.map(|r| r.last_used_at), Some(50));
    assert!(matches!(store.touch("dead", 50), Err(StoreError::NotFound(_))));
    assert_eq!(store.get("dead")?.map(|r| r.last_used_at), Some(1));
    Ok(())
}

#[test]
fn delete_row_reports_whether_it_existed() -> Result<()> {
    let store = store();
    add(&store, "sb1", Stopped, 1);
    assert!(store.delete_row("sb1")?);
    assert!(!store.delete_row("sb1")?);
    assert_eq!(store.get("sb1")?, None);
    Ok(())
}

/// Many threads race to start the same warm sandbox: the guard lets exactly one through.
#[test]
fn concurrent_mark_running_has_one_winner() -> Result<()> {
    const THREADS: usize = 16;
    let store = store();
    add(&store, "sb1", Warm, 1);
    let barrier = Barrier::new(THREADS);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (store, barrier) = (&store, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    store.mark_running("sb1", 100 + i64::try_from(i).unwrap_or(0))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    for r in results.iter().filter(|r| r.is_err()) {
        assert!(
            matches!(r, Err(StoreError::InvalidTransition { from: Running, to: Running, .. })),
            "{r:?}"
        );
    }
    assert_eq!(state_of(&store, "sb1"), Running);
    Ok(())
}

/// Two handles on one file behave like two processes: only the SQL guard can keep them apart.
#[test]
fn concurrent_mark_running_across_connections_has_one_winner() -> Result<()> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let a = Store::open(&path)?;
    let b = Store::open(&path)?;
    for round in 0..50 {
        let id = format!("sb{round}");
        add(&a, &id, Warm, 1);
        let barrier = Barrier::new(4);
        let wins = std::thread::scope(|s| {
            let handles: Vec<_> = [&a, &b, &a, &b]
                .into_iter()
                .map(|store| {
                    let (id, barrier) = (&id, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        store.mark_running(id, 2).is_ok()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).filter(|w| *w).count()
        });
        assert_eq!(wins, 1, "round {round}");
    }
    Ok(())
}

#[test]
fn eviction_prefers_cold_then_warm_then_waiting_oldest_first() -> Result<()> {
    let store = store();
    // Oldest of all, but never evictable.
    add(&store, "running", Running, 0);
    add(&store, "warming", Warming, 0);
    add(&store, "stopped", Stopped, 0);
    add(&store, "waiting-old", Waiting, 1);
    add(&store, "waiting-new", Waiting, 2);
    add(&store, "warm-new", Warm, 20);
    add(&store, "warm-old", Warm, 10);
    add(&store, "cold-new", Cold, 300);
    add(&store, "cold-old", Cold, 200);

    let order = ["cold-old", "cold-new", "warm-old", "warm-new", "waiting-old", "waiting-new"];
    for (i, want) in order.into_iter().enumerate() {
        let expected = Some((want.to_owned(), state_of(&store, want)));
        assert_eq!(store.best_eviction_candidate()?, expected, "pick {i}");
        assert_eq!(store.evict_one(1000)?, expected, "evict {i}");
        let row = store.get(want)?.expect("row");
        assert_eq!(
            (row.state, row.stop_reason.as_deref(), row.stopped_at),
            (Stopped, Some("evicted"), Some(1000))
        );
    }
    assert_eq!(store.best_eviction_candidate()?, None);
    assert_eq!(store.evict_one(1001)?, None);
    assert_eq!(state_of(&store, "running"), Running);
    assert_eq!(state_of(&store, "warming"), Warming);
    Ok(())
}

/// The daemon's admission loop: at capacity, evict until there is room.
#[test]
fn evict_one_makes_room_at_capacity() -> Result<()> {
    const CAPACITY: usize = 4;
    let store = store();
    add(&store, "a", Running, 1);
    add(&store, "b", Waiting, 2);
    add(&store, "c", Warm, 3);
    add(&store, "d", Cold, 4);
    let mut evicted = Vec::new();
    while store.count_live()? >= CAPACITY {
        match store.evict_one(10)? {
            Some((id, _)) => evicted.push(id),
            None => break,
        }
    }
    assert_eq!(evicted, ["d"]);
    assert_eq!(store.count_live()?, CAPACITY - 1);
    add(&store, "e", Warming, 11);

    // Only busy sandboxes left: nothing can be evicted, so admission must refuse.
    store.mark_running("b", 12)?;
    store.mark_running("c", 12)?;
    assert_eq!(store.evict_one(13)?, None);
    assert_eq!(store.count_live()?, CAPACITY);
    Ok(())
}

#[test]
fn concurrent_evictions_never_pick_the_same_row() -> Result<()> {
    let store = store();
    for i in 0..40 {
        add(&store, &format!("c{i}"), Cold, i);
    }
    let picked: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let store = &store;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    while let Ok(Some((id, _))) = store.evict_one(99) {
                        mine.push(id);
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("thread")).collect()
    });
    let unique: BTreeSet<_> = picked.iter().collect();
    assert_eq!((picked.len(), unique.len()), (40, 40));
    assert_eq!(store.count_live()?, 0);
    Ok(())
}

#[test]
fn idle_list_and_sweep_respect_cutoff_state_and_limit() -> Result<()> {
    let store = store();
    for i in 0..10 {
        add(&store, &format!("idle{i}"), Waiting, 100 - i); // idle9 is the oldest
    }
    add(&store, "fresh", Waiting, 950);
    add(&store, "running-old", Running, 1);
    add(&store, "warm-old", Warm, 1);

    let cutoff = 1000 - 500;
    let listed = store.idle_list(cutoff)?;
    let expected: Vec<String> = (0..10).rev().map(|i| format!("idle{i}")).collect();
    assert_eq!(listed, expected);

    let swept = store.sweep_idle(1000, 500, 3)?;
    assert_eq!(swept, ["idle9", "idle8", "idle7"]);
    for id in &swept {
        let row = store.get(id)?.expect("row");
        assert_eq!(
            (row.state, row.stop_reason.as_deref(), row.stopped_at),
            (Stopped, Some("idle"), Some(1000))
        );
    }
    assert_eq!(store.idle_list(cutoff)?.len(), 7);
    assert!(store.sweep_idle(1000, 500, 0)?.is_empty());
    assert_eq!(store.sweep_idle(1000, 500, 100)?.len(), 7);
    assert!(store.sweep_idle(1000, 500, 100)?.is_empty());
    assert_eq!(state_of(&store, "fresh"), Waiting);
    assert_eq!(state_of(&store, "running-old"), Running);
    assert_eq!(state_of(&store, "warm-old"), Warm);
    Ok(())
}

#[test]
fn expired_lists_live_rows_due_soonest_first() -> Result<()> {
    let store = store();
    for (id, state, exp) in [
        ("late", Running, Some(300)),
        ("due", Waiting, Some(100)),
        ("exact", Warm, Some(200)),
        ("never", Waiting, None),
        ("gone", Stopped, Some(50)),
    ] {
        add(&store, id, state, 1);
        store.set_expiry(id, exp)?;
    }
    assert_eq!(store.expired(200)?, ["due", "exact"]);
    assert!(store.expired(99)?.is_empty());
    store.set_expiry("due", None)?;
    assert_eq!(store.expired(1000)?, ["exact", "late"]);
    Ok(())
}

#[test]
fn counts_and_stats() -> Result<()> {
    let store = store();
    let rows = [
        ("a", Warm, Some("py")),
        ("b", Warm, Some("py")),
        ("c", Running, Some("py")),
        ("d", Stopped, Some("py")),
        ("e", Waiting, Some("node")),
        ("f", Cold, None),
        ("g", Stopped, None),
    ];
    for (id, state, pool) in rows {
        let mut row = SandboxRow::new(id, state, "process", "{}", 1);
        row.pool = pool.map(str::to_owned);
        store.insert_sandbox(&row)?;
    }
    assert_eq!(store.count_live()?, 5);
    let by_state = store.count_by_state()?;
    assert_eq!(by_state.len(), 6, "every state is present");
    assert_eq!(
        by_state,
        BTreeMap::from([
            (Cold, 1),
            (Warming, 0),
            (Warm, 2),
            (Running, 1),
            (Waiting, 1),
            (Stopped, 2)
        ])
    );
    let stats = store.stats()?;
    assert_eq!(stats.total_live, 5);
    assert_eq!(stats.by_state, by_state);
    assert_eq!(
        stats.by_pool,
        BTreeMap::from([
            (
                "node".to_owned(),
                BTreeMap::from([(Cold, 0), (Warming, 0), (Warm, 0), (Running, 0), (Waiting, 1)])
            ),
            (
                "py".to_owned(),
                BTreeMap::from([(Cold, 0), (Warming, 0), (Warm, 2), (Running, 1), (Waiting, 0)])
            ),
        ])
    );
    assert_eq!(store.live_ids()?, ["a", "b", "c", "e", "f"]);
    Ok(())
}

#[test]
fn list_filters_combine() -> Result<()> {
    let store = store();
    let meta = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    let rows = [
        ("a", Warm, "py", "container", "k1", meta(&[("team", "infra"), ("env", "ci")])),
        ("b", Running, "py", "process", "k1", meta(&[("team", "infra")])),
        ("c", Waiting, "node", "container", "k2", meta(&[("team", "web"), ("env", "ci")])),
        ("d", Stopped, "py", "container", "k1", meta(&[("team", "infra")])),
        ("e", Waiting, "py", "container", "k1", meta(&[("team", "infra"), ("env", "ci")])),
    ];
    for (i, (id, state, pool, backend, owner, metadata)) in rows.into_iter().enumerate() {
        let mut row = SandboxRow::new(id, state, backend, "{}", i64::try_from(i).unwrap_or(0));
        row.pool = Some(pool.into());
        row.owner_key = Some(owner.into());
        row.metadata = metadata;
        store.insert_sandbox(&row)?;
    }
    let ids = |f: ListFilter| -> Vec<String> {
        store.list(&f).expect("list").into_iter().map(|r| r.id).collect()
    };
    assert_eq!(ids(ListFilter::default()), ["a", "b", "c", "e"]);
    assert_eq!(
        ids(ListFilter { include_stopped: true, ..Default::default() }),
        ["a", "b", "c", "d", "e"]
    );
    assert_eq!(ids(ListFilter { state: Some(Stopped), ..Default::default() }), ["d"]);
    assert_eq!(ids(ListFilter { state: Some(Waiting), ..Default::default() }), ["c", "e"]);
    assert_eq!(ids(ListFilter { pool: Some("py".into()), ..Default::default() }), ["a", "b", "e"]);
    assert_eq!(ids(ListFilter { backend: Some("process".into()), ..Default::default() }), ["b"]);
    assert_eq!(ids(ListFilter { owner_key: Some("k2".into()), ..Default::default() }), ["c"]);
    let ci_infra = meta(&[("team", "infra"), ("env", "ci")]);
    assert_eq!(ids(ListFilter { metadata: ci_infra.clone(), ..Default::default() }), ["a", "e"]);
    assert_eq!(
        ids(ListFilter { metadata: ci_infra.clone(), limit: Some(1), ..Default::default() }),
        ["a"],
        "the limit counts rows after the metadata match"
    );
    assert_eq!(
        ids(ListFilter {
            metadata: ci_infra,
            pool: Some("py".into()),
            state: Some(Waiting),
            owner_key: Some("k1".into()),
            backend: Some("container".into()),
            ..Default::default()
        }),
        ["e"]
    );
    assert_eq!(ids(ListFilter { limit: Some(2), ..Default::default() }), ["a", "b"]);
    assert!(ids(ListFilter { limit: Some(0), ..Default::default() }).is_empty());
    assert!(
        ids(ListFilter { metadata: meta(&[("team", "nope")]), ..Default::default() }).is_empty()
    );
    Ok(())
}

#[test]
fn take_warm_is_atomic_across_threads_and_connections() -> Result<()> {
    const WARM: usize = 60;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let stores = [Store::open(&path)?, Store::open(&path)?];
    for i in 0..WARM {
        let mut row =
            SandboxRow::new(format!("w{i}"), Warm, "process", "{}", i64::try_from(i).unwrap_or(0));
        row.pool = Some("py".into());
        stores[0].insert_sandbox(&row)?;
    }
    let barrier = Barrier::new(6);
    let taken: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|t| {
                let (store, barrier) = (&stores[t % 2], &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let mut mine = Vec::new();
                    while let Some(id) = store.take_warm("py", 1000).expect("take_warm") {
                        mine.push(id);
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("thread")).collect()
    });
    let unique: BTreeSet<_> = taken.iter().cloned().collect();
    assert_eq!(taken.len(), WARM, "every warm sandbox handed out once");
    assert_eq!(unique.len(), WARM);
    assert_eq!(stores[1].pool_members("py", Some(Waiting))?.len(), WARM);
    Ok(())
}

#[test]
fn open_configures_wal_and_pragmas() -> Result<()> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("state.db"))?;
    let conn = store.conn();
    let get = |pragma: &str| -> String {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get::<_, rusqlite::types::Value>(0))
            .map(|v| match v {
                rusqlite::types::Value::Text(s) => s,
                rusqlite::types::Value::Integer(i) => i.to_string(),
                other => format!("{other:?}"),
            })
            .expect("pragma")
    };
    assert_eq!(get("journal_mode"), "wal");
    assert_eq!(get("synchronous"), "1", "NORMAL");
    assert_eq!(get("foreign_keys"), "1");
    assert_eq!(get("busy_timeout"), "5000");
    Ok(())
}

#[test]
fn reopening_a_file_keeps_data_and_migrates_once() -> Result<()> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let migrations = |store: &Store| -> Vec<(i64, i64)> {
        let conn = store.conn();
        let mut st = conn
            .prepare("SELECT version, applied_at FROM schema_migrations ORDER BY version")
            .expect("prepare");
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    };
    let before = {
        let store = Store::open(&path)?;
        add(&store, "sb1", Warm, 1);
        store.upsert_pool("py", "{}", 1)?;
        assert_eq!(store.schema_version()?, Store::latest_schema_version());
        migrations(&store)
    };
    assert_eq!(before.len(), MIGRATIONS.len());
    std::thread::sleep(Duration::from_millis(5)); // a re-applied migration would get a new time
    let store = Store::open(&path)?;
    assert_eq!(migrations(&store), before);
    assert_eq!(state_of(&store, "sb1"), Warm);
    assert_eq!(store.get_pool("py")?.as_deref(), Some("{}"));
    Ok(())
}

#[test]
fn open_reports_the_path_it_could_not_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("missing-dir").join("state.db");
    match Store::open(&path) {
        Err(e @ StoreError::Open { .. }) => assert!(e.to_string().contains("missing-dir")),
        Err(other) => panic!("expected Open, got {other:?}"),
        Ok(_) => panic!("opened a file in a missing directory"),
    }
}

/// The hot-path statements seek through the indexes instead of walking the table (plans are
/// stable for the bundled SQLite that Cargo.lock pins).
#[test]
fn hot_queries_use_the_indexes() {
    let store = store();
    // A realistic population, so the planner's choice is the one the daemon gets.
    for i in 0..300 {
        let state = [Cold, Warm, Waiting, Running, Stopped][i % 5];
        let mut row = SandboxRow::new(format!("sb{i}"), state, "process", "{}", 1);
        row.pool = Some(format!("pool-{}", i % 4));
        store.insert_sandbox(&row).expect("insert");
    }
    let plan = |sql: &str| -> Vec<String> {
        let conn = store.conn();
        let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("prepare");
        // Planning does not look at the values, so NULLs stand in for the parameters.
        let nulls = std::iter::repeat_n(rusqlite::types::Null, st.parameter_count());
        let rows = st
            .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
            .expect("plan");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    };
    for (what, sql, sorts) in [
        ("count_live", COUNT_LIVE, false),
        ("count_by_state", COUNT_BY_STATE, false),
        ("stats by pool", POOL_COUNTS, false),
        // Sorting the (at most three) per-state picks is expected.
        ("best_eviction_candidate", EVICTION_CANDIDATE, true),
        ("evict_one", EVICT, false),
        ("idle_list", IDLE_LIST, false),
        ("sweep_idle", SWEEP_IDLE, false),
        ("take_warm", crate::pools::TAKE_WARM, false),
    ] {
        let steps = plan(sql);
        for step in steps.iter().filter(|s| s.contains("sandboxes")) {
            let seek = step.starts_with("SEARCH") && step.contains("INDEX");
            let index_only = step.starts_with("SCAN") && step.contains("COVERING INDEX");
            assert!(seek || index_only, "{what} walks the table: {steps:?}");
        }
        if !sorts {
            assert!(!steps.iter().any(|s| s.contains("TEMP B-TREE")), "{what} sorts: {steps:?}");
        }
    }
}
