//! The `Retry-After` value for rejected requests, as kube's `dropped_requests_tracker.go`: per
//! priority level it starts at 1 s, doubles (up to 32 s) while many requests keep being
//! dropped, and decays by 1 s a second once drops slow down.

use std::collections::HashMap;

const MAX_RETRY_AFTER: i64 = 32;

#[derive(Debug)]
struct Stats {
    /// (second, drops in that second), oldest first.
    history: Vec<(i64, i64)>,
    current_second: i64,
    current_count: i64,
    retry_after: i64,
    retry_after_updated: i64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            history: Vec::new(),
            current_second: 0,
            current_count: 0,
            retry_after: 1,
            retry_after_updated: 0,
        }
    }
}

impl Stats {
    fn record(&mut self, now: i64) {
        if self.current_second == now {
            self.current_count += 1;
            return;
        }
        self.push_history(self.current_second, self.current_count);
        self.current_second = now;
        self.current_count = 1;
        self.update_retry_after(now);
    }

    fn push_history(&mut self, second: i64, count: i64) {
        self.history.push((second, count));
        let max_history = (2 * self.retry_after).min(MAX_RETRY_AFTER);
        let start = self
            .history
            .iter()
            .position(|(s, _)| second - s <= max_history)
            .unwrap_or(self.history.len());
        self.history.drain(..start);
    }

    fn update_retry_after(&mut self, now: i64) {
        let mut dropped = 0;
        for &(second, count) in self.history.iter().rev() {
            if now - second > self.retry_after {
                break;
            }
            if second < now {
                dropped += count;
            }
        }
        if now - self.retry_after_updated >= self.retry_after && dropped >= 3 * self.retry_after {
            self.retry_after = (self.retry_after * 2).min(MAX_RETRY_AFTER);
            self.retry_after_updated = now;
        } else if dropped < self.retry_after && self.retry_after > 1 {
            self.retry_after -= 1;
        }
    }
}

/// Dropped-request history per priority level.
#[derive(Debug, Default)]
pub(crate) struct DroppedRequests {
    levels: HashMap<String, Stats>,
}

impl DroppedRequests {
    /// Notes a rejection at `now` (whole seconds) and returns the `Retry-After` to send.
    pub fn record(&mut self, level: &str, now: i64) -> u64 {
        let stats = self.levels.entry(level.to_string()).or_default();
        stats.record(now);
        stats.retry_after.max(1) as u64
    }
}
