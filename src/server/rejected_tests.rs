//! Unit tests of `rejected`: counts per source, the window, accepted tokens, and the
//! room lookups under way take.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::{ACCEPTED_MEMORY, Refused, RejectedTokens};

/// The digest of a token Zabbix has not accepted.
const UNKNOWN: [u8; 32] = [0; 32];

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

fn tokens(max: usize) -> RejectedTokens {
    RejectedTokens::new(max, Duration::from_secs(60), ACCEPTED_MEMORY)
}

/// What a lookup is told while none other is under way: let through (its room given
/// back at once) or locked out for the duration.
trait Check {
    fn check(&self, address: IpAddr, digest: &[u8; 32]) -> Result<(), Duration>;
    fn check_at(&self, address: IpAddr, digest: &[u8; 32], now: Instant) -> Result<(), Duration>;
}

impl Check for RejectedTokens {
    fn check(&self, address: IpAddr, digest: &[u8; 32]) -> Result<(), Duration> {
        self.check_at(address, digest, Instant::now())
    }

    fn check_at(&self, address: IpAddr, digest: &[u8; 32], now: Instant) -> Result<(), Duration> {
        match self.reserve_at(address, digest, now) {
            Ok(_lookup) => Ok(()),
            Err(Refused::LockedOut(wait)) => Err(wait),
            Err(Refused::Busy) => panic!("no lookup is under way here"),
        }
    }
}

