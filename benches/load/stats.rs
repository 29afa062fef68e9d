//! What the load client counts: a lock-free latency histogram (about 1.5 % resolution,
//! microseconds) and errors by code, both cumulative; a report interval is the difference
//! of two snapshots.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two: 64 gives a relative error under 1/64.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Enough octaves for about 2^40 µs.
const BUCKETS: usize = (SUB as usize) * 36;

pub struct Histogram {
    counts: Vec<AtomicU64>,
}

/// A copy of the counts at one moment.
#[derive(Clone)]
pub struct Snapshot {
    counts: Vec<u64>,
}

/// Errors by code (`http_503`, `upstream_timeout`, `client_timeout`, ...).
#[derive(Default)]
pub struct Errors {
    by_code: Mutex<BTreeMap<String, u64>>,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn record(&self, micros: u64) {
        let index = bucket(micros).min(BUCKETS - 1);
        self.counts[index].fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

impl Snapshot {
    pub fn empty() -> Snapshot {
        Snapshot {
            counts: vec![0; BUCKETS],
        }
    }

    /// The counts recorded after `earlier`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            counts: self
                .counts
                .iter()
                .zip(&earlier.counts)
                .map(|(now, then)| now - then)
                .collect(),
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The value at quantile `q` (0..=1), in microseconds (the bucket's upper edge).
    pub fn quantile(&self, q: f64) -> u64 {
        let total = self.total();
        if total == 0 {
            return 0;
        }
        let rank = ((total as f64 * q).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return upper_edge(index);
            }
        }
        upper_edge(BUCKETS - 1)
    }

    pub fn max(&self) -> u64 {
        self.counts
            .iter()
            .rposition(|c| *c > 0)
            .map_or(0, upper_edge)
    }
}

impl Errors {
    pub fn add(&self, code: &str) {
        if let Ok(mut map) = self.by_code.lock() {
            *map.entry(code.to_owned()).or_default() += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.by_code.lock().map_or(0, |m| m.values().sum())
    }

    /// `code=count` pairs, or `none`.
    pub fn summary(&self) -> String {
        let Ok(map) = self.by_code.lock() else {
            return String::new();
        };
        if map.is_empty() {
            return "none".into();
        }
        map.iter()
            .map(|(code, count)| format!("{code}={count}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn bucket(micros: u64) -> usize {
    if micros < SUB {
        return micros as usize;
    }
    let octave = 63 - micros.leading_zeros() - SUB_BITS + 1;
    let sub = (micros >> (octave - 1)) - SUB;
    (octave as u64 * SUB + sub) as usize
}

fn upper_edge(index: usize) -> u64 {
    let (octave, sub) = ((index as u64) / SUB, (index as u64) % SUB);
    if octave == 0 {
        return sub;
    }
    ((SUB + sub + 1) << (octave - 1)) - 1
}

/// Microseconds as milliseconds with one decimal.
pub fn ms(micros: u64) -> String {
    format!("{:.1}", micros as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn buckets_bound_their_values() {
        for v in [0u64, 1, 63, 64, 65, 127, 128, 1000, 12_345, 9_999_999] {
            let b = super::bucket(v);
            assert!(super::upper_edge(b) >= v, "{v}");
            assert!(super::upper_edge(b) <= v + v / 32 + 1, "{v}");
        }
    }
}
