//! Flow control in front of every request, as kube-apiserver's `WithPriorityAndFairness` (the
//! policy crate's APF engine) or, with `flowControl.mode: maxInFlight`, its older
//! `WithMaxInFlightLimit`. Also the controller that feeds the engine the stored FlowSchemas
//! and PriorityLevelConfigurations and writes their `Dangling` conditions, the periodic seat
//! borrowing, and the `apiserver_flowcontrol_*` metrics.

// `ApiError` is the registry's error type throughout; boxing it here alone would not help.
#![allow(clippy::result_large_err)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use kubegate_backends::registry::{manager, Registry};
use kubegate_backends::status::ApiError;
use kubegate_config::FlowControlConfig;
use kubegate_policy::flowcontrol::{
    Admission, Admitting, ClassificationMemo, FlowControl, FlowControlOptions, Matched, Name,
    ObjectCounts, Queued, Rejection, ReleaseGuard, RequestDigest, SeatGauge, WatchRegistration,
    WatchTracker, WorkEstimator, WorkEstimatorConfig, BORROWING_ADJUSTMENT_PERIOD,
};
use kubegate_policy::user::SYSTEM_PRIVILEGED_GROUP;
use kubegate_policy::{RequestInfo, UserInfo};
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
};
use serde_json::Value;

/// Where both flowcontrol kinds are stored: one watch covers them.
const STORAGE_PREFIX: &str = "/flowcontrol.apiserver.k8s.io/";
const GROUP: &str = "flowcontrol.apiserver.k8s.io";
/// How long configuration changes settle before the engine is reconfigured.
const SETTLE: Duration = Duration::from_millis(20);
/// kube's answer to a refused request.
const TOO_MANY: &str = "Too many requests, please try again later.";

/// kube's `X-Kubernetes-PF-FlowSchema-UID` response header (sent lower-case, as on HTTP/2).
pub const FLOW_SCHEMA_UID_HEADER: HeaderName =
    HeaderName::from_static("x-kubernetes-pf-flowschema-uid");
/// kube's `X-Kubernetes-PF-PriorityLevel-UID` response header.
pub const PRIORITY_LEVEL_UID_HEADER: HeaderName =
    HeaderName::from_static("x-kubernetes-pf-prioritylevel-uid");

/// The `X-Kubernetes-PF-*` header values of a request's (FlowSchema, priority level) pair,
/// built once per pair: a request's copy costs two reference counts, and writing them parses
/// and copies nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PfHeaders {
    flow_schema_uid: HeaderValue,
    priority_level_uid: HeaderValue,
}

impl PfHeaders {
    pub(crate) fn new(matched: &Matched) -> PfHeaders {
        // A UID the API server assigned is always a valid value; one from elsewhere that is
        // not goes out empty rather than failing the response.
        let value = |uid: &str| HeaderValue::from_str(uid).unwrap_or(HeaderValue::from_static(""));
        PfHeaders {
            flow_schema_uid: value(&matched.flow_schema_uid),
            priority_level_uid: value(&matched.priority_level_uid),
        }
    }

    /// The two headers, names and values.
    pub fn pairs(&self) -> [(HeaderName, &HeaderValue); 2] {
        [
            (FLOW_SCHEMA_UID_HEADER, &self.flow_schema_uid),
            (PRIORITY_LEVEL_UID_HEADER, &self.priority_level_uid),
        ]
    }

    /// Puts the two headers on a proxied backend's response ahead of the backend's own, as
    /// kube-aggregator's answer has them: its filter sets them before the proxy copies the
    /// backend's headers, which adds to them. A client reading one value reads kubegate's.
    pub fn put_before_backends(&self, headers: &mut http::HeaderMap) {
        for (name, value) in self.pairs() {
            // Collecting nothing allocates nothing: a backend seldom sets these.
            let backends: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
            headers.insert(name.clone(), value.clone());
            for theirs in backends {
                headers.append(name.clone(), theirs);
            }
        }
    }
}

/// A request allowed to run: holds its seats (or max-in-flight slot) until dropped. Kept
/// small (a watch's registration is boxed, the headers shared): it is moved a few times on
/// every request's way.
#[derive(Default)]
pub struct Ticket {
    admission: Option<Admission>,
    _watch: Option<Box<WatchRegistration>>,
    _slot: Option<Slot>,
    /// The request's `X-Kubernetes-PF-*` headers, for the response (the pipeline takes them).
    pub headers: Option<Arc<PfHeaders>>,
}

