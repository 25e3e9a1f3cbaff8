//! # API Priority and Fairness
//!
//! kube-apiserver's flow control (k8s.io/apiserver `util/flowcontrol`, KEP-1040 with seat
//! borrowing) as a pure engine: FlowSchemas classify a request into a flow of a priority
//! level; each limited level owns a share of the server's seats and, for `Queue` levels, a
//! set of fair queues that requests wait in until seats free up.
//!
//! How to use it from the request pipeline:
//! 1. Build one [`FlowControl`] with [`FlowControlOptions`] (total seats = max requests in
//!    flight + max mutating requests in flight) and share it (it is a cheap `Arc` clone).
//! 2. Whenever FlowSchema or PriorityLevelConfiguration objects change, call
//!    [`FlowControl::update_config`] with all of them and write the returned
//!    [`FlowSchemaStatus::condition`]s back (the `Dangling` condition). Every
//!    [`BORROWING_ADJUSTMENT_PERIOD`], call [`FlowControl::adjust_borrowing`].
//! 3. Per request: [`FlowControl::classify`], estimate its work with a [`WorkEstimator`]
//!    (passing [`Classification::max_seats`]), then [`FlowControl::admit`] (or
//!    [`FlowControl::begin`], which decides at once unless the request has to wait in a
//!    queue, and [`Queued::wait`] when it does). An [`Admission`]
//!    holds the seats until dropped (watches call [`Admission::initialization_done`] once their
//!    initial events are sent); a [`Rejection`] is a 429 with `Retry-After`. Both carry the
//!    matched names and UIDs for the `X-Kubernetes-PF-*` headers.
//! 4. [`FlowControl::snapshot`] gives the numbers behind kube's
//!    `apiserver_flowcontrol_*` metrics; [`debug::dump_priority_levels`],
//!    [`debug::dump_queues`] and [`debug::dump_requests`] the tables kube serves under
//!    `/debug/api_priority_and_fairness/`.

pub mod borrowing;
pub mod classify;
pub mod config;
pub mod debug;
pub mod estimate;
mod memo;
mod queueset;
mod retry;
pub mod shuffle;
#[cfg(test)]
mod tests;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub use borrowing::SeatDemandStats;
pub use classify::RequestDigest;
pub use config::{
    ConfigReport, DanglingCondition, FlowSchemaStatus, LevelBehavior, Skipped, CATCH_ALL, EXEMPT,
};
pub use estimate::{
    ObjectCounts, WatchCounts, WatchRegistration, WatchTracker, WorkEstimate, WorkEstimator,
    WorkEstimatorConfig,
};
pub use memo::ClassificationMemo;
pub use queueset::QueueSetCounters;

use crate::user::UserInfo;
use classify::{
    distinguisher_of, hash_flow_id, matches_flow_schema, matches_request, matches_subjects,
};
use config::{Distinguisher, FlowSchema, PriorityLevel};
use queueset::{QueueSet, Queuing, Refusal, RequestDescr, Start, Ticket};
use retry::DroppedRequests;
use shuffle::Dealer;

/// How often kube re-divides seats between priority levels.
pub const BORROWING_ADJUSTMENT_PERIOD: Duration = Duration::from_secs(10);

/// No request waits in a queue longer than this (kube's hard limit).
pub const MAX_REQUEST_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// Share of a level's nominal limit one request may occupy (kube's
/// `priorityLevelMaxSeatsPercent`).
const PRIORITY_LEVEL_MAX_SEATS_PERCENT: f64 = 0.15;

/// Locks a mutex, taking the data even if another thread panicked while holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Server-wide parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowControlOptions {
    /// The server's concurrency limit in seats: `--max-requests-inflight` +
    /// `--max-mutating-requests-inflight` (kube's defaults 400 + 200).
    pub total_seats: usize,
    /// How long a request without a deadline (a watch, say) may wait in a queue: kube passes
    /// `--request-timeout` / 4, 15 s by default.
    pub request_wait_limit: Duration,
}

impl Default for FlowControlOptions {
    fn default() -> Self {
        FlowControlOptions {
            total_seats: 600,
            request_wait_limit: Duration::from_secs(15),
        }
    }
}

impl FlowControlOptions {
    /// How long a request may wait in its queue (kube's `getRequestWaitContext`): a quarter of
    /// its own timeout if it has one, the default otherwise, never more than a minute.
    pub fn wait_limit(&self, timeout: Option<Duration>) -> Duration {
        timeout
            .map_or(self.request_wait_limit, |t| t / 4)
            .min(MAX_REQUEST_WAIT_LIMIT)
    }
}

/// An immutable string shared by reference count: the names and UIDs every request of a
/// FlowSchema carries are resolved once per configuration, and a request's copy of them costs
/// an increment instead of an allocation.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<str>);

