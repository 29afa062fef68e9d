//! Test PKI (a CA and a localhost certificate made with rcgen) and a TLS front that
//! terminates TLS and forwards the bytes to the plain-HTTP lab Zabbix.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use tokio::net::{TcpListener, TcpStream};

pub struct Pki {
    pub dir: PathBuf,
    pub ca_pem: String,
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

pub fn pki(name: &str) -> Pki {
    let dir = super::scratch_dir(&format!("pki-{name}"));
    // Names of their own: with rcgen's one default name for both, OpenSSL clients (Python's)
    // take the leaf for a self-signed certificate.
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("zabbix-mcp-guard test CA {name}"),
    );
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let mut params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let pki = Pki {
        ca_pem: ca.pem(),
        ca_file: dir.join("ca.pem"),
        cert_file: dir.join("cert.pem"),
        key_file: dir.join("key.pem"),
        dir,
    };
    std::fs::write(&pki.ca_file, &pki.ca_pem).unwrap();
    std::fs::write(&pki.cert_file, cert.pem()).unwrap();
    std::fs::write(&pki.key_file, key.serialize_pem()).unwrap();
    pki
}

/// A TLS server configuration with `pki`'s localhost certificate.
pub fn server_config(pki: &Pki) -> rustls::ServerConfig {
    super::init();
    let certs = rustls_pemfile::certs(&mut std::fs::read(&pki.cert_file).unwrap().as_slice())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pemfile::private_key(&mut std::fs::read(&pki.key_file).unwrap().as_slice())
        .unwrap()
        .unwrap();
    rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap()
}

/// A TLS front for the lab's plain-HTTP Zabbix, whose certificate can be replaced: a
/// frontend whose certificate is re-issued.
pub struct Front {
    pub port: u16,
    serving: Arc<RwLock<Arc<rustls::ServerConfig>>>,
}

impl Front {
    /// New connections get `pki`'s certificate from now on.
    pub fn serve(&self, pki: &Pki) {
        *self.serving.write().unwrap() = Arc::new(server_config(pki));
    }
}

/// Starts a TLS front for `upstream` (host:port) serving `pki`'s certificate.
pub async fn front(pki: &Pki, upstream: String) -> Front {
    let serving = Arc::new(RwLock::new(Arc::new(server_config(pki))));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = serving.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(config.read().unwrap().clone());
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    Front { port, serving }
}