#[test]
fn an_address_waits_after_its_rejections_and_others_do_not() {
    let rejected = tokens(3);
    for _ in 0..3 {
        assert!(rejected.check(ip("10.0.0.1"), &UNKNOWN).is_ok());
        rejected.record_at(ip("10.0.0.1"), Instant::now());
    }
    let wait = rejected
        .check(ip("10.0.0.1"), &UNKNOWN)
        .expect_err("used up");
    assert!(
        wait > Duration::from_secs(58) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    assert!(rejected.check(ip("10.0.0.2"), &UNKNOWN).is_ok());
    assert_eq!(rejected.refused(), 1);
}

#[test]
fn a_token_sent_again_is_remembered_not_counted_again() {
    let rejected = tokens(2);
    assert!(rejected.rejection(&[1; 32]).is_none());
    for _ in 0..5 {
        rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
    }
    assert_eq!(
        rejected.rejection(&[1; 32]).as_deref(),
        Some("Not authorized.")
    );
    assert!(
        rejected.check(ip("10.0.0.1"), &UNKNOWN).is_ok(),
        "one token, counted once"
    );
    rejected.record(ip("10.0.0.1"), [2; 32], "Not authorized.");
    assert!(
        rejected.check(ip("10.0.0.1"), &UNKNOWN).is_err(),
        "two distinct tokens"
    );
}

#[test]
fn the_window_ends() {
    let rejected = tokens(2);
    let start = Instant::now();
    rejected.record_at(ip("10.0.0.1"), start);
    rejected.record_at(ip("10.0.0.1"), start + Duration::from_secs(10));
    let later = start + Duration::from_millis(59_500);
    assert_eq!(
        rejected.check_at(ip("10.0.0.1"), &UNKNOWN, later),
        Err(Duration::from_secs(1))
    );
    let after = start + Duration::from_secs(60);
    assert!(rejected.check_at(ip("10.0.0.1"), &UNKNOWN, after).is_ok());
    // A rejection after the window starts a new one.
    rejected.record_at(ip("10.0.0.1"), after);
    assert!(rejected.check_at(ip("10.0.0.1"), &UNKNOWN, after).is_ok());
}

#[test]
fn an_ipv6_slash_64_counts_as_one_and_mapped_ipv4_as_its_ipv4() {
    let rejected = tokens(2);
    rejected.record_at(ip("2001:db8:1:2::1"), Instant::now());
    rejected.record_at(ip("2001:db8:1:2:ffff::7"), Instant::now());
    assert!(rejected.check(ip("2001:db8:1:2::99"), &UNKNOWN).is_err());
    assert!(rejected.check(ip("2001:db8:1:3::1"), &UNKNOWN).is_ok());
    rejected.record_at(ip("::ffff:10.0.0.9"), Instant::now());
    rejected.record_at(ip("10.0.0.9"), Instant::now());
    assert!(rejected.check(ip("10.0.0.9"), &UNKNOWN).is_err());
}

#[test]
fn a_token_accepted_before_is_spared_a_lockout_and_others_are_not() {
    let rejected = tokens(2);
    let known = [7; 32];
    rejected.accept(known);
    rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
    rejected.record(ip("10.0.0.1"), [2; 32], "Not authorized.");
    assert!(rejected.check(ip("10.0.0.1"), &UNKNOWN).is_err());
    assert!(rejected.check(ip("10.0.0.1"), &[8; 32]).is_err());
    // Spared from the same address and from its IPv6 form, as often as it comes.
    for _ in 0..3 {
        assert!(rejected.check(ip("10.0.0.1"), &known).is_ok());
    }
    assert!(rejected.check(ip("::ffff:10.0.0.1"), &known).is_ok());
    assert_eq!(
        rejected.refused(),
        2,
        "a spared token is not counted as refused"
    );
}

#[test]
fn a_token_rejected_after_its_acceptance_is_spared_no_more() {
    let rejected = tokens(2);
    let revoked = [7; 32];
    rejected.accept(revoked);
    // Revoked in Zabbix since: its next lookup is rejected, from anywhere.
    rejected.record(ip("10.0.0.2"), revoked, "Not authorized.");
    rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
    rejected.record(ip("10.0.0.1"), [2; 32], "Not authorized.");
    assert!(rejected.check(ip("10.0.0.1"), &revoked).is_err());
    // Accepted again (a token Zabbix takes once more) is spared again.
    rejected.accept(revoked);
    assert!(rejected.check(ip("10.0.0.1"), &revoked).is_ok());
}

#[test]
fn the_memory_of_accepted_tokens_ends() {
    let rejected = RejectedTokens::new(1, Duration::from_secs(60), Duration::ZERO);
    rejected.accept([7; 32]);
    rejected.record(ip("10.0.0.1"), [1; 32], "Not authorized.");
    assert!(rejected.check(ip("10.0.0.1"), &[7; 32]).is_err());
}

#[test]
fn lookups_under_way_take_room_until_they_end() {
    let rejected = tokens(3);
    let held: Vec<_> = (1..=3u8)
        .map(|n| rejected.reserve(ip("10.0.0.1"), &[n; 32]).expect("room"))
        .collect();
    assert_eq!(
        rejected.reserve(ip("10.0.0.1"), &[4; 32]).err(),
        Some(Refused::Busy),
        "three lookups under way fill MaxRejectedTokens=3"
    );
    assert_eq!(rejected.refused(), 1);
    // Another address has room of its own; the same /64 has not.
    assert!(rejected.reserve(ip("10.0.0.2"), &[4; 32]).is_ok());
    // A token already being looked up shares its room (one Zabbix call for both).
    let again = rejected.reserve(ip("10.0.0.1"), &[1; 32]).expect("shared");
    assert_eq!(rejected.pending_for(ip("10.0.0.1")), 3);
    drop(again);
    assert_eq!(
        rejected.pending_for(ip("10.0.0.1")),
        3,
        "one request still waits"
    );
    // Accepted (or no verdict): the room is given back.
    drop(held);
    assert_eq!(rejected.pending_for(ip("10.0.0.1")), 0);
    assert!(rejected.reserve(ip("10.0.0.1"), &[4; 32]).is_ok());
}

#[test]
fn a_rejected_lookup_keeps_its_room_as_a_rejection() {
    let rejected = tokens(2);
    let first = rejected.reserve(ip("10.0.0.1"), &[1; 32]).expect("room");
    first.rejected("Not authorized.");
    assert_eq!(rejected.pending_for(ip("10.0.0.1")), 0);
    assert_eq!(
        rejected.rejection(&[1; 32]).as_deref(),
        Some("Not authorized.")
    );
    let second = rejected.reserve(ip("10.0.0.1"), &[2; 32]).expect("room");
    assert_eq!(
        rejected.reserve(ip("10.0.0.1"), &[3; 32]).err(),
        Some(Refused::Busy),
        "one rejection and one lookup under way"
    );
    second.rejected("Not authorized.");
    assert!(matches!(
        rejected.reserve(ip("10.0.0.1"), &[3; 32]),
        Err(Refused::LockedOut(wait)) if wait > Duration::from_secs(58)
    ));
}

/// A client that cancels each lookup once Zabbix is asked (an HTTP/2 reset, a closed
/// connection) gets no verdict and would never be counted: the abandoned lookup counts as
/// a rejection. Answered ones, and ones dropped before Zabbix was asked, do not.
#[test]
fn a_lookup_abandoned_while_zabbix_is_asked_counts_as_a_rejection() {
    let rejected = tokens(2);
    for n in 1..=2u8 {
        let mut lookup = rejected.reserve(ip("10.0.0.1"), &[n; 32]).expect("room");
        lookup.asking();
        drop(lookup);
    }
    assert!(
        matches!(
            rejected.reserve(ip("10.0.0.1"), &[3; 32]),
            Err(Refused::LockedOut(_))
        ),
        "two abandoned lookups use up MaxRejectedTokens=2"
    );
    assert_eq!(
        rejected.rejection(&[1; 32]),
        None,
        "the token itself is not judged"
    );

    let other = ip("10.0.0.2");
    for n in 1..=3u8 {
        let mut answered = rejected.reserve(other, &[n; 32]).expect("room");
        answered.asking();
        answered.answered();
        drop(rejected.reserve(other, &[n + 10; 32]).expect("room"));
    }
    assert!(rejected.reserve(other, &[9; 32]).is_ok(), "nothing counted");
}

#[test]
fn a_token_accepted_lately_takes_no_room_and_is_never_crowded_out() {
    let rejected = tokens(1);
    let known = [7; 32];
    rejected.accept(known);
    let guess = rejected.reserve(ip("10.0.0.1"), &UNKNOWN).expect("room");
    assert_eq!(
        rejected.reserve(ip("10.0.0.1"), &[8; 32]).err(),
        Some(Refused::Busy)
    );
    let spared = rejected.reserve(ip("10.0.0.1"), &known).expect("spared");
    assert_eq!(rejected.pending_for(ip("10.0.0.1")), 1);
    // Revoked since: its rejection counts as any other.
    drop(guess);
    spared.rejected("Not authorized.");
    assert!(matches!(
        rejected.reserve(ip("10.0.0.1"), &known),
        Err(Refused::LockedOut(_))
    ));
}

#[test]
fn lookups_reserved_at_once_never_exceed_the_maximum() {
    let rejected = tokens(5);
    let start = std::sync::Barrier::new(64);
    let granted = std::sync::atomic::AtomicUsize::new(0);
    let hold = std::sync::Barrier::new(64);
    std::thread::scope(|scope| {
        for n in 0..64u8 {
            let (rejected, start, granted, hold) = (&rejected, &start, &granted, &hold);
            scope.spawn(move || {
                start.wait();
                let lookup = rejected.reserve(ip("10.0.0.1"), &[n; 32]);
                if lookup.is_ok() {
                    granted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                // Every lookup let through is held until all have asked.
                hold.wait();
                drop(lookup);
            });
        }
    });
    assert_eq!(granted.into_inner(), 5);
    assert_eq!(rejected.refused(), 59);
    assert_eq!(rejected.pending_for(ip("10.0.0.1")), 0);
}
