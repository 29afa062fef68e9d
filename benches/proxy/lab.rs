//! Part 1: the real Zabbix 7.0 lab. `host_get` through the sidecar against the same
//! `host.get` JSON-RPC sent straight to Zabbix, interleaved (ABBA) so both see the same
//! Zabbix load; skipped when the lab's env file is missing or Zabbix does not answer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use http::Uri;

use crate::client::{
    PROTOCOL_VERSION, TOOL_ARGS, Target, direct_hostids, http_client, sidecar_hostids,
};
use crate::sidecar::{host_get_body, start_sidecar};
use crate::stats::{Stats, Unit, fmt_signed, pass, percentile, print_header, print_row, yes_no};
use crate::{PHASE_BUDGET, env_number};

const PART1_WARMUP: usize = 20;
const PART1_DEFAULT_N: usize = 300;

pub async fn part1() {
    println!();
    println!("== Part 1: real Zabbix 7.0 (lab) ==");
    let env_file = state_dir().join("zabbix7.env");
    let env = match std::fs::read_to_string(&env_file) {
        Ok(text) => parse_env(&text),
        Err(error) => {
            println!(
                "  skipped: cannot read {} ({error}).\n  Start the lab first: `bash deploy/lab/start-zabbix.sh all` \
                 (see deploy/lab/README.md), or set ZBX_STATE_DIR.",
                env_file.display()
            );
            return;
        }
    };
    let (Some(url), Some(token)) = (env.get("ZBX_URL"), env.get("ZBX_TOKEN")) else {
        println!(
            "  skipped: {} lacks ZBX_URL or ZBX_TOKEN",
            env_file.display()
        );
        return;
    };
    let n = env_number("BENCH_N").unwrap_or(PART1_DEFAULT_N).max(1);
    let Some(sidecar) = start_sidecar(url).await else {
        return;
    };
    let version = match sidecar.app.zabbix.version().await {
        Ok(version) => version,
        Err(error) => {
            println!(
                "  skipped: Zabbix at {url} does not answer apiinfo.version ({error}); is the lab running?"
            );
            sidecar.server.shutdown().await;
            return;
        }
    };
    let zabbix_uri: Uri = sidecar.app.config.api_url().parse().expect("API URL");
    let direct = Target::direct(zabbix_uri, token, host_get_body(&sidecar.app, version));
    let through = Target::sidecar(sidecar.mcp_uri(), token);
    println!(
        "  Zabbix {version} at {url}; sidecar in-process at {}",
        through.uri
    );
    println!(
        "  sidecar: MCP tools/call host_get {TOOL_ARGS} (one stateless POST, MCP-Protocol-Version {PROTOCOL_VERSION})"
    );
    println!(
        "  direct:  the same host.get JSON-RPC the sidecar builds ({} bytes): {}",
        direct.body.len(),
        String::from_utf8_lossy(&direct.body)
    );

    let client = http_client();
    // Warm-up: connections on both sides, the sidecar's caller cache, tool list, version.
    let mut first = None;
    for i in 0..PART1_WARMUP {
        let d = direct.call(&client).await;
        let s = through.call(&client).await;
        match (d, s) {
            (Ok(d), Ok(s)) if i == 0 => first = Some((d.2, s.2)),
            (Ok(_), Ok(_)) => {}
            (Err(e), _) | (_, Err(e)) => {
                println!("  skipped: warm-up call failed: {e}");
                sidecar.server.shutdown().await;
                return;
            }
        }
    }
    if let Some((direct_body, sidecar_body)) = first {
        let direct_ids = direct_hostids(&direct_body);
        let sidecar_ids = sidecar_hostids(&sidecar_body);
        println!(
            "  responses: direct {} bytes, {} hosts; sidecar {} bytes, {} hosts; same hosts in the same order: {}",
            direct_body.len(),
            direct_ids.len(),
            sidecar_body.len(),
            sidecar_ids.len(),
            yes_no(direct_ids.iter().take(10).eq(sidecar_ids.iter()))
        );
    }

    // Interleaved: direct and sidecar alternate (ABBA), so both see the same Zabbix load.
    let mut lat_direct = Vec::with_capacity(n);
    let mut lat_sidecar = Vec::with_capacity(n);
    let mut paired = Vec::with_capacity(n);
    let started = Instant::now();
    let mut errors = 0usize;
    for i in 0..n {
        if started.elapsed() > PHASE_BUDGET {
            println!(
                "  note: time budget ({}s) reached after {i} of {n} pairs",
                PHASE_BUDGET.as_secs()
            );
            break;
        }
        let (d, s) = if i % 2 == 0 {
            let d = direct.call(&client).await;
            (d, through.call(&client).await)
        } else {
            let s = through.call(&client).await;
            (direct.call(&client).await, s)
        };
        match (d, s) {
            (Ok(d), Ok(s)) => {
                lat_direct.push(d.0);
                lat_sidecar.push(s.0);
                paired.push(s.0.as_secs_f64() - d.0.as_secs_f64());
            }
            (d, s) => {
                errors += 1;
                for e in [d.err(), s.err()].into_iter().flatten() {
                    eprintln!("part 1 call failed: {e}");
                }
            }
        }
    }
    let wall = started.elapsed();
    sidecar.server.shutdown().await;
    let d = Stats::of(&mut lat_direct);
    let s = Stats::of(&mut lat_sidecar);
    println!(
        "  {} interleaved pairs after {PART1_WARMUP} warm-up pairs, {:.1}s, {errors} failed pairs",
        d.n,
        wall.as_secs_f64()
    );
    println!();
    print_header(Unit::Ms);
    print_row("direct host.get", &d, Unit::Ms);
    print_row("sidecar host_get", &s, Unit::Ms);
    if d.n == 0 {
        return;
    }
    let ratio_p50 = s.p50 / d.p50;
    let ratio_p99 = s.p99 / d.p99;
    println!();
    println!(
        "  ratio sidecar/direct  p50 {ratio_p50:.3}   p99 {ratio_p99:.3}   mean {:.3}   (target <= 1.02: p50 {}, p99 {})",
        s.mean / d.mean,
        pass(ratio_p50 <= 1.02),
        pass(ratio_p99 <= 1.02)
    );
    paired.sort_by(f64::total_cmp);
    println!(
        "  added latency         p50 {}   p99 {}   median of per-pair differences {}",
        fmt_signed(s.p50 - d.p50, Unit::Ms),
        fmt_signed(s.p99 - d.p99, Unit::Ms),
        fmt_signed(percentile(&paired, 0.50), Unit::Ms),
    );
}

fn state_dir() -> PathBuf {
    std::env::var_os("ZBX_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new("/var/lib/zbx-test").to_path_buf())
}

fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}
