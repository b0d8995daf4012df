//! The schema, as an append-only list of migrations.
//!
//! Entry `i` of [`MIGRATIONS`] is schema version `i + 1`. Each is applied once, in order, in its
//! own transaction, and recorded in `schema_migrations`. **Never edit or remove an entry** (a
//! database that already ran it would silently disagree with the code); change the schema by
//! appending a new one. The test `migrations_are_frozen` holds a hash of every entry and fails
//! if one changes.
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Result, StoreError};
use crate::model::now_ms;

pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: sandboxes, pools, API keys, audit log. All times are unix milliseconds.
    "CREATE TABLE sandboxes (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL
            CHECK (state IN ('cold', 'warming', 'warm', 'running', 'waiting', 'stopped')),
        pool TEXT,
        backend TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        metadata_json TEXT NOT NULL DEFAULT '{}',
        owner_key TEXT,
        created_at INTEGER NOT NULL,
        last_used_at INTEGER NOT NULL,
        expires_at INTEGER,
        stopped_at INTEGER,
        stop_reason TEXT
    );
    CREATE INDEX sandboxes_state_last_used ON sandboxes (state, last_used_at);
    CREATE INDEX sandboxes_pool_state ON sandboxes (pool, state);

    CREATE TABLE pools (
        name TEXT PRIMARY KEY,
        config_json TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );

    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        admin INTEGER NOT NULL DEFAULT 0,
        max_sandboxes INTEGER,
        rate_per_minute INTEGER,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    );

    CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        key_id TEXT,
        action TEXT NOT NULL,
        sandbox_id TEXT,
        detail_json TEXT NOT NULL DEFAULT '{}'
    );",
];

/// The schema version this build migrates to.
pub(crate) fn latest_version() -> i64 {
    version_of(MIGRATIONS.len())
}

fn version_of(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Applies the entries of `migrations` the database has not seen yet, each in its own
/// immediate transaction (so two processes opening the same file cannot both apply one).
/// Returns the versions applied now.
pub(crate) fn migrate(conn: &mut Connection, migrations: &[&str]) -> Result<Vec<i64>> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            applied_at INTEGER
        )",
    )?;
    let known = version_of(migrations.len());
    let found: i64 =
        conn.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |r| {
            r.get(0)
        })?;
    if found > known {
        return Err(StoreError::SchemaTooNew { found, known });
    }
    let mut applied = Vec::new();
    for (version, sql) in (1..).zip(migrations) {
        if version <= found {
            continue;
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let done = tx
            .query_row("SELECT 1 FROM schema_migrations WHERE version = ?1", [version], |_| Ok(()))
            .optional()?
            .is_some();
        if !done {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
                (version, now_ms()),
            )?;
            applied.push(version);
        }
        tx.commit()?;
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    /// SHA-256 of every migration, in order. When you append a migration, append its hash here
    /// (the failure message prints it). Never change an existing line.
    const FROZEN: &[&str] = &["ec3afb02d92f58990ba75858a6071eb498c1e3b76d7216e1c725dce90b84d39b"];

    fn sha256_hex(s: &str) -> String {
        Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn migrations_are_frozen() {
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            let got = sha256_hex(sql);
            match FROZEN.get(i) {
                Some(want) => assert_eq!(
                    &got,
                    want,
                    "migration {} changed: migrations are append-only, add a new one instead",
                    i + 1
                ),
                None => panic!(
                    "migration {} has no frozen hash: append \"{got}\" to FROZEN in schema.rs",
                    i + 1
                ),
            }
        }
        assert_eq!(FROZEN.len(), MIGRATIONS.len(), "a migration was removed");
    }

    fn applied_rows(conn: &Connection) -> Vec<(i64, i64)> {
        let mut st = conn
            .prepare("SELECT version, applied_at FROM schema_migrations ORDER BY version")
            .expect("prepare");
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    }

    #[test]
    fn applies_each_migration_once() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        let first = migrate(&mut conn, MIGRATIONS)?;
        assert_eq!(first, (1..=latest_version()).collect::<Vec<_>>());
        let before = applied_rows(&conn);
        assert!(migrate(&mut conn, MIGRATIONS)?.is_empty());
        assert_eq!(applied_rows(&conn), before);
        Ok(())
    }

    #[test]
    fn a_new_migration_applies_alone() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        migrate(&mut conn, MIGRATIONS)?;
        let mut next = MIGRATIONS.to_vec();
        next.push("CREATE TABLE extra (x INTEGER)");
        assert_eq!(migrate(&mut conn, &next)?, vec![latest_version() + 1]);
        assert!(migrate(&mut conn, &next)?.is_empty());
        conn.execute("INSERT INTO extra (x) VALUES (1)", [])?;
        Ok(())
    }

    #[test]
    fn a_failing_migration_leaves_nothing_behind() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        migrate(&mut conn, MIGRATIONS)?;
        let mut next = MIGRATIONS.to_vec();
        next.push("CREATE TABLE half (x INTEGER); THIS IS NOT SQL");
        assert!(migrate(&mut conn, &next).is_err());
        assert_eq!(applied_rows(&conn).len(), MIGRATIONS.len());
        let half: Option<String> = conn
            .query_row("SELECT name FROM sqlite_master WHERE name = 'half'", [], |r| r.get(0))
            .optional()?;
        assert_eq!(half, None);
        Ok(())
    }

    #[test]
    fn refuses_a_newer_database() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        let mut next = MIGRATIONS.to_vec();
        next.push("SELECT 1");
        migrate(&mut conn, &next)?;
        match migrate(&mut conn, MIGRATIONS) {
            Err(StoreError::SchemaTooNew { found, known }) => {
                assert_eq!((found, known), (latest_version() + 1, latest_version()));
            }
            other => panic!("expected SchemaTooNew, got {other:?}"),
        }
        Ok(())
    }
}