impl Name {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether both are the same allocation (not merely equal text).
    pub fn ptr_eq(a: &Name, b: &Name) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(Arc::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(Arc::from(s))
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

/// The FlowSchema and priority level a request was classified into: one per schema of the
/// configuration, shared by all its requests (the flow distinguisher is in the request's
/// [`debug::RequestDetails`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub flow_schema: Name,
    /// For `X-Kubernetes-PF-FlowSchema-UID` (empty for the built-in mandatory objects when no
    /// stored object exists).
    pub flow_schema_uid: Name,
    pub priority_level: Name,
    /// For `X-Kubernetes-PF-PriorityLevel-UID`.
    pub priority_level_uid: Name,
    /// What the server keeps for the pair (its metric children, its header values).
    pub attachment: Attachment,
}

/// State a server attaches to a pair's shared [`Matched`] on first use: found without a
/// lookup by every request of the pair, and gone with the configuration the pair belongs to.
/// Compares equal whatever it holds: it is derived from the pair, not part of its identity.
#[derive(Clone, Default)]
pub struct Attachment(OnceLock<Arc<dyn Any + Send + Sync>>);

impl Attachment {
    /// The attached value, made by `init` on first use; `None` if a value of another type was
    /// attached first.
    pub fn get_or_init<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Option<&T> {
        self.0.get_or_init(|| Arc::new(init())).downcast_ref()
    }
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Attachment(set)"
        } else {
            "Attachment(unset)"
        })
    }
}

impl PartialEq for Attachment {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for Attachment {}

/// Why a request was rejected; [`RejectReason::as_str`] is kube's metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// Its queue was at `queueLengthLimit` and all seats were taken.
    QueueFull,
    /// A `Reject` level had no free seats.
    ConcurrencyLimit,
    /// It waited in its queue beyond its wait limit.
    TimeOut,
}

impl RejectReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::QueueFull => "queue-full",
            RejectReason::ConcurrencyLimit => "concurrency-limit",
            RejectReason::TimeOut => "time-out",
        }
    }

    /// Whether the request had been put in a queue before it was refused: kube's wait
    /// histogram labels such a request `execute="true"` (it had a request in the queue set),
    /// one refused at arrival `execute="false"`.
    pub fn enqueued(&self) -> bool {
        matches!(self, RejectReason::TimeOut)
    }
}

/// A rejected request: answer 429 with `Retry-After: retry_after_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Too many requests, please try again later.")]
pub struct Rejection {
    pub matched: Arc<Matched>,
    pub reason: RejectReason,
    /// kube's `Retry-After`, from the level's recent rejections (1 to 32 seconds).
    pub retry_after_seconds: u64,
    /// How long it waited in a queue before being rejected.
    pub waited: Duration,
}

/// The result of [`FlowControl::classify`]: pass it to [`FlowControl::admit_classified`].
#[derive(Debug, Clone)]
pub struct Classification {
    pub matched: Arc<Matched>,
    /// Whether the level is exempt (never queues or rejects).
    pub exempt: bool,
    /// The most seats a request of this level should be estimated at (kube's
    /// `MaxSeatsTracker`); 0 when the level sets no bound.
    pub max_seats: u64,
    /// How long the request may wait in a queue.
    pub wait_limit: Duration,
    hash: u64,
    level: Arc<Level>,
    /// Who asked for what, for `dump_requests`.
    pub details: debug::RequestDetails,
}

/// A request allowed to execute. It holds its seats until it is dropped or
/// [`Admission::initialization_done`] is called.
#[derive(Debug)]
pub struct Admission {
    matched: Arc<Matched>,
    level: Arc<Level>,
    ticket: Option<Ticket>,
    waited: Duration,
    estimate: WorkEstimate,
    /// Dropped when the request's seats are released (after its final seats' latency).
    on_release: Option<ReleaseGuard>,
}

/// A gauge of the seats requests hold (kube's `current_executing_seats`).
pub trait SeatGauge: Send + Sync {
    fn add(&self, seats: i64);
}

/// An admitted request's seats in a [`SeatGauge`], counted until they are released: kube
/// counts a request's seats until its final seats' latency has passed, after the request
/// itself has finished.
pub struct ReleaseGuard {
    gauge: Arc<dyn SeatGauge>,
    seats: i64,
}

impl ReleaseGuard {
    /// Adds `seats` to `gauge` now; they come off when the guard is dropped.
    pub fn new(gauge: Arc<dyn SeatGauge>, seats: i64) -> Self {
        gauge.add(seats);
        ReleaseGuard { gauge, seats }
    }
}

impl Drop for ReleaseGuard {
    fn drop(&mut self) {
        self.gauge.add(-self.seats);
    }
}

impl std::fmt::Debug for ReleaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseGuard")
            .field("seats", &self.seats)
            .finish_non_exhaustive()
    }
}

impl Admission {
    pub fn matched(&self) -> &Matched {
        &self.matched
    }

