//! Sixteen bytes at a time: the escaping of read documents ([`crate::mcp::splice`]) and the
//! strings of Zabbix's answers ([`crate::zabbix::scan`]) on x86_64, whose every CPU has
//! SSE2, through `safe_arch`'s safe wrappers of its instructions (no `unsafe` here). A
//! document has a quote every few bytes; finding them sixteen at a time in a few
//! instructions leaves each one only its own backslash to pay for, where the eight-byte
//! words of [`crate::swar`] pay a dozen instructions per word to find them. Elsewhere the
//! words do all of it: [`escape_blocks`] escapes nothing and [`find_special`] finds nothing.

#[cfg(target_arch = "x86_64")]
use safe_arch::{
    bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, m128i, min_u8_m128i,
    move_mask_i8_m128i, set_splat_i8_m128i,
};

/// A bit for each of the sixteen bytes that is a quote or a backslash, and one for each
/// below 0x20 (a byte at most 0x1f is its own minimum with 0x1f).
#[cfg(target_arch = "x86_64")]
fn specials(bytes: m128i) -> (u32, u32) {
    let quotes = cmp_eq_mask_i8_m128i(bytes, set_splat_i8_m128i(b'"' as i8));
    let backslashes = cmp_eq_mask_i8_m128i(bytes, set_splat_i8_m128i(b'\\' as i8));
    let last_control = set_splat_i8_m128i(0x1f);
    let controls = cmp_eq_mask_i8_m128i(min_u8_m128i(bytes, last_control), bytes);
    (
        move_mask_i8_m128i(bitor_m128i(quotes, backslashes)) as u32,
        move_mask_i8_m128i(controls) as u32,
    )
}

/// Where the first quote, backslash or control byte at or after `from` is, looked for in
/// whole blocks of sixteen: `Ok` with its place, or `Err` with where fewer than sixteen
/// bytes remain, none of them before it such a byte (the caller looks on from there).
#[cfg(target_arch = "x86_64")]
pub(crate) fn find_special(bytes: &[u8], mut from: usize) -> Result<usize, usize> {
    while let Some(block) = bytes.get(from..from + 16) {
        let Ok(block) = <&[u8; 16]>::try_from(block) else {
            break;
        };
        let (specials, controls) = specials(load_unaligned_m128i(block));
        let found = specials | controls;
        if found != 0 {
            return Ok(from + found.trailing_zeros() as usize);
        }
        from += 16;
    }
    Err(from)
}

/// Without SSE2 the words of [`crate::swar`] look at every byte.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn find_special(_bytes: &[u8], from: usize) -> Result<usize, usize> {
    Err(from)
}

/// Escapes the front of `text` into `dst` from `at` on, as [`crate::mcp::splice`] does
/// (a backslash before each quote and backslash), sixteen bytes at a time while 32 or more
/// remain (each copy takes the sixteen bytes from a quote on, so they must be there).
/// Returns how much of `text` it escaped and where in `dst` the next byte goes; `None` at a
/// control character (serde_json writes those) or if `dst` has less room than twice the
/// text and sixteen bytes of slack after `at`.
#[cfg(target_arch = "x86_64")]
pub(crate) fn escape_blocks(text: &[u8], dst: &mut [u8], mut at: usize) -> Option<(usize, usize)> {
    let mut done = 0;
    while let Some(window) = text.get(done..done + 32) {
        // The block, and the sixteen bytes after it that a copy from its last byte takes.
        let window: &[u8; 32] = window.try_into().ok()?;
        // Where the block's escaped bytes go: 32 at most, and a copy's tail past them.
        let out: &mut [u8; 48] = dst.get_mut(at..at + 48)?.try_into().ok()?;
        let block: &[u8; 16] = window[..16].try_into().ok()?;
        let (mut specials, controls) = specials(load_unaligned_m128i(block));
        if controls != 0 {
            return None;
        }
        out[..16].copy_from_slice(block);
        // The block's byte `special` goes `escaped` bytes further (one per special before
        // it): its backslash is written there and the copy from it on follows. The masks
        // change no value (both are below 16); they let the compiler drop bounds checks.
        let mut escaped = 0;
        while specials != 0 {
            let special = (specials.trailing_zeros() & 15) as usize;
            let to = special + (escaped & 15);
            out[to] = b'\\';
            out[to + 1..to + 17].copy_from_slice(&window[special..special + 16]);
            escaped += 1;
            specials &= specials - 1;
        }
        at += 16 + escaped;
        done += 16;
    }
    Some((done, at))
}

/// Without SSE2 the words of [`crate::swar`] escape the whole text.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn escape_blocks(_text: &[u8], _dst: &mut [u8], at: usize) -> Option<(usize, usize)> {
    Some((0, at))
}

#[cfg(test)]
mod tests {
    use super::{escape_blocks, find_special};

    /// Bytes where quotes, backslashes and controls come at any place, some blocks without.
    fn texts() -> impl Iterator<Item = Vec<u8>> {
        let mut seed = 0x853c_49e6_748f_ea9b_u64;
        (0..2000).map(move |n| {
            let odds = 1 + n % 40;
            (0..n % 90)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    match seed % (odds * 3) {
                        0 => b'"',
                        1 => b'\\',
                        2 => (seed >> 8) as u8 % 0x20,
                        _ => 0x20 + (seed >> 8) as u8 % 0xe0,
                    }
                })
                .filter(|&byte| byte != b'"' && byte != b'\\' || n % 7 != 0)
                .collect()
        })
    }

    fn special(byte: u8) -> bool {
        byte == b'"' || byte == b'\\' || byte < 0x20
    }

    #[test]
    fn finds_the_first_special_in_whole_blocks() {
        for text in texts() {
            for from in 0..=text.len().min(20) {
                let first = text[from..]
                    .iter()
                    .position(|&b| special(b))
                    .map(|at| from + at);
                match find_special(&text, from) {
                    Ok(at) => assert_eq!(Some(at), first, "{text:?} from {from}"),
                    Err(rest) => {
                        assert!(text.len() - rest < 16, "{text:?} from {from}");
                        assert!(first.is_none_or(|at| at >= rest), "{text:?} from {from}");
                    }
                }
            }
        }
    }

    #[test]
    fn escapes_blocks_byte_by_byte() {
        for text in texts() {
            let mut dst = vec![0; 2 * text.len() + 17];
            let Some((done, at)) = escape_blocks(&text, &mut dst, 1) else {
                assert!(text.iter().any(|&b| b < 0x20), "{text:?}");
                continue;
            };
            assert!(text.len() - done < 32 || cfg!(not(target_arch = "x86_64")));
            let mut expected = Vec::new();
            for &byte in &text[..done] {
                assert!(byte >= 0x20, "{text:?}");
                if byte == b'"' || byte == b'\\' {
                    expected.push(b'\\');
                }
                expected.push(byte);
            }
            assert_eq!(&dst[1..at], &expected[..], "{text:?}");
        }
    }
}
