//! Builtins whose work grows with what a few characters say: `units.parse` and
//! `units.parse_bytes` make the exact number they read, so `1e999999999` (11 bytes of an
//! agent's text) set regorus computing 10^999999999 (the sidecar's one runtime thread for
//! minutes; `/readyz` stopped answering), and a million digits took 27 s (debug build);
//! `net.cidr_expand` lists every address of a prefix: 39 s for `10.0.0.0/8` (debug build),
//! `::/0` without end.

use regorus::Value;
use regorus::unstable::{Expr, Ref, Span};

use super::{MAX_RANGE_ELEMENTS, refuse, text_checked};

pub(super) const UNITS_PARSE: &str = "units.parse";
pub(super) const UNITS_PARSE_BYTES: &str = "units.parse_bytes";
pub(super) const CIDR_EXPAND: &str = "net.cidr_expand";

/// Characters the number of a `units` string may have, and the largest decimal exponent it
/// may write: far above any quantity (10^308 is past a float), far below slow arithmetic.
pub(crate) const MAX_UNITS_DIGITS: u64 = 1000;

text_checked!(units_parse, UNITS_PARSE, check_units);
text_checked!(units_parse_bytes, UNITS_PARSE_BYTES, check_units);
text_checked!(cidr_expand, CIDR_EXPAND, check_cidr);

/// The number is what regorus reads: the text up to its last ASCII digit. Its length and
/// every exponent in it (after an `e` or `E`, read with the `_` regorus drops) must stay
/// within [`MAX_UNITS_DIGITS`].
fn check_units(builtin: &'static str, text: &str) -> anyhow::Result<()> {
    let number = text
        .rfind(|c: char| c.is_ascii_digit())
        .map_or("", |last| &text[..=last]);
    let exponent = number
        .match_indices(['e', 'E'])
        .map(|(at, _)| exponent_after(&number[at + 1..]))
        .max()
        .unwrap_or(0);
    let size = u64::try_from(number.len())
        .unwrap_or(u64::MAX)
        .max(exponent);
    if size <= MAX_UNITS_DIGITS {
        return Ok(());
    }
    Err(refuse(builtin, size, MAX_UNITS_DIGITS))
}

/// The magnitude of the exponent `text` starts with, saturating.
fn exponent_after(text: &str) -> u64 {
    text.trim_start_matches(['+', '-'])
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '_')
        .filter_map(|c| c.to_digit(10))
        .fold(0, |n: u64, d| {
            n.saturating_mul(10).saturating_add(u64::from(d))
        })
}

/// Refuses a prefix of more than [`MAX_RANGE_ELEMENTS`] addresses. The address is not
/// parsed (regorus' parser takes forms the standard library does not, `010.0.0.0/8`): text
/// with a `:` is IPv6. A prefix length that is no number is refused here too, rather than
/// guessed at.
fn check_cidr(builtin: &'static str, cidr: &str) -> anyhow::Result<()> {
    let bits: u32 = if cidr.contains(':') { 128 } else { 32 };
    let Some(prefix) = cidr
        .rsplit_once('/')
        .and_then(|(_, prefix)| prefix.parse::<u32>().ok())
    else {
        anyhow::bail!("{builtin}: not a CIDR (address/prefix length)");
    };
    // A prefix longer than the address is the builtin's own error.
    let Some(free) = bits.checked_sub(prefix) else {
        return Ok(());
    };
    if free < 64 && (1u64 << free) <= MAX_RANGE_ELEMENTS {
        return Ok(());
    }
    let addresses = if free < 64 { 1u64 << free } else { u64::MAX };
    Err(refuse(builtin, addresses, MAX_RANGE_ELEMENTS))
}

#[cfg(test)]
mod tests {
    use super::{CIDR_EXPAND, check_cidr, check_units};

    #[test]
    fn units_and_prefixes_past_their_bounds_are_refused_before_regorus_reads_them() {
        for ok in [
            "5M",
            "1.5Gi",
            "1e308",
            "\"2KiB\"",
            "",
            "abc",
            &"9".repeat(1000),
        ] {
            assert!(check_units("units.parse", ok).is_ok(), "{ok}");
        }
        for past in [
            "1e999999999",
            "1E1001k",
            "1e+99_999_999",
            "1e-5000",
            &"9".repeat(1001),
        ] {
            let err = check_units("units.parse", past).expect_err("past the bound");
            assert!(err.to_string().contains("memory limit"), "{past}: {err}");
        }
        for ok in [
            "10.0.0.0/16",
            "10.1.2.3/32",
            "::/112",
            "::ffff:10.0.0.0/120",
            "10.0.0.0/40",
        ] {
            assert!(check_cidr(CIDR_EXPAND, ok).is_ok(), "{ok}");
        }
        for past in [
            "10.0.0.0/15",
            "010.0.0.0/8",
            "0.0.0.0/0",
            "::/0",
            "::ffff:10.0.0.0/104",
        ] {
            let err = check_cidr(CIDR_EXPAND, past).expect_err("past the bound");
            assert!(err.to_string().contains("memory limit"), "{past}: {err}");
        }
        assert!(check_cidr(CIDR_EXPAND, "10.0.0.0").is_err());
    }
}
