//! The `flowgate` binary.

mod bench;
mod cli;
mod rules_cli;

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    // Logging is set up by `run`: `serve` handles SIGTERM and SIGINT first.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