impl Ticket {
    /// Gives the seats back while the response goes on (a watch whose initial events are
    /// out), as kube's watch-initialization signal does.
    pub fn initialization_done(&mut self) {
        if let Some(admission) = &mut self.admission {
            admission.initialization_done();
        }
    }
}

/// A refused request: the 429 to answer and the headers it carries (the error boxed, so that
/// the admitted case, nearly every request's, is not as large as an error).
pub struct Refused {
    pub error: Box<ApiError>,
    pub headers: Option<Arc<PfHeaders>>,
}

/// A pair's `current_executing_seats` child, as the engine counts seats in it.
struct ExecutingSeats(IntGauge);

impl SeatGauge for ExecutingSeats {
    fn add(&self, seats: i64) {
        self.0.add(seats);
    }
}

/// One request counted against a max-in-flight limit.
struct Slot {
    limit: Arc<Limit>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.limit.current.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A max-in-flight limit (0: unlimited).
struct Limit {
    max: usize,
    current: AtomicUsize,
}

impl Limit {
    fn try_enter(self: &Arc<Self>) -> Option<Slot> {
        if self.max == 0 {
            self.current.fetch_add(1, Ordering::AcqRel);
            return Some(Slot {
                limit: self.clone(),
            });
        }
        let mut current = self.current.load(Ordering::Acquire);
        loop {
            if current >= self.max {
                return None;
            }
            match self.current.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Some(Slot {
                        limit: self.clone(),
                    })
                }
                Err(now) => current = now,
            }
        }
    }
}

enum Mode {
    Apf {
        control: FlowControl,
        estimator: WorkEstimator,
        watches: WatchTracker,
    },
    MaxInFlight {
        read_only: Arc<Limit>,
        mutating: Arc<Limit>,
    },
}

/// kube's `apiserver_flowcontrol_*` metrics.
pub struct FlowMetrics {
    rejected: IntCounterVec,
    dispatched: IntCounterVec,
    in_queue: IntGaugeVec,
    executing_seats: IntGaugeVec,
    wait_duration: HistogramVec,
    nominal_limit: IntGaugeVec,
    current_limit: IntGaugeVec,
    lower_limit: IntGaugeVec,
    upper_limit: IntGaugeVec,
    /// Set when scraped ([`PairGauges`]); a pair's children are made at its first request.
    executing_requests: IntGaugeVec,
    inqueue_seats: IntGaugeVec,
}

/// What one (FlowSchema, priority level) pair's requests share, resolved once and attached to
/// the pair's shared `Matched`: the metric children (a `with_label_values` lookup hashes the
/// label strings and takes the vector's lock, which cost more per request than the counting)
/// and the response headers' values.
#[derive(Clone)]
struct PairMetrics {
    headers: Arc<PfHeaders>,
    in_queue: IntGauge,
    dispatched: IntCounter,
    /// `request_wait_duration_seconds{execute="true"}`; none for an exempt level, whose
    /// requests kube does not time (and whose series it therefore never shows).
    waited: Option<Histogram>,
    /// `current_executing_seats`: a request's widest seats (initial or final), from dispatch
    /// until they are released, as kube counts them.
    executing_seats: Arc<dyn SeatGauge>,
    /// The pair's FlowSchema and level.
    names: (Name, Name),
}

impl FlowMetrics {
    /// The children for the pair `matched` belongs to, made on the pair's first request.
    fn pair<'m>(&self, matched: &'m Matched, exempt: bool) -> Cow<'m, PairMetrics> {
        let make = || {
            let labels = [
                matched.flow_schema.as_str(),
                matched.priority_level.as_str(),
            ];
            // The scraped gauges show the pair (at 0) from its first request on, as kube's do.
            self.executing_requests.with_label_values(&labels);
            self.inqueue_seats.with_label_values(&labels);
            PairMetrics {
                headers: Arc::new(PfHeaders::new(matched)),
                in_queue: self.in_queue.with_label_values(&labels),
                dispatched: self.dispatched.with_label_values(&labels),
                waited: (!exempt).then(|| {
                    self.wait_duration
                        .with_label_values(&[labels[0], labels[1], "true"])
                }),
                executing_seats: Arc::new(ExecutingSeats(
                    self.executing_seats.with_label_values(&labels),
                )),
                names: (matched.flow_schema.clone(), matched.priority_level.clone()),
            }
        };
        match matched.attachment.get_or_init(make) {
            Some(pair) => Cow::Borrowed(pair),
            // Only this module attaches to a pair, always this type; should anything else
            // ever have, the request still gets its own children.
            None => Cow::Owned(make()),
        }
    }
}

