//! TLS toward Zabbix: system and bundled roots plus `TLSCAFile`, or no verification at all
//! when `IgnoreURLCertErrors=true` (warned about at start).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::zabbix::error::ZabbixError;

/// Builds the rustls client configuration for the Zabbix connection.
pub fn client_config(
    ca_file: Option<&Path>,
    ignore_cert_errors: bool,
) -> Result<ClientConfig, ZabbixError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ZabbixError::Tls(e.to_string()))?;
    if ignore_cert_errors {
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
            .with_no_client_auth());
    }
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // Native roots are best effort: a host without a CA bundle still has the bundled ones.
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = ca_file {
        let pem = std::fs::read(path)
            .map_err(|e| ZabbixError::Tls(format!("cannot read {}: {e}", path.display())))?;
        let mut added = 0;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert =
                cert.map_err(|e| ZabbixError::Tls(format!("bad PEM in {}: {e}", path.display())))?;
            roots
                .add(cert)
                .map_err(|e| ZabbixError::Tls(format!("bad CA in {}: {e}", path.display())))?;
            added += 1;
        }
        if added == 0 {
            return Err(ZabbixError::Tls(format!(
                "{} holds no PEM certificate",
                path.display()
            )));
        }
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
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
