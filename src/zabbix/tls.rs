//! TLS toward Zabbix: system and bundled roots plus `TLSCAFile`, or no verification at all
//! when `IgnoreURLCertErrors=true` (warned about at start). ALPN offers HTTP/2 and
//! HTTP/1.1. What is trusted is loaded again without a restart: see [`super::trust`].

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::zabbix::error::ZabbixError;

/// What verifies Zabbix's certificate.
#[derive(Debug)]
pub(crate) enum Verify {
    /// The system's roots and the bundled ones, plus these (`TLSCAFile`).
    Roots(Vec<CertificateDer<'static>>),
    /// `IgnoreURLCertErrors=true`.
    Nothing,
}

/// Builds the rustls client configuration for the Zabbix connection. The system's roots
/// are read here, so a new one (`update-ca-certificates`) is taken at the next build.
pub(crate) fn client_config(verify: Verify) -> Result<ClientConfig, ZabbixError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ZabbixError::Tls(e.to_string()))?;
    let mut config = match verify {
        Verify::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
            .with_no_client_auth(),
        Verify::Roots(extra) => {
            let mut roots = RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            // Native roots are best effort: a host without a CA bundle still has the bundled ones.
            let native = rustls_native_certs::load_native_certs();
            for cert in native.certs {
                let _ = roots.add(cert);
            }
            for cert in extra {
                roots
                    .add(cert)
                    .map_err(|e| ZabbixError::Tls(format!("a CA rustls cannot use: {e}")))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The PEM certificates in `pem`, read from `path` (named in errors): at least one, each
/// one rustls can take as a CA.
pub(crate) fn ca_certificates(
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, ZabbixError> {
    let certs = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ZabbixError::Tls(format!("bad PEM in {}: {e}", path.display())))?;
    for cert in &certs {
        RootCertStore::empty()
            .add(cert.clone())
            .map_err(|e| ZabbixError::Tls(format!("bad CA in {}: {e}", path.display())))?;
    }
    if certs.is_empty() {
        return Err(ZabbixError::Tls(format!(
            "{} holds no PEM certificate",
            path.display()
        )));
    }
    Ok(certs)
}

/// Accepts any certificate; signatures are still checked so the handshake stays well-formed.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
