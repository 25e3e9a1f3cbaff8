//! `/healthz`, `/livez` and `/readyz` as kube-apiserver serves them: named checks, `?verbose`
//! listings (`[+]ping ok`), `?exclude=<check>`, per-check paths (`/readyz/ping`), and
//! `shutdown` failing readiness while the server drains.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A named check; `Err` carries the reason, which is only shown in logs.
pub type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The registered checks of the three endpoints.
pub struct Health {
    live: Vec<(String, CheckFn)>,
    /// Checks of `/readyz` alone, listed after the live ones.
    ready: Vec<(String, CheckFn)>,
    pub shutting_down: Arc<AtomicBool>,
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
        }
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
            match f() {
                Ok(()) => lines.push(format!("[+]{name} ok")),
                Err(reason) => {
                    tracing::warn!(check = %name, %reason, "health check failed");
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
