//! The queue set of one priority level, as kube's `fairqueuing/queueset`: shuffle sharding
//! into queues, fair queuing by virtual finish time over seat-seconds, width-aware dispatch,
//! queue-length rejection and lingering final seats. Pure state: the caller holds its lock and
//! passes the time in; waiters are woken through oneshot channels.
//!
//! Cost per request: the counts the algorithm reads every time (requests and seats waiting,
//! active queues, seats requested by the queues, which queues are non-empty) are kept up to
//! date as queues change ([`QueueSet::update_queue`]) instead of being summed over every queue;
//! a request arriving when nothing waits and its seats fit is dispatched at once, with exactly
//! the bookkeeping that queuing it and dispatching it would do, but without the channel (kube's
//! `StartRequest` enqueues and dispatches in the same locked section, so the outcome is the
//! same); and the dispatch choice looks only at non-empty queues, in kube's round-robin order.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::borrowing::Integrator;
use super::debug::RequestDetails;
use super::estimate::WorkEstimate;
use super::shuffle::{Dealer, Hand};
use super::Matched;

/// kube's guess of how long a request's initial phase takes, `G` in its fair-queuing notes.
const ESTIMATED_SERVICE_DURATION: Duration = Duration::from_millis(3);

/// An amount of work in seat-seconds, fixed point with 10^-8 resolution (kube's
/// `SeatSeconds`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SeatSeconds(u64);

const SS_SCALE: f64 = 1e8;
/// How far the progress meter is wound back when it grows large (kube's `rDecrement`).
const R_DECREMENT: u64 = u64::MAX / 2;
const HIGH_R: u64 = R_DECREMENT + R_DECREMENT / 2;

/// `v.round() as i64` (halves away from zero, as kube's `math.Round`), 0 for a value that is
/// not finite. Without SSE4.1 `f64::round` is a library call several times the cost of this,
/// and the virtual clock rounds on every request.
fn round_to_i64(v: f64) -> i64 {
    if !v.is_finite() {
        return 0;
    }
    // Truncation saturates beyond the i64 range, as the conversion of a rounded value does;
    // within it the fraction left is exact.
    let whole = v as i64;
    let fraction = v - whole as f64;
    if fraction >= 0.5 {
        whole.saturating_add(1)
    } else if fraction <= -0.5 {
        whole.saturating_sub(1)
    } else {
        whole
    }
}

impl SeatSeconds {
    const MAX: SeatSeconds = SeatSeconds(u64::MAX);

    fn from_seats(seats: f64, duration: Duration) -> SeatSeconds {
        SeatSeconds(Self::signed(seats, duration.as_secs_f64()).max(0) as u64)
    }

    fn signed(seats: f64, seconds: f64) -> i64 {
        round_to_i64(seats * seconds * SS_SCALE)
    }

    fn per_seat(self, seats: f64) -> Duration {
        let secs = self.0 as f64 / SS_SCALE / seats;
        if secs.is_finite() && secs >= 0.0 {
            Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
        } else {
            Duration::ZERO
        }
    }

    fn add(self, other: SeatSeconds) -> SeatSeconds {
        SeatSeconds(self.0.saturating_add(other.0))
    }

    fn sub(self, other: SeatSeconds) -> SeatSeconds {
        SeatSeconds(self.0.saturating_sub(other.0))
    }
}

/// kube's `SeatSeconds.String`: whole seat-seconds, eight decimals, `ss`.
impl std::fmt::Display for SeatSeconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scale = SS_SCALE as u64;
        write!(f, "{}.{:08}ss", self.0 / scale, self.0 % scale)
    }
}

/// A work estimate with its work in seat-seconds (kube's `completedWorkEstimate`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompletedEstimate {
    pub estimate: WorkEstimate,
    total_work: SeatSeconds,
    final_work: SeatSeconds,
}

impl CompletedEstimate {
    fn new(estimate: WorkEstimate) -> Self {
        let final_work =
            SeatSeconds::from_seats(estimate.final_seats as f64, estimate.additional_latency);
        let initial_work =
            SeatSeconds::from_seats(estimate.initial_seats as f64, ESTIMATED_SERVICE_DURATION);
        CompletedEstimate {
            estimate,
            total_work: initial_work.add(final_work),
            final_work,
        }
    }

    fn max_seats(&self) -> usize {
        usize::try_from(self.estimate.max_seats()).unwrap_or(usize::MAX)
    }
}

/// The queuing parameters of the set (kube's `QueuingConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queuing {
    /// Never limited.
    Exempt,
    /// Limited without queues: reject at once.
    Reject,
    Queues {
        dealer: Dealer,
        queues: usize,
        queue_length_limit: usize,
    },
}

/// Why the queue set refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    QueueFull,
    ConcurrencyLimit,
}

/// Who a request is and when it arrived, kept while it waits or executes for the debug dumps.
#[derive(Debug, Clone)]
pub(crate) struct RequestDescr {
    pub matched: Arc<Matched>,
    pub details: RequestDetails,
    pub arrival: Instant,
}

/// An executing request as the debug dumps show it.
#[derive(Debug, Clone)]
struct Running {
    descr: RequestDescr,
    estimate: WorkEstimate,
    start: Instant,
}

/// An executing request's entry in [`QueueSet::running`].
#[derive(Debug)]
struct RunningSlot {
    id: u64,
    /// Its queue's id; `None` when dispatched without a queue.
    queue: Option<u64>,
    running: Running,
}

/// A request that holds seats; hand it back to [`QueueSet::finish`].
#[derive(Debug)]
pub(crate) struct Ticket {
    id: u64,
    queue: Option<u64>,
    /// Its entry in [`QueueSet::running`].
    slot: usize,
    pub estimate: CompletedEstimate,
    start: Instant,
}

impl Ticket {
    /// Whether it was dispatched from (or, at once, into) a queue.
    pub fn queued(&self) -> bool {
        self.queue.is_some()
    }
}

/// Seats a finished request still holds for `delay` (its final seats).
#[derive(Debug)]
pub(crate) struct Linger {
    queue: Option<u64>,
    seats: usize,
    pub delay: Duration,
}

pub(crate) enum Start {
    Refused(Refusal),
    Executing(Ticket),
    Queued {
        id: u64,
        queue: u64,
        receiver: oneshot::Receiver<Ticket>,
    },
}

