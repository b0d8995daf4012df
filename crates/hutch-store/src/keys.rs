//! API keys. Only the SHA-256 of a secret is stored; a key is looked up by hashing the secret
//! the client presents. Secrets are long random strings, so a plain (unsalted) hash is enough
//! and keeps the lookup an index seek.
use rusqlite::{params, OptionalExtension, Row};
use sha2::{Digest, Sha256};

use crate::error::{is_duplicate, Result, StoreError};
use crate::model::KeyRow;
use crate::store::to_usize;
use crate::Store;

/// Lowercase hex SHA-256 of `secret`: what the store keeps instead of the secret.
pub fn hash_key(secret: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(secret.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

const KEY_COLUMNS: &str =
    "id, name, hash, admin, max_sandboxes, rate_per_minute, created_at, revoked_at";

impl Store {
    /// Records a key. [`StoreError::Duplicate`] if the id or the hash is taken.
    pub fn insert_key(&self, key: &KeyRow) -> Result<()> {
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO api_keys \
             (id, name, hash, admin, max_sandboxes, rate_per_minute, created_at, revoked_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            key.id,
            key.name,
            key.hash,
            key.admin,
            key.max_sandboxes,
            key.rate_per_minute,
            key.created_at,
            key.revoked_at,
        ])
        .map_err(|e| {
            if is_duplicate(&e) {
                StoreError::Duplicate(format!("api key {} (or one with the same secret)", key.id))
            } else {
                e.into()
            }
        })?;
        Ok(())
    }

    /// The unrevoked key whose secret is `secret`.
    pub fn find_key(&self, secret: &str) -> Result<Option<KeyRow>> {
        let hash = hash_key(secret);
        let conn = self.conn();
        let key = conn
            .prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?1 AND revoked_at IS NULL"
            ))?
            .query_row([hash], read_key)
            .optional()?;
        key.transpose()
    }

    /// Every key, revoked ones included, oldest first.
    pub fn list_keys(&self) -> Result<Vec<KeyRow>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id"
        ))?;
        let rows = st.query_map([], read_key)?.collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().collect()
    }

    /// Revokes key `id`. Returns whether it was active (false if unknown or already revoked).
    pub fn revoke_key(&self, id: &str, now: i64) -> Result<bool> {
        let conn = self.conn();
        let n = conn
            .prepare_cached(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            )?
            .execute(params![id, now])?;
        Ok(n > 0)
    }

    /// Keys not revoked (zero means nobody can authenticate: time to bootstrap an admin key).
    pub fn count_keys(&self) -> Result<usize> {
        let conn = self.conn();
        let n: i64 = conn
            .prepare_cached("SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL")?
            .query_row([], |r| r.get(0))?;
        Ok(to_usize(n))
    }
}

/// Reads a key row; the outer result is SQLite's, the inner one flags a corrupt limit.
fn read_key(r: &Row<'_>) -> rusqlite::Result<Result<KeyRow>> {
    let id: String = r.get(0)?;
    let max_sandboxes = limit(&id, "max_sandboxes", r.get(4)?);
    let rate_per_minute = limit(&id, "rate_per_minute", r.get(5)?);
    let (max_sandboxes, rate_per_minute) = match (max_sandboxes, rate_per_minute) {
        (Ok(m), Ok(p)) => (m, p),
        (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
    };
    Ok(Ok(KeyRow {
        name: r.get(1)?,
        hash: r.get(2)?,
        admin: r.get(3)?,
        max_sandboxes,
        rate_per_minute,
        created_at: r.get(6)?,
        revoked_at: r.get(7)?,
        id,
    }))
}

fn limit(id: &str, column: &str, v: Option<i64>) -> Result<Option<u32>> {
    v.map(|v| {
        u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("api key {id}: {column} is {v}")))
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash_key("").len(), 64);
    }

    #[test]
    fn find_by_secret_and_revoke() -> Result<()> {
        let store = Store::open_in_memory()?;
        let mut admin = KeyRow::new("k1", "admin", "secret-one", 1);
        admin.admin = true;
        admin.max_sandboxes = Some(10);
        admin.rate_per_minute = Some(600);
        store.insert_key(&admin)?;
        store.insert_key(&KeyRow::new("k2", "ci", "secret-two", 2))?;
        assert_eq!(store.count_keys()?, 2);

        assert_eq!(store.find_key("secret-one")?, Some(admin.clone()));
        assert_eq!(store.find_key("secret-two")?.map(|k| k.id), Some("k2".to_owned()));
        assert_eq!(store.find_key("secret-three")?, None);
        assert_eq!(store.find_key(&admin.hash)?, None, "the hash is not a secret");

        assert!(store.revoke_key("k2", 5)?);
        assert!(!store.revoke_key("k2", 6)?, "already revoked");
        assert!(!store.revoke_key("k9", 6)?);
        assert_eq!(store.find_key("secret-two")?, None);
        assert_eq!(store.count_keys()?, 1);
        let all = store.list_keys()?;
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].revoked_at, Some(5));
        Ok(())
    }

    #[test]
    fn duplicates_are_refused() -> Result<()> {
        let store = Store::open_in_memory()?;
        store.insert_key(&KeyRow::new("k1", "a", "s", 1))?;
        for dup in [KeyRow::new("k1", "b", "other", 1), KeyRow::new("k2", "c", "s", 1)] {
            assert!(matches!(store.insert_key(&dup), Err(StoreError::Duplicate(_))));
        }
        Ok(())
    }

    #[test]
    fn the_secret_is_never_stored() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let secret = "hutch_sk_very-recognisable-secret-0123456789";
        {
            let store = Store::open(&path)?;
            store.insert_key(&KeyRow::new("k1", "ci", secret, 1))?;
            assert!(store.find_key(secret)?.is_some());
            let listing = serde_json::to_string(&store.list_keys()?).unwrap_or_default();
            assert!(!listing.contains(&hash_key(secret)), "list_keys leaks the hash");
        }
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(dir.path()).expect("read_dir") {
            bytes.extend(std::fs::read(entry.expect("entry").path()).expect("read"));
        }
        let needle = secret.as_bytes();
        assert!(!bytes.windows(needle.len()).any(|w| w == needle), "secret found on disk");
        let hash = hash_key(secret);
        assert!(bytes.windows(64).any(|w| w == hash.as_bytes()), "the hash should be on disk");
        Ok(())
    }
}