impl FlowMetrics {
    pub fn register(metrics: &crate::metrics::Metrics) -> Result<FlowMetrics, prometheus::Error> {
        let both = &["flow_schema", "priority_level"];
        let rejected = IntCounterVec::new(
            Opts::new(
                "apiserver_flowcontrol_rejected_requests_total",
                "[BETA] Number of requests rejected by API Priority and Fairness subsystem",
            ),
            &["flow_schema", "priority_level", "reason"],
        )?;
        let dispatched = IntCounterVec::new(
            Opts::new(
                "apiserver_flowcontrol_dispatched_requests_total",
                "[BETA] Number of requests executed by API Priority and Fairness subsystem",
            ),
            both,
        )?;
        let in_queue = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_current_inqueue_requests",
                "[BETA] Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            ),
            both,
        )?;
        let executing_seats = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_current_executing_seats",
                "[BETA] Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
            ),
            both,
        )?;
        let wait_duration = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_flowcontrol_request_wait_duration_seconds",
                "[BETA] Length of time a request spent waiting in its queue",
            )
            .buckets(vec![
                0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
            ]),
            &["flow_schema", "priority_level", "execute"],
        )?;
        let nominal_limit = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_nominal_limit_seats",
                "[BETA] Nominal number of execution seats configured for each priority level",
            ),
            &["priority_level"],
        )?;
        let current_limit = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_current_limit_seats",
                "[ALPHA] current derived number of execution seats available to each priority level",
            ),
            &["priority_level"],
        )?;
        metrics.register(Box::new(rejected.clone()))?;
        metrics.register(Box::new(dispatched.clone()))?;
        metrics.register(Box::new(in_queue.clone()))?;
        metrics.register(Box::new(executing_seats.clone()))?;
        metrics.register(Box::new(wait_duration.clone()))?;
        let lower_limit = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_lower_limit_seats",
                "[ALPHA] Configured lower bound on number of execution seats available to each priority level",
            ),
            &["priority_level"],
        )?;
        let upper_limit = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_upper_limit_seats",
                "[ALPHA] Configured upper bound on number of execution seats available to each priority level",
            ),
            &["priority_level"],
        )?;
        let executing_requests = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_current_executing_requests",
                "[BETA] Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
            ),
            both,
        )?;
        let inqueue_seats = IntGaugeVec::new(
            Opts::new(
                "apiserver_flowcontrol_current_inqueue_seats",
                "[ALPHA] Number of seats currently pending in queues of the API Priority and Fairness subsystem",
            ),
            both,
        )?;
        metrics.register(Box::new(nominal_limit.clone()))?;
        metrics.register(Box::new(current_limit.clone()))?;
        metrics.register(Box::new(lower_limit.clone()))?;
        metrics.register(Box::new(upper_limit.clone()))?;
        Ok(FlowMetrics {
            rejected,
            dispatched,
            in_queue,
            executing_seats,
            wait_duration,
            nominal_limit,
            current_limit,
            lower_limit,
            upper_limit,
            executing_requests,
            inqueue_seats,
        })
    }
}

/// kube's `apiserver_flowcontrol_current_executing_requests` and `_current_inqueue_seats`,
/// read from the engine's queue sets when the metrics are scraped: counted there already, they
/// cost the request path nothing more.
pub struct PairGauges {
    gate: std::sync::Weak<FlowGate>,
    executing: IntGaugeVec,
    inqueue_seats: IntGaugeVec,
    /// Pairs with requests at the last scrape, to show 0 once they have none.
    shown: Mutex<std::collections::BTreeSet<(String, String)>>,
}

