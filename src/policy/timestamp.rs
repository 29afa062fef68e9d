//! RFC 3339 UTC timestamps with nanoseconds (`2026-01-01T00:00:00.000000000Z`) for the
//! decision log, without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::calendar::civil_from_days;

/// Formats `time` in UTC with nine fractional digits; times before 1970 clamp to the epoch.
pub(crate) fn rfc3339_nanos(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_nanos()
    )
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
    }
}
