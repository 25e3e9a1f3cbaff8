//! Seat borrowing between priority levels (KEP-1040), as kube's `apf_controller.go`
//! (`updateBorrowingLocked`, `seatDemandStats`) and `conc_alloc.go`
//! (`computeConcurrencyAllocation`): every period each level's seat demand is integrated
//! (average, deviation, high watermark), smoothed, and the server's seats are re-divided so
//! busy levels borrow what idle ones may lend.

use std::sync::Arc;

use tokio::time::Instant;

use super::{lock, Level};

/// Decay of the smoothed demand per adjustment; a half-life of 5 minutes at 10 s periods.
const SEAT_DEMAND_SMOOTHING: f64 = 0.977;

/// The integral of a value over time (kube's `fairqueuing.Integrator`).
#[derive(Debug, Clone)]
pub struct Integrator {
    last: Instant,
    x: f64,
    elapsed: f64,
    integral_x: f64,
    integral_xx: f64,
    min: f64,
    max: f64,
}

/// What an [`Integrator`] saw since its last reset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntegratorResults {
    pub duration: f64,
    pub average: f64,
    pub deviation: f64,
    pub min: f64,
    pub max: f64,
}

impl Integrator {
    pub fn new(now: Instant) -> Self {
        Integrator {
            last: now,
            x: 0.0,
            elapsed: 0.0,
            integral_x: 0.0,
            integral_xx: 0.0,
            min: 0.0,
            max: 0.0,
        }
    }

    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.elapsed += dt;
        self.integral_x += self.x * dt;
        self.integral_xx += self.x * self.x * dt;
    }

    pub fn set(&mut self, x: f64, now: Instant) {
        self.advance(now);
        self.x = x;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    /// The results up to `now`, and a fresh start from `now`.
    pub fn reset(&mut self, now: Instant) -> IntegratorResults {
        self.advance(now);
        let (average, deviation) = if self.elapsed > 0.0 {
            let avg = self.integral_x / self.elapsed;
            let variance = self.integral_xx / self.elapsed - avg * avg;
            (
                avg,
                if variance >= 0.0 {
                    variance.sqrt()
                } else {
                    f64::NAN
                },
            )
        } else {
            (f64::NAN, f64::NAN)
        };
        let results = IntegratorResults {
            duration: self.elapsed,
            average,
            deviation,
            min: self.min,
            max: self.max,
        };
        self.elapsed = 0.0;
        self.integral_x = 0.0;
        self.integral_xx = 0.0;
        self.min = self.x;
        self.max = self.x;
        results
    }
}

/// A level's seat demand over the last periods (kube's `seatDemandStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeatDemandStats {
    pub average: f64,
    pub std_dev: f64,
    pub high_watermark: usize,
    pub smoothed: f64,
}

impl SeatDemandStats {
    pub fn update(&mut self, obs: IntegratorResults) {
        self.high_watermark = if obs.max.is_finite() && obs.max > 0.0 {
            obs.max.round() as usize
        } else {
            0
        };
        if obs.duration <= 0.0 {
            return;
        }
        let deviation = if obs.deviation.is_nan() {
            0.0
        } else {
            obs.deviation
        };
        self.average = obs.average;
        self.std_dev = deviation;
        let envelope = obs.average + deviation;
        self.smoothed = envelope
            .max(SEAT_DEMAND_SMOOTHING * self.smoothed + (1.0 - SEAT_DEMAND_SMOOTHING) * envelope);
    }
}

/// One class in the allocation problem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocItem {
    pub target: f64,
    pub lower_bound: f64,
    pub upper_bound: f64,
}

const MIN_TARGET: f64 = 0.001;
const EPSILON: f64 = 0.000_000_1;