struct Waiting {
    id: u64,
    estimate: CompletedEstimate,
    arrival_r: SeatSeconds,
    sender: oneshot::Sender<Ticket>,
    descr: RequestDescr,
}

struct Queue {
    id: u64,
    waiting: VecDeque<Waiting>,
    next_dispatch_r: SeatSeconds,
    executing: usize,
    seats_in_use: usize,
    waiting_max_seats: usize,
    waiting_work: SeatSeconds,
}

impl Queue {
    fn new(id: u64) -> Self {
        Queue {
            id,
            waiting: VecDeque::new(),
            next_dispatch_r: SeatSeconds::default(),
            executing: 0,
            seats_in_use: 0,
            waiting_max_seats: 0,
            waiting_work: SeatSeconds::default(),
        }
    }

    fn is_active(&self) -> bool {
        !self.waiting.is_empty() || self.executing > 0
    }

    /// Its part of the seats the virtual clock's rate counts: in use plus waiting.
    fn requested_seats(&self) -> usize {
        self.seats_in_use.saturating_add(self.waiting_max_seats)
    }

    fn pop_front(&mut self) -> Option<Waiting> {
        let req = self.waiting.pop_front()?;
        self.note_removed(&req);
        Some(req)
    }

    fn note_removed(&mut self, req: &Waiting) {
        self.waiting_max_seats = self
            .waiting_max_seats
            .saturating_sub(req.estimate.max_seats());
        self.waiting_work = self.waiting_work.sub(req.estimate.total_work);
    }

    /// kube's anti-windup: dispatch in the virtual world never precedes the head's arrival.
    fn bound_next_dispatch(&mut self) {
        if let Some(head) = self.waiting.front() {
            if self.next_dispatch_r < head.arrival_r {
                self.next_dispatch_r = head.arrival_r;
            }
        }
    }
}

/// Counters for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSetCounters {
    pub dispatched: u64,
    pub rejected_queue_full: u64,
    pub rejected_concurrency_limit: u64,
    pub rejected_time_out: u64,
    pub cancelled: u64,
}

pub(crate) struct QueueSet {
    queuing: Queuing,
    concurrency_limit: usize,
    /// In id order (ids only grow and removal keeps the order), so an id is found by binary
    /// search.
    queues: Vec<Queue>,
    /// How many queues are active (requests waiting or executing), kept as queues change.
    active_queues: usize,
    /// The sum over the queues of seats in use plus seats waiting, kept as queues change.
    requested_seats: usize,
    /// Bit `i` set when `queues[i]` has requests waiting.
    nonempty: Vec<u64>,
    /// Whether a request may skip its queue when nothing waits (tests turn it off to compare).
    fast_path: bool,
    next_queue_id: u64,
    next_request_id: u64,
    current_r: SeatSeconds,
    last_real_time: Instant,
    robin_index: isize,
    enqueues: usize,
    /// The last hand dealt, with the dealer and flow hash that dealt it: a level's requests
    /// mostly come from one flow after another of the same few, and dealing costs a
    /// division per card.
    dealt: Option<(Dealer, u64, Hand)>,
    pub waiting_requests: usize,
    pub executing_requests: usize,
    pub seats_in_use: usize,
    pub waiting_seats: usize,
    pub counters: QueueSetCounters,
    /// Seat demand (seats in use plus seats waiting) over time, for borrowing.
    pub demand: Integrator,
    /// The executing requests, for the debug dumps; a ticket knows its slot. Freed slots are
    /// reused, so in steady state recording a request allocates nothing.
    running: Vec<Option<RunningSlot>>,
    free_slots: Vec<usize>,
}

/// An instant copy of a queue set for the debug dumps (kube's `debug.QueueSetDump`).
#[derive(Debug, Clone)]
pub(crate) struct QueueSetDump {
    pub queues: Vec<QueueDump>,
    pub queueless_executing: Vec<RequestDump>,
    pub waiting_requests: usize,
    pub executing_requests: usize,
    pub counters: QueueSetCounters,
}

/// One queue of a [`QueueSetDump`] (kube's `debug.QueueDump`).
#[derive(Debug, Clone)]
pub(crate) struct QueueDump {
    /// Waiting requests, head first.
    pub waiting: Vec<RequestDump>,
    pub executing: Vec<RequestDump>,
    /// kube's `SeatSeconds` rendering of the queue's virtual dispatch time.
    pub next_dispatch_r: String,
    pub executing_requests: usize,
    pub seats_in_use: usize,
    /// Sums over the waiting requests.
    pub initial_seats_sum: u64,
    pub max_seats_sum: usize,
    pub total_work_sum: String,
}

/// One request of a [`QueueSetDump`] (kube's `debug.RequestDump`).
#[derive(Debug, Clone)]
pub(crate) struct RequestDump {
    pub descr: RequestDescr,
    pub estimate: WorkEstimate,
    /// When it was dispatched; `None` while it waits.
    pub start: Option<Instant>,
}

impl Running {
    fn dump(&self) -> RequestDump {
        RequestDump {
            descr: self.descr.clone(),
            estimate: self.estimate,
            start: Some(self.start),
        }
    }
}

impl QueueSet {
    pub fn new(queuing: Queuing, concurrency_limit: usize, now: Instant) -> Self {
        let mut qs = QueueSet {
            queuing: Queuing::Reject,
            concurrency_limit,
            queues: Vec::new(),
            active_queues: 0,
            requested_seats: 0,
            nonempty: Vec::new(),
            fast_path: true,
            next_queue_id: 0,
            next_request_id: 0,
            current_r: SeatSeconds::default(),
            last_real_time: now,
            robin_index: 0,
            enqueues: 0,
            dealt: None,
            waiting_requests: 0,
            executing_requests: 0,
            seats_in_use: 0,
            waiting_seats: 0,
            counters: QueueSetCounters::default(),
            demand: Integrator::new(now),
            running: Vec::new(),
            free_slots: Vec::new(),
        };
        qs.set_configuration(queuing, concurrency_limit, now);
        qs
    }

