//! Checks made before a request reaches MCP: the peer address against `AllowedIP`
//! (at accept, before any HTTP is read) and the caller's Bearer token.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header::AUTHORIZATION;
use ipnet::IpNet;

use crate::app::App;
use crate::server::rejected::{self, Refused};
use crate::store::StoreError;
use crate::zabbix::{ApiToken, Caller, CallerError, Identity};

/// Longer Bearer tokens are refused before Zabbix is asked; Zabbix API tokens have 64
/// characters, and this leaves room for other forms without passing on kilobytes.
pub const MAX_TOKEN_LENGTH: usize = 256;

/// Why a request was refused before MCP.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("missing Authorization: Bearer <Zabbix API token>")]
    MissingToken,
    #[error("the Authorization header is not a Bearer token")]
    MalformedToken,
    /// Which one would count is up to each intermediary: refused rather than guessed.
    #[error("more than one Authorization header: send one Bearer token")]
    DuplicateAuthorization,
    #[error(
        "the Bearer token is longer than {MAX_TOKEN_LENGTH} characters (a Zabbix API token has 64)"
    )]
    TokenTooLong,
    /// This address sent `MaxRejectedTokens` tokens Zabbix rejected within
    /// [`rejected::WINDOW`]: unknown tokens from it are not looked up for a while.
    #[error(
        "{max} tokens from {address} were rejected by Zabbix within {window_s} s (MaxRejectedTokens): tokens not already accepted are refused from this address for {retry_after_s} s (tokens already accepted keep working)",
        window_s = rejected::WINDOW.as_secs()
    )]
    TooManyRejectedTokens {
        address: IpAddr,
        max: usize,
        retry_after_s: u64,
    },
    /// The tokens from this address being looked up in Zabbix now, with those it rejected
    /// within [`rejected::WINDOW`], fill `MaxRejectedTokens`: no more are looked up at
    /// once, so that a client sending many at a time gets no more asked than one after
    /// another.
    #[error(
        "{max} tokens from {address} are being checked by Zabbix or were rejected by it within {window_s} s (MaxRejectedTokens): tokens not already accepted are refused from this address until a check ends; retry in {retry_after_s} s (tokens already accepted keep working)",
        window_s = rejected::WINDOW.as_secs()
    )]
    TooManyTokenLookups {
        address: IpAddr,
        max: usize,
        retry_after_s: u64,
    },
    #[error(transparent)]
    Caller(#[from] CallerError),
    /// The shared store (`SharedStore`) did not say whether the address is locked out.
    #[error("cannot check the rejected-token lockout: {0}")]
    Store(#[from] StoreError),
    /// A Host or Origin that is not ours: a DNS-rebinding page or a foreign site.
    #[error("{0} is not an allowed host name (see AllowedHost)")]
    ForbiddenHost(String),
}

/// Host names the MCP endpoint answers to: loopback, the listen addresses, `AllowedHost`.
#[derive(Debug, Clone)]
pub struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    pub fn new(listen_ips: &[IpAddr], configured: &[String]) -> Self {
        let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        names.extend(
            listen_ips
                .iter()
                .filter(|ip| !ip.is_unspecified())
                .map(|ip| ip.to_string()),
        );
        names.extend(configured.iter().map(|h| h.to_ascii_lowercase()));
        names.dedup();
        AllowedHosts(names)
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// Whether `host` is one of ours: a name of the list, or the address the connection
    /// came in on (`local`), when the caller says.
    fn allows(&self, host: &str, local: Option<IpAddr>) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.0.iter().any(|n| n.eq_ignore_ascii_case(host))
            || local.is_some_and(|local| {
                host.parse::<IpAddr>()
                    .is_ok_and(|ip| ip.to_canonical() == local.to_canonical())
            })
    }

    /// Checks `Host` (or the HTTP/2 authority) and, when a browser sent one, `Origin`.
    pub fn check(&self, uri: &http::Uri, headers: &http::HeaderMap) -> Result<(), GuardError> {
        self.check_arrived(uri, headers, None)
    }

    /// [`Self::check`] that also takes the address the connection came in on (`local`) as
    /// ours: what probes and scrapers name when they connect by address (the kubelet sends
    /// `Host: <pod IP>:<port>`, and a sidecar listening on 0.0.0.0 has no address of its
    /// own in the list). A DNS-rebinding page names its own domain, never an address, so
    /// this lets no such page in.
    pub fn check_arrived(
        &self,
        uri: &http::Uri,
        headers: &http::HeaderMap,
        local: Option<IpAddr>,
    ) -> Result<(), GuardError> {
        // Every name the request gives the server must be allowed: the `Host` header and
        // the URI's authority (HTTP/2's `:authority`, an HTTP/1 absolute URI), so one
        // cannot pass the check while the other names another server.
        let host = headers
            .get(http::header::HOST)
            .map(|h| h.to_str().unwrap_or("\u{fffd}"));
        let authority = uri.authority().map(http::uri::Authority::as_str);
        if host.is_none() && authority.is_none() {
            return Err(GuardError::ForbiddenHost("no Host".to_owned()));
        }
        for (what, name) in [("Host", host), (":authority", authority)] {
            if let Some(name) = name
                && !self.allows(host_of(name), local)
            {
                return Err(GuardError::ForbiddenHost(format!("{what} {name:?}")));
            }
        }
        if let Some(origin) = headers.get(http::header::ORIGIN) {
            let text = origin.to_str().unwrap_or("");
            let host = text
                .split_once("://")
                .map(|(_, rest)| host_of(rest.split('/').next().unwrap_or("")))
                .unwrap_or("");
            if !self.allows(host, local) {
                return Err(GuardError::ForbiddenHost(format!("Origin {text:?}")));
            }
        }
        Ok(())
    }
}

