//! kube's runtime cost limits on CEL rules: a rule's evaluation may cost at most
//! [`PER_CALL_LIMIT`] (cel-go's `CostLimit`, kube's `PerCallLimit`), and all the rules of one
//! object's validation at most [`RUNTIME_BUDGET`] (kube's `RuntimeCELCostBudget`), so a rule
//! that iterates a large object cannot take the server's CPU for long.
//!
//! The interpreter (cel-rust) has no cost tracking of its own, so a rule's expression is
//! rewritten once, when it is compiled: the per-iteration part of every comprehension (the
//! predicate of `all`/`exists`, the element of `map`, the guard of `filter`, otherwise the
//! whole step) is wrapped in a call to [`METER`], which charges the iteration's node count to
//! the evaluation's meter and fails once the limit is passed (and `all`/`exists`, which defer
//! their steps' errors, check it in their loop condition too). The rewrite keeps the shapes the
//! interpreter recognises (`@result && x`, `@result + [x]`), so error absorption and its
//! in-place list building are unchanged. Each node costs one unit, literals, `&&`, `||` and
//! `?:` none and a conditional only its cheaper branch, as cel-go charges; cel-go also charges
//! more for list and map literals and by the size of strings and lists its functions work on,
//! so this count is a lower bound of kube's: a rule refused here is refused by kube, while the
//! work a rule may do stays bounded.

use std::cell::Cell;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelInt, DYN_TYPE, INT_TYPE};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{take, Args, Returns};

/// kube's `PerCallLimit`: what one rule's evaluation may cost.
pub(super) const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube's `RuntimeCELCostBudget`: what all the rules of one object's validation may cost.
pub(super) const RUNTIME_BUDGET: u64 = 10_000_000;
/// cel-go's error when an evaluation passes its cost limit.
pub(super) const LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// The metering function the rewrite inserts: `@cost(units, value)` charges `units` and is
/// `value`. Its name cannot be written in a rule (identifiers do not start with `@`).
const METER: &str = "@cost";
/// Node ids for the inserted nodes, far above any the parser gives.
const FIRST_ID: u64 = 1 << 48;

thread_local! {
    /// The running evaluation's meter: units spent and the most it may spend. Evaluations are
    /// synchronous, so one per thread is enough.
    static SPENT: Cell<(u64, u64)> = const { Cell::new((0, u64::MAX)) };
}

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        METER,
        "kubegate_cost_int_dyn",
        vec![INT_TYPE, DYN_TYPE],
        charge,
    )
}

fn charge<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [units, value] = take(args)?;
    let units = units
        .downcast_ref::<CelInt>()
        .map_or(0, |i| u64::try_from(*i.inner()).unwrap_or(0));
    let over = SPENT.with(|meter| {
        let (spent, limit) = meter.get();
        let spent = spent.saturating_add(units);
        meter.set((spent, limit));
        spent > limit
    });
    if over {
        return Err(ExecutionError::function_error(METER, LIMIT_EXCEEDED));
    }
    Ok(value)
}

/// A rule's expression with its comprehensions metered, and what evaluating it costs besides
/// their iterations.
#[derive(Debug)]
pub(super) struct Metered {
    pub(super) expression: IdedExpr,
    fixed: u64,
}

impl Metered {
    pub(super) fn of(expression: &IdedExpr) -> Metered {
        let mut rewrite = Rewrite { next_id: FIRST_ID };
        let mut expression = expression.clone();
        rewrite.expr(&mut expression);
        Metered {
            fixed: units_outside_loops(&expression),
            expression,
        }
    }

    /// Runs `evaluate` with a meter allowing `limit` units; returns its result and what it
    /// spent (more than `limit` when it was cut short or went over).
    pub(super) fn run<T>(&self, limit: u64, evaluate: impl FnOnce(&IdedExpr) -> T) -> (T, u64) {
        SPENT.with(|meter| meter.set((self.fixed, limit)));
        let result = evaluate(&self.expression);
        let spent = SPENT.with(|meter| {
            let (spent, _) = meter.get();
            meter.set((0, u64::MAX));
            spent
        });
        (result, spent)
    }
}

/// Rewrites comprehensions so that each iteration is charged.
struct Rewrite {
    next_id: u64,
}

