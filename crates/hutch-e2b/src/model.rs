//! How an E2B sandbox maps onto a hutch sandbox: ids, templates, the guest account, what the
//! E2B API keeps in the sandbox's metadata, and the JSON shapes of the control plane.
use std::collections::BTreeMap;

use hutch_core::SandboxSpec;
use hutch_server::api::types::{GuestUser, LimitsBody};
use hutch_store::{SandboxRow, SandboxState};
use serde_json::{json, Value};

use crate::ENVD_VERSION;

/// The account E2B's templates run commands as, and its home (the working directory).
pub const USER: &str = "user";
pub const HOME: &str = "/home/user";
/// Its uid and gid in hutch's host image (`user:x:1001:1001`).
pub const UID: u32 = 1001;

/// Metadata keys the E2B API keeps on a hutch sandbox (hidden from E2B's `metadata`).
pub const META_TEMPLATE: &str = "e2b.template";
pub const META_TOKEN: &str = "e2b.access_token";
const META_PREFIX: &str = "e2b.";

/// A template hutch can start: a name the SDKs ask for and what it needs.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    pub name: &'static str,
    /// Serves the code-interpreter protocol (port 49999) with a Python context started with the
    /// sandbox.
    pub code_interpreter: bool,
}

pub const TEMPLATES: [Template; 2] = [
    Template { name: "base", code_interpreter: false },
    Template { name: "code-interpreter-v1", code_interpreter: true },
];

pub fn template(name: &str) -> Option<Template> {
    // `code-interpreter-v1` is also asked for by alias
    let name = match name {
        "code-interpreter" => "code-interpreter-v1",
        other => other,
    };
    TEMPLATES.iter().copied().find(|t| t.name == name)
}

pub fn template_names() -> String {
    TEMPLATES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
}

/// The guest account of every E2B sandbox.
pub fn guest_user() -> GuestUser {
    GuestUser { uid: UID, gid: UID, home: HOME.to_string() }
}

/// Limits of an E2B sandbox: a command may run as long as the sandbox lives (E2B bounds it with
/// the request's deadline instead), with room for an interpreter, a shell and their children.
pub fn limits() -> LimitsBody {
    LimitsBody {
        timeout_ms: Some(24 * 3600 * 1000),
        pids: Some(256),
        output_bytes: Some(64 << 20),
        ..Default::default()
    }
}

/// E2B sandbox ids are `[a-z0-9]+`: hutch's `hutch-<hex>` without the dash.
pub fn e2b_id(hutch_id: &str) -> String {
    hutch_id.replace('-', "")
}

/// The hutch id of an E2B sandbox id, if it can be one.
pub fn hutch_id(e2b_id: &str) -> Option<String> {
    let hex = e2b_id.strip_prefix("hutch")?;
    (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| format!("hutch-{hex}"))
}

/// A hutch sandbox made through the E2B API.
#[derive(Debug, Clone)]
pub struct E2bSandbox {
    pub row: SandboxRow,
}

impl E2bSandbox {
    /// The row, if the E2B API made it and it still lives.
    pub fn from_row(row: SandboxRow) -> Option<Self> {
        (row.metadata.contains_key(META_TEMPLATE) && row.state != SandboxState::Stopped)
            .then_some(Self { row })
    }

    pub fn template(&self) -> &str {
        self.row.metadata.get(META_TEMPLATE).map(String::as_str).unwrap_or("base")
    }

    pub fn token(&self) -> &str {
        self.row.metadata.get(META_TOKEN).map(String::as_str).unwrap_or_default()
    }

    pub fn id(&self) -> String {
        e2b_id(&self.row.id)
    }

    /// The user's metadata, without what the E2B API keeps for itself.
    pub fn metadata(&self) -> BTreeMap<String, String> {
        self.row
            .metadata
            .iter()
            .filter(|(k, _)| !k.starts_with(META_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn spec(&self) -> SandboxSpec {
        serde_json::from_str(&self.row.spec_json).unwrap_or_default()
    }

    /// `Sandbox`: the answer to create and connect.
    pub fn sandbox_json(&self) -> Value {
        json!({
            "templateID": self.template(),
            "sandboxID": self.id(),
            "clientID": "hutch",
            "alias": self.template(),
            "envdVersion": ENVD_VERSION,
            "envdAccessToken": self.token(),
            // the SDKs send it to the code interpreter, which checks it (docs/e2b.md)
            "trafficAccessToken": self.token(),
            "domain": null,
        })
    }

    /// `ListedSandbox`; `detail` adds what `SandboxDetail` has on top.
    pub fn listed_json(&self, detail: bool, max_ttl_ms: i64) -> Value {
        let spec = self.spec();
        let end = self.row.expires_at.unwrap_or(self.row.created_at + max_ttl_ms);
        let mut v = json!({
            "templateID": self.template(),
            "alias": self.template(),
            "sandboxID": self.id(),
            "clientID": "hutch",
            "startedAt": rfc3339_ms(self.row.created_at),
            "endAt": rfc3339_ms(end),
            "cpuCount": spec.limits.cpus.ceil().max(1.0) as u64,
            "memoryMB": spec.limits.memory_bytes >> 20,
            "diskSizeMB": spec.limits.workspace_bytes >> 20,
            "state": "running",
            "envdVersion": ENVD_VERSION,
            "metadata": self.metadata(),
        });
        if detail {
            v["envdAccessToken"] = json!(self.token());
            v["domain"] = Value::Null;
            v["allowInternetAccess"] = json!(false);
        }
        v
    }
}

/// RFC 3339 in UTC with milliseconds, from Unix milliseconds.
pub fn rfc3339_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let frac = ms.rem_euclid(1000);
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:03}Z")
}

/// RFC 3339 in UTC from Unix seconds.
pub fn rfc3339_s(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` into Unix milliseconds.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut ms = 0;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        let frac = &f[..digits];
        ms = format!("{frac:0<3}")[..3].parse::<i64>().ok()?;
        rest = &f[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (o[1..3].parse::<i64>().ok()? * 3600 + o[4..6].parse::<i64>().ok()? * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    Some(((days * 86400 + h * 3600 + mi * 60 + sec) - offset) * 1000 + ms)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_match_e2b_form() {
        let e = e2b_id("hutch-0123456789ab");
        assert_eq!(e, "hutch0123456789ab");
        assert!(e.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert_eq!(hutch_id(&e).as_deref(), Some("hutch-0123456789ab"));
        assert_eq!(hutch_id("hutch"), None);
        assert_eq!(hutch_id("hutchXYZ"), None);
        assert_eq!(hutch_id("other123"), None);
    }

    #[test]
    fn timestamps_are_rfc3339_and_parse_back() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339_s(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(parse_rfc3339_ms("2023-11-14T22:13:20.123Z"), Some(1_700_000_000_123));
        assert_eq!(parse_rfc3339_ms("2023-11-14T23:13:20+01:00"), Some(1_700_000_000_000));
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
    }

    #[test]
    fn templates_are_known_by_name_and_alias() {
        assert!(template("base").is_some_and(|t| !t.code_interpreter));
        assert!(template("code-interpreter").is_some_and(|t| t.code_interpreter));
        assert!(template("mcp-gateway").is_none());
    }
}
