//! The HTTPS transport of CRD conversion webhooks (`spec.conversion.webhook.clientConfig`):
//! a `ConversionReview` is POSTed to the `url`, or to the `service` resolved as an
//! APIService's is (a ready endpoint of kubegate's own Endpoints or EndpointSlices, the
//! ExternalName host, or cluster DNS), with the TLS name `<name>.<namespace>.svc` verified
//! against the `caBundle` (the system roots without one). kube presents no client
//! certificate to conversion webhooks by default, and neither does kubegate. Building and
//! checking the review is the backends crate's (`core::crd_conversion`); every review is
//! counted in kube's conversion webhook metrics ([`ConversionMetrics`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use base64::Engine;
use kubegate_backends::core::crd_conversion::{
    ConversionTransport, ConversionTransports, ReviewOutcome,
};
use kubegate_backends::registry::Registry;
use kubegate_policy::https::{
    error_chain, https_client, read_body_capped, root_store_from_pem, TlsOptions,
};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use serde_json::Value;

use crate::aggregator::apiservice::Target;
use crate::aggregator::availability::url_host;
use crate::aggregator::resolve::{resolve, Resolution};
use crate::aggregator::CachedObjects;

/// How long one review may take (kube's webhook client default).
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read: a review carries at most 100 objects of at most ~1.5 MiB each.
const MAX_ANSWER_BYTES: usize = 160 << 20;

/// kube's conversion webhook metrics (apiextensions-apiserver's `conversion/metrics.go`).
pub struct ConversionMetrics {
    /// `apiserver_crd_conversion_webhook_duration_seconds{crd_name,from_version,to_version,succeeded}`.
    crd_duration: HistogramVec,
    /// `apiserver_conversion_webhook_request_total{result,failure_type}`.
    requests: IntCounterVec,
    /// `apiserver_conversion_webhook_duration_seconds{result,failure_type}`.
    duration: HistogramVec,
}

impl ConversionMetrics {
    pub fn new() -> Result<ConversionMetrics, prometheus::Error> {
        Ok(ConversionMetrics {
            crd_duration: HistogramVec::new(
                HistogramOpts::new(
                    "apiserver_crd_conversion_webhook_duration_seconds",
                    "CRD webhook conversion duration in seconds",
                )
                .buckets(prometheus::exponential_buckets(0.001, 2.0, 15)?),
                &["crd_name", "from_version", "to_version", "succeeded"],
            )?,
            requests: IntCounterVec::new(
                Opts::new(
                    "apiserver_conversion_webhook_request_total",
                    "Counter for conversion webhook requests with success/failure and failure error type",
                ),
                &["result", "failure_type"],
            )?,
            duration: HistogramVec::new(
                HistogramOpts::new(
                    "apiserver_conversion_webhook_duration_seconds",
                    "Conversion webhook request latency",
                )
                .buckets(vec![
                    0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 45.0,
                    60.0,
                ]),
                &["result", "failure_type"],
            )?,
        })
    }

    /// Adds the metrics to the server's `/metrics`.
    pub fn register(&self, metrics: &crate::metrics::Metrics) -> Result<(), prometheus::Error> {
        metrics.register(Box::new(self.crd_duration.clone()))?;
        metrics.register(Box::new(self.requests.clone()))?;
        metrics.register(Box::new(self.duration.clone()))
    }

    fn observe(&self, crd_name: &str, outcome: &ReviewOutcome<'_>) {
        let seconds = outcome.elapsed.as_secs_f64();
        let (result, failure_type) = match outcome.failure {
            None => ("success", ""),
            Some(failure) => ("failure", failure),
        };
        self.requests
            .with_label_values(&[result, failure_type])
            .inc();
        self.duration
            .with_label_values(&[result, failure_type])
            .observe(seconds);
        let succeeded = if outcome.failure.is_none() {
            "true"
        } else {
            "false"
        };
        self.crd_duration
            .with_label_values(&[
                crd_name,
                outcome.from_version,
                outcome.to_version,
                succeeded,
            ])
            .observe(seconds);
    }
}

/// Makes the transports of the CRDs' webhooks. It holds the registry weakly: the registry
/// holds the strategies that hold the transports.
pub struct WebhookTransports {
    pub registry: Weak<Registry>,
    pub resolution: Resolution,
    pub metrics: Option<Arc<ConversionMetrics>>,
}

