//! Prometheus metrics with kube-apiserver's names and labels, served at `/metrics`.

use std::sync::OnceLock;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};

/// The labels kube-apiserver puts on `apiserver_request_duration_seconds`.
const REQUEST_LABELS: &[&str] = &[
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];

/// Every metric kubegate exports.
pub struct Metrics {
    registry: Registry,
    pub requests: IntCounterVec,
    /// `apiserver_request_terminations_total`: requests kubegate ended itself.
    pub request_terminations: IntCounterVec,
    pub request_duration: HistogramVec,
    pub inflight: IntGaugeVec,
    pub long_running: IntGaugeVec,
    pub authentication_attempts: IntCounterVec,
    pub authentication_duration: HistogramVec,
    /// kube-aggregator's `aggregator_unavailable_apiservice{name}`: 1 while unavailable.
    pub unavailable_apiservice: IntGaugeVec,
    /// kube-aggregator's `aggregator_unavailable_apiservice_total{name,reason}`.
    pub unavailable_apiservice_total: IntCounterVec,
    /// Proxied requests per APIService and response code.
    pub proxy_requests: IntCounterVec,
    pub proxy_request_duration: HistogramVec,
    /// Failures to connect to an APIService's backend.
    pub proxy_connect_errors: IntCounterVec,
    /// Children that nearly every request touches, resolved on first use: a
    /// `with_label_values` lookup hashes the labels and takes the vector's lock.
    hot: HotChildren,
}

/// See [`Metrics::hot`].
#[derive(Default)]
struct HotChildren {
    /// `authentication_attempts` and `authentication_duration_seconds` per [`AUTHN_RESULTS`].
    authentication: [OnceLock<(IntCounter, Histogram)>; 3],
    /// `apiserver_current_inflight_requests{request_kind}`: readOnly, mutating.
    inflight: [OnceLock<IntGauge>; 2],
}

/// kube's `result` labels of the authentication metrics.
const AUTHN_RESULTS: [&str; 3] = ["success", "failure", "error"];

/// One finished request, as the metrics see it.
pub struct RequestLabels<'a> {
    pub verb: &'a str,
    pub dry_run: bool,
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub scope: &'a str,
}

