//! [`redact_to_origin`]: the scheme and host alone, whatever the rest holds.

use proptest::prelude::*;

use super::*;

#[test]
fn only_the_scheme_and_host_show() {
    for (url, shown) in [
        (
            "https://user:pw@hooks.slack.com/services/T000/B000/XXXX?x=1",
            "https://hooks.slack.com/<redacted>",
        ),
        (
            "https://events.pagerduty.com/integration/0123abcd/enqueue",
            "https://events.pagerduty.com/<redacted>",
        ),
        (
            "http://alertmanager:9093/api/v2/alerts",
            "http://alertmanager:9093/<redacted>",
        ),
        ("http://key@relay", "http://relay/<redacted>"),
        ("http://@relay", "http://relay/<redacted>"),
        ("http://a:b@c@relay:80", "http://relay:80/<redacted>"),
        ("http://relay?secret", "http://relay/<redacted>"),
        ("http://relay#secret", "http://relay/<redacted>"),
        ("http://[::1]:9093/hook", "http://[::1]:9093/<redacted>"),
        // Nothing to hide: shown whole.
        ("http://am:9093", "http://am:9093"),
        ("http://am:9093/", "http://am:9093/"),
    ] {
        assert_eq!(redact_to_origin(url), shown, "{url}");
    }
}

#[test]
fn a_host_that_cannot_be_told_is_hidden_too() {
    for (url, shown) in [
        // A password holding `/`, or an `@` in the path or query: which is the host?
        ("http://u:pa/ss@host/x", "http://<redacted>"),
        ("http://relay/x?to=ops@example.com", "http://<redacted>"),
        ("http://relay/a@b", "http://<redacted>"),
        ("http://u:p#w@host", "http://<redacted>"),
        // No scheme.
        ("not a url with hunter2", "<redacted>"),
        ("u:p://w@host", "<redacted>"),
        ("hooks.slack.com/services/T0/B0/X", "<redacted>"),
    ] {
        assert_eq!(redact_to_origin(url), shown, "{url}");
    }
}

/// A host, with a port or none.
fn origin() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        "[a-z][a-z0-9-]{0,10}(\\.[a-z]{2,5}){0,2}",
        "(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})(\\.[0-9]{1,3}){3}",
        Just("[::1]".to_owned()),
    ];
    let port = prop_oneof![
        Just(String::new()),
        (0u32..70_000).prop_map(|p| format!(":{p}"))
    ];
    (name, port).prop_map(|(n, p)| format!("{n}{p}"))
}

/// Random text, often with the characters that end or split a URL's parts.
fn text() -> impl Strategy<Value = String> {
    prop_oneof!["\\PC{1,12}", "[@:/?#&=%a-z0-9]{1,12}"]
}

/// The parts of a URL: scheme, host and port, user information, path segments (or a bare `/`),
/// query, fragment.
type Parts = (
    &'static str,
    String,
    Option<String>,
    Option<Vec<String>>,
    Option<String>,
    Option<String>,
);

fn parts() -> impl Strategy<Value = Parts> {
    let scheme = prop_oneof![Just("http"), Just("https"), Just("redis+cluster")];
    (
        scheme,
        origin(),
        prop::option::of(text()),
        prop::option::of(prop::collection::vec(text(), 0..4)),
        prop::option::of(text()),
        prop::option::of(text()),
    )
}

proptest! {
    #[test]
    fn nothing_but_the_origin_shows((scheme, host, user, path, query, fragment) in parts()) {
        let path = path.map(|s| format!("/{}", s.join("/"))).unwrap_or_default();
        let tail = format!(
            "{path}{}{}",
            query.as_ref().map(|q| format!("?{q}")).unwrap_or_default(),
            fragment.as_ref().map(|f| format!("#{f}")).unwrap_or_default(),
        );
        let info = user.as_ref().map(|u| format!("{u}@")).unwrap_or_default();
        let url = format!("{scheme}://{info}{host}{tail}");
        let shown = redact_to_origin(&url);

        // None of the user information, path, query or fragment shows (unless it is some of
        // what is shown anyway).
        let skeleton = format!("{scheme}://{host}/{REDACTED}");
        let secrets = user.iter().chain(&query).chain(&fragment).map(String::as_str)
            .chain(path.split('/'));
        for secret in secrets.filter(|s| !s.is_empty() && !skeleton.contains(s)) {
            prop_assert!(!shown.contains(secret), "{url} shown as {shown}: {secret}");
        }

        // Its form: the origin, then `/<redacted>` if there was more; all but the scheme
        // hidden when an `@` leaves the host in doubt.
        let doubt = user.as_ref().is_some_and(|u| u.contains(['/', '?', '#']))
            || tail.contains('@');
        let expected = if doubt {
            format!("{scheme}://{REDACTED}")
        } else if user.is_some() || !matches!(tail.as_str(), "" | "/") {
            format!("{scheme}://{host}/{REDACTED}")
        } else {
            url.clone()
        };
        prop_assert_eq!(&shown, &expected, "{}", url);
        // What differs from the URL holds `<redacted>`, which `PUT /v1/rules` refuses.
        prop_assert!(shown == url || shown.contains(REDACTED));
    }
}