    /// How long it waited in a queue (kube's `request_wait_duration_seconds`).
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The work estimate it was admitted with (final seats may have been narrowed to the
    /// level's limit).
    pub fn work_estimate(&self) -> WorkEstimate {
        self.estimate
    }

    /// Drops `guard` when the request's seats are released: when it finishes, or when its
    /// final seats' latency has passed after that.
    pub fn on_release(&mut self, guard: ReleaseGuard) {
        self.on_release = Some(guard);
    }

    /// Releases the seats now while the response goes on: for a watch, once its initial
    /// events are sent (kube's `WatchInitialized`). Later calls and the drop do nothing more.
    pub fn initialization_done(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            Level::finish(&self.level, ticket, self.on_release.take());
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.initialization_done();
    }
}

/// One (FlowSchema, priority level) pair's requests now ([`FlowControl::pair_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairCounts {
    pub flow_schema: String,
    pub priority_level: String,
    pub executing_requests: usize,
    pub waiting_seats: usize,
}

/// Per priority level numbers for metrics and debugging.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorityLevelSnapshot {
    pub name: String,
    pub uid: String,
    pub behavior: LevelBehavior,
    /// Removed from the configuration, kept until its requests drain.
    pub quiescing: bool,
    /// `nominal_limit_seats`.
    pub nominal_limit: usize,
    /// Nominal limit less what it may lend.
    pub lower_limit: usize,
    /// Nominal limit plus what it may borrow.
    pub upper_limit: usize,
    /// `current_limit_seats`: the limit in force after borrowing.
    pub current_limit: usize,
    /// `current_executing_seats`.
    pub seats_in_use: usize,
    pub executing_requests: usize,
    /// `current_inqueue_requests`.
    pub waiting_requests: usize,
    pub waiting_seats: usize,
    pub queues: usize,
    /// `dispatched_requests_total` and `rejected_requests_total` by reason.
    pub counters: QueueSetCounters,
    pub seat_demand: SeatDemandStats,
}

/// One priority level's live state; kept across config updates while the level exists.
#[derive(Debug)]
pub(crate) struct Level {
    name: String,
    pub(crate) state: Mutex<LevelState>,
    /// Woken when the level, removed from the configuration, has drained (kube's
    /// `maybeReap`): the engine then drops it at once, not on the next borrowing tick.
    drained: Arc<tokio::sync::Notify>,
}

pub(crate) struct LevelState {
    pub spec: PriorityLevel,
    pub quiescing: bool,
    /// Set until the first config pass sets its limits.
    fresh: bool,
    pub queues: QueueSet,
    pub nominal_cl: usize,
    pub min_cl: usize,
    pub max_cl: usize,
    pub current_cl: usize,
    pub max_seats: u64,
    pub demand_stats: SeatDemandStats,
}

impl std::fmt::Debug for LevelState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelState")
            .field("spec", &self.spec)
            .field("current_cl", &self.current_cl)
            .finish_non_exhaustive()
    }
}

fn queuing_of(spec: &PriorityLevel) -> Queuing {
    match spec.behavior {
        LevelBehavior::Exempt => Queuing::Exempt,
        LevelBehavior::Reject => Queuing::Reject,
        LevelBehavior::Queue(q) => {
            match Dealer::new(q.queues as usize, q.hand_size as usize) {
                Ok(dealer) => Queuing::Queues {
                    dealer,
                    queues: q.queues as usize,
                    queue_length_limit: q.queue_length_limit as usize,
                },
                // Refused when parsed; unreachable, but never queue with a bad dealer.
                Err(_) => Queuing::Reject,
            }
        }
    }
}

impl Level {
    fn new(spec: PriorityLevel, now: Instant, drained: Arc<tokio::sync::Notify>) -> Self {
        let queues = QueueSet::new(queuing_of(&spec), 0, now);
        Level {
            drained,
            name: spec.name.clone(),
            state: Mutex::new(LevelState {
                spec,
                quiescing: false,
                fresh: true,
                queues,
                nominal_cl: 0,
                min_cl: 0,
                max_cl: 0,
                current_cl: 0,
                max_seats: 0,
                demand_stats: SeatDemandStats::default(),
            }),
        }
    }

    /// Ends a request's execution; final seats are released after their latency, and
    /// `on_release` is dropped when the seats are.
    fn finish(level: &Arc<Level>, ticket: Ticket, on_release: Option<ReleaseGuard>) {
        let now = Instant::now();
        let linger = {
            let mut state = lock(&level.state);
            let linger = state.queues.finish(ticket, now);
            level.signal_if_drained(&state);
            linger
        };
        let Some(linger) = linger else {
            drop(on_release);
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let level = level.clone();
                handle.spawn(async move {
                    tokio::time::sleep(linger.delay).await;
                    level.release(&linger, Instant::now());
                    drop(on_release);
                });
            }
            Err(_) => {
                level.release(&linger, now);
                drop(on_release);
            }
        }
    }

    /// Gives back a finished request's lingering final seats.
    fn release(&self, linger: &queueset::Linger, at: Instant) {
        let mut state = lock(&self.state);
        state.queues.release(linger, at);
        self.signal_if_drained(&state);
    }

    /// Wakes the engine's reaper when this removed level has nothing left running.
    fn signal_if_drained(&self, state: &LevelState) {
        if state.quiescing && state.queues.is_idle() {
            self.drained.notify_one();
        }
    }
}

/// Numbers every configuration any engine digests, so that a [`ClassificationMemo`] never
/// takes one configuration's indices for another's.
static CONFIG_GENERATIONS: AtomicU64 = AtomicU64::new(0);

