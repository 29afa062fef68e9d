//! The hasher of the maps and caches every call looks something up in.
//!
//! std's `RandomState` (SipHash-1-3) costs some 600–900 instructions per lookup of a key,
//! and a call makes about ten (its caller's identity, its list decisions, its rate budget
//! and concurrency slots, its tool). Those maps are keyed by what an agent cannot choose
//! freely: SHA-256 digests of tokens, identities Zabbix resolved, fixed tool names, and the
//! list decisions' key (which holds the client's own name) in a cache of bounded size.
//! foldhash, with a seed drawn per process and per map, keeps hash flooding out of reach
//! for those keys at a fraction of the cost; it is hashbrown's own default.

/// The `BuildHasher` of the per-call maps and caches.
pub(crate) type FastState = foldhash::fast::RandomState;

/// A `HashMap` with [`FastState`].
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;