impl Rewrite {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// `inner` wrapped as `@cost(units, inner)`.
    fn metered(&mut self, units: u64, inner: IdedExpr) -> IdedExpr {
        let units = IdedExpr {
            id: self.id(),
            expr: Expr::Literal(LiteralValue::Int(CelInt::from(
                i64::try_from(units).unwrap_or(i64::MAX),
            ))),
        };
        IdedExpr {
            id: self.id(),
            expr: Expr::Call(cel::common::ast::CallExpr {
                func_name: METER.to_string(),
                target: None,
                args: vec![units, inner],
            }),
        }
    }

    fn expr(&mut self, e: &mut IdedExpr) {
        match &mut e.expr {
            Expr::Call(call) => {
                if let Some(target) = &mut call.target {
                    self.expr(target);
                }
                call.args.iter_mut().for_each(|a| self.expr(a));
            }
            Expr::Comprehension(c) => {
                for part in [&mut c.iter_range, &mut c.accu_init, &mut c.result] {
                    self.expr(part);
                }
                self.expr(&mut c.loop_cond);
                self.expr(&mut c.loop_step);
                let units = units_per_iteration(c);
                self.meter_step(c, units);
            }
            Expr::List(list) => list.elements.iter_mut().for_each(|x| self.expr(x)),
            Expr::Map(map) => {
                for entry in &mut map.entries {
                    if let EntryExpr::MapEntry(m) = &mut entry.expr {
                        self.expr(&mut m.key);
                        self.expr(&mut m.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &mut s.entries {
                    if let EntryExpr::StructField(f) = &mut entry.expr {
                        self.expr(&mut f.value);
                    }
                }
            }
            Expr::Select(sel) => self.expr(&mut sel.operand),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    /// Wraps the part of the step evaluated on every iteration, keeping the step's shape.
    fn meter_step(&mut self, c: &mut ComprehensionExpr, units: u64) {
        let accu = c.accu_var.clone();
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if *name == accu);
        let step = &mut c.loop_step;
        // `@result && x`, `@result || x` (all, exists): meter `x`.
        if let Expr::Call(call) = &mut step.expr {
            let folds = call.target.is_none()
                && matches!(call.func_name.as_str(), "_&&_" | "_||_")
                && call.args.len() == 2
                && is_accu(&call.args[0]);
            if folds {
                let x = std::mem::take(&mut call.args[1]);
                call.args[1] = self.metered(units, x);
                // The step's errors are deferred (a later element may still decide), so the
                // loop condition checks the meter too: a loop past the limit stops at once.
                let cond = std::mem::take(&mut c.loop_cond);
                c.loop_cond = self.metered(0, cond);
                return;
            }
            // `@result + [x]` (map): meter `x`, keeping the appended list literal.
            let appends = call.target.is_none()
                && call.func_name == "_+_"
                && call.args.len() == 2
                && is_accu(&call.args[0]);
            if appends {
                if let Expr::List(list) = &mut call.args[1].expr {
                    if let Some(x) = list.elements.first_mut() {
                        let inner = std::mem::take(x);
                        *x = self.metered(units, inner);
                        return;
                    }
                }
            }
            // `guard ? ... : @result` (filter, map with a filter, exists_one): meter the guard.
            let guarded = call.target.is_none()
                && call.func_name == "_?_:_"
                && call.args.len() == 3
                && is_accu(&call.args[2]);
            if guarded {
                let guard = std::mem::take(&mut call.args[0]);
                call.args[0] = self.metered(units, guard);
                return;
            }
        }
        let whole = std::mem::take(step);
        *step = self.metered(units, whole);
    }
}

/// What one iteration of `c` costs: the nodes of its condition and step, nested
/// comprehensions' iterations aside (they are charged by their own meters).
fn units_per_iteration(c: &ComprehensionExpr) -> u64 {
    units_outside_loops(&c.loop_cond) + units_outside_loops(&c.loop_step)
}

/// The nodes of `e` evaluated once (literals cost nothing), nested comprehensions counted
/// only for their range, initial value and result.
fn units_outside_loops(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Literal(_) | Expr::Unspecified => 0,
        // The metering calls themselves are free.
        Expr::Call(call) if call.func_name == METER => {
            call.args.get(1).map_or(0, units_outside_loops)
        }
        // cel-go charges nothing for `&&`, `||` and `?:` themselves, and only the branch a
        // conditional takes: the cheaper one is counted.
        Expr::Call(call) if matches!(call.func_name.as_str(), "_&&_" | "_||_") => {
            call.args.iter().map(units_outside_loops).sum::<u64>()
        }
        Expr::Call(call) if call.func_name == "_?_:_" && call.args.len() == 3 => {
            units_outside_loops(&call.args[0])
                + units_outside_loops(&call.args[1]).min(units_outside_loops(&call.args[2]))
        }
        Expr::Call(call) => {
            1 + call.target.as_deref().map_or(0, units_outside_loops)
                + call.args.iter().map(units_outside_loops).sum::<u64>()
        }
        Expr::Comprehension(c) => {
            1 + units_outside_loops(&c.iter_range)
                + units_outside_loops(&c.accu_init)
                + units_outside_loops(&c.result)
        }
        Expr::List(list) => 1 + list.elements.iter().map(units_outside_loops).sum::<u64>(),
        Expr::Map(map) => {
            1 + map
                .entries
                .iter()
                .map(|entry| match &entry.expr {
                    EntryExpr::MapEntry(m) => {
                        units_outside_loops(&m.key) + units_outside_loops(&m.value)
                    }
                    EntryExpr::StructField(f) => units_outside_loops(&f.value),
                })
                .sum::<u64>()
        }
        Expr::Struct(s) => {
            1 + s
                .entries
                .iter()
                .map(|entry| match &entry.expr {
                    EntryExpr::StructField(f) => units_outside_loops(&f.value),
                    EntryExpr::MapEntry(m) => {
                        units_outside_loops(&m.key) + units_outside_loops(&m.value)
                    }
                })
                .sum::<u64>()
        }
        Expr::Select(sel) => 1 + units_outside_loops(&sel.operand),
        Expr::Ident(_) => 1,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cel::{Context, Value};

    use super::*;

    fn env() -> Arc<Env> {
        let mut env = Env::stdlib();
        register(&mut env).unwrap();
        Arc::new(env)
    }

    /// Evaluates `rule` with `n` bound to `[0, ..., n)`, metered with `limit`.
    fn run(rule: &str, n: i64, limit: u64) -> (Result<Value, ExecutionError>, u64) {
        let env = env();
        let program = env.compile(rule).unwrap();
        let metered = Metered::of(program.expression());
        let mut context = Context::with_env(Arc::clone(&env));
        context
            .add_variable("l", (0..n).collect::<Vec<i64>>())
            .unwrap();
        metered.run(limit, |e| Value::resolve(e, &context))
    }

    #[test]
    fn iterations_are_charged_and_the_limit_stops_them() {
        let (result, spent) = run("l.all(x, x >= 0)", 100, u64::MAX);
        assert_eq!(result, Ok(Value::Bool(true)));
        assert!((100..2_000).contains(&spent), "{spent}");
        // Nested: n² iterations.
        let (result, spent) = run("l.all(x, l.exists(y, y == x))", 300, u64::MAX);
        assert_eq!(result, Ok(Value::Bool(true)));
        assert!(spent > 300 * 300 / 2, "{spent}");
        // Over the limit: cut short with cel-go's error.
        let (result, spent) = run("l.all(x, l.all(y, y >= 0))", 2_000, 10_000);
        assert!(spent > 10_000, "{spent}");
        let error = result.expect_err("over the limit");
        assert!(error.to_string().contains(LIMIT_EXCEEDED), "{error}");
    }

    #[test]
    fn the_rewrite_keeps_what_rules_mean() {
        for (rule, want) in [
            ("l.map(x, x * 2) == [0, 2, 4]", true),
            ("l.filter(x, x > 0) == [1, 2]", true),
            ("l.exists_one(x, x == 1)", true),
            ("l.exists(x, x == 5)", false),
            ("l.map(x, x > 0, x) == [1, 2]", true),
            // An error beside a deciding value is absorbed, as before.
            ("l.exists(x, x == 0 || 1 / (x - x) == 1)", true),
        ] {
            let (result, _) = run(rule, 3, u64::MAX);
            assert_eq!(result, Ok(Value::Bool(want)), "{rule}");
        }
    }
}
