//! Zabbix's `login_attempts` as the page knows it: how many wrong passwords Zabbix takes
//! for one user before it blocks the account. Unknown until a credential the sidecar holds
//! has read it (`settings.get`): the token of a caller the sidecar has just looked up (at
//! most once a minute while unknown), of a call that asks for page approval, or the
//! session or token of a sign-in. While unknown the page sends no password, as if it were
//! 1, the smallest value Zabbix takes: any other guess blocks accounts of installations
//! set below it (with 3, the default 5 let a fourth wrong password through).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::app::App;
use crate::zabbix::{ApiToken, Method};

/// A caller's token is tried at most this often while the value is unknown, so a role
/// that may not read the settings costs Zabbix one call a minute, not one per lookup.
const CALLER_RETRY_SECS: u64 = 60;

/// `login_attempts`; 0 until read.
#[derive(Debug, Default)]
pub(crate) struct LoginAttempts(AtomicU32, LastTry);

/// Unix seconds of the last read tried with a caller's token; 0 before any.
#[derive(Debug, Default)]
struct LastTry(AtomicU64);

impl LoginAttempts {
    /// The value last read, if any.
    pub(crate) fn known(&self) -> Option<u32> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            attempts => Some(attempts),
        }
    }

    /// Reads it with the token of a caller just looked up, where the page is served and
    /// the value is not known yet: a replica that has seen no page approval nor sign-in
    /// since it started then takes passwords all the same.
    pub(crate) async fn learn_from_caller(&self, app: &App, token: &ApiToken) {
        if app.config.approval_page.is_none() || self.known().is_some() {
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let last = self.1.0.load(Ordering::Relaxed);
        if now.saturating_sub(last) < CALLER_RETRY_SECS {
            return;
        }
        // One of the lookups finishing at once asks; the others go on.
        if self
            .1
            .0
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.read(app, token).await;
        }
    }

    /// Reads it with `token` if it is not known yet (a page approval's caller).
    pub(crate) async fn learn(&self, app: &App, token: &ApiToken) {
        if self.known().is_none() {
            self.read(app, token).await;
        }
    }

    /// Reads it with `token` (any user may, on 6.0 and 7.0 alike); where that fails, the
    /// last value read stands.
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
            Ok(Some(attempts)) => self.0.store(attempts, Ordering::Relaxed),
            Ok(None) => tracing::info!("approval page: settings.get gave no login_attempts"),
            Err(error) => tracing::debug!(%error, "approval page: login_attempts not read"),
        }
    }
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

    use super::{LoginAttempts, attempts};

    #[test]
    fn unknown_until_read_and_only_zabbixs_range() {
        assert_eq!(LoginAttempts::default().known(), None);
        assert_eq!(attempts(&json!("3")), Some(3));
        assert_eq!(attempts(&json!(32)), Some(32));
        for refused in [json!("0"), json!("33"), json!(""), json!(null), json!(-1)] {
            assert_eq!(attempts(&refused), None, "{refused}");
        }
    }
}