/// kube's `computeConcurrencyAllocation`: allocations summing to `required_sum`, each within
/// its bounds and otherwise proportional to its target by one common factor (returned too).
pub fn compute_allocation(
    required_sum: usize,
    items: &[AllocItem],
) -> Result<(Vec<f64>, f64), String> {
    let required = required_sum as f64;
    let mut low_sum = 0.0;
    let mut high_sum = 0.0;
    let mut target_sum = 0.0;
    let (mut lb_min, mut lb_max) = (f32::MAX as f64, f64::MIN);
    let (mut ub_min, mut ub_max) = (f32::MAX as f64, f64::MIN);
    // (target, relative lower bound, relative upper bound)
    let mut relative = Vec::with_capacity(items.len());
    for (idx, item) in items.iter().enumerate() {
        if item.lower_bound < 0.0 {
            return Err(format!(
                "lower bound {idx} is {} but negative lower bounds are not allowed",
                item.lower_bound
            ));
        }
        if item.target < item.lower_bound {
            return Err(format!(
                "target {idx} is {}, which is below its lower bound of {}",
                item.target, item.lower_bound
            ));
        }
        if item.upper_bound < item.lower_bound {
            return Err(format!(
                "upper bound {idx} is {} but should not be less than the lower bound {}",
                item.upper_bound, item.lower_bound
            ));
        }
        let target = item.target.max(MIN_TARGET);
        low_sum += item.lower_bound;
        high_sum += item.upper_bound;
        target_sum += target;
        let (rl, ru) = (item.lower_bound / target, item.upper_bound / target);
        lb_min = lb_min.min(rl);
        lb_max = lb_max.max(rl);
        ub_min = ub_min.min(ru);
        ub_max = ub_max.max(ru);
        relative.push((target, rl, ru));
    }
    if lb_max > 1.0 {
        return Err(format!(
            "lbRange.max-1={}, which is impossible",
            lb_max - 1.0
        ));
    }
    if low_sum - required > EPSILON {
        return Err(format!("lower bounds sum to {low_sum}, which is higher than the required sum of {required_sum}"));
    }
    if required - high_sum > EPSILON {
        return Err(format!("upper bounds sum to {high_sum}, which is lower than the required sum of {required_sum}"));
    }
    if required_sum == 0 {
        return Ok((vec![0.0; items.len()], 0.0));
    }
    if low_sum - required > -EPSILON {
        return Ok((items.iter().map(|i| i.lower_bound).collect(), lb_min));
    }
    if required - high_sum > -EPSILON {
        return Ok((items.iter().map(|i| i.upper_bound).collect(), ub_max));
    }
    let mut fair = required / target_sum;
    if lb_max <= fair && fair <= ub_min {
        return Ok((relative.iter().map(|(t, _, _)| t * fair).collect(), fair));
    }
    // Some bounds matter: walk the bounds in increasing order, raising the factor.
    let mut bounds: Vec<(f64, usize, bool)> = Vec::with_capacity(items.len() * 2);
    for (idx, (_, rl, ru)) in relative.iter().enumerate() {
        bounds.push((*rl, idx, true));
        bounds.push((*ru, idx, false));
    }
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut sum_so_far = low_sum;
    fair = lb_min;
    let mut sensitive_target_sum = 0.0;
    let mut delta_target_sum = 0.0;
    let mut sensitive_classes: i64 = 0;
    let mut delta_classes: i64 = 0;
    let mut next = 0usize;
    while sum_so_far < required {
        let next_bound = loop {
            sensitive_target_sum += delta_target_sum;
            sensitive_classes += delta_classes;
            let Some(&(bound, idx, lower)) = bounds.get(next) else {
                return Err(
                    "impossible: ran out of bounds to consider in bound-constrained problem".into(),
                );
            };
            let target = relative[idx].0;
            if lower {
                delta_classes = 1;
                delta_target_sum = target;
            } else {
                delta_classes = -1;
                delta_target_sum = -target;
            }
            next += 1;
            if bound > fair {
                break bound;
            }
        };
        if sensitive_classes == 0 {
            fair = next_bound;
            continue;
        }
        let next_fair = fair + (required - sum_so_far) / sensitive_target_sum;
        if next_fair <= next_bound {
            fair = next_fair;
            break;
        }
        sum_so_far += (next_bound - fair) * sensitive_target_sum;
        fair = next_bound;
    }
    let allocs = items
        .iter()
        .zip(&relative)
        .map(|(item, (target, _, _))| item.lower_bound.max(item.upper_bound.min(fair * target)))
        .collect();
    Ok((allocs, fair))
}