/// The configuration in force.
struct Config {
    /// Unique to this configuration (see [`CONFIG_GENERATIONS`]).
    generation: u64,
    /// Non-dangling schemas plus the mandatory ones, in matching order.
    flow_schemas: Vec<SchemaEntry>,
    /// Index in `flow_schemas` of `catch-all`, which every request falls back to.
    catch_all: Option<usize>,
    levels: BTreeMap<String, Arc<Level>>,
    nominal_cl_sum: usize,
}

impl Config {
    /// Every rule set whose subjects match `user`, in matching order.
    fn rules_matching_subjects(&self, user: &UserInfo) -> Vec<memo::RulesRef> {
        self.flow_schemas
            .iter()
            .enumerate()
            .flat_map(|(schema, entry)| {
                entry
                    .schema
                    .rules
                    .iter()
                    .enumerate()
                    .filter(|(_, rules)| matches_subjects(user, rules))
                    .map(move |(rules, _)| (schema, rules))
            })
            .collect()
    }
}

/// A FlowSchema in force with everything classification reads from it and its level,
/// resolved when the configuration is digested (the level's spec and seat bound change only
/// then), so that classifying a request takes no lock and copies no string.
struct SchemaEntry {
    schema: Arc<FlowSchema>,
    level: Arc<Level>,
    /// The match of its requests, with an empty flow distinguisher.
    matched: Arc<Matched>,
    /// Whether the level queues over more than one queue: only then is the flow distinguished
    /// and hashed (kube: a single queue needs no shuffle sharding).
    distinguishes: bool,
    exempt: bool,
    max_seats: u64,
}

impl SchemaEntry {
    fn new(schema: Arc<FlowSchema>, level: Arc<Level>) -> SchemaEntry {
        let (uid, behavior, max_seats) = {
            let state = lock(&level.state);
            (state.spec.uid.clone(), state.spec.behavior, state.max_seats)
        };
        let matched = Arc::new(Matched {
            flow_schema: Name::from(schema.name.as_str()),
            flow_schema_uid: Name::from(schema.uid.as_str()),
            priority_level: Name::from(level.name.as_str()),
            priority_level_uid: Name::from(uid),
            attachment: Attachment::default(),
        });
        SchemaEntry {
            distinguishes: matches!(behavior, LevelBehavior::Queue(q) if q.queues > 1),
            exempt: behavior == LevelBehavior::Exempt,
            max_seats,
            schema,
            level,
            matched,
        }
    }
}

struct Inner {
    options: FlowControlOptions,
    config: RwLock<Arc<Config>>,
    /// Serializes config updates and borrowing adjustments; holds the last objects given.
    update: Mutex<(Vec<PriorityLevel>, Vec<FlowSchema>)>,
    dropped: Mutex<DroppedRequests>,
    epoch: Instant,
    /// Shared by every level: a removed level that drained (see [`FlowControl::drained`]).
    drained: Arc<tokio::sync::Notify>,
}

/// The flow-control engine. Clones share state.
#[derive(Clone)]
pub struct FlowControl {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FlowControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowControl")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl FlowControl {
    /// An engine with only the mandatory `exempt` and `catch-all` objects, as kube runs
    /// before its config objects are read.
    pub fn new(options: FlowControlOptions) -> Self {
        let now = Instant::now();
        let empty = Config {
            generation: CONFIG_GENERATIONS.fetch_add(1, Ordering::Relaxed),
            flow_schemas: Vec::new(),
            catch_all: None,
            levels: BTreeMap::new(),
            nominal_cl_sum: 0,
        };
        let flow_control = FlowControl {
            inner: Arc::new(Inner {
                options,
                config: RwLock::new(Arc::new(empty)),
                update: Mutex::new((Vec::new(), Vec::new())),
                dropped: Mutex::new(DroppedRequests::default()),
                epoch: now,
                drained: Arc::new(tokio::sync::Notify::new()),
            }),
        };
        let guard = lock(&flow_control.inner.update);
        flow_control.digest(&[], &[], now);
        drop(guard);
        flow_control
    }

    pub fn options(&self) -> &FlowControlOptions {
        &self.inner.options
    }

