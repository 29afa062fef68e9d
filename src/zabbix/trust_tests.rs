use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::ClientConfig;

use super::ZabbixTrust;
use crate::scratch::Scratch;

/// A new self-signed CA certificate, in PEM.
fn ca() -> String {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("key");
    params.self_signed(&key).expect("cert").pem()
}

fn config(trust: &ZabbixTrust) -> Arc<ClientConfig> {
    trust.connector().config().clone()
}

fn loaded(dir: &Scratch, pem: &str) -> ZabbixTrust {
    let file = dir.write("ca.pem", pem);
    ZabbixTrust::load(Some(&file), false).expect("loads")
}

#[test]
fn a_changed_ca_file_is_taken_once_two_polls_agree() {
    let dir = Scratch::new("trust-poll");
    let trust = loaded(&dir, &ca());
    let first = config(&trust);
    assert!(trust.poll().is_none(), "nothing changed");

    // A bundle with the new CA beside the old one, as a CA rotation writes it.
    dir.write("ca.pem", &format!("{}{}", ca(), ca()));
    assert!(trust.poll().is_none(), "a change waits for one more poll");
    assert!(Arc::ptr_eq(&config(&trust), &first));
    assert!(matches!(trust.poll(), Some(Ok(()))));
    let second = config(&trust);
    assert!(!Arc::ptr_eq(&second, &first));
    assert_eq!(
        second.alpn_protocols,
        [b"h2".to_vec(), b"http/1.1".to_vec()]
    );
    assert!(trust.poll().is_none(), "loaded once");
    let status = trust.status();
    assert_eq!((status.reloads_ok, status.reloads_failed), (2, 0));

    // A failed load is reported once, not at every poll.
    dir.write("ca.pem", "no certificate here\n");
    assert!(trust.poll().is_none());
    assert!(matches!(trust.poll(), Some(Err(_))));
    assert!(trust.poll().is_none());
    assert_eq!(trust.status().reloads_failed, 1);
    assert!(Arc::ptr_eq(&config(&trust), &second));
}

#[test]
fn a_bundle_that_does_not_load_never_replaces_the_trusted_one() {
    let dir = Scratch::new("trust-refused");
    let pem = ca();
    let trust = loaded(&dir, &pem);
    let first = config(&trust);
    let half = &pem[..pem.len() / 2];
    let not_der = "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";
    let cases: [(&str, Option<&str>, &str); 4] = [
        ("no certificate", Some(""), "holds no PEM certificate"),
        ("half a certificate", Some(half), "bad PEM in"),
        ("not a certificate's DER", Some(not_der), "bad CA in"),
        ("a missing file", None, "cannot read"),
    ];
    for (case, contents, said) in cases {
        match contents {
            Some(text) => {
                dir.write("ca.pem", text);
            }
            None => std::fs::remove_file(dir.join("ca.pem")).expect("rm"),
        }
        let refused = trust.reload().expect_err(case).to_string();
        assert!(refused.contains(said), "{case}: {refused}");
        assert!(
            refused.contains("ca.pem"),
            "{case} names the file: {refused}"
        );
        assert!(Arc::ptr_eq(&config(&trust), &first), "{case}");
    }
    let status = trust.status();
    assert_eq!((status.reloads_ok, status.reloads_failed), (1, 4));

    // The same files stop start-up.
    dir.write("ca.pem", not_der);
    let refused = ZabbixTrust::load(Some(&dir.join("ca.pem")), false).expect_err("start");
    assert!(refused.to_string().contains("bad CA in"), "{refused}");
}

#[test]
fn ignoring_certificate_errors_reads_no_ca_file() {
    let dir = Scratch::new("trust-ignored");
    let missing = dir.join("nowhere.pem");
    let trust = ZabbixTrust::load(Some(&missing), true).expect("nothing read");
    assert!(trust.poll().is_none());
    assert!(trust.reload().is_ok());
}
