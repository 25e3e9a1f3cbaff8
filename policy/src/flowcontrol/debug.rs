//! kube-apiserver's APF debug dumps (`apf_controller_debug.go`): the text tables served at
//! `/debug/api_priority_and_fairness/dump_priority_levels`, `dump_queues` and
//! `dump_requests` (`?includeRequestDetails=1` adds who asked for what).
//!
//! The tables have kube's columns and header names, cells separated by `,` and aligned as Go's
//! `text/tabwriter` aligns them (minimum width 8, padding 1, spaces), so tools that read
//! kube's dumps read these. Levels come in name order (kube sorts `dump_priority_levels` and
//! walks a map for the others); within a queue, waiting requests come head first, then the
//! executing ones. Times are UTC in Go's `RFC3339Nano`; a waiting request's start time is
//! Go's zero time, as kube prints it.
//!
//! Counters follow kube's meaning: `RejectedRequests` counts every request that was queued or
//! refused and never dispatched (refusals, time-outs and waiters that went away),
//! `CancelledRequests` every request removed from its queue before dispatch (time-outs
//! included: kube's wait limit is a context deadline); `TimedoutRequests` is always 0, a
//! column kube prints but never increments.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

use super::classify::RequestDigest;
use super::config::Distinguisher;
use super::queueset::{QueueSetDump, RequestDump};
use super::{lock, FlowControl};
use crate::{RequestInfo, UserInfo};

const PRIORITY_LEVEL_HEADERS: [&str; 10] = [
    "PriorityLevelName",
    "ActiveQueues",
    "IsIdle",
    "IsQuiescing",
    "WaitingRequests",
    "ExecutingRequests",
    "DispatchedRequests",
    "RejectedRequests",
    "TimedoutRequests",
    "CancelledRequests",
];

const QUEUE_HEADERS: [&str; 9] = [
    "PriorityLevelName",
    "Index",
    "PendingRequests",
    "ExecutingRequests",
    "SeatsInUse",
    "NextDispatchR",
    "InitialSeatsSum",
    "MaxSeatsSum",
    "TotalWorkSum",
];

/// kube's headers, its `FlowDistingsher` spelling included.
const REQUEST_HEADERS: [&str; 10] = [
    "PriorityLevelName",
    "FlowSchemaName",
    "QueueIndex",
    "RequestIndexInQueue",
    "FlowDistingsher",
    "ArriveTime",
    "InitialSeats",
    "FinalSeats",
    "AdditionalLatency",
    "StartTime",
];

const REQUEST_DETAIL_HEADERS: [&str; 8] = [
    "UserName",
    "Verb",
    "APIPath",
    "Namespace",
    "Name",
    "APIVersion",
    "Resource",
    "SubResource",
];

/// kube's `tabwriter.NewWriter(w, 8, 0, 1, ' ', 0)`.
const MIN_WIDTH: usize = 8;
const PADDING: usize = 1;

/// What `dump_requests?includeRequestDetails=1` shows about a request: the user and the
/// request info, shared with the request (kube keeps pointers to the request's own records
/// too), so recording them costs two reference counts and the text is written only when a
/// dump asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestDetails {
    user: Arc<UserInfo>,
    info: Arc<RequestInfo>,
    /// Which field, if any, is the flow distinguisher (the user name or the namespace): kept
    /// here rather than in a per-request copy of the request's [`super::Matched`].
    distinguisher: Option<Distinguisher>,
}

impl RequestDetails {
    /// The request's details; `distinguisher` is how its flow is told apart (`None` when its
    /// level does not queue by flow).
    pub fn new(digest: &RequestDigest<'_>, distinguisher: Option<Distinguisher>) -> Self {
        RequestDetails {
            user: digest.user.clone(),
            info: digest.request_info.clone(),
            distinguisher,
        }
    }

    pub fn user_name(&self) -> &str {
        &self.user.name
    }

    /// The flow distinguisher (kube's `computeFlowDistinguisher`): the user name, the
    /// namespace, or empty.
    pub fn flow_distinguisher(&self) -> &str {
        match self.distinguisher {
            None => "",
            Some(Distinguisher::ByUser) => self.user_name(),
            Some(Distinguisher::ByNamespace) => self.namespace(),
        }
    }

