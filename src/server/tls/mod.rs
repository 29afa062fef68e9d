//! Inbound TLS (`TLSAccept=cert`): rustls with the certificate chain of `TLSCertFile` and
//! the key of `TLSKeyFile`, TLS 1.2 and 1.3, ALPN h2 and http/1.1. The MCP listener and
//! the approval page serve one [`ServerCertificate`], which is loaded again when its files
//! change or on SIGHUP, so a renewed certificate needs no restart.

mod certificate;
mod expiry;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rustls::InconsistentKeys;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;

use crate::policy::timestamp::rfc3339_nanos;
use crate::reload::{self, read_small_file};

pub use certificate::{Expiry, ServerCertificate, TlsStatus};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: String },
    #[error("{path} holds no PEM private key")]
    NoKey { path: String },
    #[error("{path} holds no private key rustls can use: {reason}")]
    BadKey { path: String, reason: String },
    #[error("the key in {key} is not the key of the certificate in {cert}")]
    KeyMismatch { cert: String, key: String },
    #[error("the first certificate in {path} is not a well-formed X.509 certificate: {reason}")]
    Malformed { path: String, reason: String },
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(String),
}

/// The most of each file read (no certificate chain or key is that large): a path that
/// names something else (`/dev/zero`, a disk image) must not fill memory at every poll.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// One certificate chain and its key, as served, with what logs and `/metrics` say of it.
#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    /// The leaf's `notAfter`, seconds since 1970-01-01 UTC.
    not_after: i64,
    /// SHA-256 of the leaf's DER, in hex, as `openssl x509 -fingerprint -sha256` shows it
    /// (without the colons).
    sha256: String,
}

impl Loaded {
    /// `not_after` in RFC 3339 UTC, for the log.
    fn not_after_text(&self) -> String {
        let secs = self.not_after.max(0).unsigned_abs();
        rfc3339_nanos(UNIX_EPOCH + Duration::from_secs(secs))
    }
}

/// The acceptor of both listeners: every handshake gets the pair `certificate` holds then.
pub fn acceptor(certificate: Arc<ServerCertificate>) -> Result<TlsAcceptor, TlsError> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(certificate);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The two files' bytes as read at one moment (an unreadable file: why). What is checked
/// and served is exactly what was read, and the watcher compares digests of it.
struct PairFiles<'a> {
    cert_file: &'a Path,
    key_file: &'a Path,
    cert: Result<Vec<u8>, String>,
    key: Result<Vec<u8>, String>,
}

impl<'a> PairFiles<'a> {
    /// Blocking file reads: call it off the runtime's threads, or at start.
    fn read(cert_file: &'a Path, key_file: &'a Path) -> PairFiles<'a> {
        PairFiles {
            cert_file,
            key_file,
            cert: read_small_file(cert_file, MAX_FILE_BYTES),
            key: read_small_file(key_file, MAX_FILE_BYTES),
        }
    }

    /// Tells one reading from another; a file that cannot be read counts by its error.
    fn digest(&self) -> [u8; 32] {
        reload::digest([&self.cert, &self.key])
    }

    /// Checks the pair: PEM certificates (the leaf first) and a PEM private key that is the
    /// leaf's.
    fn load(&self) -> Result<Loaded, TlsError> {
        let (cert_file, key_file) = (self.cert_file, self.key_file);
        let name = |path: &Path| path.display().to_string();
        let mut cert_pem = read_bytes(&self.cert, cert_file)?;
        let certs = rustls_pemfile::certs(&mut cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Read {
                path: name(cert_file),
                reason: e.to_string(),
            })?;
        let Some(leaf) = certs.first() else {
            return Err(TlsError::NoCertificate {
                path: name(cert_file),
            });
        };
        let not_after = expiry::not_after(leaf).map_err(|reason| TlsError::Malformed {
            path: name(cert_file),
            reason: reason.to_owned(),
        })?;
        let sha256 = hex::encode(Sha256::digest(leaf));
        let mut key_pem = read_bytes(&self.key, key_file)?;
        let key = rustls_pemfile::private_key(&mut key_pem)
            .map_err(|e| TlsError::Read {
                path: name(key_file),
                reason: e.to_string(),
            })?
            .ok_or_else(|| TlsError::NoKey {
                path: name(key_file),
            })?;
        let signing =
            provider()
                .key_provider
                .load_private_key(key)
                .map_err(|e| TlsError::BadKey {
                    path: name(key_file),
                    reason: e.to_string(),
                })?;
        let key = CertifiedKey::new(certs, signing);
        match key.keys_match() {
            // A key type that cannot tell its public key is taken, as rustls takes it.
            Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {}
            Err(rustls::Error::InconsistentKeys(_)) => {
                return Err(TlsError::KeyMismatch {
                    cert: name(cert_file),
                    key: name(key_file),
                });
            }
            Err(e) => {
                return Err(TlsError::Malformed {
                    path: name(cert_file),
                    reason: e.to_string(),
                });
            }
        }
        Ok(Loaded {
            key: Arc::new(key),
            not_after,
            sha256,
        })
    }
}

/// What was read of `path`, or why nothing was.
fn read_bytes<'f>(file: &'f Result<Vec<u8>, String>, path: &Path) -> Result<&'f [u8], TlsError> {
    file.as_deref().map_err(|reason| TlsError::Read {
        path: path.display().to_string(),
        reason: reason.clone(),
    })
}