    fn config(&self) -> Arc<Config> {
        self.inner
            .config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the configuration with these FlowSchema and PriorityLevelConfiguration
    /// objects (all of them, as stored). Levels that still exist keep their queues and
    /// executing requests; removed ones keep draining until idle. Unusable objects are
    /// skipped and reported.
    pub fn update_config(&self, flow_schemas: &[Value], priority_levels: &[Value]) -> ConfigReport {
        let mut report = ConfigReport::default();
        let mut levels: Vec<PriorityLevel> = Vec::new();
        for value in priority_levels {
            match config::parse_priority_level(value) {
                Ok(level) if levels.iter().any(|l| l.name == level.name) => {
                    report.skipped.push(Skipped {
                        kind: "PriorityLevelConfiguration",
                        name: level.name,
                        reason: "duplicate name".into(),
                    })
                }
                Ok(level) => levels.push(level),
                Err(skipped) => report.skipped.push(skipped),
            }
        }
        let mut schemas: Vec<FlowSchema> = Vec::new();
        for value in flow_schemas {
            match config::parse_flow_schema(value) {
                Ok(schema) if schemas.iter().any(|s| s.name == schema.name) => {
                    report.skipped.push(Skipped {
                        kind: "FlowSchema",
                        name: schema.name,
                        reason: "duplicate name".into(),
                    })
                }
                Ok(schema) => schemas.push(schema),
                Err(skipped) => report.skipped.push(skipped),
            }
        }
        for skipped in &report.skipped {
            tracing::warn!(kind = skipped.kind, name = %skipped.name, reason = %skipped.reason,
                "flow control: ignoring unusable object");
        }
        let mut last = lock(&self.inner.update);
        report.flow_schemas = self.digest(&levels, &schemas, Instant::now());
        *last = (levels, schemas);
        report
    }

    /// kube's `lockAndDigestConfigObjects`; the caller holds the update lock.
    fn digest(
        &self,
        priority_levels: &[PriorityLevel],
        flow_schemas: &[FlowSchema],
        now: Instant,
    ) -> Vec<FlowSchemaStatus> {
        let old = self.config();
        let mut levels: BTreeMap<String, Arc<Level>> = BTreeMap::new();
        let mut share_sum = 0f64;
        for spec in priority_levels {
            let level = match old.levels.get(&spec.name) {
                Some(level) => {
                    let mut state = lock(&level.state);
                    state.spec = spec.clone();
                    state.quiescing = false;
                    level.clone()
                }
                None => Arc::new(Level::new(spec.clone(), now, self.inner.drained.clone())),
            };
            share_sum += f64::from(spec.nominal_concurrency_shares);
            levels.insert(spec.name.clone(), level);
        }
        let mut have_exempt = levels.contains_key(EXEMPT);
        let mut have_catch_all = levels.contains_key(CATCH_ALL);

        let mut statuses = Vec::with_capacity(flow_schemas.len());
        let mut sequence: Vec<Arc<FlowSchema>> = Vec::with_capacity(flow_schemas.len() + 2);
        for schema in flow_schemas {
            let dangling = !levels.contains_key(&schema.priority_level);
            statuses.push(FlowSchemaStatus {
                name: schema.name.clone(),
                priority_level: schema.priority_level.clone(),
                dangling,
                condition: DanglingCondition::new(&schema.priority_level, dangling),
            });
            if !dangling {
                sequence.push(Arc::new(schema.clone()));
            }
        }
        sequence.sort_by(|a, b| {
            a.matching_precedence
                .cmp(&b.matching_precedence)
                .then_with(|| a.name.cmp(&b.name))
        });
        if !sequence.iter().any(|s| s.name == EXEMPT) {
            sequence.insert(0, Arc::new(config::mandatory_exempt_flow_schema()));
        }
        if !sequence.iter().any(|s| s.name == CATCH_ALL) {
            sequence.push(Arc::new(config::mandatory_catch_all_flow_schema()));
        }

        // Levels no longer configured: mandatory ones stay, busy ones drain, idle ones go.
        for (name, level) in &old.levels {
            if levels.contains_key(name) {
                continue;
            }
            let mut state = lock(&level.state);
            let mandatory =
                (name == EXEMPT && !have_exempt) || (name == CATCH_ALL && !have_catch_all);
            if !mandatory {
                if state.queues.is_idle() {
                    continue;
                }
                state.quiescing = true;
            }
            share_sum += f64::from(state.spec.nominal_concurrency_shares);
            have_exempt |= name == EXEMPT;
            have_catch_all |= name == CATCH_ALL;
            drop(state);
            levels.insert(name.clone(), level.clone());
        }
        for (have, spec) in [
            (have_exempt, config::mandatory_exempt_priority_level()),
            (have_catch_all, config::mandatory_catch_all_priority_level()),
        ] {
            if !have {
                share_sum += f64::from(spec.nominal_concurrency_shares);
                levels.insert(
                    spec.name.clone(),
                    Arc::new(Level::new(spec, now, self.inner.drained.clone())),
                );
            }
        }

        // Divide the server's seats by shares (kube's `finishQueueSetReconfigsLocked`).
        let server = self.inner.options.total_seats;
        let mut nominal_sum = 0usize;
        for level in levels.values() {
            let mut state = lock(&level.state);
            let shares = f64::from(state.spec.nominal_concurrency_shares);
            let nominal = if share_sum > 0.0 {
                (server as f64 * shares / share_sum).ceil() as usize
            } else {
                0
            };
            let lendable =
                (nominal as f64 * f64::from(state.spec.lendable_percent) / 100.0).round() as usize;
            let borrowing = match state.spec.borrowing_limit_percent {
                Some(p) => (nominal as f64 * f64::from(p) / 100.0).round() as usize,
                None => server,
            };
            state.nominal_cl = nominal;
            state.min_cl = nominal.saturating_sub(lendable);
            state.max_cl = nominal.saturating_add(borrowing);
            state.max_seats = match state.spec.behavior {
                LevelBehavior::Queue(q) => {
                    let by_percent = (nominal as f64 * PRIORITY_LEVEL_MAX_SEATS_PERCENT).ceil();
                    let by_hand = (nominal / q.hand_size.max(1) as usize) as f64;
                    by_percent.min(by_hand).max(1.0) as u64
                }
                _ => 0,
            };
            if state.fresh {
                state.fresh = false;
                state.current_cl = nominal.saturating_sub(lendable / 2);
                state.demand_stats = SeatDemandStats::default();
            }
            let queuing = queuing_of(&state.spec);
            let current = state.current_cl;
            state.queues.set_configuration(queuing, current, now);
            nominal_sum += nominal;
        }
        let all: Vec<Arc<Level>> = levels.values().cloned().collect();
        borrowing::update_borrowing(&all, nominal_sum, now);

        let entries: Vec<SchemaEntry> = sequence
            .into_iter()
            .filter_map(|schema| {
                let level = levels
                    .get(&schema.priority_level)
                    .or_else(|| levels.get(CATCH_ALL))?
                    .clone();
                Some(SchemaEntry::new(schema, level))
            })
            .collect();
        let catch_all = entries.iter().position(|e| e.schema.name == CATCH_ALL);
        let new = Arc::new(Config {
            generation: CONFIG_GENERATIONS.fetch_add(1, Ordering::Relaxed),
            flow_schemas: entries,
            catch_all,
            levels,
            nominal_cl_sum: nominal_sum,
        });
        *self
            .inner
            .config
            .write()
            .unwrap_or_else(PoisonError::into_inner) = new;
        statuses
    }

    /// Re-divides seats from the seat demand observed since the last call (kube's
    /// `updateBorrowing`, every [`BORROWING_ADJUSTMENT_PERIOD`]). Also retires removed
    /// priority levels that have drained.
    pub fn adjust_borrowing(&self) {
        let last = lock(&self.inner.update);
        if self.reap_drained_locked(&last) {
            return;
        }
        let config = self.config();
        let levels: Vec<Arc<Level>> = config.levels.values().cloned().collect();
        borrowing::update_borrowing(&levels, config.nominal_cl_sum, Instant::now());
    }

    /// Notified when a priority level removed from the configuration has drained: call
    /// [`FlowControl::reap_drained`] then, as kube's `maybeReap` drops such a level once its
    /// queue set goes idle.
    pub fn drained(&self) -> Arc<tokio::sync::Notify> {
        self.inner.drained.clone()
    }

    /// Retires removed priority levels that have drained.
    pub fn reap_drained(&self) {
        let last = lock(&self.inner.update);
        self.reap_drained_locked(&last);
    }

    /// [`FlowControl::reap_drained`] under the update lock; whether it reconfigured.
    fn reap_drained_locked(&self, last: &(Vec<PriorityLevel>, Vec<FlowSchema>)) -> bool {
        let config = self.config();
        let drained = config.levels.values().any(|level| {
            let state = lock(&level.state);
            state.quiescing && state.queues.is_idle()
        });
        if drained {
            self.digest(&last.0, &last.1, Instant::now());
        }
        drained
    }

    /// Finds the request's FlowSchema, priority level and flow.
    pub fn classify(&self, digest: &RequestDigest<'_>) -> Classification {
        let config = self.config();
        let flow_hash = |entry: &SchemaEntry| {
            if entry.distinguishes {
                hash_flow_id(
                    &entry.schema.name,
                    distinguisher_of(digest, entry.schema.distinguisher),
                )
            } else {
                0
            }
        };
        let catch_all = || {
            let index = config.catch_all?;
            Some((index, config.flow_schemas.get(index)?))
        };
        let remembered = digest.memo.and_then(|memo| {
            memo.with_candidates(
                config.generation,
                digest.user,
                || config.rules_matching_subjects(digest.user),
                |candidates, user_flow| {
                    let (index, entry) = candidates
                        .iter()
                        .find_map(|&(schema, rules)| {
                            let entry = config.flow_schemas.get(schema)?;
                            let rules = entry.schema.rules.get(rules)?;
                            matches_request(digest.request_info, rules).then_some((schema, entry))
                        })
                        .or_else(catch_all)?;
                    // A flow told apart by namespace changes with the request; any other
                    // only with the schema and the user the memo is for.
                    let user_only = entry.schema.distinguisher != Some(Distinguisher::ByNamespace);
                    let hash = match *user_flow {
                        Some((schema, hash)) if schema == index && user_only => hash,
                        _ => {
                            let hash = flow_hash(entry);
                            if user_only {
                                *user_flow = Some((index, hash));
                            }
                            hash
                        }
                    };
                    Some((entry, hash))
                },
            )
        });
        let found = match remembered {
            Some(found) => found,
            None => config
                .flow_schemas
                .iter()
                .find(|entry| matches_flow_schema(digest, &entry.schema))
                .or_else(|| catch_all().map(|(_, entry)| entry))
                .map(|entry| (entry, flow_hash(entry))),
        };
        let fallback;
        let (entry, hash) = match found {
            Some(found) => found,
            None => {
                // Unreachable: the catch-all schema and level are always configured.
                let spec = config::mandatory_catch_all_priority_level();
                fallback = SchemaEntry::new(
                    Arc::new(config::mandatory_catch_all_flow_schema()),
                    Arc::new(Level::new(spec, Instant::now(), self.inner.drained.clone())),
                );
                (&fallback, flow_hash(&fallback))
            }
        };
        // The flow is the schema and its distinguisher; the request shares the schema's
        // `Matched` and its details say which of its fields distinguishes it.
        let distinguisher = entry
            .distinguishes
            .then_some(entry.schema.distinguisher)
            .flatten();
        Classification {
            matched: entry.matched.clone(),
            exempt: entry.exempt,
            max_seats: entry.max_seats,
            wait_limit: self.inner.options.wait_limit(digest.timeout),
            hash,
            level: entry.level.clone(),
            details: debug::RequestDetails::new(digest, distinguisher),
        }
    }

    /// Classifies and admits a request: resolves when it may execute, or with why not.
    /// Dropping the future while it waits removes it from its queue.
    pub async fn admit(
        &self,
        digest: &RequestDigest<'_>,
        estimate: WorkEstimate,
    ) -> Result<Admission, Rejection> {
        self.admit_classified(self.classify(digest), estimate).await
    }

    /// Admits a request classified with [`FlowControl::classify`].
    pub async fn admit_classified(
        &self,
        classification: Classification,
        estimate: WorkEstimate,
    ) -> Result<Admission, Rejection> {
        match self.begin(classification, estimate) {
            Admitting::Decided(decided) => decided,
            Admitting::Queued(queued) => queued.wait(self).await,
        }
    }

    /// Starts admitting a request classified with [`FlowControl::classify`]: dispatched or
    /// refused at once (nearly every request, decided without an async state machine), or
    /// put in its queue, to be awaited with [`Queued::wait`].
    pub fn begin(&self, classification: Classification, estimate: WorkEstimate) -> Admitting {
        let arrival = Instant::now();
        let Classification {
            matched,
            wait_limit,
            hash,
            level,
            details,
            ..
        } = classification;
        let descr = RequestDescr {
            matched: matched.clone(),
            details,
            arrival,
        };
        let start = lock(&level.state)
            .queues
            .start_request(estimate, hash, descr, arrival);
        match start {
            Start::Refused(refusal) => {
                let reason = match refusal {
                    Refusal::QueueFull => RejectReason::QueueFull,
                    Refusal::ConcurrencyLimit => RejectReason::ConcurrencyLimit,
                };
                Admitting::Decided(Err(self.reject(matched, reason, Duration::ZERO)))
            }
            Start::Executing(ticket) => {
                // A request of a queuing level dispatched at once reports the time its
                // admission took, as kube's wait metric (time from before `StartRequest` to
                // dispatch) and the queued path do; one without a queue waited for nothing.
                let waited = if ticket.queued() {
                    Instant::now().saturating_duration_since(arrival)
                } else {
                    Duration::ZERO
                };
                Admitting::Decided(Ok(Self::admission(matched, level, ticket, waited)))
            }
            Start::Queued {
                id,
                queue,
                receiver,
            } => Admitting::Queued(Queued {
                waiter: Waiter {
                    level: level.clone(),
                    id,
                    queue,
                    receiver,
                    armed: true,
                },
                matched,
                level,
                deadline: arrival + wait_limit,
                arrival,
            }),
        }
    }

    fn admission(
        matched: Arc<Matched>,
        level: Arc<Level>,
        ticket: Ticket,
        waited: Duration,
    ) -> Admission {
        Admission {
            matched,
            level,
            estimate: ticket.estimate.estimate,
            ticket: Some(ticket),
            waited,
            on_release: None,
        }
    }

    fn reject(&self, matched: Arc<Matched>, reason: RejectReason, waited: Duration) -> Rejection {
        let second = Instant::now()
            .saturating_duration_since(self.inner.epoch)
            .as_secs();
        let retry_after_seconds = lock(&self.inner.dropped).record(
            &matched.priority_level,
            i64::try_from(second).unwrap_or(i64::MAX),
        );
        tracing::debug!(flow_schema = %matched.flow_schema, priority_level = %matched.priority_level,
            reason = reason.as_str(), "flow control: rejected request");
        Rejection {
            matched,
            reason,
            retry_after_seconds,
            waited,
        }
    }

    /// The numbers of every priority level, by name.
    pub fn snapshot(&self) -> Vec<PriorityLevelSnapshot> {
        let config = self.config();
        config
            .levels
            .values()
            .map(|level| {
                let state = lock(&level.state);
                PriorityLevelSnapshot {
                    name: level.name.clone(),
                    uid: state.spec.uid.clone(),
                    behavior: state.spec.behavior,
                    quiescing: state.quiescing,
                    nominal_limit: state.nominal_cl,
                    lower_limit: state.min_cl,
                    upper_limit: state.max_cl,
                    current_limit: state.current_cl,
                    seats_in_use: state.queues.seats_in_use,
                    executing_requests: state.queues.executing_requests,
                    waiting_requests: state.queues.waiting_requests,
                    waiting_seats: state.queues.waiting_seats,
                    queues: state.queues.queue_count(),
                    counters: state.queues.counters,
                    seat_demand: state.demand_stats,
                }
            })
            .collect()
    }

    /// For every (FlowSchema, priority level) pair with requests now: how many execute and
    /// how many seats wait (kube's `current_executing_requests` and `current_inqueue_seats`,
    /// counted when asked rather than on every request's way).
    pub fn pair_counts(&self) -> Vec<PairCounts> {
        let config = self.config();
        let mut counts: BTreeMap<(Name, Name), PairCounts> = BTreeMap::new();
        for level in config.levels.values() {
            lock(&level.state)
                .queues
                .each_request(|matched, executing, seats| {
                    let entry = counts
                        .entry((matched.flow_schema.clone(), matched.priority_level.clone()))
                        .or_insert_with(|| PairCounts {
                            flow_schema: matched.flow_schema.to_string(),
                            priority_level: matched.priority_level.to_string(),
                            executing_requests: 0,
                            waiting_seats: 0,
                        });
                    if executing {
                        entry.executing_requests += 1;
                    } else {
                        entry.waiting_seats += seats;
                    }
                });
        }
        counts.into_values().collect()
    }

    /// The FlowSchemas in force, in matching order (names).
    pub fn flow_schema_order(&self) -> Vec<String> {
        self.config()
            .flow_schemas
            .iter()
            .map(|e| e.schema.name.clone())
            .collect()
    }
}

/// What [`FlowControl::begin`] came to.
#[derive(Debug)]
pub enum Admitting {
    /// Dispatched or refused without waiting.
    Decided(Result<Admission, Rejection>),
    /// Waiting in its queue.
    Queued(Queued),
}

/// A request waiting in its queue. [`Queued::wait`] resolves when it is dispatched or its
/// wait limit passes; dropping it (or the future) takes the request out of its queue.
#[derive(Debug)]
pub struct Queued {
    waiter: Waiter,
    matched: Arc<Matched>,
    level: Arc<Level>,
    arrival: Instant,
    deadline: Instant,
}

impl Queued {
    /// The schema and level the request waits under.
    pub fn matched(&self) -> &Arc<Matched> {
        &self.matched
    }