impl PairGauges {
    /// The gauges of `gate`'s engine (none in max-in-flight mode), to register once.
    pub fn new(gate: &Arc<FlowGate>) -> PairGauges {
        PairGauges {
            gate: Arc::downgrade(gate),
            executing: gate.metrics.executing_requests.clone(),
            inqueue_seats: gate.metrics.inqueue_seats.clone(),
            shown: Mutex::new(std::collections::BTreeSet::new()),
        }
    }
}

impl prometheus::core::Collector for PairGauges {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        let mut descs = self.executing.desc();
        descs.extend(self.inqueue_seats.desc());
        descs
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let counts = self
            .gate
            .upgrade()
            .and_then(|gate| gate.apf().map(FlowControl::pair_counts))
            .unwrap_or_default();
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        let value = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let mut idle = std::mem::take(&mut *shown);
        for pair in counts {
            let labels = [pair.flow_schema.as_str(), pair.priority_level.as_str()];
            self.executing
                .with_label_values(&labels)
                .set(value(pair.executing_requests));
            self.inqueue_seats
                .with_label_values(&labels)
                .set(value(pair.waiting_seats));
            let key = (pair.flow_schema, pair.priority_level);
            idle.remove(&key);
            shown.insert(key);
        }
        for (flow_schema, priority_level) in idle {
            let labels = [flow_schema.as_str(), priority_level.as_str()];
            self.executing.with_label_values(&labels).set(0);
            self.inqueue_seats.with_label_values(&labels).set(0);
        }
        drop(shown);
        let mut families = self.executing.collect();
        families.extend(self.inqueue_seats.collect());
        families
    }
}

/// Object counts for LIST work estimates, from the watch cache. Counting walks the cache, so
/// a count is reused for a second (kube refreshes its counts every minute).
struct CachedCounts {
    registry: Arc<Registry>,
    counts: Mutex<HashMap<(String, String), (Instant, u64)>>,
}

const COUNT_REUSE: Duration = Duration::from_secs(1);

impl ObjectCounts for CachedCounts {
    fn object_count(&self, group: &str, resource: &str) -> Option<u64> {
        let key = (group.to_string(), resource.to_string());
        if let Some((at, count)) = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            if at.elapsed() < COUNT_REUSE {
                return Some(*count);
            }
        }
        let def = self.registry.find(group, resource)?;
        let count = self.registry.cacher().count(&def.collection_prefix("")) as u64;
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, (Instant::now(), count));
        Some(count)
    }
}

