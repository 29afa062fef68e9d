//! A policy's result, parsed and written out once for as long as the policy hands back the
//! same one. regorus' VM loads a literal decision object as one shared constant, so every
//! call the same rule decides gets the very same object (one `Arc`): the default policy's
//! reads all do. Its verdict (about 2,400 instructions a call to parse) and its text in the
//! decision log (about 4,300 to write) are kept per thread with the object they came from.
//!
//! The kept object is held, so its allocation cannot be reused by another value while it
//! is kept, and regorus' values are never changed in place while shared (it copies them
//! first): the same pointer is the same content. Any other result (another rule's, an
//! object built per call, another policy set's) is parsed and written as before, and then
//! kept in turn.

use std::cell::RefCell;
use std::sync::Arc;

use regorus::Value;
use serde_json::value::RawValue;

use super::decision::Verdict;
use super::input::ToolKind;

/// The last result parsed on this thread, for a tool of `kind` (a missing `approval`
/// defaults by kind).
struct Parsed {
    result: Value,
    kind: ToolKind,
    verdict: Result<Verdict, String>,
}

/// The last result written on this thread, and its JSON text.
struct Written {
    result: Value,
    text: Arc<RawValue>,
}

thread_local! {
    static PARSED: RefCell<Option<Parsed>> = const { RefCell::new(None) };
    static WRITTEN: RefCell<Option<Written>> = const { RefCell::new(None) };
}

#[cfg(test)]
thread_local! {
    /// Results parsed on this thread (tests: the memo's hits are the parses not counted).
    static PARSES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The same object, not merely an equal one: a pointer comparison.
fn same(kept: &Value, result: &Value) -> bool {
    match (kept, result) {
        (Value::Object(kept), Value::Object(result)) => Arc::ptr_eq(kept, result),
        _ => false,
    }
}

/// [`Verdict::parse`] of `result`, from this thread's memo when `result` is the object it
/// parsed last for a tool of this kind.
pub(super) fn verdict(result: &Value, kind: ToolKind) -> Result<Verdict, String> {
    if !matches!(result, Value::Object(_)) {
        return Verdict::parse(result, kind);
    }
    let kept = PARSED.with(|slot| {
        let slot = slot.try_borrow().ok()?;
        let parsed = slot.as_ref()?;
        (parsed.kind == kind && same(&parsed.result, result)).then(|| parsed.verdict.clone())
    });
    if let Some(verdict) = kept {
        return verdict;
    }
    #[cfg(test)]
    PARSES.with(|parses| parses.set(parses.get() + 1));
    let verdict = Verdict::parse(result, kind);
    PARSED.with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = Some(Parsed {
                result: result.clone(),
                kind,
                verdict: verdict.clone(),
            });
        }
    });
    verdict
}

/// `result` as the decision log writes it (`write`: its JSON text), from this thread's memo
/// when `result` is the object it wrote last; `None` for a result that is not an object
/// (written in place, as it is rare) or that could not be written.
pub(super) fn text(
    result: &Value,
    write: impl FnOnce(&Value) -> Result<Box<RawValue>, serde_json::Error>,
) -> Option<Arc<RawValue>> {
    if !matches!(result, Value::Object(_)) {
        return None;
    }
    let kept = WRITTEN.with(|slot| {
        let slot = slot.try_borrow().ok()?;
        let written = slot.as_ref()?;
        same(&written.result, result).then(|| Arc::clone(&written.text))
    });
    if kept.is_some() {
        return kept;
    }
    let text: Arc<RawValue> = Arc::from(write(result).ok()?);
    WRITTEN.with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = Some(Written {
                result: result.clone(),
                text: Arc::clone(&text),
            });
        }
    });
    Some(text)
}

#[cfg(test)]
#[path = "memo_tests.rs"]
mod tests;