/// The host part of `host[:port]` or `[v6]:port`.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => authority,
    }
}

/// Whether `AllowedIP` admits this peer. IPv4-mapped IPv6 peers match IPv4 entries, and
/// IPv4 peers match entries written in the mapped form (`::ffff:10.0.0.0/104`).
pub fn peer_allowed(allowed: &[IpNet], peer: IpAddr) -> bool {
    let peer = peer.to_canonical();
    allowed
        .iter()
        .any(|net| net.contains(&peer) || as_ipv4(net).is_some_and(|v4| v4.contains(&peer)))
}

/// The IPv4 net an entry in the IPv4-mapped form names (`::ffff:a.b.c.d/n`, n ≥ 96). Peers
/// are IPv4 from accept on, so such an entry matched no one (`-T` took it silently). A
/// shorter prefix (`::/0`) names IPv6 space, and admits no IPv4 peer, as before.
fn as_ipv4(net: &IpNet) -> Option<IpNet> {
    let IpNet::V6(v6) = net else {
        return None;
    };
    let v4 = v6.addr().to_ipv4_mapped()?;
    let len = v6.prefix_len().checked_sub(96)?;
    ipnet::Ipv4Net::new(v4, len).ok().map(IpNet::V4)
}

/// The Bearer token of a request, if it has a well-formed one.
pub fn bearer(headers: &http::HeaderMap) -> Result<ApiToken, GuardError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(GuardError::MissingToken)?;
    if values.next().is_some() {
        return Err(GuardError::DuplicateAuthorization);
    }
    let text = value.to_str().map_err(|_| GuardError::MalformedToken)?;
    let (scheme, token) = text.split_once(' ').ok_or(GuardError::MalformedToken)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(GuardError::MalformedToken);
    }
    // Not sent on to Zabbix: no token it issues is this long.
    if token.len() > MAX_TOKEN_LENGTH {
        return Err(GuardError::TokenTooLong);
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
    let identity = match app.callers.cached(&token).await {
        Some(identity) => identity,
        None => look_up(app, &token, address).await?,
    };
    Ok(Caller {
        token_id: token.id(),
        token,
        identity,
        address,
    })
}

