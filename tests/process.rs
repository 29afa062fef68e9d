//! The real binary: LogType=file, PidFile, SIGTERM shutdown.

mod common;

use std::time::Duration;

#[test]
fn binary_logs_to_file_writes_pid_and_stops_on_sigterm() {
    let lab = common::lab(7);
    let dir = common::scratch_dir("process");
    let log = dir.join("guard.log");
    let pid = dir.join("guard.pid");
    let port = common::free_port();
    let mut child = common::binary(&lab.url, port, &log)
        .arg("--pid-file")
        .arg(&pid)
        .arg("--decision-log")
        .arg(dir.join("decisions.log"))
        .spawn()
        .unwrap();
    common::wait_until_blocking("the sidecar to start", Duration::from_secs(20), || {
        pid.exists()
            && std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("listening")
    });
    let written: u32 = std::fs::read_to_string(&pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(written, child.id());
    // SIGHUP reloads the policy set at once.
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    common::wait_until_blocking(
        "a reload logged after SIGHUP",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("SIGHUP: reloading policies")
        },
    );
    let status = common::terminate(&mut child).expect("SIGTERM and exit");
    assert!(status.success(), "{status}");
    assert!(!pid.exists(), "the PID file is removed on exit");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("shutting down"), "{text}");
    assert!(!text.contains(&lab.token));
}

/// A panic inside regorus quotes agent text: it is one escaped line of the log file. Before,
/// the default hook wrote it to stderr as it was, so an agent's newline began a log line of
/// the agent's own, and with `LogType=file` the log did not have it.
#[test]
fn a_panic_is_one_escaped_line_of_the_log() {
    let lab = common::lab(7);
    let dir = common::scratch_dir("panic-line");
    let log = dir.join("guard.log");
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    // regorus panics on a time.format layout with a letter outside ASCII: here the agent's.
    std::fs::write(
        policies.join("p.rego"),
        "package zabbix.mcp\nimport rego.v1\ndefault allow := false\n\
         deny contains \"x\" if {\n input.tool.name == \"host_get\"\n \
         count(time.format([0, \"UTC\", input.arguments.search])) == 0\n}\n\
         allow if count(deny) == 0\ndecision := {\"allow\": allow, \"reasons\": deny}\n",
    )
    .unwrap();
    let port = common::free_port();
    let mut child = common::binary(&lab.url, port, &log)
        .arg("--policy-dir")
        .arg(&policies)
        .arg("--decision-log")
        .arg(dir.join("decisions.log"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_listening(&log);
    let forged = "FORGED zabbix_mcp_guard::lifecycle: all is well";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        common::init();
        let guard = common::Guard::external(&format!("http://127.0.0.1:{port}"));
        let client = common::client(&guard, &lab.token).await;
        let search = format!("é\n{forged}");
        let read = common::call(&client, "host_get", serde_json::json!({"search": search})).await;
        assert_eq!(read.is_error, Some(true), "{:?}", read.content);
        let _ = client.cancel().await;
    });
    common::wait_until_blocking("the panic in the log", Duration::from_secs(10), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("panicked")
    });
    let status = common::terminate(&mut child).expect("SIGTERM and exit");
    assert!(status.success(), "{status}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let panic = text
        .lines()
        .find(|l| l.contains("panicked") && l.contains("panic.message"))
        .unwrap_or_else(|| panic!("no panic line: {text}"));
    assert!(panic.contains(&format!("\\u{{000A}}{forged}")), "{panic}");
    for line in text.lines().chain(stderr.lines()) {
        assert!(!line.starts_with("FORGED"), "an agent's line: {line}");
    }
}

/// `WorkerThreads`: with 1 (the default) the binary runs on tokio's current-thread
/// scheduler, with 2 on the multi-thread one; both serve MCP calls (a list and a read through
/// a real client) and stop cleanly on SIGTERM.
#[test]
fn worker_threads_set_the_runtime_and_calls_are_served() {
    for workers in ["1", "2"] {
        serves_calls_with(workers);
    }
}

fn serves_calls_with(workers: &str) {
    let lab = common::lab(7);
    let dir = common::scratch_dir(&format!("workers-{workers}"));
    let log = dir.join("guard.log");
    let port = common::free_port();
    let mut child = common::binary(&lab.url, port, &log)
        .args(["--worker-threads", workers])
        .arg("--decision-log")
        .arg(dir.join("decisions.log"))
        .env_remove("TOKIO_WORKER_THREADS")
        .spawn()
        .unwrap();
    common::wait_listening(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    let started = text
        .lines()
        .find(|l| l.contains("async runtime started"))
        .unwrap_or_else(|| panic!("no runtime line: {text}"));
    assert!(
        started.contains(&format!("worker_threads={workers}")),
        "{started}"
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        common::init();
        let guard = common::Guard::external(&format!("http://127.0.0.1:{port}"));
        let client = common::client(&guard, &lab.token).await;
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "host_get"), "{tools:?}");
        let read = common::call(&client, "host_get", serde_json::json!({"limit": 1})).await;
        assert_ne!(read.is_error, Some(true), "{:?}", read.content);
        let _ = client.cancel().await;
    });

    let status = common::terminate(&mut child).expect("SIGTERM and exit");
    assert!(status.success(), "{status}");
}