    /// Waits until the request is dispatched, or refuses it once its wait limit passes.
    /// `control` is the engine that queued it.
    pub async fn wait(self, control: &FlowControl) -> Result<Admission, Rejection> {
        self.wait_unless(control, std::future::pending()).await
    }

    /// [`Queued::wait`], also giving up when `gone` resolves (the client went away): the
    /// request leaves its queue, counted as cancelled, and is refused as kube refuses a
    /// waiter whose context ends (a rejection for `time-out`), unless it was dispatched in the
    /// same instant.
    pub async fn wait_unless(
        mut self,
        control: &FlowControl,
        gone: impl std::future::Future<Output = ()>,
    ) -> Result<Admission, Rejection> {
        let outcome = tokio::select! {
            outcome = tokio::time::timeout_at(self.deadline, &mut self.waiter.receiver) => {
                outcome.map_err(|_| true)
            }
            _ = gone => Err(false),
        };
        let waited = Instant::now().saturating_duration_since(self.arrival);
        self.waiter.armed = false;
        match outcome {
            Ok(Ok(ticket)) => Ok(FlowControl::admission(
                self.matched,
                self.level,
                ticket,
                waited,
            )),
            // The sender went away undispatched; cannot happen while the level lives.
            Ok(Err(_)) => Err(control.reject(self.matched, RejectReason::TimeOut, waited)),
            Err(timed_out) => {
                let removed = lock(&self.level.state).queues.remove_waiting(
                    self.waiter.id,
                    self.waiter.queue,
                    timed_out,
                    Instant::now(),
                );
                // Not in its queue any more: it was dispatched just now.
                let dispatched = if removed {
                    None
                } else {
                    self.waiter.receiver.try_recv().ok()
                };
                match dispatched {
                    Some(ticket) => Ok(FlowControl::admission(
                        self.matched,
                        self.level,
                        ticket,
                        waited,
                    )),
                    None => Err(control.reject(self.matched, RejectReason::TimeOut, waited)),
                }
            }
        }
    }
}

/// Removes a waiting request from its queue if its future is dropped; if it was dispatched in
/// the meantime, gives its seats back.
#[derive(Debug)]
struct Waiter {
    level: Arc<Level>,
    id: u64,
    queue: u64,
    receiver: tokio::sync::oneshot::Receiver<Ticket>,
    /// Whether dropping it means the request was abandoned while waiting.
    armed: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let removed = lock(&self.level.state).queues.remove_waiting(
            self.id,
            self.queue,
            false,
            Instant::now(),
        );
        if !removed {
            if let Ok(ticket) = self.receiver.try_recv() {
                Level::finish(&self.level, ticket, None);
            }
        }
    }
}
