//! RFC 3339 UTC timestamps with nanoseconds (`2026-01-01T00:00:00.000000000Z`) for the
//! decision log, without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::calendar::civil_from_days;

/// Formats `time` in UTC with nine fractional digits; times before 1970 clamp to the epoch.
/// Written digit by digit: two of these go into every call's log lines, and `format!`
/// cost ten times as many instructions.
pub(crate) fn rfc3339_nanos(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut text = String::with_capacity(30);
    push_digits(&mut text, year, year.max(1).ilog10().max(3) + 1);
    text.push('-');
    push_digits(&mut text, month, 2);
    text.push('-');
    push_digits(&mut text, day, 2);
    text.push('T');
    push_digits(&mut text, rem / 3600, 2);
    text.push(':');
    push_digits(&mut text, rem % 3600 / 60, 2);
    text.push(':');
    push_digits(&mut text, rem % 60, 2);
    text.push('.');
    push_digits(&mut text, u64::from(since.subsec_nanos()), 9);
    text.push('Z');
    text
}

/// Appends `value`'s last `width` decimal digits, zero-padded: `{value:0width$}` for a
/// value of at most `width` digits, as every value above is. The digits are taken from the
/// right, dividing by the constant 10 (a multiplication): a power of ten per digit and a
/// division by it cost some 600 instructions a timestamp.
fn push_digits(text: &mut String, value: u64, width: u32) {
    let mut digits = [b'0'; 20];
    let width = usize::try_from(width).map_or(digits.len(), |w| w.min(digits.len()));
    let mut rest = value;
    for digit in digits.iter_mut().take(width).rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    for &digit in digits.iter().take(width) {
        text.push(char::from(digit));
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::rfc3339_nanos;

    #[test]
    fn formats_known_instants() {
        let at = |secs: u64, nanos: u32| rfc3339_nanos(UNIX_EPOCH + Duration::new(secs, nanos));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(at(1_767_225_600, 5), "2026-01-01T00:00:00.000000005Z");
        // Leap day and end of a leap year.
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00.000000000Z");
        assert_eq!(
            at(1_735_689_599, 999_999_999),
            "2024-12-31T23:59:59.999999999Z"
        );
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000000Z");
        assert_eq!(at(1_709_210_096, 123), "2024-02-29T12:34:56.000000123Z");
        // Years past 9999 keep every digit, as `{year:04}` did.
        assert_eq!(at(253_402_300_800, 0), "10000-01-01T00:00:00.000000000Z");
    }
}
