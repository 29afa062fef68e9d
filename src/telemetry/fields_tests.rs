//! `PlainFields` against `DefaultFields`: the same records give the same bytes, with and
//! without colours.

use tracing::field::Empty;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::DefaultFields;

use super::PlainFields;
use crate::telemetry::fallback::capture::Capture;

#[derive(Debug, thiserror::Error)]
#[error("outer \"failed\"")]
struct Outer {
    #[source]
    source: std::io::Error,
}

#[derive(Debug, thiserror::Error)]
#[error("alone\nwith a newline")]
struct Alone;

/// Spans and events with every kind of field the formatter treats apart.
fn records() {
    let span = tracing::info_span!(
        "tool_call",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = "host_get",
        zabbix.method = "host.get",
        user.id = %1,
        token_id = %"5e8f0c1d2a3b4c5d",
    );
    let _entered = span.enter();
    tracing::info!(
        count = 3,
        ratio = 0.5,
        ok = true,
        big = u128::MAX,
        neg = -7i64,
        "done"
    );
    tracing::info!(
        quote = "say \"hi\"",
        backslash = "a\\b",
        tab = "a\tb",
        newline = "a\nb",
        nul = "\0",
        escape = "\u{1b}[31mred",
        unicode = "zäbbix ✓",
        combining = "e\u{301}",
        empty = "",
        apostrophe = "~ 'quoted'",
        del = "\u{7f}",
    );
    tracing::info!(message = "first \u{1b}[2J", r#type = "raw", after = "x");
    tracing::info!(r#type = "only", "message {}", 1);
    let outer = Outer {
        source: std::io::Error::other("inner \u{1b}[1m"),
    };
    tracing::warn!(
        error = &outer as &(dyn std::error::Error + 'static),
        "failed"
    );
    tracing::warn!(
        before = "b",
        error = &Alone as &(dyn std::error::Error + 'static)
    );
    tracing::info!(log.target = "skipped", kept = "yes");
    tracing::info!(log.target = "first and skipped");
    tracing::info!(
        debug = ?vec!["a", "b"],
        display = %"shown \"as is\"",
        path = ?std::path::Path::new("/tmp/x y"),
        bytes = &b"\x00\xff"[..],
    );
    let later = tracing::info_span!("later", a = Empty, b = "set", c = Empty);
    later.record("a", "recorded later");
    later.record("c", 7);
    later.in_scope(|| tracing::info!("inside"));
    tracing::info_span!("empty").in_scope(|| tracing::info!(n = 1));
}

/// What the fmt layer writes for [`records`] with `fields` as its field formatter.
fn written<N>(fields: N, ansi: bool) -> String
where
    N: for<'w> FormatFields<'w> + Send + Sync + 'static,
{
    let lines = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .fmt_fields(fields)
        .with_max_level(tracing::Level::TRACE)
        .with_writer(lines.clone())
        .with_ansi(ansi)
        .without_time()
        .finish();
    tracing::subscriber::with_default(subscriber, records);
    lines.text()
}

#[test]
fn plain_fields_are_written_as_default_fields_writes_them() {
    let ours = written(PlainFields, false);
    assert_eq!(ours, written(DefaultFields::new(), false));
    // Eleven events; one error's message breaks its line, as `DefaultFields` leaves it.
    assert_eq!(ours.lines().count(), 12, "{ours}");
    assert!(
        ours.contains(
            "tool_call{mcp.method.name=\"tools/call\" gen_ai.tool.name=\"host_get\" \
             zabbix.method=\"host.get\" user.id=1 token_id=5e8f0c1d2a3b4c5d}"
        ),
        "{ours}"
    );
    assert!(ours.contains(r#"quote="say \"hi\"""#), "{ours}");
}

#[test]
fn on_a_terminal_default_fields_writes_every_field() {
    let ours = written(PlainFields, true);
    assert_eq!(ours, written(DefaultFields::new(), true));
    assert!(ours.contains("\u{1b}[3mgen_ai.tool.name"), "{ours}");
}
