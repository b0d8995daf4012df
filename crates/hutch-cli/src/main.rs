//! `hutch`: the command-line entry point. Parsing and wiring only; the work is in the crates.
#![forbid(unsafe_code)]

mod backends;
mod client;
mod doctor;
mod gateway;
mod remote;
mod run;
mod serve;

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
    /// Run the daemon: HTTP API, warm pools, state in SQLite
    Serve(serve::ServeArgs),
    /// Run the benchmark suite
    Bench(hutch_bench::BenchArgs),
    /// Commands on the daemon: create, exec, ls, rm, ttl, cp, spawn, ps, logs, kill, pool, key
    #[command(flatten)]
    Remote(remote::RemoteCmd),
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

/// clap's errors are several lines with a usage block; hutch prints one line with the problem and
/// where to look.
fn parse() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(c) => Ok(c),
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return Err(ExitCode::SUCCESS);
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
                return Err(ExitCode::from(exit::USAGE));
            }
            let text = e.render().to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let mut first = lines
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ")
                .to_string();
            // "the following required arguments were not provided:" is followed by the names
            if first.ends_with(':') {
                let names: Vec<&str> = lines
                    .by_ref()
                    .take_while(|l| l.starts_with('<') || l.starts_with('-'))
                    .collect();
                first = format!("{} {}", first.trim_end_matches(':'), names.join(", "));
            }
            let tip = lines
                .find_map(|l| {
                    l.strip_prefix("tip: ")
                        .or_else(|| l.strip_prefix("[").and_then(|p| p.strip_suffix("]")))
                })
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            let usage = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("Usage: "))
                .unwrap_or("hutch [COMMAND]");
            let cmd: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with('[') && !w.starts_with('<') && !w.starts_with('-'))
                .collect();
            eprintln!("hutch: {first}{tip}; see '{} --help'", cmd.join(" "));
            Err(ExitCode::from(exit::USAGE))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(c) => c,
        Err(code) => return code,
    };
    // the daemon serves many connections at once; one-shot commands need one thread
    let rt = if matches!(cli.cmd, Cmd::Serve(_)) {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let rt = match rt {
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
            Cmd::Serve(a) => serve::serve(a).await,
            Cmd::Remote(c) => remote::main(c).await,
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
