//! [`Store`]: the connection, opening and migrating, and the sandbox table.
//!
//! Every state change is a single `UPDATE ... WHERE id = ? AND state IN (...)`: the guard in the
//! statement is the check, so two callers (threads, or two processes on the same file) racing
//! on one row cannot both win. When nothing changed, the row is read to say why.
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::types::ToSql;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use crate::error::{is_duplicate, Result, StoreError};
use crate::model::{ListFilter, SandboxRow, SandboxState, Stats};
use crate::schema::{latest_version, migrate, MIGRATIONS};

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);
/// Prepared statements kept per connection (the store has fewer distinct statements).
const STATEMENT_CACHE: usize = 64;

/// The SQL list of live states, for `state IN` (uses the `(state, last_used_at)` index, unlike
/// `state <> 'stopped'`, which would also walk every stopped row kept for history).
macro_rules! live_states {
    () => {
        "('cold', 'warming', 'warm', 'running', 'waiting')"
    };
}

/// The columns of [`SandboxRow`], in the order [`RawSandbox::read`] expects.
macro_rules! sandbox_columns {
    () => {
        "id, state, pool, backend, spec_json, metadata_json, owner_key, created_at, \
         last_used_at, expires_at, stopped_at, stop_reason"
    };
}

// The hot-path statements, named so `hot_queries_use_the_indexes` can check their plans.

/// Live rows: an index-only walk of the five live ranges of `(state, last_used_at)`.
const COUNT_LIVE: &str = concat!("SELECT COUNT(*) FROM sandboxes WHERE state IN ", live_states!());

/// Rows per state: an index-only walk of `(state, last_used_at)`, already grouped.
const COUNT_BY_STATE: &str = "SELECT state, COUNT(*) FROM sandboxes GROUP BY state";

/// Live rows per pool and state. `<> 'stopped'` rather than `IN (live)`: this way SQLite walks
/// the covering `(pool, state)` index in GROUP BY order instead of seeking by state and
/// sorting (5x faster at a thousand rows).
const POOL_COUNTS: &str = "SELECT pool, state, COUNT(*) FROM sandboxes \
     WHERE pool IS NOT NULL AND state <> 'stopped' GROUP BY pool, state";

/// The least recently used row of each evictable state (each one index seek on
/// `(state, last_used_at)`), then the best of those three by state priority.
const EVICTION_CANDIDATE: &str = "SELECT id, state FROM (
        SELECT * FROM (SELECT id, state, last_used_at FROM sandboxes
                       WHERE state = 'cold' ORDER BY last_used_at LIMIT 1)
        UNION ALL
        SELECT * FROM (SELECT id, state, last_used_at FROM sandboxes
                       WHERE state = 'warm' ORDER BY last_used_at LIMIT 1)
        UNION ALL
        SELECT * FROM (SELECT id, state, last_used_at FROM sandboxes
                       WHERE state = 'waiting' AND last_used_at < ?1 ORDER BY last_used_at LIMIT 1)
    )
    ORDER BY CASE state WHEN 'cold' THEN 0 WHEN 'warm' THEN 1 ELSE 2 END, last_used_at
    LIMIT 1";

/// Stops the candidate `?1`, if still in state `?2`, at `?3`.
const EVICT: &str = "UPDATE sandboxes \
     SET state = 'stopped', stopped_at = ?3, stop_reason = 'evicted' \
     WHERE id = ?1 AND state = ?2";

/// Waiting rows last used before `?1`, in index order (no sort).
const IDLE_LIST: &str = "SELECT id FROM sandboxes \
     WHERE state = 'waiting' AND last_used_at < ?1 ORDER BY last_used_at";

