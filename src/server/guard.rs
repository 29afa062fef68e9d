//! Checks made before a request reaches MCP: the peer address against `AllowedIP`
//! (at accept, before any HTTP is read) and the caller's Bearer token.

use std::net::IpAddr;

use http::header::AUTHORIZATION;
use ipnet::IpNet;

use crate::app::App;
use crate::zabbix::{ApiToken, Caller, CallerError};

/// Why a request was refused before MCP.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("missing Authorization: Bearer <Zabbix API token>")]
    MissingToken,
    #[error("the Authorization header is not a Bearer token")]
    MalformedToken,
    #[error(transparent)]
    Caller(#[from] CallerError),
}

/// Whether `AllowedIP` admits this peer. IPv4-mapped IPv6 peers match IPv4 entries.
pub fn peer_allowed(allowed: &[IpNet], peer: IpAddr) -> bool {
    let peer = match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(peer),
        v4 => v4,
    };
    allowed.iter().any(|net| net.contains(&peer))
}

/// The Bearer token of a request, if it has a well-formed one.
pub fn bearer(headers: &http::HeaderMap) -> Result<ApiToken, GuardError> {
    let value = headers.get(AUTHORIZATION).ok_or(GuardError::MissingToken)?;
    let text = value.to_str().map_err(|_| GuardError::MalformedToken)?;
    let (scheme, token) = text.split_once(' ').ok_or(GuardError::MalformedToken)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(GuardError::MalformedToken);
    }
    Ok(ApiToken::new(token.to_owned()))
}

/// Resolves the caller of a request (cached per token).
pub async fn authenticate(
    app: &App,
    headers: &http::HeaderMap,
    address: IpAddr,
) -> Result<Caller, GuardError> {
    let token = bearer(headers)?;
    let identity = app.callers.resolve(&app.zabbix, &token).await?;
    Ok(Caller {
        token_id: token.id(),
        token,
        identity,
        address,
    })
}

#[cfg(test)]
mod tests {
    use super::{GuardError, bearer, peer_allowed};
    use std::net::IpAddr;

    #[test]
    fn allowed_ip() {
        let nets = vec![
            "127.0.0.1/32".parse().unwrap(),
            "10.0.0.0/8".parse().unwrap(),
        ];
        assert!(peer_allowed(&nets, "127.0.0.1".parse().unwrap()));
        assert!(!peer_allowed(&nets, "127.0.0.2".parse().unwrap()));
        assert!(peer_allowed(&nets, "10.1.2.3".parse().unwrap()));
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert!(peer_allowed(&nets, mapped));
    }

    #[test]
    fn bearer_parsing() {
        let mut h = http::HeaderMap::new();
        assert!(matches!(bearer(&h), Err(GuardError::MissingToken)));
        h.insert("authorization", "Basic abc".parse().unwrap());
        assert!(matches!(bearer(&h), Err(GuardError::MalformedToken)));
        h.insert("authorization", "Bearer  tok ".parse().unwrap());
        assert_eq!(bearer(&h).unwrap().expose(), "tok");
    }
}
