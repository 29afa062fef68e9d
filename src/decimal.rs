//! Numbers and the texts made of them (IPv4 addresses, versions) written without `fmt`,
//! for text built on every call: `fmt`'s machinery (argument lists, padding) costs more
//! than the digits.

use std::net::IpAddr;

/// Appends `n` in decimal, as `n.to_string()` writes it.
pub(crate) fn push_number(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b"0123456789"[usize::try_from(rest % 10).unwrap_or(0)];
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[at..] {
        out.push(char::from(digit));
    }
}

/// `parts` in decimal joined by dots: an IPv4 address, a version.
pub(crate) fn dotted(parts: impl IntoIterator<Item = u64>) -> String {
    let mut text = String::with_capacity(15);
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        push_number(&mut text, part);
    }
    text
}

/// `address.to_string()`; IPv4 without `fmt` (IPv6 keeps std's text, `::` and all).
pub(crate) fn address(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) => dotted(v4.octets().map(u64::from)),
        IpAddr::V6(v6) => v6.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::{address, dotted, push_number};

    #[test]
    fn numbers_and_addresses_read_as_their_display() {
        for n in [0, 9, 10, 255, 4_294_967_296, u64::MAX] {
            let mut text = String::new();
            push_number(&mut text, n);
            assert_eq!(text, n.to_string());
        }
        for text in [
            "127.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "10.20.0.3",
            "::1",
            "::ffff:10.0.0.1",
            "2001:db8::8a2e:370:7334",
        ] {
            let ip: IpAddr = text.parse().expect("address");
            assert_eq!(address(ip), ip.to_string());
        }
        assert_eq!(dotted([7, 0, 22]), "7.0.22");
    }
}
