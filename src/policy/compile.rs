//! Compiling a policy set and evaluating it. The set is compiled once into an RVM program
//! shared by all threads; each thread keeps its own VM for the current set (a VM is
//! mutable while it runs), so the hot path is `set_input` + `execute` with no locking and
//! no allocation beyond the input itself.

use std::cell::RefCell;
use std::num::NonZeroU32;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::program::Program;
use regorus::rvm::vm::RegoVM;
use regorus::utils::limits::{ExecutionTimerConfig, set_fallback_execution_timer_config};
use regorus::{CompiledPolicy, Engine, Value};

use super::source::{PolicySources, Revision};
use super::strict::{Builtin, Run};
use super::{ENTRYPOINT, PolicyError};

/// Instruction budget per evaluation. The shipped policies need a few hundred; the
/// regorus default (25 000) could be hit by a legitimate loop over a long ID list.
const MAX_INSTRUCTIONS: usize = 1_000_000;

/// Wall-clock budget per evaluation, checked every `TIMER_CHECK_INTERVAL` instructions and
/// after every builtin call. Debug builds (the tests) run builtins ten to thirty times
/// slower: on a loaded machine a bounded builtin at its bound (a 1 MiB `concat`) took 75 ms
/// there, and splitting 918 kB of names before a bound was reached over 1 s, so they get
/// 5 s, and a test sees the bound it tests rather than the clock.
const EVAL_TIME_LIMIT: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(5)
} else {
    Duration::from_millis(50)
};
const TIMER_CHECK_INTERVAL: u32 = 1024;

/// Makes every compiled set distinguishable from every other (thread-local VM caches key
/// on it), also across engines in one process.
static NEXT_SET_ID: AtomicU64 = AtomicU64::new(1);

/// The interpreter's engine for each evaluation is a new one (`CompiledPolicy::eval_with_input`)
/// that keeps no timer of the compiling engine's: it takes regorus' process-wide fallback,
/// set here once, before any set is compiled.
static INTERPRETER_TIMER: Once = Once::new();

/// One compiled policy directory.
pub(crate) struct PolicySet {
    pub(crate) id: u64,
    pub(crate) revision: Revision,
    /// `data` as loaded from `data.json` (an empty object without one).
    data: Value,
    evaluator: Evaluator,
}

/// How a set is evaluated.
enum Evaluator {
    /// The compiled VM: the normal case; with the builtins its guarded slots call.
    Vm(Arc<Program>, Arc<[Builtin]>),
    /// The tree-walking interpreter, only for a set the VM compiler rejected.
    Interpreter(Box<CompiledPolicy>),
}

/// A thread's VM, loaded with one set's program and data.
struct CachedVm {
    set_id: u64,
    vm: RegoVM,
}

thread_local! {
    static VM: RefCell<Option<CachedVm>> = const { RefCell::new(None) };
}

impl std::fmt::Debug for PolicySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Programs and data are large and say nothing useful in a log line.
        f.debug_struct("PolicySet")
            .field("id", &self.id)
            .field("revision", &self.revision)
            .field("vm", &self.uses_vm())
            .finish_non_exhaustive()
    }
}

