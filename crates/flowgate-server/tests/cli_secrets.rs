//! The `flowgate` binary keeps secrets out of its fatal errors: a Redis URL that does not parse,
//! or an Alertmanager or external URL that is refused, is named redacted, never with its
//! password.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_flowgate");
const SECRET: &str = "hunter2-secret";

/// The standard error of `flowgate serve` on the example configuration with `args`, which must
/// exit with a failure.
fn fails_with(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/flowgate.toml");
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} started: {err}");
    err
}

#[test]
fn a_redis_url_that_does_not_parse_is_named_without_its_password() {
    for url in [
        format!("redis://user:{SECRET}@127.0.0.1:notaport/"),
        format!("redis://user:p@{SECRET}@127.0.0.1:notaport/"),
        format!("redis+cluster://user:{SECRET}@127.0.0.1:notaport,127.0.0.1:1"),
        format!("redis+sentinel://user:{SECRET}@127.0.0.1:notaport,127.0.0.1:1/mymaster"),
    ] {
        let err = fails_with(&["--redis-url", &url]);
        assert!(!err.contains(SECRET), "{url}: {err}");
        assert!(
            err.contains("cannot use Redis at redis") && err.contains("127.0.0.1:notaport"),
            "{url}: {err}"
        );
    }
}

#[test]
fn refused_alertmanager_and_external_urls_are_named_without_their_password() {
    for (flag, url, why) in [
        (
            "--alertmanager-url",
            format!("https://am:{SECRET}@alerts.internal:9093"),
            "plain http://",
        ),
        (
            "--external-url",
            format!("ftp://me:{SECRET}@flowgate.example.com"),
            "is not an http:// or https:// URL",
        ),
    ] {
        let err = fails_with(&[flag, &url]);
        assert!(!err.contains(SECRET), "{url}: {err}");
        assert!(err.contains(flag) && err.contains(why), "{url}: {err}");
    }
}
