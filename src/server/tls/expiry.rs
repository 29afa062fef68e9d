//! The end of a certificate's validity (`notAfter`), read from its DER encoding: what the
//! logs and `/metrics` say of the certificate being served, so an expiry can be alerted on
//! before clients start refusing it. Only the path to `validity` is walked; rustls and
//! webpki parse the rest.

use crate::calendar::days_from_civil;

/// `notAfter` of a DER X.509 certificate, in seconds since 1970-01-01 UTC.
pub(super) fn not_after(der: &[u8]) -> Result<i64, &'static str> {
    let certificate = Der(der).element(SEQUENCE)?;
    let mut tbs = Der(Der(certificate).element(SEQUENCE)?);
    if tbs.peek() == Some(VERSION) {
        tbs.element(VERSION)?;
    }
    tbs.element(INTEGER)?; // serialNumber
    tbs.element(SEQUENCE)?; // signature
    tbs.element(SEQUENCE)?; // issuer
    let mut validity = Der(tbs.element(SEQUENCE)?);
    validity.time()?; // notBefore
    validity.time()
}

const INTEGER: u8 = 0x02;
const SEQUENCE: u8 = 0x30;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The unread rest of a DER encoding.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// Reads one element of type `tag` and returns its contents; `self` keeps what follows.
    fn element(&mut self, tag: u8) -> Result<&'a [u8], &'static str> {
        let (&found, rest) = self.0.split_first().ok_or("truncated")?;
        if found != tag {
            return Err("unexpected element");
        }
        let (&first, mut rest) = rest.split_first().ok_or("truncated")?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            // The long form: 1 to 4 length bytes, the shortest encoding (DER).
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || rest.len() < count {
                return Err("bad length");
            }
            let (bytes, after) = rest.split_at(count);
            rest = after;
            let len = bytes.iter().fold(0usize, |n, b| n << 8 | usize::from(*b));
            if bytes[0] == 0 || len < 0x80 {
                return Err("bad length");
            }
            len
        };
        if rest.len() < len {
            return Err("truncated");
        }
        let (contents, after) = rest.split_at(len);
        self.0 = after;
        Ok(contents)
    }

    /// A `Time` (RFC 5280 4.1.2.5): UTCTime `YYMMDDHHMMSSZ` (years 1950–2049) or
    /// GeneralizedTime `YYYYMMDDHHMMSSZ`.
    fn time(&mut self) -> Result<i64, &'static str> {
        let (year_digits, text) = match self.peek() {
            Some(UTC_TIME) => (2, self.element(UTC_TIME)?),
            Some(GENERALIZED_TIME) => (4, self.element(GENERALIZED_TIME)?),
            _ => return Err("no validity time"),
        };
        let (year, text) = text.split_at_checked(year_digits).ok_or("bad time")?;
        let year = match (year_digits, digits(year)?) {
            (2, yy) if yy < 50 => 2000 + yy,
            (2, yy) => 1900 + yy,
            (_, yyyy) => yyyy,
        };
        let [m @ .., b'Z'] = text else {
            return Err("bad time");
        };
        if m.len() != 10 {
            return Err("bad time");
        }
        let field = |at: usize| digits(&m[at..at + 2]);
        let (month, day) = (field(0)?, field(2)?);
        let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
        if !(1..=12).contains(&month)
            || !(1..=31).contains(&day)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return Err("bad time");
        }
        let days = days_from_civil(year, month, day);
        Ok(days * 86_400 + hour * 3_600 + minute * 60 + second)
    }
}

fn digits(text: &[u8]) -> Result<i64, &'static str> {
    text.iter().try_fold(0i64, |n, b| match b {
        b'0'..=b'9' => Ok(n * 10 + i64::from(b - b'0')),
        _ => Err("bad time"),
    })
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair, date_time_ymd};

    use super::not_after;

    fn der_until(year: i32, month: u8, day: u8) -> Vec<u8> {
        let mut params = CertificateParams::new(vec!["localhost".into()]).expect("params");
        params.not_after = date_time_ymd(year, month, day);
        let key = KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").der().to_vec()
    }

    #[test]
    fn reads_utc_and_generalized_times() {
        // rcgen writes UTCTime up to 2049 and GeneralizedTime from 2050, as RFC 5280 asks.
        assert_eq!(not_after(&der_until(2027, 3, 1)), Ok(1_803_859_200));
        assert_eq!(not_after(&der_until(2049, 12, 31)), Ok(2_524_521_600));
        assert_eq!(not_after(&der_until(2050, 1, 1)), Ok(2_524_608_000));
        assert_eq!(not_after(&der_until(1999, 1, 1)), Ok(915_148_800));
    }

    #[test]
    fn refuses_what_is_not_a_certificate() {
        let der = der_until(2027, 3, 1);
        for cut in [0, 1, 2, 10, 40, der.len() / 2] {
            assert!(not_after(&der[..cut]).is_err(), "cut at {cut}");
        }
        assert!(not_after(b"0\x03\x02\x01\x00").is_err());
        // A long-form length where the short form fits is not DER.
        assert_eq!(
            not_after(&[0x30, 0x81, 0x05, 0, 0, 0, 0, 0]),
            Err("bad length")
        );
    }
}
