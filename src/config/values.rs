//! Parsers for single parameter values: integers with ranges, `K`/`M`/`G` sizes,
//! 0/1 booleans, address lists and the URL, each reporting errors at the value's
//! origin.

use std::net::{IpAddr, ToSocketAddrs};

use ipnet::IpNet;

use super::error::{At, ConfigError};

/// An integer in `min..=max`, decimal digits only (no sign, no spaces).
pub fn integer(at: &At, value: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
    let number = digits(at, value, "expected an integer")?;
    if number < min || number > max {
        return Err(ConfigError::out_of_range(
            at,
            value,
            &min.to_string(),
            &max.to_string(),
        ));
    }
    Ok(number)
}

/// A byte size with an optional `K`, `M` or `G` suffix, in `min..=max` bytes.
pub fn size(at: &At, value: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
    let (number, unit) = match value.char_indices().last() {
        Some((i, 'K')) => (&value[..i], 1u64 << 10),
        Some((i, 'M')) => (&value[..i], 1 << 20),
        Some((i, 'G')) => (&value[..i], 1 << 30),
        _ => (value, 1),
    };
    let reason = "expected a size in bytes, optionally with a K, M or G suffix";
    let bytes = digits(at, number, reason)?
        .checked_mul(unit)
        .ok_or_else(|| ConfigError::bad_value(at, value, reason))?;
    if bytes < min || bytes > max {
        return Err(ConfigError::out_of_range(
            at,
            value,
            &format_size(min),
            &format_size(max),
        ));
    }
    Ok(bytes)
}

/// The shortest exact spelling of a size, e.g. `64K`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    UNITS
        .iter()
        .find(|(unit, _)| bytes != 0 && bytes.is_multiple_of(*unit))
        .map_or_else(
            || bytes.to_string(),
            |(unit, s)| format!("{}{s}", bytes / unit),
        )
}

/// A boolean: `true` or `false`, as the official Zabbix MCP server reads its boolean
/// parameters (exact, lower-case), and `0` or `1`, as this sidecar always accepted.
pub fn boolean(at: &At, value: &str) -> Result<bool, ConfigError> {
    match value {
        "false" | "0" => Ok(false),
        "true" | "1" => Ok(true),
        _ => Err(ConfigError::bad_value(at, value, "expected true or false")),
    }
}

/// One of the listed keywords (case-sensitive, as in Zabbix).
pub fn keyword<T: Copy>(at: &At, value: &str, choices: &[(&str, T)]) -> Result<T, ConfigError> {
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            ConfigError::bad_value(at, value, format!("expected one of {}", names.join(", ")))
        })
}

/// Comma-separated items, trimmed; an empty item is an error.
pub fn comma_list<'a>(at: &At, value: &'a str) -> Result<Vec<&'a str>, ConfigError> {
    value
        .split(',')
        .map(str::trim)
        .map(|item| {
            if item.is_empty() {
                Err(ConfigError::bad_value(
                    at,
                    value,
                    "empty item in comma-separated list",
                ))
            } else {
                Ok(item)
            }
        })
        .collect()
}

