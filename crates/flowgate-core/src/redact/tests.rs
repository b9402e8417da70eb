use proptest::prelude::*;

use super::*;

#[test]
fn secrets_are_hidden_and_the_destination_stays() {
    for (url, shown) in [
        (
            "http://user:pw@alerts.internal:9093/hook?token=abc&x=1",
            "http://user:<redacted>@alerts.internal:9093/hook?token=<redacted>&x=<redacted>",
        ),
        (
            "https://hooks.slack.com/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "https://hooks.slack.com/services/<redacted>/<redacted>/<redacted>",
        ),
        (
            "http://alertmanager:9093/api/v2/alerts",
            "http://alertmanager:9093/api/v2/alerts",
        ),
        (
            "http://key@relay/x#frag",
            "http://<redacted>@relay/x#<redacted>",
        ),
        ("http://relay:8080", "http://relay:8080"),
        ("http://relay/?secret", "http://relay/?<redacted>"),
        ("not a url with hunter2", "<redacted>"),
    ] {
        assert_eq!(redact_url(url), shown, "{url}");
    }
}

#[test]
fn urls_that_do_not_parse_are_redacted_too() {
    for (url, shown) in [
        (
            "redis://user:p@ss@host:bad-port/",
            "redis://user:<redacted>@host:bad-port/",
        ),
        (
            "redis://user:hunter2-secret@127.0.0.1:notaport/",
            "redis://user:<redacted>@127.0.0.1:notaport/",
        ),
        (
            "redis+cluster://u:pw@h1:1,h2:2",
            "redis+cluster://u:<redacted>@h1:1,h2:2",
        ),
        ("rediss://:pw@host", "rediss://:<redacted>@host"),
        ("redis://u:p#w/x?y@host/0", "redis://u:<redacted>@host/0"),
        ("u:pw@host:6379", "u:<redacted>@host:6379"),
        // Not a scheme: the text before `://` holds a password.
        ("u:p://w@host", "u:<redacted>@host"),
        (
            "redis://h:6379/0?Password=hunter2&TOKEN=t&key=k&secret=s",
            "redis://h:6379/0?Password=<redacted>&TOKEN=<redacted>&key=<redacted>&secret=<redacted>",
        ),
    ] {
        assert_eq!(redact_url(url), shown, "{url}");
        assert_eq!(Redacted(url).to_string(), shown, "{url}");
    }
}

/// A host: a name or an IPv4 address, with a port (a number, or a word: a URL that does not
/// parse) or none.
fn host() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        "[a-z][a-z0-9-]{0,10}(\\.[a-z]{2,5}){0,2}",
        "(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})(\\.[0-9]{1,3}){3}",
    ];
    let port = prop_oneof![
        Just(String::new()),
        (0u32..70_000).prop_map(|p| format!(":{p}")),
        "[a-z-]{1,8}".prop_map(|p| format!(":{p}")),
    ];
    (name, port).prop_map(|(n, p)| format!("{n}{p}"))
}

/// A password of any characters, often with those that end a URL's parts.
fn password() -> impl Strategy<Value = String> {
    prop_oneof!["[@:/%#?,&=a-zA-Z0-9]{1,24}", "\\PC{1,24}"]
}

/// The user information: `user:password`, `:password` or a key alone.
fn user_info() -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof!["[a-zA-Z0-9._~-]{0,10}", "\\PC{0,10}"],
        password(),
        0..3,
    )
        .prop_map(|(user, pw, form)| match form {
            0 => (format!("{user}:{pw}"), pw),
            1 => (format!(":{pw}"), pw),
            // A key holding `:` reads as `user:password`: its secret is what follows the `:`.
            _ => match pw.split_once(':') {
                Some((_, secret)) if !secret.is_empty() => (pw.clone(), secret.to_owned()),
                Some(_) => (format!(":{pw}"), pw),
                None => (pw.clone(), pw),
            },
        })
}

/// A URL with user information: one server or a cluster's nodes, a scheme or none, and a path
/// and query without `@`.
fn url() -> impl Strategy<Value = (String, String, String)> {
    let scheme = prop_oneof![
        Just("redis://"),
        Just("rediss://"),
        Just("redis+cluster://"),
        Just("rediss+cluster://"),
        Just("https://"),
        Just(""),
    ];
    let tail = prop_oneof![
        Just(String::new()),
        Just("/".to_owned()),
        "/[0-9]{1,2}",
        "(/[a-z]{1,8}){1,3}(\\?[a-z]{1,6}=[a-z0-9]{1,6})?",
    ];
    (
        scheme,
        user_info(),
        prop::collection::vec(host(), 1..4),
        tail,
    )
        .prop_map(|(scheme, (info, pw), hosts, tail)| {
            let n = if scheme.contains("cluster") {
                hosts.len()
            } else {
                1
            };
            let hosts = hosts[..n].join(",");
            (format!("{scheme}{info}@{hosts}{tail}"), pw, hosts)
        })
}

proptest! {
    #[test]
    fn the_password_never_shows_and_the_host_does((url, pw, hosts) in url()) {
        // The password must not occur elsewhere, nor across what stands around it once hidden.
        let skeleton = url.replacen(&pw, REDACTED, 1);
        prop_assume!(!skeleton.contains(&pw));
        let shown = redact_url(&url);
        prop_assert!(!shown.contains(&pw), "{url} shown as {shown}");
        prop_assert!(shown.contains(&format!("@{hosts}")), "{url} shown as {shown}");
    }
}

#[test]
fn a_sentinel_url_shows_its_sentinels_and_master_not_its_password() {
    assert_eq!(
        redact_url("redis+sentinel://app:s3cr@t@10.0.0.1:26379,10.0.0.2:26379/mymaster"),
        "redis+sentinel://app:<redacted>@10.0.0.1:26379,10.0.0.2:26379/mymaster"
    );
    assert_eq!(
        redact_url("rediss+sentinel://:pw@[::1]:26379,h2/payments"),
        "rediss+sentinel://:<redacted>@[::1]:26379,h2/payments"
    );
    assert_eq!(
        redact_url("redis+sentinel://h1:26379,h2:26379/mymaster"),
        "redis+sentinel://h1:26379,h2:26379/mymaster"
    );
}
