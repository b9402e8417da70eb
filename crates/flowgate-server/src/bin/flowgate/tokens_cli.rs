//! `flowgate tokens`: credentials for the credentials file.
//!
//! `flowgate tokens new refunds --scopes worker` prints a new token (give it to the client; it
//! is shown once) and the line that grants it its scopes, with the token's digest only, so that
//! the credentials file holds nothing a reader of it could present:
//!
//! ```text
//! refunds:worker:sha256:3b5d...
//! ```

use std::io::{BufRead as _, Write as _};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use flowgate_server::auth::Scopes;
use flowgate_server::auth::credentials::{check_token, digest_hex, new_token};

/// `flowgate tokens`.
#[derive(Debug, Args)]
pub(crate) struct TokensArgs {
    /// What to make.
    #[command(subcommand)]
    command: TokensCommand,
}

#[derive(Debug, Subcommand)]
enum TokensCommand {
    /// A new token (256 random bits) and its credentials-file line: the token on standard
    /// output's first line, the line to add on its second.
    New(Line),
    /// The credentials-file line of an existing token, read from standard input (not the
    /// command line, where `ps` shows it).
    Hash(Line),
}

#[derive(Debug, Args)]
struct Line {
    /// The credential's name (the author of the rule changes made with it; in the logs).
    name: String,
    /// Its scopes, comma-separated: admin, worker, reporter, reader, decide.
    #[arg(long, value_parser = parse_scopes)]
    scopes: Scopes,
}

fn parse_scopes(text: &str) -> Result<Scopes, String> {
    Scopes::parse(text)
}

/// The line of `token` named `line.name`, checked as the server will read it.
fn line_of(line: &Line, token: &str) -> anyhow::Result<String> {
    let text = format!("{}:{}:{}", line.name, line.scopes, digest_hex(token));
    flowgate_server::auth::Credentials::new()
        .add_line(&text)
        .map_err(anyhow::Error::msg)?;
    Ok(text)
}

/// Runs `flowgate tokens`.
///
/// # Errors
/// A bad name, a token too short, or the random source failing.
pub(crate) fn run(args: &TokensArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match &args.command {
        TokensCommand::New(line) => {
            let token = new_token().map_err(anyhow::Error::msg)?;
            let text = line_of(line, &token)?;
            writeln!(out, "{token}")?;
            writeln!(out, "{text}")?;
            eprintln!(
                "The token is on the first line: give it to `{}` (it is not kept anywhere). Add the second line to the credentials file (--credentials-file); a running server takes it on SIGHUP or within 5 s.",
                line.name
            );
        }
        TokensCommand::Hash(line) => {
            let mut token = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut token)
                .context("cannot read the token from standard input")?;
            let token = token.trim();
            check_token(token).map_err(anyhow::Error::msg)?;
            writeln!(out, "{}", line_of(line, token)?)?;
        }
    }
    Ok(())
}
