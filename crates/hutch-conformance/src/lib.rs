//! The conformance suite: one set of behaviours every isolating backend must show. Each case is
//! an async function over a [`Backend`]; [`conformance_suite!`] turns the list into one `#[test]`
//! per case for a given backend, each bounded in time so a hang fails one test, not the run.
//!
//! The suite needs what the backend needs (root, an OCI runtime, ...), so its tests are marked
//! `#[ignore]` and opted into with `cargo test -p hutch-conformance -- --include-ignored`
//! (scripts/test.sh and CI do); a plain `cargo test` on a laptop lists them as ignored.
#![forbid(unsafe_code)]

pub mod cases;
mod util;

pub use util::{leak_snapshot, LeakSnapshot};

use std::future::Future;
use std::time::Duration;

/// Per-case time bound.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(120);

/// Cases that cannot apply to WebAssembly guests, and why. Each of these behaviours is about
/// something a wasm sandbox does not have; the suite passes them for such backends and prints
/// the reason.
pub const NOT_APPLICABLE_TO_WASI: &[(&str, &str)] = &[
    ("runs_unprivileged_and_confined", "a WebAssembly guest has no uid, capabilities, seccomp filter, /proc or namespaces to check: it reaches the host only through the WASI imports the backend links"),
    ("rootfs_directory_works", "a wasm sandbox has no root filesystem: its guests see only /workspace"),
];

/// Why `case` does not apply to `backend`, if it does not.
pub fn not_applicable(backend: &dyn hutch_core::Backend, case: &str) -> Option<&'static str> {
    if backend.guest_kind() != hutch_core::GuestKind::Wasi {
        return None;
    }
    NOT_APPLICABLE_TO_WASI.iter().find(|(c, _)| *c == case).map(|(_, why)| *why)
}

/// Runs one case under the time bound on a fresh multi-threaded runtime.
pub fn run_case<F, Fut>(name: &str, f: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(async { tokio::time::timeout(CASE_TIMEOUT, f()).await }) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("conformance case {name} failed: {e:#}"),
        Err(_) => panic!("conformance case {name} did not finish within {CASE_TIMEOUT:?}"),
    }
}

/// `conformance_suite!(module_name, || -> Box<dyn Backend> { ... })` expands to a test module
/// with one test per case.
#[macro_export]
macro_rules! conformance_suite {
    ($modname:ident, $make:expr) => {
        mod $modname {
            #[allow(unused_imports)]
            use super::*;
            $crate::conformance_suite!(@cases $make;
                echo, exit_codes, killed_by_signal, stdin_inline_and_streamed, env_is_passed, cwd_default_and_override,
                output_is_capped_with_marker, timeout_kills_the_tree, memory_bomb_is_oom, fork_bomb_is_contained,
                network_is_unreachable, root_is_read_only, host_files_are_invisible, files_round_trip_10mib,
                file_operations, runs_unprivileged_and_confined, command_not_found_is_an_error,
                concurrent_execs_in_one_sandbox, file_paths_are_confined, reset_leaves_nothing_behind, contexts_keep_state_and_return_rich_results, contexts_persist_and_are_isolated, contexts_survive_hostile_snippets, rootfs_directory_works, sequential_sandboxes_leave_nothing_behind);
        }
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[test]
            #[ignore = "needs root and the backend's engine: cargo test -p hutch-conformance -- --include-ignored"]
            fn $case() {
                $crate::run_case(stringify!($case), || async {
                    let backend: Box<dyn hutch_core::Backend> = ($make)()?;
                    if let Some(why) = $crate::not_applicable(&*backend, stringify!($case)) {
                        println!("conformance: {} does not apply to {}: {why}", stringify!($case), backend.name());
                        return Ok(());
                    }
                    $crate::cases::$case(&*backend).await
                });
            }
        )*
    };
}
