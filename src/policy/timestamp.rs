//! RFC 3339 UTC timestamps with nanoseconds (`2026-01-01T00:00:00.000000000Z`) for the
//! decision log, without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

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

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`, restricted to non-negative days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
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
