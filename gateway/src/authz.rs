//! Builds the authorizer chain from the configuration, as kube-apiserver's
//! `authorizer.Config.New`: the `system:masters` privileged-group authorizer first, then one
//! authorizer per configured mode in the configured order, asked as a union (the first allow
//! or deny decides).

use std::sync::Arc;

use kubegate_config::Config;
use kubegate_policy::authz::abac::AbacAuthorizer;
use kubegate_policy::authz::always::{AlwaysAllow, AlwaysDeny};
use kubegate_policy::authz::union::{PrivilegedGroups, UnionAuthorizer};
use kubegate_policy::authz::webhook::WebhookAuthorizer;
use kubegate_policy::Authorizer;

/// The chain for `config.authorization`. `rbac` is the RBAC authorizer (it needs the store,
/// so the caller builds it); asking for mode `RBAC` without one is an error. Files (ABAC
/// policy, webhook kubeconfig) are read here, so their errors stop startup.
pub fn build(
    config: &Config,
    rbac: Option<Arc<dyn Authorizer>>,
) -> Result<Arc<dyn Authorizer>, String> {
    let authorization = &config.authorization;
    let mut chain: Vec<Arc<dyn Authorizer>> = vec![Arc::new(PrivilegedGroups::system_masters())];
    for mode in &authorization.modes {
        let authorizer: Arc<dyn Authorizer> = match mode.as_str() {
            "AlwaysAllow" => Arc::new(AlwaysAllow),
            "AlwaysDeny" => Arc::new(AlwaysDeny),
            "ABAC" => {
                let path = authorization.policy_file.as_deref().ok_or_else(|| {
                    "authorization mode ABAC needs a policy file (--authorization-policy-file)"
                        .to_string()
                })?;
                Arc::new(AbacAuthorizer::from_file(path)?)
            }
            "Webhook" => {
                let webhook = &authorization.webhook;
                let path = webhook.config_file.as_deref().ok_or_else(|| {
                    "authorization mode Webhook needs a kubeconfig file (--authorization-webhook-config-file)"
                        .to_string()
                })?;
                let authorizer = WebhookAuthorizer::from_kubeconfig(path)?
                    .with_version(&webhook.version)?
                    .with_selectors(
                        kubegate_backends::core::authorization::webhook_selector_attributes,
                    )
                    .with_cache_ttls(webhook.cache_authorized_ttl, webhook.cache_unauthorized_ttl);
                tracing::info!(server = %authorizer.server(), version = %webhook.version, "authorization webhook configured");
                Arc::new(authorizer)
            }
            "RBAC" => rbac.clone().ok_or_else(|| {
                "authorization mode RBAC: no RBAC authorizer available".to_string()
            })?,
            other => return Err(format!("unsupported authorization mode {other:?}")),
        };
        chain.push(authorizer);
    }
    Ok(Arc::new(UnionAuthorizer::new(chain)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kubegate_policy::authz::{Attributes, Decision, RulesInfo};
    use kubegate_policy::{RequestInfo, UserInfo};

    /// Allows everything and says so, to show where RBAC sits in the chain.
    struct FakeRbac;

    #[async_trait::async_trait]
    impl Authorizer for FakeRbac {
        fn name(&self) -> &'static str {
            "RBAC"
        }
        async fn authorize(&self, _attributes: &Attributes<'_>) -> Decision {
            Decision::Allow("fake RBAC".into())
        }
        fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
            RulesInfo::default()
        }
    }

    /// The error of a build expected to fail (authorizers are not `Debug`).
    fn error(result: Result<Arc<dyn Authorizer>, String>) -> String {
        match result {
            Ok(chain) => panic!("expected an error, got a chain with {}", chain.name()),
            Err(e) => e,
        }
    }

    fn config(yaml: &str) -> Config {
        let config = Config::from_yaml(yaml).unwrap();
        config.validate().unwrap();
        config
    }

    async fn decide(chain: &Arc<dyn Authorizer>, user: &str, groups: &[&str]) -> Decision {
        let user = UserInfo::new(user, groups.iter().map(|g| g.to_string()).collect());
        let request = RequestInfo {
            is_resource_request: true,
            verb: "create".into(),
            api_prefix: "api".into(),
            api_version: "v1".into(),
            namespace: "team-a".into(),
            resource: "configmaps".into(),
            ..RequestInfo::default()
        };
        chain
            .authorize(&Attributes {
                user: &user,
                request: &request,
            })
            .await
    }

    #[tokio::test]
    async fn system_masters_first_then_the_modes_in_order() {
        let chain = build(&config("authorization:\n  modes: [AlwaysDeny]\n"), None).unwrap();
        assert!(decide(&chain, "root", &["system:masters"])
            .await
            .is_allowed());
        assert_eq!(
            decide(&chain, "dev", &["dev"]).await,
            Decision::NoOpinion("Everything is forbidden.".into())
        );
        let chain = build(
            &config("authorization:\n  modes: [AlwaysDeny, RBAC]\n"),
            Some(Arc::new(FakeRbac)),
        )
        .unwrap();
        assert_eq!(
            decide(&chain, "dev", &[]).await,
            Decision::Allow("fake RBAC".into())
        );
        let chain = build(&config("authorization:\n  modes: [AlwaysAllow]\n"), None).unwrap();
        assert!(decide(&chain, "dev", &[]).await.is_allowed());
        // Union of the rules: AlwaysAllow lists everything, complete.
        assert!(
            !chain
                .rules_for(&UserInfo::new("dev", vec![]), "")
                .incomplete
        );
    }

    #[tokio::test]
    async fn abac_and_webhook_modes_read_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("abac.jsonl");
        std::fs::write(
            &policy,
            "{\"apiVersion\": \"abac.authorization.kubernetes.io/v1beta1\", \"kind\": \"Policy\", \"spec\": {\"user\": \"alice\", \"namespace\": \"team-a\", \"resource\": \"*\", \"apiGroup\": \"*\"}}\n",
        )
        .unwrap();
        let kubeconfig = dir.path().join("authz.kubeconfig");
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: https://127.0.0.1:1/authorize\n    insecure-skip-tls-verify: true\nusers:\n- name: gate\n  user: {}\ncontexts:\n- name: webhook\n  context: {cluster: hook, user: gate}\ncurrent-context: webhook\n",
        )
        .unwrap();
        let yaml = format!(
            "authorization:\n  modes: [ABAC, Webhook]\n  policyFile: {}\n  webhook:\n    configFile: {}\n    version: v1beta1\n",
            policy.display(),
            kubeconfig.display()
        );
        let chain = build(&config(&yaml), None).unwrap();
        assert!(decide(&chain, "alice", &[]).await.is_allowed());
        // bob: ABAC has no opinion, the webhook is unreachable: never an allow, but a
        // failure (a 500) that keeps ABAC's reason.
        let decision = decide(&chain, "bob", &[]).await;
        assert_eq!(decision.reason(), "No policy matched.");
        assert!(
            decision.error().is_some_and(|e| e.contains("127.0.0.1:1")),
            "{decision:?}"
        );
        // The webhook cannot list rules, so the union's list is incomplete.
        let rules = chain.rules_for(&UserInfo::new("alice", vec![]), "team-a");
        assert!(rules.incomplete);
        assert_eq!(rules.resource_rules.len(), 1);

        std::fs::write(&policy, "{not json\n").unwrap();
        let err = error(build(&config(&yaml), None));
        assert!(err.contains("line 1"), "{err}");
        std::fs::remove_file(&kubeconfig).unwrap();
        std::fs::write(&policy, "").unwrap();
        let err = error(build(&config(&yaml), None));
        assert!(err.contains("authz.kubeconfig"), "{err}");
    }

    #[test]
    fn rbac_needs_an_authorizer() {
        let err = error(build(&Config::default(), None));
        assert!(err.contains("RBAC"), "{err}");
        assert!(build(&Config::default(), Some(Arc::new(FakeRbac))).is_ok());
        // Unvalidated configurations still cannot name unknown modes.
        let mut bogus = Config::default();
        bogus.authorization.modes = vec!["Node".into()];
        assert!(error(build(&bogus, None)).contains("Node"));
    }
}
