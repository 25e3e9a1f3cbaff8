//! A lower bound of kube's static cost estimate of a CEL rule, to refuse, when a CRD is
//! written, the rules kube refuses because they could never finish within the budget:
//! comprehensions (`all`, `exists`, `map`, `filter`...) nested over lists and maps the schema
//! does not bound, whose estimate exceeds kube's per-rule limit more than a hundredfold.
//!
//! kube (apiserver `cel` and apiextensions `validation.go`) costs every operation and sizes
//! every list and map from `maxItems`/`maxProperties`, or else from how many of its smallest
//! elements fit in a 3 MiB request. This counts one unit per expression node and per loop
//! iteration, with the same sizes, so its figure is never above kube's: a rule refused here is
//! refused by kube too ("exceeds budget by factor of more than 100x"). Rules nearer the limit
//! are left to kube's finer model, which kubegate does not have; nor does it have kube's
//! runtime budget (see the README).

use std::collections::HashMap;

use cel::common::ast::{Expr, IdedExpr};

use super::{field_schema, OLD_SELF, SELF};
use crate::machinery::schema::Schema;

/// kube's `StaticEstimatedCostLimit`: the most one rule may be estimated to cost.
pub const STATIC_ESTIMATED_COST_LIMIT: f64 = 10_000_000.0;

/// kube's `DefaultMaxRequestSizeBytes` (3 MiB), which bounds unbounded lists and maps.
const MAX_REQUEST_SIZE: f64 = 3.0 * 1024.0 * 1024.0;

/// kube's message for a rule whose estimate exceeds the limit more than a hundredfold.
pub const OVER_BUDGET: &str = "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

/// Whether `expression`, a rule on `schema` (`is_root` at a resource's root), is estimated
/// to cost more than a hundred times kube's per-rule limit.
pub fn far_over_budget(expression: &IdedExpr, schema: &Schema, is_root: bool) -> bool {
    let mut estimator = Estimator {
        schema,
        is_root,
        bound: HashMap::new(),
    };
    estimator.cost(expression, 0) > 100.0 * STATIC_ESTIMATED_COST_LIMIT
}

struct Estimator<'s> {
    schema: &'s Schema,
    is_root: bool,
    /// Comprehension variables in scope and the schema of what they range over.
    bound: HashMap<String, Option<&'s Schema>>,
}

impl<'s> Estimator<'s> {
    fn cost(&mut self, e: &IdedExpr, depth: usize) -> f64 {
        if depth > 64 {
            return 1.0;
        }
        match &e.expr {
            Expr::Comprehension(c) => {
                let range = self.cost(&c.iter_range, depth + 1);
                let (count, item) = self.range_of(&c.iter_range);
                let init = self.cost(&c.accu_init, depth + 1);
                // The loop body sees the iteration variable (and the accumulator, unknown).
                let saved: Vec<(String, Option<Option<&'s Schema>>)> =
                    [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)]
                        .into_iter()
                        .flatten()
                        .map(|name| (name.clone(), self.bound.get(name).copied()))
                        .collect();
                self.bound.insert(c.iter_var.clone(), item);
                if let Some(second) = &c.iter_var2 {
                    self.bound.insert(second.clone(), None);
                }
                self.bound.insert(c.accu_var.clone(), None);
                let body = self.cost(&c.loop_cond, depth + 1) + self.cost(&c.loop_step, depth + 1);
                let result = self.cost(&c.result, depth + 1);
                for (name, before) in saved {
                    match before {
                        Some(schema) => self.bound.insert(name, schema),
                        None => self.bound.remove(&name),
                    };
                }
                1.0 + range + init + count * body + result
            }
            Expr::Select(sel) => 1.0 + self.cost(&sel.operand, depth + 1),
            Expr::Call(call) => {
                let target = call
                    .target
                    .as_ref()
                    .map_or(0.0, |t| self.cost(t, depth + 1));
                let args: f64 = call.args.iter().map(|a| self.cost(a, depth + 1)).sum();
                1.0 + target + args
            }
            Expr::List(list) => {
                1.0 + list
                    .elements
                    .iter()
                    .map(|x| self.cost(x, depth + 1))
                    .sum::<f64>()
            }
            Expr::Map(map) => {
                let mut total = 1.0;
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                        total += self.cost(&m.key, depth + 1) + self.cost(&m.value, depth + 1);
                    }
                }
                total
            }
            _ => 1.0,
        }
    }

    /// How many times a comprehension over `range` iterates at most (as kube sizes it), and
    /// the schema of one element (a key, for a map) when known. An unknown range counts once.
    fn range_of(&self, range: &IdedExpr) -> (f64, Option<&'s Schema>) {
        let Some(schema) = self.resolve(range) else {
            return (1.0, None);
        };
        match schema.type_.as_str() {
            "array" => {
                let item = schema.items.as_deref();
                let count = match schema.max_items {
                    Some(max) => max.max(0) as f64,
                    // `(max request - 2) / (smallest element + 1)`.
                    None => ((MAX_REQUEST_SIZE - 2.0) / (min_size(item) + 1.0)).floor(),
                };
                (count, item)
            }
            "object" => match schema.additional_properties_schema() {
                Some(value) => {
                    let count = match schema.max_properties {
                        Some(max) => max.max(0) as f64,
                        // Key quotes, colon, comma and the smallest value.
                        None => ((MAX_REQUEST_SIZE - 2.0) / (min_size(Some(value)) + 6.0)).floor(),
                    };
                    (count, None)
                }
                None => (schema.properties.len().max(1) as f64, None),
            },
            _ => (1.0, None),
        }
    }

    /// The schema node `e` denotes: `self`, a comprehension variable, or fields of those.
    fn resolve(&self, e: &IdedExpr) -> Option<&'s Schema> {
        self.resolve_rooted(e).map(|(schema, _)| schema)
    }

    fn resolve_rooted(&self, e: &IdedExpr) -> Option<(&'s Schema, bool)> {
        match &e.expr {
            Expr::Ident(name) => match self.bound.get(name) {
                Some(bound) => bound.map(|s| (s, false)),
                None if name == SELF || name == OLD_SELF => Some((self.schema, self.is_root)),
                None => None,
            },
            Expr::Select(sel) if !sel.test => {
                let (parent, parent_root) = self.resolve_rooted(&sel.operand)?;
                field_schema(parent, parent_root, &sel.field)
            }
            _ => None,
        }
    }
}

