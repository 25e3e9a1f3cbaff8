//! A check that runs at most once per interval on the callers' own threads, without a
//! watcher task and without making callers wait for each other: the files kubegate follows
//! (CA bundles, the serving certificate) are looked at this way on use.

use std::sync::{Mutex, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// State of type `T` and when a caller last ran its check.
pub struct Throttled<T> {
    interval: Duration,
    slot: Mutex<Slot<T>>,
}

struct Slot<T> {
    last: Instant,
    state: T,
}

impl<T> Throttled<T> {
    /// `state` as just checked: the next check is due after `interval`.
    pub fn new(interval: Duration, state: T) -> Self {
        Throttled {
            interval,
            slot: Mutex::new(Slot {
                last: Instant::now(),
                state,
            }),
        }
    }

    /// Changes how often the check is due (tests use zero, or a long interval).
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    /// Runs `check` if the interval has passed since the last run and no other caller is
    /// running it (that one's result will do).
    pub fn when_due(&self, check: impl FnOnce(&mut T)) {
        let mut slot = match self.slot.try_lock() {
            Ok(slot) => slot,
            Err(TryLockError::WouldBlock) => return,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        let now = Instant::now();
        if now.duration_since(slot.last) < self.interval {
            return;
        }
        slot.last = now;
        check(&mut slot.state);
    }

    /// Runs `check` now, whatever the interval (waiting for a caller running it).
    pub fn now(&self, check: impl FnOnce(&mut T)) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.last = Instant::now();
        check(&mut slot.state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_once_per_interval_or_when_asked() {
        let throttled = Throttled::new(Duration::from_secs(3600), 0);
        throttled.when_due(|runs| *runs += 1);
        throttled.now(|runs| assert_eq!(*runs, 0, "not due within the interval"));
        throttled.now(|runs| *runs += 1);
        let mut throttled = throttled;
        throttled.set_interval(Duration::ZERO);
        throttled.when_due(|runs| *runs += 1);
        throttled.now(|runs| assert_eq!(*runs, 2));
    }
}