/// `AllowedIP`: IP addresses, CIDR networks and DNS names. Names are resolved now
/// into host routes, so a name that does not resolve fails at start like in Zabbix.
pub fn allowed_ip(at: &At, value: &str) -> Result<Vec<IpNet>, ConfigError> {
    let mut nets = Vec::new();
    for item in comma_list(at, value)? {
        if let Ok(ip) = item.parse::<IpAddr>() {
            nets.push(IpNet::from(ip));
        } else if let Ok(net) = item.parse::<IpNet>() {
            // A host address with a prefix means its network, as in Zabbix.
            nets.push(net.trunc());
        } else if item.contains('/') {
            return Err(ConfigError::bad_value(
                at,
                value,
                format!("invalid network {item:?}"),
            ));
        } else {
            let addrs: Vec<IpNet> = (item, 0u16)
                .to_socket_addrs()
                .map_err(|e| {
                    ConfigError::bad_value(at, value, format!("cannot resolve {item:?}: {e}"))
                })?
                .map(|addr| IpNet::from(addr.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(ConfigError::bad_value(
                    at,
                    value,
                    format!("{item:?} resolves to no address"),
                ));
            }
            for net in addrs {
                // A name usually resolves once per socket type; keep one route each.
                if !nets.contains(&net) {
                    nets.push(net);
                }
            }
        }
    }
    Ok(nets)
}

/// `ListenIP`: a comma list of IP addresses.
pub fn listen_ip(at: &At, value: &str) -> Result<Vec<IpAddr>, ConfigError> {
    comma_list(at, value)?
        .into_iter()
        .map(|item| {
            item.parse::<IpAddr>().map_err(|_| {
                ConfigError::bad_value(at, value, format!("{item:?} is not an IP address"))
            })
        })
        .collect()
}

/// `FrontendURL`: an absolute http or https URL without query or fragment.
pub fn frontend_url(at: &At, value: &str) -> Result<String, ConfigError> {
    // A URL with user info may hold a password: never echo it, whatever else is wrong.
    let shown = if value.contains('@') { "***" } else { value };
    let uri: http::Uri = value
        .parse()
        .map_err(|e: http::uri::InvalidUri| ConfigError::bad_value(at, shown, e.to_string()))?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    if !scheme_ok || uri.host().is_none_or(str::is_empty) {
        return Err(ConfigError::bad_value(
            at,
            shown,
            "expected an http:// or https:// URL",
        ));
    }
    if uri.query().is_some() {
        return Err(ConfigError::bad_value(
            at,
            shown,
            "the URL must not have a query",
        ));
    }
    // A fragment is never sent: `https://z/#x` sent every call to `/`, Zabbix's HTML
    // front page, and the sidecar started with "not JSON-RPC" as the only hint.
    if value.contains('#') {
        return Err(ConfigError::bad_value(
            at,
            shown,
            "the URL must not have a fragment (#…): it is never sent",
        ));
    }
    // Before, `user:password@` was accepted, never sent (Zabbix gets each caller's own
    // token in Authorization), and printed by `-T` with the rest of the URL.
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(ConfigError::bad_value(
            at,
            shown,
            "the URL must not hold a user or password: they are not sent (Zabbix gets each \
             caller's own API token)",
        ));
    }
    Ok(value.to_owned())
}

/// The longest tool name MCP allows (specification 2025-11-25, "Tool names": 1 to 128
/// characters); the Python SDK warns of longer ones, and clients may not offer them.
const MAX_TOOL_NAME: usize = 128;

/// `ToolPrefix`: letters, digits, `_`, `-` and `.`, and short enough that the longest
/// prefixed tool name is at most [`MAX_TOOL_NAME`], so prefixed names stay valid MCP
/// tool names.
pub fn tool_prefix(at: &At, value: &str) -> Result<String, ConfigError> {
    let ok = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        return Err(ConfigError::bad_value(
            at,
            value,
            "only letters, digits, '_', '-' and '.' are allowed",
        ));
    }
    let longest = crate::catalog::all_tools()
        .map(|tool| tool.name)
        .max_by_key(|name| name.len())
        .unwrap_or_default();
    if value.len() + longest.len() > MAX_TOOL_NAME {
        return Err(ConfigError::bad_value(
            at,
            value,
            format!(
                "at most {} characters: MCP tool names are at most {MAX_TOOL_NAME}, and the \
                 longest tool is {longest}",
                MAX_TOOL_NAME - longest.len()
            ),
        ));
    }
    Ok(value.to_owned())
}

fn digits(at: &At, value: &str, reason: &str) -> Result<u64, ConfigError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ConfigError::bad_value(at, value, reason));
    }
    value
        .parse()
        .map_err(|_| ConfigError::bad_value(at, value, "the number is too large"))
}

#[cfg(test)]
mod tests {
    use super::{
        allowed_ip, boolean, format_size, frontend_url, integer, listen_ip, size, tool_prefix,
    };
    use crate::config::error::{At, Origin};
    use crate::config::params::Param;

    fn at(param: Param) -> At {
        At::new(
            Origin::File {
                path: "/x.conf".into(),
                line: 7,
            },
            param,
        )
    }

    #[test]
    fn integers_and_ranges() {
        let t = at(Param::Timeout);
        assert_eq!(integer(&t, "10", 3, 30).unwrap(), 10);
        for bad in ["", "-1", "+3", "1.5", " 3", "x"] {
            assert!(integer(&t, bad, 3, 30).is_err(), "{bad:?}");
        }
        assert_eq!(
            integer(&t, "45", 3, 30).unwrap_err().to_string(),
            "/x.conf:7: Timeout: value 45 is out of range 3-30"
        );
        assert!(integer(&t, "99999999999999999999999", 3, 30).is_err());
    }