impl ConversionTransports for WebhookTransports {
    fn transport(
        &self,
        crd_name: &str,
        client_config: &Value,
    ) -> Result<Arc<dyn ConversionTransport>, String> {
        let ca_pem = match client_config.get("caBundle").and_then(Value::as_str) {
            Some(bundle) if !bundle.is_empty() => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(bundle)
                    .map_err(|e| format!("caBundle: {e}"))?,
            ),
            _ => None,
        };
        let endpoint = match (
            client_config.get("url").and_then(Value::as_str),
            client_config.get("service").filter(|s| s.is_object()),
        ) {
            (Some(url), _) => {
                let url = reqwest::Url::parse(url).map_err(|e| format!("url {url:?}: {e}"))?;
                Endpoint::Url(url)
            }
            (None, Some(service)) => {
                let text = |field: &str| {
                    service
                        .get(field)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                let port = service.get("port").and_then(Value::as_u64).unwrap_or(443);
                Endpoint::Service {
                    target: Target::Service {
                        namespace: text("namespace"),
                        name: text("name"),
                        port: u16::try_from(port).map_err(|_| format!("port {port}"))?,
                    },
                    path: match text("path") {
                        path if path.is_empty() => "/".to_string(),
                        path => path,
                    },
                }
            }
            (None, None) => return Err("the clientConfig names neither a url nor a service".into()),
        };
        Ok(Arc::new(WebhookTransport {
            crd_name: crd_name.to_string(),
            metrics: self.metrics.clone(),
            endpoint,
            ca_pem,
            registry: self.registry.clone(),
            resolution: self.resolution,
            clients: Mutex::new(HashMap::new()),
        }))
    }
}

enum Endpoint {
    Url(reqwest::Url),
    Service { target: Target, path: String },
}

struct WebhookTransport {
    crd_name: String,
    metrics: Option<Arc<ConversionMetrics>>,
    endpoint: Endpoint,
    ca_pem: Option<Vec<u8>>,
    registry: Weak<Registry>,
    resolution: Resolution,
    /// Clients by the address they reach (one for a URL), so connections are reused.
    clients: Mutex<HashMap<Option<SocketAddr>, reqwest::Client>>,
}

impl WebhookTransport {
    fn client(&self, host: &str, address: Option<SocketAddr>) -> Result<reqwest::Client, String> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = clients.get(&address) {
            return Ok(client.clone());
        }
        let roots = match &self.ca_pem {
            Some(pem) => Some(root_store_from_pem(pem).map_err(|e| format!("caBundle: {e}"))?),
            None => None,
        };
        let client = https_client(&TlsOptions {
            roots,
            insecure: false,
            server_name: None,
            client_auth: None,
            https_only: true,
            follow_redirects: false,
            resolve: address
                .filter(|_| host.parse::<std::net::IpAddr>().is_err())
                .map(|a| vec![(host.to_string(), a)])
                .unwrap_or_default(),
        })?;
        // A Service's endpoints change; keep the map from growing without bound.
        if clients.len() >= 16 {
            clients.clear();
        }
        clients.insert(address, client.clone());
        Ok(client)
    }

    /// Where the review goes: the URL and the client that reaches it.
    async fn target(&self) -> Result<(String, reqwest::Client), String> {
        match &self.endpoint {
            Endpoint::Url(url) => {
                let host = url.host_str().unwrap_or("");
                Ok((url.to_string(), self.client(host, None)?))
            }
            Endpoint::Service { target, path } => {
                let registry = self
                    .registry
                    .upgrade()
                    .ok_or("the server is shutting down")?;
                let location = resolve(target, &CachedObjects(&registry), self.resolution)
                    .await
                    .map_err(|e| e.message)?;
                let address = *location
                    .addresses
                    .first()
                    .ok_or("no address to reach the webhook at")?;
                let url = format!(
                    "https://{}:{}{path}",
                    url_host(&location.server_name),
                    address.port()
                );
                let client = self.client(&location.server_name, Some(address))?;
                Ok((url, client))
            }
        }
    }
}

#[async_trait::async_trait]
impl ConversionTransport for WebhookTransport {
    async fn post(&self, review: Vec<u8>) -> Result<Value, String> {
        let (url, client) = self.target().await?;
        let post_failed = |why: String| format!("Post {url:?}: {why}");
        let mut response = client
            .post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .timeout(TIMEOUT)
            .body(review)
            .send()
            .await
            .map_err(|e| post_failed(error_chain(&e)))?;
        let status = response.status().as_u16();
        let body = read_body_capped(&mut response, MAX_ANSWER_BYTES)
            .await
            .map_err(post_failed)?;
        let parsed: Result<Value, _> = serde_json::from_slice(&body);
        if !(200..300).contains(&status) {
            // client-go's words for an error answer: the Status's message, if it sent one.
            let message = parsed
                .ok()
                .filter(|v| v.get("kind").and_then(Value::as_str) == Some("Status"))
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string));
            return Err(message.unwrap_or_else(|| {
                format!(
                    "the server responded with the status code {status} but did not return more information"
                )
            }));
        }
        parsed.map_err(|e| format!("decoding the ConversionReview: {e}"))
    }

    fn observe(&self, outcome: &ReviewOutcome<'_>) {
        if let Some(metrics) = &self.metrics {
            metrics.observe(&self.crd_name, outcome);
        }
    }
}