    /// Applies new queuing parameters and limit (kube's `setConfiguration`): more queues are
    /// added at once, surplus ones go when they empty; waiting requests are kept.
    pub fn set_configuration(&mut self, queuing: Queuing, limit: usize, now: Instant) {
        self.sync_time(now);
        if let Queuing::Queues { queues, .. } = queuing {
            while self.queues.len() < queues {
                self.queues.push(Queue::new(self.next_queue_id));
                self.next_queue_id += 1;
            }
            self.rebuild_nonempty();
        }
        self.queuing = queuing;
        self.concurrency_limit = limit;
        self.dispatch_as_much_as_possible(now);
    }

    pub fn set_concurrency_limit(&mut self, limit: usize, now: Instant) {
        self.sync_time(now);
        self.concurrency_limit = limit;
        self.dispatch_as_much_as_possible(now);
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    pub fn is_idle(&self) -> bool {
        self.waiting_requests == 0 && self.executing_requests == 0
    }

    /// Copies the state the debug dumps show (kube's `Dump`).
    pub fn dump(&self) -> QueueSetDump {
        // Executing requests by queue id (`None`: without a queue), in id order.
        let mut executing: HashMap<Option<u64>, Vec<(u64, RequestDump)>> = HashMap::new();
        for slot in self.running.iter().flatten() {
            executing
                .entry(slot.queue)
                .or_default()
                .push((slot.id, slot.running.dump()));
        }
        let mut executing_of = |queue: Option<u64>| {
            let mut list = executing.remove(&queue).unwrap_or_default();
            list.sort_by_key(|(id, _)| *id);
            list.into_iter().map(|(_, dump)| dump).collect::<Vec<_>>()
        };
        let queues = self
            .queues
            .iter()
            .map(|queue| QueueDump {
                waiting: queue
                    .waiting
                    .iter()
                    .map(|w| RequestDump {
                        descr: w.descr.clone(),
                        estimate: w.estimate.estimate,
                        start: None,
                    })
                    .collect(),
                executing: executing_of(Some(queue.id)),
                next_dispatch_r: queue.next_dispatch_r.to_string(),
                executing_requests: queue.executing,
                seats_in_use: queue.seats_in_use,
                initial_seats_sum: queue
                    .waiting
                    .iter()
                    .map(|w| w.estimate.estimate.initial_seats)
                    .fold(0, u64::saturating_add),
                max_seats_sum: queue.waiting_max_seats,
                total_work_sum: queue.waiting_work.to_string(),
            })
            .collect();
        QueueSetDump {
            queues,
            queueless_executing: executing_of(None),
            waiting_requests: self.waiting_requests,
            executing_requests: self.executing_requests,
            counters: self.counters,
        }
    }

    fn desired_queues(&self) -> usize {
        match self.queuing {
            Queuing::Queues { queues, .. } => queues,
            _ => 0,
        }
    }

    fn note_demand(&mut self, now: Instant) {
        self.demand.set(
            self.seats_in_use.saturating_add(self.waiting_seats) as f64,
            now,
        );
    }

    /// Advances the virtual clock R to `now` at the rate the state since the last call implies.
    fn sync_time(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last_real_time);
        self.last_real_time = now;
        let incr = SeatSeconds::from_seats(self.virtual_time_ratio(), elapsed);
        self.current_r = self.current_r.add(incr);
        if self.current_r.0 >= HIGH_R {
            self.advance_epoch();
        }
    }

    /// kube's `advanceEpoch`: winds R and every reading taken from it back by the same amount.
    fn advance_epoch(&mut self) {
        let dec = SeatSeconds(R_DECREMENT);
        self.current_r = self.current_r.sub(dec);
        for queue in &mut self.queues {
            if !queue.is_active() {
                queue.next_dispatch_r = SeatSeconds::default();
                continue;
            }
            queue.next_dispatch_r = queue.next_dispatch_r.sub(dec);
            for req in &mut queue.waiting {
                req.arrival_r = req.arrival_r.sub(dec);
            }
        }
    }

    /// The rate R advances at: the seats the active queues could use, capped at the limit,
    /// shared among the active queues.
    fn virtual_time_ratio(&self) -> f64 {
        if self.active_queues == 0 {
            return 0.0;
        }
        self.requested_seats.min(self.concurrency_limit) as f64 / self.active_queues as f64
    }

    /// Changes queue `index` with `change`, keeping the set's counts of active queues,
    /// requested seats and non-empty queues in step. Every change to a queue's waiting
    /// requests, executing count or seats goes through here.
    fn update_queue<R>(&mut self, index: usize, change: impl FnOnce(&mut Queue) -> R) -> Option<R> {
        let queue = self.queues.get_mut(index)?;
        let was_active = queue.is_active();
        let was_requested = queue.requested_seats();
        let was_nonempty = !queue.waiting.is_empty();
        let result = change(queue);
        let active = queue.is_active();
        let requested = queue.requested_seats();
        let nonempty = !queue.waiting.is_empty();
        if active != was_active {
            if active {
                self.active_queues += 1;
            } else {
                self.active_queues = self.active_queues.saturating_sub(1);
            }
        }
        self.requested_seats = self
            .requested_seats
            .saturating_sub(was_requested)
            .saturating_add(requested);
        if nonempty != was_nonempty {
            self.set_nonempty(index, nonempty);
        }
        Some(result)
    }

    fn set_nonempty(&mut self, index: usize, on: bool) {
        if let Some(word) = self.nonempty.get_mut(index / 64) {
            let bit = 1u64 << (index % 64);
            if on {
                *word |= bit;
            } else {
                *word &= !bit;
            }
        }
    }

    /// Recomputes the non-empty bits after queues were added or removed (indices moved).
    fn rebuild_nonempty(&mut self) {
        self.nonempty.clear();
        self.nonempty.resize(self.queues.len().div_ceil(64), 0);
        for index in 0..self.queues.len() {
            if !self.queues[index].waiting.is_empty() {
                self.set_nonempty(index, true);
            }
        }
    }

    /// Calls `count` with every request's pair, whether it executes (its initial stage) or
    /// waits, and its seats (initial seats executing, the widest waiting, as kube's gauges
    /// count them).
    pub fn each_request(&self, mut count: impl FnMut(&Matched, bool, usize)) {
        for slot in self.running.iter().flatten() {
            let seats = usize::try_from(slot.running.estimate.initial_seats).unwrap_or(usize::MAX);
            count(&slot.running.descr.matched, true, seats);
        }
        for queue in &self.queues {
            for waiting in &queue.waiting {
                count(&waiting.descr.matched, false, waiting.estimate.max_seats());
            }
        }
    }

