//! Work estimation, as kube's `util/flowcontrol/request`: how many seats a request occupies
//! while it executes (`InitialSeats`), and how many it keeps for how long afterwards while its
//! watch events are delivered (`FinalSeats`, `AdditionalLatency`). LIST cost comes from the
//! number of stored objects (`list_work_estimator.go`), mutation cost from the number of
//! interested watchers (`mutating_work_estimator.go`, `watch_tracker.go`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::request_info::{parse_query, RequestInfo};

use super::lock;

/// The work a request is estimated to need (kube's `WorkEstimate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkEstimate {
    /// Seats occupied while the request executes.
    pub initial_seats: u64,
    /// Seats still occupied, after the request finished, for `additional_latency`.
    pub final_seats: u64,
    pub additional_latency: Duration,
}

impl Default for WorkEstimate {
    /// One seat, nothing after: what kube gives requests no estimator covers.
    fn default() -> Self {
        WorkEstimate::seats(1)
    }
}

impl WorkEstimate {
    /// `n` seats while executing, nothing after.
    pub fn seats(n: u64) -> Self {
        WorkEstimate {
            initial_seats: n,
            final_seats: 0,
            additional_latency: Duration::ZERO,
        }
    }

    /// The most seats the request holds at any time.
    pub fn max_seats(&self) -> u64 {
        self.initial_seats.max(self.final_seats)
    }
}

/// How many objects of a resource are stored (the gateway's watch cache answers).
pub trait ObjectCounts: Send + Sync {
    /// `None` when the resource is unknown here (kube's `ObjectCountNotFoundErr`, e.g. an
    /// aggregated resource served elsewhere): such LISTs get the minimum seats.
    fn object_count(&self, group: &str, resource: &str) -> Option<u64>;
}

/// How many watches would be told about a mutation.
pub trait WatchCounts: Send + Sync {
    fn interested_watchers(&self, info: &RequestInfo) -> u64;
}

/// Parameters of the estimator (kube's `WorkEstimatorConfig` defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkEstimatorConfig {
    pub minimum_seats: u64,
    /// Upper bound for LIST (and initial-events WATCH) seats.
    pub maximum_list_seats: u64,
    /// Upper bound for the final seats of a mutation.
    pub maximum_mutating_seats: u64,
    pub objects_per_seat: f64,
    pub watches_per_seat: f64,
    /// Seat time each watch event is assumed to take.
    pub event_additional_duration: Duration,
    /// Estimate mutations from watcher counts (kube's `enableMutatingWorkEstimator`).
    pub mutating_enabled: bool,
    /// Whether consistent LISTs (no `resourceVersion`) are served from the watch cache (kube:
    /// when etcd supports progress notifications). When false they count as storage reads.
    pub consistent_list_from_cache: bool,
    /// Kube's `WatchList` feature (off by default in 1.33, served by kubegate): WATCHes with
    /// `sendInitialEvents=true` cost like the LIST they replay; other watches one seat.
    pub watch_list: bool,
}

impl Default for WorkEstimatorConfig {
    fn default() -> Self {
        WorkEstimatorConfig {
            minimum_seats: 1,
            maximum_list_seats: 10,
            maximum_mutating_seats: 10,
            objects_per_seat: 100.0,
            watches_per_seat: 10.0,
            event_additional_duration: Duration::from_millis(5),
            mutating_enabled: true,
            consistent_list_from_cache: true,
            watch_list: true,
        }
    }
}

/// Estimates the work of a request from its attributes and query.
#[derive(Clone)]
pub struct WorkEstimator {
    config: WorkEstimatorConfig,
    objects: Arc<dyn ObjectCounts>,
    watches: Arc<dyn WatchCounts>,
}

/// The list options the estimator reads from the query.
#[derive(Default)]
struct ListOptions {
    limit: i64,
    resource_version: Option<String>,
    resource_version_match: String,
    continue_token: String,
    field_selector: String,
    label_selector: String,
    send_initial_events: Option<bool>,
}

impl ListOptions {
    /// Reads the options; `Err` when a value does not parse (kube then charges the maximum).
    fn from_query(query: &[(String, String)]) -> Result<ListOptions, ()> {
        let mut options = ListOptions::default();
        for (key, value) in query {
            match key.as_str() {
                "limit" => options.limit = value.parse().map_err(|_| ())?,
                "resourceVersion" => options.resource_version = Some(value.clone()),
                "resourceVersionMatch" => options.resource_version_match = value.clone(),
                "continue" => options.continue_token = value.clone(),
                "fieldSelector" => options.field_selector = value.clone(),
                "labelSelector" => options.label_selector = value.clone(),
                "sendInitialEvents" => {
                    options.send_initial_events = Some(match value.as_str() {
                        "true" | "1" | "t" | "T" | "TRUE" | "True" => true,
                        "false" | "0" | "f" | "F" | "FALSE" | "False" => false,
                        _ => return Err(()),
                    })
                }
                _ => {}
            }
        }
        Ok(options)
    }

