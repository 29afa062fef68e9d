//! `/metrics` as a test reads it: a strict parse of the text exposition into series.

use std::collections::BTreeMap;

const P: &str = "zabbix_mcp_guard_";

/// The standard process series, exposed without our prefix.
const PROCESS: &str = "process_";

/// One scrape: series (name and labels exactly as exposed) → value.
#[derive(Debug)]
pub struct Scraped(BTreeMap<String, f64>);

impl Scraped {
    /// A standard `process_*` series (unprefixed); `None` if not exposed.
    pub fn process(&self, name: &str) -> Option<f64> {
        self.0.get(&format!("{PROCESS}{name}")).copied()
    }

    pub fn get(&self, series: &str) -> f64 {
        self.0.get(&format!("{P}{series}")).copied().unwrap_or(0.0)
    }

    pub fn has(&self, series: &str) -> bool {
        self.0.contains_key(&format!("{P}{series}"))
    }

    /// How much `series` grew since `before` (a series not yet exposed counts as 0).
    pub fn delta(&self, before: &Scraped, series: &str) -> f64 {
        self.get(series) - before.get(series)
    }

    /// The sum of every series whose name and labels start with `prefix`.
    pub fn sum(&self, prefix: &str) -> f64 {
        let prefix = format!("{P}{prefix}");
        self.0
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v)
            .sum()
    }
}

/// Parses the text exposition: `# HELP`/`# TYPE` comments, then `series value` lines.
/// Panics on anything else, so a malformed page fails the test.
pub fn parse(text: &str) -> Scraped {
    let mut series = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (key, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not a sample line: {line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("not a number: {line}")),
        };
        assert!(
            key.starts_with(P) || key.starts_with(PROCESS),
            "unprefixed series: {line}"
        );
        assert!(
            series.insert(key.to_owned(), value).is_none(),
            "duplicate series: {line}"
        );
    }
    Scraped(series)
}

pub async fn scrape(base: &str) -> Scraped {
    let response = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("GET /metrics");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    parse(&response.text().await.unwrap())
}