impl PolicySet {
    /// Parses, compiles and prepares the VM program of `sources`.
    pub(crate) fn compile(sources: &PolicySources) -> Result<Self, PolicyError> {
        INTERPRETER_TIMER.call_once(|| {
            set_fallback_execution_timer_config(Some(interpreter_timer_config()));
        });
        let data = parse_data(sources)?;
        let mut engine = Engine::new();
        engine.set_execution_timer_config(timer_config());
        // The interpreter's default, said: a builtin's error ends the evaluation (the VM's
        // builtins are guarded to the same effect, see `strict`).
        engine.set_strict_builtin_errors(true);
        super::bounded::bound_engine(&mut engine)
            .map_err(|e| PolicyError::Compile(format!("bounded builtins: {e}")))?;
        for (name, contents) in &sources.modules {
            engine
                .add_policy(name.clone(), contents.clone())
                .map_err(|e| PolicyError::Compile(e.to_string()))?;
        }
        engine
            .add_data(data.clone())
            .map_err(|e| PolicyError::Compile(format!("data.json: {e}")))?;
        let compiled = engine
            .compile_with_entrypoint(&ENTRYPOINT.into())
            .map_err(|e| PolicyError::Compile(format!("{ENTRYPOINT}: {e}")))?;
        let evaluator = match Compiler::compile_from_policy(&compiled, &[ENTRYPOINT]) {
            Ok(mut program) => {
                if let Some(cycle) = super::recursion::find_cycle(&program) {
                    return Err(PolicyError::Compile(format!(
                        "recursive rules (Rego has no recursion): {}",
                        cycle.join(" -> ")
                    )));
                }
                super::bounded::bound_program(Arc::make_mut(&mut program));
                let guarded =
                    super::strict::guard_slots(&mut Arc::make_mut(&mut program).resolved_builtins);
                // Data that collides with a rule path is only detected when a VM takes it.
                new_vm(&program, &data)?;
                match guarded {
                    Some(builtins) => Evaluator::Vm(program, builtins),
                    None => {
                        tracing::warn!(
                            revision = %sources.revision,
                            "policy set uses more builtins than the VM's guards: using the interpreter"
                        );
                        Evaluator::Interpreter(Box::new(compiled))
                    }
                }
            }
            Err(e) => {
                tracing::warn!(
                    revision = %sources.revision,
                    error = %e,
                    "policy set not supported by the regorus VM; using the slower interpreter"
                );
                Evaluator::Interpreter(Box::new(compiled))
            }
        };
        Ok(Self {
            id: NEXT_SET_ID.fetch_add(1, Ordering::Relaxed),
            revision: sources.revision.clone(),
            data,
            evaluator,
        })
    }

    /// Whether decisions run on the compiled VM (false: interpreter fallback).
    pub(crate) fn uses_vm(&self) -> bool {
        matches!(self.evaluator, Evaluator::Vm(..))
    }

    /// Evaluates the entrypoint for `input`. `Ok(Value::Undefined)` means the policy
    /// produced no decision.
    pub(crate) fn evaluate(&self, input: Value) -> Result<Value, PolicyError> {
        // regorus' builtins have panicked on agent text (`time.parse_duration_ns("1é")`):
        // the unwinding ended the request's task with no answer and no decision line. Caught,
        // it is an evaluation error like any other (a denial, logged), and this thread's VM,
        // stopped half way through a run, is not trusted with the next one.
        panic::catch_unwind(AssertUnwindSafe(|| self.evaluate_unguarded(input))).unwrap_or_else(
            |payload| {
                drop_cached_vm();
                tracing::error!(
                    revision = %self.revision,
                    panic = %crate::display::escape_text(panic_message(payload.as_ref())),
                    "policy evaluation panicked inside regorus: denied"
                );
                Err(PolicyError::Panic)
            },
        )
    }

    fn evaluate_unguarded(&self, input: Value) -> Result<Value, PolicyError> {
        match &self.evaluator {
            Evaluator::Vm(program, builtins) => self.evaluate_vm(program, builtins, input),
            Evaluator::Interpreter(compiled) => compiled
                .eval_with_input(input)
                .map_err(|e| PolicyError::Eval(e.to_string())),
        }
    }

    fn evaluate_vm(
        &self,
        program: &Arc<Program>,
        builtins: &Arc<[Builtin]>,
        input: Value,
    ) -> Result<Value, PolicyError> {
        VM.with(|cell| {
            // A re-entrant call cannot happen today; if it ever does, a throwaway VM
            // keeps it correct instead of panicking on the RefCell.
            let Ok(mut slot) = cell.try_borrow_mut() else {
                let mut vm = new_vm(program, &self.data)?;
                return run(&mut vm, builtins, input);
            };
            // Used where it lies: a VM is some 700 bytes, and taking it out and putting it
            // back copied it four times per evaluation.
            let cached = match &mut *slot {
                Some(c) if c.set_id == self.id => c,
                stale => stale.insert(CachedVm {
                    set_id: self.id,
                    vm: new_vm(program, &self.data)?,
                }),
            };
            let result = run(&mut cached.vm, builtins, input);
            // A VM that failed mid-run is dropped rather than trusted with the next call.
            if result.is_err() {
                *slot = None;
            }
            result
        })
    }
}

/// Forgets this thread's VM; the next evaluation makes a new one.
fn drop_cached_vm() {
    VM.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = None;
        }
    });
}

/// The text a panic was raised with, as far as it is text; it may quote agent text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

