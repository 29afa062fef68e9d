//! Timestamps in tool arguments: Unix seconds, or an RFC 3339 / ISO 8601 date-time that
//! says which zone it is in (`Z` or an offset). A local time without a zone is refused:
//! the sidecar cannot know which zone the agent meant, and a guess shifts a maintenance
//! by hours. Parsed here (no date crate), normalized to Unix seconds.

use serde_json::Value;

use crate::calendar::days_from_civil;

/// The largest timestamp Zabbix stores (signed 32-bit).
pub const MAX_TIMESTAMP: i64 = 2_147_483_647;

/// What a timestamp argument accepts, for error messages and schema descriptions.
pub const TIMESTAMP_FORMS: &str = "a Unix time in seconds or an RFC 3339 date-time with a zone \
                                   (e.g. 2026-10-15T22:00:00+02:00 or 2026-10-15T20:00:00Z)";

/// A timestamp argument value as Unix seconds; the error starts with the argument's name.
pub fn timestamp(name: &str, value: &Value) -> Result<i64, String> {
    unix_seconds(value).map_err(|e| format!("{name} {e}"))
}

fn unix_seconds(value: &Value) -> Result<i64, String> {
    let seconds = match value {
        Value::Number(n) => match n.as_i64() {
            Some(s) => s,
            None => return Err(format!("must be {TIMESTAMP_FORMS}, got {value}")),
        },
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse()
            .map_err(|_| format!("is too large (at most {MAX_TIMESTAMP})"))?,
        Value::String(s) => parse_rfc3339(s.trim())?,
        _ => return Err(format!("must be {TIMESTAMP_FORMS}, got {value}")),
    };
    if seconds < 0 {
        return Err(format!("must not be before 1970 (got {seconds})"));
    }
    if seconds > MAX_TIMESTAMP {
        return Err(format!(
            "must not be after 2038-01-19T03:14:07Z ({MAX_TIMESTAMP}), the latest time Zabbix stores; got {seconds}"
        ));
    }
    Ok(seconds)
}

/// Parses `YYYY-MM-DDTHH:MM[:SS[.frac]]` followed by `Z` or `±HH:MM` (also `±HHMM`, `±HH`).
/// `T` may be `t` or a space. Fractions of a second are dropped.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    let bad = || format!("must be {TIMESTAMP_FORMS}, got {text:?}");
    let b = text.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let year = digits(&b[0..4]).ok_or_else(bad)?;
    let month = digits(&b[5..7]).ok_or_else(bad)?;
    let day = digits(&b[8..10]).ok_or_else(bad)?;
    if b.len() == 10 {
        return Err(format!(
            "{text:?} is a date without a time and zone; give e.g. {text}T00:00:00Z or {text}T00:00:00+02:00"
        ));
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b.len() < 16 || b[13] != b':' {
        return Err(bad());
    }
    let hour = digits(&b[11..13]).ok_or_else(bad)?;
    let minute = digits(&b[14..16]).ok_or_else(bad)?;
    let mut rest = &b[16..];
    let mut second = 0;
    if rest.first() == Some(&b':') {
        second = rest.get(1..3).and_then(digits).ok_or_else(bad)?;
        rest = &rest[3..];
        if rest.first() == Some(&b'.') || rest.first() == Some(&b',') {
            let frac = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if frac == 0 {
                return Err(bad());
            }
            rest = &rest[1 + frac..];
        }
    }
    let offset = match rest {
        [] => {
            return Err(format!(
                "{text:?} has no time zone; add Z (UTC) or an offset such as +02:00"
            ));
        }
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), zone @ ..] => {
            let (h, m) = match zone {
                [h1, h2] => (digits(&[*h1, *h2]), Some(0)),
                [h1, h2, b':', m1, m2] | [h1, h2, m1, m2] => {
                    (digits(&[*h1, *h2]), digits(&[*m1, *m2]))
                }
                _ => (None, None),
            };
            match (h, m) {
                (Some(h), Some(m)) if h <= 23 && m <= 59 => {
                    let seconds = h * 3600 + m * 60;
                    if *sign == b'-' { -seconds } else { seconds }
                }
                _ => return Err(format!("{text:?} has an invalid zone offset")),
            }
        }
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&month) {
        return Err(format!("{text:?} has an invalid month {month}"));
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err(format!(
            "{text:?} is not a valid date ({year:04}-{month:02} has {} days)",
            days_in_month(year, month)
        ));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(format!("{text:?} has an invalid time of day"));
    }
    let days = days_from_civil(year, month, day);
    Ok(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

fn digits(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0i64, |n, b| n * 10 + i64::from(b - b'0')))
}