    /// The index of the queue with id `id`.
    fn queue_index(&self, id: u64) -> Option<usize> {
        self.queues.binary_search_by_key(&id, |q| q.id).ok()
    }

    /// Records an executing request for the dumps; returns its slot.
    fn add_running(&mut self, id: u64, queue: Option<u64>, running: Running) -> usize {
        let entry = Some(RunningSlot { id, queue, running });
        match self.free_slots.pop() {
            Some(slot) if slot < self.running.len() => {
                self.running[slot] = entry;
                slot
            }
            _ => {
                self.running.push(entry);
                self.running.len() - 1
            }
        }
    }

    fn remove_running(&mut self, slot: usize, id: u64) {
        let index = match self.running.get(slot) {
            Some(Some(entry)) if entry.id == id => Some(slot),
            // Not where the ticket says (cannot happen): look for it.
            _ => self
                .running
                .iter()
                .position(|e| e.as_ref().is_some_and(|e| e.id == id)),
        };
        if let Some(index) = index {
            self.running[index] = None;
            self.free_slots.push(index);
        }
    }

    /// kube narrows final seats wider than the whole limit to the limit, keeping the final
    /// work; true when it did.
    fn narrow(estimate: &mut CompletedEstimate, limit: usize) -> bool {
        if estimate.estimate.final_seats > limit as u64 && limit > 0 {
            estimate.estimate.final_seats = limit as u64;
            estimate.estimate.additional_latency = estimate.final_work.per_seat(limit as f64);
            return true;
        }
        false
    }

    fn can_accommodate(&self, seats: usize) -> bool {
        match self.queuing {
            Queuing::Exempt => true,
            _ if seats > self.concurrency_limit => self.executing_requests == 0,
            _ => self.seats_in_use.saturating_add(seats) <= self.concurrency_limit,
        }
    }

    /// Starts a request: dispatches it at once, queues it, or refuses it.
    pub fn start_request(
        &mut self,
        estimate: WorkEstimate,
        hash: u64,
        descr: RequestDescr,
        now: Instant,
    ) -> Start {
        self.sync_time(now);
        let estimate = CompletedEstimate::new(estimate);
        let (dealer, queue_length_limit) = match self.queuing {
            Queuing::Queues {
                dealer,
                queue_length_limit,
                ..
            } => (dealer, queue_length_limit),
            Queuing::Exempt | Queuing::Reject => {
                if !self.can_accommodate(estimate.max_seats()) {
                    self.counters.rejected_concurrency_limit += 1;
                    return Start::Refused(Refusal::ConcurrencyLimit);
                }
                self.executing_requests += 1;
                self.seats_in_use = self.seats_in_use.saturating_add(estimate.max_seats());
                self.counters.dispatched += 1;
                self.note_demand(now);
                let id = self.next_request_id;
                self.next_request_id += 1;
                let slot = self.add_running(
                    id,
                    None,
                    Running {
                        descr,
                        estimate: estimate.estimate,
                        start: now,
                    },
                );
                return Start::Executing(Ticket {
                    id,
                    queue: None,
                    slot,
                    estimate,
                    start: now,
                });
            }
        };
        let index = self.shuffle_shard(&dealer, hash);
        let seats_full = self.seats_in_use >= self.concurrency_limit;
        let current_r = self.current_r;
        let Some(queue) = self.queues.get(index) else {
            // Unreachable: a queuing set always has its desired queues.
            self.counters.rejected_concurrency_limit += 1;
            return Start::Refused(Refusal::ConcurrencyLimit);
        };
        if seats_full && queue.waiting.len() >= queue_length_limit {
            self.counters.rejected_queue_full += 1;
            return Start::Refused(Refusal::QueueFull);
        }
        let queue_id = queue.id;
        let id = self.next_request_id;
        self.next_request_id += 1;
        // Nothing waits: queued, this request would be the only candidate of the dispatch that
        // follows, which takes it whenever its seats fit. Do that now, without the queue.
        if self.fast_path
            && self.waiting_requests == 0
            && self.seats_in_use < self.concurrency_limit
            && self.can_accommodate(estimate.max_seats())
        {
            let ticket = self.dispatch_at_once(index, queue_id, id, estimate, descr, now);
            return Start::Executing(ticket);
        }
        let (sender, receiver) = oneshot::channel();
        self.update_queue(index, |queue| {
            if !queue.is_active() {
                queue.next_dispatch_r = current_r;
            }
            queue.waiting.push_back(Waiting {
                id,
                estimate,
                arrival_r: current_r,
                sender,
                descr,
            });
            queue.waiting_max_seats = queue.waiting_max_seats.saturating_add(estimate.max_seats());
            queue.waiting_work = queue.waiting_work.add(estimate.total_work);
            queue.bound_next_dispatch();
        });
        self.waiting_requests += 1;
        self.waiting_seats = self.waiting_seats.saturating_add(estimate.max_seats());
        self.note_demand(now);
        self.dispatch_as_much_as_possible(now);
        Start::Queued {
            id,
            queue: queue_id,
            receiver,
        }
    }

    /// The queued path's bookkeeping for a request that arrives at a set where nothing waits
    /// and is dispatched by the same call: its queue's virtual dispatch time starts at R (or
    /// stays, if later) and advances by its work, the round robin points at its queue, and
    /// the demand curve sees the same values.
    fn dispatch_at_once(
        &mut self,
        index: usize,
        queue_id: u64,
        id: u64,
        mut estimate: CompletedEstimate,
        descr: RequestDescr,
        now: Instant,
    ) -> Ticket {
        let current_r = self.current_r;
        let queued_seats = estimate.max_seats();
        if Self::narrow(&mut estimate, self.concurrency_limit) {
            // Queued, the demand curve would have seen its unnarrowed seats waiting first.
            self.demand.set(
                self.seats_in_use
                    .saturating_add(self.waiting_seats)
                    .saturating_add(queued_seats) as f64,
                now,
            );
        }
        let seats = estimate.max_seats();
        self.update_queue(index, |queue| {
            // Enqueue: an idle queue starts at R; the head never dispatches before it arrived.
            if !queue.is_active() || queue.next_dispatch_r < current_r {
                queue.next_dispatch_r = current_r;
            }
            // Dispatch.
            queue.executing += 1;
            queue.seats_in_use = queue.seats_in_use.saturating_add(seats);
            queue.next_dispatch_r = queue.next_dispatch_r.add(estimate.total_work);
        });
        self.robin_index = index as isize;
        self.executing_requests += 1;
        self.seats_in_use = self.seats_in_use.saturating_add(seats);
        self.counters.dispatched += 1;
        self.note_demand(now);
        let slot = self.add_running(
            id,
            Some(queue_id),
            Running {
                descr,
                estimate: estimate.estimate,
                start: now,
            },
        );
        Ticket {
            id,
            queue: Some(queue_id),
            slot,
            estimate,
            start: now,
        }
    }

