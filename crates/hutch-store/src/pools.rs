//! Pools: named configurations of pre-warmed sandboxes. The store keeps each pool's config as
//! opaque JSON (the daemon owns its format) and finds a pool's members through
//! `sandboxes.pool`.
use rusqlite::{params, OptionalExtension};

use crate::error::Result;
use crate::model::SandboxState;
use crate::Store;

/// Moves pool `?1`'s least recently used warm member to waiting at `?2`: one statement, so no
/// two callers get the same row. The outer lookup is by primary key.
pub(crate) const TAKE_WARM: &str = "UPDATE sandboxes SET state = 'waiting', last_used_at = ?2
     WHERE state = 'warm' AND id = (
         SELECT id FROM sandboxes WHERE pool = ?1 AND state = 'warm'
         ORDER BY last_used_at LIMIT 1)
     RETURNING id";

impl Store {
    /// Creates pool `name` or replaces its config (keeping its `created_at`).
    pub fn upsert_pool(&self, name: &str, config_json: &str, now: i64) -> Result<()> {
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO pools (name, config_json, created_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET config_json = excluded.config_json",
        )?
        .execute(params![name, config_json, now])?;
        Ok(())
    }

    /// The config of pool `name`.
    pub fn get_pool(&self, name: &str) -> Result<Option<String>> {
        let conn = self.conn();
        let config = conn
            .prepare_cached("SELECT config_json FROM pools WHERE name = ?1")?
            .query_row([name], |r| r.get(0))
            .optional()?;
        Ok(config)
    }

    /// Every pool as `(name, config_json)`, by name.
    pub fn list_pools(&self) -> Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached("SELECT name, config_json FROM pools ORDER BY name")?;
        let pools =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
        Ok(pools)
    }

    /// Forgets pool `name`. Its sandboxes keep their rows (and their `pool` label); the caller
    /// drains them. Returns whether the pool existed.
    pub fn delete_pool(&self, name: &str) -> Result<bool> {
        let conn = self.conn();
        let n = conn.prepare_cached("DELETE FROM pools WHERE name = ?1")?.execute([name])?;
        Ok(n > 0)
    }

    /// Ids of pool `name`'s sandboxes in `state`, or of all its live ones when `state` is
    /// `None`, least recently used first.
    pub fn pool_members(&self, name: &str, state: Option<SandboxState>) -> Result<Vec<String>> {
        let conn = self.conn();
        let ids = match state {
            Some(state) => conn
                .prepare_cached(
                    "SELECT id FROM sandboxes WHERE pool = ?1 AND state = ?2 \
                     ORDER BY last_used_at, id",
                )?
                .query_map(params![name, state.as_str()], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?,
            None => conn
                .prepare_cached(
                    "SELECT id FROM sandboxes WHERE pool = ?1 \
                     AND state IN ('cold', 'warming', 'warm', 'running', 'waiting') \
                     ORDER BY last_used_at, id",
                )?
                .query_map([name], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?,
        };
        Ok(ids)
    }

    /// Hands out a pre-warmed sandbox: moves pool `pool`'s least recently used `Warm` member to
    /// `Waiting` (setting `last_used_at`) in one statement and returns its id, or `None` when
    /// the pool has no warm member. Concurrent callers never get the same sandbox. Ties in
    /// `last_used_at` go to the row inserted first.
    pub fn take_warm(&self, pool: &str, now: i64) -> Result<Option<String>> {
        let conn = self.conn();
        let id = conn
            .prepare_cached(TAKE_WARM)?
            .query_row(params![pool, now], |r| r.get(0))
            .optional()?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SandboxRow;

    fn member(store: &Store, id: &str, pool: &str, state: SandboxState, t: i64) {
        let mut row = SandboxRow::new(id, state, "process", "{}", t);
        row.pool = Some(pool.to_owned());
        store.insert_sandbox(&row).expect("insert");
    }

    #[test]
    fn pools_upsert_list_delete() -> Result<()> {
        let store = Store::open_in_memory()?;
        store.upsert_pool("py", r#"{"size":2}"#, 10)?;
        store.upsert_pool("node", r#"{"size":1}"#, 11)?;
        store.upsert_pool("py", r#"{"size":4}"#, 12)?;
        assert_eq!(store.get_pool("py")?.as_deref(), Some(r#"{"size":4}"#));
        assert_eq!(store.get_pool("go")?, None);
        let created: i64 =
            store
                .conn()
                .query_row("SELECT created_at FROM pools WHERE name = 'py'", [], |r| r.get(0))?;
        assert_eq!(created, 10, "an update keeps created_at");
        assert_eq!(
            store.list_pools()?,
            vec![
                ("node".to_owned(), r#"{"size":1}"#.to_owned()),
                ("py".to_owned(), r#"{"size":4}"#.to_owned())
            ]
        );
        assert!(store.delete_pool("node")?);
        assert!(!store.delete_pool("node")?);
        assert_eq!(store.list_pools()?.len(), 1);
        Ok(())
    }

    #[test]
    fn members_by_state() -> Result<()> {
        let store = Store::open_in_memory()?;
        member(&store, "w2", "py", SandboxState::Warm, 2);
        member(&store, "w1", "py", SandboxState::Warm, 1);
        member(&store, "r", "py", SandboxState::Running, 3);
        member(&store, "s", "py", SandboxState::Stopped, 4);
        member(&store, "other", "node", SandboxState::Warm, 0);
        assert_eq!(store.pool_members("py", Some(SandboxState::Warm))?, ["w1", "w2"]);
        assert_eq!(store.pool_members("py", None)?, ["w1", "w2", "r"]);
        assert_eq!(store.pool_members("py", Some(SandboxState::Stopped))?, ["s"]);
        assert!(store.pool_members("go", None)?.is_empty());
        Ok(())
    }

    #[test]
    fn take_warm_hands_out_the_oldest_and_marks_it_waiting() -> Result<()> {
        let store = Store::open_in_memory()?;
        member(&store, "new", "py", SandboxState::Warm, 20);
        member(&store, "old", "py", SandboxState::Warm, 10);
        member(&store, "busy", "py", SandboxState::Running, 1);
        member(&store, "elsewhere", "node", SandboxState::Warm, 1);
        assert_eq!(store.take_warm("py", 100)?.as_deref(), Some("old"));
        let old = store.get("old")?.expect("row");
        assert_eq!((old.state, old.last_used_at), (SandboxState::Waiting, 100));
        assert_eq!(store.take_warm("py", 101)?.as_deref(), Some("new"));
        assert_eq!(store.take_warm("py", 102)?, None);
        assert_eq!(store.take_warm("nope", 102)?, None);
        Ok(())
    }
}