/// Stops up to `?2` waiting rows last used before `?1`, at `?3`. One statement, so atomic. The
/// outer `+state` guard repeats the subquery's, as every transition does; the `+` keeps SQLite
/// from choosing the state index for it over the primary key.
const SWEEP_IDLE: &str = "UPDATE sandboxes \
     SET state = 'stopped', stopped_at = ?3, stop_reason = 'idle' \
     WHERE +state = 'waiting' AND id IN (
         SELECT id FROM sandboxes WHERE state = 'waiting' AND last_used_at < ?1
         ORDER BY last_used_at LIMIT ?2)
     RETURNING id, last_used_at";

/// hutch's state store: one SQLite connection behind a mutex.
///
/// Every method takes `&self`, is synchronous and takes microseconds, so async callers may call
/// it directly (the lock is never held across an `.await`, since nothing here awaits). Share it
/// with an `Arc<Store>`.
pub struct Store {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path`, switches it to WAL with
    /// `synchronous=NORMAL`, turns on foreign keys and a 5 s busy timeout, and applies the
    /// migrations it has not seen.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let open_err = |source| StoreError::Open { path: path.to_owned(), source };
        let mut conn = Connection::open(path).map_err(open_err)?;
        // The busy timeout first, so switching to WAL waits for another process's lock.
        configure(&conn).map_err(open_err)?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .map_err(open_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::NotWal { path: path.to_owned(), mode });
        }
        migrate(&mut conn, MIGRATIONS).map_err(|e| match e {
            StoreError::Sqlite(source) => open_err(source),
            other => other,
        })?;
        Ok(Store { conn: Mutex::new(conn) })
    }

    /// [`open`](Store::open) for a single owner (the daemon): the file is locked exclusively
    /// for as long as the store is open, so SQLite skips its per-transaction shared-memory
    /// locking (state changes are cheaper) and nothing else can write the state behind the
    /// daemon's back. Other processes get "database is locked" until the daemon exits.
    pub fn open_exclusive(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let store = Store::open(path)?;
        {
            let conn = store.conn();
            let open_err = |source| StoreError::Open { path: path.to_owned(), source };
            let _: String = conn
                .pragma_update_and_check(None, "locking_mode", "EXCLUSIVE", |r| r.get(0))
                .map_err(open_err)?;
            // take the lock now, not at the first write
            conn.execute_batch("BEGIN IMMEDIATE; COMMIT;").map_err(open_err)?;
        }
        Ok(store)
    }

    /// A private in-memory database with the full schema, for tests.
    pub fn open_in_memory() -> Result<Store> {
        let mut conn = Connection::open_in_memory()?;
        configure(&conn)?;
        migrate(&mut conn, MIGRATIONS)?;
        Ok(Store { conn: Mutex::new(conn) })
    }

    /// The schema version of the database (the number of migrations applied).
    pub fn schema_version(&self) -> Result<i64> {
        let conn = self.conn();
        let v = conn
            .prepare_cached("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")?
            .query_row([], |r| r.get(0))?;
        Ok(v)
    }

    /// The schema version this build of hutch writes.
    pub fn latest_schema_version() -> i64 {
        latest_version()
    }

    /// The connection. A panic while it was held cannot have left a transaction half done
    /// (dropping a `Transaction` rolls it back), so a poisoned lock is safe to take over.
    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // ---- sandboxes: rows ------------------------------------------------------------------

    /// Records a new sandbox. [`StoreError::Duplicate`] if the id exists.
    pub fn insert_sandbox(&self, row: &SandboxRow) -> Result<()> {
        let metadata = serde_json::to_string(&row.metadata)
            .map_err(|e| StoreError::Corrupt(format!("sandbox {}: metadata: {e}", row.id)))?;
        let conn = self.conn();
        let mut st = conn.prepare_cached(concat!(
            "INSERT INTO sandboxes (",
            sandbox_columns!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        ))?;
        st.execute(params![
            row.id,
            row.state.as_str(),
            row.pool,
            row.backend,
            row.spec_json,
            metadata,
            row.owner_key,
            row.created_at,
            row.last_used_at,
            row.expires_at,
            row.stopped_at,
            row.stop_reason,
        ])
        .map_err(|e| {
            if is_duplicate(&e) {
                StoreError::Duplicate(format!("sandbox {}", row.id))
            } else {
                e.into()
            }
        })?;
        Ok(())
    }

    /// The sandbox `id`, stopped or not.
    pub fn get(&self, id: &str) -> Result<Option<SandboxRow>> {
        let conn = self.conn();
        let raw = conn
            .prepare_cached(concat!(
                "SELECT ",
                sandbox_columns!(),
                " FROM sandboxes WHERE id = ?1"
            ))?
            .query_row([id], RawSandbox::read)
            .optional()?;
        raw.map(RawSandbox::into_row).transpose()
    }

    /// The sandboxes matching `filter`, oldest `created_at` first. The metadata match is done
    /// here after the SQL filter, so `limit` counts rows that match it too.
    pub fn list(&self, filter: &ListFilter) -> Result<Vec<SandboxRow>> {
        // Bound values must outlive `args`, so they are declared first.
        let state_name;
        let sql_limit;
        let mut sql = String::from(concat!("SELECT ", sandbox_columns!(), " FROM sandboxes"));
        let mut args: Vec<&dyn ToSql> = Vec::new();
        let mut clauses: Vec<String> = Vec::new();
        match filter.state {
            Some(s) => {
                state_name = s.as_str();
                args.push(&state_name);
                clauses.push(format!("state = ?{}", args.len()));
            }
            None if !filter.include_stopped => {
                clauses.push(concat!("state IN ", live_states!()).to_owned());
            }
            None => {}
        }
        for (column, value) in
            [("pool", &filter.pool), ("backend", &filter.backend), ("owner_key", &filter.owner_key)]
        {
            if let Some(v) = value {
                args.push(v);
                clauses.push(format!("{column} = ?{}", args.len()));
            }
        }
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY created_at, id");
        if let (Some(limit), true) = (filter.limit, filter.metadata.is_empty()) {
            sql_limit = i64::try_from(limit).unwrap_or(i64::MAX);
            args.push(&sql_limit);
            sql.push_str(&format!(" LIMIT ?{}", args.len()));
        }

        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let conn = self.conn();
        let mut st = conn.prepare_cached(&sql)?;
        let mut rows = st.query(&*args)?;
        while let Some(r) = rows.next()? {
            let row = RawSandbox::read(r)?.into_row()?;
            if filter.metadata.iter().all(|(k, v)| row.metadata.get(k) == Some(v)) {
                out.push(row);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Removes the row for good, whatever its state: normally after it stopped and its
    /// resources are gone, or when reconciling with what the host really holds. Returns
    /// whether there was one.
    pub fn delete_row(&self, id: &str) -> Result<bool> {
        let conn = self.conn();
        let n = conn.prepare_cached("DELETE FROM sandboxes WHERE id = ?1")?.execute([id])?;
        Ok(n > 0)
    }

    // ---- sandboxes: the state machine -------------------------------------------------------

    /// Moves `id` to `to` if the state machine allows it from its current state
    /// ([`SandboxState::allowed_from`]). Entering a live state sets `last_used_at` to `now`;
    /// entering `Stopped` sets `stopped_at` to `now` and leaves `stop_reason` empty (use
    /// [`mark_stopped`](Store::mark_stopped) to give one).
    pub fn set_state(&self, id: &str, to: SandboxState, now: i64) -> Result<()> {
        transition(&self.conn(), id, to, now, None)
    }

    /// A client's command starts: from `Warm` or `Waiting` to `Running`.
    pub fn mark_running(&self, id: &str, now: i64) -> Result<()> {
        transition(&self.conn(), id, SandboxState::Running, now, None)
    }

    /// The sandbox is handed out or its command ended: from `Running`, `Warming` or `Warm` to
    /// `Waiting`.
    pub fn mark_waiting(&self, id: &str, now: i64) -> Result<()> {
        transition(&self.conn(), id, SandboxState::Waiting, now, None)
    }

    /// Stops a live sandbox, recording why. The caller then destroys its resources.
    pub fn mark_stopped(&self, id: &str, reason: &str, now: i64) -> Result<()> {
        transition(&self.conn(), id, SandboxState::Stopped, now, Some(reason))
    }

    /// Records activity on a live sandbox: sets `last_used_at` to `now`.
    /// [`StoreError::NotFound`] if there is no live sandbox `id`.
    pub fn touch(&self, id: &str, now: i64) -> Result<()> {
        let conn = self.conn();
        let n = conn
            .prepare_cached(concat!(
                "UPDATE sandboxes SET last_used_at = ?2 WHERE id = ?1 AND state IN ",
                live_states!()
            ))?
            .execute(params![id, now])?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(())
    }

    /// Hands a live sandbox (typically just taken warm from a pool) to its user: owner, labels
    /// and expiry in one update.
    pub fn assign(
        &self,
        id: &str,
        owner_key: Option<&str>,
        metadata: &BTreeMap<String, String>,
        expires_at: Option<i64>,
    ) -> Result<()> {
        let metadata = serde_json::to_string(metadata)
            .map_err(|e| StoreError::Corrupt(format!("metadata: {e}")))?;
        let conn = self.conn();
        let n = conn
            .prepare_cached(concat!(
                "UPDATE sandboxes SET owner_key = ?2, metadata_json = ?3, expires_at = ?4 WHERE id = ?1 AND state IN ",
                live_states!()
            ))?
            .execute(params![id, owner_key, metadata, expires_at])?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(())
    }

    /// Sets (or with `None` clears) when `id` expires.
    pub fn set_expiry(&self, id: &str, expires_at: Option<i64>) -> Result<()> {
        let conn = self.conn();
        let n = conn
            .prepare_cached("UPDATE sandboxes SET expires_at = ?2 WHERE id = ?1")?
            .execute(params![id, expires_at])?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(())
    }

    // ---- sandboxes: counting ----------------------------------------------------------------

    /// Sandboxes not stopped.
    pub fn count_live(&self) -> Result<usize> {
        let conn = self.conn();
        let n: i64 = conn.prepare_cached(COUNT_LIVE)?.query_row([], |r| r.get(0))?;
        Ok(to_usize(n))
    }

    /// Rows per state, every state present (stopped counts the rows not deleted yet).
    pub fn count_by_state(&self) -> Result<BTreeMap<SandboxState, usize>> {
        count_by_state(&self.conn())
    }

    /// Counts by state and by pool, read in one transaction so they agree.
    pub fn stats(&self) -> Result<Stats> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let by_state = count_by_state(&tx)?;
        let mut by_pool: BTreeMap<String, BTreeMap<SandboxState, usize>> = BTreeMap::new();
        {
            let mut st = tx.prepare_cached(POOL_COUNTS)?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let pool: String = r.get(0)?;
                let state: String = r.get(1)?;
                let state = parse_state(&state, "pool counts")?;
                let n: i64 = r.get(2)?;
                by_pool
                    .entry(pool)
                    .or_insert_with(|| SandboxState::LIVE.iter().map(|s| (*s, 0)).collect())
                    .insert(state, to_usize(n));
            }
        }
        tx.commit()?;
        let total_live =
            by_state.iter().filter(|(s, _)| s.is_live()).map(|(_, n)| n).sum::<usize>();
        Ok(Stats { total_live, by_state, by_pool })
    }

    /// Ids of every live sandbox, oldest first.
    pub fn live_ids(&self) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(concat!(
            "SELECT id FROM sandboxes WHERE state IN ",
            live_states!(),
            " ORDER BY created_at, id"
        ))?;
        let ids = st.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }

    // ---- sandboxes: eviction, idleness, expiry ---------------------------------------------

    /// The sandbox to stop first when the host is at capacity: a `Cold` one, else a `Warm`
    /// one, else a `Waiting` one, the least recently used first. Never `Running` or `Warming`
    /// (someone is using or building it).
    pub fn best_eviction_candidate(&self) -> Result<Option<(String, SandboxState)>> {
        eviction_candidate(&self.conn(), i64::MAX)
    }

    /// Stops the [best eviction candidate](Store::best_eviction_candidate) with reason
    /// `evicted`, in one transaction, and returns it so the caller can destroy its resources.
    pub fn evict_one(&self, now: i64) -> Result<Option<(String, SandboxState)>> {
        self.evict_one_idle(now, i64::MAX)
    }

    /// [`evict_one`](Store::evict_one), but a `Waiting` sandbox is a candidate only when it was
    /// last used before `waiting_idle_before` (one just handed to a user is not evicted).
    pub fn evict_one_idle(
        &self,
        now: i64,
        waiting_idle_before: i64,
    ) -> Result<Option<(String, SandboxState)>> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let Some((id, state)) = eviction_candidate(&tx, waiting_idle_before)? else {
            return Ok(None);
        };
        let n = tx.prepare_cached(EVICT)?.execute(params![id, state.as_str(), now])?;
        tx.commit()?;
        // The write lock was held from the read to the update, so the guard cannot miss.
        Ok((n == 1).then_some((id, state)))
    }

    /// `Waiting` sandboxes last used before `idle_since_before`, least recently used first.
    pub fn idle_list(&self, idle_since_before: i64) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(IDLE_LIST)?;
        let ids =
            st.query_map([idle_since_before], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }

    /// Stops up to `limit` `Waiting` sandboxes unused for more than `idle_ms`, least recently
    /// used first, with reason `idle`, in one statement. Returns their ids in that order.
    pub fn sweep_idle(&self, now: i64, idle_ms: i64, limit: usize) -> Result<Vec<String>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let cutoff = now.saturating_sub(idle_ms);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.conn();
        let mut st = conn.prepare_cached(SWEEP_IDLE)?;
        let mut swept: Vec<(String, i64)> = st
            .query_map(params![cutoff, limit, now], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        // RETURNING has no defined order.
        swept.sort_by_key(|(_, last_used)| *last_used);
        Ok(swept.into_iter().map(|(id, _)| id).collect())
    }

    /// Live sandboxes whose `expires_at` is at or before `now`, soonest expiry first.
    pub fn expired(&self, now: i64) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(concat!(
            "SELECT id FROM sandboxes WHERE expires_at <= ?1 AND state IN ",
            live_states!(),
            " ORDER BY expires_at, id"
        ))?;
        let ids = st.query_map([now], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }
}

/// Sets up a fresh connection (everything but the journal mode, which only `open` sets: an
/// in-memory database has no journal file).
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

/// One guarded UPDATE; see the module docs. `reason` is only used for `Stopped`.
fn transition(
    conn: &Connection,
    id: &str,
    to: SandboxState,
    now: i64,
    reason: Option<&str>,
) -> Result<()> {
    // Each guard lists exactly `to.allowed_from()`; `state_machine_matches_the_database`
    // checks every pair.
    let sql = match to {
        SandboxState::Cold => None,
        SandboxState::Warming => Some(
            "UPDATE sandboxes SET state = 'warming', last_used_at = ?2 \
             WHERE id = ?1 AND state IN ('cold')",
        ),
        SandboxState::Warm => Some(
            "UPDATE sandboxes SET state = 'warm', last_used_at = ?2 \
             WHERE id = ?1 AND state IN ('warming', 'waiting')",
        ),
        SandboxState::Running => Some(
            "UPDATE sandboxes SET state = 'running', last_used_at = ?2 \
             WHERE id = ?1 AND state IN ('warm', 'waiting')",
        ),
        SandboxState::Waiting => Some(
            "UPDATE sandboxes SET state = 'waiting', last_used_at = ?2 \
             WHERE id = ?1 AND state IN ('warming', 'warm', 'running')",
        ),
        SandboxState::Stopped => Some(concat!(
            "UPDATE sandboxes SET state = 'stopped', stopped_at = ?2, stop_reason = ?3 \
             WHERE id = ?1 AND state IN ",
            live_states!()
        )),
    };
    let changed = match sql {
        None => 0,
        Some(sql) if to == SandboxState::Stopped => {
            conn.prepare_cached(sql)?.execute(params![id, now, reason])?
        }
        Some(sql) => conn.prepare_cached(sql)?.execute(params![id, now])?,
    };
    if changed == 1 {
        return Ok(());
    }
    let from: Option<String> = conn
        .prepare_cached("SELECT state FROM sandboxes WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    match from {
        None => Err(StoreError::NotFound(id.to_owned())),
        Some(from) => Err(StoreError::InvalidTransition {
            id: id.to_owned(),
            from: parse_state(&from, id)?,
            to,
        }),
    }
}

fn count_by_state(conn: &Connection) -> Result<BTreeMap<SandboxState, usize>> {
    let mut out: BTreeMap<SandboxState, usize> =
        SandboxState::ALL.iter().map(|s| (*s, 0)).collect();
    let mut st = conn.prepare_cached(COUNT_BY_STATE)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let state: String = r.get(0)?;
        let state = parse_state(&state, "state counts")?;
        let n: i64 = r.get(1)?;
        out.insert(state, to_usize(n));
    }
    Ok(out)
}

/// See [`EVICTION_CANDIDATE`].
fn eviction_candidate(
    conn: &Connection,
    waiting_idle_before: i64,
) -> Result<Option<(String, SandboxState)>> {
    let found: Option<(String, String)> = conn
        .prepare_cached(EVICTION_CANDIDATE)?
        .query_row([waiting_idle_before], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match found {
        None => Ok(None),
        Some((id, state)) => {
            let state = parse_state(&state, &id)?;
            Ok(Some((id, state)))
        }
    }
}

pub(crate) fn parse_state(s: &str, whose: &str) -> Result<SandboxState> {
    s.parse().map_err(|e| StoreError::Corrupt(format!("{whose}: {e}")))
}

/// SQLite counts are never negative; clamp instead of trusting that blindly.
pub(crate) fn to_usize(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// A sandbox row as read, before its text columns are checked.
struct RawSandbox {
    id: String,
    state: String,
    pool: Option<String>,
    backend: String,
    spec_json: String,
    metadata_json: String,
    owner_key: Option<String>,
    created_at: i64,
    last_used_at: i64,
    expires_at: Option<i64>,
    stopped_at: Option<i64>,
    stop_reason: Option<String>,
}

impl RawSandbox {
    fn read(r: &Row<'_>) -> rusqlite::Result<RawSandbox> {
        Ok(RawSandbox {
            id: r.get(0)?,
            state: r.get(1)?,
            pool: r.get(2)?,
            backend: r.get(3)?,
            spec_json: r.get(4)?,
            metadata_json: r.get(5)?,
            owner_key: r.get(6)?,
            created_at: r.get(7)?,
            last_used_at: r.get(8)?,
            expires_at: r.get(9)?,
            stopped_at: r.get(10)?,
            stop_reason: r.get(11)?,
        })
    }

    fn into_row(self) -> Result<SandboxRow> {
        let state = parse_state(&self.state, &format!("sandbox {}", self.id))?;
        let metadata = serde_json::from_str(&self.metadata_json)
            .map_err(|e| StoreError::Corrupt(format!("sandbox {}: metadata: {e}", self.id)))?;
        Ok(SandboxRow {
            id: self.id,
            state,
            pool: self.pool,
            backend: self.backend,
            spec_json: self.spec_json,
            metadata,
            owner_key: self.owner_key,
            created_at: self.created_at,
            last_used_at: self.last_used_at,
            expires_at: self.expires_at,
            stopped_at: self.stopped_at,
            stop_reason: self.stop_reason,
        })
    }
}

#[cfg(test)]
mod tests;
