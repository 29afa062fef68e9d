//! Zabbix API versions and the differences between them that the sidecar must respect.

use std::fmt;
use std::str::FromStr;

/// A Zabbix API version as reported by `apiinfo.version` (e.g. `7.0.22`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ZabbixVersion {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

/// How the API token travels to Zabbix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenTransport {
    /// `auth` field in the JSON-RPC body (6.0–6.2; a Bearer header is ignored there).
    BodyField,
    /// `Authorization: Bearer` header (6.4+; 7.2+ rejects the body field).
    BearerHeader,
}

#[derive(Debug, thiserror::Error)]
#[error("not a Zabbix version: {0:?}")]
pub struct VersionParseError(pub String);

impl ZabbixVersion {
    pub const fn new(major: u16, minor: u16, patch: u16) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// `major.minor.patch` (also what `Display` writes), built without `fmt`: every call's
    /// policy input carries it.
    pub(crate) fn text(self) -> String {
        crate::decimal::dotted([self.major, self.minor, self.patch].map(u64::from))
    }

    /// The oldest version the sidecar supports.
    pub const OLDEST_SUPPORTED: ZabbixVersion = ZabbixVersion::new(6, 0, 0);

    pub fn at_least(self, major: u16, minor: u16) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    pub fn token_transport(self) -> TokenTransport {
        if self.at_least(6, 4) {
            TokenTransport::BearerHeader
        } else {
            TokenTransport::BodyField
        }
    }

    /// Template groups (`templategroup.*`, `selectTemplateGroups`) exist from 6.2.
    pub fn has_template_groups(self) -> bool {
        self.at_least(6, 2)
    }

    /// Problem suppression through `event.acknowledge` (actions 32/64) exists from 6.2.
    pub fn has_manual_suppression(self) -> bool {
        self.at_least(6, 2)
    }
}

impl FromStr for ZabbixVersion {
    type Err = VersionParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.trim().split('.');
        let mut next = || -> Result<u16, VersionParseError> {
            parts
                .next()
                .and_then(|p| {
                    // Pre-releases look like "7.0.0rc1": keep the leading digits.
                    let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().ok()
                })
                .ok_or_else(|| VersionParseError(s.to_owned()))
        };
        let major = next()?;
        let minor = next()?;
        let patch = next().unwrap_or(0);
        Ok(ZabbixVersion::new(major, minor, patch))
    }
}

impl fmt::Display for ZabbixVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::{TokenTransport, ZabbixVersion};

    #[test]
    fn parses_and_orders() {
        let v6: ZabbixVersion = "6.0.14".parse().unwrap();
        let v7: ZabbixVersion = "7.0.22".parse().unwrap();
        assert!(v6 < v7);
        assert_eq!(v7.to_string(), "7.0.22");
        assert_eq!(v7.text(), "7.0.22");
        assert_eq!(
            "7.0.0rc1".parse::<ZabbixVersion>().unwrap(),
            ZabbixVersion::new(7, 0, 0)
        );
        assert!("seven".parse::<ZabbixVersion>().is_err());
    }

    #[test]
    fn version_differences() {
        let v60 = ZabbixVersion::new(6, 0, 14);
        let v64 = ZabbixVersion::new(6, 4, 0);
        assert_eq!(v60.token_transport(), TokenTransport::BodyField);
        assert_eq!(v64.token_transport(), TokenTransport::BearerHeader);
        assert!(!v60.has_template_groups());
        assert!(ZabbixVersion::new(6, 2, 0).has_template_groups());
    }
}