    fn resource_version(&self) -> &str {
        self.resource_version.as_deref().unwrap_or("")
    }
}

impl WorkEstimator {
    pub fn new(
        config: WorkEstimatorConfig,
        objects: Arc<dyn ObjectCounts>,
        watches: Arc<dyn WatchCounts>,
    ) -> Self {
        WorkEstimator {
            config,
            objects,
            watches,
        }
    }

    /// The estimate for a request. `query` is the parsed query string
    /// ([`crate::request_info::parse_query`]); `level_max_seats` is
    /// [`super::Classification::max_seats`] (0 when the level sets none), which caps the
    /// configured maxima as kube's `MaxSeatsTracker` does.
    pub fn estimate(
        &self,
        info: &RequestInfo,
        query: &[(String, String)],
        level_max_seats: u64,
    ) -> WorkEstimate {
        match info.verb.as_str() {
            "list" => self.estimate_list(info, query, level_max_seats),
            "watch" if self.config.watch_list => self.estimate_list(info, query, level_max_seats),
            "create" | "update" | "patch" | "delete" => {
                self.estimate_mutating(info, level_max_seats)
            }
            _ => WorkEstimate::seats(self.config.minimum_seats),
        }
    }

    /// As [`WorkEstimator::estimate`], parsing a raw query string.
    pub fn estimate_raw(
        &self,
        info: &RequestInfo,
        raw_query: &str,
        level_max_seats: u64,
    ) -> WorkEstimate {
        // Only LIST and WATCH estimates read the query: skip parsing (and its allocations)
        // for every other request.
        let reads_query = match info.verb.as_str() {
            "list" => true,
            "watch" => self.config.watch_list,
            _ => false,
        };
        if !reads_query {
            return self.estimate(info, &[], level_max_seats);
        }
        self.estimate(info, &parse_query(raw_query), level_max_seats)
    }

    fn cap(limit: u64, level_max_seats: u64) -> u64 {
        if level_max_seats == 0 || level_max_seats > limit {
            limit
        } else {
            level_max_seats
        }
    }

    fn estimate_list(
        &self,
        info: &RequestInfo,
        query: &[(String, String)],
        level_max_seats: u64,
    ) -> WorkEstimate {
        let min_seats = self.config.minimum_seats;
        let max_seats = Self::cap(self.config.maximum_list_seats, level_max_seats);
        let matches_single = !info.name.is_empty();
        let Ok(options) = ListOptions::from_query(query) else {
            return WorkEstimate::seats(max_seats);
        };
        // kube 1.33 charges every watch one seat (its WatchList gate is off); kubegate serves
        // `sendInitialEvents` watches too, and charges those as kube does with the gate on:
        // like the list they replay.
        if info.verb == "watch" && options.send_initial_events != Some(true) {
            return WorkEstimate::seats(min_seats);
        }
        let from_cache = info.verb == "watch" || !self.list_from_storage(&options);
        let Some(stored) = self.objects.object_count(&info.api_group, &info.resource) else {
            return WorkEstimate::seats(min_seats);
        };
        let stored = stored.min(i64::MAX as u64) as i64;
        let limit = if options.limit > 0 && options.limit < stored {
            options.limit
        } else {
            stored
        };
        let processed = if matches_single {
            1
        } else if from_cache {
            stored
        } else if !options.field_selector.is_empty() || !options.label_selector.is_empty() {
            stored.saturating_add(limit)
        } else {
            limit.saturating_mul(2)
        };
        let seats = (processed as f64 / self.config.objects_per_seat).ceil();
        let seats = if seats.is_finite() {
            seats as u64
        } else {
            max_seats
        };
        WorkEstimate::seats(seats.max(min_seats).min(max_seats))
    }

    /// kube's `ShouldDelegateListMeta` with a cache without snapshots: whether the LIST is
    /// served from storage rather than the watch cache.
    fn list_from_storage(&self, options: &ListOptions) -> bool {
        match options.resource_version_match.as_str() {
            "Exact" => true,
            "NotOlderThan" => false,
            "" => {
                // A continuation, or the legacy exact read (a limit and a resourceVersion).
                if !options.continue_token.is_empty()
                    || (options.limit > 0 && !matches!(options.resource_version(), "" | "0"))
                {
                    true
                } else if options.resource_version().is_empty() {
                    !self.config.consistent_list_from_cache
                } else {
                    false
                }
            }
            _ => true,
        }
    }

