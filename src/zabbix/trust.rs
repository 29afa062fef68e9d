//! What the sidecar trusts toward Zabbix, and its reload: a watcher polls `TLSCAFile` and
//! loads it again once a change has stayed unchanged for one more poll; SIGHUP loads it at
//! once, with the system's roots read anew. A bundle that does not load (half written,
//! no certificate, a certificate rustls cannot use, gone) never replaces the trusted set:
//! new connections go on with it, and the failure is logged and counted. Connections
//! already open keep going; new ones are verified against the new set.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use crate::reload::{self, Settle, Watched, read_small_file};
use crate::zabbix::error::ZabbixError;
use crate::zabbix::tls::{self, Verify};

/// The most of `TLSCAFile` read: a whole system bundle is about 200 kB; a path that names
/// something else (`/dev/zero`) must not fill memory at every poll.
const MAX_CA_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The TLS connector new connections to Zabbix use, swapped whole by a reload.
pub(crate) struct ZabbixTrust {
    /// `None`: nothing to verify with (`IgnoreURLCertErrors=true`) or to watch (only the
    /// system's and the bundled roots, read again on SIGHUP).
    ca_file: Option<PathBuf>,
    ignore_cert_errors: bool,
    connector: RwLock<TlsConnector>,
    /// Serializes reloads (watcher, SIGHUP) and remembers the digest of what they read.
    watched: Mutex<Settle<[u8; 32]>>,
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
}

/// What `/metrics` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrustStatus {
    pub reloads_ok: u64,
    pub reloads_failed: u64,
}

/// `TLSCAFile` as read at one moment (unreadable: why).
struct CaFile<'a> {
    path: &'a Path,
    bytes: Result<Vec<u8>, String>,
}

impl ZabbixTrust {
    /// Loads what is trusted; an error here stops start-up. Blocking file reads.
    pub(crate) fn load(
        ca_file: Option<&Path>,
        ignore_cert_errors: bool,
    ) -> Result<ZabbixTrust, ZabbixError> {
        let ca_file = ca_file.filter(|_| !ignore_cert_errors);
        let file = ca_file.map(CaFile::read);
        let mut watched = Settle::new();
        watched.loaded(digest(file.as_ref()));
        let connector = connector(file.as_ref(), ignore_cert_errors)?;
        let trust = ZabbixTrust {
            ca_file: ca_file.map(Path::to_path_buf),
            ignore_cert_errors,
            connector: RwLock::new(connector),
            watched: Mutex::new(watched),
            reloads_ok: AtomicU64::new(1),
            reloads_failed: AtomicU64::new(0),
        };
        if let Some(file) = &file {
            trust.log_loaded(file);
        }
        Ok(trust)
    }

    /// The connector for a new connection: a read lock and a clone of an `Arc`.
    pub(crate) fn connector(&self) -> TlsConnector {
        self.connector
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes each time what is trusted is loaded anew (a count of the loads). Read before
    /// [`Self::connector`]: a connection is then never taken for newer than its trust.
    pub(crate) fn generation(&self) -> u64 {
        self.reloads_ok.load(Ordering::Acquire)
    }

    pub(crate) fn status(&self) -> TrustStatus {
        TrustStatus {
            reloads_ok: self.reloads_ok.load(Ordering::Relaxed),
            reloads_failed: self.reloads_failed.load(Ordering::Relaxed),
        }
    }

    /// Loads `TLSCAFile` and the system's roots again now; on error the trusted set stays.
    /// Blocking file reads.
    pub(crate) fn reload(&self) -> Result<(), ZabbixError> {
        let file = self.ca_file.as_deref().map(CaFile::read);
        // Held through the load, so a poll cannot interleave.
        let mut watched = self.watched_lock();
        watched.loaded(digest(file.as_ref()));
        self.install(file.as_ref())
    }

    /// One watcher step. `None`: nothing to do yet (no `TLSCAFile`, no change, or a change
    /// not yet read unchanged by two polls in a row).
    pub(crate) fn poll(&self) -> Option<Result<(), ZabbixError>> {
        let file = CaFile::read(self.ca_file.as_deref()?);
        let mut watched = self.watched_lock();
        watched
            .changed(digest(Some(&file)))
            .map(|_| self.install(Some(&file)))
    }

    /// Polls `TLSCAFile` every `every` and reloads on SIGHUP, until aborted or the last
    /// other reference is dropped. File work runs on the blocking pool.
    pub(crate) fn spawn_watcher(self: &Arc<Self>, every: Duration) -> JoinHandle<()> {
        reload::spawn_watcher(self, every)
    }

    fn install(&self, file: Option<&CaFile<'_>>) -> Result<(), ZabbixError> {
        match connector(file, self.ignore_cert_errors) {
            Ok(connector) => {
                *self
                    .connector
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = connector;
                // After the connector: whoever sees the new count gets the new connector.
                self.reloads_ok.fetch_add(1, Ordering::Release);
                match file {
                    Some(file) => self.log_loaded(file),
                    None => tracing::info!("Zabbix TLS trust loaded: the system's roots"),
                }
                Ok(())
            }
            Err(error) => {
                self.reloads_failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, ca_file = %self.ca_file_text(),
                    "Zabbix TLS CA file rejected; the CAs trusted until now stay");
                Err(error)
            }
        }
    }

    fn log_loaded(&self, file: &CaFile<'_>) {
        if let Ok(bytes) = &file.bytes {
            tracing::info!(ca_file = %file.path.display(),
                sha256 = %hex::encode(Sha256::digest(bytes)), "Zabbix TLS CA file loaded");
        }
    }

    /// `TLSCAFile` for the log: its path, or that there is none.
    fn ca_file_text(&self) -> std::borrow::Cow<'_, str> {
        self.ca_file
            .as_deref()
            .map_or("none".into(), |path| path.to_string_lossy())
    }

    fn watched_lock(&self) -> MutexGuard<'_, Settle<[u8; 32]>> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Watched for ZabbixTrust {
    fn on_tick(&self) {
        let _ = self.poll();
    }

    fn on_hangup(&self) {
        tracing::info!(ca_file = %self.ca_file_text(), "SIGHUP: reloading the Zabbix TLS CAs");
        let _ = self.reload();
    }
}

impl std::fmt::Debug for ZabbixTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZabbixTrust")
            .field("ca_file", &self.ca_file)
            .field("ignore_cert_errors", &self.ignore_cert_errors)
            .finish_non_exhaustive()
    }
}

impl<'a> CaFile<'a> {
    fn read(path: &'a Path) -> CaFile<'a> {
        CaFile {
            path,
            bytes: read_small_file(path, MAX_CA_FILE_BYTES),
        }
    }
}

/// Tells one reading of `TLSCAFile` from another (no file: always the same).
fn digest(file: Option<&CaFile<'_>>) -> [u8; 32] {
    reload::digest(file.map(|file| &file.bytes))
}

/// The connector trusting the system's and bundled roots and what `file` holds.
fn connector(
    file: Option<&CaFile<'_>>,
    ignore_cert_errors: bool,
) -> Result<TlsConnector, ZabbixError> {
    let verify = if ignore_cert_errors {
        Verify::Nothing
    } else {
        let extra = match file {
            None => Vec::new(),
            Some(file) => {
                let bytes = file.bytes.as_deref().map_err(|reason| {
                    ZabbixError::Tls(format!("cannot read {}: {reason}", file.path.display()))
                })?;
                tls::ca_certificates(file.path, bytes)?
            }
        };
        Verify::Roots(extra)
    };
    Ok(TlsConnector::from(Arc::new(tls::client_config(verify)?)))
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;
