//! The HTTPS transport of CRD conversion webhooks (`spec.conversion.webhook.clientConfig`):
//! a `ConversionReview` is POSTed to the `url`, or to the `service` resolved as an
//! APIService's is (a ready endpoint of kubegate's own Endpoints or EndpointSlices, the
//! ExternalName host, or cluster DNS), addressed as `<name>.<namespace>.svc` (URL host and TLS
//! name, verified against the `caBundle`, the system roots without one), as kube's webhook
//! client addresses it. kube presents no client
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

/// The User-Agent of kube-apiserver's webhook clients.
const USER_AGENT: &str = "kube-apiserver-admission";

/// `url` with client-go's cleaned path (no trailing `/`) and `timeout` query parameter.
fn with_timeout_parameter(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return url.to_string();
    };
    let path = parsed.path().trim_end_matches('/').to_string();
    parsed.set_path(&path);
    parsed
        .query_pairs_mut()
        .append_pair("timeout", &format!("{}s", TIMEOUT.as_secs()));
    parsed.into()
}

/// The webhook's answer as client-go's REST client takes it: a JSON body for a 2xx answer;
/// for any other, a `Status`'s message, or client-go's generic words for the code.
fn decode_answer(status: u16, content_type: &str, body: &[u8]) -> Result<Value, String> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = media.is_empty() || media == "application/json";
    if !(200..300).contains(&status) {
        if json {
            let message = serde_json::from_slice::<Value>(body)
                .ok()
                .filter(|v| v.get("kind").and_then(Value::as_str) == Some("Status"))
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string));
            if let Some(message) = message {
                return Err(message);
            }
        }
        let server_message = if media.starts_with("text/") {
            String::from_utf8_lossy(body).trim().to_string()
        } else {
            "unknown".to_string()
        };
        return Err(generic_server_response(status, &server_message));
    }
    if !json {
        return Err(format!("serializer for {media} doesn't exist"));
    }
    if body.is_empty() {
        return Err(format!(
            "0-length response with status code: {status} and content type: {content_type}"
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| format!("couldn't get version/kind; json parse error: {e}"))
}

/// apimachinery's `NewGenericServerResponse` message for a POST answered with `code`.
fn generic_server_response(code: u16, server_message: &str) -> String {
    match code {
        409 => "the server reported a conflict".into(),
        404 => "the server could not find the requested resource".into(),
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 | 415 => server_message.into(),
        406 if server_message.is_empty() || server_message == "unknown" => {
            "the server was unable to respond with a content type that the client supports".into()
        }
        406 => server_message.into(),
        405 => "the server does not allow this method on the requested resource".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        500.. => format!(
            "an error on the server ({server_message:?}) has prevented the request from succeeding"
        ),
        _ => format!(
            "the server responded with the status code {code} but did not return more information"
        ),
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
            host: None,
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
                // kube's webhook client names the Service (`<name>.<namespace>.svc`) in the
                // URL and TLS whatever the Service resolves to, an ExternalName host included
                // (as kube-aggregator does for an APIService's backend).
                let Target::Service {
                    namespace, name, ..
                } = target
                else {
                    return Err("a webhook service resolves to a Service".into());
                };
                let host = format!("{name}.{namespace}.svc");
                let url = format!("https://{host}:{}{path}", address.port());
                let client = self.client(&host, Some(address))?;
                Ok((url, client))
            }
        }
    }
}

#[async_trait::async_trait]
impl ConversionTransport for WebhookTransport {
    async fn post(&self, review: Vec<u8>) -> Result<Value, String> {
        let (url, client) = self.target().await?;
        // client-go's request URL: the path cleaned (no trailing `/`) and the client's timeout
        // as a query parameter, which is also how kube's errors quote it.
        let url = with_timeout_parameter(&url);
        let post_failed = |why: String| format!("Post {url:?}: {why}");
        let mut response = client
            .post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .header(http::header::USER_AGENT, USER_AGENT)
            .timeout(TIMEOUT)
            .body(review)
            .send()
            .await
            .map_err(|e| post_failed(error_chain(&e)))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = read_body_capped(&mut response, MAX_ANSWER_BYTES)
            .await
            .map_err(post_failed)?;
        decode_answer(status, &content_type, &body)
    }

    fn observe(&self, outcome: &ReviewOutcome<'_>) {
        if let Some(metrics) = &self.metrics {
            metrics.observe(&self.crd_name, outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_client_go_s_clean_path_and_timeout() {
        assert_eq!(
            with_timeout_parameter("https://h:8443/convert/"),
            "https://h:8443/convert?timeout=30s"
        );
        assert_eq!(
            with_timeout_parameter("https://h/"),
            "https://h/?timeout=30s"
        );
        assert_eq!(
            with_timeout_parameter("https://h"),
            "https://h/?timeout=30s"
        );
        assert_eq!(
            with_timeout_parameter("https://h/a/b"),
            "https://h/a/b?timeout=30s"
        );
    }

    #[test]
    fn answers_are_decoded_as_client_go_decodes_them() {
        let ok = decode_answer(200, "application/json", br#"{"kind":"ConversionReview"}"#);
        assert_eq!(ok.unwrap()["kind"], "ConversionReview");
        assert_eq!(
            decode_answer(200, "text/plain; charset=utf-8", b"{}").unwrap_err(),
            "serializer for text/plain doesn't exist"
        );
        assert_eq!(
            decode_answer(200, "application/json", b"").unwrap_err(),
            "0-length response with status code: 200 and content type: application/json"
        );
        assert!(decode_answer(200, "application/json", b"{x")
            .unwrap_err()
            .starts_with("couldn't get version/kind; json parse error: "));
        assert_eq!(
            decode_answer(500, "text/plain", b"boom\n").unwrap_err(),
            "an error on the server (\"boom\") has prevented the request from succeeding"
        );
        assert_eq!(
            decode_answer(403, "text/plain", b"go away").unwrap_err(),
            "go away"
        );
        assert_eq!(
            decode_answer(404, "application/json", b"{}").unwrap_err(),
            "the server could not find the requested resource"
        );
        assert_eq!(
            decode_answer(
                500,
                "application/json",
                br#"{"kind":"Status","message":"no"}"#
            )
            .unwrap_err(),
            "no"
        );
        assert_eq!(
            decode_answer(302, "", b"").unwrap_err(),
            "the server responded with the status code 302 but did not return more information"
        );
    }
}
