//! Zabbix's `login_attempts` as the replicas read it, shared (`SharedStore=redis://…`):
//! without it a replica no caller had reached sent the page's passwords nowhere (503),
//! and one that had read the setting before it was lowered let through more wrong
//! passwords than Zabbix now takes.
//!
//! Layout (in the installation's space, see `keys.rs`): `login_attempts` the value and the
//! Unix second it was read, `<value>:<read_at>`, signed (`seal.rs`), expiring when it is
//! too old to use: whoever writes to Redis without the key cannot raise it, only put back
//! a value read within that time.

use std::time::Duration;

use super::super::StoreError;
use super::super::seal::Part;
use super::RedisStore;

/// The id the signed text is bound to.
const ID: &str = "login_attempts";

impl RedisStore {
    /// Shares `attempts`, read at `read_at`, for `ttl`.
    pub(crate) async fn put_login_attempts(
        &self,
        attempts: u32,
        read_at: u64,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let signed = self
            .seal
            .sign(Part::Setting, ID, &format!("{attempts}:{read_at}"));
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.run(|mut c| async move {
            redis::cmd("SET")
                .arg(self.keys.login_attempts())
                .arg(signed)
                .arg("PX")
                .arg(ttl_ms)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// The value a replica shared last and when it was read, if Redis holds one; one not
    /// signed with this installation's key is [`StoreError::Corrupt`].
    pub(crate) async fn login_attempts(&self) -> Result<Option<(u32, u64)>, StoreError> {
        let stored: Option<String> = self
            .run(|mut c| async move {
                redis::cmd("GET")
                    .arg(self.keys.login_attempts())
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        let text = self.seal.open(Part::Setting, ID, &stored)?;
        let parsed = text
            .split_once(':')
            .and_then(|(value, at)| Some((value.parse().ok()?, at.parse().ok()?)));
        parsed
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt(format!("login_attempts {text:?}")))
    }
}
