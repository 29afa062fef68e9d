//! Latency statistics and the report table: nearest-rank percentiles over measured
//! durations, table header and rows in ms or µs, signed differences and verdict words.

use std::time::Duration;

/// Latency statistics in seconds (nearest-rank percentiles).
pub struct Stats {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(samples: &mut [Duration]) -> Stats {
        samples.sort_unstable();
        let secs: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
        let n = secs.len();
        Stats {
            n,
            p50: percentile(&secs, 0.50),
            p90: percentile(&secs, 0.90),
            p99: percentile(&secs, 0.99),
            mean: if n == 0 {
                f64::NAN
            } else {
                secs.iter().sum::<f64>() / n as f64
            },
            min: secs.first().copied().unwrap_or(f64::NAN),
            max: secs.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[derive(Clone, Copy)]
pub enum Unit {
    Ms,
    Us,
}

impl Unit {
    pub fn scale(self) -> f64 {
        match self {
            Unit::Ms => 1e3,
            Unit::Us => 1e6,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Us => "µs",
        }
    }
}

pub fn print_header(unit: Unit) {
    println!(
        "  {:<22} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}   ({})",
        "",
        "n",
        "p50",
        "p90",
        "p99",
        "mean",
        "min",
        "max",
        unit.name()
    );
}

pub fn print_row(label: &str, s: &Stats, unit: Unit) {
    let k = unit.scale();
    let digits = match unit {
        Unit::Ms => 3,
        Unit::Us => 1,
    };
    println!(
        "  {label:<22} {:>6} {:>10.digits$} {:>10.digits$} {:>10.digits$} {:>10.digits$} {:>10.digits$} {:>10.digits$}",
        s.n,
        s.p50 * k,
        s.p90 * k,
        s.p99 * k,
        s.mean * k,
        s.min * k,
        s.max * k,
    );
}

pub fn fmt_signed(seconds: f64, unit: Unit) -> String {
    let digits = match unit {
        Unit::Ms => 3,
        Unit::Us => 1,
    };
    format!("{:+.digits$} {}", seconds * unit.scale(), unit.name())
}

pub fn pass(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}
