//! How the fmt layer writes a span's or an event's fields: exactly as tracing-subscriber's
//! `DefaultFields` does, byte for byte, but with the plain fields written directly. A span's
//! fields are formatted when it opens, whether or not anything inside it is ever logged, and
//! every tool call opens one with five (`tool_call`): `DefaultFields` formats each through
//! three `fmt` arguments and two colour styles that print nothing without a terminal.
//!
//! Plain here means: no colours (not a terminal), a field other than `message` and `r#…`,
//! recorded as a string or through `Debug`/`Display`. Everything else, and every field on a
//! terminal, is written by `DefaultFields`' own visitor.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Writer};

/// The fmt layer's `FormatFields`: [`DefaultFields`]' output.
#[derive(Debug, Default)]
pub(crate) struct PlainFields;

/// Writes one record's fields, space-separated, as `DefaultVisitor` does.
struct PlainVisitor<'a> {
    writer: Writer<'a>,
    /// Nothing written yet: the next field needs no separating space.
    is_empty: bool,
    result: fmt::Result,
}

/// How `DefaultVisitor` treats a field, by its name.
enum Kind<'a> {
    /// `log.…`: metadata of records from the `log` crate, already shown; never written.
    Skipped,
    /// `message` (written without its name, ANSI escapes sanitized) and `r#…` (the prefix
    /// dropped): left to `DefaultVisitor`.
    Special,
    /// `name=value`.
    Plain(&'a str),
}

impl<'w> FormatFields<'w> for PlainFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        if writer.has_ansi_escapes() {
            return DefaultFields::new().format_fields(writer, fields);
        }
        let mut visitor = PlainVisitor {
            writer,
            is_empty: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

impl<'a> Kind<'a> {
    fn of(name: &'a str) -> Self {
        if name.starts_with("log.") {
            Kind::Skipped
        } else if name == "message" || name.starts_with("r#") {
            Kind::Special
        } else {
            Kind::Plain(name)
        }
    }
}

impl PlainVisitor<'_> {
    /// Starts a plain field with `name=`; `None` when nothing more is to be written for the
    /// field: skipped, written by `DefaultVisitor` instead, or a write failed.
    fn start(
        &mut self,
        field: &Field,
        default: impl FnOnce(&mut DefaultVisitor<'_>),
    ) -> Option<()> {
        if self.result.is_err() {
            return None;
        }
        let name = match Kind::of(field.name()) {
            Kind::Skipped => return None,
            Kind::Special => {
                self.by_default(default);
                return None;
            }
            Kind::Plain(name) => name,
        };
        if !std::mem::take(&mut self.is_empty) {
            self.result = self.writer.write_char(' ');
        }
        self.result = self
            .result
            .and_then(|()| self.writer.write_str(name))
            .and_then(|()| self.writer.write_char('='));
        self.result.is_ok().then_some(())
    }

    /// One field written by `DefaultVisitor`, continuing this record.
    fn by_default(&mut self, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        record(&mut visitor);
        self.result = visitor.finish();
        self.is_empty = false;
    }
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.start(field, |v| v.record_str(field, value)).is_none() {
            return;
        }
        // A string's `Debug` form is itself in quotes when no character needs escaping.
        self.result = if value
            .bytes()
            .all(|b| matches!(b, b' '..=b'~') && b != b'"' && b != b'\\')
        {
            self.writer
                .write_char('"')
                .and_then(|()| self.writer.write_str(value))
                .and_then(|()| self.writer.write_char('"'))
        } else {
            write!(self.writer, "{value:?}")
        };
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self
            .start(field, |v| v.record_debug(field, value))
            .is_none()
        {
            return;
        }
        self.result = write!(self.writer, "{value:?}");
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.result.is_ok() && !matches!(Kind::of(field.name()), Kind::Skipped) {
            self.by_default(|v| v.record_error(field, value));
        }
    }
}

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