/// kube's smallest serialized size of a value of `schema`.
fn min_size(schema: Option<&Schema>) -> f64 {
    match schema.map(|s| s.type_.as_str()) {
        Some("string") => 2.0,
        Some("boolean") => 4.0,
        Some("object" | "array") => 2.0,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn over(rule: &str, schema: serde_json::Value) -> bool {
        let schema = Schema::from_json(&schema);
        let program = cel::Program::compile(rule).expect("the rule compiles");
        far_over_budget(program.expression(), &schema, false)
    }

    #[test]
    fn nested_comprehensions_over_unbounded_lists_are_far_over_budget() {
        let unbounded = json!({"type": "object", "properties": {
            "l": {"type": "array", "items": {"type": "string"}}}});
        let bounded = json!({"type": "object", "properties": {
            "l": {"type": "array", "maxItems": 10, "items": {"type": "string"}}}});
        let triple = "self.l.all(x, self.l.all(y, self.l.all(z, x == y)))";
        let double = "self.l.all(x, self.l.exists(y, x == y))";
        assert!(over(triple, unbounded.clone()));
        assert!(over(double, unbounded.clone()));
        assert!(!over(triple, bounded.clone()));
        assert!(!over(double, bounded));
        // One pass over an unbounded list is within what this bound can tell apart.
        assert!(!over("self.l.all(x, x.size() < 10)", unbounded.clone()));
        assert!(!over("self.l.size() < 5", unbounded));
    }

    #[test]
    fn comprehension_variables_carry_their_element_schemas() {
        // Items that are objects holding unbounded lists: iterating the inner lists of every
        // item, twice nested, is as costly as iterating one unbounded list twice.
        let schema = json!({"type": "object", "properties": {
            "groups": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
                "members": {"type": "array", "items": {"type": "integer"}}}}}}});
        assert!(over(
            "self.groups.all(g, g.members.all(m, g.members.exists(n, m == n)))",
            schema.clone()
        ));
        assert!(!over("self.groups.all(g, g.members.size() > 0)", schema));
        let maps = json!({"type": "object", "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "string"}}}});
        assert!(over("self.m.all(k, self.m.all(j, k != j))", maps.clone()));
        let bounded_maps = json!({"type": "object", "properties": {
            "m": {"type": "object", "maxProperties": 5, "additionalProperties": {"type": "string"}}}});
        assert!(!over("self.m.all(k, self.m.all(j, k != j))", bounded_maps));
    }
}