/// Under a soft open-file limit of 256 (below what `MaxConnections` takes), the binary
/// raises its own to the hard limit at start and logs it; with the hard limit low too, it
/// warns. Before, it kept the soft limit and its accepts failed ("Too many open files")
/// past about a thousand connections.
#[test]
fn the_open_file_limit_is_raised_to_the_hard_one() {
    let lab = common::lab(7);
    let hard = std::fs::read_to_string("/proc/self/limits")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4).map(str::to_owned))
        .expect("this process' hard limit");
    for (limits, raised) in [("-Sn 256", true), ("-n 256", false)] {
        let dir = common::scratch_dir("fd-limit");
        let log = dir.join("guard.log");
        let port = common::free_port();
        // The limit set by the shell the binary replaces, as an operator's `ulimit` would.
        let mut child = common::Running(
            after_shell(&lab, port, &log, &format!("ulimit {limits} && exec"))
                .spawn()
                .unwrap(),
        );
        common::wait_listening(&log);
        let soft = std::fs::read_to_string(format!("/proc/{}/limits", child.0.id()))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
            .expect("the binary's soft limit");
        let text = std::fs::read_to_string(&log).unwrap();
        if raised {
            assert_eq!(soft, hard, "raised to the hard limit");
            assert!(text.contains("open-file limit"), "{text}");
        } else {
            assert_eq!(soft, "256");
            assert!(text.contains("the open-file limit is below"), "{text}");
        }
        common::terminate(&mut child.0).expect("SIGTERM and exit");
    }
}

/// The process is not dumpable: run as an ordinary user (nobody) with `ulimit -c
/// unlimited` in a directory that user may write, after a call with the lab's token its
/// `/proc/<pid>` files are root's (so its own user cannot read its memory or `environ`),
/// and SIGABRT leaves no core file. Before, the abort wrote a core (1 GB, debug build) in
/// that directory holding the caller's token in clear.
#[test]
fn the_process_leaves_no_core_dump_and_its_memory_is_roots() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::os::unix::process::ExitStatusExt as _;
    let lab = common::lab(7);
    let dir = common::scratch_dir("no-core");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let log = dir.join("guard.log");
    let port = common::free_port();
    let mut child = common::Running(
        after_shell(
            &lab,
            port,
            &log,
            "ulimit -c unlimited && exec setpriv --reuid=65534 --regid=65534 --clear-groups",
        )
        .args(["--decision-log", "stdout"])
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap(),
    );
    common::wait_listening(&log);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        common::init();
        let guard = common::Guard::external(&format!("http://127.0.0.1:{port}"));
        let client = common::client(&guard, &lab.token).await;
        assert!(!common::tool_names(&client).await.is_empty());
        let _ = client.cancel().await;
    });
    let pid = child.0.id();
    let proc_dir = format!("/proc/{pid}");
    assert_eq!(
        std::fs::metadata(&proc_dir).unwrap().uid(),
        65534,
        "runs as nobody"
    );
    let environ = std::fs::metadata(format!("{proc_dir}/environ")).unwrap();
    assert_eq!(
        environ.uid(),
        0,
        "a dumpable process's environ is its own user's"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("core dumps disabled"), "{text}");
    common::signal(&child.0, "ABRT");
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(6), "{status}");
    let cores: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("core"))
        .collect();
    assert!(cores.is_empty(), "core files: {cores:?}");
}

/// The binary as [`common::binary`] runs it against `lab`, started by `bash -c "<shell>
/// binary args…"` (so `shell` ends in `exec` or a command that runs the rest), without
/// `RUST_LOG`: what the shell sets first (a `ulimit`, another user) is the binary's.
fn after_shell(
    lab: &common::Lab,
    port: u16,
    log: &std::path::Path,
    shell: &str,
) -> std::process::Command {
    let binary = common::binary(&lab.url, port, log);
    let mut command = std::process::Command::new("bash");
    command
        .arg("-c")
        .arg(format!("{shell} \"$0\" \"$@\""))
        .arg(binary.get_program())
        .args(binary.get_args())
        .env_remove("RUST_LOG");
    command
}