/// A token not cached: refused again if Zabbix rejected it lately, refused unasked while
/// the address has used up its rejections, or while its rejections and the lookups under
/// way fill them (unless Zabbix accepted the token lately), else looked up, and remembered
/// as accepted or rejected.
async fn look_up(
    app: &App,
    token: &ApiToken,
    address: IpAddr,
) -> Result<Arc<Identity>, GuardError> {
    let rejected = &app.rejected_tokens;
    let digest = token.digest();
    if let Some(message) = rejected.rejection(&digest) {
        return Err(CallerError::InvalidToken(message.to_string()).into());
    }
    let too_many = |wait: Duration| GuardError::TooManyRejectedTokens {
        address,
        max: rejected.max(),
        retry_after_s: wait.as_secs(),
    };
    // Room is taken before Zabbix is asked and held until it answers: requests sent at
    // once are counted as they come, not as their answers do.
    let mut lookup = rejected
        .reserve(address, &digest)
        .map_err(|refused| match refused {
            Refused::LockedOut(wait) => too_many(wait),
            Refused::Busy => GuardError::TooManyTokenLookups {
                address,
                max: rejected.max(),
                retry_after_s: rejected::BUSY_RETRY.as_secs(),
            },
        })?;
    // The replicas' shared count (Redis); a store that does not answer refuses: the
    // lockout cannot be told apart from its absence.
    let source = rejected::source_key(address);
    if let Some(left) = app.store.lockout(&source, &digest, rejected.max()).await? {
        rejected.count_refused();
        return Err(too_many(rejected::whole_seconds(left)));
    }
    lookup.asking();
    let result = app.callers.resolve(&app.zabbix, token).await;
    // Once per token per identity-cache lifetime: this path runs only on a miss. A shared
    // record that fails is logged, not the caller's failure: its answer is already known.
    let shared = match &result {
        Ok(_) => {
            rejected.accept(digest);
            lookup.answered();
            app.login_attempts.learn_from_caller(app, token).await;
            app.store
                .record_accepted(&digest, rejected::ACCEPTED_MEMORY)
                .await
        }
        Err(CallerError::InvalidToken(message)) => {
            lookup.rejected(message);
            app.store
                .record_rejected(&source, &digest, rejected::WINDOW)
                .await
        }
        // Zabbix did not say either way: nothing is learnt about the token.
        Err(_) => {
            lookup.answered();
            Ok(())
        }
    };
    if let Err(error) = shared {
        tracing::warn!(%error, "rejected-token lockout not recorded in the shared store");
    }
    Ok(result?)
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

    /// An entry in the IPv4-mapped form names IPv4 peers; one outside `::ffff:0:0/96`
    /// (`::/0`) names none of them.
    #[test]
    fn mapped_entries_admit_their_ipv4_peers() {
        let nets = vec![
            "::ffff:10.0.0.0/104".parse().unwrap(),
            "::ffff:127.0.0.1/128".parse().unwrap(),
        ];
        for admitted in ["10.1.2.3", "::ffff:10.1.2.3", "127.0.0.1"] {
            assert!(peer_allowed(&nets, admitted.parse().unwrap()), "{admitted}");
        }
        for refused in ["11.0.0.1", "127.0.0.2", "::1", "fd00::1"] {
            assert!(!peer_allowed(&nets, refused.parse().unwrap()), "{refused}");
        }
        let any_v6 = vec!["::/0".parse().unwrap()];
        assert!(!peer_allowed(&any_v6, "10.1.2.3".parse().unwrap()));
        assert!(peer_allowed(&any_v6, "fd00::1".parse().unwrap()));
    }

    #[test]
    fn host_and_origin() {
        let hosts = super::AllowedHosts::new(
            &["10.1.2.3".parse().unwrap(), "0.0.0.0".parse().unwrap()],
            &["MCP.example.com".into()],
        );
        let uri: http::Uri = "/mcp".parse().unwrap();
        let check = |host: &str, origin: Option<&str>| {
            let mut h = http::HeaderMap::new();
            h.insert("host", host.parse().unwrap());
            if let Some(o) = origin {
                h.insert("origin", o.parse().unwrap());
            }
            hosts.check(&uri, &h).is_ok()
        };
        assert!(check("127.0.0.1:8443", None));
        assert!(check("[::1]:8443", None));
        assert!(check("localhost", Some("http://localhost:6274")));
        assert!(check("mcp.example.com:8443", None));
        assert!(check("10.1.2.3:8443", None));
        assert!(!check("0.0.0.0:8443", None));
        assert!(!check("evil.example:8443", None));
        assert!(!check("127.0.0.1:8443", Some("https://evil.example")));
        assert!(!check("127.0.0.1:8443", Some("null")));

        // HTTP/2's :authority (or an absolute URI) and Host must both be allowed.
        let both = |authority: &str, host: Option<&str>| {
            let uri: http::Uri = format!("http://{authority}/mcp").parse().unwrap();
            let mut h = http::HeaderMap::new();
            if let Some(host) = host {
                h.insert("host", host.parse().unwrap());
            }
            hosts.check(&uri, &h).is_ok()
        };
        assert!(both("127.0.0.1:8443", None));
        assert!(both("127.0.0.1:8443", Some("localhost:8443")));
        assert!(!both("evil.example:8443", None));
        assert!(!both("evil.example:8443", Some("127.0.0.1:8443")));
        assert!(!both("127.0.0.1:8443", Some("evil.example")));
        // Neither: refused, as before.
        assert!(hosts.check(&uri, &http::HeaderMap::new()).is_err());
    }

    #[test]
    fn the_address_a_connection_came_in_on_is_ours_where_asked() {
        let hosts = super::AllowedHosts::new(&["0.0.0.0".parse().unwrap()], &[]);
        let uri: http::Uri = "/readyz".parse().unwrap();
        let check = |host: &str, origin: Option<&str>, local: Option<&str>| {
            let mut h = http::HeaderMap::new();
            h.insert("host", host.parse().unwrap());
            if let Some(o) = origin {
                h.insert("origin", o.parse().unwrap());
            }
            let local = local.map(|l| l.parse().unwrap());
            hosts.check_arrived(&uri, &h, local).is_ok()
        };
        // A kubelet probe: Host is the pod's address, the one the connection came in on.
        assert!(check("10.1.2.4:8443", None, Some("10.1.2.4")));
        assert!(check("10.1.2.4:8443", None, Some("::ffff:10.1.2.4")));
        assert!(check("[fd00::4]:8443", None, Some("fd00::4")));
        assert!(
            !check("10.1.2.4:8443", None, None),
            "not without the local address"
        );
        assert!(!check("10.1.2.5:8443", None, Some("10.1.2.4")));
        assert!(!check("evil.example:8443", None, Some("10.1.2.4")));
        assert!(!check(
            "10.1.2.4:8443",
            Some("http://evil.example"),
            Some("10.1.2.4")
        ));
        assert!(check("127.0.0.1:8443", None, Some("10.1.2.4")));
    }

    #[test]
    fn bearer_parsing() {
        let mut h = http::HeaderMap::new();
        assert!(matches!(bearer(&h), Err(GuardError::MissingToken)));
        h.insert("authorization", "Basic abc".parse().unwrap());
        assert!(matches!(bearer(&h), Err(GuardError::MalformedToken)));
        h.insert("authorization", "Bearer  tok ".parse().unwrap());
        assert_eq!(bearer(&h).unwrap().expose(), "tok");
        h.append("authorization", "Bearer other".parse().unwrap());
        assert!(matches!(
            bearer(&h),
            Err(GuardError::DuplicateAuthorization)
        ));
        let long = format!("Bearer {}", "a".repeat(super::MAX_TOKEN_LENGTH + 1));
        h.insert("authorization", long.parse().unwrap());
        assert!(matches!(bearer(&h), Err(GuardError::TokenTooLong)));
        let longest = format!("Bearer {}", "a".repeat(super::MAX_TOKEN_LENGTH));
        h.insert("authorization", longest.parse().unwrap());
        assert!(bearer(&h).is_ok());
    }
}
