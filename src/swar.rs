//! Eight bytes at a time: the word tricks the JSON scan of Zabbix's answers
//! ([`crate::zabbix::scan`]) and the escaping of read documents ([`crate::mcp::splice`])
//! share, to find quotes, backslashes and control characters without looking at each byte.

/// Every byte's high bit.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
/// Every byte 1.
const ONES: u64 = 0x0101_0101_0101_0101;

/// The eight bytes at `at`, if there are eight.
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let word: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(word))
}

/// The high bit of each byte of `word` equal to `byte`. Exact: `(b & 0x7f) + 0x7f` never
/// carries into the next byte.
pub(crate) fn equal_to(word: u64, byte: u8) -> u64 {
    let zeros = word ^ (ONES * u64::from(byte));
    !(((zeros & !HIGH_BITS) + !HIGH_BITS) | zeros) & HIGH_BITS
}

/// The high bit of each byte of `word` below 0x20 (exact as [`equal_to`]).
pub(crate) fn below_space(word: u64) -> u64 {
    !(((word & !HIGH_BITS) + ONES * 0x60) | word) & HIGH_BITS
}

/// The high bit of the first byte of `word` that a JSON string cannot hold as it is (a
/// quote, a backslash or a control character), for [`first`]; bytes after it may be
/// flagged too. Cheaper than the exact forms: a borrow only runs upward, from a hit.
fn first_unescaped(word: u64) -> u64 {
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH_BITS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS;
    below_space
        | zero_byte(word ^ (ONES * u64::from(b'"')))
        | zero_byte(word ^ (ONES * u64::from(b'\\')))
}

/// Where the first quote, backslash or control byte at or after `from` is, looked for in
/// whole words; where fewer than eight bytes remain if none is (the caller looks on from
/// there).
pub(crate) fn find_special(bytes: &[u8], mut from: usize) -> usize {
    while let Some(word) = word_at(bytes, from) {
        let found = first_unescaped(word);
        if found != 0 {
            return from + first(found);
        }
        from += 8;
    }
    from
}

/// Where in `word` its first flagged byte (from [`equal_to`] and the like) is, 0 to 7.
pub(crate) fn first(flags: u64) -> usize {
    (flags.trailing_zeros() / 8) as usize
}

#[cfg(test)]
mod tests {
    use super::{below_space, equal_to, first, first_unescaped, word_at};

    #[test]
    fn flags_exactly_the_bytes_asked_for() {
        for byte in 0..=255u8 {
            for at in 0..8 {
                let mut bytes = [b'a'; 8];
                bytes[at] = byte;
                let word = u64::from_le_bytes(bytes);
                let expect = |hit: bool| if hit { 0x80u64 << (8 * at) } else { 0 };
                assert_eq!(equal_to(word, b'"'), expect(byte == b'"'), "{byte}");
                assert_eq!(below_space(word), expect(byte < 0x20), "{byte}");
                let special = byte < 0x20 || byte == b'"' || byte == b'\\';
                if special {
                    assert_eq!(first(first_unescaped(word)), at, "{byte}");
                } else {
                    assert_eq!(first_unescaped(word), 0, "{byte}");
                }
                // Whatever follows a special byte, the first is found.
                for after in [0u8, b'"', 0xff] {
                    let mut later = bytes;
                    later[7] = after;
                    if special && at < 7 {
                        let word = u64::from_le_bytes(later);
                        assert_eq!(first(first_unescaped(word)), at, "{byte} {after}");
                    }
                }
            }
        }
        assert_eq!(
            word_at(b"0123456789", 2),
            Some(u64::from_le_bytes(*b"23456789"))
        );
        assert_eq!(word_at(b"0123456789", 3), None);
    }
}