pub fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `HH:MM` as seconds since midnight.
pub fn time_of_day(text: &str) -> Option<i64> {
    let (h, m) = text.trim().split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (h, m) = (digits(h.as_bytes())?, digits(m.as_bytes())?);
    (h <= 23 && m <= 59).then_some(h * 3600 + m * 60)
}

#[cfg(test)]
mod tests {
    use super::{parse_rfc3339, time_of_day};
    use serde_json::{Value, json};

    fn timestamp(value: &Value) -> Result<i64, String> {
        super::timestamp("t", value)
    }

    #[test]
    fn zones_and_offsets() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_rfc3339("2026-10-15T20:00:00Z"), Ok(1_792_094_400));
        assert_eq!(
            parse_rfc3339("2026-10-15T22:00:00+02:00"),
            Ok(1_792_094_400)
        );
        assert_eq!(
            parse_rfc3339("2026-10-15T14:30:00-05:30"),
            Ok(1_792_094_400)
        );
        assert_eq!(parse_rfc3339("2026-10-15t22:00+0200"), Ok(1_792_094_400));
        assert_eq!(
            parse_rfc3339("2026-10-15 21:00:00.999+01"),
            Ok(1_792_094_400)
        );
        assert_eq!(parse_rfc3339("2038-01-19T03:14:07Z"), Ok(2_147_483_647));
    }

    #[test]
    fn leap_years() {
        assert_eq!(parse_rfc3339("2024-02-29T00:00:00Z"), Ok(1_709_164_800));
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Ok(951_782_400));
        assert_eq!(parse_rfc3339("2024-03-01T00:00:00Z"), Ok(1_709_251_200));
        let e = parse_rfc3339("2026-02-29T00:00:00Z").unwrap_err();
        assert!(e.contains("2026-02 has 28 days"), "{e}");
        assert!(parse_rfc3339("1900-02-29T00:00:00Z").is_err());
        assert!(parse_rfc3339("2100-02-29T00:00:00Z").is_err());
    }

    #[test]
    fn times_without_zone_are_refused() {
        let e = parse_rfc3339("2026-10-15T22:00:00").unwrap_err();
        assert!(e.contains("has no time zone; add Z"), "{e}");
        let e = parse_rfc3339("2026-10-15").unwrap_err();
        assert!(e.contains("date without a time and zone"), "{e}");
    }

    #[test]
    fn invalid_dates_and_times() {
        for text in [
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-04-00T00:00:00Z",
            "2026-04-10T24:00:00Z",
            "2026-04-10T23:60:00Z",
            "2026-04-10T23:59:60Z",
            "2026-04-10T23:59:00+24:00",
            "2026-04-10T23:59:00+02:60",
            "2026-04-10T23:59:00+2",
            "2026-04-10T23:59:00.Z",
            "2026-4-10T23:59:00Z",
            "tomorrow",
            "2026-04-10X23:59:00Z",
        ] {
            assert!(parse_rfc3339(text).is_err(), "{text}");
        }
    }

    #[test]
    fn numbers_and_range() {
        assert_eq!(timestamp(&json!(1_800_000_000)), Ok(1_800_000_000));
        assert_eq!(timestamp(&json!("1800000000")), Ok(1_800_000_000));
        assert!(timestamp(&json!(-1)).unwrap_err().contains("before 1970"));
        assert!(
            timestamp(&json!(2_147_483_648i64))
                .unwrap_err()
                .contains("2038")
        );
        assert!(
            timestamp(&json!("2040-01-01T00:00:00Z"))
                .unwrap_err()
                .contains("2038")
        );
        assert!(timestamp(&json!(1.5)).is_err());
        assert!(timestamp(&json!(true)).is_err());
    }

    #[test]
    fn times_of_day() {
        assert_eq!(time_of_day("22:00"), Some(79_200));
        assert_eq!(time_of_day("0:05"), Some(300));
        assert_eq!(time_of_day("24:00"), None);
        assert_eq!(time_of_day("12:5"), None);
    }
}
