//! `SharedStore` and `SharedStoreFile`: `memory` or a Redis URL, given inline or (so that
//! its password is on no command line and in no environment) in a file. The URL is never
//! echoed: it may hold the password.

use super::Secret;
use super::error::ConfigError;
use super::file::Entry;
use super::merge::Resolved;
use super::params::Param;
use super::secret_file::SecretFile;

/// Where the store's URL came from, for the rules that name it.
pub(super) struct SharedStore {
    /// `memory` or the Redis URL; `None` when neither parameter is given (memory).
    pub url: Option<Secret>,
    pub file: Option<SecretFile>,
    /// The entry that gave it (`SharedStore` or `SharedStoreFile`).
    pub given: Option<Entry>,
}

impl SharedStore {
    pub(super) fn load(r: &Resolved) -> Result<SharedStore, ConfigError> {
        let inline = r.get(Param::SharedStore).filter(|e| !e.value.is_empty());
        let file = r
            .get(Param::SharedStoreFile)
            .filter(|e| !e.value.is_empty());
        match (inline, file) {
            (None, None) => Ok(SharedStore {
                url: None,
                file: None,
                given: None,
            }),
            (Some(_), Some(file)) => Err(ConfigError::conflict(
                &file.at(),
                "SharedStore and SharedStoreFile are both set; give the store one way",
            )),
            (Some(e), None) => Ok(SharedStore {
                url: Some(url(e, &e.value)?),
                file: None,
                given: Some(e.clone()),
            }),
            (None, Some(e)) => {
                let (text, file) = SecretFile::read(Param::SharedStoreFile, e, "URL file")?;
                Ok(SharedStore {
                    url: Some(url(e, &text)?),
                    file: Some(file),
                    given: Some(e.clone()),
                })
            }
        }
    }

    /// Whether approvals and limits are kept in Redis.
    pub(super) fn is_redis(&self) -> bool {
        self.url
            .as_ref()
            .is_some_and(|url| url.expose().starts_with(b"redis"))
    }
}

/// `memory`, or a Redis URL as the start parses it.
fn url(e: &Entry, text: &str) -> Result<Secret, ConfigError> {
    // Not echoed: the value may hold a password. A file's path is named by the entry.
    let bad = |reason: &str| {
        let value = if e.param == Param::SharedStoreFile {
            e.value.as_str()
        } else {
            "***"
        };
        ConfigError::bad_value(&e.at(), value, reason)
    };
    if text != "memory" && !text.starts_with("redis://") && !text.starts_with("rediss://") {
        return Err(bad("expected memory or a redis:// or rediss:// URL"));
    }
    // The redis crate reads `#insecure` as "do not verify the certificate": a store that
    // decides approvals is not trusted blindly. Any fragment is refused, so none is misread.
    if text.contains('#') {
        return Err(bad(
            "a URL fragment (#…): #insecure would turn off the check of Redis' \
             certificate, which is always verified; give a private CA with SSL_CERT_FILE, \
             and percent-encode a # in the password (%23)",
        ));
    }
    // Parsed as the start parses it, so that `-T` refuses what a start would refuse (before,
    // `redis://h:99999/` and `/abc` as the database passed `-T` and stopped the start).
    // Redis' own reason is not shown: it is the crate's text about a URL with a password.
    if text != "memory" && redis::Client::open(text).is_err() {
        return Err(bad("a redis URL that does not parse: expected \
             redis[s]://[[user]:password@]host[:port][/database number], the password \
             percent-encoded"));
    }
    Ok(Secret::new(text.as_bytes().to_vec()))
}
