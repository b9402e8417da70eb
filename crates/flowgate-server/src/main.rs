//! The `flowgate` binary.

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    let cli = flowgate_server::cli::Cli::parse();
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
    match rt.block_on(flowgate_server::cli::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flowgate: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
