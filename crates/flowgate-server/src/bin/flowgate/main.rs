//! The `flowgate` binary.

mod bench;
mod cli;
mod rules_cli;
mod tokens_cli;

use clap::{CommandFactory as _, FromArgMatches as _};

/// mimalloc: a gRPC request allocates about 45 times (h2, tonic, prost), and glibc's malloc
/// spends about 10 % of the server's instructions on them (BENCHMARKS.md, "What a request costs
/// the server").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let matches = cli::Cli::command().get_matches();
    let mut cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let (cli::Command::Serve(a), Some(("serve", m))) = (&mut cli.command, matches.subcommand()) {
        a.secrets_on_command_line = [
            "admin_token",
            "admin_tokens",
            "dashboard_token",
            "redis_sentinel_password",
        ]
        .into_iter()
        .filter(|id| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .collect();
    }
    let threads = match &cli.command {
        cli::Command::Serve(a) => a.worker_threads,
        cli::Command::Floor(a) => a.worker_threads,
        _ => None,
    };
    // Logging is set up by `run`: `serve` handles SIGTERM and SIGINT first.
    let mut builder = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(usize::from(n));
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flowgate: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(cli::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flowgate: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