/// kube's `updateBorrowingLocked`: folds each level's seat demand since the last call into
/// its statistics and sets every level's current concurrency limit.
pub(crate) fn update_borrowing(levels: &[Arc<Level>], nominal_cl_sum: usize, now: Instant) {
    struct Input {
        exempt: bool,
        min_cl: usize,
        nominal_cl: usize,
        max_cl: usize,
        current_cl: usize,
        high_watermark: usize,
        smoothed: f64,
    }
    let inputs: Vec<Input> = levels
        .iter()
        .map(|level| {
            let mut state = lock(&level.state);
            let obs = state.queues.demand.reset(now);
            state.demand_stats.update(obs);
            Input {
                exempt: state.spec.is_exempt(),
                min_cl: state.min_cl,
                nominal_cl: state.nominal_cl,
                max_cl: state.max_cl,
                current_cl: state.current_cl,
                high_watermark: state.demand_stats.high_watermark,
                smoothed: state.demand_stats.smoothed,
            }
        })
        .collect();

    let mut remaining = nominal_cl_sum as i64;
    let mut min_cl_sum = 0i64;
    let mut min_current_sum = 0i64;
    let mut items = Vec::new();
    let mut item_of = vec![None; inputs.len()];
    let mut min_current = vec![0usize; inputs.len()];
    for (i, input) in inputs.iter().enumerate() {
        if input.exempt {
            min_current[i] = input.min_cl.max(input.high_watermark);
            remaining -= min_current[i] as i64;
        } else {
            min_current[i] = input.min_cl.max(input.nominal_cl.min(input.high_watermark));
            item_of[i] = Some(items.len());
            items.push(AllocItem {
                lower_bound: min_current[i] as f64,
                upper_bound: input.max_cl as f64,
                target: (min_current[i] as f64).max(input.smoothed),
            });
            min_cl_sum += input.min_cl as i64;
            min_current_sum += min_current[i] as i64;
        }
    }
    if items.is_empty() && nominal_cl_sum > 0 {
        tracing::error!("flow control: no non-exempt priority levels to allocate seats to");
        return;
    }
    let mut share_frac = 0.0;
    let mut allocs = Vec::new();
    if remaining <= min_cl_sum {
    } else if remaining <= min_current_sum {
        share_frac = (remaining - min_cl_sum) as f64 / (min_current_sum - min_cl_sum) as f64;
    } else {
        allocs = match compute_allocation(nominal_cl_sum, &items) {
            Ok((allocs, _)) => allocs,
            Err(error) => {
                tracing::error!(%error, "flow control: unable to derive new concurrency limits");
                inputs
                    .iter()
                    .filter(|i| !i.exempt)
                    .map(|i| i.current_cl as f64)
                    .collect()
            }
        };
    }
    for (i, (level, input)) in levels.iter().zip(&inputs).enumerate() {
        let current = match item_of[i] {
            None => min_current[i],
            Some(_) if remaining <= min_cl_sum => input.min_cl,
            Some(_) if remaining <= min_current_sum => {
                input.min_cl
                    + ((min_current[i] - input.min_cl) as f64 * share_frac).round() as usize
            }
            Some(idx) => allocs
                .get(idx)
                .map_or(input.current_cl, |a| a.round().max(0.0) as usize),
        };
        let mut state = lock(&level.state);
        state.current_cl = current;
        state.queues.set_concurrency_limit(current, now);
    }
}