/// kube's non-mutating verbs (`maxinflight.go`): what max-in-flight counts against the
/// read-only limit and `apiserver_current_inflight_requests` labels `readOnly`.
pub(crate) fn is_read_only(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

/// The flow-control stage of the pipeline.
pub struct FlowGate {
    mode: Mode,
    metrics: Arc<FlowMetrics>,
}

impl FlowGate {
    pub fn new(
        config: &FlowControlConfig,
        request_timeout: Duration,
        registry: Arc<Registry>,
        metrics: Arc<FlowMetrics>,
    ) -> FlowGate {
        let mode = if config.mode == "maxInFlight" {
            Mode::MaxInFlight {
                read_only: Arc::new(Limit {
                    max: config.max_requests_inflight as usize,
                    current: AtomicUsize::new(0),
                }),
                mutating: Arc::new(Limit {
                    max: config.max_mutating_requests_inflight as usize,
                    current: AtomicUsize::new(0),
                }),
            }
        } else {
            let watches = WatchTracker::new();
            let estimator = WorkEstimator::new(
                WorkEstimatorConfig::default(),
                Arc::new(CachedCounts {
                    registry,
                    counts: Mutex::new(HashMap::new()),
                }),
                Arc::new(watches.clone()),
            );
            Mode::Apf {
                control: FlowControl::new(FlowControlOptions {
                    total_seats: (config.max_requests_inflight
                        + config.max_mutating_requests_inflight)
                        as usize,
                    // kube: --request-timeout / 4 for requests without their own deadline.
                    request_wait_limit: request_timeout / 4,
                }),
                estimator,
                watches,
            }
        };
        FlowGate { mode, metrics }
    }

    /// The APF engine, when flow control is APF.
    pub fn apf(&self) -> Option<&FlowControl> {
        match &self.mode {
            Mode::Apf { control, .. } => Some(control),
            Mode::MaxInFlight { .. } => None,
        }
    }

    /// Admits a request or refuses it with a 429. `timeout` is the request's own deadline
    /// (`None` for long-running requests). Nearly every request is decided here, without an
    /// async state machine; one that must wait in its queue comes back as [`Admit::Queued`],
    /// whose [`Pending::wait`] the caller awaits.
    pub fn admit_now<'g>(
        &'g self,
        info: &Arc<RequestInfo>,
        user: &Arc<UserInfo>,
        raw_query: &str,
        timeout: Option<Duration>,
        long_running: bool,
        memo: Option<&ClassificationMemo>,
    ) -> Admit<'g> {
        match &self.mode {
            Mode::MaxInFlight {
                read_only,
                mutating,
            } => {
                // kube: long-running requests are not limited, and system:masters never is.
                if long_running {
                    return Admit::Decided(Ok(Ticket::default()));
                }
                let limit = if is_read_only(&info.verb) {
                    read_only
                } else {
                    mutating
                };
                Admit::Decided(match limit.try_enter() {
                    Some(slot) => Ok(Ticket {
                        _slot: Some(slot),
                        ..Ticket::default()
                    }),
                    None if user.in_group(SYSTEM_PRIVILEGED_GROUP) => Ok(Ticket::default()),
                    None => Err(Refused {
                        error: Box::new(ApiError::too_many_requests(TOO_MANY, 1)),
                        headers: None,
                    }),
                })
            }
            Mode::Apf {
                control,
                estimator,
                watches,
            } => {
                // kube: long-running requests other than watches bypass APF entirely.
                let is_watch = info.verb == "watch";
                if long_running && !is_watch {
                    return Admit::Decided(Ok(Ticket::default()));
                }
                let digest = RequestDigest {
                    request_info: info,
                    user,
                    timeout,
                    memo,
                };
                let classification = control.classify(&digest);
                // kube times the wait of non-exempt requests only (an exempt one never queues).
                let exempt = classification.exempt;
                let estimate = estimator.estimate_raw(info, raw_query, classification.max_seats);
                let settled = Settle {
                    gate: self,
                    watches,
                    exempt,
                    watch: is_watch.then(|| info.clone()),
                };
                match control.begin(classification, estimate) {
                    Admitting::Decided(decided) => Admit::Decided(settled.settle(decided)),
                    Admitting::Queued(queued) => Admit::Queued(Pending {
                        control,
                        queued,
                        settled,
                    }),
                }
            }
        }
    }

    /// Sets the limit gauges from the engine.
    fn publish_limits(&self) {
        let Some(control) = self.apf() else {
            return;
        };
        for level in control.snapshot() {
            let name = [level.name.as_str()];
            self.metrics
                .nominal_limit
                .with_label_values(&name)
                .set(i64::try_from(level.nominal_limit).unwrap_or(i64::MAX));
            self.metrics
                .current_limit
                .with_label_values(&name)
                .set(i64::try_from(level.current_limit).unwrap_or(i64::MAX));
            self.metrics
                .lower_limit
                .with_label_values(&name)
                .set(i64::try_from(level.lower_limit).unwrap_or(i64::MAX));
            self.metrics
                .upper_limit
                .with_label_values(&name)
                .set(i64::try_from(level.upper_limit).unwrap_or(i64::MAX));
        }
    }
}

/// What [`FlowGate::admit_now`] came to.
pub enum Admit<'g> {
    /// Admitted (the ticket holds its seats) or refused, without waiting.
    Decided(Result<Ticket, Refused>),
    /// Waiting in its priority level's queue: await [`Pending::wait`].
    Queued(Pending<'g>),
}

/// A request waiting in its queue; dropping it takes the request out of the queue.
pub struct Pending<'g> {
    control: &'g FlowControl,
    queued: Queued,
    settled: Settle<'g>,
}

