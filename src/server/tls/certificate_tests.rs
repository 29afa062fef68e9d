use rcgen::{CertificateParams, KeyPair};

use super::ServerCertificate;
use crate::scratch::Scratch;
use crate::server::tls::TlsError;

/// A self-signed localhost certificate and its key, in PEM.
fn pair() -> (String, String) {
    pair_until(None)
}

/// The same, valid until (year, month, day) when given (rcgen's default: 4096).
fn pair_until(not_after: Option<(u64, u64, u64)>) -> (String, String) {
    let mut params = CertificateParams::new(vec!["localhost".into()]).expect("params");
    if let Some((year, month, day)) = not_after {
        params.not_after = rcgen::date_time_ymd(
            i32::try_from(year).expect("year"),
            u8::try_from(month).expect("month"),
            u8::try_from(day).expect("day"),
        );
    }
    let key = KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("cert");
    (cert.pem(), key.serialize_pem())
}

fn loaded(dir: &Scratch, (cert, key): &(String, String)) -> ServerCertificate {
    let cert_file = dir.write("cert.pem", cert);
    let key_file = dir.write("key.pem", key);
    ServerCertificate::load(&cert_file, &key_file).expect("loads")
}

#[test]
fn a_new_pair_is_served_after_a_reload() {
    let dir = Scratch::new("tls-reload");
    let served = loaded(&dir, &pair());
    let first = served.sha256();
    assert_eq!(first.len(), 64);
    let (cert, key) = pair();
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &key);
    served.reload().expect("reloads");
    assert_ne!(served.sha256(), first);
    let status = served.status();
    assert_eq!((status.reloads_ok, status.reloads_failed), (2, 0));
}

#[test]
fn a_pair_that_does_not_load_never_replaces_the_served_one() {
    let dir = Scratch::new("tls-refused");
    let served = loaded(&dir, &pair());
    let first = served.sha256();
    let (other_cert, other_key) = pair();

    // A renewal caught between its two files: the new certificate, the old key.
    dir.write("cert.pem", &other_cert);
    let mismatch = served.reload();
    assert!(
        matches!(mismatch, Err(TlsError::KeyMismatch { .. })),
        "{mismatch:?}"
    );
    // Half of a certificate, as a copy still being written leaves it.
    dir.write("cert.pem", &other_cert[..other_cert.len() / 2]);
    let half = served.reload();
    assert!(
        matches!(
            half,
            Err(TlsError::Read { .. } | TlsError::NoCertificate { .. })
        ),
        "{half:?}"
    );
    dir.write("cert.pem", &other_cert);
    dir.write(
        "key.pem",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    let key = served.reload();
    assert!(matches!(key, Err(TlsError::BadKey { .. })), "{key:?}");
    dir.write("key.pem", "no key here\n");
    assert!(matches!(served.reload(), Err(TlsError::NoKey { .. })));
    std::fs::remove_file(dir.join("key.pem")).expect("rm");
    let gone = served.reload().expect_err("no key file");
    assert!(gone.to_string().starts_with("cannot read "), "{gone}");

    assert_eq!(served.sha256(), first);
    let status = served.status();
    assert_eq!((status.reloads_ok, status.reloads_failed), (1, 5));

    dir.write("key.pem", &other_key);
    served.reload().expect("the completed pair loads");
    assert_ne!(served.sha256(), first);
}

#[test]
fn the_watcher_loads_a_change_once_two_polls_agree() {
    let dir = Scratch::new("tls-poll");
    let served = loaded(&dir, &pair());
    let first = served.sha256();
    assert!(served.poll().is_none(), "nothing changed");

    let (cert, key) = pair();
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &key);
    assert!(served.poll().is_none(), "a change waits for one more poll");
    assert_eq!(served.sha256(), first);
    assert!(matches!(served.poll(), Some(Ok(()))));
    assert_ne!(served.sha256(), first);
    assert!(served.poll().is_none(), "loaded once");

    // A failed load is reported once, not at every poll.
    dir.write("cert.pem", "not a certificate\n");
    assert!(served.poll().is_none());
    assert!(matches!(
        served.poll(),
        Some(Err(TlsError::NoCertificate { .. }))
    ));
    assert!(served.poll().is_none());
    assert_eq!(served.status().reloads_failed, 1);
}

#[test]
fn an_expired_certificate_loads_and_says_when_it_expired() {
    let dir = Scratch::new("tls-expired");
    let served = loaded(&dir, &pair_until(Some((2020, 1, 2))));
    assert_eq!(served.status().not_after, 1_577_923_200);
    // Said at the first poll, then not again that day.
    assert!(served.warn_if_expiring());
    assert!(!served.warn_if_expiring());
}

#[test]
fn only_a_certificate_close_to_its_expiry_is_warned_about() {
    let dir = Scratch::new("tls-expiring");
    let served = loaded(&dir, &pair());
    assert!(
        !served.warn_if_expiring(),
        "rcgen's default lasts until 4096"
    );
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        / 86_400;
    let soon = crate::calendar::civil_from_days(today + 3);
    let served = loaded(&dir, &pair_until(Some(soon)));
    assert!(served.warn_if_expiring());
    assert!(!served.warn_if_expiring());
}

#[test]
fn a_file_too_large_or_not_regular_is_not_read() {
    let dir = Scratch::new("tls-large");
    let served = loaded(&dir, &pair());
    let large = "A".repeat(1024 * 1024 + 1);
    dir.write("cert.pem", &large);
    let refused = served.reload().expect_err("too large");
    assert!(
        refused.to_string().contains("larger than 1048576 bytes"),
        "{refused}"
    );
    // A FIFO would block the read until a writer came; it is refused without opening it.
    std::fs::remove_file(dir.join("cert.pem")).expect("rm");
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("cert.pem"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let refused = served.reload().expect_err("a FIFO");
    assert!(
        refused.to_string().ends_with("not a regular file"),
        "{refused}"
    );
}
