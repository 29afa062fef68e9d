use std::net::IpAddr;

use moka::future::Cache;

use super::{Count, MAX_FAILURES_PER_ADDRESS, SignInError, address_key, take_places};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[tokio::test]
async fn an_ipv6_client_is_counted_by_its_64() {
    let failures = Cache::builder().build();
    let attempt = |peer: IpAddr| {
        let failures = &failures;
        async move {
            let counts = [Count {
                failures,
                key: address_key(peer),
                max: MAX_FAILURES_PER_ADDRESS,
                username: false,
            }];
            take_places(&counts).await
        }
    };
    // A new address of one /64 for every attempt: held once the /64 has its 20.
    for n in 1..=MAX_FAILURES_PER_ADDRESS {
        let peer = ip(&format!("2001:db8:0:7:{n:x}::1"));
        assert!(attempt(peer).await.is_ok(), "attempt {n}");
    }
    let held = attempt(ip("2001:db8:0:7:ffff:ffff:ffff:fffe")).await;
    assert!(matches!(held, Err(SignInError::AddressHeld)), "{held:?}");
    // The next /64 and IPv4 clients are others.
    assert!(attempt(ip("2001:db8:0:8::1")).await.is_ok());
    assert!(attempt(ip("192.0.2.7")).await.is_ok());
    // An IPv4 client on a :: listener is its IPv4 address.
    assert_eq!(
        address_key(ip("::ffff:192.0.2.7")),
        address_key(ip("192.0.2.7"))
    );
}
