//! The queue set of one priority level, as kube's `fairqueuing/queueset`: shuffle sharding
//! into queues, fair queuing by virtual finish time over seat-seconds, width-aware dispatch,
//! queue-length rejection and lingering final seats. Pure state: the caller holds its lock and
//! passes the time in; waiters are woken through oneshot channels.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::borrowing::Integrator;
use super::debug::RequestDetails;
use super::estimate::WorkEstimate;
use super::shuffle::Dealer;
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

impl SeatSeconds {
    const MAX: SeatSeconds = SeatSeconds(u64::MAX);

    fn from_seats(seats: f64, duration: Duration) -> SeatSeconds {
        SeatSeconds(Self::signed(seats, duration.as_secs_f64()).max(0) as u64)
    }

    fn signed(seats: f64, seconds: f64) -> i64 {
        let v = (seats * seconds * SS_SCALE).round();
        if v.is_finite() {
            v as i64
        } else {
            0
        }
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
    pub details: Arc<RequestDetails>,
    pub arrival: Instant,
}

/// An executing request as the debug dumps show it.
#[derive(Debug, Clone)]
struct Running {
    descr: RequestDescr,
    estimate: WorkEstimate,
    start: Instant,
}

/// A request that holds seats; hand it back to [`QueueSet::finish`].
#[derive(Debug)]
pub(crate) struct Ticket {
    id: u64,
    queue: Option<u64>,
    pub estimate: CompletedEstimate,
    start: Instant,
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
    /// Its executing requests by request id, for the debug dumps.
    running: BTreeMap<u64, Running>,
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
            running: BTreeMap::new(),
        }
    }

    fn is_active(&self) -> bool {
        !self.waiting.is_empty() || self.executing > 0
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
    queues: Vec<Queue>,
    next_queue_id: u64,
    next_request_id: u64,
    current_r: SeatSeconds,
    last_real_time: Instant,
    robin_index: isize,
    enqueues: usize,
    pub waiting_requests: usize,
    pub executing_requests: usize,
    pub seats_in_use: usize,
    pub waiting_seats: usize,
    pub counters: QueueSetCounters,
    /// Seat demand (seats in use plus seats waiting) over time, for borrowing.
    pub demand: Integrator,
    /// Executing requests dispatched without a queue (exempt and `Reject` levels), by id.
    queueless_running: BTreeMap<u64, Running>,
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
            next_queue_id: 0,
            next_request_id: 0,
            current_r: SeatSeconds::default(),
            last_real_time: now,
            robin_index: 0,
            enqueues: 0,
            waiting_requests: 0,
            executing_requests: 0,
            seats_in_use: 0,
            waiting_seats: 0,
            counters: QueueSetCounters::default(),
            demand: Integrator::new(now),
            queueless_running: BTreeMap::new(),
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
                executing: queue.running.values().map(Running::dump).collect(),
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
            queueless_executing: self.queueless_running.values().map(Running::dump).collect(),
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
        let mut active = 0usize;
        let mut requested = 0usize;
        for queue in &self.queues {
            requested = requested
                .saturating_add(queue.seats_in_use)
                .saturating_add(queue.waiting_max_seats);
            if queue.is_active() {
                active += 1;
            }
        }
        if active == 0 {
            return 0.0;
        }
        requested.min(self.concurrency_limit) as f64 / active as f64
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
                self.queueless_running.insert(
                    id,
                    Running {
                        descr,
                        estimate: estimate.estimate,
                        start: now,
                    },
                );
                return Start::Executing(Ticket {
                    id,
                    queue: None,
                    estimate,
                    start: now,
                });
            }
        };
        let index = self.shuffle_shard(&dealer, hash);
        let seats_full = self.seats_in_use >= self.concurrency_limit;
        let current_r = self.current_r;
        let Some(queue) = self.queues.get_mut(index) else {
            // Unreachable: a queuing set always has its desired queues.
            self.counters.rejected_concurrency_limit += 1;
            return Start::Refused(Refusal::ConcurrencyLimit);
        };
        if seats_full && queue.waiting.len() >= queue_length_limit {
            self.counters.rejected_queue_full += 1;
            return Start::Refused(Refusal::QueueFull);
        }
        if !queue.is_active() {
            queue.next_dispatch_r = current_r;
        }
        let (sender, receiver) = oneshot::channel();
        let id = self.next_request_id;
        self.next_request_id += 1;
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
        let queue_id = queue.id;
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

    /// kube's `shuffleShardLocked`: of the flow's hand, the queue with the least waiting work,
    /// visiting the hand from a rotating offset so ties spread.
    fn shuffle_shard(&mut self, dealer: &Dealer, hash: u64) -> usize {
        let hand = dealer.deal(hash);
        let offset = self.enqueues % hand.len().max(1);
        self.enqueues = self.enqueues.wrapping_add(1);
        let mut best = hand.first().copied().unwrap_or(0);
        let mut least = SeatSeconds::MAX;
        for i in 0..hand.len() {
            let index = hand[(offset + i) % hand.len()];
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

    /// Dispatches the head of the queue with the smallest virtual finish time, if its seats
    /// fit; false when nothing could be dispatched.
    fn dispatch_one(&mut self, now: Instant) -> bool {
        let n = self.queues.len();
        if n == 0 {
            return false;
        }
        let mut min_finish = SeatSeconds::MAX;
        let mut min_index: Option<usize> = None;
        for _ in 0..n {
            self.robin_index = (self.robin_index + 1).rem_euclid(n as isize);
            let index = self.robin_index as usize;
            let queue = &self.queues[index];
            if let Some(head) = queue.waiting.front() {
                let finish = queue.next_dispatch_r.add(head.estimate.total_work);
                if min_index.is_none() || finish < min_finish {
                    min_finish = finish;
                    min_index = Some(index);
                }
            }
        }
        let Some(index) = min_index else {
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
        let queue = &mut self.queues[index];
        let Some(mut req) = queue.pop_front() else {
            return false;
        };
        let queued_seats = req.estimate.max_seats();
        // Final seats wider than the whole limit are narrowed, keeping the final work.
        if req.estimate.estimate.final_seats > limit as u64 && limit > 0 {
            req.estimate.estimate.final_seats = limit as u64;
            req.estimate.estimate.additional_latency =
                req.estimate.final_work.per_seat(limit as f64);
        }
        self.robin_index = index as isize;
        self.waiting_requests -= 1;
        self.waiting_seats = self.waiting_seats.saturating_sub(queued_seats);
        let queue = &mut self.queues[index];
        let ticket = Ticket {
            id: req.id,
            queue: Some(queue.id),
            estimate: req.estimate,
            start: now,
        };
        let seats = req.estimate.max_seats();
        if req.sender.send(ticket).is_err() {
            // The waiter is gone; its seats are not taken.
            queue.bound_next_dispatch();
            self.note_demand(now);
            return true;
        }
        queue.executing += 1;
        queue.running.insert(
            req.id,
            Running {
                descr: req.descr,
                estimate: req.estimate.estimate,
                start: now,
            },
        );
        queue.seats_in_use = queue.seats_in_use.saturating_add(seats);
        queue.next_dispatch_r = queue.next_dispatch_r.add(req.estimate.total_work);
        queue.bound_next_dispatch();
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
        let Some(queue) = self.queues.iter_mut().find(|q| q.id == queue_id) else {
            return false;
        };
        let Some(pos) = queue.waiting.iter().position(|w| w.id == id) else {
            return false;
        };
        let Some(req) = queue.waiting.remove(pos) else {
            return false;
        };
        queue.note_removed(&req);
        queue.bound_next_dispatch();
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
        if let Some(queue) = ticket
            .queue
            .and_then(|id| self.queues.iter_mut().find(|q| q.id == id))
        {
            queue.executing = queue.executing.saturating_sub(1);
            queue.running.remove(&ticket.id);
            // The queue is charged for the real service time instead of the guess G.
            let delta = SeatSeconds::signed(
                ticket.estimate.estimate.initial_seats as f64,
                actual - ESTIMATED_SERVICE_DURATION.as_secs_f64(),
            );
            queue.next_dispatch_r =
                SeatSeconds(queue.next_dispatch_r.0.saturating_add_signed(delta));
            queue.bound_next_dispatch();
        }
        if ticket.queue.is_none() {
            self.queueless_running.remove(&ticket.id);
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
            if let Some(queue) = self.queues.iter_mut().find(|q| q.id == id) {
                queue.seats_in_use = queue.seats_in_use.saturating_sub(linger.seats);
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
        let Some(index) = self.queues.iter().position(|q| q.id == id) else {
            return;
        };
        if self.queues[index].is_active() {
            return;
        }
        self.queues.remove(index);
        if self.robin_index >= index as isize {
            self.robin_index -= 1;
        }
    }
}