impl Pending<'_> {
    /// Waits until the request is dispatched or refused (429 once its wait limit passes).
    /// It counts in `apiserver_flowcontrol_current_inqueue_requests` while it waits; a
    /// request dispatched at arrival never shows there, as in kube, where it leaves the
    /// queue in the same step that put it in.
    pub async fn wait(self) -> Result<Ticket, Refused> {
        self.wait_unless(std::future::pending()).await
    }

    /// [`Pending::wait`], giving up when `gone` resolves (the client went away), as kube's
    /// waiter gives up when its request's context ends.
    pub async fn wait_unless(
        self,
        gone: impl std::future::Future<Output = ()>,
    ) -> Result<Ticket, Refused> {
        let Pending {
            control,
            queued,
            settled,
        } = self;
        let matched = queued.matched().clone();
        let pair = settled.gate.metrics.pair(&matched, settled.exempt);
        pair.in_queue.inc();
        let outcome = queued.wait_unless(control, gone).await;
        pair.in_queue.dec();
        settled.settle(outcome)
    }
}

/// What turns the engine's answer into the pipeline's: the pair's metrics, the watch
/// registration, and the `X-Kubernetes-PF-*` headers.
struct Settle<'g> {
    gate: &'g FlowGate,
    watches: &'g WatchTracker,
    exempt: bool,
    /// The request, when it is a watch (registered for the LIST estimates' watch counts).
    watch: Option<Arc<RequestInfo>>,
}

impl Settle<'_> {
    fn settle(self, outcome: Result<Admission, Rejection>) -> Result<Ticket, Refused> {
        let metrics = &self.gate.metrics;
        match outcome {
            Ok(mut admission) => {
                let pair = metrics.pair(admission.matched(), self.exempt);
                pair.dispatched.inc();
                if let Some(waited) = &pair.waited {
                    waited.observe(admission.waited().as_secs_f64());
                }
                let seats = i64::try_from(admission.work_estimate().max_seats()).unwrap_or(1);
                let release = ReleaseGuard::new(pair.executing_seats.clone(), seats);
                let headers = Some(pair.headers.clone());
                drop(pair);
                admission.on_release(release);
                Ok(Ticket {
                    admission: Some(admission),
                    _watch: self
                        .watch
                        .map(|info| Box::new(self.watches.register(&info))),
                    _slot: None,
                    headers,
                })
            }
            Err(rejection) => {
                let pair = metrics.pair(&rejection.matched, self.exempt);
                let labels = [pair.names.0.as_str(), pair.names.1.as_str()];
                metrics
                    .rejected
                    .with_label_values(&[labels[0], labels[1], rejection.reason.as_str()])
                    .inc();
                let execute = if rejection.reason.enqueued() {
                    "true"
                } else {
                    "false"
                };
                metrics
                    .wait_duration
                    .with_label_values(&[labels[0], labels[1], execute])
                    .observe(rejection.waited.as_secs_f64());
                let retry_after = u32::try_from(rejection.retry_after_seconds.max(1)).unwrap_or(1);
                Err(Refused {
                    error: Box::new(ApiError::too_many_requests(TOO_MANY, retry_after)),
                    headers: Some(pair.headers.clone()),
                })
            }
        }
    }
}

