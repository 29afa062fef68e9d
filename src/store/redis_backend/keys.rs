//! The names of the keys the Redis backend keeps. Each starts with `zmg:<space>:`, where
//! `<space>` is derived from `ApprovalSealKey`: the replicas of one installation hold the
//! same key and so share every key, and the sidecars of another Zabbix, with a key of
//! their own, share nothing with them on the same Redis database: no budget, no lockout,
//! no approval on the page. (Before, every name was `zmg:…`, and the budgets of Admin,
//! userid 1 on every Zabbix, were one.)

use ring::hmac;

use crate::store::SignInCount;

/// Hex digits of the space: 64 bits, so two installations' keys never meet by chance,
/// and nothing a reader of Redis learns of the seal key.
const SPACE_HEX: usize = 16;

pub(crate) struct Keys {
    /// `zmg:<space>:`
    prefix: String,
}

impl Keys {
    pub(crate) fn new(seal_key: &[u8]) -> Keys {
        let key = hmac::Key::new(hmac::HMAC_SHA256, seal_key);
        let tag = hmac::sign(&key, b"zabbix-mcp-guard shared store key space v1");
        let mut space = hex::encode(tag.as_ref());
        space.truncate(SPACE_HEX);
        Keys {
            prefix: format!("zmg:{space}:"),
        }
    }

    /// What every key of this installation starts with.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A hash {record, status, state, expires_at}.
    pub(crate) fn approval(&self, id: &str) -> String {
        format!("{}approval:{id}", self.prefix)
    }

    /// The prefix of [`Keys::approval`], for the scripts that build it from an id.
    pub(crate) fn approval_prefix(&self) -> String {
        format!("{}approval:", self.prefix)
    }

    /// `<token_id>:<tool>:<sha256>` → the approval's id.
    pub(crate) fn dedupe(&self, key: &str) -> String {
        format!("{}key:{key}", self.prefix)
    }

    /// A sorted set of pending ids by creation time.
    pub(crate) fn pending(&self) -> String {
        format!("{}pending", self.prefix)
    }

    /// A sorted set of one user's approvals by expiry (`MaxPendingApprovals`).
    pub(crate) fn waiting(&self, userid: &str) -> String {
        format!("{}waiting:{userid}", self.prefix)
    }

    /// A single-use marker.
    pub(crate) fn once(&self, nonce: &str) -> String {
        format!("{}once:{nonce}", self.prefix)
    }

    /// The key readiness (and the lockout check) write to learn that Redis takes writes.
    pub(crate) fn ready(&self) -> String {
        format!("{}ready", self.prefix)
    }

    /// A budget's theoretical arrival time.
    pub(crate) fn rate(&self, bucket: &str) -> String {
        format!("{}rate:{bucket}", self.prefix)
    }

    /// A sorted set of concurrency leases.
    pub(crate) fn slots(&self, bucket: &str) -> String {
        format!("{}slots:{bucket}", self.prefix)
    }

    /// The digests of the tokens Zabbix rejected from one source.
    pub(crate) fn rejected(&self, source: &str) -> String {
        format!("{}rejected:{source}", self.prefix)
    }

    /// One of the approval page's counts: a username's wrong passwords (by its SHA-256 in
    /// hex), or an address's failed sign-ins.
    pub(crate) fn sign_in(&self, count: SignInCount<'_>) -> String {
        match count {
            SignInCount::Username(digest) => {
                format!("{}signin:{}", self.prefix, hex::encode(digest))
            }
            SignInCount::Address(source) => format!("{}signin-from:{source}", self.prefix),
        }
    }

    /// Zabbix's `login_attempts` as a replica last read it, signed.
    pub(crate) fn login_attempts(&self) -> String {
        format!("{}login_attempts", self.prefix)
    }

    /// A token Zabbix accepted lately.
    pub(crate) fn accepted(&self, digest: &str) -> String {
        format!("{}accepted:{digest}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::Keys;

    #[test]
    fn each_seal_key_has_its_own_space() {
        let (a, b) = (Keys::new(&[1; 32]), Keys::new(&[2; 32]));
        assert_ne!(a.prefix(), b.prefix());
        assert_eq!(a.prefix(), Keys::new(&[1; 32]).prefix());
        assert_eq!(a.prefix().len(), "zmg:".len() + 16 + 1);
        assert!(a.pending().starts_with(a.prefix()));
    }
}