    pub fn verb(&self) -> &str {
        &self.info.verb
    }

    pub fn path(&self) -> &str {
        &self.info.path
    }

    pub fn namespace(&self) -> &str {
        &self.info.namespace
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// `group/version`, or the version alone for the core group (kube's
    /// `schema.GroupVersion.String()`).
    pub fn api_version(&self) -> Cow<'_, str> {
        if self.info.api_group.is_empty() {
            Cow::Borrowed(&self.info.api_version)
        } else {
            Cow::Owned(format!("{}/{}", self.info.api_group, self.info.api_version))
        }
    }

    pub fn resource(&self) -> &str {
        &self.info.resource
    }

    pub fn subresource(&self) -> &str {
        &self.info.subresource
    }
}

/// One row per priority level (kube's `dumpPriorityLevels`).
pub fn dump_priority_levels(fc: &FlowControl) -> String {
    let mut table = Table::new(&PRIORITY_LEVEL_HEADERS);
    for (name, quiescing, dump) in level_dumps(fc) {
        let active_queues = dump.queues.iter().filter(|q| !q.waiting.is_empty()).count();
        let c = dump.counters;
        let cancelled = c.rejected_time_out + c.cancelled;
        let rejected = c.rejected_queue_full + c.rejected_concurrency_limit + cancelled;
        let idle = dump.waiting_requests == 0 && dump.executing_requests == 0;
        table.row(&[
            name,
            active_queues.to_string(),
            idle.to_string(),
            quiescing.to_string(),
            dump.waiting_requests.to_string(),
            dump.executing_requests.to_string(),
            c.dispatched.to_string(),
            rejected.to_string(),
            // kube declares `totRequestsTimedout` but never increments it.
            "0".to_string(),
            cancelled.to_string(),
        ]);
    }
    table.finish()
}

/// One row per queue of every queuing priority level (kube's `dumpQueues`).
pub fn dump_queues(fc: &FlowControl) -> String {
    let mut table = Table::new(&QUEUE_HEADERS);
    for (name, _, dump) in level_dumps(fc) {
        for (index, queue) in dump.queues.into_iter().enumerate() {
            table.row(&[
                name.clone(),
                index.to_string(),
                queue.waiting.len().to_string(),
                queue.executing_requests.to_string(),
                queue.seats_in_use.to_string(),
                queue.next_dispatch_r,
                queue.initial_seats_sum.to_string(),
                queue.max_seats_sum.to_string(),
                queue.total_work_sum,
            ]);
        }
    }
    table.finish()
}

/// One row per waiting or executing request (kube's `dumpRequests`): per queue the waiting
/// ones by position, then the executing ones (`RequestIndexInQueue` -1), then those executing
/// without a queue (`QueueIndex` -1). With `include_request_details`, kube's eight extra
/// columns on who asked for what.
pub fn dump_requests(fc: &FlowControl, include_request_details: bool) -> String {
    dump_requests_at(fc, include_request_details, Clock::now())
}

/// Maps the engine's monotonic instants to wall-clock time.
#[derive(Debug, Clone, Copy)]
struct Clock {
    wall: DateTime<Utc>,
    instant: Instant,
}

impl Clock {
    fn now() -> Self {
        Clock {
            wall: DateTime::<Utc>::from(SystemTime::now()),
            instant: Instant::now(),
        }
    }

    fn wall_time(&self, instant: Instant) -> DateTime<Utc> {
        let delta = match instant.checked_duration_since(self.instant) {
            Some(after) => TimeDelta::from_std(after).unwrap_or(TimeDelta::MAX),
            None => -TimeDelta::from_std(self.instant.saturating_duration_since(instant))
                .unwrap_or(TimeDelta::MAX),
        };
        self.wall
            .checked_add_signed(delta)
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
    }
}