fn run(vm: &mut RegoVM, builtins: &Arc<[Builtin]>, input: Value) -> Result<Value, PolicyError> {
    let guarded = Run::start(builtins, EVAL_TIME_LIMIT);
    vm.set_input(input);
    let result = vm.execute().map_err(|e| PolicyError::Eval(e.to_string()));
    // Do not keep the caller's arguments alive in an idle thread-local.
    vm.set_input(Value::Null);
    match (result, guarded.failure()) {
        (Ok(_), Some(error)) => Err(PolicyError::Eval(format!("a builtin failed: {error}"))),
        (result, _) => result,
    }
}

fn new_vm(program: &Arc<Program>, data: &Value) -> Result<RegoVM, PolicyError> {
    let mut vm = RegoVM::new();
    vm.load_program(Arc::clone(program));
    vm.set_max_instructions(MAX_INSTRUCTIONS);
    vm.set_execution_timer_config(Some(timer_config()));
    vm.set_data(data.clone())
        .map_err(|e| PolicyError::Compile(format!("data.json conflicts with the policy: {e}")))?;
    Ok(vm)
}

fn timer_config() -> ExecutionTimerConfig {
    ExecutionTimerConfig {
        limit: EVAL_TIME_LIMIT,
        check_interval: NonZeroU32::new(TIMER_CHECK_INTERVAL).unwrap_or(NonZeroU32::MIN),
    }
}

/// The interpreter reads its clock at every step, not every 1024th: a step may be one
/// builtin call on all of an agent's text, so a loop splitting the agent's names into
/// characters once per name held the runtime's one thread 4.4 s past a 50 ms limit
/// (release build). (The VM's builtin calls read it in their guard, see `strict`.)
fn interpreter_timer_config() -> ExecutionTimerConfig {
    ExecutionTimerConfig {
        limit: EVAL_TIME_LIMIT,
        check_interval: NonZeroU32::MIN,
    }
}