/// Feeds the engine the stored configuration whenever it changes, writes the FlowSchemas'
/// `Dangling` conditions, and re-divides seats every [`BORROWING_ADJUSTMENT_PERIOD`], until
/// `stop`. Does nothing in max-in-flight mode.
pub async fn run(
    registry: Arc<Registry>,
    gate: Arc<FlowGate>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    if gate.apf().is_none() {
        return;
    }
    let mut watcher = configure(&registry, &gate).await;
    let mut borrowing = tokio::time::interval(BORROWING_ADJUSTMENT_PERIOD);
    borrowing.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let drained = gate.apf().map(|control| control.drained());
    loop {
        let level_drained = async {
            match &drained {
                Some(drained) => drained.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = level_drained => {
                // A removed priority level finished its last request: it goes now.
                if let Some(control) = gate.apf() {
                    control.reap_drained();
                }
                gate.publish_limits();
            }
            event = watcher.next() => {
                if !matches!(event, Some(Ok(_))) {
                    // The watch ended (the cache re-listed): start over from a fresh list.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                tokio::time::sleep(SETTLE).await;
                watcher = configure(&registry, &gate).await;
            }
            _ = borrowing.tick() => {
                if let Some(control) = gate.apf() {
                    control.adjust_borrowing();
                }
                gate.publish_limits();
            }
            _ = stop.changed() => return,
        }
    }
}

/// Loads every stored FlowSchema and PriorityLevelConfiguration into the engine, writes the
/// conditions that changed, and returns the watch that signals the next change.
async fn configure(
    registry: &Registry,
    gate: &FlowGate,
) -> kubegate_backends::storage::cacher::CacheWatcher {
    let (items, _, watcher) = registry.cacher().list_and_watch(STORAGE_PREFIX);
    let mut flow_schemas = Vec::new();
    let mut priority_levels = Vec::new();
    for item in items {
        let Ok(object) = serde_json::from_slice::<Value>(&item.bytes) else {
            tracing::warn!(key = %item.key, "unreadable flowcontrol object");
            continue;
        };
        if item
            .key
            .starts_with(&format!("{STORAGE_PREFIX}flowschemas/"))
        {
            flow_schemas.push(object);
        } else if item
            .key
            .starts_with(&format!("{STORAGE_PREFIX}prioritylevelconfigurations/"))
        {
            priority_levels.push(object);
        }
    }
    let Some(control) = gate.apf() else {
        return watcher;
    };
    let report = control.update_config(&flow_schemas, &priority_levels);
    for skipped in &report.skipped {
        tracing::warn!(kind = %skipped.kind, name = %skipped.name, reason = %skipped.reason, "flowcontrol object not used");
    }
    gate.publish_limits();
    let Some(def) = registry.find(GROUP, "flowschemas") else {
        return watcher;
    };
    for status in report.flow_schemas {
        let current = flow_schemas.iter().find(|o| {
            o.pointer("/metadata/name").and_then(Value::as_str) == Some(status.name.as_str())
        });
        if current.is_some_and(|o| status.condition.is_current_in(o)) {
            continue;
        }
        // kube's configuration controller applies the condition (with force) as
        // `api-priority-and-fairness-config-consumer-v1`, stamped with the time it writes.
        let condition = &status.condition;
        let config = serde_json::json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": status.name},
            "status": {"conditions": [{
                "type": condition.type_,
                "status": condition.status,
                "lastTransitionTime": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                "reason": condition.reason,
                "message": condition.message,
            }]},
        });
        let result = registry
            .apply_internal(
                &def,
                "",
                &status.name,
                "status",
                manager::APF_CONFIG_CONSUMER,
                &config,
            )
            .await;
        if let Err(e) = result {
            tracing::debug!(flowschema = %status.name, error = %e.message, "writing the Dangling condition");
        }
    }
    watcher
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubegates_pf_headers_go_before_a_backends_own() {
        let pf = PfHeaders {
            flow_schema_uid: HeaderValue::from_static("fs-front"),
            priority_level_uid: HeaderValue::from_static("pl-front"),
        };
        let mut headers = http::HeaderMap::new();
        headers.append(FLOW_SCHEMA_UID_HEADER, HeaderValue::from_static("fs-back"));
        pf.put_before_backends(&mut headers);
        let values = |name: &HeaderName| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .map(|v| v.to_str().expect("text").to_string())
                .collect()
        };
        assert_eq!(values(&FLOW_SCHEMA_UID_HEADER), ["fs-front", "fs-back"]);
        assert_eq!(values(&PRIORITY_LEVEL_UID_HEADER), ["pl-front"]);
    }

    #[test]
    fn max_in_flight_limits_count_and_release() {
        let limit = Arc::new(Limit {
            max: 2,
            current: AtomicUsize::new(0),
        });
        let a = limit.try_enter();
        let b = limit.try_enter();
        assert!(a.is_some() && b.is_some());
        assert!(limit.try_enter().is_none());
        drop(a);
        assert!(limit.try_enter().is_some());
        let unlimited = Arc::new(Limit {
            max: 0,
            current: AtomicUsize::new(0),
        });
        let slots: Vec<_> = (0..1000).filter_map(|_| unlimited.try_enter()).collect();
        assert_eq!(slots.len(), 1000);
        drop(slots);
        assert_eq!(unlimited.current.load(Ordering::Acquire), 0);
    }

    #[test]
    fn read_only_verbs_follow_kube() {
        for verb in ["get", "list", "watch"] {
            assert!(is_read_only(verb));
        }
        for verb in [
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
            "proxy",
        ] {
            assert!(!is_read_only(verb));
        }
    }
}