fn dump_requests_at(fc: &FlowControl, include_request_details: bool, clock: Clock) -> String {
    let mut headers: Vec<&str> = REQUEST_HEADERS.to_vec();
    if include_request_details {
        headers.extend(REQUEST_DETAIL_HEADERS);
    }
    let mut table = Table::new(&headers);
    for (name, _, dump) in level_dumps(fc) {
        let mut add = |queue: i64, index: i64, request: &RequestDump| {
            let matched = &request.descr.matched;
            let mut cells = vec![
                name.clone(),
                matched.flow_schema.to_string(),
                queue.to_string(),
                index.to_string(),
                request.descr.details.flow_distinguisher().to_owned(),
                go_rfc3339_nano(Some(clock.wall_time(request.descr.arrival))),
                request.estimate.initial_seats.to_string(),
                request.estimate.final_seats.to_string(),
                go_duration(request.estimate.additional_latency),
                go_rfc3339_nano(request.start.map(|start| clock.wall_time(start))),
            ];
            if include_request_details {
                let details = &request.descr.details;
                cells.extend(
                    [
                        details.user_name(),
                        details.verb(),
                        details.path(),
                        details.namespace(),
                        details.name(),
                        &details.api_version(),
                        details.resource(),
                        details.subresource(),
                    ]
                    .map(str::to_owned),
                );
            }
            table.row(&cells);
        };
        for (q, queue) in dump.queues.iter().enumerate() {
            let q = i64::try_from(q).unwrap_or(i64::MAX);
            for (r, request) in queue.waiting.iter().enumerate() {
                add(q, i64::try_from(r).unwrap_or(i64::MAX), request);
            }
            for request in &queue.executing {
                add(q, -1, request);
            }
        }
        for request in &dump.queueless_executing {
            add(-1, -1, request);
        }
    }
    table.finish()
}

/// Every priority level's name, quiescing flag and queue-set dump, by name.
fn level_dumps(fc: &FlowControl) -> Vec<(String, bool, QueueSetDump)> {
    fc.config()
        .levels
        .values()
        .map(|level| {
            let state = lock(&level.state);
            (level.name.clone(), state.quiescing, state.queues.dump())
        })
        .collect()
}

/// kube's rows: cells joined by `,\t`, one line each, aligned at the end.
struct Table {
    text: String,
}

impl Table {
    fn new<S: AsRef<str>>(headers: &[S]) -> Self {
        let mut table = Table {
            text: String::new(),
        };
        table.row(headers);
        table
    }

    fn row<S: AsRef<str>>(&mut self, cells: &[S]) {
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                self.text.push_str(",\t");
            }
            self.text.push_str(cell.as_ref());
        }
        self.text.push('\n');
    }

    fn finish(self) -> String {
        tab_align(&self.text, MIN_WIDTH, PADDING)
    }
}

/// Go's `text/tabwriter` with space padding and no flags: a tab ends a cell; the cells of a
/// column are padded to the widest in their column block (adjacent lines that have that cell)
/// plus `padding`, at least `min_width`; the text after a line's last tab is not aligned.
fn tab_align(text: &str, min_width: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text.split('\n').map(|l| l.split('\t').collect()).collect();
    let mut out = String::with_capacity(text.len() * 2);
    let mut widths = Vec::new();
    let aligner = Aligner {
        lines: &lines,
        min_width,
        padding,
    };
    aligner.format(&mut out, &mut widths, 0, lines.len());
    out
}

struct Aligner<'a> {
    lines: &'a [Vec<&'a str>],
    min_width: usize,
    padding: usize,
}

