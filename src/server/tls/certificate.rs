//! The certificate both listeners serve, and its reload: a watcher polls `TLSCertFile` and
//! `TLSKeyFile` and loads them again once a change has stayed unchanged for one more poll;
//! SIGHUP loads them at once. A pair that does not load (a half-written file, a key that is
//! not the certificate's) never replaces the one being served: handshakes go on with it,
//! and the failure is logged and counted. Connections already open keep their session.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::task::JoinHandle;

use super::{Loaded, PairFiles, TlsError};
use crate::reload::{self, Settle, Watched};

/// The pair being served, swapped whole by a reload.
pub struct ServerCertificate {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<Arc<Loaded>>,
    /// Serializes reloads (watcher, SIGHUP) and remembers the digests of what they read.
    watched: Mutex<Settle<[u8; 32]>>,
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
    /// When the log last said the served certificate expires soon.
    expiry_warned: Mutex<Option<Instant>>,
}

/// How close to its expiry a served certificate is said to expire soon, once a day: for
/// admins who do not alert on `tls_certificate_expiry_timestamp_seconds`.
const EXPIRY_WARNING_SECS: i64 = 14 * 86_400;
const EXPIRY_WARNING_EVERY: Duration = Duration::from_secs(86_400);

/// How close the served certificate is to its expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// More than two weeks left.
    Later,
    /// Within two weeks: said once a day, and by `-T`.
    Soon {
        days_left: i64,
    },
    Passed,
}

/// What `/metrics` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsStatus {
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    /// The served leaf's `notAfter`, seconds since 1970-01-01 UTC.
    pub not_after: i64,
}

impl ServerCertificate {
    /// Loads the pair; an error here stops start-up. Blocking file reads.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<ServerCertificate, TlsError> {
        let files = PairFiles::read(cert_file, key_file);
        let mut watched = Settle::new();
        watched.loaded(files.digest());
        let served = ServerCertificate {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            current: RwLock::new(Arc::new(files.load()?)),
            watched: Mutex::new(watched),
            reloads_ok: AtomicU64::new(1),
            reloads_failed: AtomicU64::new(0),
            expiry_warned: Mutex::new(None),
        };
        served.log_loaded(&served.served());
        Ok(served)
    }

    pub fn status(&self) -> TlsStatus {
        TlsStatus {
            reloads_ok: self.reloads_ok.load(Ordering::Relaxed),
            reloads_failed: self.reloads_failed.load(Ordering::Relaxed),
            not_after: self.served().not_after,
        }
    }

    /// How close the certificate being served is to its expiry, now.
    pub fn expiry(&self) -> Expiry {
        let left = self.served().not_after.saturating_sub(unix_now());
        match left {
            _ if left <= 0 => Expiry::Passed,
            _ if left <= EXPIRY_WARNING_SECS => Expiry::Soon {
                days_left: left.div_euclid(86_400),
            },
            _ => Expiry::Later,
        }
    }

    /// `notAfter` of the certificate being served, in RFC 3339 UTC.
    pub fn not_after_text(&self) -> String {
        self.served().not_after_text()
    }

    /// SHA-256 of the certificate being served, in hex.
    pub fn sha256(&self) -> String {
        self.served().sha256.clone()
    }

    /// Loads the pair again now; on error the served pair stays. Blocking file reads.
    pub fn reload(&self) -> Result<(), TlsError> {
        let files = PairFiles::read(&self.cert_file, &self.key_file);
        // Held through the load, so a poll cannot interleave.
        let mut watched = self.watched_lock();
        watched.loaded(files.digest());
        self.install(files.load())
    }

    /// One watcher step. `None`: nothing to do yet (no change, or a change that has not
    /// been read unchanged by two polls in a row, so a pair being written is not taken).
    fn poll(&self) -> Option<Result<(), TlsError>> {
        let files = PairFiles::read(&self.cert_file, &self.key_file);
        // Held through the load, so a SIGHUP reload cannot interleave.
        let mut watched = self.watched_lock();
        watched
            .changed(files.digest())
            .map(|_| self.install(files.load()))
    }

    /// Polls the files every `every` and reloads on SIGHUP, until aborted or the last
    /// other reference is dropped. File work runs on the blocking pool.
    pub fn spawn_watcher(self: &Arc<Self>, every: Duration) -> JoinHandle<()> {
        reload::spawn_watcher(self, every)
    }

    fn install(&self, result: Result<Loaded, TlsError>) -> Result<(), TlsError> {
        match result {
            Ok(loaded) => {
                let loaded = Arc::new(loaded);
                self.log_loaded(&loaded);
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = loaded;
                self.reloads_ok.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(error) => {
                self.reloads_failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, cert_file = %self.cert_file.display(),
                    serving.sha256 = %self.served().sha256,
                    "TLS certificate rejected; the one being served stays");
                Err(error)
            }
        }
    }

    /// Says once a day that the served certificate expires within 14 days, or has expired.
    /// `true` when it said so now.
    fn warn_if_expiring(&self) -> bool {
        let expiry = self.expiry();
        if expiry == Expiry::Later {
            return false;
        }
        let served = self.served();
        let mut warned = self
            .expiry_warned
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if warned.is_some_and(|at| at.elapsed() < EXPIRY_WARNING_EVERY) {
            return false;
        }
        *warned = Some(Instant::now());
        let not_after = served.not_after_text();
        if let Expiry::Soon { days_left } = expiry {
            tracing::warn!(cert_file = %self.cert_file.display(), sha256 = %served.sha256,
                %not_after, days_left, "TLS certificate expires soon: renew its files, they are loaded without a restart");
        } else {
            tracing::warn!(cert_file = %self.cert_file.display(), sha256 = %served.sha256,
                %not_after, "TLS certificate being served has expired: clients refuse it");
        }
        true
    }

    fn log_loaded(&self, loaded: &Loaded) {
        let not_after = loaded.not_after_text();
        if loaded.not_after <= unix_now() {
            tracing::warn!(cert_file = %self.cert_file.display(), sha256 = %loaded.sha256,
                %not_after, "TLS certificate loaded, and it has expired: clients will refuse it");
        } else {
            tracing::info!(cert_file = %self.cert_file.display(), sha256 = %loaded.sha256,
                %not_after, "TLS certificate loaded");
        }
    }

    fn served(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn watched_lock(&self) -> std::sync::MutexGuard<'_, Settle<[u8; 32]>> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Seconds since 1970-01-01 UTC.
fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Watched for ServerCertificate {
    fn on_tick(&self) {
        self.warn_if_expiring();
        let _ = self.poll();
    }

    fn on_hangup(&self) {
        tracing::info!(cert_file = %self.cert_file.display(),
            "SIGHUP: reloading the TLS certificate");
        let _ = self.reload();
    }
}

impl ResolvesServerCert for ServerCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.served().key.clone())
    }
}

impl std::fmt::Debug for ServerCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCertificate")
            .field("cert_file", &self.cert_file)
            .field("sha256", &self.served().sha256)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "certificate_tests.rs"]
mod tests;
