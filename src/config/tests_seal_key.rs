//! `ApprovalSealKey` and `ApprovalSealKeyFile`: hex or base64 of at least 32 bytes, from a
//! value or a file, never both, and the key never in a message.

use std::fs;
use std::path::PathBuf;

use super::{Config, ConfigError, FlagValue, Param, Sources};

const HEX: &str = "5a1f930c7e44d2813ba60fe92578c4119d6237fa08be53c16a2e947de01548b3";
const BASE64: &str = "Wh+TDH5E0oE7pg/pJXjEEZ1iN/oIvlPBai6Ufe";

fn bytes() -> Vec<u8> {
    hex::decode(HEX).unwrap()
}

fn load(params: &[(Param, &str)]) -> Result<Config, ConfigError> {
    let mut flags = vec![
        FlagValue::new(Param::FrontendUrl, "https://z.example.com"),
        FlagValue::new(Param::AllowedIp, "127.0.0.1"),
    ];
    flags.extend(params.iter().map(|(p, v)| FlagValue::new(*p, *v)));
    Config::load(&Sources {
        flags,
        ..Sources::default()
    })
}

fn key_file(name: &str, text: &str, mode: u32) -> PathBuf {
    let path = crate::scratch::dir("seal").join(name);
    fs::write(&path, text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }
    path
}

fn key_of(config: &Config) -> Vec<u8> {
    config.approval_seal_key.as_ref().unwrap().expose().to_vec()
}

#[test]
fn hex_and_base64_keys_decode() {
    let base64 = base64_of_bytes();
    for text in [
        HEX,
        &HEX.to_ascii_uppercase(),
        &base64,
        &base64.replace('+', "-").replace('/', "_"),
    ] {
        let c = load(&[(Param::ApprovalSealKey, text)]).unwrap();
        assert_eq!(key_of(&c), bytes(), "{text}");
        assert!(c.approval_seal_key_file.is_none());
    }
}

fn base64_of_bytes() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes())
}

#[test]
fn passphrases_short_keys_and_unpadded_text_are_refused_without_echo() {
    let short = &HEX[..62];
    let cases = [
        (
            "a shared approval seal key of 32+ bytes, for tests",
            "expected at least 32 random bytes written as hex",
        ),
        (
            "0123456789abcdef0123456789abcdef-secret",
            "expected at least 32 random bytes written as hex",
        ),
        (
            short,
            "the key is 31 bytes long; at least 32 random bytes are needed",
        ),
        (BASE64, "expected at least 32 random bytes"),
        (
            "MTIzNA==",
            "the key is 4 bytes long; at least 32 random bytes are needed",
        ),
    ];
    for (text, reason) in cases {
        let err = load(&[(Param::ApprovalSealKey, text)])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "option --approval-seal-key: invalid value \"***\": {}",
                full(reason)
            ),
        );
        assert!(!err.contains(text), "{err}");
    }
}

/// The reason as printed: the format hint is one sentence.
fn full(reason: &str) -> String {
    if reason.starts_with("expected") {
        "expected at least 32 random bytes written as hex (64 hex digits or more, e.g. \
         `openssl rand -hex 32`) or padded base64 (e.g. `openssl rand -base64 32`)"
            .to_owned()
    } else {
        reason.to_owned()
    }
}

#[test]
fn key_file_with_trailing_newline_and_its_mode() {
    let path = key_file("ok", &format!("{HEX}\n"), 0o600);
    let c = load(&[(Param::ApprovalSealKeyFile, path.to_str().unwrap())]).unwrap();
    assert_eq!(key_of(&c), bytes());
    let file = c.approval_seal_key_file.clone().unwrap();
    assert_eq!(file.path, path);
    assert!(file.exposure_warning().is_none());
    let text = c.render_effective();
    assert!(
        text.contains(&format!("ApprovalSealKeyFile={}\n", path.display())),
        "{text}"
    );
    assert!(
        text.contains("ApprovalSealKey=***\n") && !text.contains(HEX),
        "{text}"
    );

    let open = key_file("open", &format!("{}\r\n", base64_of_bytes()), 0o644);
    let c = load(&[(Param::ApprovalSealKeyFile, open.to_str().unwrap())]).unwrap();
    assert_eq!(key_of(&c), bytes());
    assert!(
        cfg!(not(unix))
            || c.approval_seal_key_file
                .unwrap()
                .exposure_warning()
                .is_some()
    );
    fs::remove_file(path).unwrap();
    fs::remove_file(open).unwrap();
}

#[test]
fn key_file_errors_name_the_file_not_the_key() {
    let weak = key_file(
        "weak",
        "correct horse battery staple, a passphrase\n",
        0o600,
    );
    let at = weak.display().to_string();
    let err = load(&[(Param::ApprovalSealKeyFile, &at)])
        .unwrap_err()
        .to_string();
    assert!(err.starts_with(&format!("option --approval-seal-key-file: invalid value {at:?}: the file holds no usable key: expected")), "{err}");
    assert!(!err.contains("horse"), "{err}");
    let err = load(&[(Param::ApprovalSealKeyFile, "/no/such/key")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot read the key file"), "{err}");
    fs::remove_file(weak).unwrap();
}

#[test]
fn key_and_key_file_together_are_a_configuration_error() {
    let path = key_file("both", HEX, 0o600);
    let err = load(&[
        (Param::ApprovalSealKey, HEX),
        (Param::ApprovalSealKeyFile, path.to_str().unwrap()),
    ])
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "option --approval-seal-key-file: ApprovalSealKey and ApprovalSealKeyFile are both set; give the key one way"
    );
    fs::remove_file(path).unwrap();
}

/// Whose read the warning is about: others, an owner who is neither root nor the sidecar,
/// a group other than the sidecar's own. A Kubernetes Secret under `fsGroup` (root, the
/// sidecar's group, 0440) and a systemd credential (the service user's, 0400) are not.
#[test]
fn key_file_readers_besides_the_sidecar() {
    use super::FileAccess;
    use super::file_access::Process;
    let sidecar = Process {
        uid: 1997,
        gid: 1995,
    };
    let file = |mode: u32, uid: u32, gid: u32| FileAccess { mode, uid, gid };
    // (mode, owner, group, readable by others than the sidecar and root)
    for (mode, uid, gid, others) in [
        (0o440, 0, 1995, false),
        (0o400, 0, 0, false),
        (0o600, 0, 0, false),
        (0o400, 1997, 1995, false),
        (0o640, 1997, 1995, false),
        (0o644, 0, 0, true),
        (0o404, 1997, 1995, true),
        (0o440, 0, 1000, true),
        (0o640, 0, 0, true),
        (0o400, 1000, 1995, true),
    ] {
        let f = file(mode, uid, gid);
        assert_eq!(f.readable_by_others_than(sidecar), others, "{f:?}");
    }
}