    /// kube's `shuffleShardLocked`: of the flow's hand, the queue with the least waiting work,
    /// visiting the hand from a rotating offset so ties spread.
    fn shuffle_shard(&mut self, dealer: &Dealer, hash: u64) -> usize {
        if !matches!(&self.dealt, Some((d, h, _)) if d == dealer && *h == hash) {
            self.dealt = Some((*dealer, hash, dealer.hand(hash)));
        }
        let Some((_, _, hand)) = &self.dealt else {
            return 0;
        };
        let hand = hand.as_slice();
        let offset = self.enqueues % hand.len().max(1);
        self.enqueues = self.enqueues.wrapping_add(1);
        let mut best = hand.first().copied().unwrap_or(0);
        let mut least = SeatSeconds::MAX;
        // The hand from `offset` round to just before it (without a division per card).
        let (before, from) = hand.split_at(offset.min(hand.len()));
        for &index in from.iter().chain(before) {
            if let Some(queue) = self.queues.get(index) {
                if queue.waiting_work < least {
                    least = queue.waiting_work;
                    best = index;
                }
            }
        }
        best.min(self.queues.len().saturating_sub(1))
    }

    fn dispatch_as_much_as_possible(&mut self, now: Instant) {
        while self.waiting_requests != 0
            && self.seats_in_use < self.concurrency_limit
            && self.dispatch_one(now)
        {}
    }

    /// The queue whose head has the smallest virtual finish time (kube's
    /// `findDispatchQueueToBoundLocked`). kube visits every queue from the one after the last
    /// dispatch on, round robin, and keeps the first smallest finish; only non-empty queues
    /// can be chosen, so only they are visited, in the same order.
    fn dispatch_candidate(&self) -> Option<usize> {
        let n = self.queues.len();
        if n == 0 {
            return None;
        }
        let start = (self.robin_index + 1).rem_euclid(n as isize) as usize;
        let mut min_finish = SeatSeconds::MAX;
        let mut min_index: Option<usize> = None;
        let visit = Bits::new(&self.nonempty, start, n).chain(Bits::new(&self.nonempty, 0, start));
        for index in visit {
            let Some(queue) = self.queues.get(index) else {
                continue;
            };
            if let Some(head) = queue.waiting.front() {
                let finish = queue.next_dispatch_r.add(head.estimate.total_work);
                if min_index.is_none() || finish < min_finish {
                    min_finish = finish;
                    min_index = Some(index);
                }
            }
        }
        min_index
    }

    /// Dispatches the head of the queue with the smallest virtual finish time, if its seats
    /// fit; false when nothing could be dispatched.
    fn dispatch_one(&mut self, now: Instant) -> bool {
        let n = self.queues.len();
        if n == 0 {
            return false;
        }
        let candidate = self.dispatch_candidate();
        // Where kube's walk of all n queues leaves the round-robin index.
        self.robin_index = self.robin_index.rem_euclid(n as isize);
        let Some(index) = candidate else {
            return false;
        };
        let head_seats = match self.queues[index].waiting.front() {
            Some(head) => head.estimate.max_seats(),
            None => return false,
        };
        if !self.can_accommodate(head_seats) {
            return false;
        }
        let limit = self.concurrency_limit;
        let Some(Some(mut req)) = self.update_queue(index, Queue::pop_front) else {
            return false;
        };
        let queued_seats = req.estimate.max_seats();
        Self::narrow(&mut req.estimate, limit);
        self.robin_index = index as isize;
        self.waiting_requests -= 1;
        self.waiting_seats = self.waiting_seats.saturating_sub(queued_seats);
        let queue_id = self.queues[index].id;
        let seats = req.estimate.max_seats();
        let slot = self.add_running(
            req.id,
            Some(queue_id),
            Running {
                descr: req.descr,
                estimate: req.estimate.estimate,
                start: now,
            },
        );
        let ticket = Ticket {
            id: req.id,
            queue: Some(queue_id),
            slot,
            estimate: req.estimate,
            start: now,
        };
        if req.sender.send(ticket).is_err() {
            // The waiter is gone; its seats are not taken.
            self.remove_running(slot, req.id);
            self.update_queue(index, Queue::bound_next_dispatch);
            self.note_demand(now);
            return true;
        }
        let total_work = req.estimate.total_work;
        self.update_queue(index, |queue| {
            queue.executing += 1;
            queue.seats_in_use = queue.seats_in_use.saturating_add(seats);
            queue.next_dispatch_r = queue.next_dispatch_r.add(total_work);
            queue.bound_next_dispatch();
        });
        self.executing_requests += 1;
        self.seats_in_use = self.seats_in_use.saturating_add(seats);
        self.counters.dispatched += 1;
        self.note_demand(now);
        true
    }

    /// Removes a waiting request (its wait limit passed, or its waiter went away). False when
    /// it is no longer waiting: it was dispatched and its ticket is in its channel.
    pub fn remove_waiting(
        &mut self,
        id: u64,
        queue_id: u64,
        timed_out: bool,
        now: Instant,
    ) -> bool {
        self.sync_time(now);
        let Some(index) = self.queue_index(queue_id) else {
            return false;
        };
        let removed = self.update_queue(index, |queue| {
            let pos = queue.waiting.iter().position(|w| w.id == id)?;
            let req = queue.waiting.remove(pos)?;
            queue.note_removed(&req);
            queue.bound_next_dispatch();
            Some(req)
        });
        let Some(Some(req)) = removed else {
            return false;
        };
        self.waiting_requests -= 1;
        self.waiting_seats = self.waiting_seats.saturating_sub(req.estimate.max_seats());
        if timed_out {
            self.counters.rejected_time_out += 1;
        } else {
            self.counters.cancelled += 1;
        }
        self.note_demand(now);
        self.remove_queue_if_surplus(queue_id);
        // The head of the queue may have changed.
        self.dispatch_as_much_as_possible(now);
        true
    }

