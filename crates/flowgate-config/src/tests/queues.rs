//! Queues.

use super::*;

#[test]
fn queue_errors_name_file_line_and_field() {
    let bad = |text: &str| toml_read("q.toml", text).unwrap_err().to_string();
    let e = bad("[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"0/s\"\n");
    assert!(e.starts_with("q.toml:5: field `queue[0].rate`"), "{e}");
    let e = bad(
        "[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nlease = \"soon\"\n",
    );
    assert!(e.starts_with("q.toml:6: field `queue[0].lease`"), "{e}");
    let e = bad(
        "[[rule]]\ndomain = \"d\"\nname = \"r\"\nmatch = \"c\"\nlimit = 1\n[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nburst = \"x\"\n",
    );
    assert!(e.starts_with("q.toml:11: field `queue[0].burst`"), "{e}");
    let e = bad("[[queue]]\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\n");
    assert!(
        e.contains("field `queue[0].domain`") && e.contains("no domain"),
        "{e}"
    );
    let e = bad(
        "[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nmax_depth = 0\n",
    );
    assert!(e.starts_with("q.toml:6: field `queue[0].max_depth`"), "{e}");
    let e =
        bad("[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\nspeed = 3\n");
    assert!(
        e.contains("queue[0].speed") && e.contains("unknown field"),
        "{e}"
    );
    // Two queues with one name: the second is named.
    let crate::located::Declared { queues, .. } = toml_read(
        "q.toml",
        "domain = \"d\"\n[[queue]]\nname = \"q\"\nmatch = \"a\"\nrate = \"1/s\"\n[[queue]]\nname = \"q\"\nmatch = \"b\"\nrate = \"1/s\"\n",
    )
    .unwrap();
    let config = Config {
        queues,
        ..Config::default()
    };
    let e = config.queue_set().unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (Some(6), "queue[1]"), "{e}");
    assert!(e.message.contains("two queues"), "{e}");
    // Queues are not set through the admin API.
    let e = parse(
        "<api>",
        Format::Toml,
        "[[queue]]\ndomain = \"d\"\nname = \"q\"\nmatch = \"c\"\nrate = \"1/s\"\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("not through the admin API"), "{e}");
}