impl Metrics {
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let mut total_labels = REQUEST_LABELS.to_vec();
        total_labels.push("code");
        let requests = IntCounterVec::new(
            Opts::new(
                "apiserver_request_total",
                "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            ),
            &total_labels,
        )?;
        let request_terminations = IntCounterVec::new(
            Opts::new(
                "apiserver_request_terminations_total",
                "[ALPHA] Number of requests which apiserver terminated in self-defense.",
            ),
            // The request labels but dry run, and the code.
            &total_labels
                .iter()
                .copied()
                .filter(|label| *label != "dry_run")
                .collect::<Vec<_>>(),
        )?;
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_request_duration_seconds",
                "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            )
            .buckets(vec![
                0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0,
                6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
            ]),
            REQUEST_LABELS,
        )?;
        let inflight = IntGaugeVec::new(
            Opts::new(
                "apiserver_current_inflight_requests",
                "[STABLE] Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
            ),
            &["request_kind"],
        )?;
        let long_running = IntGaugeVec::new(
            Opts::new(
                "apiserver_longrunning_requests",
                "[STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
            ),
            &["verb", "group", "version", "resource", "subresource", "scope", "component"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(request_terminations.clone()))?;
        registry.register(Box::new(request_duration.clone()))?;
        registry.register(Box::new(inflight.clone()))?;
        let authentication_attempts = IntCounterVec::new(
            Opts::new(
                "authentication_attempts",
                "[ALPHA] Counter of authenticated attempts.",
            ),
            &["result"],
        )?;
        let authentication_duration = HistogramVec::new(
            HistogramOpts::new(
                "authentication_duration_seconds",
                "[ALPHA] Authentication duration in seconds broken out by result.",
            )
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 15)?),
            &["result"],
        )?;
        registry.register(Box::new(long_running.clone()))?;
        registry.register(Box::new(authentication_attempts.clone()))?;
        registry.register(Box::new(authentication_duration.clone()))?;
        let unavailable_apiservice = IntGaugeVec::new(
            Opts::new(
                "aggregator_unavailable_apiservice",
                "[ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.",
            ),
            &["name"],
        )?;
        let unavailable_apiservice_total = IntCounterVec::new(
            Opts::new(
                "aggregator_unavailable_apiservice_total",
                "[ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService name and reason.",
            ),
            &["name", "reason"],
        )?;
        let proxy_requests = IntCounterVec::new(
            Opts::new(
                "kubegate_proxy_requests_total",
                "Requests proxied to APIService backends, by APIService and response code.",
            ),
            &["apiservice", "code"],
        )?;
        let proxy_request_duration = HistogramVec::new(
            HistogramOpts::new(
                "kubegate_proxy_request_duration_seconds",
                "Time to the response header of requests proxied to APIService backends.",
            )
            .buckets(prometheus::exponential_buckets(0.0005, 2.0, 16)?),
            &["apiservice"],
        )?;
        let proxy_connect_errors = IntCounterVec::new(
            Opts::new(
                "kubegate_proxy_upstream_connect_errors_total",
                "Failures to connect to an APIService's backend.",
            ),
            &["apiservice"],
        )?;
        registry.register(Box::new(unavailable_apiservice.clone()))?;
        registry.register(Box::new(unavailable_apiservice_total.clone()))?;
        registry.register(Box::new(proxy_requests.clone()))?;
        registry.register(Box::new(proxy_request_duration.clone()))?;
        registry.register(Box::new(proxy_connect_errors.clone()))?;
        // kube's `process_*` metrics (CPU, memory, file descriptors, start time).
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok(Metrics {
            registry,
            requests,
            request_terminations,
            request_duration,
            inflight,
            long_running,
            authentication_attempts,
            authentication_duration,
            unavailable_apiservice,
            unavailable_apiservice_total,
            proxy_requests,
            proxy_request_duration,
            proxy_connect_errors,
            hot: HotChildren::default(),
        })
    }

    /// Records one finished request; `terminated` when kubegate ended it itself (flow
    /// control's 429, the deadline's 504), as kube's `RecordRequestTermination` counts those.
    pub fn observe(&self, labels: &RequestLabels<'_>, code: u16, seconds: f64, terminated: bool) {
        let dry_run = if labels.dry_run { "All" } else { "" };
        // Every request passes here: the common codes need no formatting.
        let formatted;
        let code = match code {
            200 => "200",
            201 => "201",
            304 => "304",
            404 => "404",
            409 => "409",
            other => {
                formatted = other.to_string();
                formatted.as_str()
            }
        };
        let labels_with_code = [
            labels.verb,
            dry_run,
            labels.group,
            labels.version,
            labels.resource,
            labels.subresource,
            labels.scope,
            "apiserver",
            code,
        ];
        self.requests.with_label_values(&labels_with_code).inc();
        if terminated {
            // The same labels but dry run (the second).
            let mut termination = labels_with_code.to_vec();
            termination.remove(1);
            self.request_terminations
                .with_label_values(&termination)
                .inc();
        }
        // kube excludes long-running requests (WATCH, CONNECT) from the latency histogram.
        if labels.verb != "WATCH" && labels.verb != "CONNECT" {
            self.request_duration
                .with_label_values(&labels_with_code[..8])
                .observe(seconds);
        }
    }

    /// Records one authentication: `success`, `failure` or `error`, as kube labels them.
    pub fn observe_authentication(&self, result: &str, seconds: f64) {
        let Some(index) = AUTHN_RESULTS.iter().position(|r| *r == result) else {
            self.authentication_attempts
                .with_label_values(&[result])
                .inc();
            self.authentication_duration
                .with_label_values(&[result])
                .observe(seconds);
            return;
        };
        let (attempts, duration) = self.hot.authentication[index].get_or_init(|| {
            (
                self.authentication_attempts.with_label_values(&[result]),
                self.authentication_duration.with_label_values(&[result]),
            )
        });
        attempts.inc();
        duration.observe(seconds);
    }

    /// `apiserver_current_inflight_requests` for a read-only (get, list, watch) or a
    /// mutating request.
    pub fn inflight_gauge(&self, read_only: bool) -> IntGauge {
        let (index, kind) = if read_only {
            (0, "readOnly")
        } else {
            (1, "mutating")
        };
        self.hot.inflight[index]
            .get_or_init(|| self.inflight.with_label_values(&[kind]))
            .clone()
    }

    /// Adds a collector owned by another module (flow control's metrics).
    pub fn register(
        &self,
        collector: Box<dyn prometheus::core::Collector>,
    ) -> Result<(), prometheus::Error> {
        self.registry.register(collector)
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let encoder = prometheus::TextEncoder::new();
        if let Err(e) = encoder.encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        out
    }
}

