//! Signs what the store keeps in Redis: each approval record and each of its statuses
//! carries an HMAC-SHA256, under a key derived from `ApprovalSealKey`, bound to the
//! approval's id. Whoever can write to Redis but does not hold the key therefore cannot
//! mark a call approved, move one approval's decision onto another, or plant an approval
//! of their own: every replica refuses what it cannot verify. (They can still delete, or
//! put back a status the same approval had before; see README "Approval page".)

use ring::hmac;

use super::StoreError;

/// What a signed text is: a record and a status of the same id never verify as each other.
#[derive(Debug, Clone, Copy)]
pub(super) enum Part {
    Record,
    Status,
    /// A Zabbix setting a replica read and shares (the page's `login_attempts`).
    Setting,
}

/// The key, derived from `ApprovalSealKey` so that it signs nothing else the sidecar
/// seals with that key.
pub(super) struct Seal {
    /// Boxed: ring's key holds both HMAC states, which would make every `Store` large.
    key: Box<hmac::Key>,
}

/// Hex digits of a tag in front of the text it signs.
const TAG_HEX: usize = 64;

impl Part {
    fn label(self) -> &'static [u8] {
        match self {
            Part::Record => b"record",
            Part::Status => b"status",
            Part::Setting => b"setting",
        }
    }
}

impl Seal {
    pub(super) fn new(seal_key: &[u8]) -> Seal {
        let root = hmac::Key::new(hmac::HMAC_SHA256, seal_key);
        let derived = hmac::sign(&root, b"zabbix-mcp-guard shared store v1");
        Seal {
            key: Box::new(hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref())),
        }
    }

    /// `text` with its tag in front, as it is stored.
    pub(super) fn sign(&self, part: Part, id: &str, text: &str) -> String {
        let tag = hmac::sign(&self.key, &message(part, id, text));
        let mut signed = hex::encode(tag.as_ref());
        signed.push_str(text);
        signed
    }

    /// The text of a stored `signed`, if its tag is this key's for `part` of `id`.
    pub(super) fn open<'a>(
        &self,
        part: Part,
        id: &str,
        signed: &'a str,
    ) -> Result<&'a str, StoreError> {
        let unsigned = || {
            let what = match part {
                Part::Setting => format!("the setting {id}"),
                _ => format!(
                    "the {} of approval {id}",
                    std::str::from_utf8(part.label()).unwrap_or("part")
                ),
            };
            StoreError::Corrupt(format!(
                "{what} is not signed with this sidecar's ApprovalSealKey \
                 (written by someone else, or by a replica with another key)"
            ))
        };
        let (tag, text) = match (signed.get(..TAG_HEX), signed.get(TAG_HEX..)) {
            (Some(tag), Some(text)) => (tag, text),
            _ => return Err(unsigned()),
        };
        let tag = hex::decode(tag).map_err(|_| unsigned())?;
        hmac::verify(&self.key, &message(part, id, text), &tag).map_err(|_| unsigned())?;
        Ok(text)
    }
}

/// Label, id and text, each but the last followed by a NUL, which none of them holds
/// before the text (ids are generated hex; labels are fixed).
fn message(part: Part, id: &str, text: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(part.label().len() + id.len() + text.len() + 2);
    message.extend_from_slice(part.label());
    message.push(0);
    message.extend_from_slice(id.as_bytes());
    message.push(0);
    message.extend_from_slice(text.as_bytes());
    message
}

#[cfg(test)]
mod tests {
    use super::{Part, Seal};

    const KEY: &[u8] = &[7; 32];

    #[test]
    fn a_signed_text_opens_only_as_what_and_for_whom_it_was_signed() {
        let seal = Seal::new(KEY);
        let signed = seal.sign(Part::Status, "abc", r#"{"state":"approved"}"#);
        assert_eq!(
            seal.open(Part::Status, "abc", &signed).unwrap(),
            r#"{"state":"approved"}"#
        );
        assert!(seal.open(Part::Status, "abd", &signed).is_err());
        assert!(seal.open(Part::Record, "abc", &signed).is_err());
        assert!(
            Seal::new(&[8; 32])
                .open(Part::Status, "abc", &signed)
                .is_err()
        );
    }

    #[test]
    fn a_changed_or_unsigned_text_does_not_open() {
        let seal = Seal::new(KEY);
        let signed = seal.sign(Part::Record, "abc", r#"{"id":"abc"}"#);
        let changed = signed.replace("abc", "abd");
        assert!(seal.open(Part::Record, "abc", &changed).is_err());
        for stored in ["", r#"{"id":"abc"}"#, &signed[..63], &"z".repeat(80)] {
            let error = seal.open(Part::Record, "abc", stored).unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("not signed with this sidecar's ApprovalSealKey"),
                "{error}"
            );
        }
    }
}