    #[test]
    fn sizes() {
        let m = at(Param::MaxResponseSize);
        assert_eq!(size(&m, "64K", 16 << 10, 256 << 10).unwrap(), 65536);
        assert_eq!(size(&m, "16384", 16 << 10, 256 << 10).unwrap(), 16384);
        assert_eq!(
            size(&m, "1M", 16 << 10, 256 << 10).unwrap_err().to_string(),
            "/x.conf:7: MaxResponseSize: value 1M is out of range 16K-256K"
        );
        assert!(size(&m, "K", 0, 1 << 20).is_err());
        assert!(size(&m, "64k", 0, 1 << 20).is_err());
        assert_eq!(format_size(65536), "64K");
        assert_eq!(format_size(1 << 20), "1M");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn booleans() {
        let b = at(Param::IgnoreUrlCertErrors);
        assert!(!boolean(&b, "0").unwrap());
        assert!(boolean(&b, "1").unwrap());
        assert!(!boolean(&b, "false").unwrap());
        assert!(boolean(&b, "true").unwrap());
        for bad in ["TRUE", "True", "yes", "on", " true", ""] {
            assert_eq!(
                boolean(&b, bad).unwrap_err().to_string(),
                format!(
                    "/x.conf:7: IgnoreURLCertErrors: invalid value {bad:?}: expected true or false"
                )
            );
        }
    }

    #[test]
    fn allowed_ip_items() {
        let a = at(Param::AllowedIp);
        let nets = allowed_ip(&a, "127.0.0.1, 192.168.1.7/24,::1,2001:db8::/32").unwrap();
        let text: Vec<String> = nets.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            ["127.0.0.1/32", "192.168.1.0/24", "::1/128", "2001:db8::/32"]
        );
        let resolved = allowed_ip(&a, "localhost").unwrap();
        assert!(
            resolved.iter().all(|n| n.addr().is_loopback()),
            "{resolved:?}"
        );
        assert!(allowed_ip(&a, "10.0.0.0/33").is_err());
        assert!(allowed_ip(&a, "127.0.0.1,,::1").is_err());
        let err = allowed_ip(&a, "no-such-host.invalid")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no-such-host.invalid"), "{err}");
    }

    #[test]
    fn listen_addresses() {
        let l = at(Param::ListenIp);
        assert_eq!(listen_ip(&l, "0.0.0.0,::").unwrap().len(), 2);
        assert!(listen_ip(&l, "localhost").is_err());
    }

    #[test]
    fn urls_and_prefixes() {
        let u = at(Param::FrontendUrl);
        assert!(frontend_url(&u, "https://zabbix.example.com").is_ok());
        assert!(frontend_url(&u, "http://127.0.0.1:8081/api_jsonrpc.php").is_ok());
        for bad in [
            "zabbix.example.com",
            "ftp://x/",
            "https://x/?a=1",
            "/api_jsonrpc.php",
            "http://user:s3cret@zabbix.example.com/",
            "http://user:s3 cret@zabbix.example.com/",
        ] {
            let err = frontend_url(&u, bad).unwrap_err().to_string();
            assert!(!err.contains("s3"), "{err}");
        }
        let err = frontend_url(&u, "https://u:s3cret@z.example.com/").unwrap_err();
        assert!(
            err.to_string().contains("must not hold a user or password"),
            "{err}"
        );
        let p = at(Param::ToolPrefix);
        assert!(tool_prefix(&p, "zbx.prod-1_").is_ok());
        assert!(tool_prefix(&p, "zbx prod").is_err());
        assert!(tool_prefix(&p, "zbx/").is_err());
        // problem_change_severity, 23 characters, is the longest tool: 105 + 23 = 128.
        assert!(tool_prefix(&p, &"z".repeat(105)).is_ok());
        let err = tool_prefix(&p, &"z".repeat(106)).unwrap_err().to_string();
        assert!(
            err.contains("at most 105 characters")
                && err.contains("longest tool is problem_change_severity"),
            "{err}"
        );
    }
}
