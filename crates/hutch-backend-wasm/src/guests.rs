//! Which WebAssembly program a command runs: the language guests the project builds
//! (scripts/build-wasm-guests.sh: CPython as a component, QuickJS as a WASI module) under the
//! names users type on the container backend, or a `.wasm` file in the workspace.
use std::path::{Path, PathBuf};

use crate::error::WasmError;

/// A language guest and the command names that run it.
#[derive(Debug, Clone, Copy)]
pub struct Guest {
    pub name: &'static str,
    pub file: &'static str,
    pub commands: &'static [&'static str],
}

pub const GUESTS: &[Guest] = &[
    Guest { name: "python", file: "python.wasm", commands: &["python3", "python"] },
    Guest { name: "javascript", file: "qjs.wasm", commands: &["node", "nodejs", "qjs", "js"] },
];

/// `$HUTCH_WASM_GUESTS`, else /var/lib/hutch/wasm-guests (where the build script puts them).
pub fn default_guest_dir() -> PathBuf {
    std::env::var_os("HUTCH_WASM_GUESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/hutch/wasm-guests"))
}

/// What argv[0] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A language guest's file on the host.
    Guest { name: &'static str, path: PathBuf },
    /// A `.wasm` file inside the sandbox (guest path).
    User(String),
}

/// Resolves a command name. Directory prefixes of the usual install places are accepted for
/// the guests (`/usr/bin/python3`), since scripts often spell them out.
pub fn resolve(argv0: &str, guest_dir: &Path) -> Result<Target, WasmError> {
    if argv0.ends_with(".wasm") {
        return Ok(Target::User(argv0.to_string()));
    }
    let base = match argv0.rsplit_once('/') {
        Some((dir, base)) if ["/usr/bin", "/bin", "/usr/local/bin"].contains(&dir) => base,
        Some(_) => argv0,
        None => argv0,
    };
    for g in GUESTS {
        if g.commands.contains(&base) {
            return Ok(Target::Guest { name: g.name, path: guest_dir.join(g.file) });
        }
    }
    let names: Vec<&str> = GUESTS.iter().flat_map(|g| g.commands.iter().copied()).collect();
    Err(WasmError::UnknownCommand {
        command: argv0.to_string(),
        hint: format!(
            "a wasm sandbox runs {} or a .wasm module or component from /workspace",
            names.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_resolve_to_guests_or_user_modules() {
        let d = Path::new("/g");
        assert_eq!(
            resolve("python3", d).unwrap(),
            Target::Guest { name: "python", path: "/g/python.wasm".into() }
        );
        assert_eq!(
            resolve("/usr/bin/node", d).unwrap(),
            Target::Guest { name: "javascript", path: "/g/qjs.wasm".into() }
        );
        assert_eq!(resolve("app.wasm", d).unwrap(), Target::User("app.wasm".into()));
        let e = resolve("bash", d).unwrap_err().to_string();
        assert!(e.contains("not found") && e.contains("python3"), "{e}");
        assert!(resolve("/opt/python3", d).is_err());
    }
}
