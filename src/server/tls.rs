//! Inbound TLS (`TLSAccept=cert`): rustls with the certificate chain of `TLSCertFile` and
//! the key of `TLSKeyFile`, TLS 1.2 and 1.3, ALPN h2 and http/1.1.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: String },
    #[error("{path} holds no PEM private key")]
    NoKey { path: String },
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(String),
}

pub fn acceptor(cert_file: &Path, key_file: &Path) -> Result<TlsAcceptor, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| TlsError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    };
    let cert_pem = read(cert_file)?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Read {
            path: cert_file.display().to_string(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_file.display().to_string(),
        });
    }
    let key_pem = read(key_file)?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| TlsError::Read {
            path: key_file.display().to_string(),
            reason: e.to_string(),
        })?
        .ok_or_else(|| TlsError::NoKey {
            path: key_file.display().to_string(),
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