/// kube's metric verb: upper case, with LIST/WATCH/APPLY distinguished.
pub fn metric_verb<'a>(verb: &str, method: &'a str) -> &'a str {
    match verb {
        "list" => "LIST",
        "watch" => "WATCH",
        "proxy" => "CONNECT",
        "get" | "create" | "update" | "patch" | "delete" | "deletecollection" => match method {
            "GET" | "HEAD" => "GET",
            other => other,
        },
        _ => method,
    }
}

/// kube's `apiserver_storage_objects{resource}`: the objects stored per resource, counted in
/// the watch cache when scraped (kube counts every minute). A resource served in several
/// versions, or under two names sharing its storage (events.k8s.io's events are core's), is
/// counted once, under its first name.
pub struct StorageObjects {
    registry: std::sync::Arc<kubegate_backends::registry::Registry>,
    /// The family's description; each scrape fills a fresh one (two scrapes at once must not
    /// reset each other's).
    template: IntGaugeVec,
}

impl StorageObjects {
    pub fn new(
        registry: std::sync::Arc<kubegate_backends::registry::Registry>,
    ) -> Result<StorageObjects, prometheus::Error> {
        Ok(StorageObjects {
            registry,
            template: Self::family()?,
        })
    }

    fn family() -> Result<IntGaugeVec, prometheus::Error> {
        IntGaugeVec::new(
            Opts::new(
                "apiserver_storage_objects",
                "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
            ),
            &["resource"],
        )
    }
}

impl prometheus::core::Collector for StorageObjects {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.template.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let Ok(objects) = Self::family() else {
            return Vec::new();
        };
        let mut counted = std::collections::HashSet::new();
        for def in self.registry.resources().iter() {
            let prefix = def.collection_prefix("");
            if counted.contains(&prefix) {
                continue;
            }
            let count = self.registry.cacher().count(&prefix);
            counted.insert(prefix);
            objects
                .with_label_values(&[def.group_resource().to_string().as_str()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        objects.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_kube_names_and_labels() {
        let m = Metrics::new().unwrap();
        m.observe(
            &RequestLabels {
                verb: "GET",
                dry_run: false,
                group: "",
                version: "v1",
                resource: "configmaps",
                subresource: "",
                scope: "resource",
            },
            200,
            0.01,
            false,
        );
        let labels = RequestLabels {
            verb: "LIST",
            dry_run: false,
            group: "",
            version: "v1",
            resource: "configmaps",
            subresource: "",
            scope: "namespace",
        };
        m.observe(&labels, 429, 0.001, true);
        let text = String::from_utf8(m.render()).unwrap();
        assert!(text.contains("apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 1"), "{text}");
        assert!(text.contains("apiserver_request_terminations_total{code=\"429\",component=\"apiserver\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 1"), "{text}");
        assert!(
            !text.contains("apiserver_request_terminations_total{code=\"200\""),
            "{text}"
        );
        assert!(
            text.contains("apiserver_request_duration_seconds_bucket"),
            "{text}"
        );
    }

    #[test]
    fn verbs_follow_kube() {
        assert_eq!(metric_verb("list", "GET"), "LIST");
        assert_eq!(metric_verb("watch", "GET"), "WATCH");
        assert_eq!(metric_verb("get", "GET"), "GET");
        assert_eq!(metric_verb("create", "POST"), "POST");
        assert_eq!(metric_verb("get", "HEAD"), "GET");
    }
}
