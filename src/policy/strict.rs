//! A builtin's error denies. regorus' VM reads it as undefined and goes on, inside rule
//! bodies whatever `set_strict_builtin_errors` says (only limit errors get out): a `deny
//! contains msg if time.parse_duration_ns(input.arguments.search) > ...` did not hold for a
//! search that is no duration, and the call was allowed. The interpreter and the `policy
//! test` runner stop at such an error. So each builtin slot of a compiled program calls its
//! builtin through a guard that notes the first error of the run, and the run is then an
//! evaluation error.
//!
//! The guard also holds the run to its time limit. regorus looks at its clock every 1024
//! instructions, and a builtin call is one instruction however long it runs, so a loop
//! splitting an agent's 900 names (229,500 characters) into characters once per name held
//! the runtime's one thread 6.5 s past a 50 ms limit (release build). Each guarded call
//! reads the clock when it returns: past the limit, the run ends with a limit error (a
//! denial), so a run holds its thread for at most its limit and one builtin call.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

use regorus::unstable::{Expr, Ref, Span};
use regorus::{LimitError, Value};

/// The builtin functions of a program, by slot.
pub(crate) type Builtin = fn(&Span, &[Ref<Expr>], &[Value], bool) -> anyhow::Result<Value>;

/// Builtin slots a program may have (the shipped policies use some 15).
const SLOTS: usize = 128;

thread_local! {
    /// The builtins of the program this thread is running, while it runs.
    static BUILTINS: RefCell<Option<Arc<[Builtin]>>> = const { RefCell::new(None) };
    /// The first builtin error of this thread's run.
    static FAILED: Cell<Option<String>> = const { Cell::new(None) };
    /// When this thread's run started, and its time limit.
    static CLOCK: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
}

macro_rules! guards {
    ($($slot:literal)*) => { [$(guard::<$slot> as Builtin),*] };
}

const GUARDS: [Builtin; SLOTS] = guards!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127);

/// Puts the guards in the program's slots and gives back what they call, or `None` for a
/// program with more slots than there are guards.
pub(crate) fn guard_slots(slots: &mut [(Builtin, u8)]) -> Option<Arc<[Builtin]>> {
    if slots.len() > SLOTS {
        return None;
    }
    let builtins: Arc<[Builtin]> = slots.iter().map(|(builtin, _)| *builtin).collect();
    for ((slot, _), guard) in slots.iter_mut().zip(GUARDS) {
        *slot = guard;
    }
    Some(builtins)
}

/// One run of a guarded program on this thread.
pub(crate) struct Run(());

impl Run {
    pub(crate) fn start(builtins: &Arc<[Builtin]>, limit: Duration) -> Self {
        BUILTINS.with(|cell| *cell.borrow_mut() = Some(Arc::clone(builtins)));
        FAILED.with(|failed| failed.set(None));
        CLOCK.with(|clock| clock.set(Some((Instant::now(), limit))));
        Self(())
    }

    /// The first builtin error of the run.
    pub(crate) fn failure(self) -> Option<String> {
        FAILED.with(Cell::take)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // Also on a panic: no program is kept alive in an idle thread-local.
        BUILTINS.with(|cell| cell.borrow_mut().take());
        FAILED.with(|failed| failed.set(None));
        CLOCK.with(|clock| clock.set(None));
    }
}

fn guard<const SLOT: usize>(
    span: &Span,
    params: &[Ref<Expr>],
    args: &[Value],
    strict: bool,
) -> anyhow::Result<Value> {
    let builtin = BUILTINS.with(|cell| cell.borrow().as_ref().and_then(|b| b.get(SLOT).copied()));
    let result = match builtin {
        Some(builtin) => builtin(span, params, args, strict),
        None => Err(anyhow::anyhow!("builtin slot {SLOT} is not set")),
    };
    // Limit errors already end the run.
    if let Err(e) = &result
        && !e.is::<LimitError>()
    {
        FAILED.with(|failed| {
            let first = failed.take();
            failed.set(first.or_else(|| Some(last_line(&e.to_string()))));
        });
    }
    out_of_time()?;
    result
}

/// A limit error once this thread's run is past its time limit (regorus propagates it
/// even under `not`, and the engine denies with it).
fn out_of_time() -> Result<(), LimitError> {
    let Some((started, limit)) = CLOCK.with(Cell::get) else {
        return Ok(());
    };
    let elapsed = started.elapsed();
    if elapsed <= limit {
        return Ok(());
    }
    Err(LimitError::TimeLimitExceeded { elapsed, limit })
}

/// regorus' errors quote the policy's source over several lines; the last says what. It
/// may quote agent text: escaped and cut.
fn last_line(message: &str) -> String {
    let line = message
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default();
    let cut: String = line.trim().chars().take(200).collect();
    crate::display::escape_text(&cut)
}