fn parse_data(sources: &PolicySources) -> Result<Value, PolicyError> {
    let Some(text) = &sources.data else {
        return Ok(Value::new_object());
    };
    let bad = |message: String| PolicyError::Data {
        path: sources.data_path(),
        message,
    };
    super::unique_keys::check(text).map_err(&bad)?;
    let value = Value::from_json_str(text).map_err(|e| bad(e.to_string()))?;
    if !matches!(value, Value::Object(_)) {
        return Err(bad("the top level must be an object".into()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use std::sync::Arc;
    use std::time::Duration;

    use regorus::Value;
    use regorus::unstable::{Expr, Ref, Span};

    use regorus::Engine;

    use super::{Evaluator, PolicySet, VM};
    use crate::policy::ENTRYPOINT;
    use crate::policy::PolicyError;
    use crate::policy::source::tests::temp_dir;
    use crate::policy::source::{Files, PolicySources};

    fn compile(policy: &str, data: Option<&str>) -> Result<PolicySet, PolicyError> {
        let dir = temp_dir("compile");
        fs::write(dir.join("p.rego"), policy).expect("write");
        if let Some(data) = data {
            fs::write(dir.join("data.json"), data).expect("write");
        }
        let sources = PolicySources::read(&dir, Files::Policies).expect("read");
        fs::remove_dir_all(&dir).ok();
        PolicySet::compile(&sources)
    }

    #[test]
    fn evaluates_with_data_on_the_vm() {
        let set = compile(
            "package zabbix.mcp\nimport rego.v1\n\
             decision := {\"allow\": input.x in data.allowed}\n",
            Some(r#"{"allowed": [1, 2]}"#),
        )
        .expect("compiles");
        assert!(set.uses_vm());
        let yes = set
            .evaluate(Value::from_json_str(r#"{"x": 2}"#).expect("json"))
            .expect("evaluates");
        assert_eq!(yes["allow"], Value::from(true));
        let no = set
            .evaluate(Value::from_json_str(r#"{"x": 3}"#).expect("json"))
            .expect("evaluates");
        assert_eq!(no["allow"], Value::from(false));
    }

    #[test]
    fn compile_errors_are_reported() {
        let syntax = compile("package zabbix.mcp\ndecision := {", None);
        assert!(matches!(syntax, Err(PolicyError::Compile(_))), "{syntax:?}");
        let missing = compile("package zabbix.mcp\nother := 1\n", None);
        assert!(
            matches!(missing, Err(PolicyError::Compile(_))),
            "{missing:?}"
        );
        let data = compile("package zabbix.mcp\ndecision := {}\n", Some("[1]"));
        assert!(matches!(data, Err(PolicyError::Data { .. })), "{data:?}");
        let twice = compile(
            "package zabbix.mcp\ndecision := {}\n",
            Some(r#"{"a":[],"a":[1]}"#),
        );
        assert!(
            matches!(&twice, Err(PolicyError::Data { message, .. }) if message.contains("\"a\" is given twice")),
            "{twice:?}"
        );
    }

    #[test]
    fn sets_the_vm_rejects_fall_back_to_the_interpreter() {
        // regorus 0.14.1's VM compiler refuses reads of `data` as a whole.
        let set = compile(
            "package zabbix.mcp\nimport rego.v1\n\
             decision := {\"allow\": object.get(data, \"open\", false)}\n",
            Some(r#"{"open": true}"#),
        )
        .expect("compiles");
        assert!(!set.uses_vm());
        let d = set.evaluate(Value::new_object()).expect("evaluates");
        assert_eq!(d["allow"], Value::from(true));
    }

    #[test]
    fn runaway_policies_hit_the_instruction_limit() {
        let set = compile(
            "package zabbix.mcp\nimport rego.v1\n\
             n := numbers.range(1, 5000)\n\
             decision := {\"allow\": count([1 | some a in n; some b in n; a == b]) > 0}\n",
            None,
        )
        .expect("compiles");
        let err = set.evaluate(Value::new_object()).expect_err("limit");
        assert!(matches!(err, PolicyError::Eval(_)), "{err:?}");
    }

    #[test]
    fn runaway_policies_on_the_interpreter_hit_the_time_limit() {
        // Unbounded before: some 25 million steps, seconds of the runtime's one thread.
        let set = compile(
            "package zabbix.mcp\nimport rego.v1\n\
             n := numbers.range(1, 5000)\n\
             decision := {\"allow\": object.get(data, \"open\", false), \
                          \"x\": count([1 | some a in n; some b in n; a == b])}\n",
            Some(r#"{"open": true}"#),
        )
        .expect("compiles");
        assert!(!set.uses_vm());
        let err = set.evaluate(Value::new_object()).expect_err("limit");
        assert!(
            matches!(&err, PolicyError::Eval(m) if m.contains("time")),
            "{err:?}"
        );
    }

    /// Sleeps 250 ms a call.
    fn sleeps(_: &Span, _: &[Ref<Expr>], _: &[Value], _: bool) -> anyhow::Result<Value> {
        std::thread::sleep(Duration::from_millis(250));
        Ok(Value::from("slept"))
    }

    /// A builtin that takes 250 ms (`strings.reverse`, its slot made to sleep) called
    /// `times` times on the VM: each call is one instruction, the loop far below the 1024
    /// between regorus' own looks at its clock.
    fn sleeping_on_the_vm(times: u32) -> Result<Value, PolicyError> {
        let mut set = compile(
            &format!(
                "package zabbix.mcp\nimport rego.v1\n\
                 slept := [strings.reverse(\"x\") | some i in numbers.range(1, {times})]\n\
                 decision := {{\"allow\": true, \"slept\": count(slept)}}\n"
            ),
            None,
        )
        .expect("compiles");
        let Evaluator::Vm(program, builtins) = &mut set.evaluator else {
            panic!("not on the VM");
        };
        let slot = program
            .builtin_info_table
            .iter()
            .position(|info| info.name == "strings.reverse")
            .expect("a slot");
        Arc::get_mut(builtins).expect("one owner")[slot] = sleeps;
        set.evaluate(Value::new_object())
    }

    /// The same on the interpreter, as a set the VM does not compile is evaluated (with the
    /// timer `PolicySet::compile` gives it), the call an extension.
    fn sleeping_on_the_interpreter(times: u32) -> Result<Value, String> {
        compile("package zabbix.mcp\ndecision := {}\n", None).expect("compiles");
        let mut engine = Engine::new();
        let sleep = |_: Vec<Value>| {
            std::thread::sleep(Duration::from_millis(250));
            Ok(Value::from("slept"))
        };
        let rego = format!(
            "package zabbix.mcp\nimport rego.v1\n\
             slept := [sleep(i) | some i in numbers.range(1, {times})]\n\
             decision := {{\"allow\": true, \"slept\": count(slept)}}\n"
        );
        let compiled = engine
            .add_extension("sleep".into(), 1, Box::new(sleep))
            .and_then(|()| engine.add_policy("p.rego".into(), rego))
            .and_then(|_| engine.compile_with_entrypoint(&ENTRYPOINT.into()))
            .expect("compiles");
        compiled
            .eval_with_input(Value::new_object())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn slow_builtin_calls_end_the_run_at_its_time_limit() {
        let ok = sleeping_on_the_vm(2).expect("within the limit");
        assert_eq!(ok["slept"], Value::from(2));
        let ok = sleeping_on_the_interpreter(2).expect("within the limit");
        assert_eq!(ok["slept"], Value::from(2));
        // Before: all 30 calls ran, 7.5 s for a limit of 5 s (50 ms in release builds).
        let err = sleeping_on_the_vm(30).expect_err("past the limit");
        assert!(
            matches!(&err, PolicyError::Eval(m) if m.contains("time limit")),
            "{err:?}"
        );
        let err = sleeping_on_the_interpreter(30).expect_err("past the limit");
        assert!(err.contains("time limit"), "{err}");
    }

    fn panics(_: &Span, _: &[Ref<Expr>], _: &[Value], _: bool) -> anyhow::Result<Value> {
        panic!("byte index 1 is not a char boundary")
    }

    #[test]
    fn a_panic_inside_regorus_denies_and_drops_the_vm() {
        let mut set = compile(
            "package zabbix.mcp\nimport rego.v1\n\
             decision := {\"allow\": true} if not input.d\n\
             decision := {\"allow\": time.parse_duration_ns(input.d) > 0} if input.d\n",
            None,
        )
        .expect("compiles");
        // A builtin that panics, as regorus' did on agent text (those are bounded now).
        let Evaluator::Vm(program, _) = &mut set.evaluator else {
            panic!("not on the VM");
        };
        let program = Arc::make_mut(program);
        for (info, resolved) in program
            .builtin_info_table
            .iter()
            .zip(program.resolved_builtins.iter_mut())
        {
            if info.name == "time.parse_duration_ns" {
                resolved.0 = panics;
            }
        }
        let input = |text: &str| Value::from_json_str(text).expect("json");
        let cached = || VM.with(|cell| cell.borrow().is_some());
        let ok = set.evaluate(input("{}")).expect("evaluates");
        assert_eq!(ok["allow"], Value::from(true));
        assert!(cached());
        let err = set.evaluate(input(r#"{"d": "1é"}"#)).expect_err("panicked");
        assert!(matches!(err, PolicyError::Panic), "{err:?}");
        assert!(
            err.to_string().starts_with("policy evaluation failed"),
            "{err}"
        );
        assert!(!cached(), "the VM that panicked is kept");
        let again = set.evaluate(input("{}")).expect("a new VM evaluates");
        assert_eq!(again["allow"], Value::from(true));
    }

    #[test]
    fn a_builtin_error_is_an_evaluation_error_on_the_vm_as_on_the_interpreter() {
        for interpreter in [false, true] {
            let open = if interpreter {
                "object.get(data, \"open\", true)"
            } else {
                "true"
            };
            let set = compile(
                &format!(
                    "package zabbix.mcp\nimport rego.v1\n\
                     deny contains \"more than a day\" if time.parse_duration_ns(input.d) > 86400000000000\n\
                     deny contains \"not a web host\" if not regex.match(input.p, \"web-01\")\n\
                     decision := {{\"allow\": {open}, \"reasons\": deny}}\n"
                ),
                None,
            )
            .expect("compiles");
            assert_eq!(set.uses_vm(), !interpreter);
            let eval = |d: &str, p: &str| {
                let input = serde_json::json!({"d": d, "p": p}).to_string();
                set.evaluate(Value::from_json_str(&input).expect("json"))
            };
            let ok = eval("1h", "^web").expect("evaluates");
            assert_eq!(ok["allow"], Value::from(true));
            assert_eq!(ok["reasons"], Value::new_set());
            let long = eval("48h", "^web").expect("evaluates");
            assert!(
                long["reasons"] != Value::new_set(),
                "{interpreter}: {long:?}"
            );
            // On the VM the errors read as undefined: neither deny rule held.
            for (d, p) in [("forever", "^web"), ("1h", "(")] {
                let err = eval(d, p).expect_err("a builtin failed");
                assert!(
                    matches!(err, PolicyError::Eval(_)),
                    "{interpreter}: {err:?}"
                );
            }
            let again = eval("1h", "^web").expect("the next run is clean");
            assert_eq!(again["allow"], Value::from(true));
        }
    }
}
