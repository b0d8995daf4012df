//! `hutch`: the command-line entry point. Parsing and wiring only; the work is in the crates.
#![forbid(unsafe_code)]

mod backends;
mod doctor;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "hutch", version, about = "Run untrusted code in fast, isolated sandboxes")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one command in a fresh sandbox and destroy it afterwards
    Run(run::RunArgs),
    /// Check this host: which backends and runtimes work here, and what to fix
    Doctor(doctor::DoctorArgs),
    /// Run the benchmark suite
    Bench(hutch_bench::BenchArgs),
}

/// Exit codes for hutch's own failures (a command's own exit code passes through unchanged).
pub mod exit {
    /// Bad flags or an impossible sandbox spec.
    pub const USAGE: u8 = 2;
    /// The sandbox could not be created or the backend failed (like `docker run`).
    pub const HUTCH: u8 = 125;
    /// The command exists but could not be executed.
    pub const CANNOT_EXEC: u8 = 126;
    /// The command was not found in the sandbox.
    pub const NOT_FOUND: u8 = 127;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hutch: cannot start the async runtime: {e}");
            return ExitCode::from(exit::HUTCH);
        }
    };
    rt.block_on(async {
        match cli.cmd {
            Cmd::Run(a) => run::run(a).await,
            Cmd::Doctor(a) => doctor::doctor(a).await,
            Cmd::Bench(a) => match hutch_bench::main(a).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("hutch bench: {e:#}");
                    ExitCode::FAILURE
                }
            },
        }
    })
}