impl Aligner<'_> {
    /// Whether line `i` has a tab-terminated cell in `column`.
    fn has_cell(&self, i: usize, column: usize) -> bool {
        self.lines[i].len() > column + 1
    }

    /// Go's `format`: finds the blocks of column `widths.len()` in `line0..line1`, sizes each
    /// and recurses into the next column.
    fn format(&self, out: &mut String, widths: &mut Vec<usize>, line0: usize, line1: usize) {
        let column = widths.len();
        let mut start = line0;
        let mut this = line0;
        while this < line1 {
            if !self.has_cell(this, column) {
                this += 1;
                continue;
            }
            self.write_lines(out, widths, start, this);
            start = this;
            let mut width = self.min_width;
            while this < line1 && self.has_cell(this, column) {
                let cell = self.lines[this][column].chars().count() + self.padding;
                width = width.max(cell);
                this += 1;
            }
            widths.push(width);
            self.format(out, widths, start, this);
            widths.pop();
            start = this;
        }
        self.write_lines(out, widths, start, line1);
    }

    fn write_lines(&self, out: &mut String, widths: &[usize], line0: usize, line1: usize) {
        for i in line0..line1 {
            for (j, cell) in self.lines[i].iter().enumerate() {
                out.push_str(cell);
                if let Some(width) = widths.get(j) {
                    let pad = width.saturating_sub(cell.chars().count());
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            // The last line is what follows the final newline.
            if i + 1 < self.lines.len() {
                out.push('\n');
            }
        }
    }
}

/// Go's `time.Time.Format(time.RFC3339Nano)` in UTC; `None` is Go's zero time.
fn go_rfc3339_nano(time: Option<DateTime<Utc>>) -> String {
    let Some(time) = time else {
        return "0001-01-01T00:00:00Z".to_owned();
    };
    let mut s = time.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = time.timestamp_subsec_nanos().min(999_999_999);
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        s.push('.');
        s.push_str(fraction.trim_end_matches('0'));
    }
    s.push('Z');
    s
}

/// Go's `time.Duration.String()`: `0s`, `1.5ms`, `250µs`, `2m3.5s`, `1h0m0s`.
fn go_duration(duration: Duration) -> String {
    let nanos = u64::try_from(duration.as_nanos()).unwrap_or(i64::MAX as u64);
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (precision, unit) = match nanos {
            n if n < 1_000 => (0, "ns"),
            n if n < 1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        let (whole, fraction) = go_fraction(nanos, precision);
        return format!("{whole}{fraction}{unit}");
    }
    let (seconds, fraction) = go_fraction(nanos, 9);
    let minutes = seconds / 60;
    let hours = minutes / 60;
    match (hours, minutes) {
        (_, 0) => format!("{seconds}{fraction}s"),
        (0, m) => format!("{m}m{}{fraction}s", seconds % 60),
        (h, m) => format!("{h}h{}m{}{fraction}s", m % 60, seconds % 60),
    }
}