    fn estimate_mutating(&self, info: &RequestInfo, level_max_seats: u64) -> WorkEstimate {
        let min_seats = self.config.minimum_seats;
        let max_seats = Self::cap(self.config.maximum_mutating_seats, level_max_seats);
        if !self.config.mutating_enabled
            || (info.resource == "serviceaccounts" && info.subresource == "token")
        {
            return WorkEstimate::seats(min_seats);
        }
        let watchers = self.watches.interested_watchers(info);
        let per_seat = self.config.watches_per_seat;
        if (watchers as f64) < per_seat || per_seat <= 0.0 {
            return WorkEstimate::seats(1);
        }
        let final_seats = (watchers as f64 / per_seat).ceil() as u64;
        // The final work is kept while the rectangle is reshaped to at most `max_seats` wide.
        let final_work = final_seats as f64 * self.config.event_additional_duration.as_secs_f64();
        let final_seats = final_seats.min(max_seats).max(1);
        WorkEstimate {
            initial_seats: 1,
            final_seats,
            additional_latency: Duration::try_from_secs_f64(final_work / final_seats as f64)
                .unwrap_or(Duration::MAX),
        }
    }
}

/// The watch a request opens, as kube's `watchIdentifier`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WatchKey {
    api_group: String,
    resource: String,
    namespace: String,
    name: String,
}

/// Counts open watches the way kube's `watchTracker` does, so mutations can be charged for
/// the watchers they wake. Register a watch when it is admitted and keep the returned guard
/// for its lifetime.
#[derive(Debug, Clone, Default)]
pub struct WatchTracker {
    counts: Arc<Mutex<HashMap<WatchKey, u64>>>,
}

/// Keeps one watch counted; dropping it forgets the watch.
#[derive(Debug)]
pub struct WatchRegistration {
    counts: Arc<Mutex<HashMap<WatchKey, u64>>>,
    key: Option<WatchKey>,
}

impl Drop for WatchRegistration {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut counts = lock(&self.counts);
            if let Some(n) = counts.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.remove(&key);
                }
            }
        }
    }
}

impl WatchTracker {
    pub fn new() -> Self {
        WatchTracker::default()
    }

    /// Counts a watch. Pod watches narrowed to one node (`fieldSelector=spec.nodeName=x`) are
    /// not counted, as kube indexes them away.
    pub fn register(&self, info: &RequestInfo) -> WatchRegistration {
        let indexed = info.resource == "pods"
            && node_name_selector(&info.field_selector).is_some_and(|v| !v.is_empty());
        if info.verb != "watch" || indexed {
            return WatchRegistration {
                counts: self.counts.clone(),
                key: None,
            };
        }
        let key = WatchKey {
            api_group: info.api_group.clone(),
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
        };
        *lock(&self.counts).entry(key.clone()).or_insert(0) += 1;
        WatchRegistration {
            counts: self.counts.clone(),
            key: Some(key),
        }
    }
}

/// The value a field selector requires `spec.nodeName` to equal exactly, if it does.
fn node_name_selector(selector: &str) -> Option<&str> {
    selector.split(',').find_map(|term| {
        let term = term.trim();
        term.strip_prefix("spec.nodeName==")
            .or_else(|| term.strip_prefix("spec.nodeName="))
    })
}

impl WatchCounts for WatchTracker {
    /// kube's `GetInterestedWatchCount`: watches of the whole resource, of its namespace and
    /// of the object itself.
    fn interested_watchers(&self, info: &RequestInfo) -> u64 {
        if matches!(info.verb.as_str(), "get" | "list" | "watch" | "proxy") {
            return 0;
        }
        let counts = lock(&self.counts);
        let mut key = WatchKey {
            api_group: info.api_group.clone(),
            resource: info.resource.clone(),
            namespace: String::new(),
            name: String::new(),
        };
        let mut total = counts.get(&key).copied().unwrap_or(0);
        if !info.namespace.is_empty() {
            key.namespace = info.namespace.clone();
            total += counts.get(&key).copied().unwrap_or(0);
        }
        if !info.name.is_empty() {
            key.name = info.name.clone();
            total += counts.get(&key).copied().unwrap_or(0);
        }
        total
    }
}
