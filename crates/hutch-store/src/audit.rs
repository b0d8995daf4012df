//! The audit log: an append-only record of who did what to which sandbox.
use rusqlite::params;

use crate::error::{Result, StoreError};
use crate::model::AuditRow;
use crate::Store;

impl Store {
    /// Appends an entry and returns its sequence number.
    pub fn audit(
        &self,
        at: i64,
        key_id: Option<&str>,
        action: &str,
        sandbox_id: Option<&str>,
        detail: &serde_json::Value,
    ) -> Result<i64> {
        let detail = serde_json::to_string(detail)
            .map_err(|e| StoreError::Corrupt(format!("audit detail: {e}")))?;
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO audit (at, key_id, action, sandbox_id, detail_json) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![at, key_id, action, sandbox_id, detail])?;
        Ok(conn.last_insert_rowid())
    }

    /// The last `limit` entries, newest first.
    pub fn recent_audit(&self, limit: usize) -> Result<Vec<AuditRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT seq, at, key_id, action, sandbox_id, detail_json FROM audit \
             ORDER BY seq DESC LIMIT ?1",
        )?;
        let raw = st
            .query_map([limit], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get::<_, String>(5)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        raw.into_iter()
            .map(|(seq, at, key_id, action, sandbox_id, detail)| {
                let detail = serde_json::from_str(&detail)
                    .map_err(|e| StoreError::Corrupt(format!("audit entry {seq}: detail: {e}")))?;
                Ok(AuditRow { seq, at, key_id, action, sandbox_id, detail })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn append_and_read_back_newest_first() -> Result<()> {
        let store = Store::open_in_memory()?;
        assert!(store.recent_audit(10)?.is_empty());
        let mut seqs = Vec::new();
        for i in 0..5 {
            seqs.push(store.audit(
                100 + i,
                Some("k1"),
                "sandbox.create",
                Some(&format!("sb{i}")),
                &json!({ "n": i }),
            )?);
        }
        seqs.push(store.audit(200, None, "key.bootstrap", None, &json!({}))?);
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));

        let recent = store.recent_audit(3)?;
        assert_eq!(recent.len(), 3);
        assert_eq!(recent[0].action, "key.bootstrap");
        assert_eq!((recent[0].key_id.as_deref(), recent[0].sandbox_id.as_deref()), (None, None));
        assert_eq!(recent[1].sandbox_id.as_deref(), Some("sb4"));
        assert_eq!(recent[1].detail, json!({ "n": 4 }));
        assert_eq!(recent[2].at, 103);
        assert_eq!(store.recent_audit(100)?.len(), 6);
        assert!(store.recent_audit(0)?.is_empty());
        Ok(())
    }

    #[test]
    fn corrupt_detail_is_reported() -> Result<()> {
        let store = Store::open_in_memory()?;
        store.conn().execute(
            "INSERT INTO audit (at, action, detail_json) VALUES (1, 'x', 'not json')",
            [],
        )?;
        assert!(matches!(store.recent_audit(1), Err(StoreError::Corrupt(_))));
        Ok(())
    }
}
