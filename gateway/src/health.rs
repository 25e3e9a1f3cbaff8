//! `/healthz`, `/livez` and `/readyz` as kube-apiserver serves them: named checks, `?verbose`
//! listings (`[+]ping ok`), `?exclude=<check>`, per-check paths (`/readyz/ping`), and
//! `shutdown` failing readiness while the server drains; and the component SLI metrics those
//! checks feed, served at `/metrics/slis` (kube's `kubernetes_healthcheck` and
//! `kubernetes_healthchecks_total`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Opts, Registry};

/// A named check; `Err` carries the reason, which is only shown in logs.
pub type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The registered checks of the three endpoints.
pub struct Health {
    live: Vec<(String, CheckFn)>,
    /// Checks of `/readyz` alone, listed after the live ones.
    ready: Vec<(String, CheckFn)>,
    pub shutting_down: Arc<AtomicBool>,
    slis: Slis,
}

/// kube's component SLI metrics (`component-base/metrics/prometheus/slis`), in a registry of
/// their own as kube serves them apart from `/metrics`.
struct Slis {
    registry: Registry,
    /// `kubernetes_healthcheck{name, type}`: 1 when the check last passed, 0 when it failed.
    last: IntGaugeVec,
    /// `kubernetes_healthchecks_total{name, status, type}`.
    total: IntCounterVec,
}

impl Slis {
    fn new() -> Slis {
        let registry = Registry::new();
        let last = IntGaugeVec::new(
            Opts::new(
                "kubernetes_healthcheck",
                "[STABLE] This metric records the result of a single healthcheck.",
            ),
            &["name", "type"],
        )
        .expect("valid metric");
        let total = IntCounterVec::new(
            Opts::new(
                "kubernetes_healthchecks_total",
                "[STABLE] This metric records the results of all healthcheck.",
            ),
            &["name", "type", "status"],
        )
        .expect("valid metric");
        for metric in [
            Box::new(last.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(total.clone()),
        ] {
            if let Err(e) = registry.register(metric) {
                tracing::warn!(error = %e, "registering the SLI metrics");
            }
        }
        Slis {
            registry,
            last,
            total,
        }
    }

    /// kube's `ObserveHealthcheck`.
    fn observe(&self, name: &str, endpoint: &str, passed: bool) {
        self.last
            .with_label_values(&[name, endpoint])
            .set(i64::from(passed));
        let status = if passed { "success" } else { "error" };
        self.total
            .with_label_values(&[name, endpoint, status])
            .inc();
    }
}

/// A health response: status code and plain-text body.
pub struct HealthResponse {
    pub status: u16,
    pub body: String,
}

impl Health {
    pub fn new() -> Health {
        let ok: CheckFn = Arc::new(|| Ok(()));
        Health {
            live: vec![("ping".into(), ok.clone()), ("log".into(), ok)],
            ready: Vec::new(),
            shutting_down: Arc::new(AtomicBool::new(false)),
            slis: Slis::new(),
        }
    }

    /// `/metrics/slis` in Prometheus' text format.
    pub fn render_slis(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let encoder = prometheus::TextEncoder::new();
        if let Err(e) = encoder.encode(&self.slis.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "encoding the SLI metrics");
        }
        out
    }

    /// Adds a check to `/livez`, `/readyz` and `/healthz`.
    pub fn add_live(&mut self, name: &str, check: CheckFn) {
        self.live.push((name.into(), check));
    }

    /// Adds a check to `/readyz` only (kube's `etcd-readiness`).
    pub fn add_ready(&mut self, name: &str, check: CheckFn) {
        self.ready.push((name.into(), check));
    }

    fn checks_for(&self, endpoint: &str) -> Vec<(String, CheckFn)> {
        let mut checks = self.live.clone();
        if endpoint == "readyz" {
            checks.extend(self.ready.iter().cloned());
            let flag = self.shutting_down.clone();
            checks.push((
                "shutdown".into(),
                Arc::new(move || {
                    if flag.load(Ordering::Relaxed) {
                        Err("process is shutting down".into())
                    } else {
                        Ok(())
                    }
                }),
            ));
        }
        checks
    }

