//! The documentation (`README.md` and `docs/*.md`) against the code, so that a page cannot drift
//! from what it describes:
//!
//! - every fenced ` ```toml ` block is loaded as a Flowgate TOML file and every ` ```yaml ` (or
//!   ` ```yml `) block as an envoyproxy/ratelimit file, each on its own, with the server's own
//!   parser and validation ([`flowgate_config::load_texts`]); a failure names the page
//!   and the line. A block that is deliberately not a whole configuration file (a part of one,
//!   or a file of another program such as Envoy's own configuration) carries the word
//!   `fragment` in its info string (` ```toml fragment `) and is skipped;
//! - every relative link points at a file that exists, and a link to a heading (`page.md#name`,
//!   `#name`) at a heading that exists;
//! - every `FLOWGATE_*` environment variable named in the pages is one the binary reads, and
//!   every flag of `flowgate serve` is documented in `docs/operating.md`;
//! - every `docs/<page>.md` named in the crates' sources exists;
//! - every queue example of `README.md` and `docs/queues.md` (a ` ```sh ` block calling
//!   `/v1/queues`) runs as written, with `curl`, against the server started with the command the
//!   page shows before it (see [`every_queue_example_runs_against_the_server_the_page_starts`]).

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_flowgate");

/// The pages the README sends a reader to; each must exist.
const PAGES: [&str; 7] = [
    "docs/rules.md",
    "docs/algorithms.md",
    "docs/queues.md",
    "docs/cluster-rules.md",
    "docs/envoy.md",
    "docs/operating.md",
    "docs/library.md",
];