    /// Ends the execution of a request (kube's `finishRequestLocked`). Its seats are freed
    /// now, or, when it has final seats, returned as a [`Linger`] to release later with
    /// [`QueueSet::release`].
    pub fn finish(&mut self, ticket: Ticket, now: Instant) -> Option<Linger> {
        self.sync_time(now);
        self.executing_requests = self.executing_requests.saturating_sub(1);
        let actual = now.saturating_duration_since(ticket.start).as_secs_f64();
        self.remove_running(ticket.slot, ticket.id);
        if let Some(index) = ticket.queue.and_then(|id| self.queue_index(id)) {
            // The queue is charged for the real service time instead of the guess G.
            let delta = SeatSeconds::signed(
                ticket.estimate.estimate.initial_seats as f64,
                actual - ESTIMATED_SERVICE_DURATION.as_secs_f64(),
            );
            self.update_queue(index, |queue| {
                queue.executing = queue.executing.saturating_sub(1);
                queue.next_dispatch_r =
                    SeatSeconds(queue.next_dispatch_r.0.saturating_add_signed(delta));
                queue.bound_next_dispatch();
            });
        }
        let linger = Linger {
            queue: ticket.queue,
            seats: ticket.estimate.max_seats(),
            delay: ticket.estimate.estimate.additional_latency,
        };
        if linger.delay.is_zero() {
            self.release_seats(&linger, now);
            self.dispatch_as_much_as_possible(now);
            None
        } else {
            self.dispatch_as_much_as_possible(now);
            Some(linger)
        }
    }

    /// Frees the seats of a request whose final phase is over.
    pub fn release(&mut self, linger: &Linger, now: Instant) {
        self.sync_time(now);
        self.release_seats(linger, now);
        self.dispatch_as_much_as_possible(now);
    }

    fn release_seats(&mut self, linger: &Linger, now: Instant) {
        self.seats_in_use = self.seats_in_use.saturating_sub(linger.seats);
        self.note_demand(now);
        if let Some(id) = linger.queue {
            if let Some(index) = self.queue_index(id) {
                self.update_queue(index, |queue| {
                    queue.seats_in_use = queue.seats_in_use.saturating_sub(linger.seats);
                });
            }
            self.remove_queue_if_surplus(id);
        }
    }

    /// Drops an empty queue while there are more than desired (kube's
    /// `removeQueueIfEmptyLocked`).
    fn remove_queue_if_surplus(&mut self, id: u64) {
        if self.queues.len() <= self.desired_queues() {
            return;
        }
        let Some(index) = self.queue_index(id) else {
            return;
        };
        if self.queues[index].is_active() {
            return;
        }
        let removed = self.queues.remove(index);
        // Inactive, so nothing waits in it, but final seats may still linger.
        self.requested_seats = self
            .requested_seats
            .saturating_sub(removed.requested_seats());
        self.rebuild_nonempty();
        if self.robin_index >= index as isize {
            self.robin_index -= 1;
        }
    }
}

/// The set bits of a bitmap in `from..to`, in order.
struct Bits<'a> {
    words: &'a [u64],
    next: usize,
    end: usize,
}

impl<'a> Bits<'a> {
    fn new(words: &'a [u64], from: usize, to: usize) -> Self {
        Bits {
            words,
            next: from,
            end: to,
        }
    }
}

