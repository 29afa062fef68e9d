//! What the watchers of files loaded again without a restart share: the policy directory,
//! the TLS certificate the listeners serve and the CAs trusted toward Zabbix.
//!
//! - [`Settle`]: a change is taken once two polls in a row see it unchanged, so a file or
//!   directory being written is never loaded half way, and a failure is reported once,
//!   not at every poll.
//! - [`read_small_file`]: a file read whole, but never more than a bound, and never opened
//!   when it is not a regular file.
//! - [`spawn_watcher`]: the task that polls every few seconds and loads at once on SIGHUP,
//!   its file work on the blocking pool.

use std::io::Read as _;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// What a watcher remembers of the thing it watches: what the last load saw, and a change
/// the last poll saw, to be loaded if the next poll sees it unchanged.
#[derive(Debug)]
pub(crate) struct Settle<T> {
    loaded: Option<T>,
    pending: Option<T>,
}

/// Something loaded again when its files change or on SIGHUP.
pub(crate) trait Watched: Send + Sync + 'static {
    /// One poll: blocking file work, run on the blocking pool. Outcomes are logged here.
    fn on_tick(&self);
    /// SIGHUP: load now (blocking file work, run on the blocking pool).
    fn on_hangup(&self);
}

impl<T: PartialEq> Settle<T> {
    /// Nothing loaded yet: the first poll's reading is a change.
    pub(crate) const fn new() -> Self {
        Settle {
            loaded: None,
            pending: None,
        }
    }

    /// A load (at start, or on SIGHUP) read `now`: that is what later polls compare with,
    /// and a change waiting to settle is forgotten.
    pub(crate) fn loaded(&mut self, now: T) {
        self.loaded = Some(now);
        self.pending = None;
    }

    /// One poll read `now`. `Some`: a change that this poll and the one before read
    /// alike, to be loaded now (and remembered as loaded, whether or not it loads).
    pub(crate) fn changed(&mut self, now: T) -> Option<&T> {
        if self.loaded.as_ref() == Some(&now) {
            self.pending = None;
            return None;
        }
        if self.pending.as_ref() != Some(&now) {
            // Changed since the last poll: maybe still being written. Wait for it to settle.
            self.pending = Some(now);
            return None;
        }
        self.pending = None;
        Some(&*self.loaded.insert(now))
    }
}

/// Reads `path` whole, if it is a regular file of at most `max` bytes. The error says why
/// not, in words for a log line.
///
/// A path that names something else must not hold the watcher or fill memory at every
/// poll: opening a FIFO waits for a writer, and `/dev/zero` never ends.
pub(crate) fn read_small_file(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    if !std::fs::metadata(path)
        .map_err(|e| e.to_string())?
        .is_file()
    {
        return Err("not a regular file".to_owned());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(max.saturating_add(1)).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(format!("larger than {max} bytes"));
    }
    Ok(bytes)
}

/// Tells one reading of some files from another: a file that could not be read counts by
/// its error, so a file that stays unreadable is one unchanged reading.
pub(crate) fn digest<'a>(files: impl IntoIterator<Item = &'a Result<Vec<u8>, String>>) -> [u8; 32] {
    let mut hash = Sha256::new();
    for file in files {
        let (tag, bytes) = match file {
            Ok(bytes) => (1u8, bytes.as_slice()),
            Err(reason) => (0, reason.as_bytes()),
        };
        hash.update([tag]);
        hash.update(bytes.len().to_le_bytes());
        hash.update(bytes);
    }
    hash.finalize().into()
}

/// Polls `watched` every `every` and makes it load on SIGHUP, until aborted or the last
/// other reference to it is dropped. Must be called inside a Tokio runtime.
pub(crate) fn spawn_watcher<W: Watched>(watched: &Arc<W>, every: Duration) -> JoinHandle<()> {
    let weak: Weak<W> = Arc::downgrade(watched);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is immediate; the files were just loaded
        let mut hangups =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            let sighup = tokio::select! {
                _ = ticks.tick() => false,
                Some(()) = async { hangups.as_mut()?.recv().await } => true,
            };
            let Some(watched) = weak.upgrade() else {
                break;
            };
            let step = tokio::task::spawn_blocking(move || {
                if sighup {
                    watched.on_hangup();
                } else {
                    watched.on_tick();
                }
            });
            if step.await.is_err() {
                tracing::error!("file watcher step panicked");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::Settle;

    #[test]
    fn a_change_is_taken_when_two_polls_read_it_alike() {
        let mut settle = Settle::new();
        settle.loaded(1);
        assert_eq!(settle.changed(1), None, "unchanged");
        assert_eq!(settle.changed(2), None, "first sight of a change");
        assert_eq!(settle.changed(3), None, "still changing");
        assert_eq!(settle.changed(3), Some(&3), "read alike twice");
        assert_eq!(settle.changed(3), None, "loaded now");
        // A change that goes back before it settles is no change.
        assert_eq!(settle.changed(4), None);
        assert_eq!(settle.changed(3), None);
        assert_eq!(settle.changed(4), None);
        // A load in between forgets the pending change.
        settle.loaded(4);
        assert_eq!(settle.changed(4), None);
    }

    #[test]
    fn nothing_loaded_yet_makes_the_first_reading_a_change() {
        let mut settle = Settle::new();
        assert_eq!(settle.changed("a"), None);
        assert_eq!(settle.changed("a"), Some(&"a"));
    }
}
