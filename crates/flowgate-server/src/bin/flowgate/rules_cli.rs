//! `flowgate rules`: the rules shared by a cluster, changed and read through any node's admin
//! API (so that every change is validated by the server, attributed to a token's name and
//! notified to every node).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use flowgate_config::Redacted;
use flowgate_server::rules::doc::RulesDoc;

/// `flowgate rules`.
#[derive(Debug, Args)]
pub(crate) struct RulesArgs {
    /// The server's HTTP address.
    #[arg(
        long,
        env = "FLOWGATE_SERVER",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub(crate) server: String,
    /// An admin token of the server (its name is recorded as the change's author).
    #[arg(
        long,
        env = "FLOWGATE_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub(crate) token: Option<String>,
    /// Print the server's JSON answer instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: RulesCommand,
}

/// A `flowgate rules` command.
#[derive(Debug, Subcommand)]
pub(crate) enum RulesCommand {
    /// Validate a configuration file or directory here, without a server (for CI).
    Check {
        /// A Flowgate .toml file, an envoyproxy/ratelimit .yaml file, or a directory of them.
        path: PathBuf,
    },
    /// Store a configuration file or directory as the cluster's new rules version.
    Push {
        /// A Flowgate .toml file, an envoyproxy/ratelimit .yaml file, or a directory of them.
        path: PathBuf,
        /// Refuse the push if a version other than this one is in force (no lost update).
        #[arg(long)]
        base: Option<u64>,
    },
    /// The newest versions: number, author, time, action, summary.
    History {
        /// How many versions.
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// One version: its author, time and diff from the version before (and with `--files`,
    /// its files).
    Show {
        /// The version.
        version: u64,
        /// Print the version's files too.
        #[arg(long)]
        files: bool,
    },
    /// Store an earlier version's rules as the new version.
    Rollback {
        /// The version to restore.
        version: u64,
    },
}

/// Runs a `flowgate rules` command.
///
/// # Errors
/// Invalid rules (file, line and field), the server's refusal, or an unreachable server.
pub(crate) async fn run(args: RulesArgs) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || run_blocking(&args))
        .await
        .context("the command panicked")?
}

fn read_doc(path: &std::path::Path) -> anyhow::Result<RulesDoc> {
    let doc = RulesDoc::read(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let loaded = doc
        .load()
        .map_err(|e| anyhow::anyhow!("invalid rules: {e}"))?;
    eprintln!(
        "{}: valid ({} rules, {} queues, {} files)",
        path.display(),
        loaded.rules.rules().len(),
        loaded.queues.specs().len(),
        doc.files.len()
    );
    Ok(doc)
}

fn run_blocking(args: &RulesArgs) -> anyhow::Result<()> {
    let client = Client::new(args)?;
    let answer = match &args.command {
        RulesCommand::Check { path } => {
            read_doc(path)?;
            return Ok(());
        }
        RulesCommand::Push { path, base } => {
            let doc = read_doc(path)?;
            let mut body = json!({ "files": doc.files });
            if let Some(b) = base {
                body["base_version"] = json!(b);
            }
            client.send("POST", "/v1/rules/versions", Some(&body))?
        }
        RulesCommand::History { limit } => {
            client.send("GET", &format!("/v1/rules/history?limit={limit}"), None)?
        }
        RulesCommand::Show { version, .. } => {
            client.send("GET", &format!("/v1/rules/versions/{version}"), None)?
        }
        RulesCommand::Rollback { version } => client.send(
            "POST",
            "/v1/rules/rollback",
            Some(&json!({ "version": version })),
        )?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_owned();
    match &args.command {
        RulesCommand::Check { .. } => {}
        RulesCommand::Push { .. } | RulesCommand::Rollback { .. }
            if answer["unchanged"] == true =>
        {
            println!(
                "version {} is in force with these rules already: nothing stored",
                answer["version"]
            );
        }
        RulesCommand::Push { .. } | RulesCommand::Rollback { .. } => println!(
            "version {} stored and in force ({}, {}, by {})",
            answer["version"],
            s(&answer, "action"),
            s(&answer, "summary"),
            s(&answer, "author")
        ),
        RulesCommand::History { .. } => {
            println!(
                "{:>8}  {:<24}  {:<16}  {:<18}  action",
                "version", "at", "author", "change"
            );
            for v in answer["versions"].as_array().into_iter().flatten() {
                println!(
                    "{:>8}  {:<24}  {:<16}  {:<18}  {}",
                    v["version"].as_u64().unwrap_or(0),
                    s(v, "at"),
                    s(v, "author"),
                    s(v, "summary"),
                    s(v, "action")
                );
            }
        }
        RulesCommand::Show { files, .. } => {
            println!(
                "version {}  at {}  by {}  ({}, {})",
                answer["version"],
                s(&answer, "at"),
                s(&answer, "author"),
                s(&answer, "action"),
                s(&answer, "summary")
            );
            print!("{}", s(&answer, "diff"));
            if *files {
                for f in answer["files"].as_array().into_iter().flatten() {
                    println!("==> {} <==", s(f, "name"));
                    print!("{}", s(f, "text"));
                }
            }
        }
    }
    Ok(())
}

/// A blocking HTTP client of one server's admin API.
struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl Client {
    fn new(args: &RulesArgs) -> anyhow::Result<Self> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Ok(Self {
            agent,
            base: args.server.trim_end_matches('/').to_owned(),
            token: args.token.clone().filter(|t| !t.is_empty()),
        })
    }

    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let Some(token) = &self.token else {
            bail!("an admin token is needed: --token or FLOWGATE_ADMIN_TOKEN");
        };
        let url = format!("{}{path}", self.base);
        // Shown redacted: the server's URL may hold a password.
        let shown = format!("{}{path}", Redacted(&self.base));
        let auth = format!("Bearer {token}");
        let sent = match (method, body) {
            ("POST", Some(b)) => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .send_json(b),
            _ => self.agent.get(&url).header("Authorization", &auth).call(),
        };
        let mut response = sent.with_context(|| format!("cannot reach {shown}"))?;
        let status = response.status();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .with_context(|| format!("cannot read the answer of {shown}"))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if !status.is_success() {
            let detail = value["detail"].as_str().unwrap_or("");
            let error = value["error"].as_str().unwrap_or("");
            bail!("{shown}: {status} {error}: {detail}");
        }
        Ok(value)
    }
}