impl Iterator for Bits<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.next < self.end {
            let word = self.words.get(self.next / 64)? >> (self.next % 64);
            if word == 0 {
                self.next = (self.next / 64 + 1) * 64;
                continue;
            }
            let index = self.next + word.trailing_zeros() as usize;
            if index >= self.end {
                break;
            }
            self.next = index + 1;
            return Some(index);
        }
        self.next = self.end;
        None
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::flowcontrol::classify::{hash_flow_id, RequestDigest};
    use crate::request_info::resolve;
    use crate::user::UserInfo;

    #[test]
    fn rounding_matches_f64_round() {
        let mut values = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4_503_599_627_370_495.5,
            9.007_199_254_740_993e15,
            1e19,
            -1e19,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
        ];
        // A spread of magnitudes and fractions, as seat-seconds times 1e8 take.
        let mut x = 0.123_456_789_f64;
        for _ in 0..2000 {
            x = (x * 7.31 + 0.377) % 1e12;
            values.extend([x, -x, x.floor() + 0.5, -(x.floor() + 0.5)]);
        }
        for v in values {
            assert_eq!(round_to_i64(v), v.round() as i64, "{v:e}");
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(round_to_i64(v), 0);
        }
    }

    fn descr(now: Instant) -> RequestDescr {
        let info = Arc::new(
            resolve("GET", "/api/v1/namespaces/a/configmaps/x", "")
                .unwrap_or_else(|e| panic!("resolve: {e}")),
        );
        let user = Arc::new(UserInfo::new("u", Vec::new()));
        RequestDescr {
            matched: Arc::new(Matched {
                flow_schema: "fs".into(),
                flow_schema_uid: "".into(),
                priority_level: "pl".into(),
                priority_level_uid: "".into(),
                attachment: Default::default(),
            }),
            details: RequestDetails::new(
                &RequestDigest {
                    request_info: &info,
                    user: &user,
                    timeout: None,
                    memo: None,
                },
                Some(crate::flowcontrol::config::Distinguisher::ByUser),
            ),
            arrival: now,
        }
    }

    fn queuing(queues: usize, hand: usize, qll: usize) -> Queuing {
        Queuing::Queues {
            dealer: Dealer::new(queues, hand).unwrap_or_else(|e| panic!("{e}")),
            queues,
            queue_length_limit: qll,
        }
    }

    impl QueueSet {
        /// Everything the algorithm keeps, as text, to compare two sets.
        fn fingerprint(&self) -> String {
            let mut out = format!(
                "R={} robin={} enqueues={} next_id={} waiting={}/{} executing={} seats={} \
                 counters={:?} demand={:?} active={} requested={} nonempty={:?}\n",
                self.current_r,
                self.robin_index,
                self.enqueues,
                self.next_request_id,
                self.waiting_requests,
                self.waiting_seats,
                self.executing_requests,
                self.seats_in_use,
                self.counters,
                self.demand,
                self.active_queues,
                self.requested_seats,
                self.nonempty,
            );
            for q in &self.queues {
                let waiting: Vec<u64> = q.waiting.iter().map(|w| w.id).collect();
                let _ =
                    writeln!(
                    out,
                    "queue {} waiting={waiting:?} R={} executing={} seats={} max_seats={} work={}",
                    q.id, q.next_dispatch_r, q.executing, q.seats_in_use, q.waiting_max_seats,
                    q.waiting_work
                );
            }
            let mut running: Vec<String> = self
                .running
                .iter()
                .flatten()
                .map(|r| {
                    format!(
                        "{} {:?} {:?} {:?}",
                        r.id, r.queue, r.running.estimate, r.running.start
                    )
                })
                .collect();
            running.sort();
            let _ = writeln!(out, "running {running:?}");
            out
        }

        /// The incremental counts and the dispatch choice equal what scanning every queue
        /// gives (the code before they were kept incrementally).
        fn check_counts(&self) {
            let active = self.queues.iter().filter(|q| q.is_active()).count();
            let requested: usize = self.queues.iter().map(Queue::requested_seats).sum();
            assert_eq!(self.active_queues, active, "active queues");
            assert_eq!(self.requested_seats, requested, "requested seats");
            for (i, q) in self.queues.iter().enumerate() {
                let bit = self.nonempty[i / 64] >> (i % 64) & 1 == 1;
                assert_eq!(bit, !q.waiting.is_empty(), "non-empty bit of queue {i}");
            }
            // kube's walk over all queues.
            let n = self.queues.len();
            let mut robin = self.robin_index;
            let mut best: Option<(SeatSeconds, usize)> = None;
            for _ in 0..n {
                robin = (robin + 1).rem_euclid(n as isize);
                let q = &self.queues[robin as usize];
                if let Some(head) = q.waiting.front() {
                    let finish = q.next_dispatch_r.add(head.estimate.total_work);
                    if best.is_none_or(|(f, _)| finish < f) {
                        best = Some((finish, robin as usize));
                    }
                }
            }
            assert_eq!(
                self.dispatch_candidate(),
                best.map(|(_, i)| i),
                "dispatch choice"
            );
        }
    }

    /// Starts a request and returns its ticket if it executes at once or was dispatched
    /// from its queue by the same call; the receiver of one still waiting otherwise.
    fn start(
        qs: &mut QueueSet,
        estimate: WorkEstimate,
        flow: &str,
        now: Instant,
    ) -> Result<Ticket, Option<(u64, u64, oneshot::Receiver<Ticket>)>> {
        match qs.start_request(estimate, hash_flow_id("fs", flow), descr(now), now) {
            Start::Executing(ticket) => Ok(ticket),
            Start::Queued {
                id,
                queue,
                mut receiver,
            } => match receiver.try_recv() {
                Ok(ticket) => Ok(ticket),
                Err(_) => Err(Some((id, queue, receiver))),
            },
            Start::Refused(_) => Err(None),
        }
    }

    #[test]
    fn fast_path_accounts_as_the_queue_does() {
        // The same arrivals, finishes and releases through a set that dispatches idle-time
        // arrivals at once and one that always queues them: identical state after every step.
        let t0 = Instant::now();
        let mut fast = QueueSet::new(queuing(8, 2, 2), 4, t0);
        let mut slow = QueueSet::new(queuing(8, 2, 2), 4, t0);
        slow.fast_path = false;
        let mut fast_tickets: Vec<Ticket> = Vec::new();
        let mut slow_tickets: Vec<Ticket> = Vec::new();
        let mut fast_waiting = Vec::new();
        let mut slow_waiting = Vec::new();
        let mut fast_lingers = Vec::new();
        let mut slow_lingers = Vec::new();
        let estimates = [
            WorkEstimate::seats(1),
            WorkEstimate::seats(1),
            WorkEstimate::seats(2),
            WorkEstimate::seats(1),
            WorkEstimate {
                initial_seats: 1,
                final_seats: 1,
                additional_latency: Duration::from_millis(2),
            },
            // final seats wider than the limit: narrowed at dispatch (second half only: it
            // needs the whole set and would keep the first half queuing)
            WorkEstimate {
                initial_seats: 1,
                final_seats: 9,
                additional_latency: Duration::from_millis(4),
            },
        ];
        let mut now = t0;
        let mut fast_path_used = 0;
        for step in 0..400u32 {
            now += Duration::from_micros(u64::from(step % 7) * 300 + 100);
            // A light first half (mostly the fast path), then bursts that queue.
            let arrival = if step < 200 {
                step % 5 == 0 || step % 5 == 2
            } else {
                step % 5 <= 2
            };
            match (arrival, step % 5) {
                (true, _) => {
                    let pool = if step < 200 {
                        &estimates[..5]
                    } else {
                        &estimates[..]
                    };
                    let estimate = pool[(step as usize / 5 * 2 + step as usize % 5) % pool.len()];
                    let flow = format!("flow-{}", step % 11);
                    let went_fast = fast.waiting_requests == 0
                        && fast.seats_in_use < fast.concurrency_limit
                        && fast.can_accommodate(estimate.max_seats() as usize);
                    let f = start(&mut fast, estimate, &flow, now);
                    let s = start(&mut slow, estimate, &flow, now);
                    match (f, s) {
                        (Ok(f), Ok(s)) => {
                            fast_path_used += usize::from(went_fast);
                            fast_tickets.push(f);
                            slow_tickets.push(s);
                        }
                        (Err(Some(f)), Err(Some(s))) => {
                            fast_waiting.push(f);
                            slow_waiting.push(s);
                        }
                        (Err(None), Err(None)) => {}
                        (f, s) => panic!(
                            "step {step}: outcomes differ: {:?} vs {:?}",
                            f.is_ok(),
                            s.is_ok()
                        ),
                    }
                }
                // a finish (oldest first), its final seats released later
                (false, 1..=3) => {
                    if !fast_tickets.is_empty() {
                        let f = fast_tickets.remove(0);
                        let s = slow_tickets.remove(0);
                        if let Some(l) = fast.finish(f, now) {
                            fast_lingers.push(l);
                        }
                        if let Some(l) = slow.finish(s, now) {
                            slow_lingers.push(l);
                        }
                    }
                }
                // release lingering seats; collect requests dispatched from their queues
                _ => {
                    for (f, s) in fast_lingers.drain(..).zip(slow_lingers.drain(..)) {
                        fast.release(&f, now);
                        slow.release(&s, now);
                    }
                    for (waiting, tickets) in [
                        (&mut fast_waiting, &mut fast_tickets),
                        (&mut slow_waiting, &mut slow_tickets),
                    ] {
                        let mut still = Vec::new();
                        for (id, queue, mut receiver) in waiting.drain(..) {
                            match receiver.try_recv() {
                                Ok(ticket) => tickets.push(ticket),
                                Err(_) => still.push((id, queue, receiver)),
                            }
                        }
                        *waiting = still;
                    }
                }
            }
            assert_eq!(fast.fingerprint(), slow.fingerprint(), "after step {step}");
            fast.check_counts();
            slow.check_counts();
        }
        assert!(
            fast_path_used > 50,
            "the fast path ran {fast_path_used} times"
        );
        assert!(
            fast.counters.rejected_queue_full > 0,
            "the set was never full"
        );
    }

    #[test]
    fn fast_path_dispatches_only_when_nothing_waits_and_seats_fit() {
        let t0 = Instant::now();
        let mut qs = QueueSet::new(queuing(4, 1, 10), 2, t0);
        // Fits: executes at once, in its flow's queue, charged G there.
        let a = match qs.start_request(WorkEstimate::seats(1), 7, descr(t0), t0) {
            Start::Executing(ticket) => ticket,
            _ => panic!("a free seat and nothing waiting: dispatch at once"),
        };
        let queue = a
            .queue
            .unwrap_or_else(|| panic!("a queuing set dispatches into a queue"));
        let index = qs
            .queue_index(queue)
            .unwrap_or_else(|| panic!("no queue {queue}"));
        assert_eq!(qs.queues[index].executing, 1);
        assert_eq!(
            qs.queues[index].next_dispatch_r,
            SeatSeconds::from_seats(1.0, ESTIMATED_SERVICE_DURATION)
        );
        assert_eq!(
            (qs.active_queues, qs.requested_seats, qs.seats_in_use),
            (1, 1, 1)
        );
        // Two seats do not fit in the one left: it queues.
        let b = qs.start_request(WorkEstimate::seats(2), 8, descr(t0), t0);
        assert!(matches!(b, Start::Queued { .. }));
        // Something waits: even a request that would fit queues behind it.
        let c = qs.start_request(WorkEstimate::seats(1), 9, descr(t0), t0);
        let Start::Queued { mut receiver, .. } = c else {
            panic!("a request waits: queue, do not overtake");
        };
        // kube's fair queuing picks the next: c's queue is idle, so its R is the current one
        // and its finish is not later than b's; c is dispatched into the free seat.
        let c = receiver
            .try_recv()
            .unwrap_or_else(|_| panic!("c dispatched"));
        qs.check_counts();
        assert_eq!(qs.waiting_requests, 1);
        qs.finish(a, t0 + Duration::from_millis(1));
        qs.finish(c, t0 + Duration::from_millis(1));
        qs.check_counts();
        assert_eq!(
            (qs.waiting_requests, qs.executing_requests),
            (0, 1),
            "b got both seats"
        );
    }

    #[test]
    fn queues_are_found_by_id_after_surplus_ones_go() {
        let t0 = Instant::now();
        let mut qs = QueueSet::new(queuing(70, 1, 10), 1, t0);
        // Busy queues beyond the new desired count stay until they empty.
        let tickets: Vec<Ticket> = (0..1)
            .filter_map(
                |i| match qs.start_request(WorkEstimate::seats(1), 69 + i, descr(t0), t0) {
                    Start::Executing(t) => Some(t),
                    _ => None,
                },
            )
            .collect();
        let waiting: Vec<_> = (0..3)
            .filter_map(
                |i| match qs.start_request(WorkEstimate::seats(1), 65 + i, descr(t0), t0) {
                    Start::Queued {
                        id,
                        queue,
                        receiver,
                    } => Some((id, queue, receiver)),
                    _ => None,
                },
            )
            .collect();
        assert_eq!((tickets.len(), waiting.len()), (1, 3));
        qs.set_configuration(queuing(8, 1, 10), 1, t0);
        assert_eq!(qs.queues.len(), 70, "busy queues are kept");
        qs.check_counts();
        let t1 = t0 + Duration::from_millis(5);
        assert!(qs.remove_waiting(waiting[0].0, waiting[0].1, true, t1));
        qs.check_counts();
        for ticket in tickets {
            qs.finish(ticket, t1);
            qs.check_counts();
        }
        assert_eq!(qs.waiting_requests, 1, "the next waiter was dispatched");
        assert!(qs.queues.len() < 70, "idle surplus queues went");
        for (id, queue, mut receiver) in waiting.into_iter().skip(1) {
            if let Ok(ticket) = receiver.try_recv() {
                qs.finish(ticket, t1);
            } else {
                assert!(qs.remove_waiting(id, queue, false, t1));
            }
            qs.check_counts();
        }
        // As kube, a surplus queue goes when an event empties it; the others stay until then.
        assert!(qs.queues.len() <= 66, "{}", qs.queues.len());
        for (index, queue) in qs.queues.iter().enumerate() {
            assert_eq!(qs.queue_index(queue.id), Some(index));
        }
        assert!(qs.is_idle());
        assert!(qs.running.iter().all(Option::is_none));
    }

    #[test]
    fn bits_visit_set_bits_in_range_order() {
        let words = [0b1010_0001u64, 1 << 63, 0b11];
        let all: Vec<usize> = Bits::new(&words, 0, 192).collect();
        assert_eq!(all, vec![0, 5, 7, 127, 128, 129]);
        assert_eq!(
            Bits::new(&words, 1, 128).collect::<Vec<_>>(),
            vec![5, 7, 127]
        );
        assert_eq!(Bits::new(&words, 6, 127).collect::<Vec<_>>(), vec![7]);
        assert_eq!(Bits::new(&words, 130, 192).count(), 0);
        assert_eq!(Bits::new(&words, 5, 5).count(), 0);
    }
}
