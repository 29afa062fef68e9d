//! Proleptic Gregorian calendar arithmetic (Howard Hinnant's algorithms), shared by the
//! places that format or parse dates without a date crate: decision-log timestamps,
//! syslog headers, and RFC 3339 arguments.

/// Days since 1970-01-01 of a date (`month` 1–12); negative before the epoch.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month 1–12, day 1–31) of a day count since 1970-01-01 (non-negative).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
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
    use super::{civil_from_days, days_from_civil};

    #[test]
    fn round_trips() {
        for days in [0u64, 59, 60, 365, 10_957, 11_016, 20_454, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            let back = days_from_civil(y as i64, m as i64, d as i64);
            assert_eq!(back, days as i64, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }
}