/// Environment variables read by the binary outside clap's arguments (`FLOWGATE_LOG`: the log
/// filter, read by `cli::init_logging`).
const OTHER_ENV: [&str; 1] = ["FLOWGATE_LOG"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `README.md` and every page of `docs/`, as paths relative to the repository's root.
fn pages() -> Vec<String> {
    let mut out = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("docs/ is readable").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

fn read(page: &str) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"))
}

/// A fenced code block.
#[derive(Debug)]
struct Block {
    /// The info string after the fence (` ```toml fragment ` gives `toml fragment`).
    info: String,
    /// The 1-based line of the opening fence.
    line: usize,
    /// The lines between the fences, without the fence's indentation.
    body: String,
}

impl Block {
    fn lang(&self) -> &str {
        self.info.split_whitespace().next().unwrap_or("")
    }

    fn is_fragment(&self) -> bool {
        self.info.split_whitespace().any(|w| w == "fragment")
    }
}

/// The fenced code blocks of a Markdown text (``` or ~~~ fences, indented or not, as in list
/// items), and the text outside them with each block's lines blanked (so that line numbers
/// still hold).
fn blocks(text: &str) -> (Vec<Block>, String) {
    let mut out = Vec::new();
    let mut prose = String::with_capacity(text.len());
    let mut open: Option<(String, usize, Block)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let fence: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let is_fence =
            fence.len() >= 3 && fence.chars().all(|c| c == fence.chars().next().unwrap());
        match open.take() {
            None if is_fence => {
                let block = Block {
                    info: trimmed[fence.len()..].trim().to_owned(),
                    line: i + 1,
                    body: String::new(),
                };
                open = Some((fence, indent, block));
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
            Some((f, _, block))
                if is_fence && fence.starts_with(&f) && trimmed.len() == fence.len() =>
            {
                out.push(block);
                prose.push('\n');
            }
            Some((f, ind, mut block)) => {
                let cut = line.len() - line.trim_start().len();
                block.body.push_str(&line[cut.min(ind)..]);
                block.body.push('\n');
                open = Some((f, ind, block));
                prose.push('\n');
            }
        }
    }
    assert!(open.is_none(), "a code block is never closed");
    (out, prose)
}

#[test]
fn every_configuration_example_loads() {
    let mut loaded = Vec::new();
    let mut failures = Vec::new();
    for page in pages() {
        let (blocks, _) = blocks(&read(&page));
        for b in blocks {
            let ext = match b.lang() {
                "toml" => "toml",
                "yaml" | "yml" => "yaml",
                _ => continue,
            };
            if b.is_fragment() {
                continue;
            }
            let name = format!("{page}:{}.{ext}", b.line);
            match flowgate_config::load_texts(&[(name, b.body.clone())]) {
                Ok(_) => loaded.push(page.clone()),
                Err(e) => {
                    let at = e.line.map_or(b.line, |l| b.line + l as usize);
                    let field = if e.field.is_empty() {
                        String::new()
                    } else {
                        format!(" field `{}`:", e.field)
                    };
                    failures.push(format!(
                        "{page}:{at} (the ```{} block opened at line {}):{field} {}",
                        b.info, b.line, e.message
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "examples that do not load:\n{}",
        failures.join("\n")
    );
    // The pages whose subject is the configuration show it: an extractor that finds nothing
    // must not pass.
    for page in [
        "README.md",
        "docs/rules.md",
        "docs/queues.md",
        "docs/envoy.md",
    ] {
        assert!(
            loaded.iter().any(|p| p == page),
            "{page} has no configuration example that loads"
        );
    }
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings.
fn anchors(page: &str) -> BTreeSet<String> {
    let (_, prose) = blocks(&read(page));
    prose
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of the inline links (`[text](target)`) of a text, with their 1-based lines.
fn links(prose: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((i + 1, target.to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// Whether `target`, linked from `page`, exists (a file, or a heading of a page).
fn check_link(page: &str, target: &str) -> Result<(), String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        page.to_owned()
    } else {
        let base = Path::new(page).parent().unwrap_or(Path::new(""));
        let joined = base.join(path);
        let full = root().join(&joined);
        if !full.exists() {
            return Err(format!("{} does not exist", joined.display()));
        }
        joined.to_string_lossy().into_owned()
    };
    if let Some(anchor) = anchor
        && (!file.ends_with(".md") || !anchors(&file).contains(anchor))
    {
        return Err(format!("{file} has no heading `#{anchor}`"));
    }
    Ok(())
}

#[test]
fn every_relative_link_points_at_something() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let (_, prose) = blocks(&read(&page));
        for (line, target) in links(&prose) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            if let Err(e) = check_link(&page, &target) {
                broken.push(format!("{page}:{line}: ({target}) {e}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 0,
        "no relative link found: the extractor is broken"
    );
    for page in PAGES {
        assert!(root().join(page).exists(), "{page} is missing");
        assert!(
            check_link("README.md", page).is_ok()
                && read("README.md").contains(&format!("({page})")),
            "README.md does not link {page}"
        );
    }
}

/// The output of `flowgate <args> --help`.
fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "flowgate {args:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The words starting with `prefix` in a text, each cut at the first character that is not
/// `[A-Za-z0-9_-]`.
fn words(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let tail = &rest[at..];
        let end = tail[prefix.len()..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(tail.len(), |e| e + prefix.len());
        let word = tail[..end].trim_end_matches(['-', '_']);
        if word.len() > prefix.trim_end_matches(['-', '_', '/']).len() {
            out.insert(word.to_owned());
        }
        rest = &tail[end.max(1)..];
    }
    out
}

#[test]
fn every_flag_and_variable_is_the_binarys() {
    let serve = help(&["serve"]);
    let mut known: BTreeSet<String> = words(&serve, "FLOWGATE_");
    for cmd in ["rules", "bench"] {
        known.extend(words(&help(&[cmd]), "FLOWGATE_"));
    }
    known.extend(OTHER_ENV.map(str::to_owned));
    assert!(
        known.contains("FLOWGATE_CONFIG"),
        "the help has changed shape: {serve}"
    );
    let mut unknown = Vec::new();
    for page in pages() {
        for var in words(&read(&page), "FLOWGATE_") {
            if !known.contains(&var) {
                unknown.push(format!("{page}: {var}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "variables the binary does not read:\n{}",
        unknown.join("\n")
    );

    let flags: Vec<String> = serve
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split([' ', '<']).next())
        .filter(|f| *f != "help")
        .map(|f| format!("--{f}"))
        .collect();
    assert!(flags.len() > 10, "the help has changed shape: {serve}");
    let operating = read("docs/operating.md");
    let missing: Vec<&String> = flags
        .iter()
        .filter(|f| !operating.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "serve flags missing from docs/operating.md: {missing:?}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable") {
        let p = entry.expect("readable").path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs" || x == "lua") {
            out.push(p);
        }
    }
}

#[test]
fn pages_named_in_the_sources_exist() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    let mut missing = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        for name in words(&text, "docs/") {
            // `docs/` is also a descriptor value in tests (`path=docs/*`): only page names count.
            if !text.contains(&format!("{name}.md")) {
                continue;
            }
            let page = format!("{name}.md");
            if !root().join(&page).exists() {
                missing.push(format!("{}: {page}", f.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "pages named in the sources that do not exist:\n{}",
        missing.join("\n")
    );
}

/// The pages whose queue examples are run.
const QUEUE_PAGES: [&str; 2] = ["README.md", "docs/queues.md"];

/// The admin token that stands for `<token>` in a server command and in `Bearer <token>`.
const ADMIN_TOKEN: &str = "docs-test-admin-token-0123456789abcdef0123456789abcdef";

/// The arguments of a server command a page shows (`flowgate serve …`, or
/// `cargo run … -p flowgate-server -- serve …`), after `flowgate`, preceded by the variables it
/// sets (`FLOWGATE_ADMIN_TOKEN=<token> flowgate serve …`); `None` for any other line.
fn server_command(line: &str) -> Option<Vec<String>> {
    let line = line.split(" #").next().unwrap_or("").trim();
    let mut words: Vec<&str> = line.split_whitespace().collect();
    let vars = words
        .iter()
        .take_while(|w| w.split_once('=').is_some_and(|(k, _)| is_variable(k)))
        .count();
    let assignments: Vec<String> = words.drain(..vars).map(str::to_owned).collect();
    let rest = words.join(" ");
    let args = if let Some(rest) = rest.strip_prefix("flowgate ") {
        rest.to_owned()
    } else if rest.starts_with("cargo run") && rest.contains("-p flowgate-server") {
        rest.split_once(" -- ")?.1.to_owned()
    } else {
        return None;
    };
    let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
    (args.first().map(String::as_str) == Some("serve"))
        .then(|| assignments.into_iter().chain(args).collect())
}

/// Whether `name` is a shell variable's name as the pages write them (`FLOWGATE_ADMIN_TOKEN`).
fn is_variable(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
}

/// A `flowgate serve` process started as a page shows it, killed on drop.
struct Served {
    child: Child,
    port: u16,
    _cwd: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server with `args` as a reader would from the repository's root, except for:
/// ephemeral loopback ports, a fresh working directory (for its data directory; paths that name
/// a file of the repository are made absolute), and `<token>` replaced by [`ADMIN_TOKEN`].
fn serve(command: &[String]) -> Result<Served, String> {
    let cwd = tempfile::tempdir().map_err(|e| e.to_string())?;
    let vars = command.iter().take_while(|a| a.as_str() != "serve").count();
    let env: Vec<(String, String)> = command[..vars]
        .iter()
        .filter_map(|a| a.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.replace("<token>", ADMIN_TOKEN)))
        .collect();
    let args: Vec<String> = command[vars..]
        .iter()
        .map(|a| {
            if a.contains(['"', '\'', '$', '`']) {
                return Err(format!("cannot run an argument with quotes or `$`: {a}"));
            }
            let a = a.replace("<token>", ADMIN_TOKEN);
            let file = root().join(&a);
            Ok(if !a.starts_with('-') && file.exists() {
                file.to_string_lossy().into_owned()
            } else {
                a
            })
        })
        .collect::<Result<_, _>>()?;
    let mut child = Command::new(BIN)
        .current_dir(cwd.path())
        .args(&args)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .env("FLOWGATE_LOG", "info")
        .env_remove("FLOWGATE_ADMIN_TOKEN")
        .env_remove("FLOWGATE_REDIS_URL")
        .envs(env)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {BIN}: {e}"))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("flowgate serving") {
                let _ = tx.send(line);
            }
        }
    });
    let mut served = Served {
        child,
        port: 0,
        _cwd: cwd,
    };
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| format!("`flowgate {}` did not start", args.join(" ")))?;
    served.port = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http_addr="))
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("no http_addr in {line}"))?;
    Ok(served)
}

/// The shell run before an example: `curl` is a function that sends the example's request to
/// the test's server (`localhost:8080` becomes its address; `Bearer <token>` the admin token;
/// any other `<token>` the token of the last lease answered), and stops the example with the
/// command and the answer unless it answers 2xx.
const CURL_WRAPPER: &str = r#"set -euo pipefail
LEASE_TOKEN=''
curl() {
  local args=() a code
  for a in "$@"; do
    a="${a//localhost:8080/127.0.0.1:$PORT}"
    a="${a//Bearer <token>/Bearer $ADMIN_TOKEN}"
    a="${a//<token>/$LEASE_TOKEN}"
    args+=("$a")
  done
  code=$(command curl -sS --max-time 30 -o "$BODY" -w '%{http_code}' "${args[@]}") || {
    echo "curl could not send: curl $*" >&2; exit 1; }
  echo "$code" >> "$CALLS"
  case "$code" in
    2??) ;;
    *) echo "answered $code: curl $*: $(cat "$BODY")" >&2; exit 1 ;;
  esac
  if [[ "$*" == *"/v1/queues/lease"* && "$code" == 200 ]]; then
    LEASE_TOKEN=$(sed -n 's/.*"token":"\([^"]*\)".*/\1/p' "$BODY")
  fi
}
"#;

/// Runs one example (a block of shell) against the server on `port`: every `curl` line must
/// answer 2xx, and every one must have been sent.
fn run_example(body: &str, port: u16) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let calls = dir.path().join("calls");
    let script = dir.path().join("example.sh");
    std::fs::write(&script, format!("{CURL_WRAPPER}\n{body}")).map_err(|e| e.to_string())?;
    let out = Command::new("bash")
        .arg(&script)
        .env("PORT", port.to_string())
        .env("ADMIN_TOKEN", ADMIN_TOKEN)
        .env("BODY", dir.path().join("body"))
        .env("CALLS", &calls)
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    let sent = std::fs::read_to_string(&calls)
        .unwrap_or_default()
        .lines()
        .count();
    let written = body
        .lines()
        .filter(|l| l.trim_start().starts_with("curl "))
        .count();
    if sent != written {
        return Err(format!(
            "{written} curl commands written, {sent} sent: every command of an example must run"
        ));
    }
    Ok(())
}

/// The queue examples of [`QUEUE_PAGES`], run as a reader would: each ` ```sh ` block that
/// calls `/v1/queues` runs (with bash and curl) against a server started with the last server
/// command the page showed before it, in a block of its own or beside commands that are not
/// examples (the README's first block). A page's server command starts a fresh server.
#[test]
fn every_queue_example_runs_against_the_server_the_page_starts() {
    assert!(
        Command::new("curl").arg("--version").output().is_ok(),
        "curl is not installed (scripts/test.sh installs it)"
    );
    let mut failures = Vec::new();
    for page in QUEUE_PAGES {
        let (blocks, _) = blocks(&read(page));
        let mut server: Option<Served> = None;
        let mut ran = 0;
        for b in blocks.iter().filter(|b| b.lang() == "sh") {
            let commands: Vec<Vec<String>> = b.body.lines().filter_map(server_command).collect();
            let example = b.body.contains("/v1/queues");
            match (commands.as_slice(), example) {
                ([], false) => {}
                ([args], false) => {
                    server = None;
                    match serve(args) {
                        Ok(s) => server = Some(s),
                        Err(e) => failures.push(format!("{page}:{}: {e}", b.line)),
                    }
                }
                (_, false) => failures.push(format!(
                    "{page}:{}: one server command per block, to know which to run",
                    b.line
                )),
                (_, true) if !commands.is_empty() => failures.push(format!(
                    "{page}:{}: a queue example beside a server command cannot run as written",
                    b.line
                )),
                (_, true) => {
                    let Some(s) = &server else {
                        failures.push(format!(
                            "{page}:{}: a queue example before any server command",
                            b.line
                        ));
                        continue;
                    };
                    ran += 1;
                    if let Err(e) = run_example(&b.body, s.port) {
                        failures.push(format!(
                            "{page}:{} (the example opened at that line): {e}",
                            b.line
                        ));
                    }
                }
            }
        }
        if ran == 0 {
            failures.push(format!("{page}: no queue example found"));
        }
    }
    assert!(
        failures.is_empty(),
        "queue examples that do not run as written:\n{}",
        failures.join("\n")
    );
}

#[test]
fn server_commands_are_read_from_either_form() {
    let args = |l: &str| server_command(l).map(|a| a.join(" "));
    assert_eq!(
        args("cargo run --release -p flowgate-server -- serve --config x.toml   # the server"),
        Some("serve --config x.toml".into())
    );
    assert_eq!(
        args("FLOWGATE_ADMIN_TOKEN=<token> flowgate serve --config x.toml"),
        Some("FLOWGATE_ADMIN_TOKEN=<token> serve --config x.toml".into())
    );
    assert_eq!(args("flowgate bench --duration 2s"), None);
    assert_eq!(args("./scripts/test.sh"), None);
}
