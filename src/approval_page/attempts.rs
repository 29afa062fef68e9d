//! Zabbix's `login_attempts` as the page knows it: how many wrong passwords Zabbix takes
//! for one user before it blocks the account. Unknown until a credential the sidecar holds
//! has read it (`settings.get`): the token of a caller the sidecar has just looked up (at
//! most once a minute), of a call that asks for page approval, or the session or token of
//! a sign-in. While unknown the page sends no password, as if it were 1, the smallest
//! value Zabbix takes: any other guess blocks accounts of installations set below it
//! (with 3, the default 5 let a fourth wrong password through).
//!
//! The setting can change: a value is read again once it is a minute old (at the next
//! caller lookup or page approval), and one an hour old is not used. Replicas sharing a
//! Redis share what each read, and a password is counted against the lowest value read
//! within the hour: a replica no caller has reached takes passwords, and one that read
//! the value before it was lowered does not let through more than Zabbix now takes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::app::App;
use crate::store::unix_now;
use crate::zabbix::{ApiToken, Method};

/// A value read this long ago is read again at the next caller lookup or page approval;
/// while a caller's role cannot read it, their lookups try at most this often, so Zabbix
/// gets one call a minute, not one per lookup.
const REFRESH_SECS: u64 = 60;
/// A value read this long ago is not used: with no caller, page approval or sign-in to
/// read it again meanwhile, the setting may have been lowered since.
const MAX_AGE: Duration = Duration::from_secs(3600);

/// `login_attempts` and when this replica read it.
#[derive(Debug, Default)]
pub(crate) struct LoginAttempts {
    /// `read_at << 8 | value` (Unix seconds; Zabbix's values are 1 to 32); 0 until read.
    read: AtomicU64,
    /// Unix seconds of the last read tried with a caller's token; 0 before any.
    last_try: AtomicU64,
}

impl LoginAttempts {
    /// The value this replica read and when, if it did.
    fn local(&self) -> Option<(u32, u64)> {
        match self.read.load(Ordering::Relaxed) {
            0 => None,
            packed => Some(((packed & 0xff) as u32, packed >> 8)),
        }
    }

    fn record(&self, attempts: u32, now: u64) {
        self.read
            .store(now << 8 | u64::from(attempts & 0xff), Ordering::Relaxed);
    }

    /// Whether this replica read the value within the last `secs`.
    fn read_within(&self, secs: u64, now: u64) -> bool {
        self.local()
            .is_some_and(|(_, at)| now.saturating_sub(at) < secs)
    }

    /// The value a password sign-in is counted against: the lowest this replica and the
    /// shared store hold read within [`MAX_AGE`]; `None` while there is none. A store that
    /// fails or holds a value it cannot verify adds nothing (its count of the username's
    /// attempts, taken next, fails closed on its own).
    pub(crate) async fn current(&self, app: &App) -> Option<u32> {
        let shared = match app.store.login_attempts().await {
            Ok(shared) => shared,
            Err(error) => {
                tracing::warn!(%error, "approval page: shared login_attempts not read");
                None
            }
        };
        usable(self.local(), shared, unix_now())
    }

    /// Reads it with the token of a caller just looked up, where the page is served and
    /// the value was not read within the last minute: a replica that has seen no page
    /// approval nor sign-in since it started then takes passwords all the same, and a
    /// changed setting is picked up.
    pub(crate) async fn learn_from_caller(&self, app: &App, token: &ApiToken) {
        let now = unix_now();
        if app.config.approval_page.is_none() || self.read_within(REFRESH_SECS, now) {
            return;
        }
        let last = self.last_try.load(Ordering::Relaxed);
        if now.saturating_sub(last) < REFRESH_SECS {
            return;
        }
        // One of the lookups finishing at once asks; the others go on.
        if self
            .last_try
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.read(app, token).await;
        }
    }

    /// Reads it with `token` (a page approval's caller) unless read within the last minute.
    pub(crate) async fn learn(&self, app: &App, token: &ApiToken) {
        if !self.read_within(REFRESH_SECS, unix_now()) {
            self.read(app, token).await;
        }
    }

    /// Reads it with `token` (any user may, on 6.0 and 7.0 alike) and shares it; where that
    /// fails, the last value read stands.
    pub(crate) async fn read(&self, app: &App, token: &ApiToken) {
        let Ok(version) = app.zabbix.version().await else {
            return;
        };
        let read = app
            .zabbix
            .call(
                Method::SettingsGet,
                &json!({"output": ["login_attempts"]}),
                Some((token, version)),
            )
            .await;
        match read.map(|settings| attempts(&settings["login_attempts"])) {
            Ok(Some(attempts)) => {
                let now = unix_now();
                self.record(attempts, now);
                if let Err(error) = app.store.put_login_attempts(attempts, now, MAX_AGE).await {
                    tracing::warn!(%error, "approval page: login_attempts not shared");
                }
            }
            Ok(None) => tracing::info!("approval page: settings.get gave no login_attempts"),
            Err(error) => tracing::debug!(%error, "approval page: login_attempts not read"),
        }
    }
}

/// The lowest of the values read within [`MAX_AGE`] of `now`.
fn usable(local: Option<(u32, u64)>, shared: Option<(u32, u64)>, now: u64) -> Option<u32> {
    [local, shared]
        .into_iter()
        .flatten()
        .filter(|(_, at)| now.saturating_sub(*at) < MAX_AGE.as_secs())
        .map(|(attempts, _)| attempts)
        .min()
}

/// Zabbix takes 1 to 32; anything else is no answer.
fn attempts(value: &Value) -> Option<u32> {
    let attempts = match value {
        Value::String(text) => text.parse().ok()?,
        Value::Number(number) => u32::try_from(number.as_u64()?).ok()?,
        _ => return None,
    };
    (1..=32).contains(&attempts).then_some(attempts)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{LoginAttempts, MAX_AGE, REFRESH_SECS, attempts, usable};

    #[test]
    fn unknown_until_read_and_only_zabbixs_range() {
        assert_eq!(LoginAttempts::default().local(), None);
        assert_eq!(attempts(&json!("3")), Some(3));
        assert_eq!(attempts(&json!(32)), Some(32));
        for refused in [json!("0"), json!("33"), json!(""), json!(null), json!(-1)] {
            assert_eq!(attempts(&refused), None, "{refused}");
        }
    }

    /// A value an hour old is not used, and the lowest of those read within the hour
    /// counts: a replica that read 5 before the setting went down to 3 counts against 3
    /// once another replica shared it.
    #[test]
    fn the_lowest_value_read_within_the_hour_counts() {
        let now = 1_000_000;
        let old = now - MAX_AGE.as_secs();
        assert_eq!(usable(None, None, now), None);
        assert_eq!(usable(Some((5, old)), None, now), None);
        assert_eq!(usable(Some((5, old + 1)), None, now), Some(5));
        assert_eq!(usable(None, Some((3, now)), now), Some(3));
        assert_eq!(usable(Some((5, now - 10)), Some((3, now)), now), Some(3));
        assert_eq!(usable(Some((3, now)), Some((5, now)), now), Some(3));
        assert_eq!(usable(Some((3, old)), Some((5, now)), now), Some(5));
        let read = LoginAttempts::default();
        read.record(32, now);
        assert_eq!(read.local(), Some((32, now)));
        assert!(read.read_within(REFRESH_SECS, now + REFRESH_SECS - 1));
        assert!(!read.read_within(REFRESH_SECS, now + REFRESH_SECS));
    }
}