/// Splits `value` into its whole part and `.digits` of its last `precision` decimal digits,
/// trailing zeros (and an all-zero fraction) left out, as Go's `fmtFrac`.
fn go_fraction(value: u64, precision: u32) -> (u64, String) {
    if precision == 0 {
        return (value, String::new());
    }
    let scale = 10u64.pow(precision);
    let digits = format!("{:0width$}", value % scale, width = precision as usize);
    let digits = digits.trim_end_matches('0');
    let fraction = if digits.is_empty() {
        String::new()
    } else {
        format!(".{digits}")
    };
    (value / scale, fraction)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{DateTime, Utc};
    use serde_json::{json, Value};
    use tokio::time::{advance, Instant};

    use super::*;
    use crate::flowcontrol::classify::hash_flow_id;
    use crate::flowcontrol::shuffle::Dealer;
    use crate::flowcontrol::{Admission, FlowControlOptions, Rejection, WorkEstimate};
    use crate::request_info::{resolve, RequestInfo};
    use crate::user::UserInfo;

    /// A server of 1 seat: `work` (99 shares, 2 queues, hand 1, ByUser) gets it; a `Reject`
    /// catch-all and the exempt level come with it.
    fn engine(queue_length_limit: i64) -> FlowControl {
        let fc = FlowControl::new(FlowControlOptions {
            total_seats: 1,
            request_wait_limit: Duration::from_secs(60),
        });
        let everything = json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "clusterScope": true, "namespaces": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
        });
        let mut rules = everything;
        rules["subjects"] = json!([{"kind": "Group", "group": {"name": "system:authenticated"}}]);
        let schemas = vec![
            json!({"metadata": {"name": "work-fs", "uid": "uid-fs-work"},
            "spec": {"priorityLevelConfiguration": {"name": "work"}, "matchingPrecedence": 100,
                "distinguisherMethod": {"type": "ByUser"}, "rules": [rules]}}),
        ];
        let levels: Vec<Value> = vec![
            json!({"metadata": {"name": "exempt", "uid": "uid-pl-exempt"},
                "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}),
            json!({"metadata": {"name": "catch-all", "uid": "uid-pl-catch-all"},
                "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                    "lendablePercent": 0, "limitResponse": {"type": "Reject"}}}}),
            json!({"metadata": {"name": "work", "uid": "uid-pl-work"},
                "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 99,
                    "lendablePercent": 0, "limitResponse": {"type": "Queue", "queuing":
                        {"queues": 2, "handSize": 1, "queueLengthLimit": queue_length_limit}}}}}),
        ];
        let report = fc.update_config(&schemas, &levels);
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        fc
    }

    fn list_configmaps() -> RequestInfo {
        match resolve("GET", "/api/v1/namespaces/a/configmaps", "") {
            Ok(info) => info,
            Err(e) => panic!("resolve: {e}"),
        }
    }

    async fn admit(
        fc: &FlowControl,
        user: &str,
        groups: &[&str],
        estimate: WorkEstimate,
    ) -> Result<Admission, Rejection> {
        let info = Arc::new(list_configmaps());
        let user = Arc::new(UserInfo::new(
            user,
            groups.iter().map(|g| g.to_string()).collect(),
        ));
        let digest = RequestDigest {
            request_info: &info,
            user: &user,
            timeout: None,
            memo: None,
        };
        fc.admit(&digest, estimate).await
    }

    /// The queue `user`'s flow is dealt (hand size 1, so always this one).
    fn queue_of(user: &str) -> usize {
        let dealer = Dealer::new(2, 1).unwrap_or_else(|e| panic!("{e:?}"));
        dealer.deal(hash_flow_id("work-fs", user))[0]
    }

    fn wall(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .unwrap_or_else(|e| panic!("{e}"))
            .with_timezone(&Utc)
    }

    /// `alice` executes in `work`, `bea` waits behind her in the other queue (the names are chosen so that their flows hash to different queues), `root` executes
    /// in `exempt`; dumped 750 ms after alice arrived.
    struct Scene {
        fc: FlowControl,
        _alice: Admission,
        _root: Admission,
        bob: tokio::task::JoinHandle<Result<Admission, Rejection>>,
        clock: Clock,
    }

    async fn scene() -> Scene {
        assert_ne!(
            queue_of("alice"),
            queue_of("bea"),
            "pick users in distinct queues"
        );
        let fc = engine(10);
        let alice = admit(
            &fc,
            "alice",
            &["system:authenticated"],
            WorkEstimate::seats(1),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
        advance(Duration::from_millis(250)).await;
        let bob = {
            let fc = fc.clone();
            let estimate = WorkEstimate {
                initial_seats: 1,
                final_seats: 1,
                additional_latency: Duration::from_micros(1500),
            };
            tokio::spawn(
                async move { admit(&fc, "bea", &["system:authenticated"], estimate).await },
            )
        };
        tokio::task::yield_now().await;
        let root = admit(&fc, "root", &["system:masters"], WorkEstimate::seats(1))
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        advance(Duration::from_millis(500)).await;
        let clock = Clock {
            wall: wall("2026-11-22T10:00:00Z"),
            instant: Instant::now(),
        };
        Scene {
            fc,
            _alice: alice,
            _root: root,
            bob,
            clock,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn priority_levels_dump_as_kube() {
        let scene = scene().await;
        let expected = "\
PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, CancelledRequests
catch-all,         0,            true,   false,       0,               0,                 0,                  0,                0,                0
exempt,            0,            false,  false,       0,               1,                 1,                  0,                0,                0
work,              1,            false,  false,       1,               1,                 1,                  0,                0,                0
";
        assert_eq!(dump_priority_levels(&scene.fc), expected);
        scene.bob.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn queues_dump_as_kube() {
        let scene = scene().await;
        // alice's queue: 3 ms of seat-seconds charged at dispatch (kube's G); bob's queue
        // started at R = 0.25 (one seat busy for 250 ms) and holds his 3 ms + 1 seat x 1.5 ms.
        let mut rows = [
            "work,              {alice},      0,               1,                 1,          0.00300000ss,  0,               0,           0.00000000ss",
            "work,              {bob},      1,               0,                 0,          0.25000000ss,  1,               1,           0.00450000ss",
        ]
        .map(|row| {
            row.replace("{alice}", &queue_of("alice").to_string())
                .replace("{bob}", &queue_of("bea").to_string())
        });
        rows.sort();
        let expected = format!(
            "PriorityLevelName, Index,  PendingRequests, ExecutingRequests, SeatsInUse, NextDispatchR, InitialSeatsSum, MaxSeatsSum, TotalWorkSum\n{}\n{}\n",
            rows[0], rows[1]
        );
        assert_eq!(dump_queues(&scene.fc), expected);
        scene.bob.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn requests_dump_as_kube() {
        let scene = scene().await;
        let (alice, bob) = (queue_of("alice"), queue_of("bea"));
        let alice_row = format!("work,              work-fs,        {alice},          -1,                  alice,           2026-11-22T09:59:59.25Z, 1,            0,          0s,                2026-11-22T09:59:59.25Z");
        let bob_row = format!("work,              work-fs,        {bob},          0,                   bea,             2026-11-22T09:59:59.5Z,  1,            1,          1.5ms,             0001-01-01T00:00:00Z");
        let root_row = "exempt,            exempt,         -1,         -1,                  ,                2026-11-22T09:59:59.5Z,  1,            0,          0s,                2026-11-22T09:59:59.5Z";
        let (first, second) = if alice < bob {
            (alice_row, bob_row)
        } else {
            (bob_row, alice_row)
        };
        let expected = format!(
            "PriorityLevelName, FlowSchemaName, QueueIndex, RequestIndexInQueue, FlowDistingsher, ArriveTime,              InitialSeats, FinalSeats, AdditionalLatency, StartTime\n{root_row}\n{first}\n{second}\n"
        );
        assert_eq!(dump_requests_at(&scene.fc, false, scene.clock), expected);

        let detailed = dump_requests_at(&scene.fc, true, scene.clock);
        let lines: Vec<&str> = detailed.lines().collect();
        assert_eq!(lines.len(), 4, "{detailed}");
        assert!(
            lines[0].ends_with(", StartTime,               UserName, Verb,   APIPath,                         Namespace, Name,   APIVersion, Resource,   SubResource"),
            "{:?}",
            lines[0]
        );
        assert!(
            lines[1].ends_with("0s,                2026-11-22T09:59:59.5Z,  root,     list,   /api/v1/namespaces/a/configmaps, a,         ,       v1,         configmaps, "),
            "{:?}",
            lines[1]
        );
        let bob_line = if bob < alice { lines[2] } else { lines[3] };
        assert!(
            bob_line.starts_with("work,              work-fs,        "),
            "{bob_line}"
        );
        assert!(
            bob_line.ends_with("1.5ms,             0001-01-01T00:00:00Z,    bea,      list,   /api/v1/namespaces/a/configmaps, a,         ,       v1,         configmaps, "),
            "{bob_line}"
        );
        scene.bob.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn counters_and_idle_follow_dispatch_and_rejections() {
        // Queue length limit 1: alice executes, bob waits until his wait limit passes, and a
        // second request of bob's finds his queue full.
        let fc = engine(1);
        let alice = admit(
            &fc,
            "alice",
            &["system:authenticated"],
            WorkEstimate::seats(1),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
        // A 4 s timeout gives a 1 s wait limit.
        let waiter = {
            let fc = fc.clone();
            tokio::spawn(async move {
                let info = Arc::new(list_configmaps());
                let user = Arc::new(UserInfo::new(
                    "bob",
                    vec!["system:authenticated".to_owned()],
                ));
                let digest = RequestDigest {
                    request_info: &info,
                    user: &user,
                    timeout: Some(Duration::from_secs(4)),
                    memo: None,
                };
                fc.admit(&digest, WorkEstimate::seats(1)).await
            })
        };
        tokio::task::yield_now().await;
        let refused = admit(
            &fc,
            "bob",
            &["system:authenticated"],
            WorkEstimate::seats(1),
        )
        .await;
        assert!(refused.is_err());
        advance(Duration::from_secs(2)).await;
        let timed_out = waiter.await.unwrap_or_else(|e| panic!("{e}"));
        assert!(timed_out.is_err());
        drop(alice);
        let expected = "\
PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, CancelledRequests
catch-all,         0,            true,   false,       0,               0,                 0,                  0,                0,                0
exempt,            0,            true,   false,       0,               0,                 0,                  0,                0,                0
work,              0,            true,   false,       0,               0,                 1,                  2,                0,                1
";
        // The time-out is a rejection and a cancellation; kube never counts TimedoutRequests.
        assert_eq!(dump_priority_levels(&fc), expected);
        // Nothing waits or executes any more.
        assert_eq!(
            dump_requests(&fc, false),
            "PriorityLevelName, FlowSchemaName, QueueIndex, RequestIndexInQueue, FlowDistingsher, ArriveTime, InitialSeats, FinalSeats, AdditionalLatency, StartTime\n"
        );
    }

    #[test]
    fn tab_alignment_follows_go_column_blocks() {
        // Column 0 of the first two lines is one block (width 4); only the second line has a
        // column 1; the one-cell line ends the block, so the fourth line starts a new one.
        let text = "aaa\tb\nc\td\te\nx\nffff\tg\n";
        assert_eq!(tab_align(text, 2, 1), "aaa b\nc   d e\nx\nffff g\n");
        // The minimum width applies; the trailing cell is never padded.
        assert_eq!(tab_align("a,\tb\n", 8, 1), "a,      b\n");
        assert_eq!(tab_align("µs,\tx\n", 0, 1), "µs, x\n");
    }

    #[test]
    fn go_formats() {
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(go_duration(Duration::from_micros(250)), "250µs");
        assert_eq!(go_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(go_duration(Duration::from_millis(5)), "5ms");
        assert_eq!(go_duration(Duration::from_millis(2500)), "2.5s");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_millis(3_723_004)), "1h2m3.004s");
        assert_eq!(go_rfc3339_nano(None), "0001-01-01T00:00:00Z");
        assert_eq!(
            go_rfc3339_nano(Some(wall("2026-11-22T10:00:00Z"))),
            "2026-11-22T10:00:00Z"
        );
        assert_eq!(
            go_rfc3339_nano(Some(wall("2026-11-22T10:00:00.120Z"))),
            "2026-11-22T10:00:00.12Z"
        );
        assert_eq!(
            go_rfc3339_nano(Some(wall("2026-11-22T10:00:00.000000001Z"))),
            "2026-11-22T10:00:00.000000001Z"
        );
    }

    #[test]
    fn request_details_keep_kube_fields() {
        let info = match resolve(
            "PATCH",
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            "",
        ) {
            Ok(info) => Arc::new(info),
            Err(e) => panic!("{e}"),
        };
        let user = Arc::new(UserInfo::new("jane", vec![]));
        let details = RequestDetails::new(
            &RequestDigest {
                request_info: &info,
                user: &user,
                timeout: None,
                memo: None,
            },
            Some(Distinguisher::ByNamespace),
        );
        assert_eq!(details.user_name(), "jane");
        assert_eq!(details.flow_distinguisher(), "ns");
        assert_eq!(details.verb(), "patch");
        assert_eq!(
            details.path(),
            "/apis/apps/v1/namespaces/ns/deployments/d/scale"
        );
        assert_eq!(details.namespace(), "ns");
        assert_eq!(details.name(), "d");
        assert_eq!(details.api_version(), "apps/v1");
        assert_eq!(details.resource(), "deployments");
        assert_eq!(details.subresource(), "scale");
    }
}
