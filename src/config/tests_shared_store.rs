//! `SharedStore` and `SharedStoreFile`: a URL given one way, parsed as the start parses it,
//! read from a file when given so, and never echoed (it may hold the Redis password).

use super::{Config, ConfigError, Param, Sources};
use crate::scratch::Scratch;

const KEY: &str = "5a1f930c7e44d2813ba60fe92578c4119d6237fa08be53c16a2e947de01548b3";
const URL: &str = "redis://:s3cret@127.0.0.1:6390/2";

/// The lines every configuration here starts with; the store's parameter is on line 4.
fn base() -> String {
    format!("FrontendURL=http://127.0.0.1/\nAllowedIP=127.0.0.1\nApprovalSealKey={KEY}\n")
}

fn load_text(dir: &Scratch, text: &str) -> Result<Config, ConfigError> {
    Config::load(&Sources {
        config_file: Some(dir.write("main.conf", text)),
        ..Sources::default()
    })
}

/// A file `name` holding `text` with `mode`.
fn url_file(dir: &Scratch, name: &str, text: &str, mode: u32) -> String {
    let path = dir.write(name, text);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    path.display().to_string()
}

/// A Redis URL a start would refuse fails here, named and without its password.
#[test]
fn shared_store_urls_that_do_not_parse_are_refused() {
    let dir = Scratch::new("config-shared-store-url");
    for bad in [
        "redis://:s3cret@h:99999/1",
        "redis://:s3cret@h:6379/abc",
        "rediss://:s3cret@",
    ] {
        let err = load_text(&dir, &format!("{}SharedStore={bad}\n", base())).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains(":4: SharedStore: invalid value \"***\": a redis URL that does not parse"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
    }
    // `#insecure` would turn off the certificate check; any fragment is refused.
    for fragment in ["rediss://:s3cret@h:6379/1#insecure", "redis://:s3c#ret@h/"] {
        let err = load_text(&dir, &format!("{}SharedStore={fragment}\n", base())).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("a URL fragment (#…): #insecure"), "{err}");
        assert!(!err.contains("s3c"), "{err}");
    }
    for good in [
        "redis://:s3cret@h:6379/1",
        "redis://:s3c%23ret@h:6379/1",
        "rediss://u:p%40ss@h/",
        "redis://[::1]:6390",
    ] {
        assert!(
            load_text(&dir, &format!("{}SharedStore={good}\n", base())).is_ok(),
            "{good}"
        );
    }
}

/// The URL is read from the file (a trailing newline is fine) and used as `SharedStore`
/// would be; `-T` names the file and shows no URL.
#[test]
fn a_url_file_gives_the_store() {
    let dir = Scratch::new("config-shared-store-file");
    let file = url_file(&dir, "url", &format!("{URL}\n"), 0o600);
    let config = load_text(&dir, &format!("{}SharedStoreFile={file}\n", base())).unwrap();
    let url = config.shared_store.as_ref().expect("a store");
    assert_eq!(url.expose(), URL.as_bytes());
    assert_eq!(
        config
            .shared_store_file
            .as_ref()
            .map(|f| f.path.display().to_string()),
        Some(file.clone())
    );
    let shown = config.render_effective();
    assert!(
        shown.contains(&format!("SharedStoreFile={file}\n")),
        "{shown}"
    );
    assert!(shown.contains("SharedStore=\n"), "{shown}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(config.secret_file_warnings().is_empty());
}

#[test]
fn a_url_file_is_held_to_what_sharedstore_is_held_to() {
    let dir = Scratch::new("config-shared-store-file-bad");
    // Both ways at once.
    let file = url_file(&dir, "url", URL, 0o600);
    let both = load_text(
        &dir,
        &format!("{}SharedStore={URL}\nSharedStoreFile={file}\n", base()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        both.contains(":5: SharedStoreFile: SharedStore and SharedStoreFile are both set"),
        "{both}"
    );
    assert!(!both.contains("s3cret"), "{both}");
    // A URL that does not parse: the file is named, its text is not.
    let bad = url_file(&dir, "bad-url", "redis://:s3cret@h:99999/1", 0o600);
    let err = load_text(&dir, &format!("{}SharedStoreFile={bad}\n", base()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!(
            ":4: SharedStoreFile: invalid value {bad:?}: a redis URL that does not parse"
        )),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    // Without the seal key a Redis store is refused, named as the file.
    let unsigned = load_text(
        &dir,
        &format!("FrontendURL=http://127.0.0.1/\nAllowedIP=127.0.0.1\nSharedStoreFile={file}\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        unsigned.contains(":3: SharedStoreFile: a Redis store needs ApprovalSealKey"),
        "{unsigned}"
    );
    // No file, a directory.
    for (path, reason) in [
        ("/no/such/url".to_owned(), "cannot read the URL file"),
        (dir.display().to_string(), "not a URL file"),
    ] {
        let err = load_text(&dir, &format!("{}SharedStoreFile={path}\n", base()))
            .unwrap_err()
            .to_string();
        assert!(err.contains(reason), "{err}");
    }
}

/// Others may read the password: warned at start and by `-T`, as for the seal key's file.
#[test]
fn a_url_file_others_can_read_is_warned_of() {
    let dir = Scratch::new("config-shared-store-file-open");
    let file = url_file(&dir, "url", URL, 0o644);
    let config = load_text(&dir, &format!("{}SharedStoreFile={file}\n", base())).unwrap();
    let warnings = config.secret_file_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!("SharedStoreFile {file} (mode 644")),
        "{warnings:?}"
    );
}

/// A reload reads the file again: a changed URL is a changed `SharedStoreFile`.
#[test]
fn a_changed_url_file_is_a_changed_parameter() {
    let dir = Scratch::new("config-shared-store-file-diff");
    let file = url_file(&dir, "url", URL, 0o600);
    let text = format!("{}SharedStoreFile={file}\n", base());
    let old = load_text(&dir, &text).unwrap();
    assert!(super::changed(&old, &load_text(&dir, &text).unwrap()).is_empty());
    url_file(&dir, "url", "redis://:other@127.0.0.1:6390/2", 0o600);
    let new = load_text(&dir, &text).unwrap();
    assert_eq!(super::changed(&old, &new), vec![Param::SharedStoreFile]);
}
