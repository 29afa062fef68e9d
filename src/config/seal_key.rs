//! `ApprovalSealKey` and `ApprovalSealKeyFile`: at least 32 random bytes, written as hex
//! or padded base64, given inline or (so it is not on a command line) in a file. The key
//! text never appears in an error.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};

use super::Secret;
use super::error::ConfigError;
use super::file::Entry;
use super::merge::Resolved;
use super::params::Param;
use super::secret_file::SecretFile;

/// An approval seal key shorter than this is too weak for HMAC-SHA256.
pub const MIN_SEAL_KEY_BYTES: usize = 32;

/// Why a key text is not a key; never includes the text.
const FORMAT: &str = "expected at least 32 random bytes written as hex (64 hex digits or more, \
                      e.g. `openssl rand -hex 32`) or padded base64 (e.g. `openssl rand -base64 32`)";

/// The key and, when it came from a file, that file.
pub fn load(r: &Resolved) -> Result<(Option<Secret>, Option<SecretFile>), ConfigError> {
    let inline = r
        .get(Param::ApprovalSealKey)
        .filter(|e| !e.value.is_empty());
    let file = r
        .get(Param::ApprovalSealKeyFile)
        .filter(|e| !e.value.is_empty());
    match (inline, file) {
        (None, None) => Ok((None, None)),
        (Some(_), Some(file)) => Err(ConfigError::conflict(
            &file.at(),
            "ApprovalSealKey and ApprovalSealKeyFile are both set; give the key one way",
        )),
        (Some(e), None) => {
            let key = decode(&e.value)
                .map_err(|reason| ConfigError::bad_value(&e.at(), "***", reason))?;
            Ok((Some(key), None))
        }
        (None, Some(e)) => {
            let (key, file) = from_file(e)?;
            Ok((Some(key), Some(file)))
        }
    }
}

fn from_file(e: &Entry) -> Result<(Secret, SecretFile), ConfigError> {
    let (text, file) = SecretFile::read(Param::ApprovalSealKeyFile, e, "key file")?;
    let key = decode(&text).map_err(|reason| {
        ConfigError::bad_value(
            &e.at(),
            &e.value,
            format!("the file holds no usable key: {reason}"),
        )
    })?;
    Ok((key, file))
}

/// Hex when the text is only hex digits (even count), else padded base64 (standard or
/// URL-safe alphabet); surrounding whitespace (a trailing newline) is ignored.
pub fn decode(text: &str) -> Result<Secret, String> {
    let text = text.trim();
    let bytes = if !text.is_empty()
        && text.len().is_multiple_of(2)
        && text.bytes().all(|b| b.is_ascii_hexdigit())
    {
        hex::decode(text).map_err(|_| FORMAT.to_owned())?
    } else {
        STANDARD
            .decode(text)
            .or_else(|_| URL_SAFE.decode(text))
            .map_err(|_| FORMAT.to_owned())?
    };
    if bytes.len() < MIN_SEAL_KEY_BYTES {
        return Err(format!(
            "the key is {} bytes long; at least {MIN_SEAL_KEY_BYTES} random bytes are needed",
            bytes.len()
        ));
    }
    Ok(Secret::new(bytes))
}