    /// Serves `/<endpoint>` or `/<endpoint>/<check>`; None if the path is not a health path.
    pub fn serve(&self, path: &str, query: &[(String, String)]) -> Option<HealthResponse> {
        let trimmed = path.trim_start_matches('/');
        let (endpoint, check) = match trimmed.split_once('/') {
            Some((e, c)) => (e, Some(c)),
            None => (trimmed, None),
        };
        if !["healthz", "livez", "readyz"].contains(&endpoint) {
            return None;
        }
        let checks = self.checks_for(endpoint);
        if let Some(name) = check {
            let (_, f) = checks.iter().find(|(n, _)| n == name)?;
            return Some(match f() {
                Ok(()) => HealthResponse {
                    status: 200,
                    body: "ok".into(),
                },
                Err(reason) => {
                    tracing::warn!(check = name, %reason, "health check failed");
                    HealthResponse {
                        status: 500,
                        body: format!("internal server error: {name} check failed\n"),
                    }
                }
            });
        }
        let verbose = query.iter().any(|(k, _)| k == "verbose");
        let excluded: Vec<&str> = query
            .iter()
            .filter(|(k, _)| k == "exclude")
            .map(|(_, v)| v.as_str())
            .collect();
        let mut lines = Vec::new();
        let mut failed = false;
        for (name, f) in &checks {
            if excluded.contains(&name.as_str()) {
                lines.push(format!("[+]{name} excluded: ok"));
                continue;
            }
            // Each check of an endpoint's listing counts towards its SLIs (kube's root
            // handler observes them; the per-check paths do not).
            match f() {
                Ok(()) => {
                    self.slis.observe(name, endpoint, true);
                    lines.push(format!("[+]{name} ok"));
                }
                Err(reason) => {
                    tracing::warn!(check = %name, %reason, "health check failed");
                    self.slis.observe(name, endpoint, false);
                    failed = true;
                    lines.push(format!("[-]{name} failed: reason withheld"));
                }
            }
        }
        // kube lists the exclusions that matched no check, sorted, each quoted.
        let mut unmatched: Vec<&str> = excluded
            .iter()
            .copied()
            .filter(|e| !checks.iter().any(|(name, _)| name.as_str() == *e))
            .collect();
        unmatched.sort_unstable();
        unmatched.dedup();
        if !unmatched.is_empty() {
            let quoted: Vec<String> = unmatched
                .iter()
                .map(|e| kubegate_policy::quote::go_quote(e))
                .collect();
            lines.push(format!(
                "warn: some health checks cannot be excluded: no matches for {}",
                quoted.join(",")
            ));
        }
        if failed {
            return Some(HealthResponse {
                status: 500,
                body: format!("{}\n{endpoint} check failed\n", lines.join("\n")),
            });
        }
        let body = if verbose {
            format!("{}\n{endpoint} check passed\n", lines.join("\n"))
        } else {
            "ok".into()
        };
        Some(HealthResponse { status: 200, body })
    }
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn listings_feed_the_sli_metrics_and_single_checks_do_not() {
        let mut h = Health::new();
        h.add_ready("storage", Arc::new(|| Err("down".into())));
        h.serve("/readyz", &q(&[("exclude", "log")])).unwrap();
        h.serve("/readyz", &[]).unwrap();
        h.serve("/livez", &[]).unwrap();
        h.serve("/readyz/ping", &[]).unwrap();
        let text = String::from_utf8(h.render_slis()).unwrap();
        for line in [
            "# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.",
            "# TYPE kubernetes_healthcheck gauge",
            "kubernetes_healthcheck{name=\"storage\",type=\"readyz\"} 0",
            "kubernetes_healthcheck{name=\"ping\",type=\"livez\"} 1",
            "# TYPE kubernetes_healthchecks_total counter",
            "kubernetes_healthchecks_total{name=\"ping\",status=\"success\",type=\"readyz\"} 2",
            "kubernetes_healthchecks_total{name=\"storage\",status=\"error\",type=\"readyz\"} 2",
            // Excluded once: counted once.
            "kubernetes_healthchecks_total{name=\"log\",status=\"success\",type=\"readyz\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn verbose_lists_checks_and_failures_are_500() {
        let mut h = Health::new();
        h.add_live("storage", Arc::new(|| Err("down".into())));
        let r = Health::new()
            .serve("/livez", &q(&[("verbose", "")]))
            .unwrap();
        assert_eq!(r.status, 200);
        assert!(r.body.contains("[+]ping ok"), "{}", r.body);
        assert!(r.body.ends_with("livez check passed\n"));
        let r = h.serve("/readyz", &q(&[("verbose", "")])).unwrap();
        assert_eq!(r.status, 500);
        assert!(
            r.body.contains("[-]storage failed: reason withheld"),
            "{}",
            r.body
        );
        let r = h.serve("/readyz", &q(&[("exclude", "storage")])).unwrap();
        assert_eq!(r.status, 200);
        // Exclusions that match no check are named, sorted and once, as kube's warn line.
        let r = h
            .serve(
                "/readyz",
                &q(&[
                    ("exclude", "storage"),
                    ("exclude", "nosuch"),
                    ("exclude", "etcd"),
                    ("exclude", "nosuch"),
                    ("verbose", ""),
                ]),
            )
            .unwrap();
        assert_eq!(r.status, 200);
        assert!(
            r.body.contains("[+]storage excluded: ok\n")
                && r.body.ends_with(
                    "ok\nwarn: some health checks cannot be excluded: no matches for \"etcd\",\"nosuch\"\nreadyz check passed\n"
                ),
            "{}",
            r.body
        );
        assert_eq!(h.serve("/readyz/ping", &[]).unwrap().body, "ok");
        assert_eq!(h.serve("/readyz/storage", &[]).unwrap().status, 500);
        assert!(h.serve("/readyz/nope", &[]).is_none());
        assert!(h.serve("/version", &[]).is_none());
    }

    #[test]
    fn readiness_checks_are_listed_after_the_live_ones_on_readyz_alone() {
        let mut h = Health::new();
        h.add_live("etcd", Arc::new(|| Ok(())));
        h.add_ready("etcd-readiness", Arc::new(|| Err("down".into())));
        let r = h.serve("/readyz", &q(&[("verbose", "")])).unwrap();
        assert_eq!(r.status, 500);
        let lines: Vec<&str> = r.body.lines().take(5).collect();
        assert_eq!(
            lines,
            [
                "[+]ping ok",
                "[+]log ok",
                "[+]etcd ok",
                "[-]etcd-readiness failed: reason withheld",
                "[+]shutdown ok"
            ]
        );
        assert_eq!(h.serve("/readyz/etcd-readiness", &[]).unwrap().status, 500);
        assert_eq!(h.serve("/livez", &[]).unwrap().status, 200);
        assert!(h.serve("/livez/etcd-readiness", &[]).is_none());
    }

    #[test]
    fn shutdown_fails_readiness_only() {
        let h = Health::new();
        h.shutting_down.store(true, Ordering::Relaxed);
        assert_eq!(h.serve("/readyz", &[]).unwrap().status, 500);
        assert_eq!(h.serve("/livez", &[]).unwrap().status, 200);
    }
}
